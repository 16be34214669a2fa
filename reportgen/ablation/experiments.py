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
intervals are `reportgen.stats`, made into the records' fields by `reportgen.ablation.experiment_stats`.
Every experiment but layer_halves treats the heads as a set of
[flat layer, head] cells and never reads the flat order as depth; the record names an encoder-decoder's
group of each flat layer (`Ablation.groups`), by which the pages and findings name its layers.
The experiments share one `Context` (`reportgen.ablation.experiment_context`): the task, the runner, the settings
and the unmasked model's outputs, computed once.

This module chooses each experiment's masks, gathers their outputs and runs the experiments a build
switched on (`ablate`). Statistics are cached too, so that a rebuild spends its time on what changed: each
experiment first gathers what its statistics read (the per-mask outputs, from the mask cache) and its record
is stored under a key of those arrays, the settings it reads (EXPERIMENT_SETTINGS) and
STATS_VERSION (`Context.remembered`); and the whole stage's record is stored under the model's
fingerprint, the data file's content and every setting (`reportgen.ablation.records.run_ablations`), so that
a rebuild with nothing changed loads neither the model nor a mask.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from reportgen.ablation.engine import Engine, Progress, ResultCache, Runner
from reportgen.ablation.experiment_context import Context, make_context, task_record
from reportgen.ablation.experiment_stats import (
    _area_rank,
    _metric,
    _non_inferiority,
    _number,
    _numbers,
    _paired_comparison,
    _random_order_curves,
    _sweep,
    _tested,
)
from reportgen.ablation.head_pairs import chosen_heads, head_pairs_record, pair_masks, pair_positions
from reportgen.ablation.tasks import Task
from reportgen.config import AblationSettings
from reportgen.report import (
    Ablation,
    Baseline,
    Calibration,
    ExperimentCost,
    HeadPairs,
    HeadTests,
    Importance,
    LayerHalves,
    LayerTests,
    Pruning,
    RandomFraction,
    Record,
)
from reportgen.stats import bootstrap_ci, relative_change

if TYPE_CHECKING:  # Ray is imported only when a build asks for it
    from reportgen.ablation.ray_runner import WorkerPool

__all__ = ["EXPERIMENTS", "OPTIONAL_EXPERIMENTS", "ablate", "planned_masks"]

EXPERIMENTS = ("baseline", "single_heads", "random_fraction", "layer_halves", "whole_layers", "importance")
OPTIONAL_EXPERIMENTS = ("head_pairs",)  # off by default, listed after EXPERIMENTS when they run
LOSSES = {"similarity": "squared error of the calibrated cosine (a * cosine + b, fitted once by least squares on the "
                        "unmasked model) vs the grade rescaled to [0, 1]", "classification": "cross-entropy",
          "mlm": "cross-entropy over masked tokens",
          "causal_lm": "next-token cross-entropy, token-weighted over all predicted tokens",
          "seq2seq": "target-token cross-entropy given the source (teacher-forced), token-weighted over all targets"}


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
    with Engine(task, settings.method, batch_tokens=_token_budget(task, settings), seed=settings.seeds[0]) as engine:
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
