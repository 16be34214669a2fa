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
    rng = np.random.default_rng([seed, 49])
    draws = rng.integers(0, len(clean), size=(samples, len(clean)))
    boot = np.stack([normalised(clean[rows], corrupted[rows], flat[rows]) for rows in draws])
    with np.errstate(invalid="ignore"):
        low, high = np.nanpercentile(boot, [2.5, 97.5], axis=0) if np.isfinite(boot).any() else (
            np.full(flat.shape[1], np.nan),) * 2
    unpatched = corrupted if direction == "denoising" else clean
    p = sign_flip_p(flat - unpatched[:, None], permutations, seed)
    return Effects(normalised(clean, corrupted, flat).reshape(shape), np.asarray(low).reshape(shape),
                   np.asarray(high).reshape(shape), adjust(p, "holm").reshape(shape))
