"""The views in a notebook: a real ipykernel kernel runs reportgen.show and friends (nbclient), and the
executed notebook, exported to HTML with nbconvert, draws every view in Chromium with nothing requested
from outside the file (issue 29)."""

from __future__ import annotations

import re

import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.slow

CELLS = [
    "import numpy as np\nimport reportgen",
    'reportgen.show("I went to the store.", pair="At the store, I bought fresh strawberries.")',
    'reportgen.model_view(text="The cat sat on the mat.")',
    'reportgen.qk_view("The cat sat on the mat.")',
    # attention a user already has, as bertviz takes it: per layer [batch, heads, query, key]
    "rng = np.random.default_rng(0)\n"
    "scores = rng.normal(size=(2, 1, 3, 5, 5))\n"
    "weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)\n"
    'reportgen.head_view(list(weights), ["[CLS]", "a", "b", "c", "[SEP]"])',
    # a long input (issue 46): past 256 tokens the head view adds its heatmap, its rows deflated
    'reportgen.show(" ".join(["The cat sat on the mat, and the dog slept by the door."] * 24))',
    # and its query/key view: 64 keys at a time, the weights deflated in the same cell
    'reportgen.qk_view(" ".join(["The cat sat on the mat, and the dog slept by the door."] * 24))',
    # a mistake: one line, as the command line says it
    'reportgen.show("   ")',
]
VIEWS = 6  # outputs with a view: cells 1 to 6


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    folder = tmp_path_factory.mktemp("notebook")
    NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    return notebook, folder


def html_outputs(cell) -> list[str]:
    return [output["data"]["text/html"] for output in cell.outputs
            if output.get("output_type") == "execute_result" and "text/html" in output.get("data", {})]


def test_each_view_cell_shows_its_view_inline(executed):
    notebook, _ = executed
    shown = [html_outputs(cell) for cell in notebook.cells[1:1 + VIEWS]]
    assert all(len(outputs) == 1 for outputs in shown), shown
    kinds = [re.search(r'<div class="rgv" data-rgv="(\w+)"[^>]*>', outputs[0]).group(0) for outputs in shown]
    assert 'data-rgv="views"' in kinds[0] and 'data-rgv-view="model"' in kinds[1]
    assert 'data-rgv="qk"' in kinds[2] and 'data-rgv="views"' in kinds[3] and 'data-rgv="views"' in kinds[4]
    assert '"compressed":"deflate"' in shown[4][0].replace(" ", "")  # the long input's rows, deflated
    assert 'data-rgv="qk"' in kinds[5] and '"compressed":"deflate"' in shown[5][0].replace(" ", "")
    for outputs in shown:
        assert not re.search(r'\ssrc=|require\(|https?://', outputs[0].split("<script>")[0])


def test_a_mistake_in_a_cell_is_one_line(executed):
    notebook, _ = executed
    errors = [output for output in notebook.cells[-1].outputs if output.get("output_type") == "error"]
    assert errors and errors[0]["ename"] == "DataError"
    assert errors[0]["evalue"] == "text: empty (or only whitespace); give some words"


def test_the_exported_notebook_draws_every_view_offline(executed, open_page):
    from nbconvert import HTMLExporter

    notebook, folder = executed
    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(notebook)
    page = folder / "notebook.html"
    page.write_text(body, encoding="utf-8")
    view = open_page(page.as_uri())
    wait_until(view.page, f"() => document.querySelectorAll('.rgv[data-rgv-state]').length === {VIEWS}")
    # The only requests outside the file are the lab template's own require.js and MathJax (nbconvert's,
    # blocked here): the views need neither, and nothing in their outputs asks for anything.
    template = (exporter.require_js_url, exporter.mathjax_url)
    assert [url for url in view.remote_requests if not url.startswith(template)] == []
    assert view.errors == ["console: Failed to load resource: net::ERR_FAILED"] * len(view.remote_requests)
    states = view.page.evaluate(
        "() => [...document.querySelectorAll('.rgv')].map(r => r.getAttribute('data-rgv-state'))")
    assert states[1].startswith("view=model") and states[2].startswith("view=qk")
    # several views, one page: the scripts ran once, no id twice, and none of them took the page's address
    assert view.page.evaluate("() => typeof window.reportgenViews.startAll") == "function"
    ids = view.page.evaluate("() => [...document.querySelectorAll('[id]')].map(e => e.id)")
    assert len(ids) == len(set(ids))
    assert view.page.evaluate("() => location.hash") == ""
    assert view.page.locator(".rgv-needs-js").count() == 0
    # each view answers its own controls
    second = view.page.locator(".rgv").nth(0)
    second.get_by_role("button", name="Model view").click()
    wait_until(view.page, "() => document.querySelectorAll('.rgv')[0].getAttribute('data-rgv-state')"
                          ".startsWith('view=model')")
    assert view.page.evaluate("() => document.querySelectorAll('.rgv')[3].getAttribute('data-rgv-state')"
                              ".startsWith('view=head')")
    # the long input's heatmap: drawn over the whole head (its tokens labelled), and zoomed by its own keys
    long = "document.querySelectorAll('.rgv')[4]"
    heat = f"{long}.querySelector('.rgv-heat-map')"
    wait_until(view.page, f"() => {heat} && {heat}.rgvPooled")
    whole = view.page.evaluate(f"() => {heat}.getAttribute('data-win')")
    assert whole.startswith("0-") and int(whole.split(",")[0].split("-")[1]) > 256, whole
    assert view.page.evaluate(f"() => {long}.querySelectorAll('.rgv-heat-queries .rgv-heat-label').length") > 5
    view.page.locator(".rgv").nth(4).locator(".rgv-heat-map").focus()
    view.page.keyboard.press("+")
    zoomed = view.page.evaluate(f"() => {heat}.getAttribute('data-win')")
    assert zoomed != whole, zoomed
    assert view.page.evaluate("() => location.hash") == ""  # the window stays in the view, not the page's address
    # the long input's query/key view: the 64 keys its first query weighs most, read from the deflated weights
    long_qk = view.page.locator(".rgv").nth(5)
    assert long_qk.locator("tr.rgv-qk-row").count() == 64
    assert "The table lists the 64 keys this query weighs most" in long_qk.locator(".rgv-status").inner_text()
    weights = long_qk.locator("tr.rgv-qk-row").evaluate_all("rows => rows.map(r => +r.dataset.softmax)")
    assert weights == sorted(weights, reverse=True) and sum(weights) > 0.2
