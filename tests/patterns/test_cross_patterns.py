"""The cross-attention statistics (reportgen.patterns.cross) on hand-built heads, where each value is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reportgen.patterns.cross import cross_atlas, cross_scores

SPECIAL = np.array([False, False, False, True])  # a source of 4 tokens ending in </s>


def heads(queries: int = 3) -> np.ndarray:
    """[1, 3, queries, 4]: head 0 all on </s>, head 1 uniform over the source, head 2 all on source token 0."""
    attention = np.zeros((1, 3, queries, 4), dtype=np.float32)
    attention[0, 0, :, 3] = 1
    attention[0, 1] = 0.25
    attention[0, 2, :, 0] = 1
    return attention


def test_each_head_scores_what_it_was_built_to():
    scores = cross_scores(heads(), SPECIAL)
    special, special_null = scores["source_special"]
    entropy, entropy_null = scores["entropy"]
    assert np.allclose(special / 3, [[1, 0.25, 0]]) and special_null == pytest.approx(3 * 0.25)
    assert np.allclose(entropy / 3, [[0, math.log(4), 0]]) and entropy_null == pytest.approx(3 * math.log(4))


def test_the_atlas_pools_by_query_and_the_uniform_head_scores_the_null():
    short, long = heads(2), np.concatenate([heads(6)[..., :3], np.zeros((1, 3, 6, 2), np.float32)], -1)
    long[0, 1] = 0.2  # uniform over a source of 5
    long[0, 0, :, 4] = 1  # all on that source's </s>
    long_special = np.array([False, False, False, False, True])
    atlas = cross_atlas([short, long], [SPECIAL, long_special], threshold=0.6, top_k=2)
    special = atlas["source_special"]
    # the null: (2 queries x 1/4 + 6 queries x 1/5) / 8 queries, and the uniform head scores it exactly
    null = (2 * 0.25 + 6 * 0.2) / 8
    assert special["null"] == pytest.approx(null) and special["mean"][0][1] == pytest.approx(null)
    assert special["queries"] == 8 and special["mean"][0][0] == pytest.approx(1.0)
    assert atlas["entropy"]["null"] == pytest.approx((2 * math.log(4) + 6 * math.log(5)) / 8)
    assert atlas["entropy"]["mean"][0][1] == pytest.approx(atlas["entropy"]["null"])
    # the mean is of the examples' own scores (0.25 and 0.2) weighted by their queries (2 and 6), and so is the
    # spread: the population std (ddof 0) of every query carrying its example's score
    every_query = np.repeat([0.25, 0.2], [2, 6])
    assert special["mean"][0][1] == pytest.approx(np.mean(every_query))
    assert special["std"][0][1] == pytest.approx(np.std(every_query, ddof=0), abs=1e-6)
    assert (special["min"][0][1], special["max"][0][1]) == (0.2, 0.25)  # over the examples' own scores
    assert special["example"][0][1] == 0  # the example where the uniform head puts most there: the shorter source
    assert [(head["layer"], head["head"]) for head in atlas["top_heads"]["source_special"]] == [(0, 0), (0, 1)]
    assert atlas["threshold"] == 0.6 and atlas["counts"]["tokens"] == 8


def test_flags_that_do_not_fit_the_source_are_refused():
    with pytest.raises(ValueError, match="3 special flags for a source of 4 tokens"):
        cross_scores(heads(), SPECIAL[:3])
