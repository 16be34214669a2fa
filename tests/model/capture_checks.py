"""The check that reportgen/model/attention_capture.py took each layer's weights out of a forward, shared by the
encoder (tests/model/test_architectures.py) and decoder (tests/test_decoder_build.py) families' tests."""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from reportgen.config import ExampleSpec

TEXT = ExampleSpec(text="the cat sat on the mat and the dog sat on the log", pair="a dog")


def check_layer_capture(model_dir: Path, monkeypatch) -> None:
    """run_example on `model_dir`: every layer captured by the hooks (none left to the model's outputs, which
    held empty tensors), and the attention equal to transformers' eager attention for the same input, whether
    it is kept in memory or, as a long input's is, in a file."""
    import torch
    from transformers import AutoModel

    from reportgen.model import attention_capture
    from reportgen.model import run as model_run
    from reportgen.model.loading import file_policy, load

    captures, returned = [], []

    @contextmanager
    def spied(model, tokens):
        with attention_capture.layer_attention(model, tokens) as capture:
            captures.append(capture)
            yield capture

    with file_policy(decoders=True):
        model, tokenizer = load(model_dir, "cpu")
    monkeypatch.setattr(model_run, "layer_attention", spied)
    model.register_forward_hook(lambda _module, _args, out: returned.append(out.attentions))
    run = model_run.run_example(model, tokenizer, TEXT, 64)
    assert len(captures) == 1 and captures[0].complete, "every layer taken out by the hooks"
    assert len(returned) == 1 and all(layer.numel() == 0 for layer in returned[0]), "the model kept none"
    inputs = tokenizer(TEXT.text, TEXT.pair, truncation=True, max_length=64, return_tensors="pt",
                       return_token_type_ids=None)
    reference = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    accepted = inspect.signature(reference.forward).parameters
    with torch.inference_mode():
        expected = reference(**{k: v for k, v in inputs.items() if k in accepted}, output_attentions=True).attentions
    expected = torch.stack(expected)[:, 0].float().numpy()
    assert np.array_equal(run.attention, expected)
    # A long input's capture goes to a temp file a layer at a time (SPOOL_BYTES): the same weights, bit for bit.
    monkeypatch.setattr("reportgen.runs.SPOOL_BYTES", 0)
    spooled = model_run.run_example(model, tokenizer, TEXT, 64)
    assert type(spooled.attention).__name__ == "StoredAttention" and captures[-1].complete
    assert np.array_equal(np.asarray(spooled.attention), expected)
