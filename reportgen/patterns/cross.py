"""An encoder-decoder's cross-attention heads: where each decoder token looks in the source (issue 31).

Two statistics per head, each beside what a uniform head over the S source tokens scores on the same queries:

- `source_special`: the share of attention on the source's special tokens (BART's <s> and </s>, T5's and
  Marian's </s>). It is the cross-attention counterpart of Clark et al. 2019's attention to [SEP], which they
  read as a "no-op": a head with nothing to take from the source parks its weight there. The null is the
  special tokens' share of the source, n_special / S.
- `entropy`: the row entropy in nats, not smoothed (as the decoder atlas's causal entropy), so a uniform
  head scores its null ln S exactly and a head on one source token 0.

Both are pooled over every decoder query of every example (a long target counts by its queries, as the
decoder atlas pools), with the spread of each example's own score weighted by its queries (population, ddof 0,
so that it is the spread of what the mean averages), min and max of those scores, the example where the head
shows it most, and the number of queries; each null is pooled the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reportgen.patterns.decoder_atlas import statistic_summary, strongest_heads
from reportgen.patterns.statistics import clean

CROSS_STATS = ("source_special", "entropy")


def _row_entropy(attention: np.ndarray) -> np.ndarray:
    """[..., Q] float64: -sum_k A[q, k] ln A[q, k] with 0 ln 0 = 0."""
    rows = np.clip(attention.astype(np.float64), 0.0, None)
    logs = np.log(rows, out=np.zeros_like(rows), where=rows > 0)
    return -(rows * logs).sum(-1)


def cross_scores(attention: np.ndarray, source_special: np.ndarray) -> dict[str, tuple[np.ndarray, float]]:
    """One example's cross-attention [L, H, T, S] and its source's special flags [S]: per statistic, the sum
    over its T queries per head [L, H] (float64) and the same sum for a uniform head over the source."""
    special = np.asarray(source_special, dtype=bool)
    queries, sources = attention.shape[-2:]
    if special.shape != (sources,):
        raise ValueError(f"{special.shape[0]} special flags for a source of {sources} tokens")
    on_special = attention[..., special].astype(np.float64).sum(-1)  # [L, H, T]
    return {"source_special": (on_special.sum(-1), queries * special.sum() / sources),
            "entropy": (_row_entropy(attention).sum(-1), queries * np.log(sources))}


def cross_atlas(attentions: Sequence[np.ndarray], source_special: Sequence[np.ndarray],
                threshold: float, top_k: int) -> dict:
    """Both statistics over the examples (each one's cross-attention [L, H, T, S] and source special flags
    [S]), JSON-able (report.CrossStatistics); `threshold`: the share on the source's special tokens above
    which a finding calls a head one that parks its attention there."""
    if not attentions:
        raise ValueError("cross_atlas needs at least one example")
    per_example = [cross_scores(attention, special) for attention, special in zip(attentions, source_special,
                                                                                  strict=True)]
    counts = np.array([attention.shape[-2] for attention in attentions], dtype=np.float64)
    out: dict = {}
    for name in CROSS_STATS:
        sums = np.stack([scores[name][0] for scores in per_example])  # [N, L, H]
        nulls = np.array([scores[name][1] for scores in per_example])
        out[name] = statistic_summary(sums.sum(0) / counts.sum(), sums / counts[:, None, None], int(counts.sum()),
                                      nulls.sum() / counts.sum(), linkable=len(attentions), weights=counts)
    out["threshold"] = float(threshold)
    out["top_heads"] = {name: strongest_heads(out[name], top_k) for name in CROSS_STATS}
    layers, heads = attentions[0].shape[:2]
    out["counts"] = {"examples": len(attentions), "inputs": len(attentions), "tokens": int(counts.sum()),
                     "layers": int(layers), "heads": int(heads)}
    return clean(out)
