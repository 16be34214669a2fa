"""Per-head attention pattern statistics: the "attention pattern atlas" (issue 4).

Every statistic is computed per example as an [layers, heads] array (reportgen.patterns.measures, which
defines them after Clark, Khandelwal, Levy, Manning 2019, Voita, Talbot, Moiseev, Sennrich, Titov 2019 and
Kovaleva, Romanov, Rogers, Rumshisky 2019), then folded into running sums (`PatternAccumulator`), so a
corpus of any size is summarised in bounded memory. The result holds, per statistic and head, the mean,
spread and strongest example over the corpus, each head's label (`label_heads`: its dominant pattern
against the thresholds) and the map of the heads' similarity. The per-example names callers have always
imported from here (STATS, `entropy`, `example_statistics`, `null_attention`) are re-exported.

Nulls: every statistic is also taken, on the same inputs and averaged the same way, for
three synthetic heads (`null_attention`: uniform, pure previous token, pure next token),
so a score can be read against what a head with a simpler pattern gets.

Contributions: every statistic is also taken on what each head passes on (Kobayashi et al. 2020,
reportgen.model.value_norms): the run's attention replaced by its contribution shares, each row of
A[i, j] ||f(x_j)|| over its total, so e.g. `cls` there is the share of what a head passes on that
comes from [CLS]. The same inputs count (corpus sentences too); runs without value norms (synthetic
attention, a layout whose heads cannot be located) leave the result's `contribution` None. The nulls
are of weights only. Beside them, the paired test of the "no-op" reading of [CLS]/[SEP] attention
(reportgen.patterns.noop) on the heads that put most weight there, paired over the examples.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from reportgen.config import PatternSettings, Thresholds, load_section
from reportgen.errors import DataError
from reportgen.patterns.conventions import conventions
from reportgen.patterns.measures import (
    NULL_HEADS,
    STATS,
    ExampleWeights,
    entropy,
    example_statistics,
    null_attention,
)
from reportgen.patterns.noop import DelimiterShares
from reportgen.patterns.similarity import js_divergence_sums, metric_mds
from reportgen.patterns.words import resegment
from reportgen.runs import ExampleRun, shares

# What other modules and the tests import from here: this module's own names, and the per-example
# statistics' names they have always found here (reportgen.patterns.measures).
__all__ = [
    "DIGITS", "LABELS", "LABEL_STATS", "RESULT_VERSION", "PatternAccumulator", "clean", "head_statistics",
    "label_heads", "load_settings", "pattern_scores", "STATS", "entropy", "example_statistics",
    "null_attention",
]

DIGITS = 6
RESULT_VERSION = 3  # part of the patterns cache key: bump when the result's keys or definitions change
# (3: every statistic also on contribution shares, and the [CLS]/[SEP] no-op test)

# The statistic behind each label, in the order used to break exact ties.
LABEL_STATS = {
    "previous_token": "previous_token", "next_token": "next_token", "within_word": "within_word",
    "other_segment": "other_segment", "same_token": "same_token", "delimiter": "delimiter",
    "broad": "effective_share",
}
LABELS = tuple(LABEL_STATS) + ("mixed",)

# ---------------------------------------------------------------- settings


def load_settings(overrides: dict[str, Any] | None = None) -> PatternSettings:
    """The shipped defaults merged with `overrides` (a user's `patterns:` mapping), validated."""
    return load_section(PatternSettings, "patterns", overrides)


# ---------------------------------------------------------------- streaming aggregation


class _Running:
    """Per cell running count, mean and M2 (Welford), min, max, and the strongest linkable example; NaN skipped."""

    def __init__(self, shape: tuple[int, ...]):
        self.count = np.zeros(shape, dtype=np.int64)
        self.mean = np.zeros(shape)
        self.m2 = np.zeros(shape)
        self.min = np.full(shape, np.inf)
        self.max = np.full(shape, -np.inf)
        self.best = np.full(shape, -1, dtype=np.int64)
        self.best_value = np.full(shape, -np.inf)

    def add(self, value: np.ndarray, index: int, linkable: bool = True) -> None:
        present = ~np.isnan(value)
        value = np.where(present, value, 0.0)
        self.count += present
        delta = np.where(present, value - self.mean, 0.0)
        self.mean += delta / np.maximum(self.count, 1)
        self.m2 += np.where(present, delta * (value - self.mean), 0.0)
        self.max = np.where(present & (value > self.max), value, self.max)
        better = present & linkable & (value > self.best_value)
        self.best_value = np.where(better, value, self.best_value)
        self.best = np.where(better, index, self.best)
        self.min = np.where(present & (value < self.min), value, self.min)

    def std(self) -> np.ndarray:
        """Population standard deviation over examples (as the first head_statistics did)."""
        return np.sqrt(np.divide(self.m2, self.count, out=np.full(self.m2.shape, np.nan), where=self.count > 0))

    def where_counted(self, array: np.ndarray) -> np.ndarray:
        """`array` where some example counted, NaN in the cells no example had a value for."""
        return np.where(self.count > 0, array, np.nan)


def clean(value: Any) -> Any:
    """Numbers rounded to DIGITS, NaN/inf as None, numpy types as plain Python: JSON-able."""
    if isinstance(value, np.ndarray):
        return clean(value.tolist())
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return round(float(value), DIGITS) if math.isfinite(value) else None
    return value


class PatternAccumulator:
    """Consumes ExampleRuns one at a time and keeps running sums only.

    Memory is O(statistics x layers x heads + (layers x heads)^2) whatever the number of
    examples, so 10,000 sentences stream through; `result()` can be called at any time.
    """

    def __init__(self, settings: PatternSettings | None = None):
        self.settings = settings or load_settings()
        self.shape: tuple[int, int] | None = None
        self.examples = 0
        self.pairs = 0
        self.tokens = 0
        self.log_n = 0.0
        self.queries = {"within_word": 0, "other_segment": 0}
        self._stats: _Running | None = None
        self._nulls: _Running | None = None  # [S, 1, 3]: the NULL_HEADS on the same inputs
        self._js: np.ndarray | None = None
        self._js_queries = 0
        # The STATS on contribution shares, and the per-example [CLS]/[SEP] shares of the no-op test;
        # None from the first input without value norms on (contributions of only some inputs would mislead).
        self._contribution: _Running | None = None
        self._delimiter: DelimiterShares | None = None

    def add(self, run: ExampleRun, linkable: bool = True) -> None:
        """Fold one example in; its index (0, 1, ...) is what `example` refers to in the result.

        Only `linkable` examples (those with a page in the site) can be a head's `example`;
        corpus sentences count in every statistic but have no page to link to.
        """
        layers, heads = run.attention.shape[:2]
        if self.shape is None:
            self.shape = (layers, heads)
            self._stats = _Running((len(STATS), layers, heads))
            self._nulls = _Running((len(STATS), 1, len(NULL_HEADS)))
            self._js = np.zeros((layers * heads, layers * heads)) if self.settings.similarity else None
        elif self.shape != (layers, heads):
            raise DataError(f"example {self.examples}: attention has {layers}x{heads} heads, "
                            f"earlier ones {self.shape[0]}x{self.shape[1]}")
        run = resegment(run, self.settings.segmentation)
        weights = ExampleWeights.of(run, self.settings.word_level)
        unit, queries = weights.unit, weights.queries()
        values = weights.values(run.attention)
        self._stats.add(values, self.examples, linkable)
        self._add_contributions(run, weights, values, linkable)
        self._nulls.add(weights.values(null_attention(run.n_tokens)), self.examples)
        if self._js is not None:
            self._js += js_divergence_sums(unit.attention)
            self._js_queries += unit.n_tokens
        self.examples += 1
        self.pairs += int((run.segment_ids == 1).any())
        self.tokens += run.n_tokens
        self.log_n += math.log(unit.n_tokens)
        for name, count in queries.items():
            self.queries[name] += count

    def _add_contributions(self, run: ExampleRun, weights: ExampleWeights, values: np.ndarray,
                           linkable: bool) -> None:
        """The same statistics on the run's contribution shares, while every input has value norms."""
        if run.value_norms is None or (self._contribution is None and self.examples > 0):
            self._contribution = self._delimiter = None
            return
        if self._contribution is None:
            self._contribution, self._delimiter = _Running(values.shape), DelimiterShares()
        contribution = weights.values_by_layer(shares(layer, norms)[0]
                                               for layer, norms in zip(run.attention, run.value_norms, strict=True))
        self._contribution.add(contribution, self.examples, linkable)
        if linkable:  # the examples: corpus sentences count in the statistics, not in the paired test
            cls_sep = STATS.index("cls_sep")
            self._delimiter.add(values[cls_sep], contribution[cls_sep])

    def add_all(self, runs: Iterable[ExampleRun]) -> "PatternAccumulator":
        for run in runs:
            self.add(run)
        return self

    # -- results

    def labels(self) -> tuple[np.ndarray, list]:
        """(labels [L, H], passing patterns [L][H]) from the mean statistics (see `label_heads`)."""
        means = dict(zip(STATS, self._stats.where_counted(self._stats.mean), strict=True))
        return label_heads(means, self.settings.thresholds)

    def nulls(self) -> dict[str, dict[str, float]]:
        """Per statistic, what each of NULL_HEADS scores on the same inputs, averaged as the real heads."""
        means = self._nulls.where_counted(self._nulls.mean)
        return {name: {null: means[index, 0, column] for column, null in enumerate(NULL_HEADS)}
                for index, name in enumerate(STATS)}

    def result(self) -> dict[str, Any]:
        """Everything the site needs, JSON-able; see reportgen.patterns.measures for the definitions."""
        if self._stats is None:
            raise DataError("no examples to compute attention pattern statistics from")
        out: dict[str, Any] = {name: self._summary(index) for index, name in enumerate(STATS)}
        out["entropy"]["uniform_baseline"] = self.log_n / self.examples
        labels, patterns = self.labels()
        out["labels"] = labels.tolist()
        out["patterns"] = patterns
        out["label_counts"] = {name: int((labels == name).sum()) for name in LABELS}
        out["label_stats"] = dict(LABEL_STATS)
        out["top_heads"] = {name: self._top(index) for index, name in enumerate(STATS)}
        out["similarity"] = self._similarity(labels) if self._js is not None else None
        counts = self._stats.count
        out["counts"] = {
            "examples": self.examples, "pairs": self.pairs, "tokens": self.tokens,
            "layers": self.shape[0], "heads": self.shape[1],
            **{f"{name}_examples": int(counts[STATS.index(name)].max()) for name in ("within_word", "other_segment")},
            **{f"{name}_queries": count for name, count in self.queries.items()},
        }
        out["nulls"] = self.nulls()
        out["contribution"] = self._contribution_result()
        out["conventions"] = conventions(self.settings)
        out["settings"] = self.settings.model_dump(mode="json")
        return clean(out)

    def _summary(self, stat: int) -> dict[str, Any]:
        """Mean, std, min, max over examples of statistic `stat` per head, and its strongest example."""
        stats = self._stats
        return {
            "mean": stats.where_counted(stats.mean)[stat], "std": stats.std()[stat],
            "min": stats.where_counted(stats.min)[stat], "max": stats.where_counted(stats.max)[stat],
            "example": np.where(stats.count[stat] > 0, stats.best[stat], -1),
            "example_value": np.where(stats.best[stat] >= 0, stats.best_value[stat], np.nan),
            "count": int(stats.count[stat].max()),
        }

    def _contribution_result(self) -> dict[str, Any] | None:
        """Per statistic on contribution shares: mean, std and strongest example (with a page) per head,
        and the [CLS]/[SEP] no-op test; None when some input had no value norms."""
        if self._contribution is None:
            return None
        running = self._contribution
        mean, std = running.where_counted(running.mean), running.std()
        statistics = {name: {"mean": mean[index], "std": std[index], "count": int(running.count[index].max()),
                             "example": np.where(running.count[index] > 0, running.best[index], -1)}
                      for index, name in enumerate(STATS)}
        chosen_by = self._stats.where_counted(self._stats.mean)[STATS.index("cls_sep")]
        return {"statistics": statistics, "delimiter": self._delimiter.test(chosen_by, self.examples)}

    def _top(self, stat: int) -> list[dict[str, Any]]:
        stats = self._stats
        mean = stats.where_counted(stats.mean)[stat]
        heads = self.shape[1]
        flat = np.nan_to_num(mean, nan=-np.inf).reshape(-1)
        order = np.argsort(-flat, kind="stable")[: self.settings.top_k]
        return [{"layer": int(i // heads), "head": int(i % heads), "value": mean.flat[i],
                 "std": stats.std()[stat].flat[i], "example": int(stats.best[stat].flat[i]),
                 "example_value": stats.best_value[stat].flat[i] if stats.best[stat].flat[i] >= 0 else None}
                for i in order if np.isfinite(flat[i])]

    def distances(self) -> np.ndarray:
        """[LH, LH] mean Jensen-Shannon divergence per query token (Clark's sum / number of queries)."""
        return self._js / max(self._js_queries, 1)

    def _similarity(self, labels: np.ndarray) -> dict[str, Any]:
        dist = self.distances()
        coords, stress = metric_mds(dist)
        heads = self.shape[1]
        points = [{"layer": i // heads, "head": i % heads, "x": coords[i, 0], "y": coords[i, 1],
                   "label": labels.flat[i]} for i in range(len(dist))]
        return {"measure": "Jensen-Shannon divergence in nats, smoothed 0.999A+0.001/n, mean per query token "
                           "(Clark et al. 2019 sum over queries and examples, divided by their number)",
                "layout": "metric MDS (SMACOF from classical scaling)",
                "index": "layer * heads + head", "distance": dist, "points": points, "stress": stress}


def _passes(means: dict[str, np.ndarray], stat: str, threshold: float, inclusive: bool = False) -> np.ndarray:
    """Where the mean of `stat` is above `threshold` (at least it, when inclusive); NaN never passes."""
    value = np.nan_to_num(np.asarray(means[stat], dtype=np.float64), nan=-np.inf)
    return value >= threshold if inclusive else value > threshold


def pattern_scores(means: dict[str, np.ndarray], thresholds: Thresholds) -> np.ndarray:
    """[len(LABEL_STATS), L, H] score of each pattern: value / threshold where it passes, else 0.

    A pattern passes when its mean over examples is above its threshold (Clark's "> 0.5"
    / "> 0.6"); positional also passes on Voita's argmax share >= positional_argmax (the
    better of the two scores counts), and broad when exp(entropy) / n >= broad_share.
    within_word must also pass boundary_selectivity: a purely positional head scores about
    0.56 within word on short inputs (every piece has a neighbour in its word) but 0 on
    selectivity, so it is never labelled a word-piece head (issue 12).
    NaN (pattern not measurable on this corpus) never passes.
    """
    positional, argmax = thresholds.positional, thresholds.positional_argmax
    tests = {  # label -> (statistic, threshold, whether reaching the threshold is enough)
        "previous_token": [("previous_token", positional, False), ("previous_token_argmax", argmax, True)],
        "next_token": [("next_token", positional, False), ("next_token_argmax", argmax, True)],
        "within_word": [("within_word", thresholds.within_word, False)],
        "other_segment": [("other_segment", thresholds.other_segment, False)],
        "same_token": [("same_token", thresholds.same_token, False)],
        "delimiter": [("delimiter", thresholds.delimiter, False)],
        "broad": [("effective_share", thresholds.broad_share, True)],
    }
    required = {"within_word": _passes(means, "boundary_selectivity", thresholds.boundary_selectivity)}
    scores = []
    for label in LABEL_STATS:
        score = np.zeros(np.shape(means["delimiter"]))
        for stat, threshold, inclusive in tests[label]:
            value = np.nan_to_num(np.asarray(means[stat], dtype=np.float64), nan=-np.inf)
            passes = _passes(means, stat, threshold, inclusive) & required.get(label, True)
            score = np.maximum(score, np.where(passes, value / max(threshold, 1e-12), 0.0))
        scores.append(score)
    return np.stack(scores)


def label_heads(means: dict[str, np.ndarray], thresholds: Thresholds) -> tuple[np.ndarray, list]:
    """(labels [L, H], patterns [L][H]): the dominant pattern per head, and all that pass.

    The label is the passing pattern with the largest value / threshold, so a head that is
    0.95 delimiter and just over the within-word threshold is labelled delimiter (and lists
    both); "mixed" when none passes. Exact ties go to the earlier pattern in LABEL_STATS.
    """
    scores = pattern_scores(means, thresholds)
    names = np.array(list(LABEL_STATS), dtype=object)
    labels = np.where(scores.max(0) > 0, names[scores.argmax(0)], "mixed").astype(str)
    order = np.argsort(-scores, axis=0, kind="stable")
    patterns = [[[str(names[p]) for p in order[:, layer, head] if scores[p, layer, head] > 0]
                 for head in range(scores.shape[2])] for layer in range(scores.shape[1])]
    return labels, patterns


def head_statistics(runs: Iterable[ExampleRun], settings: PatternSettings | None = None) -> dict[str, Any]:
    """Per-head pattern statistics over `runs`, streamed through a PatternAccumulator.

    Keys: one per statistic in STATS ({"mean", "std", "min", "max": [L][H], "example",
    "example_value": [L][H], "count": int}; "entropy" also has "uniform_baseline"), plus
    "labels", "patterns", "label_counts", "label_stats", "top_heads", "similarity", "counts", "nulls",
    "contribution" (None, or the statistics on contribution shares and the no-op test), "conventions", "settings".
    """
    return PatternAccumulator(settings).add_all(runs).result()
