"""`reportgen build`: config -> model run -> analyses -> report (plain data) -> site.

Each stage hands plain data to the next; only the model stage sees torch, and
only the site stage writes to the output directory (atomically, at the very end).
"""

from __future__ import annotations

import hashlib
import platform
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from reportgen import __version__, findings
from reportgen.ablation.watch import AblationWatch
from reportgen.cache import usage
from reportgen.cache.store import Cache, key_of
from reportgen.config import BUILTIN_DATA, Config, PatternSettings, builtin_examples, precision_problem
from reportgen.datafiles import open_data_file
from reportgen.errors import ConfigError, DataError
from reportgen.findings.claims import claim_checks
from reportgen.model import loading
from reportgen.model.loading import ModelInfo
from reportgen.model.run import run_example
from reportgen.model.seq2seq import run_source_target
from reportgen.patterns.corpus import iter_corpus
from reportgen.patterns.decoder import causal_entropy
from reportgen.patterns.per_example import patterns_and_labels
from reportgen.patterns.statistics import RESULT_VERSION as PATTERNS_VERSION
from reportgen.patterns.statistics import PatternAccumulator, clean, entropy
from reportgen.progress import Callback, silent
from reportgen.report import (
    Ablation,
    BuildProgress,
    Comparison,
    CrossStatistics,
    DecoderStatistics,
    Example,
    ExampleViews,
    ExperimentCost,
    Manifest,
    ModelSummary,
    PatternStatistics,
    Report,
)
from reportgen.runs import ExampleRun, LiveModel
from reportgen.site import build_progress, output, views

if TYPE_CHECKING:
    from reportgen.ablation.experiments import Finished

RUN_VERSION = 2  # part of a cached run's key: bump when a run keeps more (2: value norms for contributions)
LIVE_VERSION = 3  # part of the in-browser model's cache key: bump when its export changes (views.live)
LIVE_SECONDS = 2.0  # a partial site's live line (build-progress.js) is rewritten at most this often
MATRIX_MAX_TOKENS = 64  # the patterns page draws a head's attention as a matrix only for examples this short


class LazyModel:
    """Loads (model, tokenizer) on first use only: a warm rebuild never loads the model."""

    def __init__(self, path: Path, device: str, progress: Callback):
        self.path, self.device, self.progress = path, device, progress
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
    runs: list[ExampleRun]
    computed: int  # examples the model actually ran on (0 on a warm rebuild)
    seconds: float
    path: Path  # the model directory
    fingerprint: str
    file_hashes: dict[str, str]
    load: LazyModel
    max_length: int  # the config's, or less when the model takes fewer tokens
    warnings: list[str] = field(default_factory=list)
    decoder: bool = False  # causal self-attention (GPT-2, the Llama family): the decoder atlas applies
    # BART, T5, Marian: each run holds the whole (source, target) run, its fields the encoder's side
    encoder_decoder: bool = False


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
    specs = config.examples
    if not specs:
        raise DataError(f"{config.source}: field 'examples': the list is empty; give at least one example")
    name, path = loading.resolve(model_spec or config.model)
    if config.ablation.enabled:
        from reportgen.ablation.task_checks import check_task

        loading.check_masking(path, config.ablation.method)
        check_task(config.ablation.task, path)
        if config.ablation.precision == "float16":  # CUDA only: "auto" resolved here, before any work
            auto = loading.resolve_device("auto") if config.device == "auto" else None
            if problem := precision_problem(config.ablation.precision, config.device, auto):
                raise ConfigError(f"{config.source}: field 'ablation.precision': {problem}")
    if config.views.live and model_spec is None:  # the reader's browser runs the model: refused before any work
        from reportgen.live.weights import check_model_type

        check_model_type(loading.model_type(path))
    decoder, encoder_decoder = loading.is_decoder(path), loading.is_encoder_decoder(path)
    notes = []
    if decoder:
        check_decoder_settings(config, model_spec)
        specs, notes = decoder_examples(specs, config.source)
    elif encoder_decoder:
        check_decoder_settings(config, model_spec, "an encoder-decoder")
        specs, notes = seq2seq_examples(specs, config)
    else:
        check_no_targets(specs, config.source)
    # Never ask the model for more tokens than its position embeddings hold.
    max_length, length_note = loading.clamp_max_length(path, config.max_length)
    file_hashes = loading.file_hashes(path)
    fingerprint = loading.fingerprint(file_hashes)
    cache = Cache(config.cache_dir)
    keys = [run_key(fingerprint, s, max_length) for s in specs]
    runs = [cache.get_run(k, s) for k, s in zip(keys, specs, strict=True)]
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
        if decoder:
            check_pairs(tokenizer, [specs[i] for i in missing], config.source)
        for done, i in enumerate(missing, 1):
            if encoder_decoder:  # no query/key view for an encoder-decoder yet
                runs[i] = run_source_target(net, tokenizer, specs[i], max_length)
            else:
                runs[i] = run_example(net, tokenizer, specs[i], max_length, keep_qk=True)
            if runs[i].n_tokens > views.QK_MAX_TOKENS:  # the q/k page is built only for short examples
                runs[i].extras.clear()
            cache.put_run(keys[i], runs[i])
            progress("Running examples", done, len(missing))
    notes += [length_note] if length_note else []
    notes += [f"example {i + 1} was truncated to {max_length} tokens (config field 'max_length')"
              for i, r in enumerate(runs) if r.truncated]
    for note in notes:
        warnings.warn(note, stacklevel=2)
    info = {**info, "name": name, "path": str(path)}
    return ModelStage(ModelInfo(**info), runs, len(missing), time.perf_counter() - start, path,
                      fingerprint, file_hashes, load, max_length, notes, decoder, encoder_decoder)


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


