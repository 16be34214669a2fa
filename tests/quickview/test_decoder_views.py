"""Decoders in `reportgen view` (issue 31, first part): GPT-2 and the Llama family (Llama, Qwen2, Mistral,
Gemma) on tiny random checkpoints with a byte-level BPE tokenizer trained here.

Each family's single file holds the model's own attention (within the 8-bit step, read here with
transformers), nothing above the diagonal (a token sees only itself and what precedes it), contributions,
and a query/key view whose check passes with the causal mask (Mistral's sliding window too), rotary
positions and shared key/value heads; a pair is refused for a tokenizer without a separator. Builds of
decoders are tested in tests/test_decoder_build.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.decoder_checkpoints import FAMILIES, make_decoder

pytestmark = pytest.mark.slow

TEXT = "the cat sat on the mat. the cat sat on the"
STEP = 0.5 / 255  # the 8-bit encoding's bound on each weight (reportgen/site/views.py)
@pytest.fixture(scope="module")
def decoders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("decoders")
    return {family: make_decoder(family, root / family) for family in FAMILIES}


def model_attention(path: Path, text: str) -> np.ndarray:
    """[L, H, T, T] read here with transformers, not through reportgen."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(**tokenizer(text, return_tensors="pt"), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy()


def reportgen(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_decoders_view_holds_its_causal_attention_contributions_and_a_passing_query_key_check(family, decoders):
    from reportgen.quickview.inputs import run_text
    from reportgen.site import views

    with warnings.catch_warnings():  # nothing cut, and no config set max_length: nothing to say
        warnings.simplefilter("error")
        quick = run_text(TEXT, model=str(decoders[family]))
    run = quick.run
    attention = model_attention(decoders[family], TEXT)
    assert np.abs(run.attention - attention).max() < 1e-5
    upper = np.triu(np.ones(attention.shape[-2:], dtype=bool), 1)
    assert run.attention[..., upper].max() == 0  # a token attends only to itself and what precedes it
    assert run.value_norms is not None and run.value_norms.shape == attention.shape[:3]
    payload = views.combined_payload(run)
    assert payload["causal"] is True  # the views draw nothing above the diagonal
    decoded = views.decode_attention(payload["attention"])
    assert np.abs(decoded - attention).max() <= STEP + 1e-6
    check = payload["qk"]["check"]
    assert check["difference"] <= check["rounding"], check
    masked = [views.decode_visible(layer, run.n_tokens) for layer in payload["qk"]["visible"]]
    window = 6 if family == "mistral" else run.n_tokens  # Mistral's sliding window: keys i-5..i
    keys = np.arange(run.n_tokens)
    expected = (keys[None, :] <= keys[:, None]) & (keys[None, :] > keys[:, None] - window)
    assert all((layer == expected).all() for layer in masked)


def test_the_command_writes_a_decoders_view_and_refuses_what_it_cannot_show(decoders, tmp_path):
    done = reportgen(tmp_path, "view", TEXT, "--model", str(decoders["gpt2"]), "--out", "gpt2.html")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "gpt2.html").read_text(encoding="utf-8")
    payload = json.loads(re.search(r'id="rgv-data">(.*?)</script>', page, re.S).group(1))
    assert payload["qk"]["check"]["difference"] <= payload["qk"]["check"]["rounding"]
    pair = reportgen(tmp_path, "view", "the cat sat", "--pair", "on the mat", "--model", str(decoders["gpt2"]),
                     "--out", "pair.html")
    assert pair.returncode == 4 and not (tmp_path / "pair.html").exists()
    assert pair.stderr.strip().splitlines()[-1] == (
        "error: pair: gpt2 is a decoder whose tokenizer has no separator token, so the two texts would read as "
        "one; give one text")


def test_a_notebook_shows_a_decoder(decoders):
    import reportgen

    view = reportgen.show(TEXT, model=str(decoders["llama"]), view="qk")
    html = view._repr_html_()
    payload = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S).group(1))
    assert payload["qk"]["check"]["difference"] <= payload["qk"]["check"]["rounding"]
    assert any(layer is not None for layer in payload["qk"]["visible"])  # the causal mask travels with it


def test_a_config_that_asks_more_tokens_than_the_model_takes_is_told_so(decoders, tmp_path):
    from reportgen.quickview.inputs import run_text

    config = tmp_path / "reportgen.yaml"
    config.write_text(f"model: {decoders['gpt2']}\nmax_length: 512\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="config field 'max_length' is 512 but the model takes at most 128"):
        run_text(TEXT, config=config)
