"""The statistics of the head-ablation experiments' records: a mask's primary metric (`_metric`), each
mask tested against the unmasked model (`_tested`), the summaries of a sweep over fractions and seeds
(`_sweep`), the non-inferiority test (`_non_inferiority`), two conditions compared per fraction
(`_paired_comparison`) and the importance order's pruning curve ranked among random orders'
(`_area_rank`, `_random_order_curves`), as the fields of `reportgen.report`'s records, with NaN and
infinities as None (`_number`, `_numbers`: JSON has no NaN).

Kept apart from the experiments (`reportgen.ablation.experiments`), which choose the masks and gather
their outputs: these helpers only read the outputs and the shared `Context`
(`reportgen.ablation.experiment_context`). The tests and intervals themselves are `reportgen.stats`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from reportgen.ablation.experiment_context import Context
from reportgen.report import AreaRank, NonInferiority, PairedComparison, RandomOrder, Sweep
from reportgen.stats import (
    adjust,
    at_floor,
    paired_change_cis,
    paired_permutation_ps,
    permutations_for,
    rank_p,
    relative_change,
)


# -- numbers as the report holds them ---------------------------------------------------------------
def _number(value: float) -> float | None:
    """A float for the report; NaN and infinities become None (JSON has no NaN)."""
    return float(value) if math.isfinite(value) else None


def _numbers(values: Any) -> Any:
    """Nested lists of floats for the report, NaN and infinities as None."""
    array = np.asarray(values, dtype=np.float64)
    objects = array.astype(object)
    objects[~np.isfinite(array)] = None
    return objects.tolist()


def _tested(ctx: Context, outputs: np.ndarray, shape: tuple[int, ...]) -> dict[str, Any]:
    """Each mask's metric, change and corrected p-value against the unmasked model, from the masks'
    outputs [masks, examples, columns], as the fields shared by `HeadTests` and `LayerTests` (arrays
    reshaped to `shape`). The masks are tested together: one draw of swaps serves them all."""
    settings = ctx.settings
    masks = len(outputs)
    values = _metric(ctx, outputs)
    if ctx.undefined:  # no change can be measured, so none is tested and none is significant
        p_values = np.full(masks, np.nan)
        permutations = 0
        test = f"no test: {ctx.task.primary} is undefined on the task data ({ctx.undefined})"
    else:
        permutations = permutations_for(settings.permutations, masks, settings.alpha)
        base = np.broadcast_to(ctx.base_outputs, (masks, 1, *ctx.base_outputs.shape))
        p_values = paired_permutation_ps(ctx.task, base, outputs[:, None], permutations, ctx.seed)
        test = f"paired permutation test over examples ({permutations} permutations, two-sided)"
    p_adjusted = adjust(p_values, settings.correction)
    significant = np.isfinite(p_adjusted) & (p_adjusted < settings.alpha)
    return {"value": _numbers(values.reshape(shape)), "delta": _numbers((values - ctx.base_value).reshape(shape)),
            "relative": _numbers(relative_change(values, ctx.base_value).reshape(shape)),
            "p_value": _numbers(p_values.reshape(shape)), "p_adjusted": _numbers(p_adjusted.reshape(shape)),
            "significant": significant.reshape(shape).tolist(), "test": test, "correction": settings.correction,
            "alpha": settings.alpha, "permutations": permutations, "baseline": _number(ctx.base_value)}


def _sweep(ctx: Context, values: np.ndarray) -> Sweep:
    """The summaries of a metric [fraction][seed]."""
    relative = relative_change(values, ctx.base_value)
    return Sweep(values=_numbers(values), relative=_numbers(relative), mean=_numbers(values.mean(1)),
                 std=_numbers(values.std(1)), min=_numbers(values.min(1)), max=_numbers(values.max(1)),
                 relative_mean=_numbers(relative.mean(1)), relative_std=_numbers(relative.std(1)))


def _metric(ctx: Context, outputs: np.ndarray) -> np.ndarray:
    """The primary metric of per-example outputs [..., examples, columns], as [...]."""
    flat = outputs.reshape(-1, *outputs.shape[-2:])
    return ctx.task.metrics(flat, ctx.task.gold[None])[ctx.task.primary].reshape(outputs.shape[:-2])


def _non_inferiority(ctx: Context, fractions: list[float], outputs: np.ndarray) -> NonInferiority:
    """Per fraction, the paired bootstrap CI of the relative change (pairs pooled) against the margin: above
    -margin for a metric where higher is better, below +margin for one where lower is better (a loss).

    The fractions are tested in increasing order and the claim stops at the first that fails: a
    fixed-sequence procedure, which keeps the family-wise error at the level of one test without
    a correction (Maurer, Hothorn and Lehmacher 1995). Each test is one-sided at 2.5% (the
    worse end of a two-sided 95% interval).
    """
    settings, scale = ctx.settings, abs(ctx.base_value)
    higher = ctx.task.higher_is_better[ctx.task.primary]

    def worse_gain(low: float, high: float) -> float:
        """The worse end of a CI of a change, read as a gain (positive is better, whichever way the metric points)."""
        return low if higher else -high

    pooled, worst, worst_ci = [], [], []
    for ci, per_pair in paired_change_cis(ctx.task, ctx.base_outputs, outputs, settings.bootstrap_samples, ctx.seed):
        worse_ends = np.array([worse_gain(low, high) for low, high in per_pair], dtype=np.float64)
        index = int(np.nanargmin(worse_ends)) if np.isfinite(worse_ends).any() else None
        pooled.append(np.array(ci) / scale)
        worst.append(index)
        worst_ci.append(np.array(per_pair[index]) / scale if index is not None else np.full(2, np.nan))
    passes = [bool(np.isfinite(worse_gain(low, high)) and worse_gain(low, high) > -settings.margin)
              for low, high in pooled]
    up_to = 0.0
    for fraction, ok in zip(fractions, passes, strict=True):
        if not ok:
            break
        up_to = fraction
    return NonInferiority(
        margin=settings.margin, confidence=0.95, bootstrap_samples=settings.bootstrap_samples,
        change_ci=_numbers(pooled), worst=worst, worst_ci=_numbers(worst_ci), non_inferior=passes, up_to=up_to,
        test=f"paired percentile bootstrap over examples ({settings.bootstrap_samples} resamples): the 95% CI of the "
             f"relative change lies {'above -' if higher else 'below +'}{100 * settings.margin:g}%, fractions tested "
             "in increasing order")


def _paired_comparison(ctx: Context, labels: tuple[str, str], fractions: list[float], first: np.ndarray,
                       second: np.ndarray) -> PairedComparison:
    """Two conditions [fraction, pairs, examples, columns] compared at each fraction by a paired
    permutation test over examples, corrected over the fractions (REFERENCE, "Claims")."""
    settings = ctx.settings
    permutations = permutations_for(settings.permutations, len(fractions), settings.alpha)
    difference = (_metric(ctx, second) - _metric(ctx, first)).mean(-1)
    p_values = paired_permutation_ps(ctx.task, first, second, permutations, ctx.seed)
    p_adjusted = adjust(p_values, settings.correction)
    return PairedComparison(
        first=labels[0], second=labels[1], fractions=fractions, difference=_numbers(difference),
        p_value=_numbers(p_values), p_adjusted=_numbers(p_adjusted),
        at_floor=[at_floor(p, permutations) for p in p_values.tolist()],
        significant=(np.isfinite(p_adjusted) & (p_adjusted < settings.alpha)).tolist(),
        permutations=permutations, correction=settings.correction, alpha=settings.alpha,
        test=f"paired permutation test over examples ({permutations} permutations, two-sided, one swap per "
             f"example shared by all pairs), {settings.correction.capitalize()}-corrected over {len(fractions)} "
             "fractions")


def _area_rank(ctx: Context, pruned: np.ndarray, random: np.ndarray) -> AreaRank:
    """Rank the importance order's pruning curve among the random orders' by the area under the
    curve (the mean relative change over the fractions): a Monte Carlo p-value."""
    area, random_area = np.nanmean(pruned), np.nanmean(random, axis=1)
    better = ctx.task.higher_is_better[ctx.task.primary]
    worse = random_area < area if better else random_area > area
    return AreaRank(importance=_number(area), random=_numbers(random_area), better_than=int(np.count_nonzero(worse)),
                    p_value=rank_p(area, random_area, better), floor=1 / (len(random_area) + 1))


def _random_order_curves(values: np.ndarray, base_value: float, source: str) -> RandomOrder:
    """The pruning curves of random orders, [order][fraction]."""
    relative = relative_change(values, base_value)
    return RandomOrder(orders=len(values), source=source, values=_numbers(values), relative=_numbers(relative),
                       mean=_numbers(values.mean(0)), std=_numbers(values.std(0)),
                       relative_mean=_numbers(relative.mean(0)))
