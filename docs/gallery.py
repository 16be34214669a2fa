"""Build the gallery's example reports: `python docs/gallery.py` (all), `--only NAME ...` (some).

Each report is built by the real command line (`reportgen build --reproducible`) from a recipe or a config here,
nothing downloaded, into docs/gallery/built/NAME/, with docs/gallery/built/gallery.json listing what was built;
docs/hooks.py then puts the reports into the documentation's gallery/ and the gallery page beside them. The GitHub
Actions workflow .github/workflows/docs.yml runs this before `mkdocs build`, so the project's Pages show them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILT = HERE / "gallery" / "built"


@dataclass(frozen=True)
class Entry:
    name: str  # the report's folder in the gallery
    title: str
    about: str  # what it shows, in a sentence or two
    config: str  # relative to the repository root
    kind: str  # encoder | decoder | encoder-decoder


ENTRIES = (
    Entry("minilm", "The embedded default: all-MiniLM-L6-v2",
          "The real sentence-embedding model reportgen ships (6 layers x 12 heads), on its 14 built-in examples and "
          "its query-title relevance task: the site `reportgen build` makes with no config.",
          "docs/gallery/minilm.yaml", "encoder"),
    Entry("induction", "A decoder: induction heads in a two-layer GPT-2 trained here",
          "The induction recipe: an attention-only GPT-2 trained on two CPU cores until a previous-token head and an "
          "induction head form (Olsson et al. 2022), with its causal-LM ablation and activation patching.",
          "recipes/induction/reportgen.yaml", "decoder"),
    Entry("tiny-bart", "An encoder-decoder: a tiny random BART",
          "A 2 + 2-layer BART with random weights made from a config: what an encoder-decoder's report looks like "
          "(encoder, decoder and cross-attention heads, a seq2seq ablation); random weights carry no behaviour, and "
          "its tests name no head.",
          "docs/gallery/tiny-bart.yaml", "encoder-decoder"),
)


def prepare(entry: Entry) -> None:
    """What a report's config needs before it builds: the recipe's trained model, the tiny BART and its pairs."""
    if entry.name == "induction" and not (ROOT / "recipes/induction/model/config.json").exists():
        _run([sys.executable, str(ROOT / "recipes/induction/train.py")])
        subprocess.run(["git", "-C", str(ROOT), "checkout", "--quiet", "--", "recipes/induction/measured.json"],
                       check=False)  # the committed record stays the one its README quotes
    if entry.name == "tiny-bart":
        sys.path.insert(0, str(ROOT))
        from tests.seq2seq_checkpoints import make_encoder_decoder, write_pairs

        models = BUILT / "models"  # where the config names them, whatever --out is
        make_encoder_decoder("bart", models / "tiny-bart")
        write_pairs(models / "tiny-bart-pairs.jsonl")


def build(entries: list[Entry], out: Path = BUILT) -> list[dict]:
    """Build each entry's report into out/NAME and list it in out/gallery.json beside the reports built before
    (in ENTRIES order); returns what was built now."""
    out.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        prepare(entry)
        _run([sys.executable, "-m", "reportgen", "build", "--reproducible", "--config", str(ROOT / entry.config),
              "--out", str(out / entry.name)])
    listed = {entry.name for entry in entries} | {item["name"] for item in _listed(out)}
    kept = [asdict(entry) for entry in ENTRIES if entry.name in listed]
    (out / "gallery.json").write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
    return [asdict(entry) for entry in entries]


def _listed(out: Path) -> list[dict]:
    listing = out / "gallery.json"
    return json.loads(listing.read_text(encoding="utf-8")) if listing.is_file() else []


def screenshot(report: Path, target: Path = HERE / "pages" / "assets" / "findings.png") -> Path:
    """The picture the README and the getting-started page show: the report's findings page, first screen, as a
    reader sees it at 1366 x 768 in Chromium (Playwright, from the test extras; Debian's /usr/bin/chromium)."""
    from playwright.sync_api import sync_playwright

    target.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.goto((report / "index.html").as_uri())
        page.wait_for_load_state("load")
        page.wait_for_function("() => document.documentElement.dataset.rgCharts === 'drawn' "
                               "|| !document.querySelector('[data-rg-chart]')")
        page.screenshot(path=str(target))
        browser.close()
    return target


def _run(command: list[str]) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[entry.name for entry in ENTRIES], help="Build only these.")
    parser.add_argument("--out", type=Path, default=BUILT, help="Where the reports go (default: %(default)s).")
    parser.add_argument("--screenshot", action="store_true",
                        help="Also redraw docs/pages/assets/findings.png from the minilm report.")
    args = parser.parse_args(argv)
    chosen = [entry for entry in ENTRIES if not args.only or entry.name in args.only]
    for entry in build(chosen, args.out):
        print(f"built {args.out / entry['name'] / 'index.html'}")
    if args.screenshot:
        print(f"wrote {screenshot(args.out / 'minilm')}")


if __name__ == "__main__":
    main()
