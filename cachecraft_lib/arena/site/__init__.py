"""The arena's public leaderboard as a static web site, generated from the ledger (``cachecraft arena site``).

``status`` checks the ledger through its own API, ``data`` gathers boards, standings (the leaderboard's rank
ranges) and the submissions' texts, ``pages`` gathers each page's values and renders the Jinja2 templates under
``templates/`` (``templating``: autoescape on), ``markup`` makes the only HTML the templates cannot (a submission's
Markdown, the interval bar's geometry) and ``render.write_site`` writes the folder.
"""

from .render import write_site

__all__ = ["write_site"]
