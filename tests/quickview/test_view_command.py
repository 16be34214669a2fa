"""`reportgen view` on the embedded model: one file, opened from file:// in Chromium with every request
outside it blocked, drawing all its views with the model's weights (issue 29)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from reportgen.runs import shares
from tests.helpers import VIEW_DRAWN, embedded_model_dir, wait_until

pytestmark = pytest.mark.slow

TEXT, PAIR = "I went to the store.", "At the store, I bought fresh strawberries."
BERTVIZ_HEAD_VIEW = 2_296_437  # bertviz 1.4.1's head view of the seed pair (benchmarks/views_size.py)
STEP = 0.5 / 255  # the 8-bit encoding's bound on each weight (reportgen/site/views.py)


def reportgen_view(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", "view", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def model_outputs(text: str, pair: str | None):
    """(attention [L, H, T, T], value norms [L, H, T]) of the embedded model, read here with transformers and
    hooks of this test's own, not reportgen's run."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = embedded_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    values = []
    hooks = [layer.attention.self.value.register_forward_hook(lambda _m, _i, out: values.append(out[0]))
             for layer in model.encoder.layer]
    with torch.no_grad():
        outputs = model(**tokenizer(text, pair, return_tensors="pt"), output_attentions=True)
        for hook in hooks:
            hook.remove()
        heads = model.config.num_attention_heads
        # ||f(x_j)||: each head's value vector of token j through the output projection's slice of that head
        norms = []
        for layer, value in zip(model.encoder.layer, values, strict=True):
            dense = layer.attention.output.dense.weight  # [hidden, hidden]
            per_head = value.view(value.shape[0], heads, -1).transpose(0, 1)  # [H, T, d]
            blocks = dense.view(dense.shape[0], heads, -1).permute(1, 2, 0)  # [H, d, hidden]
            norms.append(torch.linalg.vector_norm(per_head @ blocks, dim=-1))
    attention = torch.stack(outputs.attentions)[:, 0].numpy()
    return attention, torch.stack(norms).numpy()


@pytest.fixture(scope="module")
def seed_view(tmp_path_factory):
    folder = tmp_path_factory.mktemp("view")
    done = reportgen_view(folder, TEXT, "--pair", PAIR, "--out", "seed.html")
    assert done.returncode == 0, done.stderr
    return folder / "seed.html", done


def test_the_seed_pair_is_one_small_file(seed_view):
    path, done = seed_view
    size = path.stat().st_size
    assert size <= 0.15 * BERTVIZ_HEAD_VIEW, f"{size:,} bytes"
    assert f"Wrote seed.html ({size:,} bytes; 19 tokens" in done.stdout
    assert done.stderr == ""  # nothing truncated, nothing to warn about
    assert [p.name for p in path.parent.iterdir()] == ["seed.html"]  # one file, nothing beside it


def test_every_view_draws_from_file_with_the_network_blocked(seed_view, open_page):
    path, _ = seed_view
    for viewport in ("desktop", "phone"):
        view = open_page(path.as_uri(), viewport=viewport, wait_for=VIEW_DRAWN)
        wait_until(view.page, "() => document.querySelectorAll('.rgv[data-rgv-state]').length === 2")
        assert view.errors == [] and view.remote_requests == [] and view.failed == []
        assert set(view.requested) == {"seed.html"}
        assert view.page.locator(".rgv[data-rgv=views] line.rgv-line").count() > 100
        # the model view, the contributions switch and the query/key view's table, each used
        root = view.page.locator(".rgv[data-rgv=views]")
        root.get_by_role("button", name="Model view").click()
        wait_until(view.page, "() => document.querySelector('.rgv[data-rgv=views]').getAttribute("
                              "'data-rgv-state').startsWith('view=model')")
        assert root.locator("canvas").count() == 72
        root.get_by_role("button", name="contributions", exact=True).first.click()
        wait_until(view.page, "() => /mode=contributions/.test(location.hash)")
        qk = view.page.locator(".rgv[data-rgv=qk]")
        qk.locator("button.rgv-qk-token[data-i='5']").click()
        wait_until(view.page, "() => /token=5/.test(document.querySelector('.rgv[data-rgv=qk]')"
                              ".getAttribute('data-rgv-state'))")
        assert qk.locator("tr.rgv-qk-row").count() == 19
        assert view.errors == [] and view.remote_requests == []


