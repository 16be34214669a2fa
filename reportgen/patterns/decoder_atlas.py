"""The decoder heads' atlas: every decoder statistic over the examples and the induction test, per head,
with its causal null, spread, strongest example and label (issue 31).

`reportgen.patterns.decoder` defines each statistic on one or more sequences; this module takes them over a
build's inputs the way the encoder atlas (`reportgen.patterns.statistics`) does, so the report and the
pages can treat both alike: a mean per head (pooled over every qualifying query, as
`decoder.decoder_head_statistics` does), the spread over the inputs (each input's own score), the example
where the head shows it most (a page exists for each example), and a label per head from thresholds.

Mean and spread are of the same values: the pooled mean is the mean of the inputs' own scores, each weighted
by the number of its queries that qualify, so the spread (`_weighted_std`) is the population standard
deviation (ddof 0) of those scores with the same weights, i.e. of every qualifying query carrying its input's
score. min and max are the smallest and largest score of an input the statistic applies to.

Labels: a head passes a pattern when its mean is above the pattern's threshold (config `patterns.thresholds`:
`previous_token`, `induction`, `duplicate_token` and `sink`, the decoders' own); its label is the passing
pattern with the largest value / threshold, "mixed" where none passes (as `statistics.label_heads`).
Induction comes from the induction test's random sequences, not from the examples, so a head's induction
score has no example of its own; its spread is over those sequences.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from reportgen.config import PatternSettings, Thresholds
from reportgen.patterns import decoder
from reportgen.patterns.statistics import clean, load_settings
from reportgen.runs import ExampleRun

# label -> the statistic behind it, in the order ties are broken (the earlier wins)
DECODER_LABEL_STATS = {"induction": "induction", "previous_token": "previous_token",
                       "duplicate_token": "duplicate_token", "sink": "sink", "bos_delimiter": "bos_delimiter"}
DECODER_LABELS = (*DECODER_LABEL_STATS, "mixed")
EXAMPLE_STATS = ("previous_token", "duplicate_token", "sink", "bos_delimiter", "causal_entropy")  # on the examples
PUNCTUATION = {".", ","}  # with the special tokens, the keys of bos_delimiter (as Clark et al.'s punctuation)
WORD_MARKERS = "\u0120\u2581#"  # byte-level BPE's space (Ġ), SentencePiece's (▁), WordPiece's ## in front of a token


def thresholds_of(thresholds: Thresholds) -> dict[str, float]:
    """The threshold each decoder label is held to."""
    return {"induction": thresholds.induction, "previous_token": thresholds.previous_token,
            "duplicate_token": thresholds.duplicate_token, "sink": thresholds.sink,
            "bos_delimiter": thresholds.delimiter}


def delimiters(run: ExampleRun) -> np.ndarray:
    """[T] bool: the run's special tokens ([BOS], [EOS]...) and its '.' and ',' tokens, whatever marks a
    word start in front of them."""
    punctuation = np.array([token.lstrip(WORD_MARKERS) in PUNCTUATION for token in run.tokens], dtype=bool)
    return np.asarray(run.special, dtype=bool) | punctuation


def _statistics(runs: Sequence[ExampleRun], induction_attention: np.ndarray | None = None) -> dict:
    """decoder.decoder_head_statistics over `runs`, with their tokens and delimiters."""
    found = decoder.decoder_head_statistics([run.attention for run in runs], [list(run.tokens) for run in runs],
                                            induction_attention, is_delimiter=[delimiters(run) for run in runs])
    if "delimiter" in found:
        found["bos_delimiter"] = found.pop("delimiter")
    return found


def per_input_scores(runs: Sequence[ExampleRun]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Each example statistic on each example alone: (name -> [N, L, H] float64, NaN where it does not apply
    to an example (duplicate_token on a text without a repeated token); name -> [N] the queries each score is
    over, 0 there)."""
    shape = runs[0].attention.shape[:2]
    out = {name: np.full((len(runs), *shape), np.nan) for name in EXAMPLE_STATS}
    queries = {name: np.zeros(len(runs), dtype=np.int64) for name in EXAMPLE_STATS}
    for index, run in enumerate(runs):
        for name, entry in _statistics([run]).items():
            out[name][index] = entry["score"]
            queries[name][index] = entry["queries"]
    return out, queries


