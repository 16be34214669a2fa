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
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # only named in annotations: the pattern analyses use these tests without loading torch
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


def _stacked_metric(task: Task, outputs: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """The primary metric of outputs [..., conditions, examples, columns] against gold [..., examples]
    (the same gold for every condition), as [..., conditions]."""
    lead = outputs.shape[:-2]
    flat = outputs.reshape(-1, *outputs.shape[-2:])
    if gold.ndim == 1:  # one gold row for all: the metric ranks it once and broadcasts
        gold = gold[None]
    else:
        gold = np.broadcast_to(gold[..., None, :], (*lead, gold.shape[-1])).reshape(-1, gold.shape[-1])
    return task.metrics(flat, gold)[task.primary].reshape(lead)


def paired_permutation_p(task: Task, base: np.ndarray, other: np.ndarray, permutations: int, seed: int) -> float:
    """Two-sided p-value of the primary metric's change, swapping each example's two outputs at random.

    Under the null that masking does not matter, an example's (baseline, masked) outputs are
    exchangeable; the p-value counts swaps that change the metric at least as much as observed.
    NaN when the observed change is undefined (the metric is undefined under either condition):
    there is nothing to test. A swap whose change is undefined counts as at least as large, so
    an undefined resample can only make the test more conservative.
    """
    return paired_permutation_p_pooled(task, base[None], other[None], permutations, seed)


def paired_permutation_p_pooled(task: Task, first: np.ndarray, second: np.ndarray, permutations: int,
                                seed: int) -> float:
    """Two-sided paired permutation p-value of mean_s [metric(second_s) - metric(first_s)] over
    several pairs of conditions s (e.g. seeds, or random orders), [pairs, examples, columns] each.

    The example is the unit: one swap per example, applied to every pair, so the test stays
    paired over examples however many pairs are pooled. Under the null that the two conditions
    do not differ for any pair, each example's (first, second) outputs are exchangeable.
    With one pair this is `paired_permutation_p`.
    """
    gold = task.gold
    observed = np.mean(_stacked_metric(task, second, gold) - _stacked_metric(task, first, gold))
    if not np.isfinite(observed):
        return float("nan")
    rng = np.random.default_rng([seed, 2])
    examples = task.n_examples
    chunk = _rows_per_chunk(examples * len(first))
    hits = 0
    for lo in range(0, permutations, chunk):
        swap = rng.random((min(chunk, permutations - lo), 1, examples, 1)) < 0.5
        one = np.where(swap, first[None], second[None])
        two = np.where(swap, second[None], first[None])
        delta = np.abs(np.mean(_stacked_metric(task, two, gold) - _stacked_metric(task, one, gold), axis=-1))
        hits += int(np.sum((delta >= abs(observed) - 1e-12) | ~np.isfinite(delta)))
    return (1 + hits) / (1 + permutations)


def paired_change_ci(task: Task, base: np.ndarray, masked: np.ndarray, samples: int, seed: int,
                     level: float = 0.95) -> tuple[list[float], list[list[float]]]:
    """Paired percentile-bootstrap CI of the primary metric's change, masked [pairs, examples, columns]
    against base [examples, columns]: (pooled CI of the mean change over pairs, CI of each pair).

    Every resample draws examples with replacement and scores all conditions on the SAME draw,
    so the interval is of the change itself, not of either level (REFERENCE, "Claims": a
    baseline's CI says how precise the baseline is, not whether a change is zero).
    """
    rng = np.random.default_rng([seed, 3])
    examples = task.n_examples
    stacked = np.concatenate([base[None], masked])  # condition 0 is the base
    chunk = _rows_per_chunk(examples * len(stacked))
    changes = []
    for lo in range(0, samples, chunk):
        picked = rng.integers(0, examples, size=(min(chunk, samples - lo), examples))
        values = _stacked_metric(task, stacked[:, picked].swapaxes(0, 1), task.gold[picked])  # [draws, conditions]
        changes.append(values[:, 1:] - values[:, :1])
    change = np.concatenate(changes)  # [samples, pairs]
    tail = (1 - level) / 2 * 100

    def bounds(values: np.ndarray) -> list[float]:
        return [float(np.nanpercentile(values, tail)), float(np.nanpercentile(values, 100 - tail))]

    return bounds(change.mean(1)), [bounds(change[:, pair]) for pair in range(change.shape[1])]


def sign_flip_p(differences: np.ndarray, permutations: int, seed: int) -> np.ndarray:
    """Two-sided paired permutation p-values of mean differences, one per column of `differences`
    [examples, tests], by random sign flips (the paired test of two measurements on each example).

    Under the null that the two measurements of an example are exchangeable, each difference is as
    likely to have either sign; the p-value is (1 + flips whose mean is at least as far from 0 as
    observed) / (1 + permutations). Every column gets the same flips (one draw per example), so the
    tests stay paired over examples. A column whose differences are all 0 gets p = 1.
    """
    differences = np.asarray(differences, dtype=np.float64)
    examples = differences.shape[0]
    observed = np.abs(differences.mean(axis=0))
    rng = np.random.default_rng([seed, 4])
    chunk = _rows_per_chunk(examples)
    hits = np.zeros(differences.shape[1], dtype=np.int64)
    for lo in range(0, permutations, chunk):
        signs = np.where(rng.random((min(chunk, permutations - lo), examples)) < 0.5, -1.0, 1.0)
        flipped = np.abs(signs @ differences) / examples  # [flips, tests]
        hits += np.count_nonzero(flipped >= observed - 1e-12, axis=0)
    return (1 + hits) / (1 + permutations)


def at_floor(p_value: float | None, permutations: int) -> bool:
    """Whether a permutation p-value sits at its floor 1 / (permutations + 1), where it is only a bound."""
    return p_value is not None and permutations > 0 and p_value <= 1 / (permutations + 1) * (1 + 1e-9)


def rank_p(value: float, null: np.ndarray, higher_is_better: bool = True) -> float:
    """One-sided Monte Carlo p-value of `value` among draws from its null (e.g. one pruning order's
    area among random orders'): (1 + draws at least as good) / (1 + draws) (Davison and Hinkley 1997)."""
    null = np.asarray(null, dtype=np.float64)
    as_good = null >= value if higher_is_better else null <= value
    return float((1 + np.count_nonzero(as_good)) / (1 + len(null)))


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
