"""The default site as a reader gets it: opened in Chromium from file:// and over HTTP, network blocked."""

import json

import pytest

from tests.helpers import VIEWPORTS, check_report, search_results

pytestmark = pytest.mark.slow


def test_default_build_files(default_site):
    report = check_report(default_site)
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
    report = check_report(default_site)
    expected = report["statistics"]["entropy"]["mean"][0][0]
    # The chart's data are the report's numbers (the tooltip formats them to 4 decimals).
    rows = view.page.evaluate("() => document.getElementById('chart-entropy').rgView.data('source_0')")
    first = next(r for r in rows if r["layer"] == 0 and r["head"] == 0)
    assert first["value"] == pytest.approx(expected)
    cells.first.hover()
    view.page.wait_for_selector("#vg-tooltip-element.visible", timeout=5_000)
    assert "entropy" in view.page.inner_text("#vg-tooltip-element")
    assert view.remote_requests == [] and view.errors == []


def test_every_page_loads_over_http_without_errors_or_remote_requests(default_site, open_page, http_root):
    """As on GitHub Pages; from file:// at two screen sizes, tests/site/browser/test_every_page_browser.py."""
    base = http_root(default_site)
    # One page of each kind (what HTTP changes is how files load, the same on every page of a kind), in one tab.
    view = None
    for name in ("index.html", "statistics.html", "patterns.html", "ablation.html", "example-1.html",
                 "example-1-qk.html", "glossary.html", "404.html"):
        view = open_page(base + name, reuse=view)
        assert view.remote_requests == [], name
        assert view.errors == [], (name, view.errors)


def test_search_works_offline_from_file(default_site, open_page):
    view = open_page((default_site / "index.html").as_uri())
    results = search_results(view, "statistics")
    assert results.count() >= 1
    assert "statistics" in results.first.inner_text().lower()
    assert view.remote_requests == [] and view.errors == []


def test_deep_link_on_a_site_page_shows_the_models_weight(default_site, open_page, embedded_model_path):
    from reportgen.config import builtin_examples
    from reportgen.model import loading
    from reportgen.model.run import run_example

    run = run_example(*loading.load(embedded_model_path, "cpu"), builtin_examples()[0], 512)
    view = open_page((default_site / "example-1.html").as_uri() + "#view=head&layer=2&head=3&token=4")
    view.page.wait_for_selector("span.rgv-num[data-q='4']", timeout=10_000)
    shown = view.page.eval_on_selector_all(
        "span.rgv-num[data-q='4'][data-head='3']", "els => els.map(e => [+e.dataset.k, +e.dataset.w])")
    assert len(shown) == run.n_tokens
    for key, weight in shown:
        assert abs(weight - run.attention[2, 3, 4, key]) <= 0.5 / 255 + 1e-6
    assert view.page.locator("select.rgv-layer").input_value() == "2"
    assert view.remote_requests == [] and view.errors == []


def test_pattern_heatmap_cell_opens_that_head_on_its_strongest_example(default_site, open_page):
    report = check_report(default_site)
    stat = report["statistics"]["previous_token"]
    example = stat["example"][0][2]  # REFERENCE.md: layer 0 head 2 attends to the previous token
    view = open_page((default_site / "patterns.html").as_uri())
    cells = view.page.locator("#chart-previous-token svg g.mark-rect.role-mark path")
    view.page.wait_for_selector("#chart-previous-token svg g.mark-rect.role-mark path", timeout=10_000)
    assert cells.count() == 72
    cells.nth(0 * 12 + 2).click()  # rows are layer-major
    view.page.wait_for_url(f"**/example-{example + 1}.html#view=head&layer=0&head=2", timeout=10_000)
    view.page.wait_for_selector(".rgv-head-toggle[data-head='2'][aria-pressed='true']", timeout=10_000)
    assert view.page.locator("select.rgv-layer").input_value() == "0"
    assert view.page.locator(".rgv-head-toggle[aria-pressed='true']").count() == 1
    assert view.remote_requests == [] and view.errors == []


