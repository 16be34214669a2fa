"""The head-ablation records of a report: the task, each experiment and its test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    pass
from reportgen.report.base import Grid, Number, Record


# -- head ablation (ablation.py) --------------------------------------------------------------------
class AblationTask(Record):
    # the task (config ablation.task): what the data are and which metric it scores
    type: Literal["similarity", "classification", "mlm", "causal_lm", "seq2seq"]
    data: str  # "builtin" or the data file, relative to the config file
    examples: int  # task examples the metrics are over (a graded pair, a labelled text, a text with masked tokens)
    distinct_texts: int  # distinct token sequences the model runs on (a sentence in many pairs counts once)
    metric: str  # the primary metric: every test and finding is about it
    metrics: list[str]  # every metric the task computes, the primary first
    higher_is_better: dict[str, bool]  # per metric
    # how a masked head is removed (config ablation.method); method_note says it in words
    method: Literal["zero", "uniform", "mean", "resample"]
    method_note: str  # the masking method in words, with its reference
    undefined: str | None  # why the metric is undefined on this data; None when it is defined


class Baseline(Record):
    metric: str  # the primary metric (AblationTask.metric)
    value: Number  # the unmasked model's primary metric; null when it is undefined
    metrics: dict[str, Number]  # per metric, the unmasked model's value; null where undefined
    ci: dict[str, list[Number]]  # per metric, [low, high]
    confidence: float  # 0.95: the level of the CIs
    bootstrap_samples: int  # resamples of the examples behind each CI (config ablation.bootstrap_samples)
    ci_method: str  # how the CIs were made, in words ("percentile bootstrap over examples")


class MaskTests(Record):
    """Masks tested one by one against the unmasked model: the test and its correction."""

    test: str  # the test in words (its permutations, two-sided); "no test: ..." when the metric is undefined
    correction: Literal["holm", "bonferroni"]  # the p-values' correction over the masks (config ablation.correction)
    alpha: float  # significance level of the corrected p-values (config ablation.alpha)
    permutations: int  # 0 when no test ran (undefined metric)
    baseline: Number  # the unmasked model's primary metric; null when it is undefined


class HeadTests(MaskTests):
    """Each head masked alone; [layer][head]."""

    value: Grid  # [layer][head] the primary metric with the head masked
    delta: Grid  # [layer][head] value - baseline, in the metric's units
    relative: Grid  # [layer][head] delta / |baseline|; null where the baseline is 0 or undefined
    p_value: Grid  # [layer][head] two-sided paired permutation p-value, uncorrected; null when no test ran
    p_adjusted: Grid  # [layer][head] corrected over the heads (`correction`); null when no test ran
    significant: list[list[bool]]  # [layer][head] p_adjusted < alpha


class LayerTests(MaskTests):
    """Every head of one layer masked, for each layer; [layer]."""

    layers: list[int]  # 0, 1, ...: the (flat) layer of each entry
    value: list[Number]  # [layer] the primary metric with every head of the layer masked
    delta: list[Number]  # [layer] value - baseline, in the metric's units
    relative: list[Number]  # [layer] delta / |baseline|; null where the baseline is 0 or undefined
    p_value: list[Number]  # [layer] two-sided paired permutation p-value, uncorrected; null when no test ran
    p_adjusted: list[Number]  # [layer] corrected over the layers (`correction`); null when no test ran
    significant: list[bool]  # [layer] p_adjusted < alpha


class Sweep(Record):
    """The metric per fraction of masked heads ([fraction][seed]) and its summaries per fraction."""

    values: Grid  # [fraction][seed] the primary metric with that seed's heads masked
    relative: Grid  # [fraction][seed] (value - baseline) / |baseline|; null where the baseline is 0 or undefined
    mean: list[Number]  # [fraction] mean of `values` over the seeds
    std: list[Number]  # [fraction] population standard deviation over the seeds
    min: list[Number]  # [fraction] the lowest over the seeds
    max: list[Number]  # [fraction] the highest over the seeds
    relative_mean: list[Number]  # [fraction] mean of `relative` over the seeds
    relative_std: list[Number]  # [fraction] its population standard deviation over the seeds


class NonInferiority(Record):
    """Is a change no loss? The paired bootstrap CI of the relative change at each fraction against a
    margin (REFERENCE, "Claims and the test that answers them": inside the baseline's CI is no test)."""

    margin: float  # relative to the unmasked model's metric: a change above -margin is no loss
    confidence: float  # 0.95: the level of the CIs
    bootstrap_samples: int  # resamples of the examples behind each CI (config ablation.bootstrap_samples)
    change_ci: list[list[Number]]  # [fraction][low, high] of the relative change, pairs (seeds/orders) pooled
    worst: list[int | None]  # [fraction] the pair (index) whose CI reaches lowest
    worst_ci: list[list[Number]]  # [fraction][low, high] of that pair
    non_inferior: list[bool]  # [fraction] the pooled CI lies above -margin
    up_to: float  # the largest fraction with every fraction up to it non-inferior (fixed-sequence); 0 if none
    test: str  # the test in words: the direction of a loss, the margin, the fractions in increasing order


class PairedComparison(Record):
    """Two conditions compared at each fraction by a paired permutation test over examples (pairs of
    conditions pooled, one swap per example), corrected over the fractions."""

    first: str  # the first condition ("lower layers masked", "random order")
    second: str  # the second ("upper layers masked", "least important first")
    fractions: list[float]  # the fractions tested
    difference: list[Number]  # [fraction] mean over pairs of metric(second) - metric(first)
    p_value: list[Number]  # [fraction] the two-sided permutation p-value, uncorrected
    p_adjusted: list[Number]  # [fraction] corrected over the fractions (`correction`)
    at_floor: list[bool]  # the raw p-value is 1 / (permutations + 1): only a bound
    significant: list[bool]  # [fraction] p_adjusted < alpha
    permutations: int  # swaps per test: config ablation.permutations, or more so the smallest p can pass the correction
    correction: Literal["holm", "bonferroni"]  # config ablation.correction
    alpha: float  # config ablation.alpha
    test: str  # the test in words


class RandomFraction(Sweep):
    fractions: list[float]  # of all heads masked, ascending (config ablation.fractions)
    n_masked: list[int]  # [fraction] heads masked: round(fraction x layers x heads)
    # config ablation.seeds: one random order of the heads per seed, each fraction masking a prefix of it
    seeds: list[int]
    baseline: Number  # the unmasked model's primary metric; null when it is undefined
    non_inferiority: NonInferiority | None  # None when the metric is undefined


class LayerHalves(Record):
    fractions: list[float]  # of all heads, drawn only from one half
    n_masked: list[int]  # [fraction] heads masked: round(fraction x layers x heads)
    seeds: list[int]  # config ablation.seeds: one random order of each half's heads per seed
    lower_layers: list[int]  # the first floor(L/2) (flat) layers; an encoder-decoder's, of each group
    upper_layers: list[int]  # the other layers
    baseline: Number  # the unmasked model's primary metric; null when it is undefined
    note: str  # how the fractions are read, in words
    lower: Sweep  # the metric with the masked heads drawn from the lower half only
    upper: Sweep  # the same from the upper half
    same_mask: list[bool]  # [fraction] every seed drew the same mask (e.g. the whole half): no spread over seeds
    comparison: PairedComparison | None  # lower-masked vs upper-masked outputs; None when the metric is undefined


class Pruning(Record):
    fractions: list[float]  # of all heads pruned, ascending: config ablation.fractions and 0
    n_pruned: list[int]  # [fraction] heads pruned: round(fraction x layers x heads)
    value: list[Number]  # [fraction] the primary metric with the least important heads pruned
    relative: list[Number]  # [fraction] (value - baseline) / |baseline|; null where the baseline is 0 or undefined
    order: list[list[int]]  # [layer, head] in the order pruned
    baseline: Number  # the unmasked model's primary metric; null when it is undefined


class RandomOrder(Record):
    orders: int  # random pruning orders (config ablation.importance.random_orders)
    source: str  # how the orders were drawn
    values: Grid  # [order][fraction]
    relative: Grid  # [order][fraction], change relative to the unmasked model
    mean: list[Number]  # [fraction] mean of `values` over the orders
    std: list[Number]  # [fraction] population standard deviation over the orders
    relative_mean: list[Number]  # [fraction] mean of `relative` over the orders


class AreaRank(Record):
    """The importance order's area under its pruning curve ranked among the random orders' areas:
    the rank is a one-sided Monte Carlo p-value (1 + orders at least as good) / (1 + orders)."""

    importance: Number  # mean relative change over the fractions (area under the curve / its width)
    random: list[Number]  # [order]
    better_than: int  # random orders with a worse area
    p_value: Number  # one-sided: (1 + random orders at least as good) / (1 + orders)
    floor: float  # 1 / (orders + 1): the smallest p-value this many orders can give


class Calibration(Record):
    """The linear map a * cosine + b fitted once on the unmasked model (least squares against the grade
    rescaled to [0, 1]), so that the importance loss measures ranking errors rather than scale."""

    slope: float  # a
    intercept: float  # b
    error_removed: float  # share of the squared error the fit removes


class Importance(Record):
    """Michel, Levy and Neubig (2019) head importance and the pruning curves it gives."""

    # [layer][head] on the unmasked model, before any pruning: the mean over tokens of |d loss / d gate|, normalised as
    # `normalization` says
    importance: Grid
    normalization: str  # "per-layer L2 (Michel et al.'s code)" or "none" (config ablation.importance.normalize)
    variant: str  # how importance is estimated, in words
    loss: str  # the loss whose gradient importance is, in words (per task)
    recompute: bool  # importance recomputed after each pruning step (config ablation.importance.recompute)
    calibration: Calibration | None  # similarity task only
    pruning: Pruning  # the least important heads pruned first
    random_order: RandomOrder  # the random pruning orders it is ranked among
    area: AreaRank | None  # None when the metric is undefined
    comparison: PairedComparison | None  # importance order vs random orders per fraction
    non_inferiority: NonInferiority | None  # the importance order against the margin


class HeadPair(Record):
    """Two heads masked together, and their interaction: the pair's change minus the sum of the two
    single changes, I = (m(ab) - m0) - (m(a) - m0) - (m(b) - m0), on the primary metric."""

    first: list[int]  # [layer, head]; of two top heads the one with the larger |single change|; all pairs: lower index
    second: list[int]  # [layer, head] of the other
    value: Number  # the metric with both masked
    change: Number  # m(ab) - m0
    relative: Number  # (m(ab) - m0) / |m0|
    interaction: Number  # I, in the metric's units
    interaction_relative: Number  # I / |m0|
    ci: list[Number]  # [low, high] 95% paired bootstrap CI of I (metric units)
    p_value: Number  # two-sided p-value of I = 0 from the bootstrap SE; null when the metric is undefined
    p_adjusted: Number  # corrected over the tested pairs (HeadPairs.correction)
    significant: bool  # p_adjusted < alpha


class HeadPairs(Record):
    """The head_pairs experiment: pairs of heads masked together, each pair's interaction with its test."""

    selection: str  # how the pairs were chosen, in words
    top_k: int | None  # the k of top-k by |single change|; null when every pair was masked
    heads: list[list[int]]  # the chosen heads [layer, head], largest |single change| first
    single_change: list[Number]  # [chosen head] m(a) - m0
    pairs: list[HeadPair]  # every pair of the chosen heads, in the order of `heads`
    tested: int  # pairs whose interaction was tested (defined), the family the correction is over
    significant_count: int  # pairs whose interaction is significant
    bootstrap_samples: int  # resamples behind the CIs and the standard errors of the p-values
    confidence: float  # 0.95: the level of the CIs
    test: str  # the test in words; "no test: ..." when the metric is undefined
    correction: Literal["holm", "bonferroni"]  # over the tested pairs (config ablation.correction)
    alpha: float  # config ablation.alpha
    baseline: Number  # m0, the unmasked model's primary metric; null when it is undefined


class Ablation(Record):
    """The head-ablation experiments on the task; an experiment that was switched off is null."""

    task: AblationTask  # what the experiments ran on
    layers: int  # (flat) layers of the head masks: an encoder-decoder's encoder + decoder + cross-attention layers
    heads: int  # heads per layer
    experiments: list[str]  # the ones that ran
    # the unmasked model's metrics and CIs; null when switched off or not run yet (a partial site)
    baseline: Baseline | None = None
    single_heads: HeadTests | None = None  # each head masked alone; null when switched off or not run yet
    whole_layers: LayerTests | None = None  # each layer's heads masked together; null when switched off or not run yet
    # random sets of each fraction of the heads masked; null when switched off or not run yet
    random_fraction: RandomFraction | None = None
    # fractions drawn from the lower or the upper half of the layers; null when switched off or not run yet
    layer_halves: LayerHalves | None = None
    # Michel et al.'s importance and pruning curves; null when switched off or not run yet
    importance: Importance | None = None
    head_pairs: HeadPairs | None = None  # only when ablation.experiments.head_pairs is on
    # an encoder-decoder's group of each flat layer ("encoder", "decoder" self-attention, "cross"-attention:
    # reportgen.model.head_sites); None for every other model, whose flat layer is its depth
    groups: list[str] | None = None
