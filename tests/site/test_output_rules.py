"""The output rules (issue 10, part 1): reportgen replaces only what it wrote.

Each refused case runs `reportgen build` (by helpers.WarmCli: a fork of a process that imported reportgen
once; as a real subprocess for the case run as another user) in a fresh project that holds canary files
inside and around the output it names (the project, its parent, the cache, a model directory,
hand-written docs, a symlink's target). It asserts exit 5, the one line the docs' table shows
(`<dir>` is the project, `<top>` its parent), and every file and symlink under the parent byte
for byte as it was: nothing deleted, nothing written, not even a lock file. The commands around
the site (serve, publish, init) are held to the same rule, with their own exit codes.

The cases join the bad-input table of docs/pages/reference/errors.md (tests/commands/test_bad_inputs.py
renders it). They are refused before any model is loaded, so the projects need no model. The builds that are allowed
(into reportgen's own previous site, an empty directory, a symlink to a site) run a tiny model
in process.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest
import yaml

from reportgen import errors
from reportgen.config import load_config
from reportgen.pipeline import build
from reportgen.site import output
from tests.helpers import Case, WarmCli, is_progress, pythonpath, symlink, tree, write_config

CONFIG = {"title": "Output rules", "model": "models/tiny", "device": "cpu",
          "examples": [{"text": "the cat sat on the mat."}], "ablation": {"enabled": False}}
SITE = {"site/index.html": "<h1>an old reportgen site</h1>", f"site/{output.MARKER}": output.MARKER_TEXT}
EXIT = errors.EXIT_OUTPUT
# report.json of a site whose build was stopped after its baseline (reportgen.report.BuildProgress)
STOPPED = ('{"progress": {"experiments": [{"name": "baseline", "state": "done"}, {"name": "single_heads", "state": '
           '"running"}], "interrupted": true}}')


@contextmanager
def writable_project(project: Path):
    """The build runs as nobody, who may write beside the output: only root's old site is in the way."""
    project.chmod(0o777)
    yield


@contextmanager
def port_in_use(_project: Path):
    """Another server holds the port (or, if it cannot be bound here, something else does)."""
    import socket

    with socket.socket() as server:
        try:
            server.bind(("127.0.0.1", BUSY_PORT))
            server.listen()
        except OSError:
            pass
        yield