def test_pattern_data_downloads_match_the_report(default_site):
    report = check_report(default_site)
    rows = json.loads((default_site / "charts" / "patterns--chart-next-token.json").read_text())
    by_cell = {(r["layer"], r["head"]): r["value"] for r in rows}
    assert by_cell[(1, 8)] == report["statistics"]["next_token"]["mean"][1][8]
    header = (default_site / "charts" / "patterns--chart-next-token.csv").read_text().splitlines()[0]
    assert header.startswith("layer,head,value,std")


def test_every_analysis_has_a_finding_with_a_number(default_site, open_page):
    """Findings: at least one per analysis, each with a number and a permanent anchor to copy."""
    view = open_page((default_site / "index.html").as_uri())
    ids = view.page.eval_on_selector_all(".rg-finding", "els => els.map(e => e.id)")
    for expected in ["patterns-previous-token", "patterns-delimiter", "ablation-single-heads",
                     "ablation-random-fraction", "ablation-layer-halves", "ablation-whole-layers",
                     "ablation-importance"]:
        assert f"finding-{expected}" in ids
    for text in view.page.locator(".rg-finding").all_inner_texts():
        assert any(ch.isdigit() for ch in text), text
    # Every link's target and the view state it opens: tests/site/browser/test_every_page_browser.py (all pages' links).
    # Copy-link controls carry the finding's permanent anchor.
    view.page.locator("#finding-ablation-whole-layers button.rg-copy-link").click()
    link = view.page.get_attribute("#finding-ablation-whole-layers button.rg-copy-link", "data-link")
    assert link.endswith("index.html#finding-ablation-whole-layers")


def test_chart_exports_open(default_site):
    import xml.etree.ElementTree as ET

    pngs = sorted((default_site / "charts").glob("*.png"))
    svgs = sorted((default_site / "charts").glob("*.svg"))
    grids = [png for png in pngs if png.name.startswith("patterns--matrices-")]  # one PNG per grid, no SVG
    previews = [png for png in pngs if png.name.endswith("--head-map.png")]  # link previews (issue 15), no SVG
    assert len(pngs) - len(grids) - len(previews) == len(svgs) >= 15 and grids and len(previews) == 15
    from PIL import Image

    for png in pngs:
        with Image.open(png) as image:
            image.load()  # decodes every pixel
            assert image.width > 50 and image.height > 50
    for svg in svgs:
        assert ET.parse(svg).getroot().tag.endswith("svg")


def test_pages_carry_a_csp_that_blocks_remote_scripts_and_connections(default_site, open_page):
    view = open_page((default_site / "example-1.html").as_uri())
    policy = view.page.get_attribute("meta[http-equiv='Content-Security-Policy']", "content")
    assert "object-src 'none'" in policy and "https:" not in policy and "*" not in policy
    blocked = view.page.evaluate("""() => new Promise(resolve => {
        const seen = [];
        document.addEventListener('securitypolicyviolation', e => seen.push(e.violatedDirective));
        const s = document.createElement('script');
        s.src = 'https://example.org/x.js';
        document.head.appendChild(s);
        fetch('https://example.org/data').catch(() => {});
        setTimeout(() => resolve(seen), 500);
    })""")
    assert any(d.startswith("script-src") for d in blocked) and any(d.startswith("connect-src") for d in blocked)
    assert view.remote_requests == []  # refused by the page itself, before the test's network block




# What a failure of escaping would let into a page: an inline script, an event handler, a javascript: link
# and a style attribute. Each writes the page's title, or would colour a paragraph.
INJECTED = ("<script>document.title = 'ran: script';</script>"
            "<img src='missing.png' alt='' onerror=\"document.title = 'ran: onerror'\">"
            "<a id='rg-canary-link' href=\"javascript:document.title = 'ran: link'\">a link</a>"
            "<p id='rg-canary' style='color: rgb(255, 0, 0)'>injected</p>")


