"""The site's Markdown (a submission's DESCRIPTION.md): each feature markdown-it is allowed, and what is refused.

One test per rule in ``markup.ALLOWED``; a rule switched on without a test here fails the last test. The XSS
checks of whole pages (and in a browser) are in tests/test_site.py.
"""

from __future__ import annotations

import pytest

from cachecraft_lib.arena.site.markup import ALLOWED, markdown

TESTED = {"heading", "list", "fence", "backticks", "emphasis", "link"}


def test_heading_sits_two_levels_under_the_page_and_stays_escaped():
    assert markdown("# Idea <b>x</b>") == "<h3>Idea &lt;b&gt;x&lt;/b&gt;</h3>\n"
    assert markdown("## Two\n##### Five") == "<h4>Two</h4>\n<h6>Five</h6>\n"


def test_list_bullets_and_numbers():
    assert markdown("- a\n* b") == "<ul>\n<li>a</li>\n</ul>\n<ul>\n<li>b</li>\n</ul>\n"
    assert markdown("1. one\n2. <two>") == "<ol>\n<li>one</li>\n<li>&lt;two&gt;</li>\n</ol>\n"


def test_fence_is_escaped_text_and_drops_its_info_string():
    assert markdown('```py" onclick="x\n<b>&\n```') == "<pre><code>&lt;b&gt;&amp;</code></pre>\n"


def test_backticks_inline_code_is_escaped():
    assert markdown("keep `a<b>` only") == "<p>keep <code>a&lt;b&gt;</code> only</p>\n"


def test_emphasis_bold_and_italic():
    assert markdown("**bold** and *it*") == "<p><strong>bold</strong> and <em>it</em></p>\n"


def test_link_to_http_or_https_is_kept_with_rel_nofollow():
    html = markdown("[paper](https://arxiv.org/abs/1) and [site](http://example.org/a?b=1&c=2)")
    assert '<a href="https://arxiv.org/abs/1" rel="nofollow noopener noreferrer">paper</a>' in html
    assert '<a href="http://example.org/a?b=1&amp;c=2" rel="nofollow noopener noreferrer">site</a>' in html


@pytest.mark.parametrize("target", ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)",
                                    "&#106;avascript:alert(1)", "java%0ascript:alert(1)",
                                    "data:text/html;base64,PHNjcmlwdD4=", "vbscript:x", "file:///etc/passwd",
                                    "/relative/path", "//host.example/x", "https:no-host"])
def test_a_link_that_is_not_absolute_http_stays_text(target):
    html = markdown(f"[click]({target})")
    assert "<a " not in html and "href" not in html and html.startswith("<p>[click](")


def test_what_is_not_allowed_stays_text():
    html = markdown('<script>x()</script>\n\n![i](https://x.org/i.png)\n\n> quote\n\n| a |\n|---|\n\n---\n\n<https://a.org>')
    for tag in ("<script", "<img", "<blockquote", "<table", "<hr", "<a href=\"https://a.org\""):
        assert tag not in html
    assert "&lt;script&gt;" in html and "&gt; quote" in html


def test_every_allowed_rule_has_its_test_here():
    assert set(ALLOWED) == TESTED, f"markdown rules allowed without a test here: {set(ALLOWED) - TESTED}"
