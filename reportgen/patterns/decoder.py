"""Decoder head patterns: per-head scores of causal self-attention, each with its causal null (issue 31).

The encoder statistics (`reportgen.patterns.statistics`) assume a query may look at every token. A
decoder's (GPT-2, Llama...) query q sees only keys 0..q, so its heads have their own types, and their
own null: the uniform head over the visible prefix, 1/(q+1) on each key 0..q (`causal_null`). A
uniform causal head puts 1/(q+1) on the previous token, not 1/T, so each statistic's null is that
statistic taken on `causal_null`, on the same positions and averaged the same way (`nulls`), and a page
can say "0.87 against 0.02 for a uniform head". The definitions (/work/shared/REFERENCE.md, "Decoder
heads"), A[q, k] = weight query q puts on key k:

- previous_token: mean over q >= 1 of A[q, q-1] (the previous-token pattern of TransformerLens's head
  detector, `transformer_lens.head_detector`, "previous_token_head").
- duplicate_token: for each query whose token occurred earlier in the sequence, the weight summed over
  its earlier occurrence(s), averaged over those queries (TransformerLens's "duplicate_token_head").
  NaN where no token repeats: the statistic does not apply there, it is not zero.
- induction: Olsson, Elhage, Nanda et al. 2022, "In-context Learning and Induction Heads". On
  [BOS] + r_1..r_n + r_1..r_n, for each query of the second copy the weight on the token that FOLLOWED
  the earlier occurrence of the current token (key q - n + 1, see `induction`), averaged.
- delimiter: the weight on the delimiters a query sees (special tokens such as [BOS] and [EOS], '.' and ','),
  the decoder's side of Clark et al. 2019's [CLS]/[SEP]/punctuation; over the queries that see one.
- sink: Xiao, Tian, Chen, Han, Lewis 2023, "Efficient Streaming Language Models with Attention Sinks":
  beyond the first layers most heads rest much of their weight on the first token whatever it is;
  the mean over q >= 1 of A[q, 0].
- causal_entropy: mean over q >= 1 of the row entropy in nats (0 ln 0 = 0, no smoothing, so a uniform
  causal head scores its null exactly); the null is the mean of ln(q+1).

Conventions, the same for every function here:

- Query 0 never counts. Its only visible key is itself, so every causal head puts weight 1 there and the
  row says nothing about the head; all statistics are over queries q >= 1 (duplicate-token and induction
  queries are such queries anyway).
- `attention` is one sequence, [L, H, T, T] float (rows sum to 1); or a batch of equal-length
  sequences, [B, L, H, T, T]; or a list of [L, H, T_i, T_i] arrays of different lengths. Whatever the
  form, the result is ONE [L, H] array: the mean over every qualifying query of every sequence, each
  query weighted equally (for equal lengths, the mean of the per-sequence scores). Pooling by query
  rather than by sequence keeps a short example from counting as much as a long one, and makes a
  statistic that applies to few queries of a sequence (duplicate_token) well defined: a sequence
  without such queries adds nothing rather than a NaN.
- `token_ids` matches `attention`: [T] for one sequence, [B, T] for a batch, a list of [T_i]. Only
  equality between ids is used, so token strings work as well as ids.
- The attention must be causal: weight above the diagonal (k > q) of more than `CAUSAL_TOLERANCE` in
  absolute value (float noise) raises ValueError, since an encoder's or a cross-attention map read
  with these definitions would give meaningless scores; so does any NaN or infinity.
- Every score comes back as float64 [L, H]; sums are taken in float64 whatever the input's dtype,
  without copying the whole attention to float64.

Vectorised: each statistic is a set of (query, key) cells per sequence, gathered with fancy indexing
and summed; the only Python loops are over the sequences given. Imports numpy only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from reportgen.runs import (  # noqa: F401 - the induction input it reads
    MIN_INDUCTION_N,
    StoredAttention,
    induction_input,
    induction_tokens,
)

CAUSAL_TOLERANCE = 1e-6  # largest |weight| above the diagonal accepted as float noise
CHECK_CELLS = 1 << 24  # weights check_causal reads at once (64 MB of float32)
ENTROPY_CELLS = 1 << 22  # a head larger than this (2,048 tokens) has its entropy taken alone: 4 temporaries of it

AttentionInput = np.ndarray | Sequence[np.ndarray]
TokenIdsInput = np.ndarray | Sequence[Any]
# One sequence's cells: (query positions, key positions, number of queries the mean is over)
Cells = tuple[np.ndarray, np.ndarray, int]


# ---------------------------------------------------------------- inputs


def check_causal(attention: np.ndarray) -> None:
    """Raise ValueError unless `attention` [..., T, T] is finite and has no weight above the diagonal.

    A decoder's query q may weigh only keys 0..q; float noise up to CAUSAL_TOLERANCE is accepted. Every
    function here calls this, so an encoder's or a cross-attention map is refused, not scored. The maps are
    read CHECK_CELLS weights at a time, so the check's temporaries stay small whatever the model's size.
    """
    if attention.ndim < 2 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must be [..., T, T] (query by key), not {attention.shape}")
    if isinstance(attention, StoredAttention):  # a layer at a time, read from its file
        for index, layer in enumerate(attention):
            try:
                check_causal(layer)
            except ValueError as problem:
                where = re.sub(r" \(at \((\d+),\)\)", rf" (layer {index}, head \1)", str(problem), count=1)
                raise ValueError(where) from None
        return
    length = attention.shape[-1]
    maps = attention.reshape(-1, length, length)
    step = max(1, CHECK_CELLS // (length * length))
    rows, cols = np.triu_indices(length, 1)
    worst, at = 0.0, None  # the largest weight above the diagonal, and (map, cell) where it is first
    for start in range(0, len(maps), step):
        part = maps[start:start + step]
        if not np.isfinite(part).all():
            raise ValueError("attention has NaN or infinite weights")
        if length < 2:
            continue
        above = np.abs(part[:, rows, cols])
        first = int(above.argmax())
        if above.flat[first] > worst or at is None:
            worst, at = float(above.flat[first]), (start + first // above.shape[1], first % above.shape[1])
    if at is None or worst <= CAUSAL_TOLERANCE:
        return
    lead = [int(i) for i in np.unravel_index(at[0], attention.shape[:-2])] if attention.ndim > 2 else []
    where = f" (layer {lead[0]}, head {lead[1]})" if len(lead) == 2 else f" (at {tuple(lead)})" if lead else ""
    raise ValueError(
        f"attention is not causal: weight {worst:.3g} on key {int(cols[at[1]])} from query {int(rows[at[1]])}"
        f"{where}; a decoder's query q may weigh only keys 0..q (float noise up to {CAUSAL_TOLERANCE:g} is "
        "accepted). Encoder or cross attention cannot be scored with the decoder statistics.")


def _sequences(attention: AttentionInput) -> tuple[list[np.ndarray], bool]:
    """The sequences' [L, H, T, T] arrays, checked (square, causal, same L and H), and whether one was given."""
    if isinstance(attention, np.ndarray):
        if attention.ndim == 4:
            sequences, single = [attention], True
        elif attention.ndim == 5:
            sequences, single = list(attention), False
        else:
            raise ValueError(f"attention must be [L, H, T, T] or [B, L, H, T, T], not {attention.shape}")
    elif isinstance(attention, StoredAttention):
        sequences, single = [attention], True
    elif isinstance(attention, (list, tuple)):  # a long input's StoredAttention stays in its file
        sequences = [one if isinstance(one, StoredAttention) else np.asarray(one) for one in attention]
        single = False
        for one in sequences:
            if one.ndim != 4:
                raise ValueError(f"each sequence's attention must be [L, H, T, T], not {one.shape}")
    else:
        raise ValueError(f"attention must be a numpy array or a list of them, not {type(attention).__name__}")
    if not sequences:
        raise ValueError("no sequences: attention is an empty list or batch")
    heads = sequences[0].shape[:2]
    for one in sequences:
        if one.shape[:2] != heads:
            raise ValueError(f"sequences disagree on [layers, heads]: {one.shape[:2]} and {heads}")
        check_causal(one)
    return sequences, single