def check_decoder_settings(config: Config, model_spec: str | None, kind: str = "a decoder") -> None:
    """What a decoder's or an encoder-decoder's build cannot do yet, refused before any work: a comparison
    (its pages are an encoder's), seed 004's claims (about a BERT-style encoder's heads) and, for an
    encoder-decoder, corpus statistics (a corpus line has no target for its decoder)."""
    if model_spec is not None or config.compare is not None:
        raise ConfigError(f"{config.source}: field 'compare': comparing models is for encoders; "
                          f"{kind}'s build has no comparison yet (remove 'compare')")
    if config.claims is not None:
        raise ConfigError(f"{config.source}: field 'claims': seed 004's claims are about an encoder's heads; "
                          f"remove 'claims' for {kind}")
    if kind == "an encoder-decoder" and config.patterns.corpus:
        raise ConfigError(f"{config.source}: field 'patterns.corpus': an encoder-decoder's statistics are over "
                          "its examples (each a source and a target); remove 'corpus'")


def seq2seq_examples(specs: list, config: Config) -> tuple[list, list[str]]:
    """The examples an encoder-decoder reads, each a source (`text`) and a `target`: the built-in examples,
    which have no target, are left out with a note; an example of the user's without a target, or with a
    pair, is refused."""
    builtin = builtin_examples()
    kept = [spec for spec in specs if spec not in builtin]
    for spec in kept:
        label = repr(spec.name or spec.text[:40])
        if spec.pair is not None:
            raise DataError(f"{config.source}: field 'examples': the example {label} has a 'pair'; an "
                            "encoder-decoder reads a source ('text') and a 'target', not a pair")
        if spec.target is None:
            raise DataError(f"{config.source}: field 'examples': the example {label} has no 'target'; an "
                            "encoder-decoder reads a source ('text') and a 'target' for its decoder")
    if not kept:
        raise DataError(f"{config.source}: field 'examples': an encoder-decoder reads a source and a target, and "
                        "the built-in examples have no target; give examples with 'text' and 'target'")
    dropped = len(specs) - len(kept)
    notes = [f"{dropped} built-in example{'s' * (dropped > 1)} without a target left out: an encoder-decoder "
             "reads a source and a target"] if dropped else []
    return kept, notes


