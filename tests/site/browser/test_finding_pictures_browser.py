"""Issue 15's acceptance for the findings' pictures: with JavaScript disabled, each finding that has a picture
shows it as SVG, visible and not clipped, beside its sentence on a laptop (1366x900) and under it on a phone
(390x844), from file:// with the network blocked, its text at 10 px or more (issue 28); printed, it stays
on the page.

On a tiny model's site built here with every experiment on, and on the default site.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from reportgen.report import Report, head_link
from reportgen.site.charts import finding_pictures
from tests.helpers import BrowserPage, make_tiny_bert

pytestmark = pytest.mark.slow

VIEWPORTS = {"desktop": (1366, 900), "phone": (390, 844)}
TOLERANCE = 1  # px
MIN_TEXT = 10  # px: the smallest text a picture may show on screen (issue 28)
# The default site's findings that must have a picture (issue 15 names the first four).
DEFAULT_PICTURES = {"ablation-random-fraction", "ablation-layer-halves", "ablation-single-heads", "patterns-delimiter",
                    "ablation-whole-layers", "ablation-importance", "patterns-delimiter-contribution",
                    "patterns-previous-token", "patterns-next-token"}

# Per finding with a picture: its svg's box, the sentence's box, and every way the picture could be cut: text
# outside the svg, the svg outside the viewport or the page's column (under the table of contents), an
# ancestor that hides overflow and does not hold it whole.
MEASURE_JS = """ids => ids.map(id => {
  const block = document.getElementById('finding-' + id);
  const svgs = block ? block.querySelectorAll('figure.rg-finding-picture svg') : [];
  if (svgs.length !== 1) return {id, error: `${svgs.length} pictures`};
  const svg = svgs[0], box = svg.getBoundingClientRect();
  const text = block.querySelector('.rg-finding-text').getBoundingClientRect();
  const inside = (r, outer) => r.left >= outer.left - 1 && r.right <= outer.right + 1
    && r.top >= outer.top - 1 && r.bottom <= outer.bottom + 1;
  const cut = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()
    && !inside(t.getBoundingClientRect(), box)).map(t => t.textContent);
  const clippers = [];
  for (let up = svg.parentElement; up && up !== document.body; up = up.parentElement) {
    const style = getComputedStyle(up);
    if ((style.overflowX !== 'visible' || style.overflowY !== 'visible') && !inside(box, up.getBoundingClientRect()))
      clippers.push(up.tagName + '.' + up.className);
  }
  // Issue 28: the smallest text as shown, its font size times the scale the svg is drawn at.
  const scale = box.width / svg.viewBox.baseVal.width;
  const smallest = Math.min(...[...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
    .map(t => parseFloat(getComputedStyle(t).fontSize) * scale));
  const style = getComputedStyle(svg), column = document.querySelector('.md-content').getBoundingClientRect();
  return {id, columnLeft: column.left, columnRight: column.right,
          width: box.width, height: box.height, left: box.left, right: box.right, top: box.top,
          bottom: box.bottom, textRight: text.right, textBottom: text.bottom, cut, clippers,
          shown: style.display !== 'none' && style.visibility === 'visible' && box.width > 0,
          innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth,
          smallest, role: svg.getAttribute('role'), label: svg.getAttribute('aria-label'),
          caption: block.querySelector('figure.rg-finding-picture figcaption').textContent};
})"""


# Per pattern finding's attention picture (attention_picture.py): where it is, the smallest text it shows, the
# link's name and address.
ATTENTION_JS = """() => [...document.querySelectorAll('figure.rg-finding-attention')].map(figure => {
  const svg = figure.querySelector('svg'), link = figure.querySelector('a.rg-attention-link');
  const box = svg.getBoundingClientRect(), column = document.querySelector('.md-content').getBoundingClientRect();
  const scale = box.width / svg.viewBox.baseVal.width;
  const smallest = Math.min(...[...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize)
    * scale));
  return {id: figure.closest('.rg-finding').id, left: box.left, right: box.right, width: box.width,
          columnLeft: column.left, columnRight: column.right, smallest, name: link && link.getAttribute('aria-label'),
          href: link && link.getAttribute('href')};
})"""


def attention_problems(found: dict) -> list[str]:
    out = []
    if found["width"] < 100 or found["left"] < found["columnLeft"] - TOLERANCE \
            or found["right"] > found["columnRight"] + TOLERANCE:
        out.append(f"not shown whole in the column ({found['left']:.0f}..{found['right']:.0f})")
    if found["smallest"] < MIN_TEXT:
        out.append(f"text shown at {found['smallest']:.1f} px")
    if not (found["name"] or "").startswith("Attention of layer ") or "#view=head" not in (found["href"] or ""):
        out.append(f"not a named link to a head view: {found['name']!r} {found['href']!r}")
    return out


@pytest.fixture(scope="module")
def tiny_site(tmp_path_factory) -> Path:
    from reportgen.config import load_config
    from reportgen.pipeline import build

    work = tmp_path_factory.mktemp("pictures-site")
    make_tiny_bert(work / "tiny", layers=3, heads=4)
    config = {"title": "Pictures", "model": "./tiny", "device": "cpu", "max_length": 64, "cache_dir": "cache",
              "patterns": {"similarity": False},
              "examples": [{"text": "the cat sat on the mat."},
                           {"text": "i went to the store.", "pair": "at the store, i bought fresh strawberries."}],
              "ablation": {"limit": 12, "seeds": [0, 1], "fractions": [0.0, 0.25, 0.5], "bootstrap_samples": 100,
                           "permutations": 100, "importance": {"random_orders": 3}}}
    (work / "reportgen.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    build(load_config(work / "reportgen.yaml"), out=work / "site", reproducible=True)
    return work / "site"


def expected(site: Path) -> set[str]:
    """The findings of the site's report that have a picture to draw."""
    report = Report.model_validate(json.loads((site / "report.json").read_text(encoding="utf-8")))
    return set(finding_pictures.pictures(report))