def _token_sequences(token_ids: TokenIdsInput, sequences: list[np.ndarray], single: bool) -> list[np.ndarray]:
    """`token_ids` as one 1-D array per sequence, each as long as its sequence."""
    if single:
        ids = [np.asarray(token_ids)]
    elif isinstance(token_ids, np.ndarray):
        if token_ids.ndim != 2:
            raise ValueError(f"token_ids for a batch must be [B, T], not {token_ids.shape}")
        ids = list(token_ids)
    else:
        ids = [np.asarray(one) for one in token_ids]
    if len(ids) != len(sequences):
        raise ValueError(f"{len(ids)} token id sequences for {len(sequences)} attention sequences")
    for one, attention in zip(ids, sequences, strict=True):
        if one.ndim != 1 or len(one) != attention.shape[-1]:
            raise ValueError(f"token ids of shape {one.shape} for attention over {attention.shape[-1]} tokens")
    return ids


# ---------------------------------------------------------------- cells of each statistic


def _previous_cells(length: int) -> Cells:
    queries = np.arange(1, length)
    return queries, queries - 1, length - 1


def _sink_cells(length: int) -> Cells:
    queries = np.arange(1, length)
    return queries, np.zeros_like(queries), length - 1


def _duplicate_cells(token_ids: np.ndarray) -> Cells:
    """(q, k) with k < q and the same token; the queries are those with any such k."""
    length = len(token_ids)
    earlier_same = (token_ids[:, None] == token_ids[None, :]) & np.tri(length, k=-1, dtype=bool)
    queries, keys = np.nonzero(earlier_same)
    return queries, keys, int(earlier_same.any(1).sum())