@contextmanager
def git_repo(project: Path):
    """The project as a git repository on branch main, with a branch `docs` of the user's own files."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "first")
    git("branch", "docs")
    yield


BUSY_PORT = 18765
OUTPUT_CASES: list[Case] = [
    Case("output-dot", "`output: .` (the project directory)", {"output": "."}, EXIT,
         "output <dir>: is the project directory; reportgen replaces the whole output "
         "(config field 'output' or --out)"),
    Case("output-empty-string", '`output: ""` (the project directory)', {"output": ""}, EXIT,
         "output <dir>: is the project directory; reportgen replaces the whole output "
         "(config field 'output' or --out)"),
    Case("output-parent", "`output: ..` (the folder around the project)", {"output": ".."}, EXIT,
         "output <dir>/..: contains the project directory <dir>"),
    Case("output-cache", "`output: .reportgen-cache` (the cache)", {"output": ".reportgen-cache"}, EXIT,
         "output <dir>/.reportgen-cache: is the cache directory (config field 'cache_dir'); "
         "choose another output (config field 'output' or --out)"),
    Case("output-contains-cache", "`cache_dir: site/cache` (the cache inside the output)",
         {"cache_dir": "site/cache"}, EXIT,
         "output <dir>/site: contains the cache directory (config field 'cache_dir'): <dir>/site/cache",
         files={**SITE, "site/cache/runs/entry.npz": b"cached"}),
    Case("output-model", "`output` naming the model directory", {"model": "./models/mine", "output": "models/mine"},
         EXIT, "output <dir>/models/mine: is the model directory; choose another output "
         "(config field 'output' or --out)"),
    Case("output-contains-model", "`output` containing the model directory",
         {"model": "./models/mine", "output": "models"}, EXIT,
         "output <dir>/models: contains the model directory: <dir>/models/mine"),
    Case("output-contains-data", "`output` containing a data file (`ablation.data`)",
         {"output": "data", "ablation": {"enabled": True, "data": "data/pairs.tsv"}}, EXIT,
         "output <dir>/data: contains the data file pairs.tsv: <dir>/data/pairs.tsv",
         files={"data/pairs.tsv": "sentence1\tsentence2\tscore\nthe cat\tthe dog\t1.0\n"}),
    # Two corpus files of one name, one inside the output: each path is protected, not each name (the
    # second entry once replaced the first, and the build deleted site/x.txt); both orders.
    Case("output-contains-corpus-same-name", "two corpus files named `x.txt`, the first inside the output",
         {"patterns": {"corpus": [{"path": "site/x.txt"}, {"path": "data/x.txt"}]}}, EXIT,
         "output <dir>/site: contains the corpus file x.txt: <dir>/site/x.txt",
         files={**SITE, "site/x.txt": "a sentence of mine\n", "data/x.txt": "another sentence\n"}),
    Case("output-contains-corpus-same-name-second", "two corpus files named `x.txt`, the second inside the output",
         {"patterns": {"corpus": [{"path": "data/x.txt"}, {"path": "site/x.txt"}]}}, EXIT,
         "output <dir>/site: contains the corpus file x.txt: <dir>/site/x.txt",
         files={**SITE, "site/x.txt": "a sentence of mine\n", "data/x.txt": "another sentence\n"}),
    Case("output-current-dir", "`--out .` with the config in a subfolder", None, EXIT,
         "output .: contains the project directory <dir>/conf",
         files={"conf/output-current-dir.yaml": yaml.safe_dump(CONFIG)},
         argv=["build", "--config", "conf/output-current-dir.yaml", "--out", "."]),
    Case("output-docs", "`output: docs` (hand-written files, not a reportgen site)", {"output": "docs"}, EXIT,
         "output <dir>/docs: is not empty and is not a reportgen site (no .reportgen-site file); reportgen "
         "replaces only sites it wrote: choose another output or empty it",
         files={"docs/index.md": "# My own docs\n"}),
    Case("output-symlink-elsewhere", "`site` a symlink to another folder", {}, EXIT,
         "output <dir>/site (resolves to <top>/elsewhere): is not empty and is not a reportgen site "
         "(no .reportgen-site file); reportgen replaces only sites it wrote: choose another output or empty it",
         setup=symlink("site", "../elsewhere")),
    Case("output-symlink-loop", "`output` a symlink loop", {}, EXIT, "output <dir>/site: is a symlink loop",
         setup=symlink("site", "site")),
    Case("output-is-file", "output that is a file", {}, EXIT,
         "output notes.txt: is a file, not a directory (config field 'output' or --out)", out="notes.txt"),
    Case("output-under-file", "output under a file (not writable, even as root)", {}, EXIT,
         "output notes.txt/site: parent <dir>/notes.txt is a file, not a directory", out="notes.txt/site"),
    Case("output-read-only", "output in a read-only place (/proc/sys, refused to root too)", {}, EXIT,
         "output /proc/sys/reportgen-site: directory /proc/sys is not writable",
         out="/proc/sys/reportgen-site", needs="readonly-proc"),
    Case("output-old-site-not-writable", "an old `site/` the user cannot write (build as another user)", {}, EXIT,
         "output <dir>/site: the old site cannot be replaced: <dir>/site is not writable",
         files=SITE, needs="nobody", setup=writable_project),
    Case("output-staging-not-ours", "a `.site.building` folder reportgen did not make", {}, EXIT,
         "output <dir>/site: <dir>/.site.building exists and was not made by reportgen; remove it or choose "
         "another output", files={**SITE, ".site.building/mine.txt": "not reportgen's\n"}),
    # -- the commands around the site ------------------------------------------------------------------
    Case("serve-port-in-use", "`reportgen serve` on a port in use", {}, EXIT,
         f"cannot serve on 127.0.0.1:{BUSY_PORT}: Address already in use; is another server using it? "
         "pass --port with another", files=SITE, setup=port_in_use,
         argv=["serve", "--config", "serve-port-in-use.yaml", "--port", str(BUSY_PORT)]),
    Case("serve-port-out-of-range", "`reportgen serve --port 70000`", {}, errors.EXIT_CONFIG,
         "--port 70000: out of range; give a port from 1 to 65535", files=SITE,
         argv=["serve", "--config", "serve-port-out-of-range.yaml", "--port", "70000"]),
    Case("serve-not-a-site", "`reportgen serve` on an output that is not a reportgen site", {"output": "docs"}, EXIT,
         "no reportgen site at <dir>/docs; run `reportgen build` first", files={"docs/index.html": "<h1>mine</h1>"},
         argv=["serve", "--config", "serve-not-a-site.yaml"]),
    Case("publish-checked-out", "`reportgen publish --branch main` while main is checked out", {},
         errors.EXIT_PUBLISH, "branch 'main' is checked out here; publishing would replace your working branch "
         "with the site: use --branch gh-pages (or another branch)", files=SITE, setup=git_repo,
         argv=["publish", "--config", "publish-checked-out.yaml", "--branch", "main"]),
    Case("publish-foreign-branch", "`reportgen publish --branch docs`, a branch that is not a reportgen site", {},
         errors.EXIT_PUBLISH, "branch 'docs' exists and its tree is not a reportgen site (no .reportgen-site); "
         "refusing to replace it: delete the branch or use --branch with another name", files=SITE,
         setup=git_repo, argv=["publish", "--config", "publish-foreign-branch.yaml", "--branch", "docs"]),
    Case("publish-stopped-site", "`reportgen publish` of a site whose build was stopped (Ctrl+C)", {},
         errors.EXIT_PUBLISH, "<dir>/site is a partial site: it was stopped before it finished (experiments done: "
         "baseline); finish it with `reportgen build` (it resumes from the cache), or publish it as it is with "
         "--partial", files={**SITE, "site/report.json": STOPPED}, setup=git_repo,
         argv=["publish", "--config", "publish-stopped-site.yaml"]),
    Case("init-github-is-file", "`reportgen init --github-actions` when `.github` is a file", None, EXIT,
         ".github/workflows/reportgen.yml: .github is a file, not a directory; nothing was written",
         files={".github": "a file\n"}, argv=["init", "--github-actions"]),
    Case("init-workflows-dangling", "`reportgen init --github-actions` when `.github/workflows` is a dangling symlink",
         None, EXIT, ".github/workflows/reportgen.yml: .github/workflows is a symlink to nowhere, which does not "
         "exist; nothing was written", files={".github/notes.md": "mine\n"},
         setup=symlink(".github/workflows", "nowhere"), argv=["init", "--github-actions"]),
]


def skip_reason(case: Case) -> str | None:
    if case.needs == "readonly-proc" and (not Path("/proc/sys").is_dir() or os.access("/proc/sys", os.W_OK)):
        return "/proc/sys is writable here"
    if case.needs == "nobody" and (os.geteuid() != 0 or not shutil.which("setpriv")):
        return "needs root and setpriv to run the build as nobody"
    return None


def snapshot(top: Path) -> dict[str, bytes | str]:
    """Every file's bytes and every symlink's target under `top` (directories by their entries)."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            key = str(path.relative_to(top))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_file():
                found[key] = path.read_bytes()
            else:
                found[key] = "dir"
    return found


