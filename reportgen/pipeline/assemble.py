"""The report stage: everything the site shows, as plain typed data (reportgen.report), from the stages'
results; the findings are written here too, so that templates and charts only render."""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from pathlib import Path

from reportgen import __version__, findings
from reportgen.config import BUILTIN_DATA, Config, PatternSettings
from reportgen.datafiles import file_sha256
from reportgen.findings.claims import claim_checks
from reportgen.kinds import Atlas, ModelKind
from reportgen.model import loading
from reportgen.patterns.statistics import clean
from reportgen.pipeline.analyses import model_summary
from reportgen.pipeline.model_stage import ModelStage
from reportgen.report import (
    Ablation,
    BuildProgress,
    Comparison,
    DecoderStatistics,
    Example,
    ExampleViews,
    ExperimentCost,
    Manifest,
    Patching,
    PatternStatistics,
    Report,
)
from reportgen.runs import ExampleRun
from reportgen.site import view_files, views
from reportgen.site.token_text import shown_tokens

MATRIX_MAX_TOKENS = 64  # the patterns page draws a head's attention as a matrix only for examples this short


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "reportgen": __version__}


def make_report(config: Config, stage: ModelStage, atlas: Atlas, ablation: Ablation | None,
                comparison: Comparison | None, manifest: Manifest, reproducible: bool,
                progress: BuildProgress | None = None, examples: list[Example] | None = None,
                patching: Patching | None = None) -> Report:
    """Everything the site shows, findings included: templates and charts read only this. `atlas.main` is the
    encoder atlas, or a decoder's own; an encoder-decoder's is its encoder's, beside its decoder self-attention's
    atlas and its cross-attention statistics. `examples`: `describe_examples`, made once for every site a build
    writes (else from the stage's runs)."""
    main = atlas.main
    found = findings.all_findings(main, ablation, atlas.decoder, atlas.cross, patching, stage.groups)
    return Report(
        title=config.title,
        site_url=config.site_url,
        built=None if reproducible else datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        versions=versions(),
        model=model_summary(stage.info),
        layers=stage.info.layers,
        heads=stage.info.heads,
        examples=examples if examples is not None else describe_examples(config, stage),
        architecture=stage.kind.name,
        groups=stage.groups,
        statistics=main if isinstance(main, PatternStatistics) else None,
        decoder=main if isinstance(main, DecoderStatistics) else atlas.decoder,
        cross=atlas.cross,
        ablation=ablation,
        patching=patching,
        comparison=comparison,
        findings=found,
        claims=claim_checks(config.claims, ablation, found, main, running=progress is not None),
        headline=findings.headline(main, found),
        warnings=stage.warnings,
        manifest=manifest,
        progress=progress,
    )


def describe_examples(config: Config, stage: ModelStage) -> list[Example]:
    """Every example of the stage as its page shows it (`describe_example`)."""
    return [describe_example(i, run, config.patterns, stage.kind, config.views.query_key_mb)
            for i, run in enumerate(stage.runs, 1)]


def describe_example(number: int, run: ExampleRun, settings: PatternSettings | None, kind: ModelKind,
                     qk_limit_mb: float | None = None) -> Example:
    """One example as its page shows it, with the heads that show each seed pattern most on it and each
    head's label on it, as its kind names them (computed here, from `settings` as the pattern statistics are,
    so the site only renders); where its query/key vectors were left out for their size (model_stage
    `within_qk_budget`), that size and `qk_limit_mb`, which its page quotes."""
    labels = kind.labels(run, settings)
    skipped = float(run.extras["qk_bytes"]) / 1e6 if "qk_bytes" in run.extras else None
    return Example(id=number, name=run.spec.name, text=run.spec.text, pair=run.spec.pair, n_tokens=run.n_tokens,
                   truncated=run.truncated, page=f"example-{number}.html",
                   qk_page=f"example-{number}-qk.html" if "queries" in run.extras else None,
                   entropy=clean(labels.entropy.round(4)), patterns=labels.patterns, labels=labels.labels,
                   target=run.spec.target,
                   n_target_tokens=len(run.seq2seq.target_tokens) if run.seq2seq is not None else None,
                   qk_mb=None if skipped is None else float(f"{skipped:.2g}"),
                   qk_limit_mb=None if skipped is None else qk_limit_mb)


def example_views(runs: list[ExampleRun], statistics: PatternStatistics | DecoderStatistics) -> list[ExampleViews]:
    """What the pages draw of each example: encoded attention for the views, and the attention
    matrices of the heads the patterns page names (its strongest heads on short examples)."""
    wanted: dict[int, set[tuple[int, int]]] = {}
    for heads in statistics.top_heads.values() if isinstance(statistics, PatternStatistics) else ():
        for head in heads:
            if head.example >= 0 and runs[head.example].n_tokens <= MATRIX_MAX_TOKENS:
                wanted.setdefault(head.example, set()).add((head.layer, head.head))
    return [_example_views(run, wanted.get(i, ())) for i, run in enumerate(runs)]


def _example_views(run: ExampleRun, matrices: set[tuple[int, int]]) -> ExampleViews:
    """`example_views` of one run. A long example's query/key page reads the model's weights from its example page's
    files (view_files.example_pages), so its payload leaves them out."""
    payload = _with_groups(views.example_payload(run), run)
    long = view_files.per_head(payload)
    qk = views.qk_payload(run, weights=not long, attention=payload["attention"] if long else None) \
        if views.has_qk(run) else None
    return ExampleViews(tokens=shown_tokens(run.tokens), segments=[int(s) for s in run.segment_ids], payload=payload,
                        qk_payload=qk,
                        # 4 decimals as float64: rounded in float32 they print as 0.9606000185012817
                        matrices={(layer, head): run.attention[layer, head].astype(float).round(4).tolist()
                                  for layer, head in sorted(matrices)})


def _with_groups(payload: dict, run: ExampleRun) -> dict:
    """A run with a target (an encoder-decoder's) adds it and its three groups to its payload (the views'
    switch), the encoder's attention staying the top level (the views' default group)."""
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


def data_files(config: Config) -> dict[str, str]:
    """sha256 of every data file the run read, for the manifest."""
    files = [f.path for f in config.patterns.corpus]
    if config.ablation.enabled:
        files.append(BUILTIN_DATA if config.ablation.data == "builtin" else Path(config.ablation.data))
    return {config.shown_path(path): file_sha256(path) for path in files}
