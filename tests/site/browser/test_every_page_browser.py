"""Issue 13's acceptance: every page of the default site in Chromium at a laptop (1366x900) and a phone
(390x844) size, opened from file:// as readers open it, with the network blocked.

- Every page, both sizes: no sideways scroll, no console error, no failed request, no request for
  anything but a file; one Content-Security-Policy, with no 'unsafe-inline' or 'unsafe-eval', that
  refused nothing the page and the clicks on it did. Example pages: no element of the attention
  views extends past its own scroll box (head view as loaded and with a token pinned, model view, an
  enlarged head); query/key pages: the softmax column is in sight (and at 1366 px the whole table fits).
- At 1366 px on example 1 the head view shows every weight of a pinned token without scrolling, and
  the model view's grid fits or scrolls with sticky labels.
- Links: every href's file and anchor exist and every view link's layer/head/token is in range; on
  every page every same-page view link and the first link of each other kind are clicked and land
  (address, anchor on screen, or the view's state, pinned row and highlighted model-view row); view
  links from other pages and from chart marks restore their state; Material's navigation is clicked once.
- Controls: every toolbar control, token pin (click, Enter, Escape), tab, row label, thumbnail and
  Close of example 1 and the query/key page's selects and tokens, each followed by the link; the
  query/key link carries layer, head and token.
- Charts: marks with a pointer cursor have a link, nothing on top swallows a click, one is clicked.

One browser context per viewport; the checks wait on the views' and charts' readiness hooks
(`.rgv[data-rgv-state]`, `.vega-embed svg`), not on fixed sleeps. Each test gathers every failure it
finds and reports them together, naming the page, the viewport and the element.
"""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urljoin, urlsplit

import pytest

from tests.helpers import VIEWPORTS, BrowserPage, next_frames, wait_until

# The tests of each viewport run as a group of their own on the pytest-xdist workers (conftest.py):
# every page at one size takes minutes.
SPLIT_BY = "viewport"

pytestmark = pytest.mark.slow

VIEW_KEYS = {"view", "layer", "head", "heads", "token", "key", "filter", "topk", "min"}
PAGE_LINK = re.compile(r"^[\w.-]+\.html(#\S*)?$")
EXAMPLE_PAGE = re.compile(r"^example-\d+\.html$")
TOLERANCE = 1  # px
READY_SECONDS = 45  # how long a page may take to draw its views and charts on a loaded machine
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
# The states of an example page's views that the containment check visits: (label, what to click first).
EXAMPLE_STATES = [("head view", None),
                  ("head view, token 1 pinned", ".rgv-head-panel .rgv-left .rgv-tok[data-i='1']"),
                  ("model view", ".rgv-tab[data-view='model']"),
                  ("model view, layer 0 head 1 enlarged", ".rgv-thumb[data-layer='0'][data-head='1']")]

# ------------------------------------------------------------------ JavaScript run in the pages

DESCRIBE_JS = """const describe = node => {
  const rect = node.getBoundingClientRect();
  const data = ['i', 'layer', 'head'].filter(k => node.dataset && node.dataset[k] !== undefined)
    .map(k => `[data-${k}=${node.dataset[k]}]`).join('');
  return node.tagName.toLowerCase() + (node.id ? '#' + node.id : '') +
    [...node.classList].slice(0, 3).map(c => '.' + c).join('') + data +
    ` (x ${Math.round(rect.left)}..${Math.round(rect.right)}, y ${Math.round(rect.top)}..${Math.round(rect.bottom)})`;
};"""

LOADED_JS = "() => !document.querySelector('.rgv[data-rgv-loading]')"
READY_JS = """() => [...document.querySelectorAll('.rgv[data-rgv]')].every(r => r.hasAttribute('data-rgv-state'))
  && !document.querySelector('.rgv[data-rgv-loading]')
  && document.querySelectorAll('.vega-embed svg, .vega-embed canvas').length
     >= document.querySelectorAll('script[data-rg-chart]').length"""

# How far the page scrolls sideways, and the outermost elements that stick out (nothing clips them).
PAGE_OVERFLOW_JS = "() => {" + DESCRIBE_JS + """
  const width = window.innerWidth;
  const over = document.documentElement.scrollWidth - width;
  if (over <= 1) return {over, culprits: []};
  const clipped = node => {
    for (let up = node.parentElement; up && up !== document.body; up = up.parentElement)
      if (getComputedStyle(up).overflowX !== 'visible') return true;
    return false;
  };
  const wide = [...document.body.querySelectorAll('*')]
    .filter(node => node.getBoundingClientRect().right > width + 1 && !clipped(node));
  const outer = wide.filter(node => !wide.includes(node.parentElement));
  return {over, culprits: outer.slice(0, 4).map(describe)};
}"""

# Every visible element of the first view lies inside the box that holds it: the scroll area of its
# nearest scrolling ancestor, the client box of a clipping one, the viewport for fixed (dialog) content,
# else the view's root, which itself lies within the window's width.
CONTAIN_JS = "() => {" + DESCRIBE_JS + """
  const root = document.querySelector('.rgv[data-rgv]');
  const tol = 1, viewport = {left: 0, top: 0, right: window.innerWidth, bottom: window.innerHeight};
  const boxes = new Map();
  const boxOf = node => {
    const style = getComputedStyle(node);
    const clips = style.overflowX !== 'visible' || style.overflowY !== 'visible';
    if (!clips && style.position === 'fixed') return {rect: viewport, what: 'the window'};
    if (node !== root && !clips) return null;
    const rect = node.getBoundingClientRect();
    if (node === root && !clips) return {rect, what: 'the view ' + describe(node)};
    const left = rect.left + node.clientLeft, top = rect.top + node.clientTop;
    if (['auto', 'scroll'].includes(style.overflowX) || ['auto', 'scroll'].includes(style.overflowY))
      return {what: 'its scroll box ' + describe(node), rect: {left: left - node.scrollLeft,
        top: top - node.scrollTop, right: left - node.scrollLeft + node.scrollWidth,
        bottom: top - node.scrollTop + node.scrollHeight}};
    return {what: 'its clipping box ' + describe(node),
            rect: {left, top, right: left + node.clientWidth, bottom: top + node.clientHeight}};
  };
  const holder = node => {
    const up = node.parentElement;
    if (!boxes.has(up)) boxes.set(up, boxOf(up) || (up === root ? null : holder(up)));
    return boxes.get(up);
  };
  const out = [];
  const rootRect = root.getBoundingClientRect();
  if (rootRect.left < -tol || rootRect.right > document.documentElement.clientWidth + tol)
    out.push(`the view ${describe(root)} is wider than the window (${document.documentElement.clientWidth} px)`);
  for (const node of root.querySelectorAll('*')) {
    if (['SCRIPT', 'OPTION'].includes(node.tagName) || !node.getClientRects().length) continue;
    const rect = node.getBoundingClientRect();
    if ((!rect.width && !rect.height) || getComputedStyle(node).visibility === 'hidden') continue;
    const own = getComputedStyle(node).position === 'fixed' ? {rect: viewport, what: 'the window'} : holder(node);
    const box = own.rect;
    if (rect.left < box.left - tol || rect.right > box.right + tol || rect.top < box.top - tol
        || rect.bottom > box.bottom + tol) out.push(`${describe(node)} extends past ${own.what}`);
  }
  return out;
}"""

