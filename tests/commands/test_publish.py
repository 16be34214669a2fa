"""`reportgen publish` against a local bare repository: the branch's tree is the site, nothing else moves."""

import re
import subprocess
from pathlib import Path

import pytest

from reportgen.commands.publish import PublishError, publish
from reportgen.errors import OutputError
from reportgen.site.output import MARKER, mark

# Every test here drives git in subprocesses (repositories, commits, pushes): the slow tier.
pytestmark = pytest.mark.slow


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
    mark(site)
    return work, bare, site


def tree_files(bare: Path, branch: str) -> set[str]:
    return set(git("ls-tree", "-r", "--name-only", branch, cwd=bare).splitlines())


def test_publish_pushes_the_site_as_the_branch_tree(repo):
    work, bare, site = repo
    (work / "notes.txt").write_text("uncommitted edit\n")
    status_before = git("status", "--porcelain", cwd=work)
    head_before = git("rev-parse", "HEAD", cwd=work)
    publish(site, work)
    assert tree_files(bare, "gh-pages") == {".nojekyll", MARKER, "index.html", "assets/app.js"}
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
    assert tree_files(bare, "gh-pages") == {".nojekyll", MARKER, "index.html", "new.html"}
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
    unmarked = tmp_path / "unmarked"
    unmarked.mkdir()
    (unmarked / "index.html").write_text("<h1>someone else's</h1>")
    with pytest.raises(OutputError, match="no reportgen site"):
        publish(unmarked, work)


def test_a_failed_push_leaves_the_local_branch_and_shows_all_of_git(repo):
    work, bare, site = repo
    first = publish(site, work)
    (site / "index.html").write_text("<h1>second</h1>")
    with pytest.raises(PublishError, match=r"git push failed \(exit \d+\); git said:") as caught:
        publish(site, work, remote="nowhere")
    detail = caught.value.detail.splitlines()
    assert len(detail) >= 2 and any("nowhere" in line for line in detail)  # git's whole message, not its last line
    assert git("rev-parse", "gh-pages", cwd=work) == first  # the local branch did not move


def test_publish_refuses_branches_that_are_not_reportgen_sites(repo):
    work, bare, site = repo
    with pytest.raises(PublishError, match="branch 'main' is checked out here"):
        publish(site, work, branch="main")
    git("branch", "docs", cwd=work)  # a branch of the user's own files
    before = git("rev-parse", "docs", cwd=work)
    with pytest.raises(PublishError, match="branch 'docs' exists and its tree is not a reportgen site"):
        publish(site, work, branch="docs")
    assert git("rev-parse", "docs", cwd=work) == before
    assert "docs" not in git("ls-remote", "--heads", str(bare), cwd=work)
    publish(site, work, branch="docs-site")  # a new branch is fine, and is a reportgen site from then on
    publish(site, work, branch="docs-site")


@pytest.mark.parametrize("argument, message", [
    ({"branch": "--orphan"}, "--branch '--orphan' is not a valid branch name"),
    ({"branch": "a..b"}, "--branch 'a..b' is not a valid branch name"),
    ({"branch": "gh pages"}, "--branch 'gh pages' is not a valid branch name"),
    ({"branch": "refs/tags/v1"}, "--branch 'refs/tags/v1' is a ref but not a branch; give a branch name"),
    ({"branch": "refs/remotes/origin/gh-pages"}, "--branch 'refs/remotes/origin/gh-pages' is a ref but not a branch"),
    ({"branch": "refs/heads/"}, "--branch '' is not a valid branch name"),
    ({"remote": "--receive-pack=touch pwned"}, "--remote '--receive-pack=touch pwned' is not a remote"),
    ({"remote": ""}, "--remote '' is not a remote"),
    ({"message": ""}, "--message is empty"),
    ({"message": "  "}, "--message is empty"),
])
def test_names_reach_git_as_names_never_as_options(repo, argument, message):
    """Issue 27: `--branch --orphan` made a branch named --orphan, `--remote --receive-pack=...` reached git
    as an option, `-m ''` published with an empty message. Each is refused, and nothing was written."""
    work, bare, site = repo
    before = git("for-each-ref", cwd=work)
    with pytest.raises(PublishError, match=re.escape(message)):
        publish(site, work, **argument)
    assert git("for-each-ref", cwd=work) == before and not (work / "pwned").exists()
    assert git("ls-remote", "--heads", str(bare), cwd=work) == ""


