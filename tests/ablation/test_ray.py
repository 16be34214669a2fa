"""Ablation on Ray (issue 17): `ablation.ray` / `reportgen build --ray`.

On a local Ray with 2 CPUs (so 2 actors), on a tiny random BERT: a Ray build's report equals a local
build's (floats within 1e-6), also when one actor is killed by its pid mid-sweep; an address nothing
answers at is one line and exit 3, quickly and before any model work; without an address nothing
imports Ray. The fast tier checks the config key, that the address enters no cache key, and the
message when Ray is not installed. One Ray instance serves the module (`local_ray`): a build whose
process has Ray initialised already uses it. The test of the lazy start has its own, in a subprocess, and
runs before the module's starts, so that two never run at once on a small machine.

Drawing the site's pictures is most of a build of this tiny model (the masks take about a second), so
every build after the local one starts its cache with the pictures that build drew (`local_pictures`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reportgen.ablation.records import record_key
from reportgen.config import AblationSettings, defaults, load_config
from reportgen.errors import ConfigError
from reportgen.pipeline import build
from tests.helpers import ROOT, is_progress, make_tiny_bert, write_config

WORDS = ["the cat sat on the mat", "a red car", "i went to the store", "the dog is on the mat",
         "she bought a red ball", "he was at the store", "i bought fresh strawberries", "the dog sat"]
CONFIG = """\
title: Ray
model: ./model
device: cpu
max_length: 128
examples:
  - text: the cat sat on the mat.
patterns:
  similarity: false
ablation:
  data: ./pairs.tsv
  seeds: [0, 1]
  fractions: [0.0, 0.25, 0.5, 0.75]
  bootstrap_samples: 100
  permutations: 100
  batch_tokens: 64
  max_length: 64            # batch_tokens holds at least one whole text
  importance:
    random_orders: 8
"""


# -- fast tier: the config key ----------------------------------------------------------------------------
def ablation_settings(**over) -> AblationSettings:
    return AblationSettings.model_validate({**defaults()["ablation"], **over})


@pytest.mark.parametrize("address", [None, "local", "auto", "ray://10.0.0.7:10001", "ray://head.cluster:1"])
def test_ray_addresses_the_config_takes(address):
    assert ablation_settings(ray=address).ray == address


@pytest.mark.parametrize("address", ["ray://head", "ray://head:0", "ray://head:70000", "http://head:10001",
                                     "ray://head:10001/x", "LOCAL", "", "ray://:10001"])
def test_ray_addresses_refused_name_the_field(tmp_path, address):
    config = write_config(tmp_path, f"ablation:\n  ray: {json.dumps(address)}\n")
    with pytest.raises(ConfigError, match=r"field 'ablation\.ray': .*ray://host:port"):
        load_config(config)


def test_the_ray_address_enters_no_key_and_no_manifest(tmp_path):
    """A Ray build and a local build share the whole record and every mask (the masks' keys never see
    the settings), and the published config does not name the cluster."""
    assert record_key(ablation_settings(ray="ray://10.0.0.7:10001"), "f", "d") == record_key(ablation_settings(), "f",
                                                                                            "d")
    assert record_key(ablation_settings(ray="local"), "f", "d") != record_key(ablation_settings(seeds=[5]), "f", "d")
    config = load_config(write_config(tmp_path, "ablation:\n  ray: ray://10.0.0.7:10001\n"))
    assert config.ablation.ray == "ray://10.0.0.7:10001"
    assert "ray" not in config.as_written()["ablation"]


@pytest.mark.slow  # a subprocess or real drawing/waiting: seconds, kept out of the edit-test loop
def test_ray_not_installed_is_one_line_naming_the_extra():
    """An ImportError for ray (sys.modules['ray'] = None makes `import ray` raise it) ends as a ModelError."""
    code = ("import sys; sys.modules['ray'] = None\n"
            "from reportgen.ablation.ray_runner import connected\n"
            "from reportgen.errors import ModelError\n"
            "try:\n    connected('local').__enter__()\nexcept ModelError as err:\n"
            "    print(err.exit_code, err)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.stdout.strip() == ('3 ablation.ray (or --ray) is set but Ray is not installed; '
                                  'pip install "reportgen[ray]"'), run.stderr


# -- slow tier: builds ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project: a 4-layer, 4-head random BERT, 28 sentence pairs, an ablation of 82 masks."""
    root = tmp_path_factory.mktemp("ray-project")
    make_tiny_bert(root / "model", layers=4, heads=4)
    rows = [f"{first}\t{second}\t{(index * 7) % 6}\n" for index, (first, second) in
            enumerate((a, b) for a in WORDS for b in WORDS if a < b)]
    (root / "pairs.tsv").write_text("sentence1\tsentence2\tscore\n" + "".join(rows), encoding="utf-8")
    write_config(root, CONFIG)
    return root


