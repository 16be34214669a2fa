"""Encoder-decoders in `reportgen view` and the notebook (issue 31): BART, T5 and Marian on tiny random
checkpoints (tests/seq2seq_checkpoints.py).

Each family's single file holds three groups (encoder self-attention, decoder self-attention, cross-attention)
that decode to the model's own attention, read here with transformers (eager, `output_attentions=True`), within
the 8-bit step, each with contributions; the command refuses a missing --target, a --target for a model that is
not an encoder-decoder and a --pair for one, in one line with exit 4; and in Chromium, from file:// with the
network blocked, the page's Encoder | Decoder | Cross switch draws the cross-attention with the decoder's tokens
on the left and the source's on the right, keeps it in the address and restores it on a reload.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reportgen.site.token_text import shown_tokens
from tests.helpers import VIEW_DRAWN, wait_until
from tests.seq2seq_checkpoints import FAMILIES, PAIRS, make_encoder_decoder, model_attention

pytestmark = pytest.mark.slow

SOURCE, TARGET = PAIRS[0]
STEP = 0.5 / 255  # the 8-bit encoding's bound on each weight (reportgen/site/views.py)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("encoder-decoders")
    return {family: make_encoder_decoder(family, root / family) for family in FAMILIES}


def reportgen_view(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", "view", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def page_payload(text: str) -> dict:
    return json.loads(re.search(r'id="rgv-data">(.*?)</script>', text, re.S).group(1))


def test_a_rectangular_attention_round_trips_through_the_encoding():
    from reportgen.site import views

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 3, 5, 7)) * 3
    attention = (np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)).astype(np.float32)
    encoded = views.encode_attention(attention)
    assert encoded["shape"] == [2, 3, 5, 7]
    assert np.abs(views.decode_attention(encoded) - attention).max() <= STEP + 1e-6
    norms = rng.uniform(0.5, 2, size=(2, 3, 7)).astype(np.float32)
    share, totals = views.decode_contributions(views.encode_contributions(attention, norms))
    assert share.shape == attention.shape and totals.shape == (2, 3, 5)
    share, totals = views.decode_norm_contributions(encoded, views.encode_norms(norms))
    assert share.shape == attention.shape and np.allclose(share.sum(-1), 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_group_of_the_file_is_the_models_own_attention_with_contributions(family, checkpoints):
    from reportgen.quickview import page_text, run_text
    from reportgen.site import views

    payload = page_payload(page_text(run_text(SOURCE, model=str(checkpoints[family]), target=TARGET)))
    attention, source, decoder = model_attention(checkpoints[family], SOURCE, TARGET)
    assert [group["name"] for group in payload["groups"]] == list(views.GROUP_NAMES)
    source, decoder = shown_tokens(source), shown_tokens(decoder)  # as the views show them ("Ġc" as "␣c")
    assert payload["tokens"] == source and payload["target"] == TARGET and "qk" not in payload
    sides = {"encoder": (source, source), "decoder": (decoder, decoder), "cross": (decoder, source)}
    for group in payload["groups"]:
        name = group["name"]
        assert (group["queries"], group["keys"]) == sides[name]
        encoded, contributions = views.group_attention(payload, name)
        decoded = views.decode_attention(encoded)
        assert decoded.shape == attention[name].shape
        assert np.abs(decoded - attention[name]).max() <= STEP + 1e-6, name
        assert contributions is not None, name
        share, totals = views.decode_norm_contributions(encoded, contributions)
        assert share.shape == decoded.shape and np.allclose(share.sum(-1), 1, atol=1e-5)
        assert (totals > 0).all()
    assert payload["groups"][1].get("causal") is True
    assert attention["decoder"][..., np.triu(np.ones(attention["decoder"].shape[-2:], dtype=bool), 1)].max() == 0


def test_the_notebook_shows_an_encoder_decoder(checkpoints):
    import reportgen
    from reportgen.errors import DataError

    view = reportgen.show(SOURCE, target=TARGET, model=str(checkpoints["t5"]), view="model")
    html = view._repr_html_()
    payload = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S).group(1))
    assert [group["name"] for group in payload["groups"]] == ["encoder", "decoder", "cross"]
    # refused by the call that asks for it, not when the notebook displays the view (issue 48)
    with pytest.raises(DataError, match="not built for encoder-decoders"):
        reportgen.show(SOURCE, target=TARGET, model=str(checkpoints["t5"]), view="qk")
    with pytest.raises(DataError, match="not built for encoder-decoders"):
        reportgen.qk_view(SOURCE, target=TARGET, model=str(checkpoints["t5"]))


def refusal(tmp_path: Path, *args: str) -> str:
    done = reportgen_view(tmp_path, *args, "--out", "v.html")
    assert done.returncode == 4, done.stderr
    assert not (tmp_path / "v.html").exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_the_command_refuses_what_an_encoder_decoder_cannot_take_in_one_line(checkpoints, tmp_path):
    bart = str(checkpoints["bart"])
    assert refusal(tmp_path, SOURCE, "--model", bart) == (
        "error: target: bart is an encoder-decoder; give the text its decoder reads with --target")
    assert refusal(tmp_path, SOURCE, "--pair", "a dog", "--target", TARGET, "--model", bart) == (
        "error: pair: bart is an encoder-decoder, which reads a source and a target, not a pair; give the target "
        "with --target")
    assert refusal(tmp_path, SOURCE, "--target", TARGET) == (
        "error: target: sentence-transformers/all-MiniLM-L6-v2 (embedded) is not an encoder-decoder (BART, T5, "
        "Marian), so it reads no target; leave --target out")


def left_and_right(page) -> tuple[list[str], list[str]]:
    return page.evaluate("""() => [".rgv-left", ".rgv-right"].map(side => Array.from(
      document.querySelectorAll(".rgv[data-rgv=views] " + side + " .rgv-tok-text"), node => node.textContent))""")


def test_the_page_switches_to_cross_attention_and_keeps_it_in_the_address(checkpoints, tmp_path, open_page):
    done = reportgen_view(tmp_path, SOURCE, "--target", TARGET, "--model", str(checkpoints["bart"]),
                          "--out", "bart.html")
    assert done.returncode == 0, done.stderr
    assert "source and" in done.stdout and done.stderr == ""
    payload = page_payload((tmp_path / "bart.html").read_text(encoding="utf-8"))
    source, decoder = payload["groups"][2]["keys"], payload["groups"][2]["queries"]
    view = open_page((tmp_path / "bart.html").as_uri(), wait_for=VIEW_DRAWN)
    page, root = view.page, view.page.locator(".rgv[data-rgv=views]")
    assert left_and_right(page) == [source, source]
    switch = root.get_by_role("group", name="Attention")
    assert [switch.get_by_role("button").nth(i).inner_text() for i in range(3)] == ["Encoder", "Decoder", "Cross"]
    switch.get_by_role("button", name="Cross").click()
    wait_until(page, "() => /(^#|&)attn=cross(&|$)/.test(location.hash)")
    assert left_and_right(page) == [decoder, source]
    assert root.locator("line.rgv-line").count() > 0
    root.get_by_role("button", name="contributions", exact=True).first.click()
    wait_until(page, "() => /mode=contributions/.test(location.hash) && /attn=cross/.test(location.hash)")
    assert root.locator("line.rgv-line").count() > 0
    page.reload()
    page.wait_for_selector(VIEW_DRAWN)
    wait_until(page, "() => document.querySelector('.rgv[data-rgv=views]').getAttribute('data-rgv-attn') === 'cross'")
    assert left_and_right(page) == [decoder, source]
    assert switch.get_by_role("button", name="Cross").get_attribute("aria-pressed") == "true"
    switch.get_by_role("button", name="Decoder").click()
    wait_until(page, "() => /attn=decoder/.test(location.hash)")
    above = page.evaluate("""() => Array.from(document.querySelectorAll('.rgv[data-rgv=views] line.rgv-line'))
      .filter(line => +line.dataset.k > +line.dataset.q).length""")
    assert above == 0 and root.locator("line.rgv-line").count() > 0
    root.get_by_role("button", name="Model view").click()
    wait_until(page, "() => /view=model/.test(location.hash)")
    assert root.locator("canvas.rgv-thumb").count() == 2 * 4
    switch.get_by_role("button", name="Cross").click()  # the grid is built again for the group's sizes
    wait_until(page, "() => /view=model&attn=cross/.test(location.hash)")
    wait_until(page, "() => document.querySelectorAll('.rgv[data-rgv=views] canvas.rgv-thumb[data-drawn]')"
                     ".length === 8")
    assert view.errors == [] and view.remote_requests == [] and view.failed == []
