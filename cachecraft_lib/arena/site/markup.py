"""HTML pieces that are safe by construction: every value is escaped before it is placed, and the Markdown
subset only wraps already-escaped text in a few fixed tags (headings, paragraphs, lists, code, bold).

No links, images or raw HTML pass from a submission's text: ``<script>`` and ``onerror=`` come out as text.
The pages carry a Content-Security-Policy that forbids every script as a second line of defence.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
_INLINE = [(re.compile(r"`([^`]+)`"), r"<code>\1</code>"), (re.compile(r"\*\*([^*]+)\*\*"), r"<strong>\1</strong>")]


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


def _inline(text: str) -> str:
    out = esc(text)
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    return out


def markdown(text: str) -> str:
    """A small safe Markdown subset as HTML: ``#``-headings (shifted down two levels), paragraphs, ``-`` lists,
    fenced code, inline code and bold. Everything else stays as escaped text."""
    out, para, items, fence = [], [], [], None

    def flush() -> None:
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in text.splitlines():
        if fence is not None:
            if line.strip().startswith("```"):
                out.append(f"<pre><code>{esc(chr(10).join(fence))}</code></pre>")
                fence = None
            else:
                fence.append(line)
            continue
        stripped = line.strip()
        heading = re.match(r"^(#{1,4})\s+(.*)$", stripped)
        if stripped.startswith("```"):
            flush()
            fence = []
        elif heading:
            flush()
            level = min(6, len(heading.group(1)) + 2)
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif re.match(r"^[-*]\s+", stripped):
            if para:
                flush()
            items.append(re.sub(r"^[-*]\s+", "", stripped))
        elif not stripped:
            flush()
        else:
            if items:
                flush()
            para.append(stripped)
    if fence is not None:
        out.append(f"<pre><code>{esc(chr(10).join(fence))}</code></pre>")
    flush()
    return "\n".join(out)


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
