"""What an ablation's task needs before any model work, read without the model: the columns of each task's data,
the data file read and checked cell by cell, and whether the model's architecture can run the task, from its
config.json. A build calls these first (reportgen.pipeline), so a mistake ends it before any work; this module
imports no torch, so a mistake in the data file is said in well under a second (the architecture check reads
transformers' model tables, which import torch). reportgen.ablation.tasks builds the task on them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from reportgen.config import BUILTIN_DATA, AblationSettings, builtin_data_problem
from reportgen.datafiles import Column, Rows, load_rows
from reportgen.errors import ConfigError, ModelError

TaskKind = Literal["similarity", "classification", "mlm", "causal_lm", "seq2seq"]
BUILTIN_COLUMNS = {"text_a": "query", "text_b": "title", "score": "grade"}

ROLES: dict[str, dict[str, Column | None]] = {
    # role -> default column name (used when the config gives no columns)
    "similarity": {"text_a": "sentence1", "text_b": "sentence2", "score": "score"},
    "classification": {"text": "text", "pair": None, "label": "label"},
    "mlm": {"text": "text"},
    "causal_lm": {"text": "text"},
    "seq2seq": {"source": "source", "target": "target"},
}
OPTIONAL_ROLES = {"pair"}


def resolve_columns(kind: str, columns: Mapping[str, Column | None] | None) -> dict[str, Column | None]:
    """Role -> column for the task: the config's columns over the task's default names, checked."""
    roles = ROLES[kind]
    given = dict(columns or {})
    unknown = sorted(set(given) - set(roles))
    if unknown:
        raise ConfigError(f"ablation.columns: unknown role '{unknown[0]}' for task {kind} "
                          f"(roles: {', '.join(roles)})")
    out = {**roles, **given}
    missing = [role for role, column in out.items() if column is None and role not in OPTIONAL_ROLES]
    if missing:
        raise ConfigError(f"ablation.columns: task {kind} needs a column for '{missing[0]}'")
    return out


def is_decoder(config: Mapping) -> bool:
    """Whether a model config (config.json's keys) describes a decoder, whose tokens each see only the
    ones before them: a type transformers has a causal LM but no masked LM for (GPT-2, Llama, ...),
    or an encoder type configured as a decoder (is_decoder). An encoder-decoder is not one."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if config.get("is_encoder_decoder"):
        return False
    model_type = config.get("model_type")
    return bool(config.get("is_decoder")) or (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES)


def _config_or_none(model_dir: Path) -> dict | None:
    """config.json as a dict; None when it cannot be read as one (pretrained_kwargs checked it already, and
    from_pretrained says what is wrong)."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def _check_causal(model_dir: Path) -> None:
    """Task causal_lm predicts each token from the ones before it: an encoder sees the whole text, so
    its "next-token loss" would be measured with the answer in view (transformers would even load
    BERT as a BertLMHeadModel). Refused from config.json, before anything is loaded."""
    config = _config_or_none(model_dir)
    if config is None or is_decoder(config):
        return
    kind = "an encoder-decoder" if config.get("is_encoder_decoder") else "an encoder, which sees the whole text"
    raise ModelError(f"model directory {model_dir}: model type '{config.get('model_type')}' is {kind}; task "
                     "'causal_lm' predicts each token from the ones before it and needs a decoder (causal LM); "
                     "for a masked-LM encoder use task 'mlm'")


def _check_seq2seq(model_dir: Path) -> None:
    """Task seq2seq scores a target given a source: only an encoder-decoder reads the two apart. Refused
    from config.json, before anything is loaded."""
    from reportgen.model.loading import SUPPORTED_ENCODER_DECODERS, is_encoder_decoder

    config = _config_or_none(model_dir)
    if config is None or is_encoder_decoder(model_dir):
        return
    kind = ("an encoder-decoder reportgen does not support" if config.get("is_encoder_decoder")
            else "a decoder (causal LM); for a decoder use task 'causal_lm'" if is_decoder(config)
            else "an encoder; for a masked-LM encoder use task 'mlm'")
    raise ModelError(f"model directory {model_dir}: model type '{config.get('model_type')}' is {kind}; task "
                     "'seq2seq' scores a target given its source and needs an encoder-decoder "
                     f"({', '.join(SUPPORTED_ENCODER_DECODERS.values())})")


def check_task(kind: str, model_dir: Path) -> None:
    """Refuses, from config.json alone and so before any work (the build calls it first), a task the model's
    architecture cannot run: causal_lm needs a decoder, seq2seq an encoder-decoder, and similarity and mlm
    an encoder-only stack."""
    if kind == "causal_lm":
        _check_causal(model_dir)
    elif kind == "seq2seq":
        _check_seq2seq(model_dir)
    elif kind in ("similarity", "mlm"):
        _check_not_encoder_decoder(kind, model_dir)


def _check_not_encoder_decoder(kind: str, model_dir: Path) -> None:
    """Similarity pools one stack's token states and MLM fills masks in one text: neither says which of an
    encoder-decoder's stacks, fed what, it would read, so they are refused for one, from config.json."""
    from reportgen.model.loading import is_encoder_decoder

    config = _config_or_none(model_dir)
    if config is not None and is_encoder_decoder(model_dir):
        raise ModelError(f"model directory {model_dir}: model type '{config.get('model_type')}' "
                         f"is an encoder-decoder; task '{kind}' reads a single stack of an encoder, so for an "
                         "encoder-decoder use task 'seq2seq' (a target's loss given its source) or 'classification'")


def read_rows(kind: str, data: str | Path, fmt: str, header: bool, columns: Mapping[str, Column | None] | None,
               limit: int | None) -> tuple[Rows, dict[str, Column | None], str]:
    """(rows, role -> column, the data as the cache key names it) from `data`, or from the shipped
    demo set for "builtin", which has its own format and columns."""
    comment = None
    if str(data) == "builtin":
        problem = builtin_data_problem(kind)
        if problem:
            raise ConfigError(f"ablation.data: {problem}")
        if columns:
            raise ConfigError("ablation.columns: the builtin demo set has fixed columns; "
                              "set columns only with your own data file")
        data, fmt, header, columns, comment = BUILTIN_DATA, "tsv", True, BUILTIN_COLUMNS, "#"
    resolved = resolve_columns(kind, columns)
    rows = load_rows(Path(data), resolved, fmt=fmt, header=header, comment=comment, limit=limit)
    return rows, resolved, str(data)


def read_fields(kind: str, rows: Rows, columns: Mapping[str, Column | None]) -> tuple[list[str], list[str] | None,
                                                                                  Any]:
    """(texts, pairs, third) of the task's rows, each cell checked as it is read: third is a similarity's gold
    scores, a seq2seq's targets, else None."""
    if kind == "similarity":
        return rows.texts("text_a") + rows.texts("text_b"), None, rows.floats("score")
    if kind == "seq2seq":
        return rows.texts("source"), None, rows.texts("target")
    pairs = rows.texts("pair") if kind == "classification" and columns.get("pair") is not None else None
    return rows.texts("text"), pairs, None


def check_data(settings: AblationSettings) -> None:
    """Reads the ablation's data file and checks every cell as the task will, without the model: a build calls it
    before its first stage, so a mistake in the file ends it in a second, not after the model run and a first
    site. (The labels need the model's label set: they are checked when the task loads.)"""
    rows, columns, _ = read_rows(settings.task, settings.data, settings.format, settings.header, settings.columns,
                                  settings.limit)
    read_fields(settings.task, rows, columns)