def check_no_targets(specs: list, source: str) -> None:
    """A `target` is for an encoder-decoder's decoder; any other model would silently ignore it."""
    for spec in specs:
        if spec.target is not None:
            raise DataError(f"{source}: field 'examples': the example {spec.name or spec.text[:40]!r} has a "
                            "'target', which only an encoder-decoder (BART, T5, Marian) reads; remove it")


def decoder_examples(specs: list, source: str) -> tuple[list, list[str]]:
    """The examples a decoder reads: the built-in examples with a second sentence are left out (a decoder
    reads one text; a pair would need a separator most decoder tokenizers lack), with a note saying so."""
    builtin = builtin_examples()
    kept = [spec for spec in specs if spec.pair is None or spec not in builtin]
    dropped = len(specs) - len(kept)
    if not kept:
        raise DataError(f"{source}: field 'examples': a decoder reads one text per example and every example is a "
                        "built-in pair; give examples of your own")
    notes = [f"{dropped} built-in example{'s' * (dropped > 1)} with a second sentence left out: a decoder reads "
             "one text"] if dropped else []
    return kept, notes


def check_pairs(tokenizer, specs: list, source: str) -> None:
    """A pair reaches a decoder only joined as its tokenizer joins two texts, which needs a separator token."""
    if tokenizer.sep_token is not None:
        return
    for spec in specs:
        if spec.pair is not None:
            raise DataError(f"{source}: field 'examples': the example {spec.name or spec.text[:40]!r} has a "
                            "'pair', and this decoder's tokenizer has no separator token to join the two; "
                            "give one text")


def run_patterns(config: Config, stage: ModelStage, progress: Callback = silent) -> PatternStatistics:
    """Pattern statistics over the examples and the corpus files, cached as a whole."""
    settings = config.patterns
    corpus_hashes = [_file_hash(f.path, "corpus file") for f in settings.corpus]
    cache = Cache(config.cache_dir)
    key = key_of("patterns", PATTERNS_VERSION, stage.fingerprint,
                 [(r.spec.text, r.spec.pair) for r in stage.runs], corpus_hashes,
                 settings.model_dump(mode="json"), stage.max_length)
    cached = cache.get_json("patterns", key)
    if cached is None:
        cached = _pattern_statistics(config, stage, progress)
        for item in cached["settings"]["corpus"]:  # the report shows where the corpus is, not where the author is
            item["path"] = config.shown_path(item["path"])
        cache.put_json("patterns", key, cached)
    return PatternStatistics.model_validate(cached)


def _pattern_statistics(config: Config, stage: ModelStage, progress: Callback) -> dict:
    """Examples come first so that a head's strongest `example` is one with a page; corpus
    sentences run through the model one at a time and are not kept."""
    settings = config.patterns
    accumulator = PatternAccumulator(settings)
    for run in stage.runs:
        accumulator.add(run)
    if settings.corpus:
        net, tokenizer = stage.load()
        total = sum(1 for _ in iter_corpus(settings.corpus))
        for done, spec in enumerate(iter_corpus(settings.corpus), 1):
            accumulator.add(run_example(net, tokenizer, spec, stage.max_length), linkable=False)
            progress("Corpus patterns", done, total)
    return accumulator.result()


DECODER_PATTERNS_VERSION = 2  # part of the decoder atlas's cache key: bump when it measures more (2: bos_delimiter)
INDUCTION_SEED = 0  # the induction test's random tokens (reportgen.model.induction)


