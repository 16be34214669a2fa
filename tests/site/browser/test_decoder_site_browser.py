"""A decoder's site (a tiny GPT-2 with its causal-LM ablation, issue 31) through the same browser checks as the
default site's (tests/site/browser/test_every_page_browser.py): every page at a laptop and a phone size from
file:// with no sideways scroll, no error, no failed or remote request and a strict policy (the example pages' views
in each state inside their boxes, the query/key page's softmax in sight); every link's target. The checks are
imported, so they are the same code; only the site differs. (The clicking checks, of links and of every control, run
on the default site, whose 6 x 12 heads the control checks name: the same scripts draw both sites.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.site.browser.test_every_page_browser import (  # noqa: F401 - fixtures and tests collected here
    pages,
    tabs,
    test_every_link_target_exists,
    test_every_page_fits_and_loads_cleanly,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(task_sites) -> Path:
    return task_sites["causal_lm"]


def test_the_decoders_pages_are_the_ones_checked(site, pages):  # noqa: F811 - the imported fixture
    """The imported checks ran on a decoder's site: its own patterns page, no statistics page."""
    assert "patterns.html" in pages and "statistics.html" not in pages and "ablation.html" in pages
    assert "uniform causal head" in (site / "patterns.html").read_text(encoding="utf-8")
