"""Exact vs attribution patching of every head on a GPT-2-small-shaped random model (issue 49).

A random GPT-2 of GPT-2-small's shape (12 layers x 12 heads, hidden 768, built from its config, nothing
downloaded) and `--pairs` built-in induction pairs of `--tokens` tokens: exact patching patches each of the 144
heads alone, denoising (clean into corrupted), in batched forwards (reportgen.patching.sweep); attribution
patching estimates all of them, in both directions, from one forward and backward of the clean prompts and one of
the corrupted ones, 32 pairs a batch (reportgen.patching.attribution.attribution_both, as a build runs it).
Prints both times (median of `--runs`, the two interleaved so that machine
load hits both alike), the speed-up, and how well the estimate ranks the heads as exact patching does (Spearman
over heads of the mean effect, and the overlap of the top 10).

Usage: python benchmarks/patching_speed.py [--pairs 50] [--tokens 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reportgen.model.head_sites import locate  # noqa: E402
from reportgen.patching.attribution import attribution_both  # noqa: E402
from reportgen.patching.pairs import induction_pairs  # noqa: E402
from reportgen.patching.sweep import sweep  # noqa: E402
from reportgen.stats import spearman_rows  # noqa: E402


def main() -> int:
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=20, help="tokens a prompt ([BOS] + 2 copies less one)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    config = transformers.GPT2Config(n_layer=12, n_head=12, n_embd=768, n_positions=1024)
    model = transformers.GPT2LMHeadModel(config).eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    sites = locate(model)
    pairs = induction_pairs(config.vocab_size, bos=config.bos_token_id, count=args.pairs, n=args.tokens // 2,
                            seed=0, exclude=(config.bos_token_id,))
    exact_times, attribution_times = [], []
    for _ in range(args.runs):
        start = time.perf_counter()
        exact = sweep(model, pairs, ("denoising",))
        exact_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        estimates = attribution_both(model, pairs, sites)["denoising"].numpy()  # as a build runs it: both directions
        attribution_times.append(time.perf_counter() - start)
    exact_change = (exact.patched["denoising"] - exact.corrupted[:, None, None]).mean(0).ravel()
    estimated = np.mean(estimates, axis=0).ravel()
    rho = float(spearman_rows(exact_change[None], estimated[None])[0])
    top = len(set(np.argsort(-exact_change)[:10]) & set(np.argsort(-estimated)[:10]))
    exact_s, attribution_s = statistics.median(exact_times), statistics.median(attribution_times)
    print(f"GPT-2-small shape (12 x 12 heads), {len(pairs)} induction pairs of {len(pairs[0].clean)} tokens, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.runs} runs")
    print(f"  exact patching, 144 heads one at a time (denoising): {exact_s:.1f} s")
    print(f"  attribution patching, all heads, both directions:   {attribution_s:.1f} s")
    print(f"  speed-up: {exact_s / attribution_s:.1f}x; agreement over heads: Spearman {rho:.2f}, "
          f"top-10 overlap {top}/10")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
