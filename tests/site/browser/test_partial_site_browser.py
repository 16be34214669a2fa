"""The site a build writes before its ablation (issue 32), through the same browser checks as a finished site
(tests/site/browser/test_every_page_browser.py): every page at a laptop and a phone size from file:// with no
sideways scroll, no error, no failed or remote request and a strict policy; every link's target; axe-core's
serious and critical rules. Then what only a partial site has: the note that it is still being built, on the
home and ablation pages, in the first screen at both sizes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import SMALL_ABLATION, TWO_EXAMPLES, VIEWPORTS, tiny_config, write_config
from tests.site.browser.test_accessibility_browser import serious_violations
from tests.site.browser.test_every_page_browser import (  # noqa: F401 - fixtures and tests collected here
    pages,
    tabs,
    test_every_link_target_exists,
    test_every_page_fits_and_loads_cleanly,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory, tiny_model) -> Path:
    """The first site of a tiny build, copied as it was when it was swapped in (before any experiment)."""
    from reportgen.config import load_config
    from reportgen.pipeline import build

    root = tmp_path_factory.mktemp("partial-site")
    write_config(root, tiny_config(tiny_model, title="Still running", examples=TWO_EXAMPLES, ablation=SMALL_ABLATION))
    kept = root / "first-site"

    def keep_first(path: Path) -> None:
        if not kept.exists():
            shutil.copytree(path, kept)

    build(load_config(root / "reportgen.yaml"), written=keep_first)
    assert json.loads((kept / "report.json").read_text(encoding="utf-8"))["progress"] is not None
    return kept


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_no_serious_accessibility_violation(browser, site, viewport):
    found = serious_violations(browser, site, viewport)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("viewport", VIEWPORTS)
@pytest.mark.parametrize("name", ["index.html", "ablation.html"])
def test_the_still_being_built_note_is_in_the_first_screen(browser, site, viewport, name):
    width, height = VIEWPORTS[viewport]
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.goto((site / name).as_uri())
        note = page.locator(".rg-building")
        assert note.get_attribute("role") == "status"
        box = note.bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, box
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
        text = note.inner_text()
        assert text.startswith("Still being built.") and "Not run yet:" in text
        font = page.evaluate("e => parseFloat(getComputedStyle(e).fontSize)", note.element_handle())
        assert font >= 12  # readable on a phone
    finally:
        context.close()
