"""Each ablation claim rests on the test that answers it (REFERENCE, "Claims and the test that answers them").

Every case here is one the old findings got wrong: a layer-halves comparison with no spread over
seeds, a masked model inside the baseline's CI yet significantly worse, and a pruning curve one
step better than random by chance. The outputs are constructed per example, so the truth is known,
and they go through the real statistics (reportgen.stats, reportgen.ablation.experiment_stats) and the real findings.
"""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.ablation import experiment_stats as ablation
from reportgen.ablation.experiment_context import Context
from reportgen.ablation.tasks import SimilarityTask
from reportgen.config import AblationSettings, defaults
from reportgen.findings import ablation_findings
from reportgen.report import Ablation, AblationTask, Importance, Pruning, RandomFraction
from reportgen.stats import bootstrap_ci, paired_change_ci, paired_permutation_p, paired_permutation_p_pooled, rank_p
from tests.helpers import layer_halves

EXAMPLES = 300


def _task(seed: int = 0) -> SimilarityTask:
    """The real similarity task (Spearman of per-example cosines vs gold) on constructed gold scores;
    no model is needed to score outputs."""
    gold = np.random.default_rng([seed, 9]).uniform(0, 5, EXAMPLES)
    return SimilarityTask(kind="similarity", model=None, tokenizer=None, units=[],
                          example_units=np.zeros((EXAMPLES, 2), dtype=np.int64), gold=gold)


def _context(task: SimilarityTask, base: np.ndarray, **settings) -> Context:
    raw = defaults()["ablation"]
    raw.update(seeds=[0, 1, 2], bootstrap_samples=1000, permutations=200, **settings)
    value = float(task.metrics(base[None], task.gold[None])["spearman"][0])
    return Context(task, None, AblationSettings.model_validate(raw), 2, 4, base, value, None)


def _noisy(task: SimilarityTask, scale: float, stream: int) -> np.ndarray:
    """Per-example outputs [examples, 1]: the gold score plus noise (more noise, lower Spearman)."""
    noise = np.random.default_rng([stream, 7]).normal(0, scale, EXAMPLES)
    return (task.gold + noise)[:, None]


def _record(**experiments) -> Ablation:
    task = AblationTask(type="similarity", data="builtin", examples=EXAMPLES, distinct_texts=2 * EXAMPLES,
                        metric="spearman", metrics=["spearman", "pearson"], higher_is_better={"spearman": True},
                        method="zero", method_note="", undefined=None)
    return Ablation(task=task, layers=2, heads=4, experiments=list(experiments), **experiments)


def _finding(record: Ablation, fid: str):
    return next(f for f in ablation_findings(record) if f.id == fid)


# -- claim 1: lower vs upper layers ---------------------------------------------------------------------
def test_layer_halves_with_no_spread_over_seeds_claim_only_what_the_paired_test_supports():
    task = _task()
    base = _noisy(task, 1.0, 1)
    ctx = _context(task, base)
    # the two halves are equally harmful: independent noise of the same size
    same = layer_halves(ctx, _noisy(task, 1.1, 2), _noisy(task, 1.1, 3), n_masked=4)
    assert max(same.lower.relative_std + same.upper.relative_std) < 1e-12  # the seeds cannot spread
    gap = abs(same.lower.relative_mean[0] - same.upper.relative_mean[0])
    assert gap > 0  # the old rule (difference > twice the spread, here 0) called this a finding
    finding = _finding(_record(layer_halves=same), "ablation-layer-halves")
    assert not finding.supported and same.comparison.p_adjusted[0] > 0.05
    assert "do not differ significantly" in finding.sentence and "the whole half" in finding.sentence
    # a real difference: the upper half's masks destroy much more
    real = layer_halves(ctx, base + _noisy(task, 0.2, 4) - task.gold[:, None], _noisy(task, 2.0, 5), n_masked=4)
    finding = _finding(_record(layer_halves=real), "ablation-layer-halves")
    assert finding.supported and "upper layers leaves Spearman worse" in finding.sentence
    assert real.comparison.at_floor == [True] and "p ≤" in finding.sentence  # a bound, not a value


