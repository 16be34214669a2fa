"""Ctrl+C during `reportgen build` is never lost (reportgen.commands.terminal._Interrupt).

Python raises KeyboardInterrupt wherever the main thread is when SIGINT comes; inside a finalizer it is printed as
"Exception ignored" and dropped, and the build would go on to exit 0. Here the signal is raised from a finalizer on
purpose, between the pattern statistics and the ablation, in this process, on a tiny random BERT; test_faults sends
a real SIGINT to a real `reportgen build`."""

from __future__ import annotations

import signal

import pytest

from reportgen.config import load_config
from tests.helpers import tiny_config, write_config

pytestmark = pytest.mark.slow


class _DropsTheInterrupt:
    """Sends SIGINT from its finalizer: the KeyboardInterrupt raised there is printed and dropped."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


@pytest.fixture
def lost_signal_after_patterns(monkeypatch, tmp_path, tiny_model) -> None:
    """A project whose build gets a SIGINT that Python drops, once its pattern statistics are done."""
    from reportgen.pipeline import driver

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as `reportgen build` has it (a worker may not)
    run_patterns = driver.run_patterns

    def patterns_then_a_dropped_signal(*args, **kwargs):
        found = run_patterns(*args, **kwargs)
        _DropsTheInterrupt()  # no reference kept: finalized at once
        return found

    monkeypatch.setattr(driver, "run_patterns", patterns_then_a_dropped_signal)
    write_config(tmp_path, tiny_config(tiny_model))
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("lost_signal_after_patterns")
def test_a_dropped_ctrl_c_stops_the_build_at_its_next_progress_tick(tmp_path, monkeypatch):
    import sys

    from reportgen.commands.terminal import build_with_progress

    printed = []  # what Python would print as "Exception ignored in ..."
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: printed.append(unraisable.exc_type))
    hook = sys.unraisablehook
    with pytest.raises(KeyboardInterrupt):
        build_with_progress(load_config(tmp_path / "reportgen.yaml"))
    assert not (tmp_path / "site").exists()  # stopped before its one site (a tiny model's build writes no partial one)
    assert printed == []  # the command's one line is all it says
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler and sys.unraisablehook is hook  # put back


@pytest.mark.usefixtures("lost_signal_after_patterns")
def test_without_it_python_drops_that_ctrl_c_and_the_build_ends_as_if_none_came(tmp_path, monkeypatch):
    """The control: the same dropped signal under pipeline.build alone (as the Python API runs it) is lost."""
    import sys

    from reportgen.pipeline import build

    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: dropped.append(unraisable.exc_type))
    build(load_config(tmp_path / "reportgen.yaml"))
    assert dropped == [KeyboardInterrupt]
    assert (tmp_path / "site" / "index.html").is_file()
