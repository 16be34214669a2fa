"""Operating-system errors at writes (issue 48): a full disk, a file-size limit, a folder the kernel refuses, a failed
copy. Each ends the command with one line naming what could not be written, the system's cause and errno name, and
what to do (reportgen.errors.os_error), exit 5, and the previous output as it was. The builds are real subprocesses
under a real limit (RLIMIT_FSIZE: the kernel fails the first write past it with EFBIG, which Python does not let
kill the process); /proc/sys refuses new files to root too."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reportgen.errors import EXIT_OUTPUT, os_error, writing
from tests.helpers import is_progress, pythonpath, tree, write_config

CONFIG = """\
title: OS errors
model: {model}
device: cpu
examples:
  - text: the cat sat on the mat.
patterns:
  similarity: false
ablation:
  enabled: false
"""


def run(project: Path, *argv: str, file_limit: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    env = {**os.environ, "PYTHONPATH": pythonpath(), "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "reportgen", *argv], cwd=project, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=limit if file_limit else None)


def said(done: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in done.stderr, done.stderr
    return [line for line in done.stderr.splitlines() if line.strip() and not is_progress(line)]


@pytest.mark.parametrize(("error", "line"), [
    (OSError(errno.ENOSPC, "No space left on device", "/out/site/a.js"),
     "output site: no space left on device (ENOSPC) at /out/site/a.js; the disk is full: free some space or write "
     "elsewhere; the previous site is left as it was"),
    (OSError(errno.EROFS, "Read-only file system", "/mnt/ro/view.html"),
     "output site: read-only file system (EROFS) at /mnt/ro/view.html; the file system is read-only: write elsewhere; "
     "the previous site is left as it was"),
    (PermissionError(errno.EACCES, "Permission denied"),
     "output site: permission denied (EACCES); make it writable or write elsewhere; the previous site is left as it "
     "was"),
    (shutil.Error([("/src/a.js", "/out/a.js", "[Errno 5] Input/output error")]),
     "output site: [Errno 5] Input/output error at /out/a.js; the previous site is left as it was"),
])
def test_an_os_error_is_one_line_naming_the_target_the_cause_and_what_to_do(error, line):
    with pytest.raises(Exception) as caught, writing("output site", "the previous site is left as it was"):
        raise error
    assert str(caught.value) == line and caught.value.exit_code == EXIT_OUTPUT
    assert str(os_error(OSError(errno.EIO, "Input/output error"))) == (
        "a file: input/output error (EIO); the device failed to read or write; check the disk")


@pytest.mark.slow
def test_a_build_past_the_file_size_limit_says_so_and_keeps_the_old_site(tmp_path, tiny_model):
    """The second build finds every run and picture in the cache; its first file past 512 KB is the site's Vega
    bundle, in the staging folder (a write, whose error names no file): the line names the output, and the old site
    stays, byte for byte."""
    write_config(tmp_path, CONFIG.format(model=tiny_model))
    assert run(tmp_path, "build").returncode == 0
    before = tree(tmp_path / "site")
    done = run(tmp_path, "build", file_limit=512 * 1024)
    assert done.returncode == EXIT_OUTPUT
    assert said(done) == [f"error: output {tmp_path / 'site'}: file too large (EFBIG); the file is larger than this "
                          "system allows (ulimit -f); the previous site is left as it was"]
    assert tree(tmp_path / "site") == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".site")]  # no staging, no lock


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/sys").is_dir() or os.access("/proc/sys", os.W_OK), reason="/proc/sys is writable")
def test_a_view_into_a_folder_the_kernel_refuses_says_so(tmp_path, tiny_model):
    done = run(tmp_path, "view", "the cat sat.", "--model", str(tiny_model), "--out", "/proc/sys/view.html")
    assert done.returncode == EXIT_OUTPUT
    assert said(done) == ["error: --out /proc/sys/view.html: no such file or directory (ENOENT) at "
                          "/proc/sys/.view.html.partial; nothing was written"]
    assert not Path("/proc/sys/view.html").exists()
