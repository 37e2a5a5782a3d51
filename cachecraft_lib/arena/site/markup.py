"""The few HTML pieces the templates cannot make from plain values: a submission's Markdown through markdown-it-py
(a CommonMark parser made for untrusted text) with raw HTML off and only a few features on (``ALLOWED``:
headings, lists, code, emphasis, http(s) links), the interval bar's geometry, and the cell formats (``num``,
``value``: None and NaN as an en dash). Everything else is escaped by Jinja2's autoescape (``templating``).

No images, raw HTML or non-http(s) links pass from a submission's text: ``<script>``, ``onerror=`` and
``[x](javascript:...)`` come out as text. The pages carry a Content-Security-Policy that forbids every script
as a second line of defence.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markupsafe import Markup

CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
# markdown-it rules switched on over the `zero` preset (paragraphs and text); everything else stays text.
ALLOWED = ["heading", "list", "fence", "backticks", "emphasis", "link"]


DASH = Markup("&ndash;")  # an absent value (None, NaN)


def value(item: Any) -> Any:
    """Any value for a cell: None and NaN as an en dash, the rest as it is (autoescaped where placed)."""
    if item is None or (isinstance(item, float) and math.isnan(item)):
        return DASH
    return item


def num(item: Any, digits: int = 3) -> Any:
    """A number rounded for a table cell; None/NaN a dash; anything else as it is (autoescaped)."""
    if isinstance(item, bool) or item is None:
        return value(item)
    try:
        number = float(item)
    except (TypeError, ValueError):
        return item
    return DASH if math.isnan(number) else f"{number:.{digits}f}"


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


def markdown(text: str) -> Markup:
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
    return Markup(_MD.renderer.render(tokens, _MD.options, {}))  # safe: markdown-it, raw HTML off


def interval_bar(point: Any, lo: Any, hi: Any, scale: tuple[float, float], width: int = 180) -> dict | None:
    """An interval bar's geometry (the template ``macros.bar`` draws it as inline SVG): the 95% interval as a bar,
    the point as a tick, on the board's common scale; None without a point."""
    values = [_float(v) for v in (point, lo, hi)]
    if values[0] is None:
        return None
    point_v = values[0]
    lo_v = values[1] if values[1] is not None else point_v
    hi_v = values[2] if values[2] is not None else point_v
    left, right = scale
    span = (right - left) or 1.0

    def x(v: float) -> float:
        return round(4 + (width - 8) * (min(max(v, left), right) - left) / span, 1)

    return {"width": width, "label": f"{point_v:.3f} [{lo_v:.3f}, {hi_v:.3f}]", "lo": x(lo_v),
            "span": round(max(1.0, x(hi_v) - x(lo_v)), 1), "point": round(x(point_v) - 1, 1)}


def _float(item: Any) -> float | None:
    try:
        number = float(item)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
