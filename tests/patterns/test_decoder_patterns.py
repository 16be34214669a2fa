"""Decoder head patterns (reportgen.patterns.decoder) on hand-built causal heads with known answers.

Each head is a [T, T] map; `stack` makes [L=1, H, T, T] so every test also runs the statistics over
several heads at once. Numpy only, no model.
"""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.patterns import decoder
from reportgen.patterns.decoder import (
    causal_entropy,
    causal_null,
    decoder_head_statistics,
    duplicate_token,
    induction,
    induction_input,
    induction_tokens,
    nulls,
    previous_token,
    sink,
)

# ---------------------------------------------------------------- hand-built heads


def stack(*heads: np.ndarray) -> np.ndarray:
    """[1, H, T, T] from H [T, T] heads."""
    return np.stack(heads)[None]


def one_hot(keys: np.ndarray) -> np.ndarray:
    """[T, T] with row q all on key keys[q] (keys[q] <= q)."""
    length = len(keys)
    head = np.zeros((length, length))
    head[np.arange(length), keys] = 1.0
    return head


def previous_head(length: int) -> np.ndarray:
    """All weight on q - 1; query 0 on itself (its only key)."""
    return one_hot(np.maximum(np.arange(length) - 1, 0))


def sink_head(length: int) -> np.ndarray:
    return one_hot(np.zeros(length, dtype=int))


def random_causal(length: int, seed: int) -> np.ndarray:
    """Random weights on keys 0..q, each row normalised over the prefix."""
    raw = np.random.default_rng(seed).random((length, length)) * np.tri(length)
    return raw / raw.sum(-1, keepdims=True)


def induction_head(n: int) -> np.ndarray:
    """On [BOS] + r + r: second-copy queries all on q - n + 1, the other rows uniform over their prefix."""
    length = 2 * n + 1
    head = causal_null(length)
    queries = np.arange(n + 1, 2 * n + 1)
    head[queries] = 0.0
    head[queries, queries - n + 1] = 1.0
    return head


def duplicate_head(token_ids: np.ndarray) -> np.ndarray:
    """Queries whose token occurred earlier: all weight on its FIRST occurrence; the others on themselves."""
    first = np.array([list(token_ids).index(token) for token in token_ids])
    return one_hot(first)


def prefix_mean(values: np.ndarray, length: int) -> float:
    """Mean over q = 1 .. length - 1 of values[q]."""
    return float(np.mean(values[1:length]))


TOKENS = np.array([5, 7, 5, 9, 7, 5, 2, 8])  # 5 at 0, 2, 5; 7 at 1, 4: queries 2, 4, 5 repeat


# ---------------------------------------------------------------- the null


def test_causal_null_is_uniform_over_the_prefix():
    null = causal_null(4)
    expected = np.array([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4])
    np.testing.assert_allclose(null, expected)
    np.testing.assert_allclose(causal_null(9).sum(-1), 1.0)
    with pytest.raises(ValueError):
        causal_null(0)


