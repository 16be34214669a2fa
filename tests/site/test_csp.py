"""The pages' Content-Security-Policy names each inline script by its hash (reportgen/site/csp.py)."""

import pytest

from reportgen.site.csp import PLACEHOLDER, inline_script_hashes, pin_inline_scripts

# CSP Level 2's own example: the hash of the script text `alert('Hello, world.');`.
HELLO = "alert('Hello, world.');"
HELLO_HASH = "'sha256-qznLcsROx4GACP2dm0UCKCzCG+HiZ1guq6ZZDob/Tng='"
POLICY = f"""<meta http-equiv="Content-Security-Policy" content="script-src 'self' {PLACEHOLDER}; style-src 'self'">"""


def page(body: str) -> str:
    return f"<!doctype html><html><head>{POLICY}</head><body>{body}</body></html>"


def test_the_hash_is_the_one_the_csp_specification_gives():
    assert inline_script_hashes(page(f"<script>{HELLO}</script>")) == [HELLO_HASH]


def test_only_scripts_a_browser_runs_are_hashed_each_once():
    body = (f"<script>{HELLO}</script><SCRIPT type='text/javascript'>{HELLO}</SCRIPT>"
            '<script type="module">let a = 1;</script>'
            '<script type="application/json" class="rgv-data">{"a": 1}</script>'
            '<script src="assets/x.js"></script><script data-x=1 src=x.js>ignored();</script>')
    hashes = inline_script_hashes(page(body))
    assert hashes[0] == HELLO_HASH and len(hashes) == 2  # hello twice counts once; the module script is second


def test_the_placeholder_becomes_the_hashes_in_the_policy_only():
    user_text = f"<p>{PLACEHOLDER} typed by a user</p>"
    pinned = pin_inline_scripts(page(f"{user_text}<script>{HELLO}</script>"))
    assert f"script-src 'self' {HELLO_HASH}; style-src 'self'" in pinned
    assert user_text in pinned and pinned.count(PLACEHOLDER) == 1


def test_a_page_without_inline_scripts_allows_none():
    pinned = pin_inline_scripts(page("<p>no scripts</p>"))
    assert "script-src 'self'; style-src 'self'" in pinned and "sha256" not in pinned


def test_a_page_without_the_policy_is_refused_rather_than_left_open():
    with pytest.raises(ValueError, match="Content-Security-Policy"):
        pin_inline_scripts("<html><body><script>x()</script></body></html>")


def test_the_template_allows_nothing_inline_and_no_eval():
    from tests.helpers import ROOT

    template = (ROOT / "site_src" / "overrides" / "main.html").read_text(encoding="utf-8")
    policy = template.split('http-equiv="Content-Security-Policy" content="')[1].split('"')[0]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert PLACEHOLDER in directives["script-src"]
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy and "*" not in policy
    assert directives["object-src"] == "'none'"