# -- claim 2: "costs nothing" -------------------------------------------------------------------------------
@pytest.mark.slow  # many resamples: over half a second of the fast tier
def test_inside_the_baseline_ci_but_significantly_worse_is_not_called_harmless():
    task = _task(1)
    base = _noisy(task, 1.5, 11)
    ctx = _context(task, base)
    masked = base - 0.1 * (task.gold - task.gold.mean())[:, None]  # a little less signal in every example
    low, high = bootstrap_ci(task, base, 1000, 0)["spearman"]
    value = float(task.metrics(masked[None], task.gold[None])["spearman"][0])
    assert low <= value <= high  # inside the baseline's 95% CI: the old finding said "costs nothing"
    assert paired_permutation_p(task, base, masked, 2000, 0) < 0.01  # yet significantly worse
    pooled, _ = paired_change_ci(task, base, masked[None], 1000, 0)
    assert pooled[1] < 0  # the whole paired CI is a loss
    outputs = np.stack([np.stack([base] * 3), np.stack([masked] * 3)])  # fractions 0 and 0.1, 3 seeds
    values = ablation._metric(ctx, outputs)
    sweep = RandomFraction(fractions=[0.0, 0.1], n_masked=[0, 1], seeds=[0, 1, 2], baseline=ctx.base_value,
                           non_inferiority=ablation._non_inferiority(ctx, [0.0, 0.1], outputs),
                           **ablation._sweep(ctx, values).model_dump())
    assert sweep.non_inferiority.non_inferior == [True, False] and sweep.non_inferiority.up_to == 0.0
    finding = _finding(_record(random_fraction=sweep), "ablation-random-fraction")
    assert not finding.supported and "not shown to cost less than 1%" in finding.sentence


@pytest.mark.slow  # many resamples: over half a second of the fast tier
def test_a_change_within_the_margin_is_called_harmless_and_the_sequence_stops_at_the_first_failure():
    task = _task(2)
    base = _noisy(task, 1.0, 21)
    ctx = _context(task, base)
    tiny = base + np.random.default_rng(5).normal(0, 0.01, (EXAMPLES, 1))
    large = base + _noisy(task, 1.5, 22) - task.gold[:, None]
    outputs = np.stack([np.stack([base] * 3), np.stack([tiny] * 3), np.stack([large] * 3), np.stack([tiny] * 3)])
    test = ablation._non_inferiority(ctx, [0.0, 0.1, 0.2, 0.3], outputs)
    assert test.non_inferior == [True, True, False, True]
    assert test.up_to == 0.1  # 30% passes again but the claim "up to" stops at 20%
    assert test.change_ci[1][0] > -0.01 and "above -1%" in test.test
    half = ablation._non_inferiority(_context(task, base, margin=0.005), [0.0, 0.1], outputs[:2])
    assert half.margin == 0.005 and "above -0.5%" in half.test  # the margin as set, not rounded to 0%


