"""What the commands print: progress bars, reportgen's warnings once each, and one line per error.

`reportgen build` and `reportgen serve --watch` build the same way and speak the same way, so both
call `build_with_progress` and `print_error` here rather than each keeping its own copy.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable
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
    """One rich progress bar per stage, with its elapsed time and, while it runs, an estimate of the time left
    (a `reportgen.progress.Callback`)."""

    def __init__(self):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), _time_left_column(), transient=False)
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


def _time_left_column():
    """"~0:01:23 left" while a stage runs and rich can estimate it (from the recent speed), empty once it is
    done: a finished stage's elapsed time is the column before."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class TimeLeft(ProgressColumn):
        max_refresh = 0.5  # the estimate moves by the second; redrawn at most twice a second

        def render(self, task) -> Text:
            left = task.time_remaining
            if task.finished or left is None:
                return Text("")
            minutes, seconds = divmod(int(left), 60)
            return Text(f"~{minutes // 60}:{minutes % 60:02d}:{seconds:02d} left", style="progress.remaining")

    return TimeLeft()


def build_with_progress(config: Config, out: Path | None = None, reproducible: bool = False,
                        written: Callable[[Path], None] | None = None) -> Built:
    """One build with progress bars; reportgen's own warnings printed after it, each text once. `written`:
    see reportgen.pipeline.build."""
    from reportgen.pipeline import build

    with RichProgress() as bars, warnings.catch_warnings(record=True) as caught, _Interrupt() as interrupt:
        warnings.simplefilter("always")

        def progress(stage: str, done: int, total: int) -> None:
            interrupt.check()
            bars(stage, done, total)

        built = build(config, out, reproducible, progress, written)
        interrupt.check()
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


class _Interrupt:
    """Ctrl+C during a build, never lost. Python raises KeyboardInterrupt wherever the main thread is when the signal
    comes; raised inside a finalizer (torch's and transformers' objects have many, run whenever memory is collected)
    it is printed as "Exception ignored" and dropped, and the build would go on to exit 0. So the signal is also
    remembered, and raised again at the build's next progress tick and at its end; the dropped one is not printed
    (the command says one line). A SIGINT that was ignored when the command started (a background job) stays
    ignored; off the main thread nothing changes."""

    def __init__(self):
        self.seen = False
        self.previous = None
        self.unraisable = None

    def __enter__(self) -> "_Interrupt":
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self._received)
            self.unraisable = sys.unraisablehook
            sys.unraisablehook = self._dropped
        return self

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            sys.unraisablehook = self.unraisable

    def _dropped(self, unraisable) -> None:
        if not (self.seen and unraisable.exc_type is KeyboardInterrupt):  # ours, raised again at the next tick
            self.unraisable(unraisable)

    def _received(self, _signum, _frame) -> None:
        self.seen = True
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt


def print_error(line: str, detail: str = "") -> None:
    """A user mistake: `error: <one line>` on stderr, and another program's own words (git's) indented below."""
    typer.echo(f"error: {line}", err=True)
    for more in detail.splitlines():
        typer.echo(f"    {more}", err=True)