def _weighted_std(scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """[L, H]: the population standard deviation (ddof 0) of the scores [N, L, H], input i weighted by
    weights[i] (its queries), around their weighted mean; NaN where no input with weight counts."""
    counted = np.isfinite(scores) & (np.asarray(weights, dtype=np.float64) > 0)[:, None, None]
    weight = np.where(counted, np.asarray(weights, dtype=np.float64)[:, None, None], 0.0)
    total = weight.sum(0)
    values = np.where(counted, scores, 0.0)
    mean = np.divide((weight * values).sum(0), total, out=np.zeros(total.shape), where=total > 0)
    square = (weight * (values - mean) ** 2).sum(0)
    return np.sqrt(np.divide(square, total, out=np.full(total.shape, np.nan), where=total > 0))


def statistic_summary(pooled: np.ndarray, scores: np.ndarray, queries: int, null: float, linkable: int,
                      weights: np.ndarray) -> dict:
    """One statistic's record: the pooled mean, the spread of the per-input scores [N, L, H] weighted by
    `weights` [N] (each input's queries, so that it is the spread of what the pooled mean averages), their
    min and max, and the strongest of the first `linkable` inputs (the examples, which have pages)."""
    counted = np.isfinite(scores)
    std = _weighted_std(scores, weights)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a head no input counts for: NaN, as it should be
        low, high = np.nanmin(scores, 0), np.nanmax(scores, 0)
    pages = scores[:linkable]
    on_pages = np.isfinite(pages).any(0) if linkable else np.zeros(scores.shape[1:], dtype=bool)
    best = np.where(on_pages, np.where(np.isfinite(pages), pages, -np.inf).argmax(0) if linkable else -1, -1)
    best_value = np.full(best.shape, np.nan)
    if linkable:
        best_value = np.where(on_pages, np.take_along_axis(pages, np.maximum(best, 0)[None], 0)[0], np.nan)
    return {"mean": pooled, "std": std, "min": low, "max": high, "example": best, "example_value": best_value,
            "count": int(counted.sum(0).max()), "queries": int(queries), "null": float(null)}


def label_decoder_heads(means: dict[str, np.ndarray], thresholds: dict[str, float]) -> tuple[np.ndarray, list]:
    """(labels [L, H], patterns [L][H]): the passing pattern with the largest value / threshold, and every
    pattern that passes, strongest first; "mixed" where none passes. A statistic absent from `means` never passes."""
    shape = np.shape(next(iter(means.values())))
    scores = []
    for label, stat in DECODER_LABEL_STATS.items():
        value = np.nan_to_num(np.asarray(means.get(stat, np.full(shape, np.nan)), dtype=np.float64), nan=-np.inf)
        threshold = max(thresholds[label], 1e-12)
        scores.append(np.where(value > threshold, value / threshold, 0.0))
    stacked = np.stack(scores)
    names = np.array(list(DECODER_LABEL_STATS), dtype=object)
    labels = np.where(stacked.max(0) > 0, names[stacked.argmax(0)], "mixed").astype(str)
    order = np.argsort(-stacked, axis=0, kind="stable")
    patterns = [[[str(names[p]) for p in order[:, layer, head] if stacked[p, layer, head] > 0]
                 for head in range(shape[1])] for layer in range(shape[0])]
    return labels, patterns


def strongest_heads(summary: dict, top_k: int) -> list[dict[str, Any]]:
    mean = np.asarray(summary["mean"], dtype=np.float64)
    heads = mean.shape[1]
    flat = np.nan_to_num(mean, nan=-np.inf).reshape(-1)
    order = np.argsort(-flat, kind="stable")[:top_k]
    return [{"layer": int(i // heads), "head": int(i % heads), "value": mean.flat[i],
             "std": summary["std"].flat[i], "example": int(summary["example"].flat[i]),
             "example_value": summary["example_value"].flat[i] if summary["example"].flat[i] >= 0 else None}
            for i in order if np.isfinite(flat[i])]


def decoder_atlas(runs: Sequence[ExampleRun], induction_attention: np.ndarray | None, induction_test: dict | None,
                  settings: PatternSettings, linkable: int | None = None) -> dict[str, Any]:
    """Every decoder statistic that applies, JSON-able (report.DecoderStatistics).

    `runs`: the examples, then any corpus sentences; the first `linkable` (default: all) have pages, so only
    they can be a head's strongest example. `induction_attention`: [B, L, H, 2n+1, 2n+1] on the induction test's
    sequences, described by `induction_test` ({"n", "sequences", "seed", "tokens"}), or None where the test
    could not run (the model takes too few positions, or its tokenizer has no token to start with).
    """
    linkable = len(runs) if linkable is None else linkable
    pooled = _statistics(runs, induction_attention)
    scores, queries = per_input_scores(runs)
    out: dict[str, Any] = {}
    for name, entry in pooled.items():
        if name == "induction":  # every sequence has n queries: weighted alike
            per_sequence = np.stack([decoder.induction(one, induction_test["n"]) for one in induction_attention])
            out[name] = statistic_summary(entry["score"], per_sequence, entry["queries"], entry["null"], linkable=0,
                                          weights=np.full(len(per_sequence), induction_test["n"]))
        else:
            out[name] = statistic_summary(entry["score"], scores[name], entry["queries"], entry["null"], linkable,
                                          weights=queries[name])
    thresholds = thresholds_of(settings.thresholds)
    labels, patterns = label_decoder_heads({name: entry["mean"] for name, entry in out.items()}, thresholds)
    out["labels"] = labels.tolist()
    out["patterns"] = patterns
    out["label_counts"] = {name: int((labels == name).sum()) for name in DECODER_LABELS}
    out["label_stats"] = {label: stat for label, stat in DECODER_LABEL_STATS.items() if stat in out}
    out["thresholds"] = thresholds
    out["top_heads"] = {name: strongest_heads(out[name], settings.top_k) for name in pooled}
    out["induction_test"] = induction_test
    out["counts"] = {"examples": linkable, "inputs": len(runs), "tokens": int(sum(run.n_tokens for run in runs)),
                     "layers": int(labels.shape[0]), "heads": int(labels.shape[1])}
    return clean(out)


def example_labels(run: ExampleRun, settings: PatternSettings | None = None) -> list[list[str]]:
    """Each head's label on one example alone (no induction: the test's sequences are not the example's)."""
    settings = settings or load_settings()
    found = _statistics([run])
    labels, _ = label_decoder_heads({name: entry["score"] for name, entry in found.items()},
                                    thresholds_of(settings.thresholds))
    return labels.tolist()
