"""The views in JupyterLab itself: a real JupyterLab server and kernel, the notebook run from its Run menu
in Chromium, each output drawing its view with nothing requested outside the server (issue 29)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time

import nbformat
import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.slow

CELLS = ["import reportgen",
         'reportgen.show("I went to the store.", pair="At the store, I bought fresh strawberries.")',
         'reportgen.model_view(text="The cat sat on the mat.")',
         'reportgen.qk_view("The cat sat on the mat.")']
TOKEN = "reportgen-test"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 serving a folder with the notebook; its settings and runtime files
    in the folder too (HOME), so that nothing of the user's is read or written."""
    root = tmp_path_factory.mktemp("lab")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in CELLS])
    # the server's own Python as the kernel (ipykernel's "python3"): the interpreter running these tests
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "views.ipynb")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}"],
        cwd=root, env={"HOME": str(root), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "JupyterLab did not start"
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=30)


def test_the_notebook_run_in_jupyterlab_draws_every_view(lab, open_page):
    view = open_page(f"{lab}/lab/tree/views.ipynb?token={TOKEN}", wait_for=".jp-Notebook")
    def run_all() -> None:
        view.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        view.page.get_by_text("Run All Cells", exact=True).click()

    # A fresh JupyterLab may ask which kernel the notebook gets (the notebook's own preselected), and a Run All
    # given while its kernel starts may run nothing or only the last cell: the dialog is answered, and the
    # notebook run again whenever no cell is running, until the three views are drawn.
    deadline = time.monotonic() + 240
    drawn = "() => document.querySelectorAll('.rgv[data-rgv-state]').length"
    running = "() => [...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('*'))"
    while view.page.evaluate(drawn) < 3:
        assert time.monotonic() < deadline, f"{view.page.evaluate(drawn)} of 3 views drawn in 240 s"
        select = view.page.locator(".jp-Dialog-button.jp-mod-accept")  # "Select"
        if select.count():
            select.click()
        elif not view.page.evaluate(running):
            run_all()
        try:  # until the views are drawn or a dialog asks, for at most 5 s: then the notebook is looked at again
            wait_until(view.page, f"() => ({drawn})() >= 3 || !!document.querySelector('.jp-Dialog')", timeout=5000)
        except TimeoutError:
            pass
    states = view.page.evaluate(
        "() => [...document.querySelectorAll('.rgv')].map(r => r.getAttribute('data-rgv-state'))")
    assert states[0].startswith("view=head") and states[1].startswith("view=model") and states[2].startswith("view=qk")
    assert view.remote_requests == [] and view.errors == [], (view.remote_requests, view.errors)
    assert view.page.locator(".rgv-needs-js").count() == 0
    # the views do not take JupyterLab's address for their state
    assert "view=" not in view.page.url