# -- claim 3: importance order vs random orders ------------------------------------------------------------
def _pruning(ctx: Context, curve_noise: list[float], orders: int = 20) -> Importance:
    """Random orders: noise growing with the fraction, a fresh draw per order. The importance order
    is one more draw of the same kind except at the fractions where `curve_noise` says otherwise."""
    task, fractions = ctx.task, [0.0, 0.25, 0.5, 0.75]
    grow = [0.0, 0.6, 1.2, 1.8]
    random = np.stack([np.stack([ctx.base_outputs + _noisy(task, g, 100 + 10 * r + i) - task.gold[:, None]
                                 if g else ctx.base_outputs for i, g in enumerate(grow)]) for r in range(orders)])
    pruned = np.stack([ctx.base_outputs + _noisy(task, g, 999 + i) - task.gold[:, None] if g else ctx.base_outputs
                       for i, g in enumerate(curve_noise)])
    pruned_values, random_values = ablation._metric(ctx, pruned), ablation._metric(ctx, random)
    relative = ablation.relative_change
    return Importance(
        importance=[[0.0] * 4] * 2, normalization="none", variant="", loss="", recompute=False, calibration=None,
        pruning=Pruning(fractions=fractions, n_pruned=[0, 2, 4, 6], value=pruned_values.tolist(),
                        relative=relative(pruned_values, ctx.base_value).tolist(), order=[], baseline=ctx.base_value),
        random_order=ablation._random_order_curves(random_values, ctx.base_value, "constructed"),
        area=ablation._area_rank(ctx, relative(pruned_values, ctx.base_value), relative(random_values, ctx.base_value)),
        comparison=ablation._paired_comparison(ctx, ("random order", "least important first"), fractions[1:],
                                               random.swapaxes(0, 1)[1:], np.repeat(pruned[1:, None], orders, axis=1)),
        non_inferiority=ablation._non_inferiority(ctx, fractions, pruned[:, None]))


@pytest.mark.slow  # many resamples: over half a second of the fast tier
def test_a_pruning_curve_one_step_better_by_chance_is_not_a_finding():
    task = _task(3)
    ctx = _context(task, _noisy(task, 1.0, 31))
    lucky = _pruning(ctx, [0.0, 0.6, 0.6, 1.8])  # at 50% it has the noise of 25%: one step ahead there
    random_mean = np.array(lucky.random_order.relative_mean)
    assert lucky.pruning.relative[2] > random_mean[2]  # the old rule read this as "prunes further"
    finding = _finding(_record(importance=lucky), "ablation-importance")
    assert lucky.area.p_value >= 0.05 and not finding.supported
    assert "not shown to keep Spearman higher" in finding.sentence
    assert f"beats {lucky.area.better_than} of 20 random orders" in finding.sentence


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_a_pruning_order_better_at_every_step_is_ranked_first_with_its_p_value_floor():
    task = _task(4)
    ctx = _context(task, _noisy(task, 1.0, 41))
    good = _pruning(ctx, [0.0, 0.1, 0.2, 0.3])
    assert good.area.better_than == 20 and good.area.p_value == pytest.approx(1 / 21)
    finding = _finding(_record(importance=good), "ablation-importance")
    assert finding.supported and "the smallest 20 orders can give" in finding.sentence
    assert all(good.comparison.significant)


def test_pooled_permutation_test_and_rank_p_value():
    task = _task(5)
    base = _noisy(task, 1.0, 51)
    same = np.stack([base] * 3)
    assert paired_permutation_p_pooled(task, same, same, 200, 0) == 1.0  # no difference at all
    # with one pair the pooled test is the single test, swap for swap
    other = _noisy(task, 1.2, 52)
    assert paired_permutation_p_pooled(task, base[None], other[None], 500, 3) == \
        paired_permutation_p(task, base, other, 500, 3)
    assert rank_p(1.0, np.zeros(19)) == pytest.approx(0.05) and rank_p(0.0, np.ones(19)) == 1.0
    assert rank_p(0.0, np.ones(19), higher_is_better=False) == pytest.approx(0.05)


# -- the importance loss follows the metric ----------------------------------------------------------------
def test_similarity_loss_is_measured_after_a_linear_calibration_fitted_once():
    task = _task(6)
    scaled = task.scaled_gold()
    cosines = 0.3 * scaled + 0.6 + np.random.default_rng(1).normal(0, 0.02, EXAMPLES)  # right order, wrong scale
    fitted = task.fit_calibration(cosines[:, None])
    assert fitted["slope"] == pytest.approx(1 / 0.3, rel=0.1) and fitted["intercept"] == pytest.approx(-2, rel=0.1)
    assert fitted["error_removed"] > 0.95  # almost all the raw squared error was scale and offset
    assert task.calibration == (fitted["slope"], fitted["intercept"])  # kept for every later loss
