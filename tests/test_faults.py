"""Faults: a build killed (SIGKILL) in each stage leaves the previous site intact, or the complete site it
swapped in as its ablation ran (issue 32), and the next build resumes to the same site as an uninterrupted
one; two builds at once do not collide."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reportgen.commands.cli import INTERRUPTED
from reportgen.site import output
from tests.helpers import check_report, make_ablation_bert, shared, tree, write_config

pytestmark = pytest.mark.slow

# A random BERT of 3 layers x 4 heads with the embedded model's tokenizer (helpers.make_ablation_bert), the built-in
# pairs: an ablation of about 50 masks that writes one file each, slow enough to be caught in each stage (the test
# polls every 20 ms), a whole build in seconds. What is tested is the site's and the cache's files, whatever the model.
CONFIG = """\
examples:
  - text: I went to the store.
    pair: At the store, I bought fresh strawberries.
  - text: The cat sat on the mat because it was warm.
ablation:
  limit: 40
  seeds: [0]
  fractions: [0.0, 0.5]
  bootstrap_samples: 200
  permutations: 200
  importance:
    random_orders: 4
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> str:
    """CONFIG with its model: one for the module, in whichever worker."""
    model = shared(tmp_path_factory, "faults-model", make_ablation_bert)
    return f"model: {model}\ndevice: cpu\n{CONFIG}"


def start_build(cwd: Path, *args: str) -> subprocess.Popen:
    """`reportgen build` as a terminal starts it: SIGINT at its default, whatever the test run inherited (a run
    started in the background by a non-interactive shell, as CI may be, ignores SIGINT, and so would the build:
    the Ctrl+C test then saw a build that ran on to exit 0)."""
    return subprocess.Popen([sys.executable, "-m", "reportgen", "build", "--reproducible", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def kill_when(process: subprocess.Popen, ready, timeout: float = 300) -> bool:
    """SIGKILL `process` as soon as `ready()` is true; False if it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if ready():
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.02)
    raise AssertionError("the build neither reached the stage nor ended")


def count(directory: Path, pattern: str) -> int:
    return sum(1 for _ in directory.glob(pattern)) if directory.exists() else 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory, config) -> dict[str, bytes]:
    """An uninterrupted reproducible build, with its own cache."""
    work = tmp_path_factory.mktemp("reference")
    write_config(work, config)
    assert start_build(work).wait() == 0
    check_report(work / "site")
    return tree(work / "site")


STAGES = {
    "model": lambda work: count(work / ".reportgen-cache" / "runs", "*.npz") >= 1,
    "ablation": lambda work: count(work / ".reportgen-cache" / "ablation", "**/*.npy") >= 20,
    "site": lambda work: count(work, ".site.building/docs/charts/*.png") >= 3,
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_sigkill_keeps_the_old_site_and_the_rerun_matches(tmp_path, config, reference, stage):
    write_config(tmp_path, config)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("the previous site")
    output.mark(tmp_path / "site")  # a site reportgen wrote: the only kind it replaces
    before = tree(tmp_path / "site")
    process = start_build(tmp_path)
    assert kill_when(process, lambda: STAGES[stage](tmp_path)), f"the build ended before the {stage} stage was seen"
    assert the_old_or_a_partial_site(tmp_path / "site", before)
    rerun = start_build(tmp_path)
    assert rerun.wait() == 0, rerun.stderr.read()
    same = tree(tmp_path / "site") == reference  # not `assert a == b`: pytest's diff of two trees runs for hours
    assert same
    assert count(tmp_path, ".site.building") == count(tmp_path, ".site.previous") == count(tmp_path, ".site.before") \
        == 0  # leftovers cleaned up


def is_partial(site: Path) -> bool:
    """A complete site the build swapped in as its ablation ran (issue 32): valid, and it says it is running."""
    check_report(site)
    return json.loads((site / "report.json").read_text(encoding="utf-8"))["progress"] is not None


def the_old_or_a_partial_site(site: Path, before: dict[str, bytes]) -> bool:
    """A killed build leaves the site it found, or the last complete site it swapped in: never a broken one."""
    return tree(site) == before or is_partial(site)


def test_a_second_build_on_the_same_output_is_refused(tmp_path, config, reference):
    write_config(tmp_path, config)
    first = start_build(tmp_path)
    deadline = time.monotonic() + 120
    while not (tmp_path / ".reportgen-cache" / "runs").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = start_build(tmp_path)
    assert second.wait() == 6
    message = second.stderr.read().strip().splitlines()
    assert len(message) == 1 and "another reportgen build is writing" in message[0]
    assert first.wait() == 0
    same = tree(tmp_path / "site") == reference
    assert same


def test_ctrl_c_says_so_in_one_line_and_keeps_the_last_complete_site(tmp_path, config):
    """SIGINT (Ctrl+C) once ended with exit 130 and no word (issue 27); the site is the last complete one the
    build swapped in, here the previous one: this model's experiments are too short for a partial site (issue 32;
    the one left when a partial site was swapped in: test_progressive_build's interrupted build)."""
    write_config(tmp_path, config)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("the previous site")
    output.mark(tmp_path / "site")
    before = tree(tmp_path / "site")
    process = start_build(tmp_path)
    deadline = time.monotonic() + 300
    # at the ablation's first mask, with the whole ablation left to interrupt
    while not count(tmp_path / ".reportgen-cache" / "ablation", "**/*.npy"):
        assert process.poll() is None and time.monotonic() < deadline, "the build ended before the ablation"
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    said = [line for line in process.stderr.read().splitlines() if line.strip() and "━" not in line]
    assert said == [f"error: {INTERRUPTED}"]
    assert the_old_or_a_partial_site(tmp_path / "site", before)
    assert not (tmp_path / ".site.before").exists() and not (tmp_path / ".site.building").exists()
