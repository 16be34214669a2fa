"""How long `reportgen view` takes and how big its file is (issue 29).

Goal: under 5 s for the seed pair on the embedded model on the 2-core machine, model loading included,
and a file at most 15% of bertviz 1.4.1's head view of the same pair (2,296,437 bytes, measured by
benchmarks/views_size.py), with every script inside.

Prints the median of `--runs` whole commands (a fresh process each: Python start, imports, model load,
one forward pass, the page), then one in-process run split into its steps. The embedded model runs through
reportgen.model.light_bert: importing transformers' model code alone took ~5 s here.

Run: .venv/bin/python benchmarks/view_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEXT, PAIR = "I went to the store.", "At the store, I bought fresh strawberries."
BERTVIZ_HEAD_VIEW = 2_296_437


def whole_command(folder: Path) -> tuple[float, int]:
    """(seconds, bytes) of one `reportgen view` in a new process."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "reportgen", "view", TEXT, "--pair", PAIR, "--out", "seed.html"],
                   cwd=folder, check=True, capture_output=True)
    return time.perf_counter() - start, (folder / "seed.html").stat().st_size


def steps() -> list[tuple[str, float]]:
    """The same work in this process, timed step by step."""
    laps, start = [], time.perf_counter()

    def lap(name: str) -> None:
        nonlocal start
        now = time.perf_counter()
        laps.append((name, now - start))
        start = now

    import torch  # noqa: F401

    lap("import torch")
    from reportgen.config import ExampleSpec, load_config
    from reportgen.model import light_bert, loading

    lap("import reportgen")
    _, path = loading.resolve(load_config(None).model)
    model = light_bert.LightBert.load(path)  # the embedded BERT: no transformers model code (issue 29)
    lap("read weights and tokenizer")
    run = model.run(ExampleSpec(text=TEXT, pair=PAIR), 512)
    lap("forward pass")
    from reportgen.quickview import QuickRun, page_text

    page_text(QuickRun(run, "model"))
    lap("the page")
    return laps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        whole_command(Path(tmp))  # warm the disk cache: the first start after a boot reads every file
        runs = [whole_command(Path(tmp)) for _ in range(args.runs)]
    seconds = [time for time, _ in runs]
    size = runs[-1][1]
    print(f"reportgen view, seed pair: median {statistics.median(seconds):.2f} s over {args.runs} runs "
          f"(min {min(seconds):.2f}, max {max(seconds):.2f}); goal < 5 s")
    print(f"file: {size:,} bytes = {100 * size / BERTVIZ_HEAD_VIEW:.1f}% of bertviz's head view "
          f"({BERTVIZ_HEAD_VIEW:,}); goal <= 15%")
    for name, took in steps():
        print(f"  {name:28s} {took:6.2f} s")


if __name__ == "__main__":
    main()
