"""Pairs of heads masked together: which pairs, their masks, and the interaction of each pair.

Masking two heads can cost more than the two single costs added (the heads back each other up, or
one needs the other) or less (they do the same job, so losing both is like losing one). The
interaction of heads a and b is that excess, on the task's primary metric m (m0: unmasked):

    I(a, b) = (m(ab) - m0) - (m(a) - m0) - (m(b) - m0) = m(ab) - m(a) - m(b) + m0,

the second-order term of the change (the interaction of two factors of a 2x2 design). It is
tested per pair by a paired bootstrap over examples (`reportgen.stats.bootstrap_contrasts`: the
same resample scores all four conditions; p from the bootstrap standard error), corrected over every tested pair.

The pairs are every pair among the top-k heads by |single change| (the heads whose masking alone
moves the metric most; largest first, ties by position), or every pair of the model when asked.
This module holds the arithmetic; `reportgen.ablation.experiments.head_pairs` evaluates the masks through the
runner and caches the record.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from reportgen.report import HeadPair, HeadPairs
from reportgen.stats import adjust, bootstrap_contrasts

if TYPE_CHECKING:
    from reportgen.ablation.tasks import Task
    from reportgen.config import AblationSettings

INTERACTION_SIGNS = np.array([1.0, -1.0, -1.0, 1.0])  # m(ab), m(a), m(b), m0


def chosen_heads(single_change: np.ndarray, top_k: int | None) -> np.ndarray:
    """Flat indices of the heads whose pairs are masked: all heads in order when `top_k` is None,
    else the `top_k` with the largest |single change| (largest first; NaN changes last, ties by index)."""
    flat = np.asarray(single_change, dtype=np.float64).ravel()
    if top_k is None:
        return np.arange(len(flat))
    size = np.where(np.isfinite(flat), np.abs(flat), -1.0)
    return np.argsort(-size, kind="stable")[:min(top_k, len(flat))]


def pair_positions(count: int) -> np.ndarray:
    """Every pair (i, j), i < j, of `count` chosen heads, as positions in the chosen list: [pairs, 2]."""
    first, second = np.triu_indices(count, k=1)
    return np.stack([first, second], axis=1)


def pair_masks(heads: np.ndarray, pairs: np.ndarray, shape: tuple[int, int]) -> list[np.ndarray]:
    """One mask per pair with both heads at 0 and every other head kept."""
    masks = np.ones((len(pairs), shape[0] * shape[1]), dtype=np.float32)
    rows = np.arange(len(pairs))
    masks[rows, heads[pairs[:, 0]]] = 0
    masks[rows, heads[pairs[:, 1]]] = 0
    return list(masks.reshape(len(pairs), *shape))


def interaction_terms(pairs: np.ndarray, chosen: int) -> np.ndarray:
    """The conditions of each pair's interaction [pairs, 4] in the order of INTERACTION_SIGNS, when the
    conditions are stacked as [unmasked, each of the `chosen` heads alone, each pair]."""
    return np.stack([1 + chosen + np.arange(len(pairs)), 1 + pairs[:, 0], 1 + pairs[:, 1],
                     np.zeros(len(pairs), dtype=np.int64)], axis=1)


def selection_text(top_k: int | None, chosen: int, total: int) -> str:
    """How the pairs were chosen, in words, for the record and the page."""
    pairs = chosen * (chosen - 1) // 2
    if top_k is None:
        return f"every pair of the model's {total} heads ({pairs} pairs)"
    return (f"every pair among the {chosen} heads with the largest |change| of the primary metric when masked "
            f"alone (top k = {top_k}; {pairs} pairs)")


def head_pairs_record(task: Task, settings: AblationSettings, shape: tuple[int, int], seed: int,
                      undefined: str | None, gathered: dict[str, Any]) -> HeadPairs:
    """The record from what the experiment gathered: "heads" (flat, chosen order), "pairs" [pairs, 2]
    (positions in it), and the per-example outputs "base" [examples, columns], "singles" [heads, ...]
    (the chosen heads alone) and "pair_outputs" [pairs, ...]."""
    heads, pairs = gathered["heads"], gathered["pairs"]
    outputs = np.concatenate([gathered["base"][None], gathered["singles"], gathered["pair_outputs"]])
    terms = interaction_terms(pairs, len(heads))
    values = _primary(task, outputs)
    base = values[0]
    if not undefined:
        tested = bootstrap_contrasts(task, outputs, terms, INTERACTION_SIGNS, settings.bootstrap_samples, seed)
        interaction, ci, p_values = tested["observed"], tested["ci"], tested["p"]
        test = (f"paired bootstrap over examples ({settings.bootstrap_samples} resamples; each scores the unmasked "
                "model, both heads alone and the pair on the same examples): the 95% percentile CI, and a two-sided "
                "p-value from the bootstrap standard error (normal approximation, Efron and Tibshirani 1993)")
    else:
        interaction = (values[terms] * INTERACTION_SIGNS).sum(-1)
        ci, p_values = np.full((len(pairs), 2), np.nan), np.full(len(pairs), np.nan)
        test = f"no test: {task.primary} is undefined on the task data ({undefined})"
    p_adjusted = adjust(p_values, settings.correction)
    significant = np.isfinite(p_adjusted) & (p_adjusted < settings.alpha)
    scale = abs(base) if math.isfinite(base) and base != 0 else math.nan
    where = [[int(flat // shape[1]), int(flat % shape[1])] for flat in heads]
    top_k = None if settings.head_pairs.all else settings.head_pairs.top_k
    return HeadPairs(
        selection=selection_text(top_k, len(heads), shape[0] * shape[1]), top_k=top_k, heads=where,
        single_change=[_number(value - base) for value in values[1:1 + len(heads)]],
        pairs=[HeadPair(first=where[first], second=where[second], value=_number(pair_value),
                        change=_number(pair_value - base), relative=_number((pair_value - base) / scale),
                        interaction=_number(excess), interaction_relative=_number(excess / scale),
                        ci=[_number(bound) for bound in bounds], p_value=_number(p_value),
                        p_adjusted=_number(p_corrected),
                        significant=bool(marked))
               for (first, second), pair_value, excess, bounds, p_value, p_corrected, marked
               in zip(pairs.tolist(), values[terms[:, 0]], interaction, ci, p_values, p_adjusted, significant,
                      strict=True)],
        tested=int(np.count_nonzero(np.isfinite(p_values))), significant_count=int(significant.sum()),
        bootstrap_samples=settings.bootstrap_samples, confidence=0.95, test=test,
        correction=settings.correction, alpha=settings.alpha, baseline=_number(base))


def _primary(task: Task, outputs: np.ndarray) -> np.ndarray:
    """The primary metric of each condition's outputs [conditions, examples, columns]."""
    return task.metrics(outputs, task.gold[None])[task.primary].astype(np.float64)


def _number(value: float) -> float | None:
    """A float for the report; NaN and infinities become None (JSON has no NaN)."""
    value = float(value)
    return value if math.isfinite(value) else None
