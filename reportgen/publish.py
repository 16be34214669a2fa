"""`reportgen publish`: the built site onto a gh-pages branch, as `mkdocs gh-deploy` does.

The commit is made with git plumbing and a temporary index, so the user's working
tree, index and other branches are never touched; then the branch is pushed.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from reportgen.errors import OutputError, ReportgenError


class PublishError(ReportgenError):
    exit_code = 7


def _git(*args: str, cwd: Path, env: dict | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    except FileNotFoundError:
        raise PublishError("git is not installed; reportgen publish needs it") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise PublishError(f"git {args[0]} failed: {detail[-1] if detail else 'no output'}")
    return done.stdout.strip()


def publish(site: Path, repo: Path, remote: str = "origin", branch: str = "gh-pages",
            message: str = "Publish reportgen site", push: bool = True) -> str:
    """Commit `site` as the whole tree of `branch` (parent: its previous commit) and push it; returns the commit id."""
    if not (site / "index.html").is_file():
        raise OutputError(f"no site at {site}; run `reportgen build` first")
    try:
        top = Path(_git("rev-parse", "--show-toplevel", cwd=repo))
    except PublishError:
        raise PublishError(f"{repo} is not inside a git repository") from None
    (site / ".nojekyll").touch()  # GitHub Pages must not run Jekyll over the site
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git("--work-tree", str(site.resolve()), "add", "--all", "--force", ".", cwd=top, env=env)
        tree = _git("write-tree", cwd=top, env=env)
    parent = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
                            cwd=top, capture_output=True, text=True).stdout.strip()
    commit = _git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, cwd=top)
    _git("update-ref", f"refs/heads/{branch}", commit, *([parent] if parent else []), cwd=top)
    if push:
        _git("push", remote, f"refs/heads/{branch}:refs/heads/{branch}", cwd=top)
    return commit
