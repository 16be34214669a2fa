"""`reportgen cache info` and `reportgen cache prune`: build records, what is kept, and what is never touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reportgen.cache.info import describe, human
from reportgen.cache.prune import plan_prune, prune
from reportgen.cache.store import TAG, Cache, claim
from reportgen.cache.usage import read_records, recording
from reportgen.config import load_config
from reportgen.errors import OutputError
from reportgen.pipeline import build
from tests.helpers import write_config

FP, FP2 = "0123456789abcdef", "fedcba9876543210"  # model fingerprints (16 hex digits), as ablation folders use
KEYS = [f"{digit * 24}" for digit in "abcdef"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path):
    """A project whose cache holds two model runs, model info, the ablation results of two data sets of one
    model (two stage records, two masks each) and of another model (one mask): 10 entries."""
    project = tmp_path / "project"
    project.mkdir()
    write_config(project, "title: Housekeeping\nmodel: ./no-model-needed\n")
    cache = Cache(project / ".reportgen-cache")
    cache.write_bytes(cache.root / "runs" / f"{KEYS[0]}.npz", b"run 0" * 100)
    cache.write_bytes(cache.root / "runs" / f"{KEYS[1]}.npz", b"run 1" * 300)
    cache.put_json("info", KEYS[2], {"model_type": "bert", "layers": 2, "heads": 4, "parameters": 123456,
                                     "fingerprint": FP})
    for data in ("aaaaaaaaaaaaaaaa-zero", "bbbbbbbbbbbbbbbb-zero"):
        for key in KEYS[3:5]:
            cache.write_bytes(cache.root / "ablation" / FP / data / f"mask-{key}.npy", data.encode() * 10)
    cache.write_bytes(cache.root / "ablation" / FP2 / "aaaaaaaaaaaaaaaa-zero" / f"mask-{KEYS[3]}.npy", b"other" * 42)
    for key in KEYS[4:6]:
        cache.put_json(f"ablation/{FP}", f"record-{key}", {"record": key})
    claim(cache.root)  # as the build that wrote them did: the folder is reportgen's cache (CACHEDIR.TAG)
    return project


def entry(project: Path, relative: str) -> Path:
    return project / ".reportgen-cache" / relative


def record_a_build(project: Path, *reads: str, writes: tuple[str, ...] = ()) -> None:
    """What a build does to the cache, inside the recording `reportgen build` opens: read some entries, write some."""
    config = load_config(project / "reportgen.yaml")
    cache = Cache(config.cache_dir)
    time.sleep(0.05)  # the entries written by the fixture are older than the build, as they would be
    with recording(config):
        for relative in reads:
            assert cache.read_bytes(cache.root / relative) is not None
        for relative in writes:
            cache.write_bytes(cache.root / relative, b"new")


def test_a_build_records_the_entries_it_read_or_wrote(project):
    record_a_build(project, f"runs/{KEYS[0]}.npz", writes=(f"patterns/{KEYS[5]}.json",))
    (record,) = read_records(project / ".reportgen-cache")
    assert record.entries == {f"runs/{KEYS[0]}.npz", f"patterns/{KEYS[5]}.json"}
    assert record.complete and record.config == str(project / "reportgen.yaml") and record.models == ["no-model-needed"]


def test_a_failed_build_keeps_the_previous_record_too(project):
    record_a_build(project, f"runs/{KEYS[0]}.npz")
    config = load_config(project / "reportgen.yaml")
    cache = Cache(config.cache_dir)
    with pytest.raises(KeyboardInterrupt), recording(config):
        cache.read_bytes(cache.root / "runs" / f"{KEYS[1]}.npz")
        raise KeyboardInterrupt
    (record,) = read_records(config.cache_dir)
    assert not record.complete and record.entries == {f"runs/{KEYS[0]}.npz", f"runs/{KEYS[1]}.npz"}


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
def test_prune_removes_what_the_latest_build_did_not_use(project):
    stage_record = f"ablation/{FP}/record-{KEYS[5]}.json"  # a warm build reads the ablation stage's record only
    record_a_build(project, f"runs/{KEYS[0]}.npz", f"info/{KEYS[2]}.json", stage_record)
    done = run_cli("cache", "prune", "--dry-run", cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"would remove runs/{KEYS[1]}.npz" in done.stdout
    assert (project / ".reportgen-cache" / "runs" / f"{KEYS[1]}.npz").is_file()  # a dry run removes nothing

    done = run_cli("cache", "prune", cwd=project)
    assert done.returncode == 0, done.stderr
    cache = project / ".reportgen-cache"
    left = sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file())
    # The used model's per-mask results stay whole (a changed setting needs them again), its old stage
    # record goes; so do the unused run and the other model's results, with their emptied folders.
    masks = [f"ablation/{FP}/{data}-zero/mask-{key}.npy" for data in ("a" * 16, "b" * 16) for key in KEYS[3:5]]
    assert TAG in left  # the cache directory's tag stays
    assert [name for name in left if not name.startswith("used/") and name != TAG] == [
        *masks, stage_record, f"info/{KEYS[2]}.json", f"runs/{KEYS[0]}.npz"]
    assert not (cache / "ablation" / FP2).exists()
    removed = (1500 + 65) + (210 + 65) + (len(json.dumps({"record": KEYS[4]})) + 65)  # each after its checksum line
    assert done.stdout.startswith(f"Removed 3 entries ({human(removed)}) from {cache}; ")
    assert "kept 8 entries" in done.stdout and str(project / "reportgen.yaml") in done.stdout


def test_prune_never_touches_what_reportgen_did_not_write(project, tmp_path):
    outside = Cache(tmp_path / "elsewhere")  # valid entries outside the cache, reachable through links
    outside.write_bytes(outside.root / "runs" / f"{KEYS[5]}.npz", b"not this cache's")
    cache = project / ".reportgen-cache"
    foreign = {"runs/notes.txt": b"mine", f"runs/{'9' * 24}.npz": b"no checksum line\n",
               f"My Folder/{KEYS[5]}.npz": (outside.root / "runs" / f"{KEYS[5]}.npz").read_bytes()}
    for relative, payload in foreign.items():
        (cache / relative).parent.mkdir(parents=True, exist_ok=True)
        (cache / relative).write_bytes(payload)
    (cache / "linked").symlink_to(outside.root, target_is_directory=True)
    (cache / "runs" / f"{'8' * 24}.npz").symlink_to(outside.root / "runs" / f"{KEYS[5]}.npz")
    record_a_build(project, f"runs/{KEYS[0]}.npz")
    # Through a symlinked cache directory: resolved, and the same rules apply to its target.
    (tmp_path / "real-cache").mkdir()
    os.rename(cache, tmp_path / "real-cache" / "c")
    cache.symlink_to(tmp_path / "real-cache" / "c", target_is_directory=True)

    plan = plan_prune(load_config(project / "reportgen.yaml"))
    assert len(plan.left_alone) == 5 and len(plan.remove) == 9
    prune(plan)
    assert cache.is_symlink()
    assert all((cache / relative).read_bytes() == payload for relative, payload in foreign.items())
    assert (cache / "linked" / "runs" / f"{KEYS[5]}.npz").is_file() and (cache / "runs" / f"{'8' * 24}.npz").is_file()
    assert (outside.root / "runs" / f"{KEYS[5]}.npz").is_file()
    assert not (cache / "runs" / f"{KEYS[1]}.npz").exists() and (cache / "runs" / f"{KEYS[0]}.npz").is_file()


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_prune_needs_a_record_of_the_config_and_removes_nothing_without_one(project):
    done = run_cli("cache", "prune", cwd=project)
    assert done.returncode == OutputError.exit_code
    assert done.stderr.strip().splitlines() == [
        f"error: the cache {project / '.reportgen-cache'} holds no record of a build of {project / 'reportgen.yaml'}; "
        "build it once with this version of reportgen, then prune (nothing was removed)"]
    assert len([p for p in (project / ".reportgen-cache").rglob("*") if p.is_file() and p.name != TAG]) == 10


def test_prune_keeps_other_current_configs_and_forgets_deleted_ones(project):
    (project / "other.yaml").write_text("title: Other\n")
    (project / "gone.yaml").write_text("title: Gone\n")
    config = load_config(project / "reportgen.yaml")
    cache = Cache(config.cache_dir)
    for name, relative in [("other.yaml", f"runs/{KEYS[1]}.npz"), ("gone.yaml", f"info/{KEYS[2]}.json")]:
        with recording(load_config(project / name)):
            cache.read_bytes(cache.root / relative)
    (project / "gone.yaml").unlink()
    record_a_build(project, f"runs/{KEYS[0]}.npz")
    plan = plan_prune(config)
    assert sorted(record.config for record in plan.current) == [str(project / "other.yaml"),
                                                                  str(project / "reportgen.yaml")]
    removed = {entry.relative for entry in prune(plan)}
    assert f"info/{KEYS[2]}.json" in removed and plan.stale[0].path.relative_to(cache.root).as_posix() in removed
    assert (cache.root / "runs" / f"{KEYS[1]}.npz").is_file() and (cache.root / "runs" / f"{KEYS[0]}.npz").is_file()


def test_an_entry_used_after_the_newest_record_is_kept(project):
    record_a_build(project, f"runs/{KEYS[0]}.npz")
    time.sleep(0.05)
    Cache(project / ".reportgen-cache").touch(entry(project, f"runs/{KEYS[1]}.npz"))  # a build running now
    plan = plan_prune(load_config(project / "reportgen.yaml"))
    assert f"runs/{KEYS[1]}.npz" in {kept.relative for kept in plan.keep}


def test_cache_info_shows_sizes_per_model_and_kind(project):
    record_a_build(project, f"runs/{KEYS[0]}.npz", f"info/{KEYS[2]}.json")
    text = describe(project / ".reportgen-cache")
    lines = text.splitlines()
    assert lines[0].startswith(f"Cache {project / '.reportgen-cache'}: ") and lines[0].endswith(" in 11 entries")
    header = lines[2].split()
    assert header == ["kind", FP[:8], FP2[:8], "?", "total"]
    rows = {line.split("  ")[0].strip(): line for line in lines[3:9]}
    assert set(rows) == {"model runs", "ablation masks", "ablation records", "model info", "build records", "total"}
    # The ablation entries are their model's by folder name; the used run by the build record.
    assert rows["ablation masks"].split()[2:] == [*human(4 * 275).split(), *human(275).split(), "-",
                                                  *human(5 * 275).split()]
    assert rows["model runs"].split()[2:] == [*human(565).split(), "-", *human(1565).split(), *human(2130).split()]
    assert f"{FP[:8]}  {FP}  no-model-needed (bert, 2 layers x 4 heads, 0.1M parameters)" in lines
    assert f"{FP2[:8]}  {FP2}  unnamed (no model-info entry)" in lines
    assert f"Build of {project / 'reportgen.yaml'}: " in text and "used 2 entries" in text
    assert "Unused by the latest build of every current config: 8 entries" in text


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_cache_info_without_a_cache_says_so(tmp_path):
    write_config(tmp_path, "title: Nothing built\n")
    done = run_cli("cache", "info", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == f"No cache at {tmp_path / '.reportgen-cache'} yet " \
                                                            "(a build creates it)."


@pytest.mark.slow
def test_prune_after_a_real_rebuild_keeps_everything_the_next_build_needs(tmp_path, tiny_model):
    text = (f"title: Tiny\nmodel: {tiny_model}\ndevice: cpu\nmax_length: 64\n"
            "examples:\n  - text: the cat sat on the mat.\n  - text: i went to the store.\n"
            "ablation:\n  limit: 20\n  seeds: [0]\n  fractions: [0.0, 0.5]\n  bootstrap_samples: 100\n"
            "  permutations: 100\n")
    write_config(tmp_path, text)
    config = load_config(tmp_path / "reportgen.yaml")
    with recording(config):  # what `reportgen build` does (a no-op when build() records itself)
        assert build(config).computed == 2
    write_config(tmp_path, text.replace("the cat sat", "a dog sat"))
    config = load_config(tmp_path / "reportgen.yaml")
    with recording(config):
        assert build(config).computed == 1
    plan = plan_prune(config)
    # The old example's run and the statistics over the old examples go; the model's info and ablation stay.
    removed = [entry.relative.split("/")[0] for entry in prune(plan)]
    assert removed.count("runs") == 1 and removed.count("patterns") == 1
    assert not {"info", "ablation", "used"} & set(removed)
    with recording(config):
        again = build(config)
    assert (again.computed, again.cached) == (0, 2)
    assert plan_prune(config).remove == []  # the next build used everything prune kept
    (record,) = read_records(config.cache_dir)
    kinds = {relative.split("/")[0] for relative in record.entries}
    assert record.complete and {"runs", "info", "patterns", "ablation"} <= kinds and "used" not in kinds


# over 60 s on a loaded machine: `reportgen build` and `reportgen cache prune` subprocesses
@pytest.mark.slow
def test_reportgen_build_records_its_cache_use(tmp_path, tiny_model):
    write_config(tmp_path, f"title: Recorded\nmodel: {tiny_model}\ndevice: cpu\nmax_length: 64\n"
                           "examples:\n  - text: the cat sat on the mat.\nablation:\n  enabled: false\n")
    done = run_cli("build", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = read_records(tmp_path / ".reportgen-cache")
    assert record.complete and record.config == str(tmp_path / "reportgen.yaml")
    assert {relative.split("/")[0] for relative in record.entries} >= {"runs", "info", "patterns"}
    pruned = run_cli("cache", "prune", cwd=tmp_path)
    assert pruned.returncode == 0 and pruned.stdout.startswith("Removed 0 entries (0 B)"), pruned.stderr
