"""What the commands print: progress bars, reportgen's warnings once each, and one line per error.

`reportgen build` and `reportgen serve --watch` build the same way and speak the same way, so both
call `build_with_progress` and `print_error` here rather than each keeping its own copy.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reportgen.cache.store import DAMAGED

# Cache.damaged's warning (reportgen.cache.store.DAMAGED), matched to say many of them in one line
DAMAGED_LINE = re.compile(re.escape(DAMAGED).replace(r"\{path\}", ".+").replace(r"\{why\}", ".+"))

if TYPE_CHECKING:
    from reportgen.config import Config
    from reportgen.pipeline import Built


class RichProgress:
    """One rich progress bar per stage, with the time left (a `reportgen.progress.Callback`)."""

    def __init__(self):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeRemainingColumn(), transient=False)
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> "RichProgress":
        self._bars.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bars.stop()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self._tasks:
            self._tasks[stage] = self._bars.add_task(stage, total=total)
        self._bars.update(self._tasks[stage], completed=done, total=total)


def build_with_progress(config: Config, out: Path | None = None, reproducible: bool = False) -> Built:
    """One build with progress bars; reportgen's own warnings printed after it, each text once."""
    from reportgen.pipeline import build

    with RichProgress() as progress, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = build(config, out, reproducible, progress)
    said: list[str] = []
    for caught_warning in caught:
        text = str(caught_warning.message)
        if caught_warning.category is UserWarning and "reportgen" in (caught_warning.filename or "") \
                and text not in said:
            said.append(text)
    damaged = [text for text in said if DAMAGED_LINE.fullmatch(text)]
    for text in said:
        if text not in damaged:
            typer.echo(f"warning: {text}", err=True)
    if len(damaged) == 1:
        typer.echo(f"warning: {damaged[0]}", err=True)
    elif damaged:  # a damaged cache is one line, not one per entry
        typer.echo(f"warning: {len(damaged)} cache entries are damaged and were recomputed; the first: "
                   f"{damaged[0]}", err=True)
    return built


def print_error(line: str, detail: str = "") -> None:
    """A user mistake: `error: <one line>` on stderr, and another program's own words (git's) indented below."""
    typer.echo(f"error: {line}", err=True)
    for more in detail.splitlines():
        typer.echo(f"    {more}", err=True)
