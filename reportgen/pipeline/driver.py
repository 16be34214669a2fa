"""`reportgen build`, in order: config -> model run -> analyses -> report (plain data) -> site.

Each stage hands plain data to the next (reportgen.pipeline's modules, one per stage); only the model and
analyses stages see torch, and only the site stage writes to the output directory (atomically, at the very end).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.cache import usage
from reportgen.cache.store import Cache, claim
from reportgen.config import Config
from reportgen.errors import writing
from reportgen.model import attention_capture, loading
from reportgen.pipeline.analyses import ablation_watch, run_ablation, run_comparison, run_patching, run_patterns
from reportgen.pipeline.assemble import data_files, describe_examples, example_views, make_manifest, make_report
from reportgen.pipeline.model_stage import add_example, live_model, patching_prompt, run_model
from reportgen.progress import Callback, silent
from reportgen.report import Ablation, Comparison, ExperimentCost, Patching, Report
from reportgen.site import build_progress, output

LIVE_SECONDS = 2.0  # a partial site's live line (build-progress.js) is rewritten at most this often


@dataclass
class Built:
    """What `build` returns: the report, and how the model stage got its attention."""

    report: Report
    computed: int  # examples the model ran on
    cached: int  # examples whose attention came from the cache
    seconds: float


def build(config: Config, out: Path | None = None, reproducible: bool = False,
          progress: Callback = silent, written: Callable[[Path], None] | None = None) -> Built:
    """Run the whole pipeline and write the site: when the ablation's experiments take a while, first as soon as
    that is seen and then as they finish (reportgen.ablation.watch); the finished site last. `written(path)` is
    called after each site is swapped in (`serve --watch` reloads the open pages)."""
    target = output.check(Path(out) if out is not None else config.output, config.base_dir, protected_paths(config))
    # The config's trust_remote_code / allow_pickle govern every model load of the build.
    # cache_usage records which cache entries this build used, for `reportgen cache prune`.
    # With ablation.ray the Ray cluster is joined (or started) first: one that cannot be reached fails before any work.
    ray = config.ablation.ray if config.ablation.enabled or config.patching.enabled else None
    claim(config.cache_dir)  # a folder of reportgen's own: never the home folder or the project's
    with (output.exclusive(target), loading.file_policy(config.trust_remote_code, config.allow_pickle, decoders=True,
                                                                 encoder_decoders=True),
          usage.recording(config), _ray_cluster(ray), output.standing_in(target),
          attention_capture.spooling_to(Path(config.cache_dir) / "runs")):
        return _build(config, target, reproducible, progress, written)


def _ray_cluster(address: str | None) -> AbstractContextManager[Any]:
    """The Ray cluster of the build (ray_runner.connected), or nothing: without an address neither Ray nor the
    ablation engine (torch) is imported, so a mistake found before the model loads (a missing model path, a bad data
    file) is said in well under a second, before torch is."""
    if address is None:
        return nullcontext()
    from reportgen.ablation import ray_runner

    return ray_runner.connected(address)


def protected_paths(config: Config) -> list[tuple[str, Path]]:
    """The user's own files that an output may never be, nor contain (see output.check): one pair per
    path the config names, so two files of the same name (a corpus file in the output and another
    elsewhere) are both protected."""
    paths = [("the current directory", Path.cwd())]
    if config.config_file is not None:
        paths.append(("the config file", config.config_file))
    paths.append(("the cache directory (config field 'cache_dir')", config.cache_dir))
    models = [("the model directory", config.model)]
    if config.compare is not None:
        models.append(("the comparison model directory", config.compare.model))
    paths += [(what, Path(spec)) for what, spec in models if Path(spec).is_absolute()]
    paths += [(f"the corpus file {item.path.name}", item.path) for item in config.patterns.corpus]
    if config.ablation.enabled and config.ablation.data != "builtin":
        paths.append((f"the data file {Path(config.ablation.data).name}", Path(config.ablation.data)))
    if config.patching.enabled and config.patching.data != "builtin":
        paths.append((f"the prompt pairs {Path(config.patching.data).name}", Path(config.patching.data)))
    return paths


def _build(config: Config, out: output.Output, reproducible: bool, progress: Callback,
           written: Callable[[Path], None] | None = None) -> Built:
    timings: dict[str, float] = {}
    started = clock = time.perf_counter()

    def lap(name: str, besides: float = 0.0) -> None:
        """The stage `name` took the time since the last lap, less `besides` (partial sites written meanwhile)."""
        nonlocal clock
        now = time.perf_counter()
        timings[name] = now - clock - besides
        clock = now

    Cache(config.cache_dir).sweep()  # temp files of killed builds (never anything else)
    if config.ablation.enabled:  # a mistake in the data file before any model work, not after a first site
        from reportgen.ablation.task_checks import check_data

        check_data(config.ablation)
    prompt = patching_prompt(config)  # the pairs read (a mistake in them said) before any model work
    stage = run_model(config, progress)
    lap("model")
    atlas = run_patterns(config, stage, progress)
    lap("patterns")
    prompt_example = add_example(config, stage, prompt) if prompt is not None else None
    live = live_model(config, stage)
    stage.load.release()  # the model is read no more: not beside the views' encoding
    drawn = example_views(stage.runs, atlas.main)
    examples = describe_examples(config, stage)
    stage.let_go()
    watch = ablation_watch(config, stage, started)

    patching: list[Patching | None] = [None]

    def write(ablation: Ablation | None, comparison: Comparison | None = None, partial: bool = False,
              ticks: Callback = progress) -> Report:
        at = time.perf_counter()
        manifest = make_manifest(config, stage, data_files(config), timings, reproducible,
                                 watch.costs if watch else None)
        report = make_report(config, stage, atlas, ablation, comparison, manifest, reproducible,
                             watch.state() if partial and watch else None, examples, patching[0])
        from reportgen.site import writer  # rendering is imported by the stage that renders, once it is reached

        with writing(f"output {out.path}", "the previous site is left as it was"):
            writer.write_site(report, drawn, out, ticks, reproducible, config.cache_dir, live)
        if written is not None:
            written(out.path)
        if watch is not None:
            watch.wrote(time.perf_counter() - at, partial)
        return report

    so_far: list[Ablation | None] = [None]  # the experiments finished so far, for a partial site
    live_at = [0.0]

    def finished(partial: Ablation, name: str, cost: ExperimentCost) -> None:
        watch.finished(name, cost)
        so_far[0] = partial
        if watch.live and name != watch.last and watch.due():
            write(partial, partial=True)

    def ticked(stage: str, done: int, total: int) -> None:  # the bars; the first partial site and its live line
        progress(stage, done, total)
        if not watch.live:
            return
        if not watch.partial_sites:  # views, statistics and findings while long experiments run (watch.first_site_due)
            if watch.first_site_due():
                write(so_far[0], partial=True)
                live_at[0] = time.perf_counter()
        elif time.perf_counter() - live_at[0] >= LIVE_SECONDS:
            live_at[0] = time.perf_counter()
            build_progress.write_progress(out.path, watch.state())

    clock = time.perf_counter()  # the views are the site's work, which no stage's time holds
    try:
        ablation = run_ablation(config, stage, ticked if watch else progress, watch, finished if watch else None)
        so_far[0] = ablation
        lap("ablation", watch.writing_in_ablation if watch else 0.0)
        patching[0] = run_patching(config, stage, prompt_example, progress)
        if config.patching.enabled:
            lap("patching")
        comparison = None
        if config.compare is not None:
            if watch is not None and watch.partial_sites:  # the comparison runs another model: a long build goes on
                watch.stages_left = []
                write(ablation, partial=True)
                clock = time.perf_counter()
            comparison = run_comparison(config, stage, progress)
            lap("comparison")
    except KeyboardInterrupt:  # Ctrl+C: a partial site standing in says it stopped, not that it still runs
        if watch is not None and watch.partial_sites:  # no ticks: the terminal's would raise the interrupt again
            watch.interrupted = True
            write(so_far[0], partial=True, ticks=silent)
        raise
    report = write(ablation, comparison)
    return Built(report, stage.computed, stage.examples - stage.computed, round(stage.seconds, 3))
