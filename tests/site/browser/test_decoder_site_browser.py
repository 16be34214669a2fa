"""A decoder's site (a tiny GPT-2 with its causal-LM ablation, issue 31) through the same browser checks as the
default site's (tests/site/browser/test_every_page_browser.py): every page at a laptop and a phone size from
file:// with no sideways scroll, no error, no failed or remote request and a strict policy; every link's target;
one link of each kind clicked; view links from other pages and from charts restoring their state. The checks are
imported, so they are the same code; only the site differs. (The checks of every control name layers and heads
of the default model, 6 x 12, and stay with it: the controls are the same script on any site.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.site.browser.test_every_page_browser import (  # noqa: F401 - fixtures and tests collected here
    pages,
    tabs,
    test_every_link_target_exists,
    test_every_page_fits_and_loads_cleanly,
    test_one_link_of_each_kind_is_clicked_on_every_kind_of_page,
    test_view_links_from_other_pages_and_charts_restore_their_state,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(task_sites) -> Path:
    return task_sites["causal_lm"]


def test_the_decoders_pages_are_the_ones_checked(site, pages):  # noqa: F811 - the imported fixture
    """The imported checks ran on a decoder's site: its own patterns page, no statistics page."""
    assert "patterns.html" in pages and "statistics.html" not in pages and "ablation.html" in pages
    assert "uniform causal head" in (site / "patterns.html").read_text(encoding="utf-8")