# Which elements (by selector) are not wholly inside the visible part of their nearest scroll box.
UNSEEN_JS = "selector => {" + DESCRIBE_JS + """
  const scrolls = node => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(node).overflowX);
  return [...document.querySelectorAll(selector)].filter(node => node.getClientRects().length).filter(node => {
    let box = node.parentElement;
    while (box && box !== document.body && !scrolls(box)) box = box.parentElement;
    const area = box && box !== document.body ? box.getBoundingClientRect() : {left: 0, right: innerWidth};
    const left = area.left + (box && box !== document.body ? box.clientLeft : 0);
    const right = box && box !== document.body ? left + box.clientWidth : area.right;
    const rect = node.getBoundingClientRect();
    return rect.left < left - 1 || rect.right > right + 1;
  }).map(describe);
}"""

# Every Content-Security-Policy violation of the page, kept for policy_problems (before any script runs).
VIOLATIONS_JS = """window.__rgViolations = [];
document.addEventListener('securitypolicyviolation', event => window.__rgViolations.push(
  `${event.effectiveDirective} refused ${event.blockedURI || 'inline code'} ${event.sample || ''}`.trim()));"""
POLICY_JS = """() => [...document.querySelectorAll('meta[http-equiv="Content-Security-Policy"]')].map(m => m.content)"""

# The first view's state after the next two frames (a model view scrolls its layer into sight in one).
STATE_JS = """() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => {
  const root = document.querySelector('.rgv[data-rgv]');
  const shown = node => node.getClientRects().length > 0;
  const rows = side => [...root.querySelectorAll(`.rgv-${side} .rgv-tok`)].filter(shown);
  // the pinned rows: aria-pressed where the view sets it, else the row drawn as active
  const pinned = side => {
    const all = rows(side), pressed = all.some(row => row.hasAttribute('aria-pressed'));
    const marked = row => pressed ? row.getAttribute('aria-pressed') === 'true' : row.classList.contains('rgv-active');
    return all.filter(marked).map(row => +row.dataset.i);
  };
  const current = [...root.querySelectorAll('[aria-current]:not([aria-current="false"])')].filter(shown);
  const inSight = node => {
    const rect = node.getBoundingClientRect();
    let box = node.parentElement;
    const scrolls = node => ['auto', 'scroll'].includes(getComputedStyle(node).overflowY);
    while (box && box !== root && !scrolls(box)) box = box.parentElement;
    const area = box && box !== root ? box.getBoundingClientRect() : {top: 0, bottom: innerHeight};
    return rect.top >= Math.max(area.top, 0) - 1 && rect.bottom <= Math.min(area.bottom, innerHeight) + 1;
  };
  done({
    state: root.getAttribute('data-rgv-state'), hash: location.hash.replace(/^#/, ''),
    left: pinned('left'), right: pinned('right'),
    drawn: [...rows('left'), ...rows('right')].filter(row => row.classList.contains('rgv-active'))
      .map(row => (row.closest('.rgv-left') ? 'query ' : 'key ') + row.dataset.i),
    qkToken: [...root.querySelectorAll('.rgv-qk-token[aria-pressed="true"]')].map(node => +node.dataset.i),
    currentLayers: current.map(node => node.dataset.layer), currentInSight: current.every(inSight),
  });
})))"""

# Sets the hash as a link on the page would and resolves once the view has followed it.
# Sets the hash, then waits for the view to apply it: the next frame, and, where the state asks for heads the
# page loads from its data files (another layer, the contributions), until they are in and drawn (at most 15 s:
# then the state the view shows is reported).
FOLLOW_HASH_JS = """text => new Promise(done => {
  if (location.hash === '#' + text) return done();
  const until = Date.now() + 15000;
  const loaded = () => document.querySelector('.rgv[data-rgv-loading]') && Date.now() < until
    ? setTimeout(loaded, 20) : done();
  addEventListener('hashchange', () => requestAnimationFrame(loaded), {once: true});
  location.hash = text;
})"""

# Every chart mark item with an href or a pointer cursor, with its DOM element's centre and what a
# click there hits (the scene graph's marks and the SVG's mark groups come in the same order).
CHART_MARKS_JS = "() => {" + DESCRIBE_JS + """
  const out = [];
  for (const chart of document.querySelectorAll('[id^="chart-"]')) {
    if (!chart.rgView) continue;
    const marks = [];
    const walk = node => {
      if (!node || !node.marktype) return;
      if (node.role === 'mark') marks.push(node);
      (node.items || []).forEach(item => (item.items || []).forEach(walk));
    };
    walk(chart.rgView.scenegraph().root);
    const groups = [...chart.querySelectorAll('svg g.role-mark')];
    if (groups.length !== marks.length) { out.push({chart: chart.id, error: 'marks and SVG groups differ'}); continue; }
    const found = [];
    marks.forEach((mark, m) => (mark.items || []).forEach((item, i) => {
      const node = groups[m].children[i];
      const shown = node && node.getBoundingClientRect().width;
      if ((item.href || item.cursor === 'pointer') && shown) found.push([item, node, m, i]);
    }));
    const linked = new Set(found.filter(([item]) => item.href).map(([, node]) => node));
    chart.scrollIntoView({block: 'center', inline: 'center'});
    for (const [item, node, m, i] of found) {
      let rect = node.getBoundingClientRect();
      if (rect.top < 0 || rect.bottom > innerHeight || rect.left < 0 || rect.right > innerWidth) {
        node.scrollIntoView({block: 'center', inline: 'center'});
        rect = node.getBoundingClientRect();
      }
      const hit = document.elementFromPoint((rect.left + rect.right) / 2, (rect.top + rect.bottom) / 2);
      // another linked mark on top (overlapping points of a scatter plot) still opens a link
      const itself = hit === node || node.contains(hit);
      out.push({chart: chart.id, href: item.href || null, label: (node.getAttribute('aria-label') || '').slice(0, 60),
                reached: itself || linked.has(hit), itself, hit: hit ? describe(hit) : 'nothing', at: [m, i]});
    }
  }
  return out;
}"""