def run_decoder_patterns(config: Config, stage: ModelStage, progress: Callback = silent) -> DecoderStatistics:
    """The decoder atlas over the examples, the corpus and the induction test, cached as a whole (the
    induction test's model run with it)."""
    from reportgen.model.induction import INDUCTION_BATCH, INDUCTION_N

    settings = config.patterns
    corpus_hashes = [_file_hash(f.path, "corpus file") for f in settings.corpus]
    key = key_of("decoder-patterns", DECODER_PATTERNS_VERSION, stage.fingerprint,
                 [(r.spec.text, r.spec.pair) for r in stage.runs], corpus_hashes,
                 settings.model_dump(mode="json"), stage.max_length, INDUCTION_N, INDUCTION_BATCH, INDUCTION_SEED)
    cache = Cache(config.cache_dir)
    cached = cache.get_json("patterns", key)
    if cached is None:
        cached = _decoder_statistics(config, stage, progress)
        cache.put_json("patterns", key, cached)
    statistics = DecoderStatistics.model_validate(cached)
    if statistics.induction_missing:
        stage.warnings.append(statistics.induction_missing)
        warnings.warn(statistics.induction_missing, stacklevel=2)
    return statistics


def _decoder_statistics(config: Config, stage: ModelStage, progress: Callback) -> dict:
    """The examples' runs, the corpus sentences' (run one at a time, not kept) and the induction test's."""
    from reportgen.model.induction import begin_token, induction_length, run_induction
    from reportgen.patterns.decoder_atlas import decoder_atlas

    runs = list(stage.runs)
    net, tokenizer = stage.load()
    if config.patterns.corpus:
        total = sum(1 for _ in iter_corpus(config.patterns.corpus))
        for done, spec in enumerate(iter_corpus(config.patterns.corpus), 1):
            runs.append(run_example(net, tokenizer, spec, stage.max_length))
            progress("Corpus patterns", done, total)
    progress("Induction test", 0, 1)
    try:
        begin_token(tokenizer)
        test = run_induction(net, tokenizer, induction_length(stage.max_length), seed=INDUCTION_SEED)
    except ValueError as err:
        missing = f"the induction test did not run: {err}"
        result = decoder_atlas(runs, None, None, config.patterns, linkable=len(stage.runs))
        return {**result, "induction_missing": missing}
    progress("Induction test", 1, 1)
    described = {"n": test.n, "sequences": len(test.ids), "seed": test.seed, "tokens": int(test.ids.shape[1])}
    return decoder_atlas(runs, test.attention, described, config.patterns, linkable=len(stage.runs))


SEQ2SEQ_INDUCTION = ("the induction test (Olsson et al. 2022) feeds a decoder-only model repeated random tokens; an "
                     "encoder-decoder's decoder also reads a source, which the test does not define")


def run_seq2seq_decoder_patterns(config: Config, stage: ModelStage) -> DecoderStatistics:
    """The decoder atlas over an encoder-decoder's decoder self-attention on the examples' decoder inputs (the
    start token, then the target shifted right): causal heads, so each statistic keeps its uniform causal null.
    From the runs alone, so not cached; induction is not measured (SEQ2SEQ_INDUCTION)."""
    from reportgen.patterns.decoder_atlas import decoder_atlas

    runs = [decoder_side(run) for run in stage.runs]
    return DecoderStatistics.model_validate({**decoder_atlas(runs, None, None, config.patterns),
                                             "induction_missing": SEQ2SEQ_INDUCTION})


def run_cross_patterns(config: Config, stage: ModelStage) -> CrossStatistics:
    """An encoder-decoder's cross-attention heads over its examples (reportgen.patterns.cross), each beside a
    uniform head over the source; a head parks its attention on the source's special tokens above the
    delimiter threshold (config `patterns.thresholds.delimiter`, Clark et al.'s test for [SEP])."""
    from reportgen.patterns.cross import cross_atlas

    return CrossStatistics.model_validate(cross_atlas([run.seq2seq.cross_attention for run in stage.runs],
                                                      [run.special for run in stage.runs],
                                                      config.patterns.thresholds.delimiter, config.patterns.top_k))


