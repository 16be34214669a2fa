"""Head-ablation experiments: which heads, layers and fractions of heads a model can lose.

Experiments (each optional), one function each, returning its record of `reportgen.report`:
- baseline: the task metric with a 95% percentile bootstrap CI over examples;
- single_heads: each head masked alone; paired permutation test over examples against
  the baseline, Holm-corrected (or Bonferroni) for the number of heads;
- random_fraction: p% of all heads masked at random, several seeds per p; "costs nothing" is
  a non-inferiority test: the paired bootstrap CI of the change (seeds pooled) above -margin;
- layer_halves: p% of all heads taken only from the lower half of the layers, and only
  from the upper half (lower = the first floor(L/2) layers); the halves are compared per
  example at each fraction (paired permutation test, seeds pooled, corrected over fractions),
  never by the spread over seeds, which is zero where every seed draws the whole half.
  An encoder-decoder's heads are laid out flat in three groups (`reportgen.model.head_sites`:
  encoder self-attention, decoder self-attention, cross-attention), so its flat order is not
  depth: its halves are taken within each group (lower = the first floor(L_g/2) layers of each
  group g of L_g layers, upper = the rest of each group), never of the flat order, which would
  put the whole encoder in the lower half (`half_layers`);
- whole_layers: every head of one layer masked, for each layer (same test as heads);
  an encoder-decoder's layers are its flat layers, each in its group (`Ablation.groups`);
- importance: Michel, Levy and Neubig (2019) head importance, E_x |d L / d xi_h| with
  the absolute value taken per token and averaged over tokens; optional per-layer L2
  normalisation as in their code; then pruning the least important heads 10% at a time
  (optionally recomputing importance after each step) next to many random pruning orders:
  the importance order's area under the curve is ranked among theirs (a Monte Carlo
  p-value) and compared with them per fraction (paired test, corrected over fractions);
- head_pairs (off by default: it multiplies the masks): two heads masked together, for every pair
  among the top-k heads by |single change| (or every pair); each pair's interaction, its change
  minus the two single changes, with a paired bootstrap test over examples, corrected over the
  pairs (`reportgen.ablation.head_pairs`).

What each claim needs is in ../shared/REFERENCE.md, "Claims and the test that answers them".
The masks are evaluated by `reportgen.ablation.engine` (fast, cached, resumable); the tests and
intervals are `reportgen.stats`. Every experiment but layer_halves treats the heads as a set of
[flat layer, head] cells and never reads the flat order as depth; the record names an encoder-decoder's
group of each flat layer (`Ablation.groups`), by which the pages and findings name its layers.
The experiments share one `Context`: the task, the runner, the settings and the unmasked model's outputs, computed once.

Statistics are cached too, so that a rebuild spends its time on what changed: each experiment
first gathers what its statistics read (the per-mask outputs, from the mask cache) and its record
is stored under a key of those arrays, the settings it reads (EXPERIMENT_SETTINGS) and
STATS_VERSION (`Context.remembered`); and the whole stage's record is stored under the model's
fingerprint, the data file's content and every setting (`run_ablations`), so that a rebuild with
nothing changed loads neither the model nor a mask.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pydantic import ValidationError

from reportgen.ablation.engine import CODE_VERSION, Engine, Progress, ResultCache, Runner
from reportgen.ablation.head_pairs import chosen_heads, head_pairs_record, pair_masks, pair_positions
from reportgen.ablation.tasks import Task, load_ablation_task
from reportgen.cache.store import Cache, key_of
from reportgen.config import BUILTIN_DATA, AblationSettings
from reportgen.datafiles import open_data_file
from reportgen.errors import DataError, ModelError
from reportgen.progress import reporting_draws
from reportgen.report import (
    Ablation,
    AblationTask,
    AreaRank,
    Baseline,
    Calibration,
    ExperimentCost,
    HeadPairs,
    HeadTests,
    Importance,
    LayerHalves,
    LayerTests,
    NonInferiority,
    PairedComparison,
    Pruning,
    RandomFraction,
    RandomOrder,
    Record,
    Sweep,
)
from reportgen.stats import (
    adjust,
    at_floor,
    bootstrap_ci,
    paired_change_cis,
    paired_permutation_ps,
    permutations_for,
    rank_p,
    relative_change,
)

if TYPE_CHECKING:  # Ray is imported only when a build asks for it
    from reportgen.ablation.ray_runner import RayCluster, WorkerPool

__all__ = ["CODE_VERSION", "EXPERIMENTS", "OPTIONAL_EXPERIMENTS", "STATS_VERSION", "Context", "ablate",
           "has_stored_record", "planned_masks", "record_key", "run_ablations"]

EXPERIMENTS = ("baseline", "single_heads", "random_fraction", "layer_halves", "whole_layers", "importance")
OPTIONAL_EXPERIMENTS = ("head_pairs",)  # off by default, listed after EXPERIMENTS when they run
STATS_VERSION = "stats-1"  # bump when a change alters an experiment's record for the same outputs and settings
_TESTS = ("permutations", "alpha", "correction")
_NON_INFERIORITY = ("bootstrap_samples", "margin")
# The settings each experiment's statistics read besides its outputs (the first seed, the method and
# the model's shape always count). A setting left out here would let a stale record through: the
# tests change each setting and check that every experiment not listing it keeps its record.
EXPERIMENT_SETTINGS = {
    "baseline": ("bootstrap_samples",),
    "single_heads": _TESTS,
    "whole_layers": _TESTS,
    "random_fraction": ("fractions", "seeds", *_NON_INFERIORITY),
    "layer_halves": ("fractions", "seeds", *_TESTS),
    "importance": ("fractions", "seeds", "importance", *_NON_INFERIORITY, *_TESTS),
    # which pairs (ablation.head_pairs) is in its inputs: the chosen heads and the selection
    "head_pairs": ("bootstrap_samples", "alpha", "correction"),
}
# Where the warnings about the task and its data come from (the module files, by name).
TASK_WARNINGS = ("experiments.py", "tasks.py", "datafiles.py")
RecordType = TypeVar("RecordType", bound=Record)
METHOD_NOTES = {"zero": "zero: head output removed (Michel et al. 2019)",
                "uniform": "uniform: head attention replaced by 1/n over non-padding keys (Kovaleva et al. 2019)"}
LOSSES = {"similarity": "squared error of the calibrated cosine (a * cosine + b, fitted once by least squares on the "
                        "unmasked model) vs the grade rescaled to [0, 1]", "classification": "cross-entropy",
          "mlm": "cross-entropy over masked tokens",
          "causal_lm": "next-token cross-entropy, token-weighted over all predicted tokens",
          "seq2seq": "target-token cross-entropy given the source (teacher-forced), token-weighted over all targets"}


# -- numbers as the report holds them ---------------------------------------------------------------
def _number(value: float) -> float | None:
    """A float for the report; NaN and infinities become None (JSON has no NaN)."""
    return float(value) if math.isfinite(value) else None


def _numbers(values: Any) -> Any:
    """Nested lists of floats for the report, NaN and infinities as None."""
    array = np.asarray(values, dtype=np.float64)
    objects = array.astype(object)
    objects[~np.isfinite(array)] = None
    return objects.tolist()


# -- what every experiment shares ---------------------------------------------------------------------
@dataclass(frozen=True)
class Context:
    """The task, how masks are evaluated, the settings, and the unmasked model's outputs."""

    task: Task
    runner: Runner
    settings: AblationSettings
    layers: int
    heads: int
    base_outputs: np.ndarray  # per-example outputs of the unmasked model
    base_value: float  # its primary metric; NaN when undefined
    undefined: str | None  # why the metric is undefined on the task data, else None
    stats: ResultCache | None = None  # where experiment records are kept; None: always computed
    # an encoder-decoder's group of each flat layer (HeadSites.groups); None for every other model
    groups: tuple[str, ...] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.layers, self.heads

    @property
    def seed(self) -> int:
        """The seed of the tests and intervals (the fraction experiments use every seed)."""
        return self.settings.seeds[0]

    def ones(self) -> np.ndarray:
        """The mask that keeps every head."""
        return np.ones(self.shape, dtype=np.float32)

    def metrics(self, outputs: np.ndarray) -> dict[str, float]:
        """Every metric of the task on one mask's per-example outputs."""
        return {name: float(values[0])
                for name, values in self.task.metrics(outputs[None], self.task.gold[None]).items()}

    def outputs(self, name: str, masks: list[np.ndarray], done: int = 0, total: int | None = None) -> np.ndarray:
        """Per-example outputs under each mask [masks, examples, columns], evaluated through the runner
        (progress under `name`)."""
        return np.stack(self.runner.outputs(name, masks, done=done, total=total))

    def stats_key(self, name: str, inputs: dict[str, Any]) -> str:
        """The key of experiment `name`'s record: `inputs` (arrays by content), the unmasked outputs,
        the settings it reads (EXPERIMENT_SETTINGS) and STATS_VERSION. The model, the data and the
        method are the cache folder's (`ResultCache.directory`)."""
        settings = self.settings.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps(
            [STATS_VERSION, name, self.task.kind, self.seed, self.shape,
             {field: settings[field] for field in EXPERIMENT_SETTINGS[name]},
             {label: value for label, value in inputs.items() if not isinstance(value, np.ndarray)}],
            sort_keys=True, default=str).encode())
        for value in [self.base_outputs, *(value for value in inputs.values() if isinstance(value, np.ndarray))]:
            array = np.ascontiguousarray(value)
            digest.update(f"{array.dtype.str}{array.shape}".encode() + array.tobytes())
        return digest.hexdigest()[:24]

    def remembered(self, name: str, inputs: dict[str, Any], compute: Callable[[], RecordType],
                   kind: type[RecordType]) -> RecordType:
        """Experiment `name`'s record from the cache when its statistics' inputs (`stats_key`) are
        unchanged, else computed (its resampling shown as "<name>: resamples" or ": permutations" when it
        takes more than one chunk of draws) and stored."""
        def report(kind: str, done: int, total: int) -> None:
            self.runner.tick(f"{name}: {kind}", done, total)

        def computed() -> RecordType:
            with reporting_draws(report):
                return compute()

        if self.stats is None:
            return computed()
        key = self.stats_key(name, inputs)
        stored = self.stats.get_stats(key)
        if stored is not None:
            try:
                return kind.model_validate(stored)
            except ValidationError:  # written by a version whose record had another layout: recompute
                pass
        record = computed()
        self.stats.put_stats(key, record.model_dump(mode="json"))
        return record


