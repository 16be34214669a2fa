"""reportgen.model.light_bert gives what the transformers path gives (reportgen.model.run.run_example):
the same tokens, words and segments, and attention, query/key vectors and value norms within float32
rounding, on a random BERT and on the embedded all-MiniLM-L6-v2; it refuses what it does not reproduce."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.model import light_bert, loading
from reportgen.model.run import run_example

INPUTS = [
    ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries."),
    ExampleSpec(text="Héllo WORLD, naïve café: 東京 😀 don't stop"),
    ExampleSpec(text="the cat sat on the mat " * 40),  # past max_length: truncated
    ExampleSpec(text="a red car " * 30, pair="he is it " * 30),  # a pair cut from both sides
    ExampleSpec(text="a typed [MASK] and [SEP], an unknown \u2603 and a typed [UNK]"),  # specials as typed (issue 47)
]


def compare(path, max_length: int) -> None:
    light = light_bert.LightBert.load(path)
    net, tokenizer = loading.load(path, "cpu")
    for spec in INPUTS:
        ours, theirs = light.run(spec, max_length), run_example(net, tokenizer, spec, max_length, keep_qk=True)
        assert ours.tokens == theirs.tokens and ours.truncated == theirs.truncated
        for field in ("word_ids", "segment_ids", "special"):
            assert np.array_equal(getattr(ours, field), getattr(theirs, field)), field
        assert ours.attention.shape == theirs.attention.shape
        assert np.abs(ours.attention - theirs.attention).max() < 1e-5
        for name in ("queries", "keys"):
            assert np.allclose(ours.extras[name], theirs.extras[name], atol=1e-4, rtol=1e-4), name
        assert np.isclose(float(ours.extras["scaling"]), float(theirs.extras["scaling"]))
        assert np.allclose(ours.value_norms, theirs.value_norms, atol=1e-4, rtol=1e-4)


@pytest.mark.slow  # imports transformers' model code (~5 s): out of the fast tier
def test_a_random_bert_runs_as_through_transformers(tiny_model):
    assert light_bert.supports(tiny_model)
    compare(tiny_model, 64)


@pytest.mark.slow
def test_the_embedded_model_runs_as_through_transformers(embedded_model_path):
    assert light_bert.supports(embedded_model_path)
    compare(embedded_model_path, 128)


@pytest.mark.parametrize("change", [
    {"model_type": "roberta"},
    {"hidden_act": "gelu_new"},
    {"position_embedding_type": "relative_key"},
    {"is_decoder": True},
])
def test_other_checkpoints_go_through_transformers(tiny_model, tmp_path, change):
    copy = shutil.copytree(tiny_model, tmp_path / "model")
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    (copy / "config.json").write_text(json.dumps({**config, **change}), encoding="utf-8")
    assert not light_bert.supports(copy)


def test_missing_files_or_weights_are_not_taken_for_a_bert(tiny_model, tmp_path):
    from safetensors.torch import load_file, save_file

    copy = shutil.copytree(tiny_model, tmp_path / "model")
    (copy / "tokenizer.json").unlink()
    assert not light_bert.supports(copy)
    copy = shutil.copytree(tiny_model, tmp_path / "short")
    weights = load_file(copy / "model.safetensors")
    save_file({name: value for name, value in weights.items() if "layer.1.output.dense" not in name},
              copy / "model.safetensors")
    with pytest.raises(ValueError, match="lacks 2 weights"):
        light_bert.LightBert.load(copy)
