"""The views in headless Chromium from file:// (Performance API): first render, and the switch to contributions.

Each figure is the median of REPEATS page loads, on two pages per example:
- "site": the page as a site writes it (reportgen.site.view_files.example_html: layer 0's weights inline,
  the rest in data files beside the page, loaded when a view draws them);
- "inline": the whole payload in the page (views.views_html), as notebooks and `reportgen view` carry it.

Per page:
- init -> first render: performance.measure('rgv-first-render') that the views record
  (decode the payload, build the DOM, draw the lines of the default heads);
- navigation start -> first render: performance.now() at that moment, which also counts
  loading and parsing the page and its embedded JSON;
- switch: from a click on "contributions" (the head view at layer 0, as the page opens) until the view has
  drawn them and the next frame is painted, loading their data file where the page keeps them in one.

With --site DIR it also measures DIR/example-1.html, a built site's page (MkDocs chrome, charts and all).

Run: .venv/bin/python benchmarks/views_render.py [--site DIR] [--cases pair-19 ...]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reportgen.config import ExampleSpec  # noqa: E402
from reportgen.site import view_files  # noqa: E402
from reportgen.site.views import example_payload, standalone_page, views_html  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
REPEATS = 7
PAIR = ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries.")
SENTENCE = "The committee met on Tuesday, and after a long debate it approved the budget."
LONG = ExampleSpec(text=" ".join([SENTENCE] * 12))
CASES = [("pair-19", PAIR, 512), ("long-128", LONG, 128),
         ("long-512", LONG.model_copy(update={"text": LONG.text * 4}), 512)]
# The view drawn, with nothing loading (a long site page loads its first head from a file).
DRAWN = ".rgv[data-first-render-at][data-rgv-state]:not([data-rgv-loading])"
# Clicks "contributions" and resolves, in ms, once the view shows them drawn and a frame has been painted.
SWITCH_JS = """async () => {
  const root = document.querySelector('.rgv');
  const button = root.querySelector('.rgv-mode-btn[data-mode="contributions"]');
  if (!button) return null;
  const start = performance.now();
  const drawn = () => root.getAttribute('data-rgv-mode') === 'contributions' && !root.hasAttribute('data-rgv-loading');
  button.click();
  if (!drawn()) {
    await new Promise((resolve) => {
      const watch = new MutationObserver(() => { if (drawn()) { watch.disconnect(); resolve(); } });
      watch.observe(root, { attributes: true });
    });
  }
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  return performance.now() - start;
}"""


def build_pages(target: Path, names: list[str]) -> dict[str, tuple[Path, int]]:
    from reportgen.model.loading import load, resolve
    from reportgen.model.run import run_example

    _, path = resolve("default")
    model, tokenizer = load(path, "cpu")
    shutil.copytree(REPO / "site_src" / "assets", target / "assets")
    pages = {}
    for number, (name, spec, max_length) in enumerate(CASES, start=1):
        if name not in names:
            continue
        run = run_example(model, tokenizer, spec, max_length)
        payload = example_payload(run)
        for kind, body in (("site", view_files.example_html(target, number, payload)), ("inline", views_html(payload))):
            page = target / f"{name}-{kind}.html"
            page.write_text(standalone_page(body, name), encoding="utf-8")
            pages[f"{name} {kind}"] = (page, run.n_tokens)
    return pages


def measure(browser, page_path: Path) -> tuple[float, float, float | None]:
    """(init -> first render, navigation -> first render, contributions switch) in ms, of one page load."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page.goto(page_path.as_uri())
    page.wait_for_selector(DRAWN, timeout=120_000)
    init = page.evaluate("performance.getEntriesByName('rgv-first-render')[0].duration")
    since_nav = float(page.get_attribute(".rgv", "data-first-render-at"))
    switch = page.evaluate(SWITCH_JS)
    context.close()
    return init, since_nav, switch


def report(browser, name: str, path: Path, tokens: int | None) -> None:
    runs = [measure(browser, path) for _ in range(REPEATS)]
    init = statistics.median(r[0] for r in runs)
    nav = statistics.median(r[1] for r in runs)
    switches = [r[2] for r in runs if r[2] is not None]
    switch = f"{statistics.median(switches):7.1f} ms" if switches else "    (none)"
    count = f"{tokens:4d} tokens, " if tokens is not None else ""
    print(f"  {name:16s} {count}page {path.stat().st_size:>11,} bytes: init->render {init:7.1f} ms, "
          f"navigation->render {nav:7.1f} ms, switch to contributions {switch}")


def main() -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, help="a built site: also measure its example-1.html")
    parser.add_argument("--cases", nargs="+", choices=[case[0] for case in CASES], default=[case[0] for case in CASES],
                        help="the examples to measure (default: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pages = build_pages(Path(tmp), args.cases)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            print(f"median of {REPEATS} loads (headless Chromium, file://)")
            for name, (path, tokens) in pages.items():
                report(browser, name, path, tokens)
            if args.site:
                report(browser, "built site", args.site / "example-1.html", None)
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
