"""The first site a build writes as its ablation runs (issue 32), through the same browser checks as a finished site
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
    """The first site of a tiny build, copied as it was when it was swapped in (as its first experiment started)."""
    from reportgen.config import load_config
    from reportgen.pipeline import build

    root = tmp_path_factory.mktemp("partial-site")
    write_config(root, tiny_config(tiny_model, title="Still running", examples=TWO_EXAMPLES, ablation=SMALL_ABLATION))
    kept = root / "first-site"

    def keep_first(path: Path) -> None:
        if not kept.exists():
            shutil.copytree(path, kept)

    from reportgen.ablation import watch

    with pytest.MonkeyPatch.context() as patch:  # a partial site even for a tiny model (conftest's first_site_at_once)
        patch.setattr(watch, "FIRST_SITE_MASKS", 0)
        patch.setattr(watch, "FIRST_SITE_SECONDS", 0.0)
        build(load_config(root / "reportgen.yaml"), written=keep_first)
    assert json.loads((kept / "report.json").read_text(encoding="utf-8"))["progress"] is not None
    return kept


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_no_serious_accessibility_violation(new_tab, site, viewport):
    found = serious_violations(new_tab, site, viewport)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("viewport", VIEWPORTS)
@pytest.mark.parametrize("name", ["index.html", "ablation.html"])
def test_the_still_being_built_note_is_in_the_first_screen(new_tab, site, viewport, name):
    width, height = VIEWPORTS[viewport]
    page = new_tab(viewport).page
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


def test_the_note_follows_the_build_live_and_says_when_it_has_finished(new_tab, site):
    """The build rewrites build-progress.js beside the pages (reportgen.site.build_progress); the open page loads
    it again every few seconds and shows it as text. Once the file is gone (the finished site replaced this one),
    the note asks for a reload."""
    from reportgen.report import BuildProgress, ExperimentState
    from reportgen.site.build_progress import write_progress
    from tests.helpers import wait_until

    state = BuildProgress(experiments=[ExperimentState(name="baseline", state="done", masks_done=1, masks=1),
                                       ExperimentState(name="single_heads", state="running", masks_done=3, masks=8)],
                          seconds_per_mask=0.5, seconds_left=2.5, stages_left=[])
    write_progress(site, state)
    page = new_tab("phone").page
    page.goto((site / "ablation.html").as_uri())
    wait_until(page, "() => (document.querySelector('.rg-building-live') || {}).textContent", timeout=15_000)
    assert page.locator(".rg-building-live").inner_text() == (
        "Now: Done: the unmasked model. Running: single heads (3 of 8 masks). About 3 s left, at the 0.50 s "
        "per mask measured so far.")
    write_progress(site, state.model_copy(update={"experiments": [
        state.experiments[0], state.experiments[1].model_copy(update={"masks_done": 7})]}))
    wait_until(page, "() => document.querySelector('.rg-building-live').textContent.includes('7 of 8')",
               timeout=15_000)
    (site / "build-progress.js").unlink()
    wait_until(page, "() => document.querySelector('.rg-building-live').textContent.includes('reload')",
               timeout=15_000)