def decoder_side(run: ExampleRun) -> ExampleRun:
    """An encoder-decoder example's decoder self-attention as a run of its own: the decoder's input tokens
    (each its own word), their causal attention and value norms."""
    pair = run.seq2seq
    special = (np.asarray(pair.target_special, dtype=bool) if pair.target_special is not None
               else np.zeros(len(pair.target_tokens), dtype=bool))
    return ExampleRun(run.spec, list(pair.target_tokens), np.where(special, -1, np.arange(len(special))),
                      np.where(special, -1, 0), special, pair.decoder_attention, pair.target_truncated,
                      value_norms=(pair.value_norms or {}).get("decoder"))


def run_ablation(config: Config, stage: ModelStage, progress: Callback = silent,
                 watch: AblationWatch | None = None, finished: Finished | None = None) -> Ablation | None:
    """The head-ablation experiments on the configured task (each finished mask is cached); `watch` follows
    their progress and `finished` hears of each experiment as it ends (experiments.ablate)."""
    if not config.ablation.enabled:
        return None
    from reportgen.ablation import ray_runner
    from reportgen.ablation.experiments import run_ablations

    def ticked(name: str, done: int, total: int) -> None:
        if watch is not None:
            watch.tick(name, done, total)
        progress(f"Ablation: {name.replace('_', ' ')}", done, total)

    result = run_ablations(stage.path, config.ablation, device=loading.resolve_device(config.device),
                           cache_dir=config.cache_dir, fingerprint=stage.fingerprint, progress=ticked,
                           cluster=ray_runner.active_cluster(), finished=finished)
    result.task.data = config.shown_path(result.task.data)
    return result


def run_comparison(config: Config, first: ModelStage, progress: Callback = silent) -> Comparison:
    """The second model through the same stages, for side-by-side pages and differences."""
    def prefixed(stage: str, done: int, total: int) -> None:
        progress(f"Compare: {stage}", done, total)

    stage = run_model(config, prefixed, config.compare.model)
    same_shape = (stage.info.layers, stage.info.heads) == (first.info.layers, first.info.heads)
    summary = model_summary(stage.info)
    if config.compare.name:
        summary.name = config.compare.name
    return Comparison(model=summary, same_shape=same_shape, statistics=run_patterns(config, stage, prefixed),
                      ablation=run_ablation(config, stage, prefixed), model_files=stage.file_hashes)


def model_summary(info: ModelInfo) -> ModelSummary:
    """The model as the report names it: a local path says nothing to a reader and differs between machines."""
    fields = info.to_dict()
    fields.pop("path")
    return ModelSummary(**fields)


def data_files(config: Config) -> dict[str, str]:
    """sha256 of every data file the run read, for the manifest."""
    files = [f.path for f in config.patterns.corpus]
    if config.ablation.enabled:
        files.append(BUILTIN_DATA if config.ablation.data == "builtin" else Path(config.ablation.data))
    return {config.shown_path(path): _file_hash(path) for path in files}


def _file_hash(path: Path, what: str = "data file") -> str:
    """sha256 of a data file, read in blocks; only a regular file is opened (a FIFO would hang the build)."""
    digest = hashlib.sha256()
    with open_data_file(Path(path), what) as handle:
        try:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        except OSError as err:
            raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    return digest.hexdigest()


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "reportgen": __version__}


