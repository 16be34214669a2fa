"""What an ablation's task needs before any model work, read without the model: the columns of each task's data,
the data file read and checked cell by cell, and whether the model's architecture can run the task, from its
config.json. A build calls these first (reportgen.pipeline), so a mistake ends it before any work; this module
imports no torch, so a mistake in the data file is said in well under a second (the architecture check reads
transformers' model tables, which import torch). reportgen.ablation.task_loading builds the task on them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from reportgen.config import BUILTIN_DATA, AblationSettings, builtin_data_problem
from reportgen.datafiles import Column, Rows, load_rows
from reportgen.errors import ConfigError

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


def _config_or_none(model_dir: Path) -> dict | None:
    """config.json as a dict; None when it cannot be read as one (pretrained_kwargs checked it already, and
    from_pretrained says what is wrong)."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def check_task(task: str, model_dir: Path) -> None:
    """Refuses, from config.json alone and so before any work (the build calls it first), a task the model's kind
    cannot run (reportgen.kinds: causal_lm needs a decoder, seq2seq an encoder-decoder, and similarity and mlm
    an encoder-only stack). A config.json that cannot be read is left to loading the model, which says why."""
    from reportgen.kinds import kind_for

    config = _config_or_none(model_dir)
    if config is not None:
        kind_for(config).check_task(task, model_dir, config.get("model_type"))


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
