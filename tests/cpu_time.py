"""CPU seconds per test, printed at the end of a run beside pytest's --durations (issue 44).

Why: on CI's two cores the suite is bound by CPU, not by any one test's wall time. A test's duration under
`-n 3` grows with whatever the other workers do (the induction recipe's training is 70 s of CPU and took
476 s of wall time in a loaded run), so the slowest-by-wall list points at the wrong tests. This counts, for
each test's setup, call and teardown, the CPU time of its process, of the child processes it waited for, and
of every process still running below it (Chromium and Playwright's driver, a build in the background, a warm
command-line server and the cases it forked), read from /proc. A fixture's cost lands on the first test that
asks for it, as in --durations; a background process's on the tests during which it ran. Processes that
leave the tree (Ray's daemons) are not counted.
"""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

TOP = 25  # tests listed, as --durations=25
_KEY = "cpu_seconds"


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu() -> float:
    """This process's CPU seconds, with its waited-for children's and its running descendants' (and theirs)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system + _descendants()


def _descendants() -> float:
    ticks, stack = 0, [os.getpid()]
    while stack:
        pid = stack.pop()
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as listed:
                    for child in listed.read().split():
                        stack.append(child)
                        with open(f"/proc/{child}/stat") as stat:  # after the name in parentheses:
                            fields = stat.read().rsplit(")", 1)[1].split()
                        ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
        except OSError:  # gone meanwhile, or no /proc (not Linux): counted as it ends, or not at all
            continue
    return ticks / _TICK


def _measured(item: pytest.Item):
    start = _cpu()
    try:
        return (yield)
    finally:
        # at least 0: a process whose parent ended before it is not counted as it ends (Chromium's, at its close)
        item.user_properties.append((_KEY, max(0.0, _cpu() - start)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from _measured(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _measured(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem):  # noqa: ARG001 - the hook's signature
    return (yield from _measured(item))


class _Totals:
    """The controller's sums (under xdist the reports, with their user_properties, come from the workers)."""

    def __init__(self) -> None:
        self.tests: dict[str, float] = defaultdict(float)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # user_properties accumulate over the phases: the report of a phase carries this phase's entry last
        values = [value for key, value in report.user_properties if key == _KEY]
        if values:
            self.tests[report.nodeid] += values[-1]

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.tests:
            return
        modules: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self.tests.items():
            modules[nodeid.split("::")[0]] += seconds
        write = terminalreporter.write_line
        terminalreporter.section(f"CPU seconds: {sum(self.tests.values()):.0f} in all (the tests' processes and "
                                 "the processes below them)")
        write(f"the {TOP} costliest tests (setup + call + teardown):")
        for nodeid, seconds in sorted(self.tests.items(), key=lambda pair: -pair[1])[:TOP]:
            write(f"{seconds:8.1f}s  {nodeid}")
        write("by module:")
        for module, seconds in sorted(modules.items(), key=lambda pair: -pair[1])[:TOP]:
            write(f"{seconds:8.1f}s  {module}")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) sums and prints
        config.pluginmanager.register(_Totals(), "cpu_time_totals")
