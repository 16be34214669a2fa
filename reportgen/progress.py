"""Progress reporting, kept out of the computations: they call `progress(stage, done, total)`; the
command line listens with bars (`reportgen.commands.terminal.RichProgress`).

The resampling loops of the statistics (`reportgen.stats`: bootstrap resamples, permutations) sit
under many layers of plain functions of arrays, which should not all carry a callback for the rare
study that asks for a million resamples. They call `drew(kind, done, total)` instead, which goes
to whoever opened `reporting_draws` around them (an ablation experiment's statistics), or nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable

Callback = Callable[[str, int, int], None]

_draws: ContextVar[Callback | None] = ContextVar("reportgen_draws", default=None)


def silent(stage: str, done: int, total: int) -> None:
    """The default: computations report progress, nobody listens."""


@contextmanager
def reporting_draws(report: Callback | None) -> Iterator[None]:
    """Within this block, `drew(kind, done, total)` calls `report(kind, done, total)`."""
    token = _draws.set(report)
    try:
        yield
    finally:
        _draws.reset(token)


def drew(kind: str, done: int, total: int) -> None:
    """`done` of `total` draws of `kind` ("resamples", "permutations") are scored: tell the listener, if any."""
    report = _draws.get()
    if report is not None:
        report(kind, done, total)
