"""Prompt pairs (reportgen.patching.pairs) and the effects over them (reportgen.patching.effects), issue 49: rows
read as the model reads them or refused in one line naming the row and field; the built-in induction pairs have
the layout the metric needs; effects are the normalised ratio of sums, their intervals and Holm-corrected tests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reportgen.errors import DataError
from reportgen.patching import effects as fx
from reportgen.patching.pairs import induction_pairs, read_pairs


class WordTokenizer:
    """A tokenizer of whole words, as transformers' call gives them ({"input_ids": [...]}); [BOS] first unless
    add_special_tokens is False; [MASK] is id 1."""

    mask_token, mask_token_id = "[MASK]", 1

    def __init__(self):
        self.ids = {"[BOS]": 0, "[MASK]": 1}

    def __call__(self, text, add_special_tokens=True):
        words = [self.ids.setdefault(word, len(self.ids)) for word in text.split()]
        return {"input_ids": ([0] if add_special_tokens else []) + words}


def _write(tmp_path, rows) -> object:
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(row if isinstance(row, str) else json.dumps(row) for row in rows) + "\n",
                    encoding="utf-8")
    return path


def test_rows_become_pairs_read_at_the_last_token_or_the_mask(tmp_path):
    tokenizer = WordTokenizer()
    rows = [{"clean": "when mary and john went , john gave a drink to", "corrupted":
             "when mary and john went , mary gave a drink to", "answer": "mary", "wrong": "john"}]
    pair = read_pairs(_write(tmp_path, rows), tokenizer)[0]
    assert len(pair.clean) == len(pair.corrupted) == 12 and pair.position == 11
    assert (pair.answer, pair.wrong) == (tokenizer.ids["mary"], tokenizer.ids["john"])
    masked = [{"clean": "paris is the capital of [MASK] .", "corrupted": "rome is the capital of [MASK] .",
               "answer": "france", "wrong": "italy"}]
    assert read_pairs(_write(tmp_path, masked), tokenizer, masked=True)[0].position == 6


@pytest.mark.parametrize(("row", "said"), [
    ({"clean": "a b c", "corrupted": "a b", "answer": "x", "wrong": "y"},
     "row 2: 'clean' is 4 tokens and 'corrupted' 3"),
    ({"clean": "a b", "corrupted": "a c", "answer": "x y", "wrong": "z"}, "row 2: 'answer' 'x y' is 2 tokens"),
    ({"clean": "a b", "corrupted": "a c", "answer": "x", "wrong": "x"}, "row 2: 'answer' and 'wrong' are the same"),
    ({"clean": "a b", "corrupted": "a c", "answer": "x"}, "row 2: 'wrong' is missing or not text"),
    ("{not json", "row 2 is not JSON"),
    ("[1, 2]", "row 2 is not an object"),
])
def test_a_bad_row_is_refused_in_one_line_naming_it(tmp_path, row, said):
    good = {"clean": "a b", "corrupted": "a c", "answer": "x", "wrong": "y"}
    path = _write(tmp_path, [good, row])
    with pytest.raises(DataError) as raised:
        read_pairs(path, WordTokenizer())
    assert str(raised.value) == str(raised.value).splitlines()[0] and said in str(raised.value)
    assert str(raised.value).startswith(str(path))


def test_a_masked_pair_needs_one_mask_at_the_same_place(tmp_path):
    row = {"clean": "[MASK] is [MASK]", "corrupted": "[MASK] is [MASK]", "answer": "x", "wrong": "y"}
    with pytest.raises(DataError, match="needs one \\[MASK\\]"):
        read_pairs(_write(tmp_path, [row]), WordTokenizer(), masked=True)


def test_induction_pairs_repeat_the_first_copy_and_resample_it_when_corrupted():
    n = 6
    pairs = induction_pairs(vocab_size=50, bos=0, count=20, n=n, seed=3, exclude=(0,))
    assert len(pairs) >= 15
    for pair in pairs:
        clean, corrupted = np.array(pair.clean), np.array(pair.corrupted)
        assert len(clean) == len(corrupted) == 2 * n and pair.position == 2 * n - 1
        assert clean[0] == corrupted[0] == 0 and (clean[n + 1:] == clean[1:n]).all()  # the second copy repeats r
        assert (corrupted[n + 1:] == clean[n + 1:]).all() and (corrupted[1:n + 1] != clean[1:n + 1]).any()
        assert pair.answer == clean[n] and pair.wrong == corrupted[n] and pair.answer != pair.wrong


def test_effects_are_the_ratio_of_sums_with_an_interval_around_it_and_corrected_tests():
    clean, corrupted = np.array([2.0, 4.0, 3.0, 5.0]), np.zeros(4)
    # head 0 restores half of each pair's gap, head 1 nothing, head 2 all of it
    patched = np.stack([clean / 2, corrupted, clean], axis=1)
    found = fx.effects(clean, corrupted, patched, "denoising", samples=200, permutations=200)
    assert np.allclose(found.effect, [0.5, 0.0, 1.0])
    assert (found.low <= found.effect + 1e-12).all() and (found.effect <= found.high + 1e-12).all()
    assert found.p_adjusted[1] == 1.0 and found.p_adjusted[0] < 1.0
    assert np.isclose(fx.normalised(np.array([2.0, 4.0]), np.zeros(2), np.array([[1.0], [3.0]]))[0], 4 / 6)
    # noising: patched into the clean run; a head that leaves it is 1 and untested-different (p = 1)
    noised = fx.effects(clean, corrupted, np.stack([clean, clean / 4], axis=1), "noising", samples=50,
                        permutations=50)
    assert np.allclose(noised.effect, [1.0, 0.25]) and noised.p_adjusted[0] == 1.0
    assert np.isnan(fx.normalised(np.ones(3), np.ones(3), np.ones((3, 2)))).all()  # nothing to restore


def test_heads_not_run_have_no_effect_and_do_not_count_in_the_correction():
    clean, corrupted = np.array([2.0, 4.0, 3.0, 5.0, 1.0]), np.zeros(5)
    patched = np.stack([clean / 2, np.full(5, np.nan), clean], axis=1)
    found = fx.effects(clean, corrupted, patched, "denoising", samples=100, permutations=100)
    alone = fx.effects(clean, corrupted, patched[:, [0, 2]], "denoising", samples=100, permutations=100)
    assert np.isnan([found.effect[1], found.low[1], found.high[1], found.p_adjusted[1]]).all()
    assert np.allclose(found.p_adjusted[[0, 2]], alone.p_adjusted)  # Holm over the two heads that ran


def test_agreement_ranks_heads_by_size_and_names_where_the_two_tops_differ():
    exact = np.array([[0.9, -0.8, 0.0], [0.1, 0.05, -0.02]])
    estimate = np.array([[0.7, -0.9, 0.01], [0.0, 0.2, -0.03]])
    found = fx.agreement(exact, estimate, top=2)
    assert (found.overlap, found.top, found.disagree) == (2, 2, [])
    third = fx.agreement(exact, estimate, top=3)
    assert third.overlap == 2 and third.disagree == [(1, 0), (1, 1)]  # exact's third is (1, 0), the estimate's (1, 1)
    assert fx.agreement(exact, exact).spearman == pytest.approx(1.0)
    assert fx.top_heads(estimate, 3) == [(0, 1), (0, 0), (1, 1)]
