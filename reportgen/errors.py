"""User-facing failures.

A mistake the user can fix (a bad config, a missing file, no network for a Hub id)
raises a `ReportgenError`; the CLI prints its one-line message and exits with its
code, never a traceback. Anything else is a bug in reportgen and keeps its traceback.
"""

# Exit codes, documented in the README.
EXIT_CONFIG = 2  # the config file: missing, bad YAML, unknown key, wrong type
EXIT_MODEL = 3  # the model: missing path, not downloadable, not a supported encoder; a Ray cluster not reached
EXIT_DATA = 4  # a data file or example the config points at
EXIT_OUTPUT = 5  # the output: not reportgen's to replace, cannot be written, or cannot be served
EXIT_BUSY = 6  # another build holds the lock on this output
EXIT_PUBLISH = 7  # publish: the branch is not reportgen's, or git failed (git's own words follow)


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