CLICK_MARK_JS = """([chart, m, i]) => {
  const node = document.getElementById(chart).querySelectorAll('svg g.role-mark')[m].children[i];
  node.scrollIntoView({block: 'center', inline: 'center'});
  const rect = node.getBoundingClientRect();
  return [(rect.left + rect.right) / 2, (rect.top + rect.bottom) / 2];
}"""


# ------------------------------------------------------------------ the site's pages and links, read from the files

@dataclass
class PageLinks:
    """What one page holds: its element ids, and the hrefs of its article, its chrome and its chart marks."""

    ids: set[str] = field(default_factory=set)
    content: list[str] = field(default_factory=list)
    chrome: list[str] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)
    chart_count: int = 0


class _LinkParser(HTMLParser):
    """Collects ids and hrefs; an <a> inside <article> is content, any other is Material's chrome."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found = PageLinks()
        self.article_depth = 0
        self.chart_spec: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if attributes.get("id"):
            self.found.ids.add(attributes["id"])
        if tag == "article":
            self.article_depth += 1
        if tag == "a" and attributes.get("href") is not None:
            (self.found.content if self.article_depth else self.found.chrome).append(attributes["href"])
        if tag == "script" and "data-rg-chart" in attributes:
            self.chart_spec = []

    def handle_endtag(self, tag):
        if tag == "article":
            self.article_depth -= 1
        if tag == "script" and self.chart_spec is not None:
            spec = json.loads("".join(self.chart_spec))
            self.found.charts += _spec_links(spec) + _computed_links(spec)
            self.found.chart_count += 1
            self.chart_spec = None

    def handle_data(self, data):
        if self.chart_spec is not None:
            self.chart_spec.append(data)


def _spec_links(value) -> list[str]:
    """Page links anywhere in a Vega-Lite spec (the hrefs its marks open)."""
    if isinstance(value, dict):
        return [link for item in value.values() for link in _spec_links(item)]
    if isinstance(value, list):
        return [link for item in value for link in _spec_links(item)]
    linked = isinstance(value, str) and (PAGE_LINK.match(value) or value.startswith("#view="))
    return [value] if linked else []


def _computed_links(spec: dict) -> list[str]:
    """The links a chart's marks compute from their rows (a "url" calculated per cell: the pattern heatmaps and
    attention matrices, reportgen.report.head_link_expression), as Vega draws them: its hrefs in vl-convert's SVG,
    less the base address vl-convert puts before a relative one."""
    if not any(step.get("as") == "url" for step in spec.get("transform", [])):
        return []
    import vl_convert

    hrefs = re.findall(r'href="([^"]+)"', vl_convert.vegalite_to_svg(spec))
    return list(dict.fromkeys(html.unescape(href).split("vega-datasets/", 1)[-1] for href in hrefs))


def read_pages(site: Path) -> dict[str, PageLinks]:
    pages = {}
    for path in sorted(site.glob("*.html")):
        parser = _LinkParser()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path.name] = parser.found
    return pages


def resolve(page: str, href: str) -> tuple[str | None, str]:
    """(site-relative file, fragment) of a link on `page`; file None for links that leave the site."""
    base = "file:///site/" + page
    parts = urlsplit(urljoin(base, href))
    if parts.scheme != "file" or not parts.path.startswith("/site/"):
        return None, parts.fragment
    target = unquote(parts.path[len("/site/"):]) or "index.html"
    return (target + "index.html" if target.endswith("/") else target), unquote(parts.fragment)


def is_view_hash(fragment: str) -> bool:
    return "=" in fragment and any(name in VIEW_KEYS for name, _ in parse_qsl(fragment))


def link_kind(page: str, href: str) -> str | None:
    """The kind of link for the clicking check (None: leaves the site, or a file download)."""
    target, fragment = resolve(page, href)
    if target is None or not target.endswith(".html"):
        return None
    if is_view_hash(fragment):
        return "view link on the same page" if target == page else "view link"
    if target == page:
        return "anchor on the same page" if fragment else None
    if target.endswith("-qk.html"):
        return "query/key link"
    if target == "glossary.html" and fragment and page != "glossary.html":
        return "glossary term"
    if EXAMPLE_PAGE.match(target):
        return "example link"
    return "chart or section link" if fragment else "page link"


def hash_fields(text: str) -> dict:
    """A view hash as comparable values ('heads' read as 'head', lists of heads sorted)."""
    fields = {}
    for name, value in parse_qsl(text.lstrip("#"), keep_blank_values=True):
        name = "head" if name == "heads" else name
        if name == "head":
            fields[name] = sorted({int(part) for part in value.split(",") if part.isdigit()})
        elif name in ("layer", "token", "key", "topk") and value.isdigit():
            fields[name] = int(value)
        elif name == "min":
            fields[name] = float(value)
        else:
            fields[name] = value
    return fields


# ------------------------------------------------------------------ a browser tab per viewport

class Tab:
    """One page in one browser context at one viewport, reused for every page it opens."""

    def __init__(self, context, site: Path, viewport: str):
        context.add_init_script(VIOLATIONS_JS)
        self.site = site
        self.viewport = viewport
        self.view = BrowserPage(context.new_page())
        self.page = self.view.page
        self.failed: list[str] = []
        self.not_file: list[str] = []  # BrowserPage blocks remote URLs but lets a local server through
        self.page.on("requestfailed", self._failed)
        self.page.on("request", lambda request: None if request.url.startswith(LOCAL_SCHEMES)
                     else self.not_file.append(request.url))

    def _failed(self, request) -> None:
        if "ERR_ABORTED" not in (request.failure or ""):  # cancelled by the next navigation (a favicon)
            self.failed.append(f"{request.url}: {request.failure}")

    def url(self, name: str, fragment: str = "") -> str:
        return (self.site / name).as_uri() + (f"#{fragment}" if fragment else "")

    def open(self, name: str, fragment: str = "") -> None:
        """A fresh load (about:blank first, so a link to another fragment of the same page reloads it too)."""
        if self.page.url.split("#")[0] == self.url(name):
            self.page.goto("about:blank")
        for found in (self.view.errors, self.view.remote_requests, self.view.dialogs, self.failed, self.not_file):
            found.clear()
        self.page.goto(self.url(name, fragment))
        self.wait_ready()

    def wait_ready(self) -> None:
        """Waits for the views and charts to be drawn: a readiness wait, not a speed test (benchmarks/ times the
        pages), so its bound is what a loaded CI machine needs (the patterns page's ~30 charts once took over 15 s
        with three test processes on two cores)."""
        self.page.wait_for_load_state("load")
        try:
            wait_until(self.page, READY_JS, timeout=READY_SECONDS * 1000)
        except Exception:  # noqa: BLE001 - reported as a problem of the page, with what it logged
            self.view.errors.append(f"the views or charts never finished drawing ({READY_SECONDS} s)")

    def problems(self, where: str) -> list[str]:
        """Errors, failed and remote requests and dialogs since the last open, each naming `where`."""
        found = [f"{where}: {error}" for error in self.view.errors
                 if not (self.failed and "Failed to load resource" in error)]  # each failed request logs one
        if self.failed:
            found.append(f"{where}: {len(self.failed)} failed requests: {', '.join(self.failed[:3])}")
        found += [f"{where}: request to {url}, not a file of the site" for url in self.not_file]
        return found + [f"{where}: dialog {text!r}" for text in self.view.dialogs]

    def state(self) -> dict:
        return self.page.evaluate(STATE_JS)


@pytest.fixture(scope="module")
def site(default_site) -> Path:
    return default_site


@pytest.fixture(scope="module")
def pages(site) -> dict[str, PageLinks]:
    return read_pages(site)


@pytest.fixture(scope="module")
def tabs(browser, site):
    contexts, opened = [], {}
    for viewport, (width, height) in VIEWPORTS.items():
        contexts.append(browser.new_context(viewport={"width": width, "height": height}))
        opened[viewport] = Tab(contexts[-1], site, viewport)
    yield opened
    for context in contexts:
        context.close()


def _report(failures: list[str]) -> str:
    return f"{len(failures)} failures:\n" + "\n".join(failures[:80])


# ------------------------------------------------------------------ checks, one function each

def view_state_problems(tab: Tab, fragment: str, where: str) -> list[str]:
    """Whether the first view shows what `fragment` asks for: its fields in the view's state, the
    pinned token's row marked and its lines drawn, a model view's layer row highlighted and in sight."""
    wanted = hash_fields(fragment)
    seen = tab.state()
    if seen["state"] is None:
        return [f"{where}: no view state (data-rgv-state) after following #{fragment}"]
    got = hash_fields(seen["state"])
    out = [f"{where}: asked for {name}={value!r}, the view shows {got.get(name)!r} (state {seen['state']!r})"
           for name, value in wanted.items() if got.get(name) != value]
    if wanted.get("view") == "qk":
        if "token" in wanted and seen["qkToken"] != [wanted["token"]]:
            out.append(f"{where}: query token {wanted['token']} asked for, marked {seen['qkToken']}")
        return out
    for name, side, label in (("token", "left", "query"), ("key", "right", "key")):
        if name not in wanted:
            continue
        if seen[side] != [wanted[name]]:
            out.append(f"{where}: {label} token {wanted[name]} asked for, pinned rows {seen[side]}, "
                       f"lines drawn for {seen['drawn'] or 'every token'}")
        elif seen["drawn"] != [f"{label} {wanted[name]}"]:
            out.append(f"{where}: {label} token {wanted[name]} is pinned but the view draws {seen['drawn']} "
                       "(the pointer, left where the link was, now hovers the view)")
    if wanted.get("view") == "model" and "layer" in wanted:
        if seen["currentLayers"] != [str(wanted["layer"])]:
            out.append(f"{where}: layer {wanted['layer']}'s row should be highlighted (aria-current), "
                       f"highlighted: {seen['currentLayers']}")
        elif not seen["currentInSight"]:
            out.append(f"{where}: layer {wanted['layer']}'s highlighted row is not scrolled into sight")
    return out


def settled_view_problems(tab: Tab, fragment: str, where: str) -> list[str]:
    """view_state_problems once the view has applied the link: the address changes first and the view follows on
    its hashchange event, which a loaded machine runs later (CI once read the old state). Asked again after every
    two frames the page draws until nothing is left or READY_SECONDS pass; then what is left is a failure."""
    deadline = time.monotonic() + READY_SECONDS
    while (problems := view_state_problems(tab, fragment, where)) and time.monotonic() < deadline:
        next_frames(tab.page)
    return problems


def hash_range_problems(report: dict, target: str, fragment: str) -> list[str]:
    """A view link's fields name a view, layer, heads and tokens the target page has (checked without a browser)."""
    tokens = {example["page"]: example["n_tokens"] for example in report["examples"]}.get(
        target.replace("-qk.html", ".html"))
    fields = hash_fields(fragment)
    limits = {"layer": report["layers"], "token": tokens, "key": tokens}
    out = [f"{target}#{fragment}: {name} {fields[name]} is out of range (< {limit})"
           for name, limit in limits.items() if name in fields and (limit is None or not fields[name] < limit)]
    if fields.get("view") not in ("head", "model", "qk"):
        out.append(f"{target}#{fragment}: no view named")
    if any(head >= report["heads"] for head in fields.get("head", [])):
        out.append(f"{target}#{fragment}: a head is out of range (< {report['heads']})")
    return out