def check_pictures(browser, site: Path, ids: set[str]) -> list[str]:
    """Every failure of the pictures of `ids` on the site's findings page, at both sizes and in print."""
    failures = []
    for name, (width, height) in VIEWPORTS.items():
        context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=False)
        page = BrowserPage(context.new_page())
        page.page.goto((site / "index.html").as_uri())
        page.page.wait_for_load_state("load")
        for media in ("screen", "print") if name == "desktop" else ("screen",):
            page.page.emulate_media(media=media)
            for found in page.page.evaluate(MEASURE_JS, sorted(ids)):
                failures += [f"{name} {media} {found['id']}: {problem}" for problem in problems(found, name, media)]
            if media == "screen":
                for found in page.page.evaluate(ATTENTION_JS):
                    failures += [f"{name} {found['id']}: {problem}" for problem in attention_problems(found)]
        failures += [f"{name}: remote request {url}" for url in page.remote_requests]
        failures += [f"{name}: {error}" for error in page.errors]
        context.close()
    return failures


def problems(found: dict, viewport: str, media: str) -> list[str]:
    if "error" in found:
        return [found["error"]]
    out = []
    if not found["shown"] or found["width"] < 150 or found["height"] < 60:
        out.append(f"not shown at its size ({found['width']:.0f}x{found['height']:.0f})")
    if found["left"] < -TOLERANCE or found["right"] > found["innerWidth"] + TOLERANCE:
        out.append(f"outside the viewport ({found['left']:.0f}..{found['right']:.0f})")
    if found["left"] < found["columnLeft"] - TOLERANCE or found["right"] > found["columnRight"] + TOLERANCE:
        out.append(f"outside the page's column ({found['columnLeft']:.0f}..{found['columnRight']:.0f})")
    if found["scrollWidth"] > found["innerWidth"] + TOLERANCE:
        out.append(f"the page scrolls sideways ({found['scrollWidth']} px)")
    if found["cut"] or found["clippers"]:
        out.append(f"clipped: text {found['cut']}, by {found['clippers']}")
    if media == "screen" and found["smallest"] < MIN_TEXT:
        out.append(f"text shown at {found['smallest']:.1f} px, under {MIN_TEXT} px")
    if found["role"] != "img" or found["label"] != found["caption"] or not found["caption"]:
        out.append("no accessible name matching its caption")
    beside = found["left"] >= found["textRight"] - TOLERANCE and found["top"] < found["textBottom"]
    under = found["top"] >= found["textBottom"] - TOLERANCE
    if media == "screen" and viewport == "desktop" and not beside:
        out.append("not beside its sentence")
    if viewport == "phone" and not under:
        out.append("not under its sentence")
    return out


def test_each_finding_shows_its_picture_without_javascript(browser, tiny_site):
    ids = expected(tiny_site)
    assert ids >= {"ablation-random-fraction", "ablation-layer-halves", "ablation-single-heads",
                   "patterns-delimiter"}
    assert not check_pictures(browser, tiny_site, ids)
    html = (tiny_site / "index.html").read_text(encoding="utf-8")
    assert html.count('<figure class="rg-finding-picture"') == len(ids)


def test_the_default_sites_findings_show_their_pictures(browser, default_site):
    ids = expected(default_site)
    assert ids >= DEFAULT_PICTURES
    assert not check_pictures(browser, default_site, ids)
    # each pattern finding that names a head shows that head's attention on its example (issue 47)
    report = Report.model_validate(json.loads((default_site / "report.json").read_text(encoding="utf-8")))
    html = (default_site / "index.html").read_text(encoding="utf-8")
    for finding_id in ("patterns-previous-token", "patterns-next-token", "patterns-delimiter"):
        numbers = next(f for f in report.findings if f.id == finding_id).numbers
        named = (numbers["heads"] or [numbers["strongest"]])[0]
        start = html.index(f'id="finding-{finding_id}"')
        block = html[start:html.find('id="finding-', start + 1)]  # up to the next finding
        link = head_link(named["example"], named["layer"], named["head"]).replace("&", "&amp;")
        assert f'<a href="{link}" class="rg-attention-link"' in block, finding_id
