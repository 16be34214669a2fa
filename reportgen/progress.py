"""Progress reporting, kept out of the computations: they call `progress(stage, done, total)`."""

from __future__ import annotations

from typing import Callable

Callback = Callable[[str, int, int], None]


def silent(stage: str, done: int, total: int) -> None:
    """The default: computations report progress, nobody listens."""


class RichProgress:
    """One rich progress bar per stage, with the time left; used by the CLI."""

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
