"""The default site as a reader gets it: opened in Chromium from file:// and over HTTP, network blocked."""

import json

import pytest

pytestmark = pytest.mark.slow


def site_pages(site):
    return sorted(p.name for p in site.glob("*.html"))


def test_default_build_files(default_site):
    report = json.loads((default_site / "report.json").read_text())
    assert report["model"]["name"].startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert (report["layers"], report["heads"]) == (6, 12)
    assert len(report["examples"]) >= 12
    assert (default_site / ".nojekyll").exists() and (default_site / "404.html").exists()
    html = "\n".join(p.read_text() for p in default_site.rglob("*.html"))
    for remote in ("fonts.googleapis", "fonts.gstatic", "unpkg.com", "cdn.jsdelivr", "cdnjs"):
        assert remote not in html


def test_home_page_from_file_with_network_blocked(default_site, open_page):
    view = open_page((default_site / "index.html").as_uri())
    body = view.page.inner_text("article")
    assert "6 x 12" in body and "22,713,216" in body
    assert view.remote_requests == [] and view.errors == []


def test_heatmaps_render_with_exact_tooltips(default_site, open_page):
    view = open_page((default_site / "statistics.html").as_uri())
    view.page.wait_for_selector("#chart-entropy svg g.mark-rect.role-mark path", timeout=10_000)
    cells = view.page.locator("#chart-entropy svg g.mark-rect.role-mark path")
    assert cells.count() == 72
    assert view.page.locator("#chart-cls-sep svg g.mark-rect.role-mark path").count() == 72
    report = json.loads((default_site / "report.json").read_text())
    expected = report["statistics"]["entropy"]["mean"][0][0]
    # The chart's data are the report's numbers (the tooltip formats them to 4 decimals).
    rows = view.page.evaluate("() => document.getElementById('chart-entropy').rgView.data('source_0')")
    first = next(r for r in rows if r["layer"] == 0 and r["head"] == 0)
    assert first["value"] == pytest.approx(expected)
    cells.first.hover()
    view.page.wait_for_selector("#vg-tooltip-element.visible", timeout=5_000)
    assert "entropy" in view.page.inner_text("#vg-tooltip-element")
    assert view.remote_requests == [] and view.errors == []


@pytest.mark.parametrize("transport", ["file", "http"])
def test_every_page_loads_without_errors_or_remote_requests(default_site, open_page, http_root, transport):
    base = default_site.as_uri() + "/" if transport == "file" else http_root(default_site)
    for name in site_pages(default_site):
        if transport == "file" and name == "404.html":
            continue  # served by GitHub Pages for any missing path, so it links from the site root
        view = open_page(base + name)
        assert view.remote_requests == [], name
        assert view.errors == [], (name, view.errors)


def test_search_works_offline_from_file(default_site, open_page):
    view = open_page((default_site / "index.html").as_uri())
    view.page.click("input.md-search__input")
    view.page.fill("input.md-search__input", "statistics")
    view.page.wait_for_selector(".md-search-result__item", timeout=30_000)
    assert view.page.locator(".md-search-result__item").count() >= 1
    assert view.remote_requests == [] and view.errors == []