def test_the_policy_stops_markup_that_escaping_let_through(default_site, browser, tmp_path):
    """Issue 27: the policy is the second wall. Injected markup in an example page runs nothing and styles
    nothing, and the page's own scripts (the views, the chart) still draw."""
    import shutil

    from tests.helpers import BrowserPage, wait_until

    site = shutil.copytree(default_site, tmp_path / "site")
    page_file = site / "example-1.html"
    text = page_file.read_text(encoding="utf-8")
    heading = text.index("<h1")
    page_file.write_text(text[:heading] + INJECTED + text[heading:], encoding="utf-8")
    context = browser.new_context()
    context.add_init_script("window.__seen = []; document.addEventListener('securitypolicyviolation',"
                            " e => window.__seen.push(e.effectiveDirective));")
    view = BrowserPage(context.new_page())
    view.page.goto(page_file.as_uri())
    title = view.page.title()
    wait_until(view.page, "() => document.querySelector('.rgv[data-rgv-state]') && "
                          "document.querySelector('.rg-head-map-readout')", timeout=15_000)
    view.page.click("#rg-canary-link")
    wait_until(view.page, "() => ['script-src-elem', 'script-src-attr', 'style-src-attr']"
                          ".every(kind => (window.__seen || []).includes(kind))", timeout=15_000)
    seen = set(view.page.evaluate("() => window.__seen"))
    assert not title.startswith("ran:") and not view.page.title().startswith("ran:")
    assert {"script-src-elem", "script-src-attr", "style-src-attr"} <= seen, seen
    assert view.page.eval_on_selector("#rg-canary", "p => getComputedStyle(p).color") != "rgb(255, 0, 0)"
    context.close()


@pytest.fixture
def open_sized(open_page):
    """open_sized(url, viewport) -> BrowserPage at one of VIEWPORTS, network blocked, errors collected."""
    return lambda url, viewport: open_page(url, viewport)


def test_seed_example_lists_its_patterns_as_the_independent_check_found(default_site):
    """Issue 12: on the seed pair L0H2 is previous (0.99), L1H8 next (about 0.65), L0H4 straw -> ##berries,
    L2H7 on [CLS]; same word and same word in the other sentence are weak and must be said to be."""
    found = {p["pattern"]: p for p in check_report(default_site)["examples"][0]["patterns"]}
    first = {key: (p["heads"][0]["layer"], p["heads"][0]["head"]) for key, p in found.items() if p["heads"]}
    assert first["previous_token"] == (0, 2) and found["previous_token"]["heads"][0]["value"] > 0.95
    assert first["next_token"] == (1, 8) and 0.55 < found["next_token"]["heads"][0]["value"] < 0.75
    within = found["within_word"]["heads"][0]
    assert first["within_word"] == (0, 4) and (within["query_token"], within["key_token"]) == ("straw", "##berries")
    assert first["delimiter"] == (2, 7) and found["delimiter"]["heads"][0]["key_token"] == "[CLS]"
    assert found["same_token"]["weak"] and found["other_segment"]["weak"]
    assert not found["previous_token"]["weak"] and not found["within_word"]["weak"]


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_example_pattern_links_open_the_head_view_with_the_token(default_site, open_sized, viewport):
    report = check_report(default_site)
    within = next(p for p in report["examples"][0]["patterns"] if p["pattern"] == "within_word")["heads"][0]
    view = open_sized((default_site / "example-1.html").as_uri(), viewport)
    section = view.page.locator("#patterns + p + ul")
    text = " ".join(section.inner_text().split())
    assert "Same word: no head shows it strongly on this example" in text
    assert "Same word in the other sentence: no head shows it strongly on this example" in text
    assert f"(straw \u2192 ##berries: {within['weight']:.2f})" in text
    href = f"#view=head&layer={within['layer']}&head={within['head']}&token={within['query']}"
    link = section.locator(f"a[href='{href}']")
    assert link.count() == 1
    link.scroll_into_view_if_needed()
    link.click()
    view.page.wait_for_selector(f".rgv[data-rgv-state*='token={within['query']}']", timeout=10_000)
    assert view.page.locator("select.rgv-layer").input_value() == str(within["layer"])
    pressed = view.page.eval_on_selector_all(".rgv-head-toggle[aria-pressed='true']",
                                             "els => els.map(e => e.dataset.head)")
    assert pressed == [str(within["head"])]
    # The pinned query shows its weights: the largest of them on the key the page names.
    weights = view.page.eval_on_selector_all(
        f"span.rgv-num[data-q='{within['query']}'][data-head='{within['head']}']",
        "els => els.map(e => [+e.dataset.k, +e.dataset.w])")
    assert max(weights, key=lambda kw: kw[1])[0] == within["key"]
    assert view.remote_requests == [] and view.errors == []


