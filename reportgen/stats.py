"""The statistics of the head-ablation experiments.

- The baseline metric gets a 95% percentile bootstrap CI, resampling examples with replacement
  (`bootstrap_ci`; Efron and Tibshirani 1993, ch. 13).
- A mask (one head, or one whole layer) is tested against the unmasked model by a paired
  permutation test over examples (`paired_permutation_p`): under the null that masking does not
  matter, each example's two outputs are exchangeable. The p-values of an experiment are
  corrected for the number of masks tested, by Holm's step-down (Holm 1979) or Bonferroni
  (`adjust`), and the test runs enough permutations that the smallest attainable p-value can
  pass the correction (`permutations_for`).
- An undefined metric (Spearman of one pair, or of gold scores that are all equal; masked-LM
  accuracy with no token to mask) has no change to test: no test runs, no head or layer is
  marked significant, its p-values are NaN (null in the report), and a warning names the cause.
- A change is also given relative to the unmasked model's metric (`relative_change`), so that
  curves over metrics of different scales read alike.

All draws come from `numpy.random.default_rng([seed, stream])`, so a result depends only on
the configured seed, never on what ran before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from reportgen.tasks import Task

DRAWS_PER_CHUNK = 2_000_000  # resampled example outputs held in memory at once


def relative_change(value: float | np.ndarray, base: float | None) -> np.ndarray:
    """(value - base) / |base|: a change as a fraction of the unmasked model's metric.

    NaN where there is no scale to measure against: a base of 0 or None (and NaN stays NaN)."""
    value = np.asarray(value, dtype=np.float64)
    if base is None or base == 0:
        return np.full(value.shape, np.nan)
    return (value - base) / abs(base)


def _rows_per_chunk(examples: int) -> int:
    return max(1, DRAWS_PER_CHUNK // max(examples, 1))


def bootstrap_ci(task: Task, outputs: np.ndarray, samples: int, seed: int,
                 level: float = 0.95) -> dict[str, list[float]]:
    """Percentile bootstrap CI of every metric, resampling examples with replacement."""
    rng = np.random.default_rng([seed, 1])
    examples = task.n_examples
    chunk = _rows_per_chunk(examples)
    draws: dict[str, list[np.ndarray]] = {}
    for lo in range(0, samples, chunk):
        picked = rng.integers(0, examples, size=(min(chunk, samples - lo), examples))
        for name, values in task.metrics(outputs[picked], task.gold[picked]).items():
            draws.setdefault(name, []).append(values)
    tail = (1 - level) / 2 * 100
    bounds = {}
    for name, parts in draws.items():
        values = np.concatenate(parts)
        bounds[name] = [float(np.nanpercentile(values, tail)), float(np.nanpercentile(values, 100 - tail))]
    return bounds


def paired_permutation_p(task: Task, base: np.ndarray, other: np.ndarray, permutations: int, seed: int) -> float:
    """Two-sided p-value of the primary metric's change, swapping each example's two outputs at random.

    Under the null that masking does not matter, an example's (baseline, masked) outputs are
    exchangeable; the p-value counts swaps that change the metric at least as much as observed.
    NaN when the observed change is undefined (the metric is undefined under either condition):
    there is nothing to test. A swap whose change is undefined counts as at least as large, so
    an undefined resample can only make the test more conservative.
    """
    metric = task.primary
    gold = task.gold[None]
    observed = abs(task.metrics(other[None], gold)[metric][0] - task.metrics(base[None], gold)[metric][0])
    if not np.isfinite(observed):
        return float("nan")
    rng = np.random.default_rng([seed, 2])
    examples = task.n_examples
    chunk = _rows_per_chunk(examples)
    hits = 0
    for lo in range(0, permutations, chunk):
        swap = rng.random((min(chunk, permutations - lo), examples, 1)) < 0.5
        first = np.where(swap, base[None], other[None])
        second = np.where(swap, other[None], base[None])
        delta = np.abs(task.metrics(first, gold)[metric] - task.metrics(second, gold)[metric])
        hits += int(np.sum((delta >= observed - 1e-12) | ~np.isfinite(delta)))
    return (1 + hits) / (1 + permutations)


def permutations_for(requested: int, tests: int, alpha: float) -> int:
    """At least `requested`, and enough that the smallest attainable p-value, 1 / (1 + permutations),
    can pass a Bonferroni or Holm correction over `tests` tests at level `alpha`."""
    return max(requested, math.ceil(2 * tests / alpha))


def adjust(p_values: Sequence[float], method: str) -> np.ndarray:
    """Family-wise corrected p-values: Holm's step-down or Bonferroni.

    The family is the tests that ran: a NaN p-value (no test, the change was undefined)
    stays NaN and does not count towards the number of tests."""
    p_values = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(len(p_values), np.nan)
    ran = np.flatnonzero(np.isfinite(p_values))
    tests = len(ran)
    if method == "bonferroni":
        adjusted[ran] = np.minimum(1.0, p_values[ran] * tests)
        return adjusted
    order = ran[np.argsort(p_values[ran], kind="stable")]
    stepped = np.maximum.accumulate((tests - np.arange(tests)) * p_values[order])
    adjusted[order] = np.minimum(1.0, stepped)
    return adjusted
