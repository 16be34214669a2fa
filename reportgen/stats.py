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
the configured seed, never on what ran before. That is also what makes the tests fast: every
test of an experiment (each head, each fraction) would draw the same swaps or resamples alone,
so they are drawn once and scored for all tests together (`paired_permutation_ps`,
`paired_change_cis`), with the same numbers as one test at a time; Spearman's rho under swaps
is computed without a sort per swap (`SwappedRanks`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np

from reportgen import progress


class Task(Protocol):
    """What the tests need of a task (`reportgen.ablation.tasks.Task` is one): its examples' gold
    values, its metrics of outputs against them, and which metric is primary. Named here, not
    imported, so the statistics depend on no analysis (the pattern analyses use them without torch)."""

    kind: str
    primary: str
    gold: np.ndarray

    @property
    def n_examples(self) -> int: ...

    def metrics(self, outputs: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]: ...

DRAWS_PER_CHUNK = 2_000_000  # resampled example outputs held in memory at once
EXACT_RANK_EXAMPLES = 50_000  # up to this many examples, sums of ranks (n^3 / 3 at most) are exact in float64


def relative_change(value: float | np.ndarray, base: float | None) -> np.ndarray:
    """(value - base) / |base|: a change as a fraction of the unmasked model's metric.

    NaN where there is no scale to measure against: a base of 0 or None (and NaN stays NaN)."""
    value = np.asarray(value, dtype=np.float64)
    if base is None or base == 0:
        return np.full(value.shape, np.nan)
    return (value - base) / abs(base)


def _rows_per_chunk(examples: int) -> int:
    return max(1, DRAWS_PER_CHUNK // max(examples, 1))


def _chunks(total: int, chunk: int, kind: str) -> Iterator[tuple[int, int]]:
    """(start, size) of each chunk of `total` draws of `kind`, in order; after each, the progress
    (`reportgen.progress.drew`) when there is more than one chunk: a bar for what takes a while only."""
    for start in range(0, total, chunk):
        yield start, min(chunk, total - start)
        if total > chunk:
            progress.drew(kind, min(start + chunk, total), total)


def bootstrap_ci(task: Task, outputs: np.ndarray, samples: int, seed: int,
                 level: float = 0.95) -> dict[str, list[float]]:
    """Percentile bootstrap CI of every metric, resampling examples with replacement."""
    rng = np.random.default_rng([seed, 1])
    examples = task.n_examples
    chunk = _rows_per_chunk(examples)
    draws: dict[str, list[np.ndarray]] = {}
    for _, size in _chunks(samples, chunk, "resamples"):
        picked = rng.integers(0, examples, size=(size, examples))
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
    if ranks_primary(task):  # Spearman alone, each gold row ranked once for all its conditions (see SwappedRanks)
        from reportgen.stats import pearson_rows, rank_rows

        gold_ranks = rank_rows(gold)
        return pearson_rows(rank_rows(outputs[..., 0]), gold_ranks if gold.ndim == 1 else gold_ranks[..., None, :])
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
    return float(paired_permutation_ps(task, first[None], second[None], permutations, seed)[0])


def paired_permutation_ps(task: Task, first: np.ndarray, second: np.ndarray, permutations: int,
                          seed: int) -> np.ndarray:
    """`paired_permutation_p_pooled` of many tests at once, [tests, pairs, examples, columns] each:
    one p-value per test, each exactly what it would be alone.

    Every test alone would draw the same swaps from the same seed, so the swaps are drawn once
    and applied to all tests (e.g. every head of a model): the cost that remains is scoring the
    swapped outputs. For Spearman's rho (the similarity task) that is ranking, done by
    `SwappedRanks` in time linear in the examples rather than by sorting every swap."""
    gold = task.gold
    observed = np.mean(_stacked_metric(task, second, gold) - _stacked_metric(task, first, gold), axis=-1)
    tests, pairs, examples = first.shape[:3]
    ranks = SwappedRanks(first[..., 0], second[..., 0], gold) if ranks_primary(task) else None
    step = max(1, DRAWS_PER_CHUNK // max(examples * pairs * tests, 1))  # swaps scored at once, all tests
    rng = np.random.default_rng([seed, 2])
    hits = np.zeros(tests, dtype=np.int64)
    for swap in _swap_draws(rng, permutations, examples, _rows_per_chunk(examples * pairs)):
        for lo in range(0, len(swap), step):
            rows = swap[lo:lo + step]
            delta = ranks.changes(rows) if ranks is not None else _swapped_changes(task, first, second, rows)
            hits += np.count_nonzero((delta >= np.abs(observed) - 1e-12) | ~np.isfinite(delta), axis=0)
    p_values = (1 + hits) / (1 + permutations)
    return np.where(np.isfinite(observed), p_values, np.nan)


def _swap_draws(rng: np.random.Generator, permutations: int, examples: int, chunk: int) -> Iterator[np.ndarray]:
    """The swaps [rows, examples] (True: the example's outputs trade places), chunk by chunk, from
    the same stream as ever, so batching the tests changes no p-value."""
    for _, size in _chunks(permutations, chunk, "permutations"):
        yield rng.random((size, examples)) < 0.5


def _swapped_changes(task: Task, first: np.ndarray, second: np.ndarray, swap: np.ndarray) -> np.ndarray:
    """|mean over pairs of metric(second) - metric(first)| with each example's two outputs traded
    where `swap` says: [rows, tests], for any task's metric."""
    where = swap[:, None, None, :, None]
    one = np.where(where, first[None], second[None])
    two = np.where(where, second[None], first[None])
    return np.abs(np.mean(_stacked_metric(task, two, task.gold) - _stacked_metric(task, one, task.gold), axis=-1))


def ranks_primary(task: Task) -> bool:
    """Whether the primary metric is Spearman's rho of output column 0 against the gold scores (the
    similarity task, `reportgen.ablation.tasks.SimilarityTask.metrics`), and few enough examples that its sums
    of half-integer ranks are exact in float64 (`SwappedRanks`)."""
    return task.kind == "similarity" and task.primary == "spearman" and task.n_examples <= EXACT_RANK_EXAMPLES


class SwappedRanks:
    """Spearman's rho of both sides of a paired swap, without sorting per swap.

    The tests' values are [tests, pairs, examples] on each side. A swap gives, per example, one of
    its two values to one side and the other to the other side, so both sides are subsets of the
    same 2n values: they are sorted once, and a side's rank of a value is the count of its values up
    to that one in this order (a cumulative sum); tied values (a run of equal values) get the mean
    rank of their run. These are the ranks `reportgen.stats.rank_rows` gives, and rho is then
    Pearson's correlation with the gold ranks (`reportgen.stats.pearson_rows`). Every rank is a
    half-integer, so every sum rho needs is exact in float64 in any order (up to EXACT_RANK_EXAMPLES
    examples): rho, and every p-value, is the same to the last bit as sorting each swap, for O(n)
    work per swap instead of O(n log n) and no ranks put back in example order.
    """

    def __init__(self, first: np.ndarray, second: np.ndarray, gold: np.ndarray):
        from reportgen.stats import rank_rows  # torch is loaded wherever there is a task

        self.shape = first.shape[:-1]  # [tests, pairs]
        examples = first.shape[-1]
        values = np.concatenate([first, second], axis=-1).reshape(-1, 2 * examples).astype(np.float64)
        order = np.argsort(values, axis=-1)
        ordered = np.take_along_axis(values, order, axis=-1)
        self.example = order % examples  # [groups, 2n]: the example of each sorted value
        self.from_second = order >= examples
        gold_ranks = rank_rows(gold[None].astype(np.float64))[0]
        centred = gold_ranks - gold_ranks.mean()
        self.gold_at = centred[self.example]  # the centred gold rank of each sorted value's example
        self.gold_spread = float((centred * centred).sum())
        starts = np.ones(values.shape, dtype=bool)  # where a run of equal values starts (NaN: each alone)
        starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        # [groups]: two equal values can fall on one side. Equal values of one example never do (a swap
        # gives one to each side), and whichever of the two a side holds, its count is the same.
        self.tied = (~starts[:, 1:] & (self.example[:, 1:] != self.example[:, :-1])).any(axis=1)
        ends = np.ones(values.shape, dtype=bool)
        ends[:, :-1] = starts[:, 1:]
        index = np.broadcast_to(np.arange(2 * examples), values.shape)
        self.run_start = np.maximum.accumulate(np.where(starts, index, 0), axis=-1)
        self.run_end = np.flip(np.minimum.accumulate(np.flip(np.where(ends, index, 2 * examples), -1), -1), -1)
        self.in_run = self.run_end > self.run_start  # [groups, 2n]: a value with an equal one beside it
        centre = (examples + 1) / 2
        self.rank_spread = float(((np.arange(1, examples + 1) - centre) ** 2).sum())  # without ties
        self.centre_square = examples * centre * centre

    def _rho(self, chosen: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """rho of the side that holds the sorted values where `chosen` [rows, groups, 2n] (a subset
        of the groups, `groups`), against the gold ranks: sum(rank * centred gold) / sqrt(spreads)."""
        through = np.cumsum(chosen, axis=-1, dtype=np.int32)  # the rank of each chosen value, ties aside
        weights = chosen * self.gold_at[groups]
        tied = self.tied[groups]
        if not tied.any():
            products, spread = np.einsum("rgk,rgk->rg", through, weights), self.rank_spread
        else:
            products, spread = self._tied_sums(chosen, groups, through, weights)
        with np.errstate(invalid="ignore", divide="ignore"):
            return products / np.sqrt(spread * self.gold_spread)

    def _tied_sums(self, chosen: np.ndarray, groups: np.ndarray, through: np.ndarray,
                   weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sum(rank * centred gold), sum(rank^2) - n centre^2) per row and group where values tie. A tied value's
        rank is the mean over its run, (chosen before the run + chosen to its end + 1) / 2; every other value's is
        its count `through`. So the sums are the untied ones plus a correction over the values in runs only (a few
        of the 2n): no [rows, groups, 2n] gathers, which made the similarity task's permutations 5x slower once
        equal scores tied (936236a). Every term is a multiple of 1/4, so the sums are exact in any order: the same
        rho to the last bit."""
        local, position = np.nonzero(self.in_run[groups])  # [M]: the values in runs, as (group of `groups`, place)
        start, end = self.run_start[groups][local, position], self.run_end[groups][local, position]
        picked = chosen[:, local, position]  # [rows, M]
        at = through[:, local, position]
        before = through[:, local, start] - chosen[:, local, start]
        ranks = (before + through[:, local, end] + 1) / 2
        rows = np.arange(len(chosen))[:, None]
        products = np.einsum("rgk,rgk->rg", through, weights)
        np.add.at(products, (rows, local[None]), np.where(picked, (ranks - at) * self.gold_at[groups][local, position],
                                                                0.0))
        spread = np.full(products.shape, self.rank_spread)  # the chosen values' counts are 1..n: sum(i^2) - n centre^2
        np.add.at(spread, (rows, local[None]), np.where(picked, ranks * ranks - at.astype(np.float64) ** 2, 0.0))
        return products, spread

    def changes(self, swap: np.ndarray) -> np.ndarray:
        """|mean over pairs of rho(np.where(swap, second, first)) - rho(np.where(swap, first, second))|
        per swap [rows, examples] and test: [rows, tests]."""
        one = swap[:, self.example] ^ self.from_second  # [rows, groups, 2n]: np.where(swap, first, second) holds it
        rho = np.empty((2, len(swap), len(self.example)))
        for ties in (False, True):  # the groups without ties take the short way
            groups = np.flatnonzero(self.tied == ties)
            if len(groups):
                part = one[:, groups]
                rho[0][:, groups], rho[1][:, groups] = self._rho(part, groups), self._rho(~part, groups)
        rho = rho.reshape(2, len(swap), *self.shape)
        return np.abs(np.mean(rho[1] - rho[0], axis=-1))


def paired_change_ci(task: Task, base: np.ndarray, masked: np.ndarray, samples: int, seed: int,
                     level: float = 0.95) -> tuple[list[float], list[list[float]]]:
    """Paired percentile-bootstrap CI of the primary metric's change, masked [pairs, examples, columns]
    against base [examples, columns]: (pooled CI of the mean change over pairs, CI of each pair).

    Every resample draws examples with replacement and scores all conditions on the SAME draw,
    so the interval is of the change itself, not of either level (REFERENCE, "Claims": a
    baseline's CI says how precise the baseline is, not whether a change is zero).
    """
    return paired_change_cis(task, base, masked[None], samples, seed, level)[0]


def paired_change_cis(task: Task, base: np.ndarray, masked: np.ndarray, samples: int, seed: int,
                      level: float = 0.95) -> list[tuple[list[float], list[list[float]]]]:
    """`paired_change_ci` of several sets of conditions at once, masked [sets, pairs, examples, columns]
    (e.g. one set per fraction): each set's result exactly as alone, since alone each would draw the
    same resamples from the same seed (drawn once here, in the same chunks)."""
    rng = np.random.default_rng([seed, 3])
    examples, sets, pairs = task.n_examples, masked.shape[0], masked.shape[1]
    stacked = np.concatenate([np.broadcast_to(base, (sets, 1, *base.shape)), masked], axis=1)  # condition 0: base
    chunk = _rows_per_chunk(examples * (1 + pairs))
    changes = []
    for _, size in _chunks(samples, chunk, "resamples"):
        picked = rng.integers(0, examples, size=(size, examples))
        for start in range(0, len(picked), max(1, chunk // sets)):
            rows = picked[start:start + max(1, chunk // sets)]
            resampled = stacked[:, :, rows].reshape(sets * (1 + pairs), *rows.shape, -1).swapaxes(0, 1)
            values = _stacked_metric(task, resampled, task.gold[rows]).reshape(len(rows), sets, 1 + pairs)
            changes.append(values[..., 1:] - values[..., :1])
    change = np.concatenate(changes)  # [samples, sets, pairs]
    tail = (1 - level) / 2 * 100

    def bounds(values: np.ndarray) -> list[float]:
        return [float(np.nanpercentile(values, tail)), float(np.nanpercentile(values, 100 - tail))]

    # each set's changes contiguous, so that the mean over pairs adds in the same order as for one set
    per_set = [np.ascontiguousarray(change[:, index]) for index in range(sets)]
    return [(bounds(values.mean(1)), [bounds(values[:, pair]) for pair in range(pairs)]) for values in per_set]


def bootstrap_contrasts(task: Task, outputs: np.ndarray, terms: np.ndarray, signs: np.ndarray, samples: int,
                        seed: int, level: float = 0.95) -> dict[str, np.ndarray]:
    """Paired bootstrap of signed sums of conditions' metrics, e.g. a pair of heads' interaction
    m(ab) - m(a) - m(b) + m0: outputs [conditions, examples, columns]; test t sums the primary metric
    of conditions terms[t] [tests, terms] weighted by `signs` [terms].

    The example is the unit: every resample draws examples with replacement once and scores every
    condition on that draw, so the contrast is resampled with its pairing intact (REFERENCE,
    "Claims"); the metric is corpus-level (e.g. Spearman), recomputed on each resample. Each
    condition is scored once per resample, however many tests use it. The CI is the percentile
    interval; the two-sided p-value of contrast = 0 is the normal approximation from the bootstrap
    standard error, z = T / se (Efron and Tibshirani 1993, "An Introduction to the Bootstrap", the
    standard normal interval inverted). Why not a counted p-value: one that can pass a correction
    over thousands of pairs needs 40x as many resamples as tests (`permutations_for`), hours of
    Spearman for every pair of a model; the normal p-value has no floor at any number of resamples.
    Returns "observed", "ci" [tests, 2], "se" and "p" [tests]; NaN where the contrast is undefined.
    """
    examples = task.n_examples
    observed = (_stacked_metric(task, outputs, task.gold)[terms] * signs).sum(-1)
    rng = np.random.default_rng([seed, 5])
    chunk = _rows_per_chunk(examples * len(outputs))
    kept: list[np.ndarray] = []
    for _, size in _chunks(samples, chunk, "resamples"):
        picked = rng.integers(0, examples, size=(size, examples))
        resampled = outputs[:, picked].swapaxes(0, 1)  # [draws, conditions, examples, columns]
        kept.append((_stacked_metric(task, resampled, task.gold[picked])[:, terms] * signs).sum(-1))  # [draws, tests]
    draws = np.concatenate(kept)
    tail = (1 - level) / 2 * 100
    with warnings.catch_warnings():  # a test whose every resample is undefined has no interval: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = np.stack([np.nanpercentile(draws, tail, axis=0), np.nanpercentile(draws, 100 - tail, axis=0)], axis=-1)
        se = np.nanstd(draws, axis=0, ddof=1)
        z = np.where(se > 0, np.abs(observed) / np.where(se > 0, se, 1.0), np.where(observed == 0, 0.0, np.inf))
    p_values = np.array([math.erfc(value / math.sqrt(2)) for value in z])
    return {"observed": observed, "ci": ci, "se": se, "p": np.where(np.isfinite(observed), p_values, np.nan)}


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
    for _, size in _chunks(permutations, chunk, "permutations"):
        signs = np.where(rng.random((size, examples)) < 0.5, -1.0, 1.0)
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


# -- ranks and correlations, row by row (the similarity task's metrics, and the tests' Spearman) ---------
def rank_rows(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis with ties given their average rank (as Spearman needs).

    Equal values get the same average rank whatever their order, so an unstable sort (several
    times faster than a stable one) gives exactly the same ranks."""
    order = np.argsort(values, axis=-1)
    ordered = np.take_along_axis(values, order, axis=-1)
    count = values.shape[-1]
    position = np.broadcast_to(np.arange(count), values.shape)
    new = np.ones(values.shape, dtype=bool)  # where a run of equal values starts
    new[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    first = np.maximum.accumulate(np.where(new, position, 0), axis=-1)
    end = np.ones(values.shape, dtype=bool)
    end[..., :-1] = new[..., 1:]
    last = np.flip(np.minimum.accumulate(np.flip(np.where(end, position, count), -1), axis=-1), -1)
    ranks = np.empty(values.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, (first + last) / 2 + 1, axis=-1)
    return ranks


def pearson_rows(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Pearson's correlation along the last axis, row by row (NaN where a row is constant)."""
    first = first - first.mean(-1, keepdims=True)
    second = second - second.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (first * second).sum(-1) / np.sqrt((first * first).sum(-1) * (second * second).sum(-1))


def spearman_rows(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Spearman's correlation along the last axis: Pearson's on the average ranks."""
    return pearson_rows(rank_rows(first), rank_rows(second))