def _delimiter_cells(is_delimiter: np.ndarray) -> Cells:
    """(q, k) with 1 <= q, k <= q and key k a delimiter; the queries are those q >= 1 that see any delimiter."""
    length = len(is_delimiter)
    seen = np.tri(length, dtype=bool) & np.asarray(is_delimiter, dtype=bool)[None, :]
    seen[0] = False
    queries, keys = np.nonzero(seen)
    return queries, keys, int(seen.any(1).sum())


def _induction_cells(length: int, n: int) -> Cells:
    """(q, q - n + 1) for q = n+1 .. 2n on [BOS] + r + r (see `induction`)."""
    if n < MIN_INDUCTION_N:
        raise ValueError(f"induction needs n >= {MIN_INDUCTION_N} (with n = 2 the induction key is the previous "
                         f"token, with n = 1 the token itself), not n = {n}")
    if length != 2 * n + 1:
        raise ValueError(f"an induction input [BOS] + r + r with n = {n} has 2n + 1 = {2 * n + 1} tokens, "
                         f"the attention has {length}")
    queries = np.arange(n + 1, 2 * n + 1)
    return queries, queries - n + 1, n


def _pooled(sequences: list[np.ndarray], cells: list[Cells]) -> tuple[np.ndarray, int]:
    """(sum over every sequence's cells of A, [L, H] float64; the number of queries in all)."""
    total = np.zeros(sequences[0].shape[:2])
    count = 0
    for attention, (queries, keys, n_queries) in zip(sequences, cells, strict=True):
        total += attention[..., queries, keys].sum(-1, dtype=np.float64)
        count += n_queries
    return total, count


def _mean(total: np.ndarray, count: int) -> np.ndarray:
    return total / count if count else np.full(total.shape, np.nan)


def _cells_null(cells: list[Cells]) -> float:
    """The score of `causal_null` on these cells: the sum of 1/(q+1) over the cells, over the queries."""
    count = sum(n_queries for _, _, n_queries in cells)
    if not count:
        return float("nan")
    return float(sum((1.0 / (queries + 1.0)).sum() for queries, _, _ in cells) / count)


# ---------------------------------------------------------------- the statistics


def causal_null(length: int) -> np.ndarray:
    """[T, T] float64: the uniform head over the visible prefix, 1/(q+1) on each key 0..q, 0 above the diagonal.

    The null every decoder statistic is read against: what a head that attends to whatever it can see,
    equally, scores.
    """
    if length < 1:
        raise ValueError(f"length must be at least 1, not {length}")
    return np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None]


def previous_token(attention: AttentionInput) -> np.ndarray:
    """[L, H]: mean over q >= 1 of A[q, q-1] (TransformerLens's previous-token pattern).

    A pure previous-token head scores 1; a uniform causal head the mean over q >= 1 of 1/(q+1). NaN if
    no sequence has two tokens.
    """
    sequences, _ = _sequences(attention)
    return _mean(*_pooled(sequences, [_previous_cells(one.shape[-1]) for one in sequences]))


def sink(attention: AttentionInput) -> np.ndarray:
    """[L, H]: mean over q >= 1 of A[q, 0], the weight on the first token (Xiao et al. 2023, attention sinks).

    A head that rests all its weight on the first token scores 1; a uniform causal head the mean over
    q >= 1 of 1/(q+1), as for previous_token.
    """
    sequences, _ = _sequences(attention)
    return _mean(*_pooled(sequences, [_sink_cells(one.shape[-1]) for one in sequences]))


def delimiter(attention: AttentionInput, is_delimiter: TokenIdsInput) -> np.ndarray:
    """[L, H]: the weight on the delimiters a query sees ([BOS], [EOS] and other special tokens, '.' and ','; the
    decoder's side of Clark et al. 2019's [CLS]/[SEP]/punctuation), over the queries q >= 1 that see any.

    `is_delimiter` matches `attention` as `token_ids` does (a bool per token). NaN where no query sees one.
    """
    sequences, single = _sequences(attention)
    flags = _token_sequences(is_delimiter, sequences, single)
    return _mean(*_pooled(sequences, [_delimiter_cells(one) for one in flags]))


