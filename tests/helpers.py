"""Helpers the test modules import by name (conftest.py holds only fixtures; pytest does not want it imported).

`from tests.helpers import ...` works under plain `pytest` too: pyproject.toml puts the repository root on
sys.path (`pythonpath = ["."]`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from reportgen.errors import DataError

TINY_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "i", "went", "to", "the",
              "store", "at", "bought", "fresh", "straw", "##berries", "a", "cat", "sat", "on", "mat", "dog",
              "and", "is", "was", "it", "he", "she", "red", "car", "ball"]
TINY_WORDS += list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
# The two screens every page is checked at (the guide's "Pages people read"): a laptop and a phone.
VIEWPORTS = {"desktop": (1366, 900), "phone": (390, 844)}
# An attention view that has drawn its state and is not waiting for a file (views-core.js).
VIEW_DRAWN = ".rgv[data-rgv-state]:not([data-rgv-loading])"


def make_tiny_bert(target: Path, layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """A random BERT with a real WordPiece tokenizer, saved like any model directory (nothing downloaded)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(seed)
    BertTokenizer(vocab={word: index for index, word in enumerate(TINY_WORDS)}).save_pretrained(target)
    config = BertConfig(vocab_size=len(TINY_WORDS), hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(target)
    return target


def tree(path: Path) -> dict[str, bytes]:
    """Every file under `path` with its bytes: compare two sites byte for byte."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def write_config(directory: Path, text: str) -> Path:
    """reportgen.yaml in `directory`, where `reportgen build` looks for it."""
    path = directory / "reportgen.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def is_progress(line: str) -> bool:
    """A line of the rich progress bar, which the one-line-error checks skip."""
    return any(c in line for c in "━╸╺")


@dataclass
class Case:
    """One row of the README's bad-input table (tests/test_bad_inputs.py, tests/test_output_rules.py)."""

    id: str
    what: str  # the bad input, as the README table says it
    config: dict | str | bytes | None  # dict: merged over BASE; str/bytes: the file as is; None: no file
    exit: int
    answer: str  # the whole stderr line after "error: " (exit 0: the warning lines), <dir> = project
    files: dict[str, str | bytes] = field(default_factory=dict)  # project-relative path -> content
    out: str | None = None  # --out
    env: dict[str, str] = field(default_factory=dict)
    page: tuple[str, str] | None = None  # exit 0: (file in the output, text it must show)
    needs: str | None = None  # "readonly-proc": skipped where /proc/sys is writable
    argv: list[str] | None = None  # another command instead of `build --config NAME [--out OUT]`
    # A context manager factory called with the project directory around the run, for inputs
    # that are not files (a FIFO, a socket holding a port, a read-only directory): it makes
    # them before and removes them after.
    setup: Callable[[Path], AbstractContextManager] | None = None

    @property
    def config_name(self) -> str:
        return f"{self.id}.yaml"


class BrowserPage:
    """A Chromium page whose non-local requests are blocked and recorded, with JS errors collected.

    `requested`: the file name of every request (file:// loads leave no resource timing to ask for);
    `failed`: the URLs of the requests that failed."""

    def __init__(self, page):
        self.page = page
        self.remote_requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requested: list[str] = []
        self.failed: list[str] = []
        page.on("request", lambda request: self.requested.append(request.url.split("/")[-1]))
        page.on("requestfailed", lambda request: self.failed.append(request.url))
        page.route("**/*", self._route)
        page.on("pageerror", lambda err: self.errors.append(f"pageerror: {err}"))
        page.on("console", lambda msg: self.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
        page.on("dialog", self._dialog)

    def _route(self, route):
        url = route.request.url
        local = url.startswith(("file:", "data:", "blob:", "about:")) or url.startswith(
            ("http://127.0.0.1", "http://localhost"))
        if local:
            route.continue_()
        else:
            self.remote_requests.append(url)
            route.abort()

    def _dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()


def data_error(call: Callable[[], object]) -> str:
    """The one-line message of the DataError `call` raises (a daemon thread, so a hang fails the test)."""
    outcome: list[BaseException | None] = []

    def target():
        try:
            call()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            outcome.append(err)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(10)
    assert outcome, "the call blocked for 10 s"
    err = outcome[0]
    assert isinstance(err, DataError), f"expected a DataError, got {err!r}"
    assert "\n" not in str(err) and err.exit_code == 4
    return str(err)


def check_report(site: Path) -> dict:
    """A built site's report.json, checked against the published schema (`reportgen schema --report`)."""
    import json

    import jsonschema

    from reportgen.report import report_schema

    data = json.loads((site / "report.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, report_schema(), cls=jsonschema.Draft202012Validator)
    return data