def page_overflow_problems(tab: Tab, where: str) -> list[str]:
    found = tab.page.evaluate(PAGE_OVERFLOW_JS)
    if found["over"] <= TOLERANCE:
        return []
    return [f"{where}: the page scrolls {found['over']} px sideways; sticking out: {found['culprits']}"]


def containment_problems(tab: Tab, where: str) -> list[str]:
    found = tab.page.evaluate(CONTAIN_JS)
    head = [f"{where}: {line}" for line in found[:6]]
    return head + ([f"{where}: ... and {len(found) - 6} more elements"] if len(found) > 6 else [])


def target_problems(pages: dict[str, PageLinks], site: Path, page: str, href: str) -> list[str]:
    """A link's file exists, and its anchor too (view hashes are checked in the browser)."""
    if href.lower().startswith("javascript:"):
        return [f"{page}: link {href!r} runs script"]
    target, fragment = resolve(page, href)
    if target is None:
        return []
    if not (site / target).is_file():
        return [f"{page}: link {href!r} points to {target}, which is not in the site"]
    if fragment and not is_view_hash(fragment) and target in pages and fragment not in pages[target].ids:
        return [f"{page}: link {href!r}: {target} has no element with id {fragment!r}"]
    return []


def landing_problems(tab: Tab, page: str, href: str, where: str) -> list[str]:
    """After following `href` from `page`: the address is the link's, and its anchor or view state shows."""
    target, fragment = resolve(page, href)
    expected = tab.url(target, fragment)
    if tab.page.url.split("#")[0] != expected.split("#")[0] or (fragment and "#" not in tab.page.url):
        return [f"{where}: landed on {tab.page.url}, not {expected}"]
    if is_view_hash(fragment):
        return settled_view_problems(tab, fragment, where)
    if fragment:
        box = tab.page.locator(f"[id={json.dumps(fragment)}]").first.bounding_box()
        height = VIEWPORTS[tab.viewport][1]
        if box is None or box["y"] + box["height"] < 0 or box["y"] > height:
            return [f"{where}: #{fragment} is not on screen after the click ({box})"]
    return []