@pytest.fixture
def top():
    """A world-readable folder (the build as nobody must read the project), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="rg-output-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_project(top: Path, case: Case) -> Path:
    project = top / "project"
    canaries = {
        "notes.txt": "the user's notes\n",
        ".reportgen-cache/runs/entry.npz": b"a cached run",
        "models/mine/config.json": '{"model_type": "bert"}',
        "models/mine/model.safetensors": b"weights",
    }
    for name, content in {**canaries, **case.files}.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    (top / "around.txt").write_text("beside the project\n")
    (top / "elsewhere").mkdir()
    (top / "elsewhere" / "precious.txt").write_text("another folder's file\n")
    if isinstance(case.config, dict):
        (project / case.config_name).write_text(yaml.safe_dump({**CONFIG, **case.config}), encoding="utf-8")
    for path in [project, *project.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    return project


def case_env(project: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": pythonpath(), "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}
    return env if project is None else {**env, "HOME": str(project), "HF_HOME": str(project / "hf-home")}


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[WarmCli]:
    warm = WarmCli(case_env(None), tmp_path_factory.mktemp("warm-cli"))
    yield warm
    warm.close()


def run(project: Path, case: Case, cli: WarmCli) -> subprocess.CompletedProcess:
    argv = case.argv or ["build", "--config", case.config_name, *(["--out", case.out] if case.out else [])]
    if case.needs != "nobody":
        return cli.run(argv, project, case_env(project), timeout=120)
    user = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    return subprocess.run([*user, sys.executable, "-m", "reportgen", *argv], cwd=project, env=case_env(project),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[c.id for c in OUTPUT_CASES])
def test_refused_output_changes_nothing(case: Case, top: Path, cli: WarmCli):
    if reason := skip_reason(case):
        pytest.skip(reason)
    project = make_project(top, case)
    with (case.setup or nullcontext)(project):
        before = snapshot(top)
        done = run(project, case, cli)
        after = snapshot(top)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == case.exit, done.stderr
    lines = [line.replace(str(project), "<dir>").replace(str(top), "<top>")
             for line in done.stderr.splitlines() if line.strip() and not is_progress(line)]
    assert lines == [f"error: {case.answer}"]
    assert after == before  # canaries inside and around the target, byte for byte; no lock, no staging


# -- what is allowed ------------------------------------------------------------------------------
TINY = """\
title: Output rules
model: {model}
device: cpu
examples:
  - text: the cat sat on the mat.