def make_context(task: Task, runner: Runner, settings: AblationSettings) -> Context:
    """Evaluate the unmasked model (always: every experiment compares with it) and warn when its
    metric is undefined, since then no change can be tested."""
    engine = runner.engine
    base_outputs = runner.outputs("baseline", [np.ones((engine.layers, engine.heads), dtype=np.float32)])[0]
    undefined = task.undefined_reason(base_outputs)
    if undefined:
        warnings.warn(f"ablation: {task.primary} is undefined on the task data ({undefined}); no significance "
                      "test was run and no head or layer is marked significant", stacklevel=1)
    base_value = float(task.metrics(base_outputs[None], task.gold[None])[task.primary][0])
    return Context(task, runner, settings, engine.layers, engine.heads, base_outputs, base_value, undefined,
                   runner.cache, encoder_decoder_groups(getattr(engine, "groups", None)))


def encoder_decoder_groups(groups: Sequence[str] | None) -> tuple[str, ...] | None:
    """The groups of the flat layers when they are an encoder-decoder's (`HeadSites.groups` holds "cross"),
    else None: an encoder's or a decoder's one group says nothing its flat order does not."""
    return tuple(groups) if groups and "cross" in groups else None


def task_record(ctx: Context) -> AblationTask:
    """What the experiments ran on, so a reader can tell which metric every number is about."""
    task, settings = ctx.task, ctx.settings
    return AblationTask(type=task.kind, data=settings.data, examples=task.n_examples, distinct_texts=len(task.units),
                        metric=task.primary, metrics=list(task.metric_names), higher_is_better=task.higher_is_better,
                        method=settings.method, method_note=METHOD_NOTES[settings.method], undefined=ctx.undefined)


