"""Per-head attention pattern statistics: the "attention pattern atlas" (issue 4).

Definitions follow Clark, Khandelwal, Levy, Manning 2019 ("What Does BERT Look At?"),
Voita, Talbot, Moiseev, Sennrich, Titov 2019 (positional heads, argmax test) and
Kovaleva, Romanov, Rogers, Rumshisky 2019 (vertical / diagonal patterns). A is one
head's attention on one example, A[q, k] = weight query q puts on key k.

Every statistic is computed per example as an [layers, heads] array, vectorised over
heads, queries and keys (one matrix product per example against a stack of
query/key weight matrices), then folded into running sums (`PatternAccumulator`), so a corpus
of any size is summarised in bounded memory. The statistics:

- next_token / previous_token: mean over the queries that have a next (previous)
  token of A[q, q+1] (A[q, q-1]). Clark divides the sum by n, counting the last
  (first) query as 0; we divide by n-1 so that a pure next-token head scores exactly
  1.0 at any length. Clark's figure (ours times (n-1)/n) is next_token_clark /
  previous_token_clark.
- next_token_argmax / previous_token_argmax: Voita's test, the share of those queries
  whose largest weight is at offset +1 (-1); positional when >= 90%.
- cls, sep, cls_sep, punctuation, delimiter: Clark's mean over all n queries of the
  mass on [CLS] (the first special token, or <s>), on [SEP] (every other special,
  or </s>), on both, on the punctuation keys '.' and ',' (only those, as Clark), and
  on all three (the label's "delimiter" mass; Kovaleva's "vertical" pattern).
- same_token: mass on the token itself and on other occurrences of the same word in
  the same segment, over the word queries (neither special nor '.' / ','). "Same word"
  compares the lower-cased word string rebuilt from its pieces ('straw' + '##berries'
  -> 'strawberries'); the other pieces of the query's own word do not count here (that
  is within_word). Punctuation is a delimiter, never a word here (see `word_tokens`).
- other_segment: for pairs, mass from a word on the occurrences of its word in the
  other sentence, over the queries whose word does occur there (NaN, and not counted,
  for examples without any such query); specials and punctuation excluded.
- within_word: mass from a piece on the OTHER pieces of its own word, over queries in
  multi-piece words (NaN where the example has none). For character-level Chinese,
  words come from a segmentation (`segmentation: spaces | jieba`, see `resegment`).
- adjacent_same_word / adjacent_boundary: mean of A[q, k] over the neighbour pairs
  (k = q-1 or q+1, both in words) inside one word / across a word boundary;
  boundary_selectivity, their difference per example, is 0 for any purely positional
  head (issue 12: a previous-token head scores ~0.56 within word by position alone).
  distant_within_word: mass on the pieces of one's word that are not neighbours.
  The within-word statistics are always measured between pieces, also with `word_level`.
- entropy: Clark's smoothed row entropy in nats (A' = 0.9999 A + 0.0001/n), against
  the uniform baseline ln(n). effective_share: exp(entropy) / n per example, the share
  of the tokens that uniform attention would have to cover to be as spread; 1.0 for a
  uniform head, and unlike entropy / ln(n) it does not drift with length. "Broad" is
  effective_share >= 0.5 by default, i.e. entropy within ln 2 nats of ln(n).
  max_weight: mean over queries of the largest weight (Clark's broad heads put "at most
  10% on any single word"; reported, not used for the label, because on 20-token inputs
  even uniform attention over half the tokens puts 10% on each).

With `word_level: true` all statistics but the within-word ones are computed on the word-level
attention (Clark: to a word = sum over its pieces, from a word = mean over its pieces).

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
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from reportgen.config import PatternSettings, Thresholds, load_section
from reportgen.errors import DataError
from reportgen.patterns.conventions import conventions
from reportgen.patterns.noop import DelimiterShares
from reportgen.patterns.similarity import js_divergence_sums, metric_mds
from reportgen.patterns.words import (
    delimiter_keys,
    punctuation_keys,
    resegment,
    word_codes,
    word_level_attention,
    word_level_run,
    word_strings,
)
from reportgen.runs import ExampleRun, shares

DIGITS = 6
RESULT_VERSION = 3  # part of the patterns cache key: bump when the result's keys or definitions change
# (3: every statistic also on contribution shares, and the [CLS]/[SEP] no-op test)

# ---------------------------------------------------------------- settings


def load_settings(overrides: dict[str, Any] | None = None) -> PatternSettings:
    """The shipped defaults merged with `overrides` (a user's `patterns:` mapping), validated."""
    return load_section(PatternSettings, "patterns", overrides)


# ---------------------------------------------------------------- per-example statistics

# Statistics in a fixed order; KEY_SET_STATS are one weighted sum of attention each, over a
# set of keys per query (see _key_set_weights). WORD_STATS are measured between pieces, always
# (see word_structure_weights); boundary_selectivity is the difference of two of them.
KEY_SET_STATS = ("next_token", "previous_token", "next_token_clark", "previous_token_clark", "cls", "sep",
                 "cls_sep", "punctuation", "delimiter", "same_token", "other_segment")
WORD_WEIGHT_STATS = ("within_word", "adjacent_same_word", "adjacent_boundary", "distant_within_word")
WORD_STATS = WORD_WEIGHT_STATS + ("boundary_selectivity",)
ROW_STATS = ("next_token_argmax", "previous_token_argmax", "entropy", "effective_share", "max_weight")
STATS = KEY_SET_STATS + WORD_STATS + ROW_STATS

# The statistic behind each label, in the order used to break exact ties.
LABEL_STATS = {
    "previous_token": "previous_token", "next_token": "next_token", "within_word": "within_word",
    "other_segment": "other_segment", "same_token": "same_token", "delimiter": "delimiter",
    "broad": "effective_share",
}
LABELS = tuple(LABEL_STATS) + ("mixed",)


def entropy(attention: np.ndarray) -> np.ndarray:
    """Mean over queries of the row entropy in nats, [L, H].

    Clark et al. smooth A' = 0.9999 A + 0.0001 / n before taking -sum A' ln A';
    the uniform baseline is ln n.
    """
    length = attention.shape[-1]
    smooth = 0.9999 * attention + 0.0001 / length
    return -(smooth * np.log(smooth)).sum(-1).mean(-1)


def _weights(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """[T, T] weights: keys[q, k] on the chosen query rows, each row 1/|queries|; NaN if no query."""
    count = int(queries.sum())
    if count == 0:
        return np.full(keys.shape, np.nan)
    return (keys & queries[:, None]) / count


def _pair_weights(cells: np.ndarray) -> np.ndarray:
    """[T, T] weights: the mean of A[q, k] over the chosen (q, k) cells; NaN if none."""
    count = int(cells.sum())
    return cells / count if count else np.full(cells.shape, np.nan)


def word_tokens(run: ExampleRun) -> np.ndarray:
    """Tokens that take part in the word patterns (same_token, other_segment): not special, not '.' or ','.

    Clark's punctuation is attention to a delimiter; counting '.' -> '.' as "the same word"
    would credit a head that rests on punctuation with word matching.
    """
    return ~run.special & (run.word_ids >= 0) & ~punctuation_keys(run)


def word_match_cells(run: ExampleRun) -> dict[str, np.ndarray]:
    """[T, T] (query, key) cells of same_token and other_segment, and the query rows of same_token.

    same_token: the token itself and other occurrences of its word in the same segment (not
    the other pieces of its own word); other_segment: occurrences of its word in the other sentence.
    """
    words = word_tokens(run)
    code = word_codes(word_strings(run.tokens, run.word_ids), words)
    same_string = (code[:, None] == code[None, :]) & words[:, None] & words[None, :]
    same_segment = run.segment_ids[:, None] == run.segment_ids[None, :]
    own_word = run.word_ids[:, None] == run.word_ids[None, :]
    same_token = (np.eye(run.n_tokens, dtype=bool) & words[:, None]) | (same_string & same_segment & ~own_word)
    return {"same_token": same_token, "other_segment": same_string & ~same_segment, "word_queries": words}


def _key_set_weights(run: ExampleRun) -> np.ndarray:
    """Weight matrices of KEY_SET_STATS stacked as [T*T, S], so one matmul gives them all."""
    length = run.n_tokens
    every = np.ones(length, dtype=bool)
    position = np.arange(length)
    cls, sep = delimiter_keys(run)
    punct = punctuation_keys(run)
    cells = word_match_cells(run)
    next_cells, previous_cells = np.eye(length, k=1, dtype=bool), np.eye(length, k=-1, dtype=bool)

    def wide(keys: np.ndarray) -> np.ndarray:  # the same key set for every query
        return np.broadcast_to(keys, (length, length))

    weights = {
        "next_token": _weights(next_cells, position < length - 1),
        "previous_token": _weights(previous_cells, position > 0),
        # Clark et al. 2019 divide by all n queries (the last / first one counts as 0)
        "next_token_clark": _weights(next_cells, every),
        "previous_token_clark": _weights(previous_cells, every),
        "cls": _weights(wide(cls), every),
        "sep": _weights(wide(sep), every),
        "cls_sep": _weights(wide(cls | sep), every),
        "punctuation": _weights(wide(punct), every),
        "delimiter": _weights(wide(cls | sep | punct), every),
        "same_token": _weights(cells["same_token"], cells["word_queries"]),
        "other_segment": _weights(cells["other_segment"], cells["other_segment"].any(1)),
    }
    return np.stack([weights[name].reshape(-1) for name in KEY_SET_STATS], axis=1)


def word_cells(word_ids: np.ndarray) -> dict[str, np.ndarray]:
    """[T, T] (query, key) cells of the word-structure statistics, from word ids (-1: special).

    own_word: the other pieces of the query's word; adjacent_same_word / adjacent_boundary:
    the neighbours (k = q - 1 or q + 1, both in a word) in the same word / across a word
    boundary; distant_within_word: the pieces of its own word that are not neighbours.
    """
    position = np.arange(len(word_ids))
    in_word = word_ids >= 0
    both = in_word[:, None] & in_word[None, :]
    same = (word_ids[:, None] == word_ids[None, :]) & both
    adjacent = (np.abs(position[:, None] - position[None, :]) == 1) & both
    own_word = same & ~np.eye(len(word_ids), dtype=bool)
    return {"own_word": own_word, "adjacent_same_word": adjacent & same, "adjacent_boundary": adjacent & ~same,
            "distant_within_word": own_word & ~adjacent}


def within_word_weights(word_ids: np.ndarray) -> np.ndarray:
    """[T, T] weights of the within-word statistic: other pieces of the query's own word."""
    keys = word_cells(word_ids)["own_word"]
    return _weights(keys, keys.any(1))


def word_structure_weights(word_ids: np.ndarray) -> np.ndarray:
    """Weight matrices of WORD_WEIGHT_STATS stacked as [T*T, 4].

    within_word and distant_within_word are per query (the mass a piece puts on those pieces,
    averaged over the queries that have any); the adjacent statistics are per (q, neighbour)
    pair, the mean of A[q, k] over the pairs of that kind. Every pair of neighbours appears in
    both directions, so a head that puts a fixed weight on q-1 and another on q+1 (any purely
    positional head) scores the same on both kinds, and boundary_selectivity (their
    difference) is 0 for it: exactly 0 for a pure previous- or next-token head, and for a
    uniform one. What is left measures word structure beyond position (issue 12; a word
    boundary in a character model, Tencent seed 004, is the same measurement with
    `segmentation: jieba`).
    """
    cells = word_cells(word_ids)
    distant = cells["distant_within_word"]
    weights = [within_word_weights(word_ids), _pair_weights(cells["adjacent_same_word"]),
               _pair_weights(cells["adjacent_boundary"]), _weights(distant, distant.any(1))]
    return np.stack([w.reshape(-1) for w in weights], axis=1)


def _weighted_sums(attention: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """attention [L, H, T, T] against weights [T*T, S] -> [S, L, H]; NaN columns give NaN."""
    layers, heads, length, _ = attention.shape
    flat = attention.reshape(layers * heads, length * length).astype(np.float64)
    undefined = np.isnan(weights).any(0)
    out = flat @ np.nan_to_num(weights)
    out[:, undefined] = np.nan
    return out.T.reshape(-1, layers, heads)


def _row_stats(attention: np.ndarray) -> np.ndarray:
    """ROW_STATS as [5, L, H]: Voita's argmax shares, entropy, exp(entropy) / n, mean max weight."""
    length = attention.shape[-1]
    if length < 2:
        undefined = np.full(attention.shape[:2], np.nan)
        return np.stack([undefined, undefined, undefined, undefined, attention.max(-1).mean(-1)])
    top = attention.argmax(-1)  # [L, H, T]; ties go to the first key
    position = np.arange(length)
    next_share = (top[..., :-1] == position[1:]).mean(-1)
    prev_share = (top[..., 1:] == position[:-1]).mean(-1)
    row_entropy = entropy(attention.astype(np.float64))
    return np.stack([next_share, prev_share, row_entropy, np.exp(row_entropy) / length, attention.max(-1).mean(-1)])


@dataclass
class ExampleWeights:
    """What one example's statistics are measured with: any attention on its tokens goes through `values`.

    The same weights score the model's heads and the synthetic null heads (uniform,
    previous-token, next-token) of `null_attention`, so nulls are taken on the same inputs.
    """

    run: ExampleRun  # pieces, segmentation applied
    unit: ExampleRun  # what the statistics are measured on: words with `word_level`, else `run`
    word_level: bool
    key_set: np.ndarray  # [U*U, len(KEY_SET_STATS)] on units
    word: np.ndarray  # [T*T, len(WORD_WEIGHT_STATS)] on pieces

    @classmethod
    def of(cls, run: ExampleRun, word_level: bool) -> "ExampleWeights":
        unit = word_level_run(run) if word_level else run
        return cls(run, unit, word_level, _key_set_weights(unit), word_structure_weights(run.word_ids))

    def values(self, attention: np.ndarray) -> np.ndarray:
        """All STATS as [S, L, H] for attention [L, H, T, T] on the example's pieces."""
        if attention is self.run.attention:
            unit_attention = self.unit.attention
        elif self.word_level:
            unit_attention = word_level_attention(attention, self.run.word_ids).astype(np.float32)
        else:
            unit_attention = attention
        word = _weighted_sums(attention, self.word)
        selectivity = word[WORD_WEIGHT_STATS.index("adjacent_same_word")] - word[
            WORD_WEIGHT_STATS.index("adjacent_boundary")]
        return np.concatenate([_weighted_sums(unit_attention, self.key_set), word, selectivity[None],
                               _row_stats(unit_attention)])

    def queries(self) -> dict[str, int]:
        """Queries the within-word and other-sentence statistics were taken over."""
        length = self.unit.n_tokens
        other = np.nan_to_num(self.key_set[:, KEY_SET_STATS.index("other_segment")]).reshape(length, length)
        within = np.nan_to_num(self.word[:, 0]).reshape(self.run.n_tokens, -1)
        return {"within_word": int(np.count_nonzero(within.any(1))),
                "other_segment": int(np.count_nonzero(other.any(1)))}


def null_attention(length: int) -> np.ndarray:
    """[1, 3, T, T] attention of three heads with known simple patterns: NULL_HEADS.

    uniform: 1/n on every token; previous: all weight on q-1; next: all weight on q+1. The
    first (last) query has no previous (next) token and puts its weight on itself.
    """
    position = np.arange(length)
    previous = np.zeros((length, length), dtype=np.float32)
    previous[position, np.maximum(position - 1, 0)] = 1.0
    following = np.zeros((length, length), dtype=np.float32)
    following[position, np.minimum(position + 1, length - 1)] = 1.0
    uniform = np.full((length, length), 1.0 / length, dtype=np.float32)
    return np.stack([uniform, previous, following])[None]


NULL_HEADS = ("uniform", "previous", "next")  # the heads of null_attention, in order


def _example_array(run: ExampleRun, word_level: bool) -> tuple[np.ndarray, ExampleRun, dict[str, int]]:
    """All STATS of one example as [S, L, H] (segmentation already applied to `run`),
    with the run the statistics were measured on (words or pieces) and query counts."""
    weights = ExampleWeights.of(run, word_level)
    return weights.values(run.attention), weights.unit, weights.queries()


def example_statistics(run: ExampleRun, word_level: bool = False) -> dict[str, np.ndarray]:
    """Every statistic of one example, name -> [L, H] (NaN where it does not apply)."""
    return dict(zip(STATS, _example_array(run, word_level)[0], strict=True))


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
        contribution = weights.values(shares(run.attention, run.value_norms)[0])
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
        """Everything the site needs, JSON-able; see the module docstring for the definitions."""
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