def test_nulls_follow_their_formulas():
    length, n = 12, 5
    q = np.arange(1, length)
    out = nulls(length, token_ids=np.arange(length) % 4, n=n)
    assert out["previous_token"] == pytest.approx(np.mean(1 / (q + 1)))
    assert out["sink"] == pytest.approx(np.mean(1 / (q + 1)))
    assert out["causal_entropy"] == pytest.approx(np.mean(np.log(q + 1)))
    second = np.arange(n + 1, 2 * n + 1)
    assert out["induction"] == pytest.approx(np.mean(1 / (second + 1)))
    # duplicate: queries 4..11 have q // 4 earlier occurrences each
    repeat = np.arange(4, length)
    assert out["duplicate_token"] == pytest.approx(np.mean((repeat // 4) / (repeat + 1)))
    assert "duplicate_token" not in nulls(length, token_ids=np.arange(length))
    assert set(nulls(length)) == {"previous_token", "sink", "causal_entropy"}


def test_the_uniform_causal_head_scores_exactly_the_null_on_every_statistic():
    length, n = len(TOKENS), 4
    uniform = stack(causal_null(length), causal_null(length))
    expected = nulls(length, token_ids=TOKENS, n=n)
    np.testing.assert_allclose(previous_token(uniform), expected["previous_token"], rtol=1e-12)
    np.testing.assert_allclose(sink(uniform), expected["sink"], rtol=1e-12)
    np.testing.assert_allclose(causal_entropy(uniform), expected["causal_entropy"], rtol=1e-12)
    np.testing.assert_allclose(duplicate_token(uniform, TOKENS), expected["duplicate_token"], rtol=1e-12)
    np.testing.assert_allclose(induction(stack(causal_null(2 * n + 1)), n), expected["induction"], rtol=1e-12)


# ---------------------------------------------------------------- each head type


def test_previous_token_head_scores_one_and_its_null_is_the_formula():
    length = 10
    heads = stack(previous_head(length), causal_null(length), sink_head(length))
    score = previous_token(heads)
    assert score.shape == (1, 3)
    assert score[0, 0] == pytest.approx(1.0)
    assert score[0, 1] == pytest.approx(prefix_mean(1 / (np.arange(length) + 1), length))
    assert score[0, 2] == pytest.approx(1 / (length - 1))  # only query 1's previous token is key 0
    assert nulls(length)["previous_token"] == pytest.approx(score[0, 1])


def test_sink_head_scores_one():
    length = 9
    score = sink(stack(sink_head(length), previous_head(length), causal_null(length)))
    assert score[0, 0] == pytest.approx(1.0)
    assert score[0, 1] == pytest.approx(1 / (length - 1))  # query 1 -> key 0 only
    assert score[0, 2] == pytest.approx(nulls(length)["sink"])


def test_duplicate_token_head_scores_one_whether_on_the_first_or_spread_over_every_earlier_occurrence():
    first = duplicate_head(TOKENS)
    spread = np.eye(len(TOKENS))
    earlier = (TOKENS[:, None] == TOKENS[None, :]) & np.tri(len(TOKENS), k=-1, dtype=bool)
    repeats = earlier.any(1)
    spread[repeats] = earlier[repeats] / earlier[repeats].sum(-1, keepdims=True)
    score = duplicate_token(stack(first, spread, previous_head(len(TOKENS))), TOKENS)
    np.testing.assert_allclose(score[0, :2], 1.0)
    # previous-token head: queries 2, 4, 5 look at keys 1, 3, 4 (tokens 7, 9, 7), none an earlier occurrence
    assert score[0, 2] == pytest.approx(0.0)
    # token strings work as well as ids
    np.testing.assert_allclose(duplicate_token(stack(first), [str(t) for t in TOKENS]), 1.0)


def test_duplicate_token_is_nan_without_a_repeat_and_absent_from_the_statistics():
    length = 6
    heads = stack(causal_null(length))
    score = duplicate_token(heads, np.arange(length))
    assert score.shape == (1, 1) and np.isnan(score).all()
    out = decoder_head_statistics([heads], [np.arange(length)])
    assert "duplicate_token" not in out
    assert set(out) == {"previous_token", "sink", "causal_entropy"}


def test_induction_head_scores_one_and_about_the_null_on_previous_token():
    n = 50
    head = induction_head(n)
    score = induction(stack(head), n)
    assert score == pytest.approx(1.0)
    prev = float(previous_token(stack(head))[0, 0])
    null = nulls(2 * n + 1)["previous_token"]
    # first-copy rows are uniform (1/(q+1) on q-1), second-copy rows put nothing on q-1
    assert prev == pytest.approx(np.sum(1 / (np.arange(1, n + 1) + 1)) / (2 * n))
    assert prev <= null and null - prev < 0.01
    assert prev < 0.05


def test_induction_index_arithmetic_by_hand_n3():
    # [BOS a b c a b c] at positions 0..6. Second copy: q = 4 (a), 5 (b), 6 (c).
    # a first at 1, followed by b at 2; b first at 2, followed by c at 3; c first at 3, followed by a at 4.
    tokens = ["BOS", "a", "b", "c", "a", "b", "c"]
    n = 3
    expected = {4: 2, 5: 3, 6: 4}
    for q, key in expected.items():
        earlier = tokens.index(tokens[q])  # the earlier occurrence
        assert earlier < q and earlier + 1 == key == q - n + 1
    # the layout induction_input builds
    np.testing.assert_array_equal(induction_input(np.array([1, 2, 3]), bos_id=0), [0, 1, 2, 3, 1, 2, 3])
    # one head per induction cell (every other row on BOS, key 0): each scores 1/3
    heads = []
    for q, key in expected.items():
        head = sink_head(7)
        head[q] = 0.0
        head[q, key] = 1.0
        heads.append(head)
    score = induction(stack(*heads), n)
    np.testing.assert_allclose(score, [[1 / 3, 1 / 3, 1 / 3]])
    assert induction(stack(induction_head(n)), n) == pytest.approx(1.0)
    # keys one off (q - n, the earlier occurrence itself: a duplicate-token head) score 0
    off = causal_null(7)
    off[4:] = 0.0
    off[[4, 5, 6], [1, 2, 3]] = 1.0
    assert induction(stack(off), n) == pytest.approx(0.0)
    assert nulls(7, n=n)["induction"] == pytest.approx(np.mean([1 / 5, 1 / 6, 1 / 7]))


def test_induction_refuses_a_wrong_length_or_too_small_n():
    with pytest.raises(ValueError, match="2n \\+ 1"):
        induction(stack(causal_null(8)), 3)
    with pytest.raises(ValueError, match="n >= 3"):
        induction(stack(causal_null(5)), 2)


def test_random_causal_attention_scores_between_the_extremes():
    length = 16
    token_ids = np.arange(length) % 5
    heads = stack(*(random_causal(length, seed) for seed in range(4)))
    for score in (previous_token(heads), sink(heads), duplicate_token(heads, token_ids)):
        assert score.shape == (1, 4)
        assert ((score > 0) & (score < 1)).all()
    entropy = causal_entropy(heads)
    assert ((entropy > 0) & (entropy < nulls(length)["causal_entropy"])).all()  # uniform is the maximum
    n = 7
    induction_heads = stack(*(random_causal(2 * n + 1, seed) for seed in range(4)))
    assert ((induction(induction_heads, n) > 0) & (induction(induction_heads, n) < 1)).all()


def test_entropy_of_one_hot_heads_is_zero():
    length = 8
    np.testing.assert_allclose(causal_entropy(stack(previous_head(length), sink_head(length))), 0.0, atol=1e-12)


# ---------------------------------------------------------------- forms of input and pooling


def test_batch_and_list_pool_by_query():
    short, long = 3, 5
    # list of different lengths: a previous-token head on 3 tokens (2 queries, score 1 each) and a
    # uniform head on 5 tokens (queries 1..4 score 1/(q+1)): each of the 6 queries weighs the same
    pooled = previous_token([stack(previous_head(short)), stack(causal_null(long))])
    assert pooled[0, 0] == pytest.approx((2 + sum(1 / (q + 1) for q in range(1, long))) / 6)
    assert nulls([short, long])["previous_token"] == pytest.approx(
        previous_token([stack(causal_null(short)), stack(causal_null(long))])[0, 0])
    # a batch of equal lengths equals the same list, and the mean of per-sequence scores
    batch = np.stack([stack(random_causal(6, seed)) for seed in range(3)])
    assert batch.shape == (3, 1, 1, 6, 6)
    for statistic in (previous_token, sink, causal_entropy):
        np.testing.assert_allclose(statistic(batch), statistic(list(batch)))
        np.testing.assert_allclose(statistic(batch), np.mean([statistic(one) for one in batch], axis=0))
    ids = np.stack([np.arange(6) % 3, np.arange(6) % 2, np.arange(6)])
    np.testing.assert_allclose(duplicate_token(batch, ids), duplicate_token(list(batch), list(ids)))


def test_float32_input_gives_float64_scores_and_length_one_gives_nan():
    head = stack(previous_head(5)).astype(np.float32)
    assert previous_token(head).dtype == np.float64
    single = np.ones((2, 3, 1, 1))
    for statistic in (previous_token, sink, causal_entropy):
        out = statistic(single)
        assert out.shape == (2, 3) and np.isnan(out).all()
    assert decoder_head_statistics([single]) == {}


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match="T, T"):
        previous_token(np.ones((1, 1, 3, 4)))
    with pytest.raises(ValueError, match="B, L, H, T, T"):
        previous_token(np.ones((3, 3)))
    with pytest.raises(ValueError, match="layers, heads"):
        previous_token([stack(causal_null(3)), np.stack([causal_null(3)] * 2)[None]])
    with pytest.raises(ValueError, match="token ids"):
        duplicate_token(stack(causal_null(4)), np.arange(5))
    with pytest.raises(ValueError, match="2 token id sequences for 3"):
        duplicate_token([stack(causal_null(4))] * 3, [np.arange(4)] * 2)


# ---------------------------------------------------------------- causality


def test_non_causal_attention_is_refused():
    leaky = causal_null(5)
    leaky[1] = [0.49, 0.5, 0.01, 0, 0]
    for statistic in (previous_token, sink, causal_entropy):
        with pytest.raises(ValueError, match="not causal.*key 2 from query 1 \\(layer 0, head 1\\)"):
            statistic(stack(causal_null(5), leaky))
    with pytest.raises(ValueError, match="not causal"):
        duplicate_token(stack(leaky), np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="not causal"):
        decoder_head_statistics([stack(leaky)])
    with pytest.raises(ValueError, match="not causal"):
        induction(stack(np.full((7, 7), 1 / 7)), 3)  # an encoder's uniform head
    nan = causal_null(4)
    nan[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sink(stack(nan))


def test_float_noise_above_the_diagonal_is_accepted():
    length = 6
    noisy = causal_null(length) + 1e-7 * (1 - np.tri(length))
    score = previous_token(stack(noisy))
    assert score[0, 0] == pytest.approx(nulls(length)["previous_token"])
    assert causal_entropy(stack(noisy))[0, 0] == pytest.approx(nulls(length)["causal_entropy"])
    assert decoder.CAUSAL_TOLERANCE == 1e-6
    with pytest.raises(ValueError, match="not causal"):
        previous_token(stack(causal_null(length) + 2e-6 * (1 - np.tri(length))))


# ---------------------------------------------------------------- the induction tokens


def test_induction_tokens_exclude_specials_and_are_reproducible():
    vocab, special = 12, (0, 1, 11, 99)  # 99 is outside the vocabulary: ignored
    r = induction_tokens(vocab, n=20, batch=50, seed=3, exclude=special)
    assert r.shape == (50, 20) and np.issubdtype(r.dtype, np.integer)
    assert set(np.unique(r)) == set(range(2, 11))  # every allowed id drawn, no special one
    np.testing.assert_array_equal(r, induction_tokens(vocab, 20, 50, 3, exclude=special))
    assert not np.array_equal(r, induction_tokens(vocab, 20, 50, 4, exclude=special))
    with pytest.raises(ValueError, match="excluded"):
        induction_tokens(3, 5, 1, 0, exclude=(0, 1, 2))
    with pytest.raises(ValueError, match="n >= 3"):
        induction_tokens(100, 2, 1, 0)


def test_induction_input_layout():
    r = induction_tokens(1000, n=4, batch=3, seed=0, exclude=(0,))
    ids = induction_input(r, bos_id=0)
    assert ids.shape == (3, 9)
    np.testing.assert_array_equal(ids[:, 0], 0)
    np.testing.assert_array_equal(ids[:, 1:5], r)
    np.testing.assert_array_equal(ids[:, 5:], r)


# ---------------------------------------------------------------- the entry point


def test_decoder_head_statistics_scores_nulls_and_absence():
    n = 6
    examples = [stack(previous_head(len(TOKENS)), sink_head(len(TOKENS)), duplicate_head(TOKENS)),
                stack(previous_head(5), sink_head(5), causal_null(5))]
    ids = [TOKENS, np.arange(5)]  # the second example has no repeat: it adds no duplicate-token query
    batch = np.stack([stack(induction_head(n), sink_head(2 * n + 1), causal_null(2 * n + 1))] * 2)
    out = decoder_head_statistics(examples, ids, induction_attention=batch)
    assert set(out) == {"previous_token", "sink", "causal_entropy", "duplicate_token", "induction"}
    for entry in out.values():
        assert entry["score"].shape == (1, 3) and isinstance(entry["null"], float)
    assert out["previous_token"]["score"][0, 0] == pytest.approx(1.0)
    assert out["sink"]["score"][0, 1] == pytest.approx(1.0)
    assert out["duplicate_token"]["score"][0, 2] == pytest.approx(1.0)
    assert out["duplicate_token"]["queries"] == 3
    assert out["induction"]["score"][0].tolist() == pytest.approx([1.0, 0.0, nulls(2 * n + 1, n=n)["induction"]])
    assert out["induction"]["queries"] == 2 * n
    lengths = [len(TOKENS), 5]
    expected = nulls(lengths, token_ids=ids, n=n)
    for name, entry in out.items():
        assert entry["null"] == pytest.approx(expected[name])
    assert out["previous_token"]["queries"] == len(TOKENS) - 1 + 4
    # pieces are absent where they do not apply
    assert set(decoder_head_statistics(examples)) == {"previous_token", "sink", "causal_entropy"}
    assert set(decoder_head_statistics([], induction_attention=batch)) == {"induction"}
    assert decoder_head_statistics(None) == {}
    with pytest.raises(ValueError, match="layers, heads"):
        decoder_head_statistics(examples, induction_attention=batch[:, :, :2])


def test_delimiter_counts_the_delimiters_each_query_sees_and_only_queries_that_see_one():
    # tokens: word, word, '.', word, [EOS]: query 1 sees no delimiter and does not count; queries 2..4 do
    flags = np.array([False, False, True, False, True])
    on_dot = one_hot(np.array([0, 0, 2, 2, 2]))  # queries 2..4 put everything on '.'
    uniform = causal_null(5)
    scores = decoder.delimiter(stack(on_dot, uniform), flags)
    assert scores[0, 0] == pytest.approx(1.0)
    # the uniform causal head: 1/3 at q = 2 ('.'), 1/4 at q = 3 ('.'), 2/5 at q = 4 ('.' and [EOS])
    assert scores[0, 1] == pytest.approx((1 / 3 + 1 / 4 + 2 / 5) / 3)
    found = decoder_head_statistics(stack(on_dot, uniform), is_delimiter=flags)
    assert found["delimiter"]["queries"] == 3
    assert found["delimiter"]["null"] == pytest.approx(scores[0, 1])
    none = np.zeros(5, dtype=bool)
    assert np.isnan(decoder.delimiter(stack(on_dot), none)).all()
    assert "delimiter" not in decoder_head_statistics(stack(on_dot), is_delimiter=none)  # absent, not 0