def test_glossary_terms_show_their_definition_and_link_to_the_glossary(default_site, open_sized):
    from reportgen.site import glossary

    view = open_sized((default_site / "patterns.html").as_uri(), "desktop")
    term = view.page.locator("article a.rg-term[href='glossary.html#null']").first
    term.scroll_into_view_if_needed()
    term.hover()
    view.page.wait_for_selector(".md-tooltip2--active", timeout=5_000)
    assert glossary.BY_ID["null"].definition in " ".join(view.page.inner_text(".md-tooltip2--active").split())
    term.click()
    view.page.wait_for_url("**/glossary.html#null", timeout=10_000)
    assert view.page.locator("[id='null']").is_visible()
    for page_name in ("index.html", "patterns.html", "statistics.html", "ablation.html", "example-1.html"):
        html = (default_site / page_name).read_text(encoding="utf-8")
        assert 'href="glossary.html"' in html, page_name  # the nav
    assert view.remote_requests == [] and view.errors == []


def test_every_pattern_section_states_its_nulls_and_shares_share_one_scale(default_site, open_page):
    report = check_report(default_site)
    view = open_page((default_site / "patterns.html").as_uri())
    nulls = view.page.locator("p.rg-nulls").all_inner_texts()
    assert len(nulls) == 10  # one per heatmap of the atlas
    within = report["statistics"]["nulls"]["within_word"]
    line = next(text for text in nulls if f"pure previous-token head {within['previous']:.2f}," in text)
    assert line.startswith("Nulls on the same inputs: uniform head") and 0.5 < within["previous"] < 0.6
    view.page.wait_for_selector("#chart-within-word svg", timeout=10_000)
    for chart in ("chart-previous-token", "chart-within-word", "chart-cls", "chart-punctuation"):
        domain = view.page.evaluate(f"() => document.getElementById('{chart}').rgView.scale('color').domain()")
        assert domain == [0, 1], chart
    assert view.remote_requests == [] and view.errors == []


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_pages_fit_the_screen_and_nothing_is_clipped(default_site, open_sized, viewport):
    """No page scrolls sideways as a whole: wide tables and charts scroll inside their own box."""
    for page_name in ("index.html", "patterns.html", "statistics.html", "example-1.html", "examples.html",
                      "glossary.html"):
        view = open_sized((default_site / page_name).as_uri(), viewport)
        overflow = view.page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, (page_name, viewport, overflow)
        clipped = view.page.evaluate("""() => [...document.querySelectorAll('article table, article .rg-chart')]
            .filter(el => {
                let box = el.parentElement;
                const scrolls = node => ['auto', 'scroll'].includes(getComputedStyle(node).overflowX);
                if (scrolls(el)) return false;
                while (box && box.tagName !== 'ARTICLE' && !scrolls(box)) box = box.parentElement;
                return el.scrollWidth > (box ? box.clientWidth : window.innerWidth) + 1 && !(box && scrolls(box));
            }).map(el => el.outerHTML.slice(0, 80))""")
        assert clipped == [], (page_name, viewport, clipped)
        assert view.remote_requests == [] and view.errors == [], page_name
