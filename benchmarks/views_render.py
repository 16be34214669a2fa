"""First-render time of the head view in headless Chromium (Performance API), median of 5 page loads.

Two figures per example, both read from the page:
- init -> first render: performance.measure('rgv-first-render') that the views record
  (decode the payload, build the DOM, draw the lines of the default heads);
- navigation start -> first render: performance.now() at that moment, which also counts
  loading and parsing the page and its embedded JSON.

Run: .venv/bin/python benchmarks/views_render.py
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reportgen.config import ExampleSpec  # noqa: E402
from reportgen.site.views import example_payload, standalone_page, views_html  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
REPEATS = 5
PAIR = ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries.")
SENTENCE = "The committee met on Tuesday, and after a long debate it approved the budget."
LONG = ExampleSpec(text=" ".join([SENTENCE] * 12))
CASES = [("pair-19", PAIR, 512), ("long-128", LONG, 128),
         ("long-512", LONG.model_copy(update={"text": LONG.text * 4}), 512)]


def build_pages(target: Path) -> dict[str, tuple[Path, int]]:
    from reportgen.model.loading import load, resolve
    from reportgen.model.run import run_example

    _, path = resolve("default")
    model, tokenizer = load(path, "cpu")
    shutil.copytree(REPO / "site_src" / "assets", target / "assets")
    pages = {}
    for name, spec, max_length in CASES:
        run = run_example(model, tokenizer, spec, max_length)
        page = target / f"{name}.html"
        page.write_text(standalone_page(views_html(example_payload(run)), name), encoding="utf-8")
        pages[name] = (page, run.n_tokens)
    return pages


def measure(browser, page_path: Path) -> tuple[float, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page.goto(page_path.as_uri())
    page.wait_for_selector(".rgv[data-first-render-at]")
    init = page.evaluate("performance.getEntriesByName('rgv-first-render')[0].duration")
    since_nav = float(page.get_attribute(".rgv", "data-first-render-at"))
    context.close()
    return init, since_nav


def main() -> int:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        pages = build_pages(Path(tmp))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            print(f"head view first render, median of {REPEATS} loads (headless Chromium, file://)")
            for name, (path, tokens) in pages.items():
                runs = [measure(browser, path) for _ in range(REPEATS)]
                init = statistics.median(r[0] for r in runs)
                nav = statistics.median(r[1] for r in runs)
                size = path.stat().st_size
                print(f"  {name:9s} {tokens:4d} tokens, page {size:>11,} bytes: "
                      f"init->render {init:7.1f} ms, navigation->render {nav:7.1f} ms")
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
