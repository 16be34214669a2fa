"""What each attention pattern statistic measures on one example: the atlas's definitions.

reportgen.patterns.statistics folds these per-example values over a corpus (`PatternAccumulator`); here
is how one example's are taken, for the model's heads and for the synthetic null heads alike
(`ExampleWeights`, `null_attention`), and `example_statistics` for one example on its own.

Definitions follow Clark, Khandelwal, Levy, Manning 2019 ("What Does BERT Look At?"),
Voita, Talbot, Moiseev, Sennrich, Titov 2019 (positional heads, argmax test) and
Kovaleva, Romanov, Rogers, Rumshisky 2019 (vertical / diagonal patterns). A is one
head's attention on one example, A[q, k] = weight query q puts on key k.

Every statistic is computed per example as an [layers, heads] array, vectorised over
heads, queries and keys (one matrix product per example against a stack of
query/key weight matrices). The statistics:

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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from reportgen.patterns.words import (
    delimiter_keys,
    punctuation_keys,
    word_codes,
    word_level_attention,
    word_level_run,
    word_strings,
)
from reportgen.runs import ExampleRun, StoredAttention

# Statistics in a fixed order; KEY_SET_STATS are one weighted sum of attention each, over a
# set of keys per query (see _key_set_weights). WORD_STATS are measured between pieces, always
# (see word_structure_weights); boundary_selectivity is the difference of two of them.
KEY_SET_STATS = ("next_token", "previous_token", "next_token_clark", "previous_token_clark", "cls", "sep",
                 "cls_sep", "punctuation", "delimiter", "same_token", "other_segment")
WORD_WEIGHT_STATS = ("within_word", "adjacent_same_word", "adjacent_boundary", "distant_within_word")
WORD_STATS = WORD_WEIGHT_STATS + ("boundary_selectivity",)
ROW_STATS = ("next_token_argmax", "previous_token_argmax", "entropy", "effective_share", "max_weight")
STATS = KEY_SET_STATS + WORD_STATS + ROW_STATS


def entropy(attention: np.ndarray) -> np.ndarray:
    """Mean over queries of the row entropy in nats, [L, H].

    Clark et al. smooth A' = 0.9999 A + 0.0001 / n before taking -sum A' ln A';
    the uniform baseline is ln n.
    """
    if attention.ndim == 4:  # a layer at a time: the temporaries are a layer's, not the model's
        return np.stack([entropy(layer) for layer in attention])
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
    undefined = np.isnan(weights).any(0)
    defined = np.nan_to_num(weights)
    out = np.empty((layers * heads, weights.shape[1]))
    for layer in range(layers):  # in float64 a layer at a time (the model's at 1,024 tokens: 1.2 GB)
        out[layer * heads:(layer + 1) * heads] = attention[layer].reshape(heads, -1).astype(np.float64) @ defined
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
    row_entropy = np.stack([entropy(layer.astype(np.float64)) for layer in attention])
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
        """All STATS as [S, L, H] for attention [L, H, T, T] on the example's pieces (a StoredAttention, a long
        input's, a layer at a time: every statistic is a head's own, so the layers' values are the whole's)."""
        if isinstance(attention, StoredAttention):
            return self.values_by_layer(attention)
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

    def values_by_layer(self, layers: Iterable[np.ndarray]) -> np.ndarray:
        """`values` of attention given a layer [H, T, T] at a time (contribution shares made layer by layer),
        as [S, L, H]: the whole model's attention in another form is never held at once."""
        return np.concatenate([self.values(layer[None]) for layer in layers], axis=1)

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
