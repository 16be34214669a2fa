"""The model stage: every example's attention, from the cache when it has it, the model loaded only if needed.

The kind of model (reportgen.kinds) is decided here, once, from config.json: it refuses what it cannot take
before any work, chooses the examples it reads and runs each one.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from reportgen.cache.store import Cache, key_of
from reportgen.config import Config, precision_problem
from reportgen.errors import ConfigError, DataError
from reportgen.kinds import ModelKind, kind_of
from reportgen.model import loading
from reportgen.model.loading import ModelInfo
from reportgen.progress import Callback, silent
from reportgen.runs import ExampleRun, LiveModel, StoredAttention
from reportgen.site import views

RUN_VERSION = 3  # part of a cached run's key: bump when a run keeps more (2: value norms for contributions; 3: the
# query/key vectors within views.query_key_mb, else their size)
LIVE_VERSION = 3  # part of the in-browser model's cache key: bump when its export changes (views.live)


class LazyModel:
    """Loads (model, tokenizer) on first use only: a warm rebuild never loads the model."""

    def __init__(self, path: Path, device: str, progress: Callback):
        self.path, self.device, self.progress = path, device, progress
        self._loaded = None

    def release(self) -> None:
        """Let the loaded model go (a later call loads it again)."""
        self._loaded = None

    def __call__(self):
        if self._loaded is None:
            self.progress("Loading model", 0, 1)
            self._loaded = loading.load(self.path, self.device)
            self.progress("Loading model", 1, 1)
        return self._loaded


@dataclass
class ModelStage:
    info: ModelInfo
    runs: list[ExampleRun]  # an encoder-decoder's each hold the whole (source, target) run, its fields the encoder's
    computed: int  # examples the model actually ran on (0 on a warm rebuild)
    seconds: float
    path: Path  # the model directory
    fingerprint: str
    file_hashes: dict[str, str]
    load: LazyModel
    max_length: int  # the config's, or less when the model takes fewer tokens
    kind: ModelKind  # encoder, decoder or encoder-decoder: what the later stages ask instead of branching
    warnings: list[str] = field(default_factory=list)
    groups: list[str] | None = None  # the group of each flat attention layer, for a kind whose heads have groups
    examples: int = 0  # how many examples ran (the runs are let go once drawn: `let_go`)

    def __post_init__(self) -> None:
        self.examples = len(self.runs)
        self.groups = self.kind.groups(self.runs[0]) if self.runs else None

    def let_go(self) -> None:
        """The runs' attention is not read past the views and the examples' descriptions, nor the model past the
        live export: let them go, so that the site of a long example is written in the memory its data takes,
        not beside the model and its attention as well."""
        self.runs = []
        self.load.release()


def run_key(fingerprint: str, spec, max_length: int) -> str:
    """The cache key of one example's run: the model's files, the text (and an encoder-decoder's target) and
    the truncation."""
    target = () if spec.target is None else (spec.target,)
    return key_of("run", RUN_VERSION, fingerprint, spec.text, spec.pair, max_length, *target)


def run_model(config: Config, progress: Callback = silent, model_spec: str | None = None) -> ModelStage:
    """Attention for every example, from the cache when it has it; the model is loaded only if needed.

    `model_spec` defaults to the config's model; the comparison model passes its own.
    """
    start = time.perf_counter()
    if not config.examples:
        raise DataError(f"{config.source}: field 'examples': the list is empty; give at least one example")
    name, path = loading.resolve(model_spec or config.model)
    kind = kind_of(path)
    check_before_work(config, path, model_spec)
    kind.check_settings(config, compared=model_spec is not None)
    specs, notes = kind.examples(config.examples, config)
    # Never ask the model for more tokens than its position embeddings hold.
    max_length, length_note = loading.clamp_max_length(path, config.max_length)
    file_hashes = loading.file_hashes(path)
    fingerprint = loading.fingerprint(file_hashes)
    cache = Cache(config.cache_dir)
    keys = [run_key(fingerprint, s, max_length) for s in specs]
    budget = round(config.views.query_key_mb * 1e6)
    runs = [within_qk_budget(cache.get_run(k, s), budget) for k, s in zip(keys, specs, strict=True)]
    info = cache.get_json("info", key_of("info", fingerprint))
    missing = [i for i, r in enumerate(runs) if r is None]
    load = LazyModel(path, config.device, progress)
    if missing or info is None:
        net, tokenizer = load()
        info = loading.describe(name, path, net, fingerprint).to_dict()
        # Cached by the files' fingerprint, so only what the files determine: the name and the path
        # come from this build's config (a renamed model directory shows its new name).
        cache.put_json("info", key_of("info", fingerprint),
                       {k: v for k, v in info.items() if k not in ("name", "path")})
        kind.check_inputs(tokenizer, [specs[i] for i in missing], config.source)
        for done, i in enumerate(missing, 1):
            runs[i] = within_qk_budget(kind.run(net, tokenizer, specs[i], max_length), budget, fresh=True)
            cache.put_run(keys[i], runs[i])
            runs[i] = _from_entry(cache, keys[i], runs[i])
            progress("Running examples", done, len(missing))
    notes += [length_note] if length_note else []
    notes += [f"example {i + 1} was truncated to {max_length} tokens (config field 'max_length')"
              for i, r in enumerate(runs) if r.truncated]
    for note in notes:
        warnings.warn(note, stacklevel=2)
    info = {**info, "name": name, "path": str(path)}
    return ModelStage(ModelInfo(**info), runs, len(missing), time.perf_counter() - start, path,
                      fingerprint, file_hashes, load, max_length, kind, notes)


def patching_prompt(config: Config) -> dict | None:
    """The first patching pair's clean prompt as an example (reportgen.patching.study.prompt_example), or None:
    patching off, or a prompt no text reads back as. Called before the model stage: what this kind of model cannot
    patch, and a mistake in the pairs, are said with the tokenizer alone, before any model work."""
    if not config.patching.enabled:
        return None
    from reportgen.patching.study import prompt_example

    _, path = loading.resolve(config.model)
    kind = kind_of(path)
    if problem := kind.patching_refusal(config.patching.data):
        raise ConfigError(f"{config.source}: field 'patching.data': {problem}")
    return prompt_example(config.patching, kind, path)


def add_example(config: Config, stage: ModelStage, item: dict) -> int:
    """One more example after the pattern statistics (so it counts in none of them), from the cache when it has
    it: the first patching pair's clean prompt, whose head views the patching page links to. Its 0-based index."""
    from reportgen.config import ExampleSpec

    spec = ExampleSpec(**item)
    cache = Cache(config.cache_dir)
    key = run_key(stage.fingerprint, spec, stage.max_length)
    budget = round(config.views.query_key_mb * 1e6)
    run = within_qk_budget(cache.get_run(key, spec), budget)
    if run is None:
        net, tokenizer = stage.load()
        run = within_qk_budget(stage.kind.run(net, tokenizer, spec, stage.max_length), budget, fresh=True)
        cache.put_run(key, run)
        run = _from_entry(cache, key, run)
    stage.runs.append(run)
    stage.examples = len(stage.runs)
    return len(stage.runs) - 1


def within_qk_budget(run: ExampleRun | None, budget: int, fresh: bool = False) -> ExampleRun | None:
    """The run without its query/key vectors where its query/key page would add more than `budget` bytes to the
    site (views.without_qk_over; config views.query_key_mb). A cached run (not `fresh`) that went without them but
    would fit now is None: run again, for its vectors."""
    if run is None:
        return None
    if not fresh and not views.has_qk(run) and 0 < int(run.extras.get("qk_bytes", 0)) <= budget:
        return None
    return views.without_qk_over(run, budget)


def _from_entry(cache: Cache, key: str, run: ExampleRun) -> ExampleRun:
    """A run whose attention went to a temp file (reportgen.model.attention_capture: a long input) read from its
    cache entry instead, the temp file closed and freed: a build then keeps one copy of it on disk, none in memory."""
    if not isinstance(run.attention, StoredAttention):
        return run
    stored = cache.get_run(key, run.spec)
    if stored is None or not isinstance(stored.attention, StoredAttention):
        return run
    run.attention.close()
    return stored


def check_before_work(config: Config, path: Path, model_spec: str | None) -> None:
    """What the config asks of this model that it cannot do, from its files alone: the ablation's masking,
    task and precision, and the live page's model type (the reader's browser runs only some)."""
    if config.ablation.enabled:
        from reportgen.ablation.task_checks import check_task

        loading.check_masking(path, config.ablation.method)
        check_task(config.ablation.task, path)
        if config.ablation.precision == "float16":  # CUDA only: "auto" resolved here, before any work
            auto = loading.resolve_device("auto") if config.device == "auto" else None
            if problem := precision_problem(config.ablation.precision, config.device, auto):
                raise ConfigError(f"{config.source}: field 'ablation.precision': {problem}")
    if config.views.live and model_spec is None:
        from reportgen.live.weights import check_model_type

        check_model_type(loading.model_type(path))


def live_model(config: Config, stage: ModelStage) -> LiveModel | None:
    """The model and its tokenizer as the "Your sentence" page runs them in a reader's browser (config
    `views.live`), exported once per model files and cached: a warm rebuild loads no model for them."""
    if not config.views.live:
        return None
    from reportgen.live.tokenizer import tokenizer_spec
    from reportgen.live.weights import export_format

    cache = Cache(config.cache_dir)
    # max_length too: the compact export is calibrated on texts cut there (reportgen.live.weights.export_format)
    key = key_of("live", LIVE_VERSION, stage.fingerprint, config.views.live_weights, stage.max_length)
    tables = cache.get_json("live", key)
    weights = cache.get_blob("live", key) if tables is not None else None
    if tables is None or weights is None:
        net, tokenizer = stage.load()
        exported = export_format(net, tokenizer, config.views.live_weights, stage.max_length)
        tables = {"model": exported.spec, "tokenizer": tokenizer_spec(tokenizer)}
        weights = exported.data
        cache.put_blob("live", key, weights)
        cache.put_json("live", key, tables)
    return LiveModel(tables["model"], weights, tables["tokenizer"], stage.max_length, config.views.live_weights)
