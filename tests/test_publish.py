"""`reportgen publish` against a local bare repository: the branch's tree is the site, nothing else moves."""

import subprocess
from pathlib import Path

import pytest

from reportgen.errors import OutputError
from reportgen.publish import PublishError, publish


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    bare = tmp_path / "remote.git"
    git("init", "--bare", "-q", str(bare), cwd=tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    git("config", "user.email", "t@example.org", cwd=work)
    git("config", "user.name", "Test", cwd=work)
    (work / "notes.txt").write_text("user's own file\n")
    git("add", "notes.txt", cwd=work)
    git("commit", "-q", "-m", "first", cwd=work)
    git("remote", "add", "origin", str(bare), cwd=work)
    site = work / "site"
    (site / "assets").mkdir(parents=True)
    (site / "index.html").write_text("<h1>home</h1>")
    (site / "assets" / "app.js").write_text("console.log(1)")
    return work, bare, site


def tree_files(bare: Path, branch: str) -> set[str]:
    return set(git("ls-tree", "-r", "--name-only", branch, cwd=bare).splitlines())


def test_publish_pushes_the_site_as_the_branch_tree(repo):
    work, bare, site = repo
    (work / "notes.txt").write_text("uncommitted edit\n")
    status_before = git("status", "--porcelain", cwd=work)
    head_before = git("rev-parse", "HEAD", cwd=work)
    publish(site, work)
    assert tree_files(bare, "gh-pages") == {".nojekyll", "index.html", "assets/app.js"}
    assert git("show", "gh-pages:index.html", cwd=bare) == "<h1>home</h1>"
    # The user's branch, index and working tree are as they were.
    assert git("rev-parse", "HEAD", cwd=work) == head_before
    assert git("status", "--porcelain", cwd=work) == status_before
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=work) == "main"


def test_republish_adds_a_commit_and_removes_deleted_files(repo):
    work, bare, site = repo
    first = publish(site, work)
    (site / "assets" / "app.js").unlink()
    (site / "new.html").write_text("new")
    second = publish(site, work, message="second")
    assert tree_files(bare, "gh-pages") == {".nojekyll", "index.html", "new.html"}
    assert git("rev-parse", "gh-pages^", cwd=bare) == first
    assert git("rev-parse", "gh-pages", cwd=bare) == second


def test_publish_errors_are_clear(repo, tmp_path):
    work, bare, site = repo
    with pytest.raises(OutputError, match="run `reportgen build` first"):
        publish(tmp_path / "nothing", work)
    lonely = tmp_path / "not-a-repo"
    lonely.mkdir()
    with pytest.raises(PublishError, match="not inside a git repository"):
        publish(site, lonely)
    with pytest.raises(PublishError, match="git push failed"):
        publish(site, work, remote="nowhere")


def test_init_writes_a_config_and_a_pages_workflow(tmp_path):
    import sys

    import yaml

    from reportgen.config import load_config

    run = lambda *a: subprocess.run([sys.executable, "-m", "reportgen", *a], cwd=tmp_path,
                                    capture_output=True, text=True)
    assert run("init", "--github-actions").returncode == 0
    workflow = yaml.safe_load((tmp_path / ".github/workflows/reportgen.yml").read_text())
    steps = [step.get("run", step.get("uses")) for step in workflow["jobs"]["build"]["steps"]]
    assert "reportgen build" in steps and any("upload-pages-artifact" in s for s in steps)
    assert load_config(tmp_path / "reportgen.yaml").model == "default"
    again = run("init")
    assert again.returncode == 5 and "exists already" in again.stderr
