"""Scale: pattern statistics stream, so memory does not grow with the number of sentences."""

import tracemalloc

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.patterns.statistics import PatternAccumulator, load_settings
from reportgen.runs import ExampleRun


def synthetic_runs(count: int, seed: int = 0):
    """Random 6x12-head attention over ~20-token pairs, generated one at a time (never all in memory)."""
    rng = np.random.default_rng(seed)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(9)] + ["[SEP]"] + [f"w{i}" for i in range(8)] + ["[SEP]"]
    n = len(tokens)
    special = np.array([t in ("[CLS]", "[SEP]") for t in tokens])
    segments = np.array([-1] + [0] * 9 + [-1] + [1] * 8 + [-1])
    words = np.where(special, -1, np.arange(n))
    for _ in range(count):
        logits = rng.normal(size=(6, 12, n, n)).astype(np.float32)
        attention = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        yield ExampleRun(ExampleSpec(text="x", pair="y"), tokens, words, segments, special, attention)


def peak_bytes(count: int) -> int:
    accumulator = PatternAccumulator(load_settings())
    tracemalloc.start()
    for run in synthetic_runs(count):
        accumulator.add(run, linkable=False)
    accumulator.result()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.mark.slow  # 450 examples through the statistics under tracemalloc: about 10 s
def test_memory_does_not_grow_with_the_corpus():
    small, large = peak_bytes(50), peak_bytes(400)
    assert large < 1.25 * small, (small, large)  # 8x the sentences, about the same memory
