"""The decoder atlas (reportgen.patterns.decoder_atlas) pools a mean and its spread over the same values.

A head's mean pools every qualifying query of every input, so it is the mean of the inputs' own scores
weighted by their queries; its std is the population spread (ddof 0) of those scores with the same weights:
of every query carrying its input's score. Checked on two hand-built inputs of different lengths.
"""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.patterns.decoder import causal_null
from reportgen.patterns.decoder_atlas import decoder_atlas, statistic_summary
from reportgen.patterns.statistics import load_settings
from reportgen.runs import ExampleRun


def run_of(*heads: np.ndarray) -> ExampleRun:
    """One layer of the given [T, T] causal heads over T distinct tokens, none special or punctuation."""
    length = heads[0].shape[0]
    attention = np.stack(heads)[None].astype(np.float32)
    return ExampleRun(ExampleSpec(text="x"), [f"w{i}" for i in range(length)], np.arange(length),
                      np.zeros(length, dtype=np.int64), np.zeros(length, dtype=bool), attention)


def one_hot(keys: list[int]) -> np.ndarray:
    head = np.zeros((len(keys), len(keys)))
    head[np.arange(len(keys)), keys] = 1.0
    return head


def test_the_mean_and_the_std_are_of_the_same_query_weighted_scores():
    # head 0: a previous-token head on 3 tokens (queries 1, 2: score 1), then a sink head on 5 tokens (of its
    # queries 1..4 only query 1 has its previous token at 0: score 1/4); head 1 uniform over the prefix on both
    short = run_of(one_hot([0, 0, 1]), causal_null(3))
    long = run_of(one_hot([0, 0, 0, 0, 0]), causal_null(5))
    atlas = decoder_atlas([short, long], None, None, load_settings())
    previous = atlas["previous_token"]
    scores, queries = np.array([1.0, 0.25]), np.array([2, 4])
    every_query = np.repeat(scores, queries)  # [1, 1, 0.25, 0.25, 0.25, 0.25]
    assert previous["queries"] == 6 and previous["count"] == 2
    assert previous["mean"][0][0] == pytest.approx(0.5) == np.average(scores, weights=queries)
    assert previous["mean"][0][0] == pytest.approx(np.mean(every_query))
    assert previous["std"][0][0] == pytest.approx(np.std(every_query, ddof=0), abs=1e-6)  # sqrt(1/8), not 0.375
    assert previous["std"][0][0] != pytest.approx(np.std(scores), abs=1e-3)  # the examples alike would be 0.375
    assert (previous["min"][0][0], previous["max"][0][0]) == (0.25, 1.0)  # over the inputs' own scores
    assert previous["example"][0][0] == 0 and previous["example_value"][0][0] == 1.0
    # head 1, uniform: its score is (1/2 + 1/3) / 2 on the short input and (1/2 + ... + 1/5) / 4 on the long one
    uniform = np.array([(1 / 2 + 1 / 3) / 2, (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4])
    assert previous["mean"][0][1] == pytest.approx(np.average(uniform, weights=queries), abs=1e-6)
    assert previous["std"][0][1] == pytest.approx(np.std(np.repeat(uniform, queries)), abs=1e-6)


def test_an_input_without_qualifying_queries_neither_counts_nor_weighs():
    scores = np.array([[[0.2]], [[np.nan]], [[0.6]]])  # [N=3, L=1, H=1]; the second input does not apply
    summary = statistic_summary(np.array([[0.5]]), scores, 4, 0.1, linkable=3, weights=np.array([1, 0, 3]))
    assert summary["std"][0, 0] == pytest.approx(np.std([0.2, 0.6, 0.6, 0.6]))
    assert summary["count"] == 2 and (summary["min"][0, 0], summary["max"][0, 0]) == (0.2, 0.6)
    nothing = statistic_summary(np.array([[np.nan]]), np.full((2, 1, 1), np.nan), 0, 0.1, linkable=2,
                                weights=np.array([0, 0]))
    assert np.isnan(nothing["std"][0, 0]) and nothing["example"][0, 0] == -1
