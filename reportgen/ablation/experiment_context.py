"""What every head-ablation experiment shares: the `Context` (the task, how masks are evaluated, the
settings and the unmasked model's outputs, computed once by `make_context`), the record of what the
experiments ran on (`task_record`), and the cache of each experiment's record.

Kept apart from the experiments themselves (`reportgen.ablation.experiments`, which each take a
`Context`) and from the statistics that turn their outputs into records
(`reportgen.ablation.experiment_stats`), which both read it. Statistics are cached so that a rebuild
spends its time on what changed: each experiment first gathers what its statistics read (the per-mask
outputs, from the mask cache) and its record is stored under a key of those arrays, the settings it
reads (EXPERIMENT_SETTINGS) and STATS_VERSION (`Context.remembered`, `Context.stats_key`).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from pydantic import ValidationError

from reportgen.ablation.engine import ResultCache, Runner
from reportgen.ablation.tasks import Task
from reportgen.config import AblationSettings
from reportgen.progress import reporting_draws
from reportgen.report import AblationTask, Record

__all__ = ["STATS_VERSION", "Context"]

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
RecordType = TypeVar("RecordType", bound=Record)
METHOD_NOTES = {"zero": "zero: head output removed (Michel et al. 2019)",
                "uniform": "uniform: head attention replaced by 1/n over non-padding keys (Kovaleva et al. 2019)",
                "mean": "mean: head output replaced by its mean at the same position over the task's inputs "
                        "(mean ablation, Wang et al. 2022)",
                "resample": "resample: head output replaced by its output on another input of the task at the same "
                            "position, inputs paired by a fixed derangement of the first seed (resample ablation, "
                            "Chan et al. 2022)"}


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