patterns:
  similarity: false
ablation:
  enabled: false
"""


@pytest.mark.slow
def test_rebuilding_into_its_own_site_works_and_stays_reproducible(tmp_path, tiny_model):
    config = load_config(write_config(tmp_path, TINY.format(model=tiny_model)))
    build(config, reproducible=True)
    first = tree(tmp_path / "site")
    assert first[output.MARKER] == output.MARKER_TEXT.encode()
    build(config, reproducible=True)
    assert tree(tmp_path / "site") == first
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site")) == []


@pytest.mark.slow
def test_empty_directory_and_symlink_to_a_site_are_built_into(tmp_path, tiny_model):
    config = load_config(write_config(tmp_path, TINY.format(model=tiny_model)))
    (tmp_path / "empty").mkdir()
    build(config, tmp_path / "empty", reproducible=True)
    assert output.is_site(tmp_path / "empty")
    (tmp_path / "link").symlink_to("empty")
    build(config, tmp_path / "link", reproducible=True)
    assert (tmp_path / "link").is_symlink() and output.is_site(tmp_path / "empty")
    # the lock lives beside the real directory (and is gone once the build ended)
    assert output.check(tmp_path / "link", tmp_path, []).lock == tmp_path / ".empty.lock"
    assert not (tmp_path / ".link.lock").exists() and not (tmp_path / ".empty.lock").exists()


def test_no_glob_over_user_text_and_a_killed_swap_is_undone(tmp_path, monkeypatch):
    """`--out 's*'` once deleted another build's staging through a glob; names are exact now.
    A build killed between the two renames of the swap leaves `.NAME.previous`: the next
    build under the lock puts it back."""
    monkeypatch.chdir(tmp_path)
    other = tmp_path / ".site.building"
    other.mkdir()
    (other / output.STAGING_MARKER).write_text(output.MARKER_TEXT)
    (other / "page.html").write_text("another build's staging")
    starred = output.check(Path("s*"), tmp_path / "project", [])
    with output.exclusive(starred):
        pass
    assert (other / "page.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site.building"]

    site = output.check(Path("site"), tmp_path / "project", [])
    old = tmp_path / ".site.previous"
    old.mkdir()
    output.mark(old)
    (old / "index.html").write_text("the old site")
    with output.exclusive(site):
        assert (tmp_path / "site" / "index.html").read_text() == "the old site"
        assert not old.exists() and not other.exists()  # our own leftovers, cleaned under the lock


def _site(path: Path, text: str) -> Path:
    path.mkdir()
    output.mark(path)
    (path / "index.html").write_text(text)
    return path


def test_partial_sites_stand_in_for_the_old_one_which_a_failed_build_gets_back(tmp_path):
    """Issue 32: the first partial site keeps the old site as `.NAME.before`; a failure puts it back, a
    finished build removes it, and a build killed meanwhile leaves its partial site (the next one cleans up)."""
    out = output.check(tmp_path / "site", tmp_path / "project", [])
    for ending in ("fails", "finishes"):
        _site(tmp_path / "site", "the old site")
        with pytest.raises(OSError) if ending == "fails" else nullcontext(), output.standing_in(out):
            for text in ("partial 1", "partial 2"):
                output.swap(_site(tmp_path / "new", text), out, partial=True)
                assert (out.before / "index.html").read_text() == "the old site"
            if ending == "fails":
                raise OSError(28, "No space left on device")
            output.swap(_site(tmp_path / "new", "finished"), out)
        expected = "the old site" if ending == "fails" else "finished"
        assert (tmp_path / "site" / "index.html").read_text() == expected
        assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
        shutil.rmtree(tmp_path / "site")

    _site(tmp_path / "site", "a killed build's partial site")
    _site(out.before, "the old site")
    with output.exclusive(out):
        assert not out.before.exists()
    assert (tmp_path / "site" / "index.html").read_text() == "a killed build's partial site"


def test_a_user_directory_named_like_before_is_refused(tmp_path):
    (tmp_path / ".site.before").mkdir()
    (tmp_path / ".site.before" / "notes.txt").write_text("mine")
    with pytest.raises(errors.OutputError, match=r"\.site\.before exists and was not made by reportgen"):
        output.check(tmp_path / "site", tmp_path / "project", [])
    assert (tmp_path / ".site.before" / "notes.txt").read_text() == "mine"


def test_the_lock_refuses_a_second_build_and_is_gone_when_the_build_ends(tmp_path):
    """Issue 48: `.site.lock` stayed beside the output after every build. It is removed at the end, while still
    held, and a build that opened the file just before it went locks the new one instead of the removed one."""
    from reportgen.errors import BusyError

    out = output.check(tmp_path / "site", tmp_path, [])
    with output.exclusive(out):
        assert out.lock.exists()
        with pytest.raises(BusyError, match="another reportgen build is writing"), output.exclusive(out):
            pass
        stale = open(out.lock, "a")  # a build that opened the lock file just before this one removes it
    assert not out.lock.exists()
    with stale, output.exclusive(out):  # the new build locks the file at the path, not the removed one
        assert out.lock.exists() and os.stat(out.lock).st_ino != os.fstat(stale.fileno()).st_ino
        fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the removed file's lock excludes nothing now
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_a_file_of_the_users_named_like_the_lock_is_kept(tmp_path):
    """The lock file is removed only when it is empty, as reportgen's are: a user's own `.site.lock` with text in
    it is locked (opened for appending, nothing written) and left as it was."""
    out = output.check(tmp_path / "site", tmp_path, [])
    out.lock.write_text("my notes\n", encoding="utf-8")
    with output.exclusive(out):
        pass
    assert out.lock.read_text(encoding="utf-8") == "my notes\n"