def make_report(config: Config, stage: ModelStage, statistics: PatternStatistics | DecoderStatistics,
                ablation: Ablation | None, comparison: Comparison | None, manifest: Manifest,
                reproducible: bool,
                groups: tuple[DecoderStatistics | None, CrossStatistics | None] = (None, None),
                progress: BuildProgress | None = None) -> Report:
    """Everything the site shows, findings included: templates and charts read only this. `statistics` is
    the encoder atlas, or for a decoder the decoder atlas; an encoder-decoder's is its encoder's, and `groups`
    the atlas of its decoder self-attention and its cross-attention statistics."""
    decoder_group, cross = groups
    found = findings.all_findings(statistics, ablation, decoder_group, cross)
    decoder = statistics if isinstance(statistics, DecoderStatistics) else decoder_group
    return Report(
        title=config.title,
        site_url=config.site_url,
        built=None if reproducible else datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        versions=versions(),
        model=model_summary(stage.info),
        layers=stage.info.layers,
        heads=stage.info.heads,
        examples=[describe_example(i, run, config.patterns, stage.decoder)
                  for i, run in enumerate(stage.runs, 1)],
        architecture="encoder-decoder" if stage.encoder_decoder else "decoder" if decoder is not None else "encoder",
        groups=attention_groups(stage.runs[0]) if stage.encoder_decoder else None,
        statistics=statistics if isinstance(statistics, PatternStatistics) else None,
        decoder=decoder,
        cross=cross,
        ablation=ablation,
        comparison=comparison,
        findings=found,
        claims=claim_checks(config.claims, ablation, found, statistics, running=progress is not None),
        headline=findings.headline(statistics, found),
        warnings=stage.warnings,
        manifest=manifest,
        progress=progress,
    )


def attention_groups(run: ExampleRun) -> list[str]:
    """An encoder-decoder's group of each flat attention layer, in the order of its heads' masks
    (reportgen.model.head_sites): the encoder's self-attention, the decoder's, then the cross-attention."""
    encoder, decoder = len(run.seq2seq.encoder_attention), len(run.seq2seq.decoder_attention)
    return ["encoder"] * encoder + ["decoder"] * decoder + ["cross"] * decoder


def describe_example(number: int, run: ExampleRun, settings: PatternSettings | None = None,
                     decoder: bool = False) -> Example:
    """One example as its page shows it, with the heads that show each seed pattern most on it and each
    head's label on it (computed here, from `settings` as the pattern statistics are, so the site only renders).
    A decoder's example has its heads' decoder labels and no seed patterns (they are an encoder's)."""
    if decoder:
        from reportgen.patterns.decoder_atlas import example_labels

        found, labels = [], example_labels(run, settings)
    else:
        found, labels = patterns_and_labels(run, settings)
    return Example(id=number, name=run.spec.name, text=run.spec.text, pair=run.spec.pair, n_tokens=run.n_tokens,
                   truncated=run.truncated, page=f"example-{number}.html",
                   qk_page=f"example-{number}-qk.html" if "queries" in run.extras else None,
                   entropy=clean((causal_entropy(run.attention) if decoder else entropy(run.attention)).round(4)),
                   patterns=found, labels=labels, target=run.spec.target,
                   target_tokens=len(run.seq2seq.target_tokens) if run.seq2seq is not None else None)


def example_views(runs: list[ExampleRun], statistics: PatternStatistics | DecoderStatistics) -> list[ExampleViews]:
    """What the pages draw of each example: encoded attention for the views, and the attention
    matrices of the heads the patterns page names (its strongest heads on short examples)."""
    wanted: dict[int, set[tuple[int, int]]] = {}
    for heads in statistics.top_heads.values() if isinstance(statistics, PatternStatistics) else ():
        for head in heads:
            if head.example >= 0 and runs[head.example].n_tokens <= MATRIX_MAX_TOKENS:
                wanted.setdefault(head.example, set()).add((head.layer, head.head))
    return [ExampleViews(tokens=list(run.tokens), segments=[int(s) for s in run.segment_ids],
                         payload=_with_groups(views.example_payload(run), run),
                         qk_payload=views.qk_payload(run) if "queries" in run.extras else None,
                         # 4 decimals as float64: rounded in float32 they print as 0.9606000185012817
                         matrices={(layer, head): run.attention[layer, head].astype(float).round(4).tolist()
                                   for layer, head in sorted(wanted.get(i, ()))})
            for i, run in enumerate(runs)]