def test_the_page_shows_the_models_weights_and_contributions(seed_view, open_page):
    path, _ = seed_view
    view = open_page(path.as_uri(), wait_for=VIEW_DRAWN)
    decoded = view.page.evaluate("""() => {
      const views = window.reportgenViews, data = JSON.parse(document.getElementById('rgv-data').textContent);
      const att = new views.Attention(data.attention), contrib = new views.NormContributions(att, data.contributions);
      const out = {weights: [], shares: [], totals: []};
      for (const [layer, head] of att.allHeads()) {
        out.weights.push(Array.from(att.matrix(layer, head)));
        out.shares.push(Array.from(contrib.matrix(layer, head)));
        out.totals.push(Array.from(contrib.rowTotals(layer, head)));
      }
      return out;
    }""")
    attention, norms = model_outputs(TEXT, PAIR)
    layers, heads, n, _ = attention.shape
    weights = np.array(decoded["weights"]).reshape(attention.shape)
    assert np.abs(weights - attention).max() <= STEP + 1e-6
    want_shares, want_totals = shares(attention, norms)
    got_shares = np.array(decoded["shares"]).reshape(attention.shape)
    # shares from weights within STEP: off by at most STEP times the spread of the row's norms, per key
    spread = norms.max(axis=-1) / norms.min(axis=-1)
    assert (np.abs(got_shares - want_shares).max(axis=(-1, -2)) <= 2 * STEP * spread + 1e-5).all()
    totals = np.array(decoded["totals"]).reshape(layers, heads, n)
    assert np.allclose(totals, want_totals, rtol=0.02, atol=STEP * norms.max())


def test_the_query_key_check_on_the_page_holds(seed_view):
    path, _ = seed_view
    payload = json.loads(re.search(r'id="rgv-data">(.*?)</script>', path.read_text(encoding="utf-8"), re.S).group(1))
    check = payload["qk"]["check"]
    assert check["difference"] <= check["rounding"]


def test_a_long_input_is_cut_with_a_warning_and_has_no_query_key_view_over_its_limit(tmp_path):
    (tmp_path / "reportgen.yaml").write_text("views:\n  query_key_mb: 1\n", encoding="utf-8")
    done = reportgen_view(tmp_path, " ".join(["word"] * 600), "--out", "long.html")
    assert done.returncode == 0, done.stderr
    assert "warning: the input was truncated to" in done.stderr
    # 512 tokens x 6 layers x 12 heads x 2 vectors x 32 components x 1.5 bytes, and scales, in base64
    assert ("no query/key view: its vectors would take 5.1 MB, over the 1 MB of config field 'views.query_key_mb'"
            in done.stderr)
    page = (tmp_path / "long.html").read_text(encoding="utf-8")
    assert 'data-rgv="qk"' not in page and "truncated to" in page


@pytest.mark.parametrize("args, code, message", [
    (["", "--out", "v.html"], 4, "error: text: empty"),
    (["hi", "--pair", "   "], 4, "error: pair: empty"),
    (["hi", "--out", "."], 5, "not a file"),
    (["hi", "--out", "mine.html"], 5, "not written by `reportgen view`"),
    (["hi", "--out", "missing/v.html"], 5, "does not exist"),
    (["hi", "--out", "reportgen.yaml"], 5, "--out reportgen.yaml: a view is one HTML file; give a name ending in"),
    (["hi", "--out", "view"], 5, "--out view: a view is one HTML file"),
    (["hi", "--model", "./nowhere"], 3, "(--model)"),
    (["hi", "--config", "none.yaml"], 2, "none.yaml"),
])
def test_mistakes_end_in_one_line_and_write_nothing(tmp_path, args, code, message):
    (tmp_path / "mine.html").write_text("<p>mine</p>", encoding="utf-8")
    done = reportgen_view(tmp_path, *args)
    assert done.returncode == code, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.html"]
    assert (tmp_path / "mine.html").read_text(encoding="utf-8") == "<p>mine</p>"


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_page_is_axe_clean_and_shows_the_view_in_the_first_screen(seed_view, open_page, viewport):
    from axe_playwright_python.sync_playwright import Axe

    path, _ = seed_view
    view = open_page(path.as_uri(), viewport=viewport, wait_for=VIEW_DRAWN)
    violations = Axe().run(view.page, options={"resultTypes": ["violations"]}).response["violations"]
    assert [(item["id"], item["nodes"][0]["target"]) for item in violations] == []
    # the head view's first token line starts within the first screen
    top = view.page.evaluate("() => document.querySelector('.rgv[data-rgv=views] line.rgv-line')"
                             ".getBoundingClientRect().top")
    assert top < view.page.viewport_size["height"]
