"""A warm `reportgen` command line, for the tests that run it a hundred times (the bad-input table of
docs/pages/reference/errors.md: tests/commands/test_bad_inputs.py, tests/site/test_output_rules.py). Run as a
script by helpers.WarmCli.

A fresh `python -m reportgen build` spends 5-10 s of CPU importing torch, transformers, MkDocs and Altair before it
reads its config; a hundred of them were a worker's whole share of CI. This process imports them once, then runs
each command in a fork of itself: a new process with its own working directory, environment, exit status and
standard streams (files the client reads), that starts where a fresh one would be after its imports. The builds
that succeed, and every check of the first import (no warning, no traceback), still run as real subprocesses in
those modules' fixtures.

Protocol, one JSON object a line: the client writes {argv, cwd, env, stdout, stderr}; this process answers
{"pid": ...} once the child runs, then {"status": ...} when it has ended (a negative number: killed by that signal).
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def warm_up():
    """What `reportgen build` imports on its way to a model and a site (the rest is imported on demand)."""
    import torch  # noqa: F401 - imported for the forks
    import transformers  # noqa: F401
    from transformers.models.bert import modeling_bert  # noqa: F401 - the tiny models are BERTs

    import reportgen.pipeline  # noqa: F401
    import reportgen.site.writer  # noqa: F401
    from reportgen.commands import cli

    return cli


def child(cli, job: dict) -> None:
    """In the fork: the job's directory, environment and streams, then the command line; never returns."""
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    for fd, name in ((1, job["stdout"]), (2, job["stderr"])):
        opened = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.argv = ["reportgen", *job["argv"]]
    status = 0
    try:
        cli.main()
    except SystemExit as end:  # what the interpreter does with it
        if isinstance(end.code, int) or end.code is None:
            status = end.code or 0
        else:
            print(end.code, file=sys.stderr)
            status = 1
    except BaseException:  # noqa: BLE001 - printed as the interpreter prints it
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def serve(cli) -> None:
    reply = sys.stdout
    for line in sys.stdin:
        job = json.loads(line)
        reply.flush()
        pid = os.fork()
        if pid == 0:
            child(cli, job)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
        reply.flush()


if __name__ == "__main__":
    serve(warm_up())
