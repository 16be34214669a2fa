"""Decoder head scores for the induction recipe: induction and previous-token (vectorised numpy).

A local stand-in with the definitions and names of `reportgen.patterns.decoder` (being written), which
train.py uses instead when it can be imported. The definitions are /work/shared/REFERENCE.md's
("Decoder heads"):

- Induction score (Olsson, Elhage, Nanda et al. 2022, "In-context Learning and Induction Heads"): the
  input is [BOS] + r_1..r_n + r_1..r_n with r uniform over the vocabulary (special tokens excluded); for
  each query q of the second copy (positions n+1 .. 2n) the attention on key q - n + 1, the token that
  FOLLOWED the earlier occurrence of the current token; the score is the mean over those queries.
- Previous-token score (TransformerLens's head detector): the mean over q >= 1 of A[q, q - 1].

`attention` is one sequence's attention, [L, H, T, T] (rows are queries and sum to 1); any leading
dimensions work, e.g. [B, L, H, T, T] gives one score per sequence. Each score has a causal null, what
the uniform head over the visible prefix (1/(q+1) on each key 0..q) scores on the same positions.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

MIN_INDUCTION_N = 3


def _check(attention: np.ndarray) -> np.ndarray:
    attention = np.asarray(attention)
    if attention.ndim < 2 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must be [..., T, T], not {attention.shape}")
    return attention


def induction(attention: np.ndarray, n: int) -> np.ndarray:
    """Mean over the second copy's queries q = n+1 .. 2n of A[q, q - n + 1]; shape: the leading dims.

    E.g. n = 3, [BOS a b c a b c]: queries 4, 5, 6 (a b c) attend to keys 2 (b), 3 (c), 4 (a). Needs
    n >= MIN_INDUCTION_N (for n = 2 the key q - 1 is the previous token) and exactly 2n + 1 tokens."""
    attention = _check(attention)
    if n < MIN_INDUCTION_N:
        raise ValueError(f"induction needs n >= {MIN_INDUCTION_N}, not n = {n}")
    if attention.shape[-1] != 2 * n + 1:
        raise ValueError(f"an induction input with n = {n} has 2n + 1 = {2 * n + 1} tokens, "
                         f"the attention has {attention.shape[-1]}")
    queries = np.arange(n + 1, 2 * n + 1)
    return attention[..., queries, queries - n + 1].mean(axis=-1)


def previous_token(attention: np.ndarray) -> np.ndarray:
    """Mean over q >= 1 of A[q, q - 1]; shape: the leading dims."""
    attention = _check(attention)
    queries = np.arange(1, attention.shape[-1])
    return attention[..., queries, queries - 1].mean(axis=-1)


def induction_tokens(vocab_size: int, n: int, batch: int, seed: int, exclude: Iterable[int] = ()) -> np.ndarray:
    """[batch, n] token ids drawn uniformly (with replacement) from range(vocab_size) minus `exclude`."""
    allowed = np.setdiff1d(np.arange(vocab_size), np.fromiter(exclude, dtype=np.int64))
    if allowed.size == 0:
        raise ValueError("no token left to draw from")
    rng = np.random.default_rng(seed)
    return allowed[rng.integers(0, allowed.size, size=(batch, n))]


def induction_input(r: np.ndarray, bos_id: int) -> np.ndarray:
    """[BOS] + r + r along the last axis: [..., n] -> [..., 2n + 1]."""
    r = np.asarray(r)
    bos = np.full(r.shape[:-1] + (1,), bos_id, dtype=r.dtype)
    return np.concatenate([bos, r, r], axis=-1)


def nulls(length: int, n: int | None = None) -> dict[str, float]:
    """The scores of the uniform causal head (1/(q+1) on each key 0..q) on `length` tokens, and on the
    induction input of 2n + 1 tokens when `n` is given: the same keys as reportgen.patterns.decoder.nulls."""
    out = {"previous_token": causal_null_previous(length)}
    if n is not None:
        out["induction"] = causal_null_induction(n)
    return out


def causal_null_induction(n: int) -> float:
    """The induction score of the uniform causal head: mean over q = n+1 .. 2n of 1/(q+1)."""
    queries = np.arange(n + 1, 2 * n + 1)
    return float(np.mean(1.0 / (queries + 1)))


def causal_null_previous(length: int) -> float:
    """The previous-token score of the uniform causal head on `length` tokens: mean over q >= 1 of 1/(q+1)."""
    queries = np.arange(1, length)
    return float(np.mean(1.0 / (queries + 1)))
