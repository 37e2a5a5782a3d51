"""The site's Jinja2 environment: templates shipped in the package (``templates/``), autoescape on for every
template, undefined names an error (a misspelt field fails the build instead of printing nothing).

Why Jinja2: with autoescape on, a value placed in a page is escaped unless the code marks it safe, and only two
things are (``markup.markdown``'s output, and the ``&ndash;`` of an absent value); the f-strings and hand-written
escape this replaces escaped only where each call remembered to.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from .markup import CSP, num, value


@cache
def environment() -> Environment:
    env = Environment(loader=PackageLoader("cachecraft_lib.arena.site", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=False, keep_trailing_newline=True)
    env.filters.update(num=num, v=value)
    env.globals["csp"] = CSP
    return env


def render(template: str, **context: Any) -> str:
    """``template`` (a file under ``templates/``) rendered with ``context``."""
    return environment().get_template(template).render(**context)
