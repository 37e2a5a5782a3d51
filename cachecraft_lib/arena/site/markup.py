"""HTML pieces that are safe by construction: every value is escaped before it is placed, and a submission's
Markdown goes through markdown-it-py (a CommonMark parser made for untrusted text) with raw HTML off and only a
few features on (``ALLOWED``: headings, lists, code, emphasis, http(s) links).

No images, raw HTML or non-http(s) links pass from a submission's text: ``<script>``, ``onerror=`` and
``[x](javascript:...)`` come out as text. The pages carry a Content-Security-Policy that forbids every script
as a second line of defence.
"""

from __future__ import annotations

import html
import math
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token

CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
# markdown-it rules switched on over the `zero` preset (paragraphs and text); everything else stays text.
ALLOWED = ["heading", "list", "fence", "backticks", "emphasis", "link"]


def esc(value: Any) -> str:
    """Any value as escaped text (``None`` and NaN as an en dash)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "&ndash;"
    return html.escape(str(value), quote=True)


def num(value: Any, digits: int = 3) -> str:
    """A number rounded for a table cell; anything else escaped."""
    if isinstance(value, bool) or value is None:
        return esc(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return esc(value)
    return "&ndash;" if math.isnan(number) else f"{number:.{digits}f}"


def _fence(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    """A fenced block as escaped text in ``<pre><code>`` (its info string, e.g. a language, is dropped)."""
    return f"<pre><code>{escapeHtml(tokens[idx].content.removesuffix(chr(10)))}</code></pre>\n"


def _http_link(url: str) -> bool:
    """Only absolute http(s) links: ``javascript:``, ``data:``, relative and every other scheme stay text."""
    parts = urlsplit(url.strip())
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc)


def _parser() -> MarkdownIt:
    md = MarkdownIt("zero", {"html": False, "linkify": False, "typographer": False}).enable(ALLOWED)
    md.validateLink = _http_link
    md.add_render_rule("fence", _fence)
    return md


_MD = _parser()


def markdown(text: str) -> str:
    """A submission's Markdown as HTML with markdown-it-py's ``zero`` preset and only the ``ALLOWED`` rules:
    headings (shifted down two levels under the page's own), paragraphs, lists, fenced and inline code, emphasis,
    and links to http(s) addresses (``rel="nofollow noopener noreferrer"``). Raw HTML is off, so tags stay text."""
    tokens = _MD.parse(text)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + 2)}"
        for child in token.children or ():
            if child.type == "link_open":
                child.attrSet("rel", "nofollow noopener noreferrer")
    return _MD.renderer.render(tokens, _MD.options, {})


def interval_bar(point: Any, lo: Any, hi: Any, scale: tuple[float, float], width: int = 180) -> str:
    """An inline SVG: the 95% interval as a bar, the point as a tick, on the board's common scale."""
    values = [_float(v) for v in (point, lo, hi)]
    if values[0] is None:
        return ""
    point_v, lo_v, hi_v = values[0], values[1] if values[1] is not None else values[0], values[2] \
        if values[2] is not None else values[0]
    left, right = scale
    span = (right - left) or 1.0

    def x(v: float) -> float:
        return round(4 + (width - 8) * (min(max(v, left), right) - left) / span, 1)

    label = esc(f"{point_v:.3f} [{lo_v:.3f}, {hi_v:.3f}]")
    return (f'<svg class="bar" width="{width}" height="14" viewBox="0 0 {width} 14" role="img" '
            f'aria-label="{label}"><title>{label}</title>'
            f'<line x1="4" y1="7" x2="{width - 4}" y2="7" class="axis"/>'
            f'<rect x="{x(lo_v)}" y="3" width="{max(1.0, x(hi_v) - x(lo_v))}" height="8" class="ci"/>'
            f'<rect x="{x(point_v) - 1}" y="1" width="2" height="12" class="pt"/></svg>')


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def table(headers: list[str], rows: list[list[str]], cls: str = "", row_classes: list[str] | None = None) -> str:
    """An HTML table; ``headers`` are escaped here, cells must already be HTML (escaped by their makers)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    classes = row_classes or [""] * len(rows)
    body = "".join(f'<tr class="{esc(c)}">' + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
                   for row, c in zip(rows, classes, strict=True))
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def page(title: str, body: str, banner: str = "", depth: int = 0) -> str:
    """A whole page: no script, one stylesheet shipped beside it, the CSP above."""
    up = "../" * depth
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><link rel=\"stylesheet\" href=\"{up}style.css\"></head>"
            f"<body>{banner}<header><a href=\"{up}index.html\">CacheCraft arena</a></header>"
            f"<main>{body}</main><footer>Generated from the ledger by <code>cachecraft arena site</code>; "
            "static, no scripts, no network.</footer></body></html>\n")
