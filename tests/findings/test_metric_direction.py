"""Sentences read the metric's direction: with a loss (lower is better), a removal that lowers it is no cost.

Records are built by hand so the signs are known; they go through the real findings (issue 47: "Removing
layer 1 costs most: -2.2% (-0.166 loss) ... supported" was written where removing either layer lowered the loss).
"""

from __future__ import annotations

import pytest

from reportgen.findings import ablation_findings
from reportgen.report import Ablation, AblationTask, HeadTests, LayerTests


def _task(metric: str, higher: bool) -> AblationTask:
    return AblationTask(type="causal_lm", data="builtin", examples=40, distinct_texts=40, metric=metric,
                        metrics=[metric], higher_is_better={metric: higher}, method="zero", method_note="",
                        undefined=None)


def _layers(deltas: list[float], significant: list[bool]) -> LayerTests:
    base = 7.5
    return LayerTests(test="paired permutation test", correction="holm", alpha=0.05, permutations=200,
                      baseline=base, layers=list(range(len(deltas))), value=[base + d for d in deltas],
                      delta=deltas, relative=[d / base for d in deltas], p_value=[0.01] * len(deltas),
                      p_adjusted=[0.02] * len(deltas), significant=significant)


def _heads(deltas: list[list[float]]) -> HeadTests:
    base = 7.5
    return HeadTests(test="paired permutation test", correction="holm", alpha=0.05, permutations=200,
                     baseline=base, value=[[base + d for d in row] for row in deltas], delta=deltas,
                     relative=[[d / base for d in row] for row in deltas],
                     p_value=[[0.5] * len(row) for row in deltas], p_adjusted=[[1.0] * len(row) for row in deltas],
                     significant=[[False] * len(row) for row in deltas])


def _sentence(metric: str, higher: bool, fid: str, **experiments) -> str:
    record = Ablation(task=_task(metric, higher), layers=2, heads=2, experiments=list(experiments), **experiments)
    return next(f for f in ablation_findings(record) if f.id == fid).sentence


@pytest.mark.parametrize(("metric", "higher", "deltas", "costs"), [
    ("loss", False, [-0.166, -0.05], False),  # the case: both removals lower the loss
    ("loss", False, [0.3, -0.05], True),      # removing layer 0 raises the loss: a cost
    ("accuracy", True, [0.02, 0.01], False),  # both removals raise the accuracy
    ("accuracy", True, [-0.02, 0.01], True),
])
def test_whole_layers_say_costs_most_only_where_a_removal_makes_the_metric_worse(metric, higher, deltas, costs):
    sentence = _sentence(metric, higher, "ablation-whole-layers", whole_layers=_layers(deltas, [True, False]))
    assert ("costs most" in sentence) == costs, sentence
    if not costs:
        assert sentence.startswith(f"No whole layer's removal makes {metric} worse"), sentence
        assert "helps most" in sentence and "No whole-layer removal improves" not in sentence


LOSS = "in loss is"


@pytest.mark.parametrize(("metric", "higher", "deltas", "words"), [
    # every head's masking lowers the loss: no rise happened, so none is "the largest rise"
    ("loss", False, [[-0.2, -0.1], [-0.05, -0.01]],
     [f"The smallest fall {LOSS} -0.1%", f"the largest fall {LOSS} -2.7%"]),
    ("loss", False, [[0.2, -0.1], [0.05, 0.01]], [f"The largest rise {LOSS} +2.7%", f"the largest fall {LOSS} -1.3%"]),
    # every head's masking raises the loss: none fell
    ("loss", False, [[0.2, 0.1], [0.05, 0.01]], [f"The largest rise {LOSS} +2.7%", f"the smallest rise {LOSS} +0.1%"]),
    ("accuracy", True, [[0.2, 0.1], [0.05, 0.01]], ["The smallest gain is +0.1%", "the largest gain is +2.7%"]),
    ("accuracy", True, [[-0.2, -0.1], [-0.05, -0.01]], ["The largest drop is -2.7%", "the smallest drop is -0.1%"]),
])
def test_single_heads_name_each_extreme_by_its_direction(metric, higher, deltas, words):
    sentence = _sentence(metric, higher, "ablation-single-heads", single_heads=_heads(deltas))
    assert all(word in sentence for word in words), sentence
