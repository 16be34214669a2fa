"""Activation patching on long prompts of a real shape: what the patching stage of a build costs at 1,024 tokens.

A random GPT-2 of GPT-2-small's shape with its LM head (12 layers x 12 heads, hidden 768, 1,024 positions; built
from its config with a byte-level BPE tokenizer trained here, as benchmarks/long_inputs.py makes them) and
`--pairs` built-in induction pairs of `--tokens` random tokens a copy (prompts of 2 x tokens: 1,024 by default).
Two cold `reportgen build`s of one short example, ablation off, in fresh projects: one with patching (attribution
of all 144 heads in both directions, then exact patching of attribution's top heads within `--max-masks` patched
runs) and one without, side by side; prints each build's wall seconds and peak RSS (os.wait4: the build and what it
ran), their difference (what patching adds), the patching record's own seconds (attribution, exact) and how many
heads were patched exactly. `--code DIR` builds with another checkout (a `git archive` of a commit) beside this one.

Usage: python benchmarks/patching_long.py [--pairs 8] [--tokens 512] [--max-masks 64] [--code DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from long_inputs import SHAPES, make_model  # noqa: E402 - the same shapes and tokenizer as the long-input figures


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=512, help="random tokens a copy (prompts of 2 x tokens)")
    parser.add_argument("--max-masks", type=int, default=64, help="exact patched runs (config patching.max_masks)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/patching-long"))
    parser.add_argument("--code", type=Path, nargs="*", default=[REPO], help="checkouts to build with, in turn")
    return parser.parse_args()


def build(project: Path, model: Path, code: Path, patching: dict | None) -> dict:
    """A cold build of one short example with ablation off, with `patching` or without: seconds, peak MB."""
    project.mkdir(parents=True, exist_ok=True)
    config = {"model": str(model), "device": "cpu", "max_length": 1024, "examples": [{"text": "the cat sat"}],
              "ablation": {"enabled": False}, "patching": patching or {"enabled": False},
              "cache_dir": str(project / "cache")}
    (project / "reportgen.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "reportgen", "build"], cwd=project,
                             env={**os.environ, "PYTHONPATH": str(code)}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{project}: the build failed:\n{child.stderr.read().decode()[-3000:]}")
    figures = {"seconds": round(seconds, 1), "peak_mb": round(usage.ru_maxrss / 1024)}
    record = json.loads((project / "site" / "report.json").read_text(encoding="utf-8")).get("patching")
    if record:
        heads = record["exact_heads"]
        figures.update(exact_heads=144 if heads is None else len(heads), record_seconds=record["seconds"],
                       patched_runs=record["runs"])
    return figures


def main() -> int:
    args = arguments()
    import transformers  # noqa: F401 - make_model's model class below

    SHAPES["gpt2-small-lm"] = ("GPT2Config", "GPT2LMHeadModel", SHAPES["gpt2-small"][2], ())
    model = make_model("gpt2-small-lm", args.work / "gpt2-small-lm")
    patching = {"enabled": True, "data": "builtin", "pairs": args.pairs, "tokens": args.tokens, "positions": False,
                "max_masks": args.max_masks}
    for index, code in enumerate(args.code):
        root = args.work / f"run-{index}-{int(time.time())}"
        without = build(root / "without", model, code, None)
        with_patching = build(root / "with", model, code, patching)
        print(json.dumps({"code": str(code), "pairs": args.pairs, "prompt_tokens": 2 * args.tokens,
                          "without": without, "with": with_patching,
                          "patching_seconds": round(with_patching["seconds"] - without["seconds"], 1),
                          "patching_peak_mb": with_patching["peak_mb"] - without["peak_mb"]}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
