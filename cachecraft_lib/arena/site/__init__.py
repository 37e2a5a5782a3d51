"""The arena's public leaderboard as a static web site, generated from the ledger (``cachecraft arena site``).

``status`` checks the ledger through its own API, ``data`` gathers boards, standings (with rank ranges) and the
submissions' texts, ``markup`` escapes everything and draws the interval bars, ``pages`` builds the HTML and
``render.write_site`` writes the folder.
"""

from .render import write_site

__all__ = ["write_site"]