def duplicate_token(attention: AttentionInput, token_ids: TokenIdsInput) -> np.ndarray:
    """[L, H]: weight on the earlier occurrence(s) of the query's token, over the queries whose token repeats.

    For each query q whose token occurred at some k < q, the weight summed over all such k (so a head
    that puts everything on the first occurrence, or spreads it over all of them, scores 1), averaged
    over those queries (TransformerLens's "duplicate_token_head"). A uniform causal head scores, per
    query, (number of earlier occurrences) / (q+1). All NaN when no token repeats in any sequence: the
    statistic does not apply, which is not a score of 0.
    """
    sequences, single = _sequences(attention)
    ids = _token_sequences(token_ids, sequences, single)
    return _mean(*_pooled(sequences, [_duplicate_cells(one) for one in ids]))


def induction(attention: AttentionInput, n: int) -> np.ndarray:
    """[L, H]: Olsson et al. 2022's induction score on the input [BOS] + r_1..r_n + r_1..r_n (2n + 1 tokens).

    Index arithmetic, with BOS at position 0: the first copy has r_i at position i (i = 1..n), the
    second copy has r_i at position n + i. A query q = n + i of the second copy (q = n+1 .. 2n) holds
    r_i, whose earlier occurrence is at position i = q - n; the token that FOLLOWED it is at
    i + 1 = q - n + 1, the key an induction head attends to. For the last query (q = 2n, r_n) that key
    is n + 1, the start of the second copy (r_1 followed r_n there). E.g. n = 3, [BOS a b c a b c]:
    queries 4, 5, 6 attend to keys 2 (b), 3 (c), 4 (a). The score is the mean of A[q, q - n + 1] over
    those n queries (TransformerLens's demo takes a diagonal that also counts two first-copy queries;
    we do not). With r drawn uniformly from a large vocabulary a token rarely repeats inside r, and such
    a repeat is ignored, as in Olsson et al.

    An exact induction head scores 1; a uniform causal head the mean over q = n+1 .. 2n of 1/(q+1).
    Needs n >= MIN_INDUCTION_N (for n = 2 the key q - 1 is the previous token) and exactly 2n + 1 tokens.
    """
    sequences, _ = _sequences(attention)
    return _mean(*_pooled(sequences, [_induction_cells(one.shape[-1], n) for one in sequences]))


def _entropy_sum(attention: np.ndarray) -> np.ndarray:
    """[L, H] float64: the sum over q >= 1 of -sum_k A[q, k] ln A[q, k], with 0 ln 0 = 0."""
    if attention.ndim == 4:  # a layer at a time: these temporaries are four copies of what they are given
        return np.stack([_entropy_sum(layer) for layer in attention])
    if attention.ndim == 3 and attention[0].size > ENTROPY_CELLS:  # and a head at a time when a head is large
        return np.array([_entropy_sum(head) for head in attention])
    length = attention.shape[-1]
    rows = np.clip(attention[..., 1:, :] * np.tri(length, dtype=bool)[1:], 0.0, None)  # drop the noise above
    logs = np.log(rows, out=np.zeros_like(rows), where=rows > 0)
    return -(rows * logs).sum((-2, -1), dtype=np.float64)


def causal_entropy(attention: AttentionInput) -> np.ndarray:
    """[L, H]: mean over q >= 1 of the row entropy in nats.

    Not smoothed (unlike Clark et al.'s encoder entropy), so a uniform causal head scores its null,
    the mean over q >= 1 of ln(q+1), exactly; a head with one key per row scores 0. The null grows with
    the length, so compare a head with the null on the same sequences, not across lengths.
    """
    sequences, _ = _sequences(attention)
    return _mean(*_entropy_pooled(sequences))