def _with_groups(payload: dict, run: ExampleRun) -> dict:
    """An encoder-decoder example's payload gains its target and its three groups (the views' switch), the
    encoder's attention staying the top level (the views' default group); any other payload is as it was."""
    if run.seq2seq is None:
        return payload
    pair = run.seq2seq
    target_special = pair.target_special if pair.target_special is not None else [False] * len(pair.target_tokens)
    return {**payload, "target": pair.target,
            "groups": views.seq2seq_groups(pair, [bool(s) for s in run.special], [bool(s) for s in target_special])}


def make_manifest(config: Config, stage: ModelStage, files: dict[str, str], timings: dict[str, float],
                  reproducible: bool, costs: dict[str, ExperimentCost] | None = None) -> Manifest:
    """What a reader needs to reproduce the run: config as used, file hashes, versions, device, seeds, times,
    and each ablation experiment's masks and seconds (`costs`)."""
    return Manifest(
        config=config.as_written(),
        model_files=stage.file_hashes,
        data_files=files,
        versions=versions(),
        device=loading.resolve_device(config.device),
        seeds={"ablation": config.ablation.seeds if config.ablation.enabled else None,
               "mlm_masking": config.ablation.mlm_seed if config.ablation.task == "mlm" else None},
        seconds=None if reproducible else {k: round(v, 2) for k, v in timings.items()},
        experiments={name: ExperimentCost(masks=cost.masks, computed=None if reproducible else cost.computed,
                                          seconds=None if reproducible else round(cost.seconds or 0.0, 2))
                     for name, cost in costs.items()} if costs else None,
    )


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
    ray = config.ablation.ray if config.ablation.enabled else None
    with (output.exclusive(target), loading.file_policy(config.trust_remote_code, config.allow_pickle, decoders=True,
                                                                 encoder_decoders=True),
          usage.recording(config), _ray_cluster(ray), output.standing_in(target)):
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
    stage = run_model(config, progress)
    lap("model")
    statistics = (run_decoder_patterns if stage.decoder else run_patterns)(config, stage, progress)
    groups = ((run_seq2seq_decoder_patterns(config, stage), run_cross_patterns(config, stage))
              if stage.encoder_decoder else (None, None))
    lap("patterns")
    drawn = example_views(stage.runs, statistics)
    live = live_model(config, stage)
    watch = ablation_watch(config, stage, started)

    def write(ablation: Ablation | None, comparison: Comparison | None = None, partial: bool = False) -> Report:
        at = time.perf_counter()
        manifest = make_manifest(config, stage, data_files(config), timings, reproducible,
                                 watch.costs if watch else None)
        report = make_report(config, stage, statistics, ablation, comparison, manifest, reproducible, groups,
                             watch.state() if partial and watch else None)
        from reportgen.site import writer  # rendering is imported by the stage that renders, once it is reached

        writer.write_site(report, drawn, out, progress, reproducible, config.cache_dir, live)
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
    ablation = run_ablation(config, stage, ticked if watch else progress, watch, finished if watch else None)
    lap("ablation", watch.writing_in_ablation if watch else 0.0)
    comparison = None
    if config.compare is not None:
        if watch is not None and watch.partial_sites:  # the comparison runs another model: a long build goes on
            watch.stages_left = []
            write(ablation, partial=True)
            clock = time.perf_counter()
        comparison = run_comparison(config, stage, progress)
        lap("comparison")
    report = write(ablation, comparison)
    return Built(report, stage.computed, len(stage.runs) - stage.computed, round(stage.seconds, 3))


def ablation_watch(config: Config, stage: ModelStage, started: float) -> AblationWatch | None:
    """A watch over the ablation when it will run experiments (not when its whole record is cached, nor when
    it is off): the build then writes partial sites while they run, when they take a while (its first_site_due)."""
    if not config.ablation.enabled:
        return None
    from reportgen.ablation.experiments import has_stored_record, planned_masks

    cached = has_stored_record(stage.path, config.ablation, config.cache_dir, stage.fingerprint)
    watch = AblationWatch(planned_masks(config.ablation, stage.info.layers, stage.info.heads),
                          ["comparison"] if config.compare is not None else [], started, live=not cached)
    return watch
