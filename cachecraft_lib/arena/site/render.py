"""Write the site: verify the ledger, gather what it shows, write the pages and the stylesheet into a folder.

The folder is static and self-contained (relative links, one shipped stylesheet, no scripts, nothing fetched at
view time): upload it to any static host, or open ``index.html`` from disk.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from .data import gather, slug
from .pages import board_page, entry_page, index_page
from .status import LedgerStatus, check_ledger

STYLE = Path(__file__).with_name("style.css")
SHIPPED = Path(__file__).parents[1] / "examples"


def write_site(ledger: str | Path, out: str | Path, folders: Iterable[str | Path] = (),
               profile: str | None = None, public_key: str | None = None,
               head: str | Path | None = None) -> LedgerStatus:
    """The site of the ledger at ``ledger`` in ``out``; ``folders``: submission folders whose DESCRIPTION.md and
    dev report to show (matched by code hash; the shipped examples are always looked at); ``public_key`` (key or
    fingerprint) / ``head``: the pin the pages say "verified" against. Returns the check; ``LedgerUntrusted``
    (nothing written) for a ledger without signatures."""
    check = check_ledger(ledger, public_key, head)
    folders = [*folders, *sorted(p for p in SHIPPED.iterdir() if p.is_dir())]
    data = gather(check.events, profile, folders, root=Path(ledger).parent)
    out = Path(out)
    for sub in ("boards", "entries"):
        if (out / sub).exists():
            shutil.rmtree(out / sub)  # no page of an entry the ledger no longer shows
        (out / sub).mkdir(parents=True)
    shutil.copyfile(STYLE, out / "style.css")
    published = publish_head(Path(ledger), out) if check.clean else None
    _write(out / "index.html", index_page(check, data, published))
    for name, standing in data.standings.items():
        _write(out / "boards" / f"{name}.html", board_page(check, data, name))
        for _, row in standing.iterrows():
            _write(out / "entries" / slug(row.board, row["name"]), entry_page(check, data, row))
    return check


def publish_head(ledger: Path, out: Path) -> str | None:
    """The signed head beside the site, where the ledger version signs (``Ledger.publish_head``): anyone can then
    check a copy of the ledger against it, cut lines included. None for a chain-only ledger or without the key."""
    from ..scoring.ledger import Ledger

    publish = getattr(Ledger(ledger), "publish_head", None)
    if not callable(publish):
        return None
    try:
        return Path(publish(out)).name
    except Exception:  # no organiser key here: the site still shows the chain's status
        return None


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