def test_a_branch_given_as_its_full_ref_is_that_branch(repo):
    """Issue 48: `--branch refs/heads/main` was taken literally and made a branch named refs/heads/refs/heads/main,
    locally and on the remote. It names the branch main."""
    work, bare, site = repo
    publish(site, work, branch="refs/heads/site-pages")
    assert git("ls-remote", "--heads", str(bare), cwd=work).split()[-1] == "refs/heads/site-pages"
    assert git("for-each-ref", "--format=%(refname)", "refs/heads/", cwd=work).splitlines() == [
        "refs/heads/main", "refs/heads/site-pages"]
    assert tree_files(bare, "site-pages") == {".nojekyll", MARKER, "index.html", "assets/app.js"}


@pytest.mark.parametrize("progress", [{"experiments": [{"name": "single_heads", "state": "done"}], "interrupted": True},
                                      {"experiments": [], "interrupted": False}, "not a mapping"],
                         ids=["stopped", "running", "damaged"])
def test_a_partial_site_is_published_only_when_asked(repo, progress):
    """Issue 48: a stopped build's site, which says so (test_progressive_build), was pushed without a word."""
    import json
    import sys

    work, bare, site = repo
    (site / "report.json").write_text(json.dumps({"progress": progress}))
    (work / "reportgen.yaml").write_text("output: site\n")
    with pytest.raises(PublishError, match=r"is a partial site: .*; finish it with `reportgen build`.*--partial"):
        publish(site, work)
    assert not git("for-each-ref", "refs/heads/gh-pages", cwd=work)  # nothing committed, nothing pushed
    command = [sys.executable, "-m", "reportgen", "publish"]
    refused = subprocess.run(command, cwd=work, capture_output=True, text=True)
    assert refused.returncode == 7 and len(refused.stderr.splitlines()) == 1
    if progress != "not a mapping":
        said = "was stopped before it finished (experiments done: single heads)" if progress["interrupted"] else \
            "was written while its build still ran (experiments done: none)"
        assert said in refused.stderr
    assert subprocess.run([*command, "--partial"], cwd=work, capture_output=True, text=True).returncode == 0
    assert "report.json" in tree_files(bare, "gh-pages")


def test_publish_command_prints_one_line_then_git_indented(repo):
    import sys

    work, bare, site = repo
    (work / "reportgen.yaml").write_text("output: site\n")
    done = subprocess.run([sys.executable, "-m", "reportgen", "publish", "--remote", "nowhere"], cwd=work,
                          capture_output=True, text=True)
    lines = done.stderr.splitlines()
    assert done.returncode == 7 and "Traceback" not in done.stderr
    assert lines[0].startswith("error: git push failed") and len(lines) >= 3
    assert all(line.startswith("    ") for line in lines[1:])


def test_init_writes_a_config_and_a_pages_workflow(tmp_path):
    import sys

    import yaml

    from reportgen.config import load_config

    def run(*args):
        return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=tmp_path, capture_output=True, text=True)

    assert run("init", "--github-actions").returncode == 0
    workflow = yaml.safe_load((tmp_path / ".github/workflows/reportgen.yml").read_text())
    steps = [step.get("run", step.get("uses")) for step in workflow["jobs"]["build"]["steps"]]
    assert "reportgen build" in steps and any("upload-pages-artifact" in s for s in steps)
    assert load_config(tmp_path / "reportgen.yaml").model == "default"
    again = run("init")
    assert again.returncode == 5 and "exists already" in again.stderr


def test_init_writes_nothing_unless_it_can_write_everything(tmp_path):
    import sys

    (tmp_path / ".github").write_text("a file where the workflow folder would go\n")
    done = subprocess.run([sys.executable, "-m", "reportgen", "init", "--github-actions"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 5 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("error: .github/workflows/reportgen.yml: .github is a file, not a directory; "
                                   "nothing was written")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".github"]


@pytest.mark.parametrize("force", [False, True])
def test_init_never_writes_through_a_symlink(tmp_path, force):
    """A dangling reportgen.yaml symlink once led init to write a file elsewhere (issue 27)."""
    import sys

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere.yaml"
    project.mkdir()
    (project / "reportgen.yaml").symlink_to(elsewhere)
    done = subprocess.run([sys.executable, "-m", "reportgen", "init", *(["--force"] if force else [])], cwd=project,
                          capture_output=True, text=True)
    assert done.returncode == 5 and done.stderr.strip() == (
        f"error: reportgen.yaml is a symlink (to {elsewhere}); init writes only files of its own: remove the link "
        "(nothing was written)")
    assert not elsewhere.exists() and (project / "reportgen.yaml").is_symlink()