# -- the experiments ------------------------------------------------------------------------------------
def baseline(ctx: Context) -> Baseline:
    """The unmasked model's metrics, each with its bootstrap CI (NaN bounds when undefined)."""
    return ctx.remembered("baseline", {}, lambda: _baseline(ctx), Baseline)


def _baseline(ctx: Context) -> Baseline:
    settings, task = ctx.settings, ctx.task
    if ctx.undefined:
        ci = {name: [math.nan, math.nan] for name in task.metric_names}
    else:
        ci = bootstrap_ci(task, ctx.base_outputs, settings.bootstrap_samples, ctx.seed)
    return Baseline(metric=task.primary, value=_number(ctx.base_value),
                    metrics={name: _number(value) for name, value in ctx.metrics(ctx.base_outputs).items()},
                    ci={name: _numbers(bounds) for name, bounds in ci.items()}, confidence=0.95,
                    bootstrap_samples=settings.bootstrap_samples, ci_method="percentile bootstrap over examples")


def _tested(ctx: Context, outputs: np.ndarray, shape: tuple[int, ...]) -> dict[str, Any]:
    """Each mask's metric, change and corrected p-value against the unmasked model, from the masks'
    outputs [masks, examples, columns], as the fields shared by `HeadTests` and `LayerTests` (arrays
    reshaped to `shape`). The masks are tested together: one draw of swaps serves them all."""
    settings = ctx.settings
    masks = len(outputs)
    values = _metric(ctx, outputs)
    if ctx.undefined:  # no change can be measured, so none is tested and none is significant
        p_values = np.full(masks, np.nan)
        permutations = 0
        test = f"no test: {ctx.task.primary} is undefined on the task data ({ctx.undefined})"
    else:
        permutations = permutations_for(settings.permutations, masks, settings.alpha)
        base = np.broadcast_to(ctx.base_outputs, (masks, 1, *ctx.base_outputs.shape))
        p_values = paired_permutation_ps(ctx.task, base, outputs[:, None], permutations, ctx.seed)
        test = f"paired permutation test over examples ({permutations} permutations, two-sided)"
    p_adjusted = adjust(p_values, settings.correction)
    significant = np.isfinite(p_adjusted) & (p_adjusted < settings.alpha)
    return {"value": _numbers(values.reshape(shape)), "delta": _numbers((values - ctx.base_value).reshape(shape)),
            "relative": _numbers(relative_change(values, ctx.base_value).reshape(shape)),
            "p_value": _numbers(p_values.reshape(shape)), "p_adjusted": _numbers(p_adjusted.reshape(shape)),
            "significant": significant.reshape(shape).tolist(), "test": test, "correction": settings.correction,
            "alpha": settings.alpha, "permutations": permutations, "baseline": _number(ctx.base_value)}


def _single_head_masks(ctx: Context) -> list[np.ndarray]:
    """One mask per head with that head alone at 0, in layer-major order (shared by head_pairs)."""
    masks = np.ones((ctx.layers * ctx.heads, ctx.layers * ctx.heads), dtype=np.float32)
    np.fill_diagonal(masks, 0)
    return list(masks.reshape(-1, *ctx.shape))


def single_heads(ctx: Context) -> HeadTests:
    """Each head masked alone, tested against the unmasked model."""
    outputs = ctx.outputs("single_heads", _single_head_masks(ctx))
    return ctx.remembered("single_heads", {"outputs": outputs},
                          lambda: HeadTests(**_tested(ctx, outputs, ctx.shape)), HeadTests)


def whole_layers(ctx: Context) -> LayerTests:
    """Every head of one layer masked, for each layer, tested against the unmasked model."""
    masks = []
    for layer in range(ctx.layers):
        mask = ctx.ones()
        mask[layer] = 0
        masks.append(mask)
    outputs = ctx.outputs("whole_layers", masks)
    return ctx.remembered("whole_layers", {"outputs": outputs}, lambda: LayerTests(
        layers=list(range(ctx.layers)), **_tested(ctx, outputs, (ctx.layers,))), LayerTests)


def _prefix_mask(order: np.ndarray, count: int, shape: tuple[int, int]) -> np.ndarray:
    """Mask the first `count` heads of a random order (flat head indices).

    Each seed draws one order and every fraction masks a prefix of it: each mask is still a
    uniform random subset of its size, the curves over p are nested (less noisy), and the
    random pruning order of the importance experiment reuses the very same masks.
    """
    mask = np.ones(shape[0] * shape[1], dtype=np.float32)
    mask[order[:count]] = 0
    return mask.reshape(shape)