def _entropy_pooled(sequences: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """(sum over every sequence's queries q >= 1 of the row entropy, [L, H] float64; the number of queries)."""
    total = np.zeros(sequences[0].shape[:2])
    for one in sequences:
        total += _entropy_sum(one)
    return total, sum(one.shape[-1] - 1 for one in sequences)


def _entropy_null(lengths: Sequence[int]) -> float:
    count = sum(length - 1 for length in lengths)
    if not count:
        return float("nan")
    return float(sum(np.log(np.arange(2, length + 1)).sum() for length in lengths) / count)


# ---------------------------------------------------------------- nulls


def nulls(length: int | Sequence[int], token_ids: TokenIdsInput | None = None,
          n: int | None = None) -> dict[str, float]:
    """Each statistic of the uniform causal head (`causal_null`), pooled as the scores are.

    `length`: one sequence's length, or the list of the sequences' lengths (pooled by query, like a list
    of attentions). Gives previous_token, sink and causal_entropy; duplicate_token when `token_ids`
    (matching `length`) are given and some token repeats; induction when `n` is given (on its own
    input of 2n + 1 tokens, whatever `length` is). Equal to applying each function to `causal_null`,
    computed from the formulas (sums of 1/(q+1) over the statistic's cells; ln(q+1) for the entropy)
    without building the [T, T] maps. Floats, NaN where no query qualifies.
    """
    lengths = [int(length)] if np.ndim(length) == 0 else [int(one) for one in length]
    if any(one < 1 for one in lengths):
        raise ValueError(f"lengths must be at least 1, not {lengths}")
    out = {"previous_token": _cells_null([_previous_cells(one) for one in lengths]),
           "sink": _cells_null([_sink_cells(one) for one in lengths]),
           "causal_entropy": _entropy_null(lengths)}
    if token_ids is not None:
        shapes = [np.empty((0, 0, one, one)) for one in lengths]
        ids = _token_sequences(token_ids, shapes, np.ndim(length) == 0)
        duplicate = _cells_null([_duplicate_cells(one) for one in ids])
        if not np.isnan(duplicate):
            out["duplicate_token"] = duplicate
    if n is not None:
        out["induction"] = _cells_null([_induction_cells(2 * n + 1, n)])
    return out


# ---------------------------------------------------------------- one entry point


def decoder_head_statistics(attentions: AttentionInput | None, token_ids: TokenIdsInput | None = None,
                            induction_attention: AttentionInput | None = None,
                            n: int | None = None, is_delimiter: TokenIdsInput | None = None
                            ) -> dict[str, dict[str, Any]]:
    """Every decoder statistic that applies, with its null: name -> {"score", "null", "queries"}.

    `attentions`: the example runs' attentions (any form `previous_token` takes; None or [] for none),
    with their `token_ids` for duplicate_token and `is_delimiter` for delimiter; `induction_attention`: the
    attentions on the induction batch ([B, L, H, 2n+1, 2n+1] or a list), n from its length unless given.
    "score" is a float64
    [L, H] array, "null" the uniform causal head's score (a float, the same for every head), "queries"
    how many queries the means are over. previous_token, sink and causal_entropy come from the examples
    (they need two tokens somewhere); duplicate_token only with token ids in which some token repeats;
    induction only with the induction batch. A statistic that does not apply is absent, never 0 or NaN.
    """
    out: dict[str, dict[str, Any]] = {}

    def add(name: str, score: np.ndarray, null: float, queries: int) -> None:
        if queries:
            out[name] = {"score": score, "null": null, "queries": queries}

    if attentions is not None and not (isinstance(attentions, (list, tuple)) and not attentions):
        sequences, single = _sequences(attentions)
        lengths = [one.shape[-1] for one in sequences]
        cell_sets: dict[str, list[Cells]] = {"previous_token": [_previous_cells(one) for one in lengths],
                                             "sink": [_sink_cells(one) for one in lengths]}
        if token_ids is not None:
            ids = _token_sequences(token_ids, sequences, single)
            cell_sets["duplicate_token"] = [_duplicate_cells(one) for one in ids]
        if is_delimiter is not None:
            flags = _token_sequences(is_delimiter, sequences, single)
            cell_sets["delimiter"] = [_delimiter_cells(one) for one in flags]
        for name, cells in cell_sets.items():
            total, count = _pooled(sequences, cells)
            add(name, _mean(total, count), _cells_null(cells), count)
        total, count = _entropy_pooled(sequences)
        add("causal_entropy", _mean(total, count), _entropy_null(lengths), count)
    if induction_attention is not None:
        sequences, _ = _sequences(induction_attention)
        if n is None:
            n = (sequences[0].shape[-1] - 1) // 2
        cells = [_induction_cells(one.shape[-1], n) for one in sequences]
        if out:
            shape = next(iter(out.values()))["score"].shape
            if sequences[0].shape[:2] != shape:
                raise ValueError(f"the induction batch has [layers, heads] {sequences[0].shape[:2]}, "
                                 f"the examples {shape}")
        total, count = _pooled(sequences, cells)
        add("induction", _mean(total, count), _cells_null(cells), count)
    return out

