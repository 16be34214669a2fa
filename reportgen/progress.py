"""Progress reporting, kept out of the computations: they call `progress(stage, done, total)`; the
command line listens with bars (`reportgen.commands.terminal.RichProgress`)."""

from __future__ import annotations

from typing import Callable

Callback = Callable[[str, int, int], None]


def silent(stage: str, done: int, total: int) -> None:
    """The default: computations report progress, nobody listens."""