@pytest.fixture(scope="module")
def local_ray():
    """One Ray instance with 2 CPUs for the module; the builds find it initialised and use it."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray
    ray.shutdown()


def built_report(project: Path, name: str, ray: str | None = None, progress=None,
                 pictures: Path | None = None) -> dict:
    """report.json of a reproducible build into site-NAME with its own cache cache-NAME, which starts with
    `pictures` when given (`local_pictures`)."""
    config = load_config(project / "reportgen.yaml")
    config.cache_dir = project / f"cache-{name}"
    config.ablation.ray = ray
    if pictures is not None:
        shutil.copytree(pictures, config.cache_dir / "exports")
    kwargs = {"progress": progress} if progress else {}
    build(config, project / f"site-{name}", reproducible=True, **kwargs)
    report = json.loads((project / f"site-{name}" / "report.json").read_text(encoding="utf-8"))
    assert report["manifest"]["config"].pop("cache_dir") == f"cache-{name}"  # the one difference the test makes
    return report


@pytest.fixture(scope="module")
def local_report(project) -> dict:
    return built_report(project, "local")


@pytest.fixture(scope="module")
def local_pictures(project, local_report) -> Path:  # noqa: ARG001 - local_report draws them
    """The pictures the local build drew (its cache's exports/), for the other builds' caches to start with.

    Drawing is about two thirds of a build here and has nothing to do with where the masks ran. A build copies
    a picture only when it asks for one with the same inputs (reportgen.site.export_cache), so every number in
    its report is still its own; the masks and the statistics are not copied."""
    return project / "cache-local" / "exports"


def assert_same(ray_value, local_value, where: str = "report") -> None:
    """Equal, floats within 1e-6 (relative to their size when large)."""
    if isinstance(local_value, float) and isinstance(ray_value, (int, float)):
        assert math.isclose(ray_value, local_value, rel_tol=1e-6, abs_tol=1e-6), where
    elif isinstance(local_value, dict):
        assert isinstance(ray_value, dict) and ray_value.keys() == local_value.keys(), where
        for key, value in local_value.items():
            assert_same(ray_value[key], value, f"{where}.{key}")
    elif isinstance(local_value, list):
        assert isinstance(ray_value, list) and len(ray_value) == len(local_value), where
        for index, value in enumerate(local_value):
            assert_same(ray_value[index], value, f"{where}[{index}]")
    else:
        assert ray_value == local_value, where


def worker_pids() -> list[int]:
    """The pids of this process's Ray actors (Ray titles an actor's process `ray::MaskWorker...`)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    mine = {os.getpid()}
    while True:
        grown = mine | {pid for pid, parent in parents.items() if parent in mine}
        if grown == mine:
            break
        mine = grown
    found = []
    for pid in sorted(mine - {os.getpid()}):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::MaskWorker"):
            found.append(pid)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_cluster_is_one_line_and_exit_3_before_any_work(project):
    address = f"ray://127.0.0.1:{free_port()}"
    cache = project / "cache-unreachable"
    (project / "unreachable.yaml").write_text(CONFIG + f"cache_dir: {cache.name}\n", encoding="utf-8")
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "reportgen", "build", "--config", "unreachable.yaml", "--ray", address,
                          "--out", "site-unreachable"],
                         cwd=project, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.monotonic() - start
    lines = [line for line in run.stderr.splitlines() if line.strip() and not is_progress(line)]
    assert run.returncode == 3, run.stderr
    assert lines == [f"error: Ray cluster {address} cannot be reached (Connection refused); start its head with "
                     "ray start --head, or check ablation.ray / --ray"]
    assert seconds < 60  # the interpreter and imports; Ray Client alone would retry for minutes
    assert not (project / "site-unreachable").exists()
    assert not (cache / "runs").exists()  # the model never ran