def click_link(tab: Tab, page: str, href: str, where: str) -> list[str]:
    link = tab.page.locator(f".md-content a[href={json.dumps(href)}]").first
    target, fragment = resolve(page, href)
    try:
        link.click(timeout=5_000)
        tab.page.wait_for_url(tab.url(target, fragment), timeout=10_000)
    except Exception as err:  # noqa: BLE001 - one failed link is reported with the others
        return [f"{where}: clicking {href!r} did not land: {str(err).splitlines()[0]}"]
    tab.wait_ready()
    return landing_problems(tab, page, href, where)


def policy_problems(tab: Tab, where: str) -> list[str]:
    """Issue 27: the page has one policy, with no 'unsafe-inline' or 'unsafe-eval' and nothing remote, and
    nothing the page did since it opened (its own scripts, Material's, Vega's, the clicks) was refused."""
    policies = tab.page.evaluate(POLICY_JS)
    if len(policies) != 1:
        return [f"{where}: {len(policies)} Content-Security-Policy elements, not one"]
    loose = [word for word in ("'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "*", "http:", "https:")
             if word in policies[0].split()]
    out = [f"{where}: the policy allows {word}" for word in loose]
    refused = tab.page.evaluate("() => window.__rgViolations")
    return out + [f"{where}: refused by the policy: {text}" for text in refused]


# ------------------------------------------------------------------ the tests

def example_problems(tab: Tab, where: str) -> list[str]:
    """An example page's views in each of EXAMPLE_STATES: nothing sticks out of its box or off the page."""
    out = []
    for label, click in EXAMPLE_STATES:
        if click:
            try:
                tab.page.click(click, timeout=5_000)
            except Exception as err:  # noqa: BLE001 - reported, and the later states depend on it
                return out + [f"{where}, {label}: {str(err).splitlines()[0]}"]
        out += containment_problems(tab, f"{where}, {label}") + page_overflow_problems(tab, f"{where}, {label}")
    return out


def query_key_problems(tab: Tab, where: str, viewport: str) -> list[str]:
    """The softmax column is in sight without scrolling; at laptop width the whole table fits."""
    out = containment_problems(tab, where)
    soft = tab.page.evaluate(UNSEEN_JS, ".rgv-soft")
    if soft:
        out.append(f"{where}: softmax cells out of sight: {soft[:3]} ({len(soft)})")
    columns = tab.page.evaluate(UNSEEN_JS, ".rgv-qk-table th") if viewport == "desktop" else []
    if columns:
        out.append(f"{where}: the table does not fit, columns out of sight: {columns}")
    return out


# over 60 s: every page of the default site, each view in its four states, drawn and measured
@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_every_page_fits_and_loads_cleanly(pages, tabs, viewport):
    """Every page: no sideways scroll, no error, no failed or remote request, a strict policy that refused
    nothing. Example pages: the views in each state stay inside their boxes; query/key pages: the softmax
    stays in sight."""
    tab, failures = tabs[viewport], []
    for name in pages:
        tab.open(name)
        where = f"{name} at {viewport}"
        failures += page_overflow_problems(tab, where)
        if EXAMPLE_PAGE.match(name):
            failures += example_problems(tab, where)
        elif name.endswith("-qk.html"):
            failures += query_key_problems(tab, where, viewport)
        failures += policy_problems(tab, where) + tab.problems(where)
    assert not failures, _report(failures)


def test_views_have_room_at_laptop_width(tabs):
    """Example 1 at 1366 px: with all 12 heads and a token pinned every weight shown is in sight without
    scrolling; the model view's grid fits, or scrolls with sticky layer and head labels."""
    tab, failures = tabs["desktop"], []
    tab.open("example-1.html", "view=head&layer=0&token=4")
    if not tab.page.locator(".rgv-head-panel .rgv-num").count():
        failures.append("example-1 at desktop: a pinned token shows no weights (.rgv-num)")
    unseen = tab.page.evaluate(UNSEEN_JS, ".rgv-head-panel .rgv-num")
    if unseen:
        failures.append(f"example-1 at desktop: {len(unseen)} weights out of sight (scroll needed), e.g. {unseen[:4]}")
    tab.open("example-1.html", "view=model")
    cut = tab.page.evaluate(UNSEEN_JS, ".rgv-thumb[data-layer='0']")
    sticky = tab.page.evaluate("""() => ['.rgv-grid-layer', '.rgv-grid-head'].every(selector =>
        getComputedStyle(document.querySelector(selector)).position === 'sticky')""")
    if cut and not sticky:
        failures.append(f"example-1 at desktop: the model view's grid is cut at {cut[:2]} ({len(cut)} heads) "
                        "and its labels do not stick")
    assert not failures + tab.problems("example-1"), _report(failures + tab.problems("example-1"))


def test_every_link_target_exists(site, pages):
    """Every href of every page (article, chrome, chart marks): its file, its anchor, a view link's range."""
    report = json.loads((site / "report.json").read_text(encoding="utf-8"))
    failures = []
    for name, found in pages.items():
        for href in sorted(set(found.content + found.chrome + found.charts)):
            failures += target_problems(pages, site, name, href)
            target, fragment = resolve(name, href)
            if target and is_view_hash(fragment):
                failures += [f"{name}: {problem}" for problem in hash_range_problems(report, target, fragment)]
    assert not failures, _report(failures)


def one_of_each_template(names, last: bool = True) -> list[str]:
    """Every page but the example and query/key pages after the first and (with `last`) the last of each: those
    come from one template each and differ only in their data, which the other tests of this file check on every
    page."""
    kinds: dict[str, list[str]] = {}
    for name in names:
        kinds.setdefault(re.sub(r"^example-\d+", "example-N", name), []).append(name)
    ends = (lambda group: [group[0], group[-1]]) if last else (lambda group: group[:1])
    return [name for group in kinds.values() for name in (group if len(group) < 3 else ends(group))]


# over 60 s: a click per kind of link on each of the default site's ~45 pages, each landing awaited
def test_one_link_of_each_kind_is_clicked_on_every_kind_of_page(pages, tabs):
    """Desktop: per page the same-page view links are clicked (head_map_ends), then the first link of each
    other kind; of the example and query/key pages the first only (their links come from one template each, and
    test_every_link_target_exists checks every page's without a browser; CI time)."""
    tab, failures = tabs["desktop"], []
    for name in one_of_each_template(pages, last=False):
        found = pages[name]
        tab.open(name)
        kinds: dict[str, list[str]] = {}
        for href in dict.fromkeys(found.content):
            kind = link_kind(name, href)
            if kind:
                kinds.setdefault(kind, []).append(href)
        for href in head_map_ends(kinds.pop("view link on the same page", [])):
            failures += click_link(tab, name, href, f"{name}: same-page view link {href!r}")
        for count, (kind, hrefs) in enumerate(sorted(kinds.items(), key=lambda item: "same" not in item[0])):
            failures += click_link(tab, name, hrefs[0], f"{name}: {kind} {hrefs[0]!r}")
            failures += tab.problems(f"{name} -> {hrefs[0]!r}")
            if count < len(kinds) - 1 and tab.page.url.split("#")[0] != tab.url(name):
                tab.open(name)
    assert not failures, _report(failures)


def head_map_ends(hrefs: list[str]) -> list[str]:
    """The same-page view links to click: of those that pin a token (the text's tokens) and of the bare ones (an
    example's head map, a cell per head), the first and last each (CI time: every pinned token's link was 40 s;
    test_every_link_target_exists checks every target without a browser, and
    tests/site/browser/test_head_map_browser.py clicks every cell on a tiny site)."""
    bare = [href for href in hrefs if "token=" not in href and "key=" not in href]
    pinned = [href for href in hrefs if href not in bare]
    return list(dict.fromkeys(pinned[:1] + pinned[-1:] + bare[:1] + bare[-1:]))


# over 60 s: a page load per view link followed, waiting for the restored state
def test_view_links_from_other_pages_and_charts_restore_their_state(pages, tabs):
    """Desktop: view links of the articles, the first per target page opened fresh and the others followed
    there; of the chart marks' view links (all range-checked without a browser) every model-view one and
    the first and last per target page are followed."""
    tab, failures = tabs["desktop"], []
    links: dict[str, list[str]] = {}
    for name, found in pages.items():
        for href in found.content:
            target, fragment = resolve(name, href)
            if link_kind(name, href) == "view link":
                links.setdefault(target, []).append(fragment)
        charted: dict[str, list[str]] = {}
        for target, fragment in (resolve(name, href) for href in found.charts):
            if target and is_view_hash(fragment):
                charted.setdefault(target, []).append(fragment)
        for target, fragments in charted.items():
            ordered = sorted(set(fragments))
            links.setdefault(target, []).extend(
                [ordered[0], ordered[-1]] + [text for text in ordered if "view=model" in text])
    assert sum(map(len, links.values())) >= 6, links
    for target, fragments in sorted(links.items()):
        fragments = list(dict.fromkeys(fragments))
        tab.open(target, fragments[0])
        failures += settled_view_problems(tab, fragments[0], f"{target}#{fragments[0]} opened fresh")
        for fragment in fragments[1:]:
            tab.page.evaluate(FOLLOW_HASH_JS, fragment)
            failures += settled_view_problems(tab, fragment, f"{target}#{fragment} followed on the page")
        failures += tab.problems(target)
    assert not failures, _report(failures)


def nav_link(tab: Tab, href: str):
    """The visible copy of a navigation link on the open page; in a collapsed section, the section is
    opened first by a click on its label, as a reader would. None where it cannot be shown."""
    selector = f"a[href={json.dumps(href)}]:not(.md-content a)"
    link = tab.page.locator(f"{selector} >> visible=true").first
    if link.count():
        return link
    toggle = tab.page.evaluate("""selector => {
        const item = document.querySelector(selector)?.closest('.md-nav__item--nested');
        const input = item && item.querySelector(':scope > input.md-nav__toggle');
        return input ? input.id : null;
    }""", selector)
    if toggle:
        tab.page.locator(f"label[for={json.dumps(toggle)}] >> visible=true").first.click(timeout=5_000)
        try:  # the section opens with a transition: under load the link is shown a moment after the click
            link.wait_for(state="visible", timeout=10_000)
        except Exception:  # noqa: BLE001 - not shown: the caller reports it
            return None
    return link if link.count() else None


# over 60 s: each navigation link clicked from the home page, each landing awaited
def test_site_navigation_links_land(pages, tabs):
    """Material's header, navigation, table of contents and footer, once: every internal link of the home
    page's is clicked from the home page, of the links to example pages the first and the last of each kind
    (one_of_each_template: the others are the same entry of the same menu; test_every_link_target_exists checks
    each target). Example pages keep the navigation in the header's menu (a drawer, to give the views the width):
    it opens there and its links land too."""
    tab, failures = tabs["desktop"], []
    hrefs = [href for href in dict.fromkeys(pages["index.html"].chrome)
             if (resolve("index.html", href)[0] or "").endswith(".html")]
    assert len(hrefs) >= 8, hrefs
    hrefs = one_of_each_template(hrefs)
    for href in sorted(hrefs, key=lambda href: not href.startswith("#")):
        tab.open("index.html")
        link = nav_link(tab, href)
        here = "index.html"
        where = f"navigation link {href!r} (on {here})"
        if link is None:
            failures.append(f"{where}: not shown at 1366 px")
            continue
        target, fragment = resolve(here, href)
        try:
            if "md-skip" in (link.get_attribute("class") or ""):  # shown on keyboard focus only
                link.focus()
                tab.page.keyboard.press("Enter")
            else:
                link.scroll_into_view_if_needed(timeout=5_000)
                link.click(timeout=5_000)
            tab.page.wait_for_url(tab.url(target, fragment), wait_until="commit", timeout=30_000)
        except Exception as err:  # noqa: BLE001 - reported with the others
            failures.append(f"{where}: {str(err).splitlines()[0]}")
            continue
        tab.wait_ready()
        failures += landing_problems(tab, here, href, where) + tab.problems(where)
    tab.open("example-1.html")
    width = tab.page.evaluate("document.querySelector('.md-content').getBoundingClientRect().width")
    if width < 1200:
        failures.append(f"example-1.html: the views get {width:.0f} px of 1366; the navigation belongs in the menu")
    tab.page.locator("label.md-header__button[for='__drawer']").click(timeout=5_000)
    link = nav_link(tab, "example-2.html")
    assert link is not None, "example-1.html: the header's menu shows no link to example 2"
    link.click(timeout=5_000)
    tab.page.wait_for_url(tab.url("example-2.html", ""), timeout=10_000)
    assert not failures, _report(failures)


def state_problems(tab: Tab, where: str, **wanted) -> list[str]:
    """The view's state has `wanted` (None: the field is absent) and the address follows the state."""
    seen = tab.state()
    got = hash_fields(seen["state"] or "")
    out = [f"{where}: {name} should be {value!r}, the view has {got.get(name)!r} (state {seen['state']!r})"
           for name, value in wanted.items() if got.get(name) != value]
    if seen["hash"] != seen["state"]:
        out.append(f"{where}: the address #{seen['hash']} does not follow the view's state {seen['state']!r}")
    return out


class Controls:
    """Uses one control after another on the open page, each followed by its expected state."""

    def __init__(self, tab: Tab, where: str):
        self.tab, self.page, self.where, self.failures = tab, tab.page, where, []

    def act(self, label: str, action, **wanted) -> bool:
        try:
            action()
        except Exception as err:  # noqa: BLE001 - a control that cannot be used is reported with the others
            self.failures.append(f"{self.where}, {label}: {str(err).splitlines()[0]}")
            return False
        # a view that fetches a layer's data file draws (and writes its state) when the file is in
        wait_until(self.page, LOADED_JS, timeout=15_000)
        self.failures += state_problems(self.tab, f"{self.where}, {label}", **wanted)
        return True

    def reset(self, fragment: str) -> None:
        """Puts the view in a known state through its link (as a link on the page would), so that one
        control that fails does not make the next ones fail."""
        self.page.evaluate(FOLLOW_HASH_JS, fragment)
        self.page.mouse.move(0, 0)  # away from the view: no hover over a token

    def visible(self, selector: str) -> bool:
        return self.page.locator(selector).first.is_visible()

    def copy_link(self, scope: str) -> None:
        """The copy control says it copied, or shows the link; either way the link is the view's state."""
        try:
            self.page.click(f"{scope} .rgv-copy", timeout=5_000)
            wait_until(self.page, f"() => document.querySelector({json.dumps(scope + ' .rgv-copy-note')})"
                                  ".textContent !== ''", timeout=3_000)
        except Exception as err:  # noqa: BLE001 - reported with the others
            self.failures.append(f"{self.where}, copy link: {str(err).splitlines()[0]}")
            return
        link, state = self.page.input_value(f"{scope} .rgv-link"), self.tab.state()["state"]
        if not link.endswith("#" + state):
            self.failures.append(f"{self.where}, copy link: the link {link!r} is not the view's state {state!r}")


def head_view_controls(controls: Controls, every: list[int]) -> None:
    page = controls.page
    controls.act("layer select to 3", lambda: page.select_option(".rgv-layer", "3"), view="head", layer=3, head=every)
    controls.act("head toggle 5", lambda: page.click(".rgv-head-toggle[data-head='5']"),
                 head=[h for h in every if h != 5])
    controls.act("None (heads)", lambda: page.click(".rgv-heads-none"), head=[])
    controls.act("All (heads)", lambda: page.click(".rgv-heads-all"), head=every)
    controls.act("double-click head 2", lambda: page.dblclick(".rgv-head-toggle[data-head='2']"), head=[2])
    filters = page.eval_on_selector_all(".rgv-filter-btn", "els => els.map(e => e.dataset.filter)")
    for flt in [*filters, "all"][1 if filters else 0:]:  # each one, then back to all
        controls.act(f"filter {flt}", lambda flt=flt: page.click(f".rgv-filter-btn[data-filter='{flt}']"),
                     filter=None if flt == "all" else flt)
    most = page.get_attribute(".rgv-topk", "max")
    for selector, value, name, parsed in ((".rgv-topk", "3", "topk", 3), (".rgv-min", "0.05", "min", 0.05),
                                          (".rgv-topk", most, "topk", None), (".rgv-min", "0", "min", None)):
        controls.act(f"{name} input {value}", lambda s=selector, v=value: (page.fill(s, v), page.press(s, "Tab")),
                     **{name: parsed})
    left, right = ".rgv-head-panel .rgv-left .rgv-tok", ".rgv-head-panel .rgv-right .rgv-tok"
    controls.act("click token 4", lambda: page.click(f"{left}[data-i='4']"), token=4)
    controls.act("Escape", lambda: page.keyboard.press("Escape"), token=None)
    controls.reset("view=head&layer=3&head=2")  # each step below from a state without a pin
    controls.act("Enter on token 3", lambda: (page.focus(f"{left}[data-i='3']"), page.keyboard.press("Enter")),
                 token=3)
    controls.reset("view=head&layer=3&head=2")
    controls.act("click key 2", lambda: page.click(f"{right}[data-i='2']"), key=2, token=None)
    controls.act("click key 2 again", lambda: page.click(f"{right}[data-i='2']"), key=None)
    controls.copy_link(".rgv-toolbar")
    controls.reset("view=head&layer=3&head=2")


def model_view_controls(controls: Controls) -> None:
    page, tab = controls.page, controls.tab
    controls.act("Model view tab", lambda: page.click(".rgv-tab[data-view='model']"), view="model", layer=3)
    if tab.state()["currentLayers"] != ["3"]:
        controls.failures.append(f"{controls.where}, model view: layer 3's row is not highlighted "
                                 f"(aria-current on {tab.state()['currentLayers']})")
    if controls.visible(".rgv-layer"):  # shown in the model view, so it must act on the grid
        controls.act("layer select to 4 in the model view", lambda: page.select_option(".rgv-layer", "4"), layer=4)
        if tab.state()["currentLayers"] != ["4"]:
            controls.failures.append(f"{controls.where}: the layer select does not move the grid's highlighted row")
    if controls.visible(".rgv-head-toggle"):
        before = tab.state()["state"]
        page.click(".rgv-head-toggle[data-head='0']")
        if tab.state()["state"] == before:
            controls.failures.append(f"{controls.where}: a head toggle is shown in the model view and does nothing")
    if page.locator(".rgv-grid-layer[data-layer='1']").count():
        controls.act("row label L1", lambda: page.click(".rgv-grid-layer[data-layer='1']"), view="model", layer=1)
    grid_top = page.locator(".rgv-grid").bounding_box()["y"]
    controls.act("thumbnail layer 1 head 8", lambda: page.click(".rgv-thumb[data-layer='1'][data-head='8']"),
                 view="model", layer=1, head=[8])
    if not controls.visible(".rgv-zoom"):
        controls.failures.append(f"{controls.where}: the enlarged head is not shown")
    moved = page.locator(".rgv-grid").bounding_box()["y"] - grid_top
    if abs(moved) > TOLERANCE:
        controls.failures.append(f"{controls.where}: enlarging a head moved the grid {moved:.0f} px (not in place)")
    if page.locator(".rgv-zoom .rgv-tok.rgv-active").count():
        controls.failures.append(f"{controls.where}: the still pointer switched the enlarged head to one token")
    controls.act("Close (enlarged head)", lambda: page.click(".rgv-zoom-close"), view="model", head=None)
    if controls.visible(".rgv-zoom"):
        controls.failures.append(f"{controls.where}: Close left the enlarged head open")
    controls.act("Head view tab", lambda: page.click(".rgv-tab[data-view='head']"), view="head", layer=1, head=[8])


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_every_control_of_an_example_view_acts(tabs, viewport):
    """Example 1 (a sentence pair, so the filters show): every toolbar control, tokens, model view, enlarged
    head, copy link, then the query/key link, which carries the layer, head and token."""
    tab = tabs[viewport]
    tab.open("example-1.html")
    controls = Controls(tab, f"example-1 at {viewport}")
    every = list(range(tab.page.locator(".rgv-head-toggle").count()))
    head_view_controls(controls, every)
    model_view_controls(controls)
    page = tab.page
    controls.act("pin token 4 before the query/key link", lambda: page.click(
        ".rgv-head-panel .rgv-left .rgv-tok[data-i='4']"), token=4)
    qk = page.locator(".rgv-qk-link") if page.locator(".rgv-qk-link").count() else page.locator(
        ".md-content a[href^='example-1-qk.html']")
    href = qk.first.get_attribute("href") or ""
    if hash_fields(href.partition("#")[2]) != {"view": "qk", "layer": 1, "head": [8], "token": 4}:
        controls.failures.append(f"{controls.where}: the query/key link {href!r} does not carry layer 1, "
                                 "head 8 and token 4")
    controls.failures += tab.problems(controls.where)
    controls.failures += click_link(tab, "example-1.html", href, f"{controls.where}, query/key link")
    assert not controls.failures, _report(controls.failures)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_every_control_of_a_query_key_page_acts(tabs, viewport):
    tab = tabs[viewport]
    tab.open("example-1-qk.html")
    page = tab.page
    controls = Controls(tab, f"example-1-qk at {viewport}")
    controls.act("layer select to 2", lambda: page.select_option(".rgv-layer", "2"), view="qk", layer=2)
    controls.act("head select to 5", lambda: page.select_option(".rgv-head", "5"), layer=2, head=[5])
    controls.act("query token 7", lambda: page.click(".rgv-qk-token[data-i='7']"), layer=2, head=[5], token=7)
    controls.copy_link(".rgv-toolbar")
    assert not controls.failures + tab.problems(controls.where), _report(controls.failures)


def chart_problems(tab: Tab, name: str, click: bool) -> list[str]:
    """Marks with a pointer cursor have a link; a click at each one's centre reaches it; one is clicked."""
    marks = tab.page.evaluate(CHART_MARKS_JS)
    out = [f"{name} {mark['chart']}: {mark['error']}" for mark in marks if "error" in mark]
    marks = [mark for mark in marks if "error" not in mark]
    for chart in dict.fromkeys(mark["chart"] for mark in marks):
        dead = [mark for mark in marks if mark["chart"] == chart and not mark["href"]]
        if dead:
            out.append(f"{name} {chart}: {len(dead)} marks look clickable (pointer cursor) and open nothing, "
                       f"e.g. {dead[0]['label']!r}")
    for mark in marks:
        if mark["href"] and not mark["reached"]:
            out.append(f"{name} {mark['chart']}: a click on {mark['label']!r} lands on {mark['hit']}, "
                       "which opens nothing")
    linked = [mark for mark in marks if mark["href"] and (mark["itself"] or not mark["reached"])]
    if not click or not linked:
        return out
    mark = next((mark for mark in linked if not mark["reached"]), linked[0])  # a covered one shows the bug
    where = f"{name} {mark['chart']}: click on {mark['label']!r}"
    target, fragment = resolve(name, mark["href"])
    x, y = tab.page.evaluate(CLICK_MARK_JS, [mark["chart"], *mark["at"]])
    tab.page.mouse.click(x, y)
    try:
        tab.page.wait_for_url(tab.url(target, fragment), timeout=5_000)
    except Exception:  # noqa: BLE001 - reported below
        return out + [f"{where} did not open {mark['href']} (still on {tab.page.url})"]
    tab.wait_ready()
    return out + landing_problems(tab, name, mark["href"], where)


def test_chart_marks_that_look_clickable_open_their_link(pages, tabs):
    """Desktop: every chart page; one mark clicked per page with charts. An example page's entropy map is drawn at
    build time (issue 47): its cells are links like the head map's, and the page has no Vega chart."""
    tab, failures = tabs["desktop"], []
    with_charts = [name for name, found in pages.items() if found.chart_count]
    assert {"patterns.html", "statistics.html", "ablation.html"} <= set(with_charts), with_charts
    assert not [name for name in with_charts if EXAMPLE_PAGE.match(name)], with_charts
    for name in with_charts:
        tab.open(name)
        failures += chart_problems(tab, name, click=True)
        failures += tab.problems(name)
    for name, wanted in (("statistics.html", "the statistics charts"),):
        if not pages[name].charts:
            failures.append(f"{name}: {wanted} links to no head's view (issue 13: clickable-looking charts click)")
    assert not failures, _report(failures)
