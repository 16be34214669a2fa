"""Issue 50: reportgen's documentation builds with `mkdocs build --strict` (docs/mkdocs.yml), its generated
references cover the code they are generated from, its gallery holds a report built by docs/gallery.py, and it
reads in Chromium from file:// with the network off: the first screen, search, the gallery's embedded report,
axe-core clean at a desktop's and a phone's width."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from docs.generate import api_page, cli_page, config_page, report_page
from docs.generate.source_notes import field_notes
from reportgen.report import report_schema
from tests.docs.code_blocks import ROOT
from tests.helpers import wait_until
from tests.site.browser.test_accessibility_browser import serious_violations

MKDOCS_YML = ROOT / "docs" / "mkdocs.yml"


def _nav_pages() -> list[str]:
    def walk(items):
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from walk(value) if isinstance(value, list) else [value]

    return list(walk(yaml.safe_load(MKDOCS_YML.read_text(encoding="utf-8"))["nav"]))


# -- the generated references, straight from their generators (fast) ----------------------------------------------
def test_the_configuration_reference_has_every_key_with_what_it_sets():
    text = config_page.render()
    keys = config_page.keys()
    assert {"model", "ablation.method", "patching.max_masks", "patterns.thresholds.induction",
            "examples[].target", "views.live"} <= set(keys)
    for key in keys:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key}` |"))
        assert not row.rstrip().endswith("|  |"), f"{key} has no description"


def test_the_report_reference_has_every_record_of_the_schema():
    schema = report_schema()
    assert set(report_page.order(schema)) == {"Report", *schema["$defs"]}
    text = report_page.render()
    for name in schema["$defs"]:
        assert f"{{#{name.lower()}}}" in text
    assert "| `findings` | list of [Finding](#finding) |" in text
    # every field of every record says what it holds (its comment in reportgen/report/); a field a record inherits
    # is documented where it is declared, in the base class's own annotations
    for name, cls in report_page._records().items():
        for key in cls.model_fields:
            declared = next(base for base in cls.__mro__ if key in vars(base).get("__annotations__", {}))
            assert key in field_notes(declared), f"{name}.{key} has no comment in {declared.__name__}"


def test_the_api_and_cli_references_name_everything_they_document():
    api = api_page.render()
    for name in api_page.public_names():
        assert f"## `reportgen.{name}`" in api
    assert "### `reportgen.Report.load`" in api and "exit code 2" in api
    cli = cli_page.render()
    names = [name for name, _ in cli_page.commands()]
    assert {"reportgen build", "reportgen view", "reportgen cache prune"} <= set(names)
    assert all(f"## `{name}`" in cli for name in names) and "`--reproducible`" in cli


def test_the_docs_workflow_builds_the_gallery_and_the_docs_and_deploys_them_as_users_sites_are():
    ours = yaml.safe_load((ROOT / ".github/workflows/docs.yml").read_text(encoding="utf-8"))
    users = yaml.safe_load((ROOT / "reportgen/commands/github_workflow.yml").read_text(encoding="utf-8"))
    runs = [step.get("run") for step in ours["jobs"]["build"]["steps"]]
    assert runs.index("python docs/gallery.py") < runs.index("mkdocs build -f docs/mkdocs.yml")
    assert ours["permissions"] == users["permissions"] and ours["jobs"]["deploy"] == users["jobs"]["deploy"]
    uploaded = ours["jobs"]["build"]["steps"][-1]
    assert uploaded["uses"] == users["jobs"]["build"]["steps"][-1]["uses"] and uploaded["with"]["path"] == "docs/site"


# -- the built docs (slow) --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def docs_site(tmp_path_factory):
    """The docs as the workflow builds them, with the gallery's tiny BART report (docs/gallery.py --only)."""
    root = tmp_path_factory.mktemp("docs")
    built, site = root / "gallery", root / "site"
    env = {**os.environ, "REPORTGEN_DOCS_GALLERY": str(built), "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run([sys.executable, "docs/gallery.py", "--only", "tiny-bart", "--out", str(built)], cwd=ROOT, env=env,
                   check=True, capture_output=True, timeout=600)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(MKDOCS_YML), "-d", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not re.search(r"^WARNING\b", done.stderr, re.M), done.stderr[-3000:]
    return site


@pytest.mark.slow
def test_every_page_of_the_nav_is_built_with_the_generated_parts(docs_site):
    for page in _nav_pages():
        assert (docs_site / page.replace(".md", ".html")).is_file(), page
    configuration = (docs_site / "reference/configuration.html").read_text(encoding="utf-8")
    assert "patching.max_masks" in configuration and "<!-- generated" not in configuration
    gallery = (docs_site / "gallery.html").read_text(encoding="utf-8")
    frames = re.findall(r'<iframe class="gallery-report" src="([^"]+)"', gallery)
    assert frames == ["gallery/tiny-bart/index.html"]
    report = json.loads((docs_site / "gallery/tiny-bart/report.json").read_text(encoding="utf-8"))
    assert report["architecture"] == "encoder-decoder" and report["model"]["model_type"] == "bart"


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_first_screen_reads_from_file_with_the_network_off(docs_site, open_page, viewport):
    view = open_page((docs_site / "index.html").as_uri(), viewport)
    page = view.page
    heading = page.locator("h1").first
    assert heading.inner_text().startswith("Getting started") and heading.is_visible()
    assert page.evaluate("() => document.querySelector('h1').getBoundingClientRect().bottom") < page.viewport_size[
        "height"]
    picture = page.locator("img[src$='findings.png']")
    picture.scroll_into_view_if_needed()
    wait_until(page, "() => { const i = document.querySelector(\"img[src$='findings.png']\"); "
                     "return i.complete && i.naturalWidth > 0; }")
    assert view.remote_requests == [] and view.errors == [] and view.failed == []


@pytest.mark.slow
def test_search_finds_a_page_from_file(docs_site, open_page):
    view = open_page((docs_site / "index.html").as_uri())
    view.page.keyboard.press("/")  # Material's search shortcut
    view.page.keyboard.type("patching")
    view.page.wait_for_selector(".md-search-result__item", timeout=15_000)
    titles = view.page.locator(".md-search-result__item").all_inner_texts()
    assert any("patching" in title.lower() for title in titles)
    assert view.remote_requests == [] and view.errors == []


@pytest.mark.slow
def test_the_gallery_embeds_its_report_and_links_to_it(docs_site, open_page):
    view = open_page((docs_site / "gallery.html").as_uri())
    frame = view.page.locator("iframe.gallery-report")
    frame.scroll_into_view_if_needed()
    heading = view.page.frame_locator("iframe.gallery-report").locator("h1").first  # a file:// frame: its own origin
    heading.wait_for(timeout=30_000)
    inner = heading.inner_text()
    assert "tiny random BART" in inner
    view.page.get_by_role("link", name="Open the report").click()
    view.page.wait_for_load_state("load")
    assert view.page.url.endswith("gallery/tiny-bart/index.html")
    assert view.remote_requests == []


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_docs_are_axe_clean(docs_site, new_tab, viewport):
    pages = ("index.html", "gallery.html", "guides/site.html", "reference/configuration.html",
             "reference/report-json.html", "reference/errors.html")
    assert serious_violations(new_tab, docs_site, viewport, pages, ready="() => true") == []


def test_the_readme_is_one_screen_whose_links_reach_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 45
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert "docs/pages/index.md" in links and "docs/pages/gallery.md" in links
    for link in links:
        assert (ROOT / link).is_file(), link
    pages = {f"docs/pages/{page}" for page in _nav_pages()}
    assert {link for link in links if link.endswith(".md")} <= pages
