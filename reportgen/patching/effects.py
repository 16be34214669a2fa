"""Patching effects over prompt pairs, normalised, with bootstrap intervals and corrected tests.

Per pair the metric is the logit difference m (pairs.py) of the clean run, the corrupted run and each patched
run. A head's effect is normalised by what the corruption moves (Wang et al. 2022; Zhang and Nanda 2024):

    effect = (patched - corrupted) / (clean - corrupted),

over the pairs as a ratio of sums, so a pair the corruption hardly moves does not blow it up. Denoising patches
the clean run's head into the corrupted run: 1 means the head alone restores the behaviour, 0 that it restores
nothing. Noising patches the corrupted run's head into the clean run: 1 means the behaviour survives the head's
corruption, and the head matters as much as the effect falls below 1. The interval is a percentile bootstrap over
pairs (resampling pairs, the ratio recomputed); the test asks whether patching moved the metric of the run it
went into, a paired sign-flip permutation test of (patched - unpatched) over pairs, Holm-corrected over heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from reportgen.stats import adjust, sign_flip_p

Direction = Literal["denoising", "noising"]


@dataclass
class Effects:
    """Per head [layers, heads]: the normalised effect, its 95% interval, and the corrected p-value."""

    effect: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_adjusted: np.ndarray


def normalised(clean: np.ndarray, corrupted: np.ndarray, patched: np.ndarray) -> np.ndarray:
    """The ratio of sums over pairs (axis 0) of patched - corrupted to clean - corrupted; NaN where the corruption
    moves nothing in total."""
    gap = float(np.sum(clean - corrupted))
    moved = np.sum(patched - corrupted[(...,) + (None,) * (patched.ndim - 1)], axis=0)
    return moved / gap if abs(gap) > 1e-12 else np.full(patched.shape[1:], np.nan)


def effects(clean: np.ndarray, corrupted: np.ndarray, patched: np.ndarray, direction: Direction,
            samples: int = 1000, permutations: int = 1000, seed: int = 0) -> Effects:
    """`patched` [pairs, *heads] of one direction beside the pairs' clean and corrupted metrics [pairs]."""
    clean, corrupted, patched = (np.asarray(a, dtype=np.float64) for a in (clean, corrupted, patched))
    shape = patched.shape[1:]
    flat = patched.reshape(len(patched), -1)
    ran = np.isfinite(flat).all(axis=0)  # a head exact patching did not run (NaN) has no effect and no test
    effect, low, high, p = (np.full(flat.shape[1], np.nan) for _ in range(4))
    if ran.any():
        done = flat[:, ran]
        rng = np.random.default_rng([seed, 49])
        draws = rng.integers(0, len(clean), size=(samples, len(clean)))
        boot = np.stack([normalised(clean[rows], corrupted[rows], done[rows]) for rows in draws])
        if np.isfinite(boot).any():
            with np.errstate(invalid="ignore"):
                low[ran], high[ran] = np.nanpercentile(boot, [2.5, 97.5], axis=0)
        effect[ran] = normalised(clean, corrupted, done)
        unpatched = corrupted if direction == "denoising" else clean
        p[ran] = sign_flip_p(done - unpatched[:, None], permutations, seed)
    return Effects(effect.reshape(shape), low.reshape(shape), high.reshape(shape), adjust(p, "holm").reshape(shape))


@dataclass
class Agreement:
    """How attribution patching ranks the heads beside exact patching (Kramár et al. 2024 report the same): the
    Spearman correlation of the two over heads, how many of exact patching's top `top` heads the estimate also puts
    in its top `top`, and the heads of either top that the other leaves out, (flat layer, head)."""

    spearman: float
    overlap: int
    top: int
    disagree: list[tuple[int, int]]


def agreement(exact: np.ndarray, estimate: np.ndarray, top: int = 10) -> Agreement:
    """`exact` and `estimate` [layers, heads], the same quantity (a mean change of the metric) by both methods;
    heads ranked by size, |value|, as either sign of a change is a head that matters."""
    from reportgen.stats import spearman_rows

    exact, estimate = np.abs(np.asarray(exact, dtype=np.float64)), np.abs(np.asarray(estimate, dtype=np.float64))
    heads = exact.shape[1]
    top = min(top, exact.size)
    first = set(np.argsort(-exact.ravel(), kind="stable")[:top].tolist())
    second = set(np.argsort(-estimate.ravel(), kind="stable")[:top].tolist())
    rho = float(spearman_rows(exact.ravel()[None], estimate.ravel()[None])[0])
    return Agreement(rho, len(first & second), top, sorted(divmod(int(i), heads) for i in first ^ second))


def top_heads(estimate: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """The heads exact patching runs on when it cannot run on all: the `budget` largest estimates by size,
    (flat layer, head), largest first."""
    flat = np.abs(np.asarray(estimate, dtype=np.float64)).ravel()
    heads = np.asarray(estimate).shape[1]
    return [divmod(int(i), heads) for i in np.argsort(-flat, kind="stable")[:budget]]
