"""User-facing failures.

A mistake the user can fix (a bad config, a missing file, no network for a Hub id)
raises a `ReportgenError`; the CLI prints its one-line message and exits with its
code, never a traceback. An operating-system error at a write (a full disk, a read-only
folder) is said the same way (`os_error`, `writing`). Anything else is a bug in reportgen
and keeps its traceback.
"""

from collections.abc import Iterator
from contextlib import contextmanager

# Exit codes, documented in docs/pages/reference/errors.md.
EXIT_CONFIG = 2  # the config file: missing, bad YAML, unknown key, wrong type
EXIT_MODEL = 3  # the model: missing path, not downloadable, not a supported encoder; a Ray cluster not reached
EXIT_DATA = 4  # a data file or example the config points at
EXIT_OUTPUT = 5  # the output: not reportgen's to replace, cannot be written (a full disk, read-only) or served
EXIT_BUSY = 6  # another build holds the lock on this output
EXIT_PUBLISH = 7  # publish: a partial site, a branch not reportgen's, or git failed (git's own words follow)


class ReportgenError(Exception):
    """An error in what the user gave us; `str(err)` is the one line we print."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None, detail: str = ""):
        super().__init__(" ".join(message.split()))
        self.detail = detail  # another program's own words (git's error), printed indented below the line
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(ReportgenError):
    exit_code = EXIT_CONFIG


class ModelError(ReportgenError):
    exit_code = EXIT_MODEL


class DataError(ReportgenError):
    exit_code = EXIT_DATA


class OutputError(ReportgenError):
    exit_code = EXIT_OUTPUT


class BusyError(ReportgenError):
    exit_code = EXIT_BUSY


# What a user can do about an operating-system error, by errno name; the others get the system's own words only.
OS_HINTS = {
    "ENOSPC": "the disk is full: free some space or write elsewhere",
    "EDQUOT": "the disk quota is used up: free some space or write elsewhere",
    "EFBIG": "the file is larger than this system allows (ulimit -f)",
    "EROFS": "the file system is read-only: write elsewhere",
    "EACCES": "make it writable or write elsewhere",
    "EPERM": "make it writable or write elsewhere",
    "EIO": "the device failed to read or write; check the disk",
    "EEXIST": "something is in the way: remove it or write elsewhere",
    "ENOTDIR": "a part of the path is a file, not a folder",
    "ELOOP": "the path goes round a symlink loop",
}


def os_error(err: OSError, target: object = None, kept: str = "") -> OutputError:
    """An operating-system error (a full disk, a read-only or foreign folder, a failing device) as the one line the CLI
    prints, exit code EXIT_OUTPUT: what could not be written (`target`, else the file the system named), the system's
    cause with its errno name, the file it failed on where that is another (a temp file beside the target), what to
    do, and what was `kept`. The site's staging and swap (reportgen.site.output) leave the previous output as it was;
    this only says what happened, the same way for every command (`writing`, and the CLI's last resort)."""
    import errno as errnos

    if err.errno is None and err.args and isinstance(err.args[0], list) and err.args[0]:  # shutil.copytree's: the first
        err = OSError(None, str(err.args[0][0][2]), str(err.args[0][0][1]))
    name = errnos.errorcode.get(err.errno or 0, "")
    failed = " -> ".join(str(path) for path in (err.filename, err.filename2) if path is not None)
    subject = str(target) if target is not None else failed or "a file"
    cause = (err.strerror or str(err)).rstrip(".")
    at = f" at {failed}" if failed and failed != subject else ""
    tail = "".join(f"; {part}" for part in (OS_HINTS.get(name), kept) if part)
    return OutputError(f"{subject}: {cause[:1].lower()}{cause[1:]}{f' ({name})' if name else ''}{at}{tail}")


@contextmanager
def writing(target: object, kept: str = "") -> Iterator[None]:
    """Around the writes of `target` (an output folder, a view file, through temp files beside it): an OSError comes
    out as `os_error`'s one line naming `target`, not only the temp file the system named."""
    try:
        yield
    except OSError as err:
        raise os_error(err, target, kept) from None
