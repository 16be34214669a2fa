"""An encoder-decoder's site (a tiny BART with its sequence-to-sequence ablation, issue 31) through the same
browser checks as the default site's (tests/site/browser/test_every_page_browser.py): every page at a laptop and
a phone size from file:// with no sideways scroll, no error, no failed or remote request and a strict policy;
every link's target; axe-core's serious and critical rules (tests/site/browser/test_accessibility_browser.py).
The checks are imported, so they are the same code; only the site differs. Then what only this site has: the
Encoder | Decoder | Cross switch on an example page, and the links of the decoder patterns and ablation pages
opening the group they name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import VIEWPORTS, wait_until
from tests.site.browser.test_accessibility_browser import serious_violations
from tests.site.browser.test_every_page_browser import (  # noqa: F401 - fixtures and tests collected here
    pages,
    tabs,
    test_every_link_target_exists,
    test_every_page_fits_and_loads_cleanly,
)

pytestmark = pytest.mark.slow

READY = "() => [...document.querySelectorAll('.rgv[data-rgv]')].every(r => r.hasAttribute('data-rgv-state'))"


@pytest.fixture(scope="module")
def site(seq2seq_site) -> Path:
    return seq2seq_site


def test_the_encoder_decoders_pages_are_the_ones_checked(site, pages):  # noqa: F811 - the imported fixture
    """The imported checks ran on an encoder-decoder's site: its encoder's pages and its decoder's."""
    assert {"statistics.html", "patterns.html", "decoder-patterns.html", "cross-attention.html",
            "ablation.html"} <= set(pages)
    assert "decoder's self-attention" in (site / "decoder-patterns.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_no_serious_accessibility_violation(new_tab, site, viewport):
    found = serious_violations(new_tab, site, viewport)
    assert not found, "\n".join(found)


def test_a_decoder_patterns_link_opens_the_decoder_group_at_its_head(new_tab, site):
    """A view link of the decoder patterns page lands on the example page with the Decoder group pressed and
    the head's layer chosen; the switch then shows the cross-attention and keeps it in the address."""
    text = (site / "decoder-patterns.html").read_text(encoding="utf-8")
    href = re.search(r'href="(example-\d\.html#view=head&amp;attn=decoder&amp;layer=(\d)[^"]*)"', text)
    assert href, "no link to the decoder group on the decoder patterns page"
    page = new_tab("desktop").page
    name, _, fragment = href.group(1).replace("&amp;", "&").partition("#")
    page.goto(f"{(site / name).as_uri()}#{fragment}")
    wait_until(page, READY, timeout=45_000)
    assert page.get_by_role("button", name="Decoder").get_attribute("aria-pressed") == "true"
    assert page.locator(".rgv select").first.input_value() == href.group(2)
    page.get_by_role("button", name="Cross").click()
    wait_until(page, "() => location.hash.includes('attn=cross')", timeout=15_000)
    assert page.get_by_role("button", name="Cross").get_attribute("aria-pressed") == "true"