def _random_order(seed: int, pool: np.ndarray, stream: int) -> np.ndarray:
    return np.random.default_rng([seed, stream]).permutation(pool)


def _masked_count(ctx: Context, fraction: float) -> int:
    return int(round(fraction * ctx.layers * ctx.heads))


def _sweep(ctx: Context, values: np.ndarray) -> Sweep:
    """The summaries of a metric [fraction][seed]."""
    relative = relative_change(values, ctx.base_value)
    return Sweep(values=_numbers(values), relative=_numbers(relative), mean=_numbers(values.mean(1)),
                 std=_numbers(values.std(1)), min=_numbers(values.min(1)), max=_numbers(values.max(1)),
                 relative_mean=_numbers(relative.mean(1)), relative_std=_numbers(relative.std(1)))


def _swept(ctx: Context, name: str, pools: dict[str, np.ndarray], fractions: list[float],
           first_stream: int) -> tuple[np.ndarray, np.ndarray]:
    """For each pool of heads, a random `fraction` of all heads masked from it, per seed: the masks
    and the per-example outputs, [pool, fraction, seed, ...]. Pool i draws its orders from random
    stream first_stream + i."""
    seeds = ctx.settings.seeds
    orders = {(group, seed): _random_order(seed, pool, first_stream + index)
              for index, (group, pool) in enumerate(pools.items()) for seed in seeds}
    masks = [_prefix_mask(orders[group, seed], _masked_count(ctx, fraction), ctx.shape)
             for group in pools for fraction in fractions for seed in seeds]
    grid = (len(pools), len(fractions), len(seeds))
    return np.stack(masks).reshape(*grid, *ctx.shape), ctx.outputs(name, masks).reshape(*grid, ctx.task.n_examples, -1)


def _metric(ctx: Context, outputs: np.ndarray) -> np.ndarray:
    """The primary metric of per-example outputs [..., examples, columns], as [...]."""
    flat = outputs.reshape(-1, *outputs.shape[-2:])
    return ctx.task.metrics(flat, ctx.task.gold[None])[ctx.task.primary].reshape(outputs.shape[:-2])


def _non_inferiority(ctx: Context, fractions: list[float], outputs: np.ndarray) -> NonInferiority:
    """Per fraction, the paired bootstrap CI of the relative change (pairs pooled) against the margin: above
    -margin for a metric where higher is better, below +margin for one where lower is better (a loss).

    The fractions are tested in increasing order and the claim stops at the first that fails: a
    fixed-sequence procedure, which keeps the family-wise error at the level of one test without
    a correction (Maurer, Hothorn and Lehmacher 1995). Each test is one-sided at 2.5% (the
    worse end of a two-sided 95% interval).
    """
    settings, scale = ctx.settings, abs(ctx.base_value)
    higher = ctx.task.higher_is_better[ctx.task.primary]

    def worse_gain(low: float, high: float) -> float:
        """The worse end of a CI of a change, read as a gain (positive is better, whichever way the metric points)."""
        return low if higher else -high

    pooled, worst, worst_ci = [], [], []
    for ci, per_pair in paired_change_cis(ctx.task, ctx.base_outputs, outputs, settings.bootstrap_samples, ctx.seed):
        worse_ends = np.array([worse_gain(low, high) for low, high in per_pair], dtype=np.float64)
        index = int(np.nanargmin(worse_ends)) if np.isfinite(worse_ends).any() else None
        pooled.append(np.array(ci) / scale)
        worst.append(index)
        worst_ci.append(np.array(per_pair[index]) / scale if index is not None else np.full(2, np.nan))
    passes = [bool(np.isfinite(worse_gain(low, high)) and worse_gain(low, high) > -settings.margin)
              for low, high in pooled]
    up_to = 0.0
    for fraction, ok in zip(fractions, passes, strict=True):
        if not ok:
            break
        up_to = fraction
    return NonInferiority(
        margin=settings.margin, confidence=0.95, bootstrap_samples=settings.bootstrap_samples,
        change_ci=_numbers(pooled), worst=worst, worst_ci=_numbers(worst_ci), non_inferior=passes, up_to=up_to,
        test=f"paired percentile bootstrap over examples ({settings.bootstrap_samples} resamples): the 95% CI of the "
             f"relative change lies {'above -' if higher else 'below +'}{100 * settings.margin:g}%, fractions tested "
             "in increasing order")


def _paired_comparison(ctx: Context, labels: tuple[str, str], fractions: list[float], first: np.ndarray,
                       second: np.ndarray) -> PairedComparison:
    """Two conditions [fraction, pairs, examples, columns] compared at each fraction by a paired
    permutation test over examples, corrected over the fractions (REFERENCE, "Claims")."""
    settings = ctx.settings
    permutations = permutations_for(settings.permutations, len(fractions), settings.alpha)
    difference = (_metric(ctx, second) - _metric(ctx, first)).mean(-1)
    p_values = paired_permutation_ps(ctx.task, first, second, permutations, ctx.seed)
    p_adjusted = adjust(p_values, settings.correction)
    return PairedComparison(
        first=labels[0], second=labels[1], fractions=fractions, difference=_numbers(difference),
        p_value=_numbers(p_values), p_adjusted=_numbers(p_adjusted),
        at_floor=[at_floor(p, permutations) for p in p_values.tolist()],
        significant=(np.isfinite(p_adjusted) & (p_adjusted < settings.alpha)).tolist(),
        permutations=permutations, correction=settings.correction, alpha=settings.alpha,
        test=f"paired permutation test over examples ({permutations} permutations, two-sided, one swap per "
             f"example shared by all pairs), {settings.correction.capitalize()}-corrected over {len(fractions)} "
             "fractions")


