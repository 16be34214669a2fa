"""Scale: pattern statistics stream, so memory does not grow with the number of sentences (on
tests/helpers.py `synthetic_runs`)."""

import tracemalloc

import pytest

from reportgen.patterns.statistics import PatternAccumulator, load_settings
from tests.helpers import synthetic_runs


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
