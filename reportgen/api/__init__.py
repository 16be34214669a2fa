"""The Python API: what the command line does, called from Python (a notebook, a script, a test).

It takes a config as the command line does (a reportgen.yaml path, None for ./reportgen.yaml or the
defaults) or as a dict of the same keys, checked by the same loader, and an output directory; it runs
the whole pipeline of `reportgen.pipeline` (model run, analyses, site) and gives back the typed report,
the `reportgen.report.Report` records that `report.json` serialises. A user's mistake raises the
command line's `reportgen.errors.ReportgenError` with the same one line (its `exit_code` says which
kind); what the command line prints as `warning:` lines are Python warnings here (UserWarning).
`reportgen.Report.load` reads a published report back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reportgen.config import DICT_SOURCE, Config, config_from_mapping, load_config
from reportgen.progress import silent
from reportgen.report import Report

__all__ = ["build"]


def build(config: str | os.PathLike[str] | Mapping[str, Any] | None = None, out: str | os.PathLike[str] | None = None,
          reproducible: bool = False, progress: bool = False) -> Report:
    """Build the site as `reportgen build` does and return its report.

    `config`: a path to a reportgen.yaml (relative paths in it are taken relative to its folder);
    None for ./reportgen.yaml when there is one, else the defaults (the embedded model); or a dict
    of config keys as the YAML file holds them (`{"model": "./my-model", "ablation": {"limit": 50}}`),
    merged over the defaults and checked as a file is, its relative paths taken relative to the
    current directory. `out` overrides the config's `output` (like `--out`); `reproducible` leaves
    out the dates (like `--reproducible`); `progress` prints each stage's progress on stderr.

    Raises a `ReportgenError` subclass (ConfigError, ModelError, DataError, OutputError, BusyError)
    for a mistake in what was given, with the command line's one-line message.
    """
    from reportgen.pipeline import build as run_build  # the pipeline (torch, rendering) only when a build runs

    built = run_build(_config(config), Path(out) if out is not None else None, reproducible,
                      _Progress() if progress else silent)
    return built.report


def _config(config: str | os.PathLike[str] | Mapping[str, Any] | None) -> Config:
    if config is None or isinstance(config, str | os.PathLike):
        return load_config(config)
    if isinstance(config, Mapping):
        return config_from_mapping(_plain(config), DICT_SOURCE, Path.cwd())
    raise TypeError(f"config: expected a path to a reportgen.yaml, a dict of config keys or None, "
                    f"got {type(config).__name__}")


def _plain(value: Any) -> Any:
    """A dict as a YAML file would give it: paths as strings, tuples as lists (the loader checks the rest)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


class _Progress:
    """A `reportgen.progress.Callback` that prints a stage's start, every tenth of it and its end, one line each."""

    def __init__(self, stream=None):
        self.stream = stream
        self.stage: str | None = None
        self.shown = -1  # the last tenth printed

    def __call__(self, stage: str, done: int, total: int) -> None:
        tenth = 10 * done // total if total > 0 else 10
        if stage != self.stage:
            self.stage, self.shown = stage, -1
        if tenth > self.shown:
            self.shown = tenth
            print(f"{stage}: {done}/{total}", file=self.stream or sys.stderr, flush=True)