@pytest.mark.slow
def test_a_bad_ray_option_is_a_config_error(project):
    run = subprocess.run([sys.executable, "-m", "reportgen", "build", "--ray", "head:10001"], cwd=project,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip() == ("error: --ray head:10001: expected null, \"local\", \"auto\" or \"ray://host:port\" "
                                  "(port 1 to 65535), got 'head:10001'")


@pytest.mark.slow
def test_a_build_without_an_address_never_imports_ray(project, local_pictures):
    """A whole build as `reportgen build` runs it, masks computed, in an interpreter of its own."""
    shutil.copytree(local_pictures, project / ".reportgen-cache" / "exports")  # the config's cache_dir: the default
    code = ("import sys\nfrom reportgen.commands import cli\n"
            "sys.argv = ['reportgen', 'build', '--reproducible', '--out', 'site-plain']\n"
            "try:\n    cli.main()\nexcept SystemExit as end:\n    code = end.code\n"
            "print('exit', code, 'ray imported' if 'ray' in sys.modules else 'ray not imported')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.stdout.strip().splitlines()[-1] == "exit 0 ray not imported", run.stderr[-2000:]
    assert (project / "site-plain" / "report.json").is_file()


@pytest.mark.slow  # its own Ray in a new interpreter, and that Ray's two actors: ~1 min on a busy 2-core machine
@pytest.mark.usefixtures("local_report")  # its cache is the one the lazy builds start from
def test_a_local_ray_starts_only_when_a_mask_is_not_in_the_cache(project):
    """With every mask cached (only a statistic's setting changed, so the whole record is not), `--ray local`
    starts no Ray runtime; with a mask to compute, it starts one and the masks run on its actors.

    The cache starts as a copy of the local build's, which is what a first build of the same config would
    leave (every mask of seeds 0 and 1, the pictures). Ray must not be initialised in the process, hence the
    subprocess: the module's own Ray is up in this one once `local_ray` has run."""
    shutil.copytree(project / "cache-local", project / "cache-lazy")
    code = """
import sys
from pathlib import Path
import ray
from reportgen.config import load_config
from reportgen.pipeline import build
calls = []
start = ray.init
ray.init = lambda *args, **kwargs: (calls.append(1), start(*args, **kwargs))[1]

def config(**ablation):
    loaded = load_config(Path('reportgen.yaml'))
    loaded.cache_dir = Path('cache-lazy')
    for key, value in ablation.items():
        setattr(loaded.ablation, key, value)
    return loaded

build(config(alpha=0.01, ray='local'), Path('site-lazy-1'), reproducible=True)
print('cached', len(calls))
build(config(alpha=0.01, seeds=[0, 1, 2], ray='local'), Path('site-lazy-2'), reproducible=True)
print('new masks', len(calls), ray.is_initialized())
"""
    run = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.stdout.split() == ["cached", "0", "new", "masks", "1", "False"], run.stderr[-3000:]
    report = json.loads((project / "site-lazy-1" / "report.json").read_text(encoding="utf-8"))
    assert report["ablation"]["single_heads"]["alpha"] == 0.01
    seeds = json.loads((project / "site-lazy-2" / "report.json").read_text(encoding="utf-8"))
    assert seeds["ablation"]["random_fraction"]["seeds"] == [0, 1, 2]


# over 60 s on a loaded machine: two Ray actors, each importing torch and loading the model
@pytest.mark.slow
@pytest.mark.usefixtures("local_ray")
def test_a_ray_build_equals_a_local_build(project, local_report, local_pictures):
    seen: set[int] = set()

    def progress(stage: str, done: int, _total: int) -> None:
        if stage.startswith("Ablation:") and done:
            seen.update(worker_pids())

    on_ray = built_report(project, "ray", "local", progress, local_pictures)
    assert len(seen) == 2  # the masks ran on two actors
    assert on_ray["ablation"]["single_heads"] is not None and on_ray["ablation"]["importance"] is not None
    assert_same(on_ray, local_report)


@pytest.mark.slow  # two new actors and a third in place of the killed one, each loading torch: ~1 min on a busy machine
@pytest.mark.usefixtures("local_ray")
def test_a_worker_killed_mid_sweep_is_replaced_and_the_report_is_the_same(project, local_report, local_pictures):
    killed: list[tuple[int, int, int]] = []

    def progress(stage: str, done: int, total: int) -> None:
        # importance: 1 gradient step here, then 4 fractions x (1 + 8 orders) masks in stacks on the actors. Its
        # first mask (no head pruned) is the unmasked model's, known already: the stage ticks 2 of 37 before it
        # sends a stack, so the kill comes then on any machine, both actors up and 35 masks to go.
        if stage == "Ablation: importance" and 2 <= done <= total // 2 and not killed:
            pid = worker_pids()[0]
            os.kill(pid, signal.SIGKILL)
            killed.append((pid, done, total))

    on_ray = built_report(project, "killed", "local", progress, local_pictures)
    assert killed, "no worker was killed: the sweep ended first"
    pid, done, total = killed[0]
    assert done < total
    assert not Path(f"/proc/{pid}").exists() or b"MaskWorker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert_same(on_ray, local_report)


@pytest.mark.slow  # the patching stage on a tiny GPT-2, here and in two Ray tasks: ~15 s
@pytest.mark.usefixtures("local_ray")
def test_patching_runs_on_ray_as_it_runs_here(tmp_path):
    """Activation patching's exact sweeps go to Ray as the ablation's masks do (issue 49): the same record. The stage
    itself (reportgen.patching.study), with and without the build's cluster; the build hands it over in
    pipeline.analyses.run_patching."""
    from reportgen.ablation import ray_runner
    from reportgen.config import PatchingSettings, load_section
    from reportgen.kinds import kind_of
    from reportgen.model import loading
    from reportgen.patching import study
    from tests.decoder_checkpoints import make_decoder

    model = make_decoder("gpt2", tmp_path / "model", causal_lm=True)
    settings = load_section(PatchingSettings, "patching", {"enabled": True, "pairs": 6, "tokens": 5,
                                                          "bootstrap_samples": 100, "permutations": 100})
    records, stages = {}, set()
    with loading.file_policy(decoders=True), ray_runner.connected("local") as cluster:
        for name, on in (("here", None), ("ray", cluster)):
            loaded = study.load(settings, kind_of(model), model, "cpu", on)
            record = study.study(loaded, settings, lambda stage, *_: stages.add(stage))
            records[name] = record.model_dump(mode="json", exclude={"seconds"})
    assert {"Patching: heads (Ray)", "Patching: positions (Ray)"} <= stages
    assert_same(records["ray"], records["here"], "patching")
