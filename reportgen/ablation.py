"""Head-ablation experiments: which heads, layers and fractions of heads a model can lose.

Experiments (each optional), one function each, returning its record of `reportgen.report`:
- baseline: the task metric with a 95% percentile bootstrap CI over examples;
- single_heads: each head masked alone; paired permutation test over examples against
  the baseline, Holm-corrected (or Bonferroni) for the number of heads;
- random_fraction: p% of all heads masked at random, several seeds per p;
- layer_halves: p% of all heads taken only from the lower half of the layers, and only
  from the upper half (lower = the first floor(L/2) layers);
- whole_layers: every head of one layer masked, for each layer (same test as heads);
- importance: Michel, Levy and Neubig (2019) head importance, E_x |d L / d xi_h| with
  the absolute value taken per token and averaged over tokens; optional per-layer L2
  normalisation as in their code; then pruning the least important heads 10% at a time
  (optionally recomputing importance after each step) next to random pruning orders.

The masks are evaluated by `reportgen.engine` (fast, cached, resumable); the tests and
intervals are `reportgen.stats`. The experiments share one `Context`: the task, the runner,
the settings and the unmasked model's outputs, computed once.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reportgen.config import AblationSettings
from reportgen.engine import CODE_VERSION, Engine, Progress, ResultCache, Runner
from reportgen.report import (
    Ablation,
    AblationTask,
    Baseline,
    HeadTests,
    Importance,
    LayerHalves,
    LayerTests,
    Pruning,
    RandomFraction,
    RandomOrder,
    Sweep,
)
from reportgen.stats import adjust, bootstrap_ci, paired_permutation_p, permutations_for, relative_change
from reportgen.tasks import Task, load_task

__all__ = ["CODE_VERSION", "EXPERIMENTS", "Context", "ablate", "load_ablation_task", "run_ablations"]

EXPERIMENTS = ("baseline", "single_heads", "random_fraction", "layer_halves", "whole_layers", "importance")
METHOD_NOTES = {"zero": "zero: head output removed (Michel et al. 2019)",
                "uniform": "uniform: head attention replaced by 1/n over non-padding keys (Kovaleva et al. 2019)"}
LOSSES = {"similarity": "squared error of cosine vs grade rescaled to [0, 1]", "classification": "cross-entropy",
          "mlm": "cross-entropy over masked tokens"}


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

    def values(self, name: str, masks: list[np.ndarray], done: int = 0, total: int | None = None) -> np.ndarray:
        """The primary metric under each mask, evaluated through the runner (progress under `name`)."""
        outputs = self.runner.outputs(name, masks, done=done, total=total)
        return np.array([self.metrics(out)[self.task.primary] for out in outputs])


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
    return Context(task, runner, settings, engine.layers, engine.heads, base_outputs, base_value, undefined)


def task_record(ctx: Context) -> AblationTask:
    """What the experiments ran on, so a reader can tell which metric every number is about."""
    task, settings = ctx.task, ctx.settings
    return AblationTask(type=task.kind, data=settings.data, examples=task.n_examples, distinct_texts=len(task.units),
                        metric=task.primary, metrics=list(task.metric_names), higher_is_better=task.higher_is_better,
                        method=settings.method, method_note=METHOD_NOTES[settings.method], undefined=ctx.undefined)


# -- the experiments ------------------------------------------------------------------------------------
def baseline(ctx: Context) -> Baseline:
    """The unmasked model's metrics, each with its bootstrap CI (NaN bounds when undefined)."""
    settings, task = ctx.settings, ctx.task
    if ctx.undefined:
        ci = {name: [math.nan, math.nan] for name in task.metric_names}
    else:
        ci = bootstrap_ci(task, ctx.base_outputs, settings.bootstrap_samples, ctx.seed)
    return Baseline(metric=task.primary, value=_number(ctx.base_value),
                    metrics={name: _number(value) for name, value in ctx.metrics(ctx.base_outputs).items()},
                    ci={name: _numbers(bounds) for name, bounds in ci.items()}, confidence=0.95,
                    bootstrap_samples=settings.bootstrap_samples, ci_method="percentile bootstrap over examples")


