"""The analyses stage: the pattern atlases the model's kind measures, the head-ablation experiments and the
comparison model's run through the same stages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reportgen.ablation.watch import AblationWatch
from reportgen.config import Config
from reportgen.kinds import Atlas
from reportgen.model import loading
from reportgen.model.loading import ModelInfo
from reportgen.pipeline.model_stage import ModelStage, run_model
from reportgen.progress import Callback, silent
from reportgen.report import Ablation, Comparison, ModelSummary, Patching

if TYPE_CHECKING:
    from reportgen.ablation.experiments import Finished


def run_patterns(config: Config, stage: ModelStage, progress: Callback = silent) -> Atlas:
    """The pattern statistics of the model's kind (reportgen.kinds): each atlas cached as its kind says."""
    return stage.kind.atlas(config, stage, progress)


def run_ablation(config: Config, stage: ModelStage, progress: Callback = silent,
                 watch: AblationWatch | None = None, finished: Finished | None = None) -> Ablation | None:
    """The head-ablation experiments on the configured task (each finished mask is cached); `watch` follows
    their progress and `finished` hears of each experiment as it ends (experiments.ablate)."""
    if not config.ablation.enabled:
        return None
    from reportgen.ablation import ray_runner
    from reportgen.ablation.records import run_ablations

    def ticked(name: str, done: int, total: int) -> None:
        if watch is not None:
            watch.tick(name, done, total)
        progress(f"Ablation: {name.replace('_', ' ')}", done, total)

    result = run_ablations(stage.path, config.ablation, device=loading.resolve_device(config.device),
                           cache_dir=config.cache_dir, fingerprint=stage.fingerprint, progress=ticked,
                           cluster=ray_runner.active_cluster(), finished=finished)
    result.task.data = config.shown_path(result.task.data)
    return result


def run_patching(config: Config, stage: ModelStage, example: int | None,
                 progress: Callback = silent) -> Patching | None:
    """Activation patching on the configured prompt pairs (reportgen.patching.study), its whole record cached;
    `example` is the index of the example that is the first pair's clean prompt (its head views), if any."""
    if not config.patching.enabled:
        return None
    from reportgen.cache.store import Cache
    from reportgen.patching import study

    settings = config.patching
    record = study.cached(settings, stage.kind, stage.fingerprint, config.cache_dir)
    if record is None:
        from reportgen.ablation import ray_runner

        loaded = study.load(settings, stage.kind, stage.path, loading.resolve_device(config.device),
                            ray_runner.active_cluster())
        record = study.study(loaded, settings, progress)
        Cache(config.cache_dir).put_json("patching", study.cache_key(settings, stage.kind, stage.fingerprint),
                                         record.model_dump(mode="json"))
    pairs = record.pairs.model_copy(update={"data": config.shown_path(settings.data)})
    return record.model_copy(update={"example": example, "pairs": pairs})


def ablation_watch(config: Config, stage: ModelStage, started: float) -> AblationWatch | None:
    """A watch over the ablation when it will run experiments (not when its whole record is cached, nor when
    it is off): the build then writes partial sites while they run, when they take a while (its first_site_due)."""
    if not config.ablation.enabled:
        return None
    from reportgen.ablation.experiments import planned_masks
    from reportgen.ablation.records import has_stored_record

    cached = has_stored_record(stage.path, config.ablation, config.cache_dir, stage.fingerprint)
    return AblationWatch(planned_masks(config.ablation, stage.info.layers, stage.info.heads),
                         ["comparison"] if config.compare is not None else [], started, live=not cached)


def run_comparison(config: Config, first: ModelStage, progress: Callback = silent) -> Comparison:
    """The second model through the same stages, for side-by-side pages and differences (an encoder's: the
    other kinds refuse a comparison before any work)."""
    def prefixed(stage: str, done: int, total: int) -> None:
        progress(f"Compare: {stage}", done, total)

    stage = run_model(config, prefixed, config.compare.model)
    same_shape = (stage.info.layers, stage.info.heads) == (first.info.layers, first.info.heads)
    summary = model_summary(stage.info)
    if config.compare.name:
        summary.name = config.compare.name
    return Comparison(model=summary, same_shape=same_shape, statistics=run_patterns(config, stage, prefixed).main,
                      ablation=run_ablation(config, stage, prefixed), model_files=stage.file_hashes)


def model_summary(info: ModelInfo) -> ModelSummary:
    """The model as the report names it: a local path says nothing to a reader and differs between machines."""
    fields = info.to_dict()
    fields.pop("path")
    return ModelSummary(**fields)
