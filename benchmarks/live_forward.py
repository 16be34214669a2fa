"""The "Your sentence" page (config `views.live`) in headless Chromium from file://: how long a reader waits.

Figures, each the median over --runs page loads (a fresh browser context each, so nothing is cached):
- ready: from navigation until the weights are loaded and decoded in the worker (window.reportgen.live.ready);
- first view: from navigation until the first example (the seed pair) is drawn;
- forward: the seed pair's forward pass in the worker (window.reportgen.live.last.ms), its first run on the page
  and then --repeats more runs of the same input typed into the form (warm: the worker's code is compiled).

Builds a site with the embedded model (no ablation, the seed pair as its first example) unless --site DIR names
one built with `views: {live: true}`.

Run: .venv/bin/python benchmarks/live_forward.py [--site DIR] [--runs 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
SEED = ("I went to the store.", "At the store, I bought fresh strawberries.")
CONFIG = f"""title: Your sentence, timed
ablation: {{enabled: false}}
views: {{live: true}}
examples:
  - {{text: "{SEED[0]}", pair: "{SEED[1]}"}}
"""
RUNS_JS = "(count) => window.reportgen && window.reportgen.live && window.reportgen.live.runs >= count"


def build_site(project: Path) -> Path:
    from reportgen.config import load_config
    from reportgen.pipeline import build

    (project / "reportgen.yaml").write_text(CONFIG, encoding="utf-8")
    build(load_config(project / "reportgen.yaml"))
    return project / "site"


def wait_for(page, predicate: str, arg=None, timeout: float = 300.0) -> float:
    """Seconds until `predicate(arg)` holds in the page (polled; the page's CSP refuses eval'd waits)."""
    start = time.perf_counter()
    while not page.evaluate(predicate, arg):
        if page.evaluate("() => window.reportgen && window.reportgen.live && window.reportgen.live.error"):
            raise RuntimeError(page.evaluate("() => window.reportgen.live.error"))
        if time.perf_counter() - start > timeout:
            raise TimeoutError(predicate)
        time.sleep(0.01)
    return time.perf_counter() - start


def one_load(browser, page_url: str, repeats: int) -> dict[str, float | list[float]]:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        page = context.new_page()
        started = time.perf_counter()
        page.goto(page_url, wait_until="commit")
        wait_for(page, "() => window.reportgen && window.reportgen.live && window.reportgen.live.ready")
        ready = time.perf_counter() - started
        wait_for(page, RUNS_JS, 1)
        shown = time.perf_counter() - started
        forwards = [page.evaluate("() => window.reportgen.live.last.ms")]
        for run in range(repeats):
            page.fill("#rg-live-text", SEED[0])
            page.fill("#rg-live-pair", SEED[1])
            page.click(".rg-live-form button[type=submit]")
            wait_for(page, RUNS_JS, run + 2)
            forwards.append(page.evaluate("() => window.reportgen.live.last.ms"))
        return {"ready": ready, "shown": shown, "first": forwards[0], "warm": forwards[1:]}
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a site built with views.live (default: build one)")
    parser.add_argument("--runs", type=int, default=3, help="page loads (default: 3)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of the seed pair per load after the first")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as temp:
        site = args.site or build_site(Path(temp))
        url = (site / "your-sentence.html").resolve().as_uri()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            loads = [one_load(browser, url, args.repeats) for _ in range(args.runs)]
            browser.close()
    weights = sum(path.stat().st_size for path in (site / "live").iterdir()) if args.site else None
    print(f"'Your sentence' page, {args.runs} loads from file:// in headless Chromium (medians)")
    print(f"  weights loaded and decoded  {statistics.median(load['ready'] for load in loads):7.2f} s")
    print(f"  first example drawn         {statistics.median(load['shown'] for load in loads):7.2f} s")
    print(f"  seed pair forward, first    {statistics.median(load['first'] for load in loads):7.0f} ms")
    warm = [ms for load in loads for ms in load["warm"]]
    print(f"  seed pair forward, warm     {statistics.median(warm):7.0f} ms (median of {len(warm)}; "
          f"min {min(warm):.0f}, max {max(warm):.0f})")
    if weights is not None:
        print(f"  live/ files                 {weights:,} bytes")


if __name__ == "__main__":
    main()