def _tested(ctx: Context, name: str, masks: list[np.ndarray], shape: tuple[int, ...]) -> dict[str, Any]:
    """Each mask's metric, change and corrected p-value against the unmasked model, as the fields
    shared by `HeadTests` and `LayerTests` (arrays reshaped to `shape`)."""
    settings = ctx.settings
    outputs = ctx.runner.outputs(name, masks)
    values = np.array([ctx.metrics(out)[ctx.task.primary] for out in outputs])
    if ctx.undefined:  # no change can be measured, so none is tested and none is significant
        p_values = np.full(len(masks), np.nan)
        permutations = 0
        test = f"no test: {ctx.task.primary} is undefined on the task data ({ctx.undefined})"
    else:
        permutations = permutations_for(settings.permutations, len(masks), settings.alpha)
        p_values = np.array([paired_permutation_p(ctx.task, ctx.base_outputs, out, permutations, ctx.seed)
                             for out in outputs])
        test = f"paired permutation test over examples ({permutations} permutations, two-sided)"
    p_adjusted = adjust(p_values, settings.correction)
    significant = np.isfinite(p_adjusted) & (p_adjusted < settings.alpha)
    return {"value": _numbers(values.reshape(shape)), "delta": _numbers((values - ctx.base_value).reshape(shape)),
            "relative": _numbers(relative_change(values, ctx.base_value).reshape(shape)),
            "p_value": _numbers(p_values.reshape(shape)), "p_adjusted": _numbers(p_adjusted.reshape(shape)),
            "significant": significant.reshape(shape).tolist(), "test": test, "correction": settings.correction,
            "alpha": settings.alpha, "permutations": permutations, "baseline": _number(ctx.base_value)}


def single_heads(ctx: Context) -> HeadTests:
    """Each head masked alone, tested against the unmasked model."""
    masks = []
    for layer in range(ctx.layers):
        for head in range(ctx.heads):
            mask = ctx.ones()
            mask[layer, head] = 0
            masks.append(mask)
    return HeadTests(**_tested(ctx, "single_heads", masks, ctx.shape))


def whole_layers(ctx: Context) -> LayerTests:
    """Every head of one layer masked, for each layer, tested against the unmasked model."""
    masks = []
    for layer in range(ctx.layers):
        mask = ctx.ones()
        mask[layer] = 0
        masks.append(mask)
    return LayerTests(layers=list(range(ctx.layers)), **_tested(ctx, "whole_layers", masks, (ctx.layers,)))


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


def _sweeps(ctx: Context, name: str, pools: dict[str, np.ndarray], fractions: list[float],
            first_stream: int) -> dict[str, Sweep]:
    """For each pool of heads, the metric with a random `fraction` of all heads masked from it, per
    seed. Pool i draws its orders from random stream first_stream + i."""
    seeds = ctx.settings.seeds
    orders = {(group, seed): _random_order(seed, pool, first_stream + index)
              for index, (group, pool) in enumerate(pools.items()) for seed in seeds}
    masks = [_prefix_mask(orders[group, seed], _masked_count(ctx, fraction), ctx.shape)
             for group in pools for fraction in fractions for seed in seeds]
    values = ctx.values(name, masks).reshape(len(pools), len(fractions), len(seeds))
    sweeps = {}
    for group, group_values in zip(pools, values, strict=True):
        relative = relative_change(group_values, ctx.base_value)
        sweeps[group] = Sweep(
            values=_numbers(group_values), relative=_numbers(relative), mean=_numbers(group_values.mean(1)),
            std=_numbers(group_values.std(1)), min=_numbers(group_values.min(1)), max=_numbers(group_values.max(1)),
            relative_mean=_numbers(relative.mean(1)), relative_std=_numbers(relative.std(1)))
    return sweeps


def random_fraction(ctx: Context) -> RandomFraction:
    """p% of all heads masked at random; stream 0, the random pruning order's."""
    fractions = sorted(set(ctx.settings.fractions))
    swept = _sweeps(ctx, "random_fraction", {"all": np.arange(ctx.layers * ctx.heads)}, fractions, 0)["all"]
    return RandomFraction(fractions=fractions, n_masked=[_masked_count(ctx, fraction) for fraction in fractions],
                          seeds=ctx.settings.seeds, baseline=_number(ctx.base_value), **swept.model_dump())


def layer_halves(ctx: Context) -> LayerHalves:
    """p% of all heads drawn only from the lower half of the layers, and only from the upper half."""
    half = ctx.layers // 2
    all_heads = np.arange(ctx.layers * ctx.heads)
    pools = {"lower": all_heads[: half * ctx.heads], "upper": all_heads[half * ctx.heads:]}
    limit = min(len(pool) for pool in pools.values())
    fractions = sorted(fraction for fraction in set(ctx.settings.fractions) if _masked_count(ctx, fraction) <= limit)
    sweeps = _sweeps(ctx, "layer_halves", pools, fractions, 1)
    return LayerHalves(
        fractions=fractions, n_masked=[_masked_count(ctx, fraction) for fraction in fractions],
        seeds=ctx.settings.seeds, lower_layers=list(range(half)), upper_layers=list(range(half, ctx.layers)),
        baseline=_number(ctx.base_value),
        note="p is a fraction of all heads, drawn only from one half; fractions above what a half holds are left out",
        lower=sweeps["lower"], upper=sweeps["upper"])


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


