"""Where a site goes: which directory reportgen may replace, the lock, staging and the swap.

reportgen replaces a directory only when it wrote it. Every site it writes carries a marker
file (MARKER, holding a format id); an existing output is replaced only when it holds that
marker or is empty. Before anything is computed, the output a user names (config `output`
or `--out`) is resolved through symlinks and checked against the project's own files: the
project directory, the config file, the cache, the model and the data are never inside it.

Everything beside the output is named exactly from the resolved path (never a glob over
user text): `.NAME.lock`, `.NAME.building` (staging), `.NAME.previous` (the old site
between the two renames of the swap) and `.NAME.before` (the site from before the build, kept
while the build's partial sites stand in for it: a build that fails puts it back).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from reportgen.errors import BusyError, OutputError

MARKER = ".reportgen-site"
MARKER_TEXT = "reportgen-site 1\n"  # format id: a site laid out by this version of reportgen
STAGING_MARKER = ".reportgen-staging"
LOCK_ATTEMPTS = 5  # times a build reopens a lock file that a finishing build removed as it was opened


@dataclass(frozen=True)
class Output:
    """An output directory that passed the checks: `given` as the user wrote it (for messages),
    `path` resolved through symlinks (what is written)."""

    given: Path
    path: Path

    def beside(self, suffix: str) -> Path:
        return self.path.parent / f".{self.path.name}.{suffix}"

    @property
    def lock(self) -> Path:
        return self.beside("lock")

    @property
    def staging(self) -> Path:
        return self.beside("building")

    @property
    def previous(self) -> Path:
        return self.beside("previous")

    @property
    def before(self) -> Path:
        return self.beside("before")


def resolve(given: Path) -> Path:
    """The real directory behind `given`: symlinks resolved, `.` and `..` folded."""
    try:
        return Path(given).resolve()
    except RuntimeError:  # Python 3.11 reports a symlink loop so
        raise OutputError(f"output {given}: is a symlink loop") from None
    except OSError as err:  # newer Pythons: ELOOP
        raise OutputError(f"output {given}: cannot be resolved ({err.strerror})") from None


def is_site(path: Path) -> bool:
    """True when `path` holds the marker of a site reportgen wrote."""
    marker = path / MARKER
    try:
        return marker.is_file() and not marker.is_symlink() and \
            marker.read_text(encoding="utf-8").startswith("reportgen-site ")
    except (OSError, UnicodeDecodeError):
        return False


def check(given: Path, project_dir: Path, protected: list[tuple[str, Path]]) -> Output:
    """Refuse, before any work, an output reportgen must not replace (exit 5, one line).

    `protected` names the user's own paths (config file, cache, model, data files) as (what, path)
    pairs, a pair for every path however many share a name: the output may be none of them and
    contain none of them. The cache may not live inside the output
    either, or every build would wipe it.
    """
    path = resolve(given)
    where = f"output {given}" + (f" (resolves to {path})" if path != Path(os.path.abspath(given)) else "")
    project = resolve(project_dir)
    if path == project:
        raise OutputError(f"{where}: is the project directory; reportgen replaces the whole output "
                          "(config field 'output' or --out)")
    if path in project.parents:
        raise OutputError(f"{where}: contains the project directory {project}")
    for what, own in protected:
        # realpath, not resolve(): a protected path that is a symlink loop is not the output's to name
        # (its own reader says what is wrong with it); where the loop sits is what must stay untouched
        own = Path(os.path.realpath(own))
        if own == path:
            raise OutputError(f"{where}: is {what}; choose another output (config field 'output' or --out)")
        if path in own.parents:
            raise OutputError(f"{where}: contains {what}: {own}")
    if path.exists() and not path.is_dir():
        raise OutputError(f"{where}: is a file, not a directory (config field 'output' or --out)")
    if not path.parent.is_dir():
        what = "is a file, not a directory" if path.parent.exists() else "does not exist"
        raise OutputError(f"{where}: parent {path.parent} {what}")
    if path.is_dir() and any(path.iterdir()) and not is_site(path):
        raise OutputError(f"{where}: is not empty and is not a reportgen site (no {MARKER} file); "
                          "reportgen replaces only sites it wrote: choose another output or empty it")
    out = Output(Path(given), path)
    for own, marker in ((out.staging, STAGING_MARKER), (out.previous, MARKER), (out.before, MARKER)):
        if (own.exists() or own.is_symlink()) and not (own / marker).is_file():
            raise OutputError(f"{where}: {own} exists and was not made by reportgen; remove it or choose "
                              "another output")
    _check_writable(where, path)
    return out


def _check_writable(where: str, path: Path) -> None:
    """The swap renames in the parent and removes the old site: both need write permission."""
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: directory {path.parent} is not writable")
    if path.is_dir():
        for top, _, _ in os.walk(path):
            if not os.access(top, os.W_OK | os.X_OK):
                raise OutputError(f"{where}: the old site cannot be replaced: {top} is not writable")


@contextmanager
def exclusive(out: Output) -> Iterator[None]:
    """One build per output at a time; a second is refused with a clear message.

    The lock is an flock on `.NAME.lock` beside the output, released by the OS when the
    build ends or is killed; creating it is also the first write, so an output that cannot
    be written is refused before any model runs. Holding the lock, leftovers of a killed
    build are ours to clean: its staging, and an old site caught between the two renames.
    The lock file is removed when the build ends (a killed build's stays, and the next build reuses it).
    """
    lock = _locked(out)
    try:
        _recover(out)
        yield
    finally:
        if os.fstat(lock.fileno()).st_size == 0:  # reportgen's lock files are empty: never remove a file with text
            out.lock.unlink(missing_ok=True)  # still held: a build that opened it before sees it gone, and retries
        lock.close()


def _locked(out: Output) -> IO[str]:
    """The lock file, open and flocked: the file at `out.lock` itself, not one a finished build removed after this
    build opened it (locking that one would lock nothing)."""
    for _ in range(LOCK_ATTEMPTS):
        try:
            lock = open(out.lock, "a")
        except OSError as err:
            raise OutputError(f"output {out.given}: cannot write {out.lock} ({err.strerror})") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise BusyError(f"another reportgen build is writing {out.path} (lock {out.lock}); "
                            "wait for it to finish or use another --out") from None
        held = os.fstat(lock.fileno())
        try:
            current = os.stat(out.lock)
        except FileNotFoundError:
            current = None
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            return lock
        lock.close()
    raise BusyError(f"another reportgen build keeps replacing {out.lock}; wait for it to finish or use another --out")


def _recover(out: Output) -> None:
    if (out.staging / STAGING_MARKER).is_file():
        shutil.rmtree(out.staging, ignore_errors=True)
    if is_site(out.previous):
        if out.path.exists():
            shutil.rmtree(out.previous, ignore_errors=True)
        else:  # killed between the two renames: the old site goes back
            os.replace(out.previous, out.path)
    if is_site(out.before) and out.path.exists():  # a killed build's partial site stands, as after Ctrl+C
        shutil.rmtree(out.before, ignore_errors=True)


@contextmanager
def staging(out: Output) -> Iterator[Path]:
    """A fresh staging directory beside the output (under the lock), removed afterwards whatever happens."""
    try:
        out.staging.mkdir()
        (out.staging / STAGING_MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    except OSError as err:
        raise OutputError(f"output {out.given}: cannot create {out.staging} ({err.strerror})") from None
    try:
        yield out.staging
    finally:
        shutil.rmtree(out.staging, ignore_errors=True)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_dev, status.st_ino


def mark(site: Path) -> None:
    (site / MARKER).write_text(MARKER_TEXT, encoding="utf-8")


def swap(new: Path, out: Output, partial: bool = False) -> None:
    """Replace the output by `new` with two renames in one directory; the old site is removed only after.
    The first partial site of a build keeps the site from before the build as `.NAME.before` instead,
    for `standing_in` to put back if the build fails."""
    if partial and is_site(out.path) and not out.before.exists():
        os.replace(out.path, out.before)
    elif out.path.exists():
        os.replace(out.path, out.previous)
    os.replace(new, out.path)
    shutil.rmtree(out.previous, ignore_errors=True)


@contextmanager
def standing_in(out: Output) -> Iterator[None]:
    """Around a build whose partial sites stand in for the output's old site. A build that fails (a bad data
    row, a full disk) leaves the output as it found it: the old site back, or no site where there was none,
    never a site that says it is still being built. Ctrl+C keeps the last partial site (the next build resumes
    from the cache). Either way `.NAME.before` is gone at the end."""
    found = _identity(out.path)  # an empty output directory, or none, is replaced by the first partial site
    try:
        yield
    except Exception:
        if is_site(out.before):
            swap(out.before, out)  # the old site back, by the same two renames
        elif _identity(out.path) != found and is_site(out.path):  # a partial site where there was none
            shutil.rmtree(out.path, ignore_errors=True)
            if found is not None:
                out.path.mkdir()
        raise
    finally:
        if is_site(out.before):
            shutil.rmtree(out.before, ignore_errors=True)
