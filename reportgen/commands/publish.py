"""`reportgen publish`: the built site onto a gh-pages branch, as `mkdocs gh-deploy` does.

The commit is made with git plumbing and a temporary index, so the user's working
tree, index and other branches are never touched; then the branch is pushed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from reportgen.errors import EXIT_PUBLISH, OutputError, ReportgenError
from reportgen.site.output import MARKER, is_site


class PublishError(ReportgenError):
    exit_code = EXIT_PUBLISH


def _git(*args: str, cwd: Path, env: dict | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    except FileNotFoundError:
        raise PublishError("git is not installed; reportgen publish needs it") from None
    if done.returncode != 0:
        raise PublishError(f"git {args[0]} failed (exit {done.returncode}); git said:",
                           detail=(done.stderr or done.stdout).strip() or "(no output)")
    return done.stdout.strip()


def _branch_commit(top: Path, branch: str) -> str:
    return subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"],
                          cwd=top, capture_output=True, text=True).stdout.strip()


def _check_branch(top: Path, branch: str, parent: str) -> None:
    """The branch that receives the site must be reportgen's: never the one checked out, never
    one whose tree is something else (a gh-pages of hand-written docs, say)."""
    head = subprocess.run(["git", "symbolic-ref", "--quiet", "--short", "HEAD"], cwd=top,
                          capture_output=True, text=True).stdout.strip()
    if head == branch:
        raise PublishError(f"branch '{branch}' is checked out here; publishing would replace your working "
                           "branch with the site: use --branch gh-pages (or another branch)")
    if parent and subprocess.run(["git", "cat-file", "-e", f"{parent}:{MARKER}"], cwd=top,
                                 capture_output=True).returncode != 0:
        raise PublishError(f"branch '{branch}' exists and its tree is not a reportgen site (no {MARKER}); "
                           "refusing to replace it: delete the branch or use --branch with another name")


def branch_name(branch: str) -> str:
    """The branch a --branch value names: `refs/heads/main` is the branch `main` (taken literally, it made a
    branch called refs/heads/refs/heads/main); any other ref (`refs/tags/...`, `refs/remotes/...`) is not a
    branch and is refused."""
    if branch.startswith("refs/heads/"):
        return branch.removeprefix("refs/heads/")
    if branch.startswith("refs/"):
        raise PublishError(f"--branch {branch!r} is a ref but not a branch; give a branch name such as gh-pages")
    return branch


def _check_names(top: Path, remote: str, branch: str, message: str) -> None:
    """What the user typed reaches git as names, never as options: a branch git itself would take as a
    branch name (`git check-ref-format --branch`, which refuses a leading '-'), a remote that is not an
    option, and a message with words in it (exit 7, before anything is written)."""
    if not branch or branch.startswith("-") or subprocess.run(["git", "check-ref-format", "--branch", branch],
                                                              cwd=top, capture_output=True).returncode != 0:
        raise PublishError(f"--branch {branch!r} is not a valid branch name (see git check-ref-format)")
    if not remote or remote.startswith("-"):
        raise PublishError(f"--remote {remote!r} is not a remote: give a remote's name (e.g. origin) or URL")
    if not message.strip():
        raise PublishError("--message is empty; give the commit a message")


def unfinished(site: Path) -> str | None:
    """Why `site` is not a finished site, from its report.json's `progress` (reportgen.report.BuildProgress): a site
    written while its build ran, or left by a build that was stopped; None for a finished one."""
    try:
        with (site / "report.json").open(encoding="utf-8") as handle:
            progress = json.load(handle).get("progress")
    except FileNotFoundError:  # nothing says it is partial (a site from before report.json, or one made by hand)
        return None
    except (OSError, ValueError, AttributeError):
        return "its report.json cannot be read, so it cannot be told finished"
    if progress is None:
        return None
    try:
        done = [item["name"].replace("_", " ") for item in progress["experiments"] if item["state"] == "done"]
        stopped = bool(progress.get("interrupted"))
    except (KeyError, TypeError, AttributeError):
        return "its report.json says it is partial"
    state = "was stopped before it finished" if stopped else "was written while its build still ran"
    return f"it {state} (experiments done: {', '.join(done) or 'none'})"


def publish(site: Path, repo: Path, remote: str = "origin", branch: str = "gh-pages",
            message: str = "Publish reportgen site", partial: bool = False) -> str:
    """Commit `site` as the whole tree of `branch` (parent: its previous commit) and push it; returns the commit id.

    The local branch moves only after the push succeeded, so a failed push leaves it as it was. A partial site
    (`unfinished`) is published only when asked (`partial`): a stopped build's site said for ever that it runs.
    """
    if not (site / "index.html").is_file() or not is_site(site):
        raise OutputError(f"no reportgen site at {site}; run `reportgen build` first")
    why = None if partial else unfinished(site)
    if why:
        raise PublishError(f"{site} is a partial site: {why}; finish it with `reportgen build` (it resumes from the "
                           "cache), or publish it as it is with --partial")
    try:
        top = Path(_git("rev-parse", "--show-toplevel", cwd=repo))
    except PublishError:
        raise PublishError(f"{repo} is not inside a git repository") from None
    branch = branch_name(branch)
    _check_names(top, remote, branch, message)
    parent = _branch_commit(top, branch)
    _check_branch(top, branch, parent)
    (site / ".nojekyll").touch()  # GitHub Pages must not run Jekyll over the site
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git("--work-tree", str(site.resolve()), "add", "--all", "--force", ".", cwd=top, env=env)
        tree = _git("write-tree", cwd=top, env=env)
    commit = _git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, cwd=top)
    _git("push", "--", remote, f"{commit}:refs/heads/{branch}", cwd=top)
    # Compare-and-swap: fails if the branch moved since we read it.
    _git("update-ref", f"refs/heads/{branch}", commit, parent or "0" * 40, cwd=top)
    return commit