def importance(ctx: Context) -> Importance:
    """Michel et al. head importance, and pruning by it next to random pruning orders."""
    settings = ctx.settings
    fractions = sorted(set(settings.fractions) | {0.0})
    targets = [_masked_count(ctx, fraction) for fraction in fractions]
    importance_steps = len(fractions) - 1 if settings.importance.recompute else 1
    total = importance_steps + len(fractions) * (1 + len(settings.seeds))
    first, order, prune_masks = _pruning_masks(ctx, targets, total)
    pruned = ctx.values("importance", prune_masks, done=importance_steps, total=total)
    random_masks = [_prefix_mask(_random_order(seed, np.arange(ctx.layers * ctx.heads), 0), count, ctx.shape)
                    for seed in settings.seeds for count in targets]  # the random_fraction experiment's orders
    random_values = ctx.values("importance", random_masks, done=importance_steps + len(prune_masks),
                               total=total).reshape(len(settings.seeds), len(fractions))
    return Importance(
        importance=_numbers(first),
        normalization="per-layer L2 (Michel et al.'s code)" if settings.importance.normalize == "layer_l2" else "none",
        variant="mean over tokens of |d loss / d gate| per token and head (Michel et al. 2019)",
        loss=LOSSES[ctx.task.kind], recompute=settings.importance.recompute,
        pruning=Pruning(fractions=fractions, n_pruned=targets, value=_numbers(pruned),
                        relative=_numbers(relative_change(pruned, ctx.base_value)), order=order,
                        baseline=_number(ctx.base_value)),
        random_order=_random_order_curves(settings.seeds, random_values, ctx.base_value))


def _random_order_curves(seeds: list[int], values: np.ndarray, base_value: float) -> RandomOrder:
    """The pruning curves of random orders, [seed][fraction]."""
    relative = relative_change(values, base_value)
    return RandomOrder(seeds=seeds, values=_numbers(values), relative=_numbers(relative),
                       mean=_numbers(values.mean(0)), std=_numbers(values.std(0)),
                       relative_mean=_numbers(relative.mean(0)))


# -- running them -----------------------------------------------------------------------------------------
def load_ablation_task(model_dir: Path, settings: AblationSettings, *, device: str) -> Task:
    """The task the settings describe, on the model in `model_dir`."""
    return load_task(
        settings.task, Path(model_dir), settings.data, device=device, fmt=settings.format, header=settings.header,
        columns=settings.columns, limit=settings.limit, max_length=settings.max_length,
        mlm_probability=settings.mlm_probability, mlm_seed=settings.mlm_seed,
    )


def ablate(task: Task, settings: AblationSettings, cache: ResultCache, progress: Progress | None = None) -> Ablation:
    """Run the enabled experiments on a loaded task through `cache` (whose counts then say how many
    masks were computed and how many came from the cache)."""
    switched_on = settings.experiments
    with Engine(task, settings.method, batch_tokens=settings.batch_tokens) as engine:
        ctx = make_context(task, Runner(engine, cache, progress), settings)
        return Ablation(
            task=task_record(ctx), layers=ctx.layers, heads=ctx.heads,
            experiments=[name for name in EXPERIMENTS if getattr(switched_on, name)],
            baseline=baseline(ctx) if switched_on.baseline else None,
            single_heads=single_heads(ctx) if switched_on.single_heads else None,
            whole_layers=whole_layers(ctx) if switched_on.whole_layers else None,
            random_fraction=random_fraction(ctx) if switched_on.random_fraction else None,
            layer_halves=layer_halves(ctx) if switched_on.layer_halves else None,
            importance=importance(ctx) if switched_on.importance else None,
        )


def run_ablations(model_dir: Path, settings: AblationSettings, *, device: str, cache_dir: Path, fingerprint: str,
                  progress: Progress | None = None) -> Ablation:
    """Run the enabled experiments on the model in `model_dir` (see the module docstring); every
    finished mask is cached under `cache_dir`, keyed by the model's `fingerprint`."""
    task = load_ablation_task(model_dir, settings, device=device)
    cache = ResultCache(Path(cache_dir), fingerprint, task.data_hash(), settings.method)
    return ablate(task, settings, cache, progress)