def random_fraction(ctx: Context) -> RandomFraction:
    """p% of all heads masked at random; stream 0, the random pruning order's."""
    fractions = sorted(set(ctx.settings.fractions))
    _, outputs = _swept(ctx, "random_fraction", {"all": np.arange(ctx.layers * ctx.heads)}, fractions, 0)
    return ctx.remembered("random_fraction", {"outputs": outputs},
                          lambda: _random_fraction(ctx, fractions, outputs[0]), RandomFraction)


def _random_fraction(ctx: Context, fractions: list[float], outputs: np.ndarray) -> RandomFraction:
    values = _metric(ctx, outputs)
    return RandomFraction(fractions=fractions, n_masked=[_masked_count(ctx, fraction) for fraction in fractions],
                          seeds=ctx.settings.seeds, baseline=_number(ctx.base_value),
                          non_inferiority=None if ctx.undefined else _non_inferiority(ctx, fractions, outputs),
                          **_sweep(ctx, values).model_dump())


GROUP_HALVES = "the halves are taken within each group: encoder, decoder self- and cross-attention layers"


def half_layers(layers: int, groups: Sequence[str] | None = None) -> tuple[list[int], list[int]]:
    """The flat layers of the lower and of the upper half: the first floor(L/2) layers and the rest; an
    encoder-decoder's (`groups`, see `encoder_decoder_groups`) within each group: the first floor(L_g/2)
    layers of each group and the rest of each, in flat order."""
    if not groups:
        half = layers // 2
        return list(range(half)), list(range(half, layers))
    lower, upper = [], []
    for group in dict.fromkeys(groups):
        depths = [depth for depth, name in enumerate(groups) if name == group]
        lower += depths[: len(depths) // 2]
        upper += depths[len(depths) // 2:]
    return sorted(lower), sorted(upper)


def half_pools(layers: int, heads: int, groups: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """The flat head indices (layer * heads + head) of the lower and of the upper half (`half_layers`)."""
    if not groups:  # the flat order is depth: as it always was, so that the draws stay the same
        half = layers // 2
        all_heads = np.arange(layers * heads)
        return {"lower": all_heads[: half * heads], "upper": all_heads[half * heads:]}
    return {name: (np.asarray(chosen, dtype=np.int64)[:, None] * heads + np.arange(heads)).ravel()
            for name, chosen in zip(("lower", "upper"), half_layers(layers, groups), strict=True)}


def layer_halves(ctx: Context) -> LayerHalves:
    """p% of all heads drawn only from the lower half of the layers, and only from the upper half
    (an encoder-decoder's halves within each group: `half_layers`); the two are compared per example
    at each fraction (paired test, seeds pooled)."""
    pools = half_pools(ctx.layers, ctx.heads, ctx.groups)
    limit = min(len(pool) for pool in pools.values())
    fractions = sorted(fraction for fraction in set(ctx.settings.fractions) if _masked_count(ctx, fraction) <= limit)
    masks, outputs = _swept(ctx, "layer_halves", pools, fractions, 1)
    # an encoder-decoder's halves are not the flat order's: its record is kept under a key of its own
    inputs = {"outputs": outputs, **({"halves": "within each group", "groups": list(ctx.groups)} if ctx.groups else {})}
    return ctx.remembered("layer_halves", inputs, lambda: _layer_halves(ctx, fractions, masks, outputs), LayerHalves)


def _layer_halves(ctx: Context, fractions: list[float], masks: np.ndarray, outputs: np.ndarray) -> LayerHalves:
    lower_layers, upper_layers = half_layers(ctx.layers, ctx.groups)
    values = _metric(ctx, outputs)
    # every seed drew the same mask in both halves, e.g. the whole half: the seeds cannot spread
    same = [bool((masks[:, index] == masks[:, index, :1]).all()) for index in range(len(fractions))]
    tested = [index for index, fraction in enumerate(fractions) if _masked_count(ctx, fraction) > 0]
    comparison = None if ctx.undefined or not tested else _paired_comparison(
        ctx, ("lower layers masked", "upper layers masked"), [fractions[i] for i in tested],
        outputs[0, tested], outputs[1, tested])
    return LayerHalves(
        fractions=fractions, n_masked=[_masked_count(ctx, fraction) for fraction in fractions],
        seeds=ctx.settings.seeds, lower_layers=lower_layers, upper_layers=upper_layers,
        baseline=_number(ctx.base_value),
        note="p is a fraction of all heads, drawn only from one half; fractions above what a half holds are left out"
        + (f"; {GROUP_HALVES}" if ctx.groups else ""),
        lower=_sweep(ctx, values[0]), upper=_sweep(ctx, values[1]), same_mask=same, comparison=comparison)


def _normalised(raw: np.ndarray, normalize: str) -> np.ndarray:
    if normalize == "layer_l2":  # Michel et al.'s code: divide each layer by its L2 norm
        return raw / (np.sqrt((raw**2).sum(-1, keepdims=True)) + 1e-20)
    return raw


def _pruning_masks(ctx: Context, targets: list[int],
                   total: int) -> tuple[np.ndarray, list[list[int]], list[np.ndarray]]:
    """Prune the least important heads up to each target count (recomputing importance at each
    step when configured): the first importance, the pruning order and one mask per target."""
    runner, settings = ctx.runner, ctx.settings.importance
    runner.tick("importance", 0, total)
    mask = ctx.ones()
    first = _normalised(runner.importance(mask), settings.normalize)
    done = 1
    runner.tick("importance", done, total)
    scores = first
    order: list[list[int]] = []
    masks = []
    for count in targets:
        if order and settings.recompute and count > len(order):
            scores = _normalised(runner.importance(mask), settings.normalize)
            done += 1
            runner.tick("importance", done, total)
        alive = np.flatnonzero(mask.ravel() == 1)
        need = count - len(order)
        if need > 0:
            ranked = alive[np.argsort(scores.ravel()[alive], kind="stable")][:need]
            mask = mask.copy()
            mask.ravel()[ranked] = 0
            order += [[int(flat // ctx.heads), int(flat % ctx.heads)] for flat in ranked]
        masks.append(mask.copy())
    return first, order, masks


def _random_orders(ctx: Context) -> tuple[list[np.ndarray], str]:
    """The random pruning orders: first the random_fraction experiment's (one per seed, so their
    masks are shared), then more from the first seed until there are `importance.random_orders`."""
    seeds, wanted = ctx.settings.seeds, ctx.settings.importance.random_orders
    pool = np.arange(ctx.layers * ctx.heads)
    orders = [_random_order(seed, pool, 0) for seed in seeds][:wanted]
    orders += [_random_order(seeds[0], pool, 100 + index) for index in range(wanted - len(orders))]
    source = (f"{wanted} uniform random permutations of the heads: the random_fraction experiment's (one per seed) "
              f"and the rest from numpy default_rng([{seeds[0]}, 100 + k])")
    return orders, source


def _area_rank(ctx: Context, pruned: np.ndarray, random: np.ndarray) -> AreaRank:
    """Rank the importance order's pruning curve among the random orders' by the area under the
    curve (the mean relative change over the fractions): a Monte Carlo p-value."""
    area, random_area = np.nanmean(pruned), np.nanmean(random, axis=1)
    better = ctx.task.higher_is_better[ctx.task.primary]
    worse = random_area < area if better else random_area > area
    return AreaRank(importance=_number(area), random=_numbers(random_area), better_than=int(np.count_nonzero(worse)),
                    p_value=rank_p(area, random_area, better), floor=1 / (len(random_area) + 1))


def importance(ctx: Context) -> Importance:
    """Michel et al. head importance, and pruning by it next to random pruning orders: the importance
    order's curve is ranked among theirs by its area, compared with them per fraction (paired test
    over examples) and held against the non-inferiority margin."""
    settings, task = ctx.settings, ctx.task
    calibration = Calibration(**task.fit_calibration(ctx.base_outputs)) if task.kind == "similarity" else None
    fractions = sorted(set(settings.fractions) | {0.0})
    targets = [_masked_count(ctx, fraction) for fraction in fractions]
    orders, source = _random_orders(ctx)
    importance_steps = len(fractions) - 1 if settings.importance.recompute else 1
    total = importance_steps + len(fractions) * (1 + len(orders))
    first, order, prune_masks = _pruning_masks(ctx, targets, total)
    pruned = ctx.outputs("importance", prune_masks, done=importance_steps, total=total)  # [fraction, ...]
    random_masks = [_prefix_mask(random_order, count, ctx.shape) for random_order in orders for count in targets]
    random = ctx.outputs("importance", random_masks, done=importance_steps + len(prune_masks),
                         total=total).reshape(len(orders), len(fractions), task.n_examples, -1)
    gathered = {"importance": first, "order": order, "pruned": pruned, "random": random, "source": source}
    return ctx.remembered("importance", gathered,
                          lambda: _importance(ctx, fractions, targets, calibration, gathered), Importance)


def _importance(ctx: Context, fractions: list[float], targets: list[int], calibration: Calibration | None,
                gathered: dict[str, Any]) -> Importance:
    """The importance experiment's record from what `importance` gathered."""
    settings, task = ctx.settings, ctx.task
    pruned, random = gathered["pruned"], gathered["random"]
    pruned_values, random_values = _metric(ctx, pruned), _metric(ctx, random)
    random_curves = _random_order_curves(random_values, ctx.base_value, gathered["source"])
    tested = [index for index, count in enumerate(targets) if count > 0]
    defined = not ctx.undefined
    return Importance(
        importance=_numbers(gathered["importance"]),
        normalization="per-layer L2 (Michel et al.'s code)" if settings.importance.normalize == "layer_l2" else "none",
        variant="mean over tokens of |d loss / d gate| per token and head (Michel et al. 2019)",
        loss=LOSSES[task.kind], recompute=settings.importance.recompute, calibration=calibration,
        pruning=Pruning(fractions=fractions, n_pruned=targets, value=_numbers(pruned_values),
                        relative=_numbers(relative_change(pruned_values, ctx.base_value)), order=gathered["order"],
                        baseline=_number(ctx.base_value)),
        random_order=random_curves,
        area=_area_rank(ctx, relative_change(pruned_values, ctx.base_value),
                        relative_change(random_values, ctx.base_value)) if defined else None,
        comparison=_paired_comparison(
            ctx, ("random order", "least important first"), [fractions[i] for i in tested],
            random.swapaxes(0, 1)[tested], np.repeat(pruned[tested, None], len(random), axis=1))
        if defined and tested else None,
        non_inferiority=_non_inferiority(ctx, fractions, pruned[:, None]) if defined else None)


def _random_order_curves(values: np.ndarray, base_value: float, source: str) -> RandomOrder:
    """The pruning curves of random orders, [order][fraction]."""
    relative = relative_change(values, base_value)
    return RandomOrder(orders=len(values), source=source, values=_numbers(values), relative=_numbers(relative),
                       mean=_numbers(values.mean(0)), std=_numbers(values.std(0)),
                       relative_mean=_numbers(relative.mean(0)))


def head_pairs(ctx: Context) -> HeadPairs:
    """Two heads masked together for every pair among the chosen heads, and each pair's interaction
    (`reportgen.ablation.head_pairs`). The single-head masks come first, through the runner like the pairs:
    when single_heads ran they are read back from the cache, else computed here."""
    selection = ctx.settings.head_pairs
    top_k = None if selection.all else selection.top_k
    count = ctx.layers * ctx.heads if top_k is None else min(top_k, ctx.layers * ctx.heads)
    total = ctx.layers * ctx.heads + count * (count - 1) // 2
    singles = ctx.outputs("head_pairs", _single_head_masks(ctx), total=total)
    heads = chosen_heads(_metric(ctx, singles) - ctx.base_value, top_k)
    pairs = pair_positions(len(heads))
    pair_outputs = ctx.outputs("head_pairs", pair_masks(heads, pairs, ctx.shape), done=len(singles), total=total)
    gathered = {"heads": heads, "pairs": pairs, "base": ctx.base_outputs, "singles": singles[heads],
                "pair_outputs": pair_outputs.reshape(len(pairs), *singles.shape[1:]),
                "selection": selection.model_dump(mode="json")}
    return ctx.remembered("head_pairs", gathered, lambda: head_pairs_record(
        ctx.task, ctx.settings, ctx.shape, ctx.seed, ctx.undefined, gathered), HeadPairs)


# -- running them -----------------------------------------------------------------------------------------
EXPERIMENT_RUNS: dict[str, Callable[[Context], Record]] = {
    "baseline": baseline, "single_heads": single_heads, "whole_layers": whole_layers,
    "random_fraction": random_fraction, "layer_halves": layer_halves, "importance": importance,
    "head_pairs": head_pairs}
# Called after each experiment with the record so far (the experiments not run yet null), the experiment's
# name and its cost: the build writes a site from it while the rest run.
Finished = Callable[[Ablation, str, ExperimentCost], None]


def switched_on(settings: AblationSettings) -> list[str]:
    """The experiments a build runs, in the order it runs them."""
    return [name for name in (*EXPERIMENTS, *OPTIONAL_EXPERIMENTS) if getattr(settings.experiments, name)]


def planned_masks(settings: AblationSettings, layers: int, heads: int) -> dict[str, int]:
    """How many masks (and gradient steps) each switched-on experiment asks the runner for, counted from the
    settings as the experiments draw them; some come back from the memo (the unmasked model, a random order
    shared with random_fraction), so an estimate of the time left from it errs on the long side."""
    fractions, seeds = len(set(settings.fractions)), len(settings.seeds)
    top = layers * heads if settings.head_pairs.all else min(settings.head_pairs.top_k, layers * heads)
    importance_fractions = len(set(settings.fractions) | {0.0})
    counts = {"baseline": 1, "single_heads": layers * heads, "whole_layers": layers,
              "random_fraction": fractions * seeds, "layer_halves": 2 * fractions * seeds,
              "importance": (importance_fractions - 1 if settings.importance.recompute else 1)
              + importance_fractions * (1 + settings.importance.random_orders),
              "head_pairs": layers * heads + top * (top - 1) // 2}
    return {name: counts[name] for name in switched_on(settings)}


def ablate(task: Task, settings: AblationSettings, cache: ResultCache, progress: Progress | None = None,
           workers: WorkerPool | None = None, finished: Finished | None = None) -> Ablation:
    """Run the enabled experiments on a loaded task through `cache` (whose counts then say how many
    masks were computed and how many came from the cache); with `workers`, the masks the cache lacks
    are evaluated on Ray actors (`reportgen.ablation.ray_runner`), everything else here as without.
    After each experiment, `finished` (if given) gets the record so far, the experiment and its cost."""
    with Engine(task, settings.method, batch_tokens=_token_budget(task, settings)) as engine:
        runner = workers.runner(engine, cache, progress) if workers is not None else Runner(engine, cache, progress)
        started, before = time.perf_counter(), {}  # the first experiment's cost includes the unmasked pass's
        ctx = make_context(task, runner, settings)
        record = Ablation(task=task_record(ctx), layers=ctx.layers, heads=ctx.heads,
                          groups=list(ctx.groups) if ctx.groups else None, experiments=switched_on(settings))
        for at, name in enumerate(record.experiments):
            if at:
                started, before = time.perf_counter(), dict(runner.counted)
            setattr(record, name, EXPERIMENT_RUNS[name](ctx))
            masks, computed = (sum(counts[part] for counts in runner.counted.values())
                               - sum(counts[part] for counts in before.values()) for part in (0, 1))
            if finished is not None:
                finished(record.model_copy(), name,
                         ExperimentCost(masks=masks, computed=computed, seconds=time.perf_counter() - started))
        return record


def _token_budget(task: Task, settings: AblationSettings) -> int:
    """Padded tokens per pass: `batch_tokens` on a CPU; on a GPU what its free memory holds (at least that)."""
    if getattr(task.device, "type", str(task.device)) != "cuda":
        return settings.batch_tokens
    from reportgen.ablation.ray_runner import token_budget

    return token_budget(task, settings)


def run_ablations(model_dir: Path, settings: AblationSettings, *, device: str, cache_dir: Path, fingerprint: str,
                  progress: Progress | None = None, cluster: RayCluster | None = None,
                  finished: Finished | None = None) -> Ablation:
    """Run the enabled experiments on the model in `model_dir` (see the module docstring); every
    finished mask is cached under `cache_dir`, keyed by the model's `fingerprint`, and so is the
    whole record (`record_key`): a rebuild with nothing changed reads it back and loads no model.
    The warnings about the task and its data are stored with it and said again when it is read.
    With a `cluster` (`reportgen.ablation.ray_runner.connected`) the masks are evaluated on its actors.
    `finished` hears of each experiment as it ends (`ablate`); from a stored record, of each at once, with
    the masks it took then and none computed now."""
    store = Cache(Path(cache_dir))
    key = _whole_record_key(model_dir, settings, fingerprint)
    folder = f"ablation/{fingerprint}"
    stored = store.get_json(folder, key) if key else None
    record = _stored_record(stored, settings)
    if record is not None:
        masks = stored.get("masks") if isinstance(stored.get("masks"), dict) else {}  # none in older records
        for name in record.experiments if finished is not None else ():
            finished(record, name, ExperimentCost(masks=int(masks.get(name, 0)), computed=0, seconds=0.0))
        return record
    caught: list[warnings.WarningMessage] = []
    costs: dict[str, int] = {}

    def counted(partial: Ablation, name: str, cost: ExperimentCost) -> None:
        costs[name] = cost.masks
        if finished is not None:
            finished(partial, name, cost)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            task = load_ablation_task(model_dir, settings, device=device)
            cache = ResultCache(Path(cache_dir), fingerprint, task.data_hash(), settings.method)
            pool = cluster.pool(model_dir, settings, device, fingerprint, task.data_hash()) if cluster else None
            with pool if pool is not None else nullcontext():
                result = ablate(task, settings, cache, progress, pool, counted)
    finally:  # said as they were, whether or not the run finished
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno,
                                   source=warning.source)
    notes = [str(warning.message) for warning in caught if issubclass(warning.category, UserWarning)
             and "reportgen" in warning.filename and Path(warning.filename).name in TASK_WARNINGS]
    if key:  # `uses`: the folder of the masks and statistics it was made from, which housekeeping keeps with it
        store.put_json(folder, key, {"record": result.model_dump(mode="json"), "warnings": notes, "masks": costs,
                                     "uses": cache.directory.relative_to(store.root).as_posix()})
    return result


def has_stored_record(model_dir: Path, settings: AblationSettings, cache_dir: Path, fingerprint: str) -> bool:
    """Whether `run_ablations` would read the whole record back (and so run no experiment), said without
    reading it as a build does (its warnings are said once, when it is read)."""
    key = _whole_record_key(model_dir, settings, fingerprint)
    stored = Cache(Path(cache_dir)).get_json(f"ablation/{fingerprint}", key) if key else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _stored_record(stored, settings) is not None


def _whole_record_key(model_dir: Path, settings: AblationSettings, fingerprint: str) -> str | None:
    """The whole record's cache key, or None when the data file cannot be read (loading the task says why)."""
    data_sha256 = _data_sha256(settings)
    return (f"record-{record_key(settings, fingerprint, data_sha256, _encoder_decoder(model_dir))}" if data_sha256
            else None)


def record_key(settings: AblationSettings, fingerprint: str, data_sha256: str, encoder_decoder: bool = False) -> str:
    """The key of a whole ablation record: everything it depends on. The model's files (`fingerprint`),
    the data file's content, every setting but where the data file is (a moved project keeps its
    record), the statistics' and the masks' code versions. The device is left out, as it is from the
    mask cache: it changes outputs only at float rounding; so is where the masks ran (`ray`), so that
    a Ray build and a local one share the cache both ways. An encoder-decoder's record (its groups, its
    layer halves within each group) has a key of its own, which no record without them was stored under;
    every other model's key is as it was."""
    fields = settings.model_dump(mode="json")
    fields.pop("data")
    fields.pop("ray", None)
    if fields.get("precision") == "float32":  # the default: the key records had before the setting existed
        fields.pop("precision")
    grouped = ("groups-1",) if encoder_decoder else ()
    return key_of("ablation-record", STATS_VERSION, CODE_VERSION, fingerprint, data_sha256, fields, *grouped)


def _encoder_decoder(model_dir: Path) -> bool:
    """Whether config.json says the model is a supported encoder-decoder (read without loading it); False
    where it cannot be read (loading the task then says why)."""
    from reportgen.model.loading import is_encoder_decoder

    try:
        return is_encoder_decoder(Path(model_dir))
    except (ModelError, OSError):
        return False


def _data_sha256(settings: AblationSettings) -> str | None:
    """sha256 of the task's data file; None when it cannot be read (loading the task then says why)."""
    path = BUILTIN_DATA if settings.data == "builtin" else Path(settings.data)
    digest = hashlib.sha256()
    try:
        with open_data_file(path, "data file") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except (DataError, OSError):
        return None
    return digest.hexdigest()


def _stored_record(stored: Any, settings: AblationSettings) -> Ablation | None:
    """A stored whole record as this build shows it (its data file where the settings say), its
    warnings said again; None when there is none, or it is of another layout."""
    if not isinstance(stored, dict) or not isinstance(stored.get("warnings"), list):
        return None
    try:
        record = Ablation.model_validate(stored.get("record"))
    except ValidationError:
        return None
    record.task.data = settings.data
    for note in stored["warnings"]:
        warnings.warn(str(note), UserWarning, stacklevel=1)
    return record
