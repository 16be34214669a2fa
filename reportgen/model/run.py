"""Running the model over the examples and keeping what the analyses need, as a
`reportgen.runs.ExampleRun` of plain numpy data per example."""

from __future__ import annotations

import re

import numpy as np

from reportgen.config import ExampleSpec
from reportgen.model.attention_capture import layer_attention
from reportgen.model.special_tokens import special_flags, special_ids
from reportgen.runs import ExampleRun

# A token covers at most a word, and a word of over 100 characters is one [UNK] to WordPiece: the first
# max_length + 1 words, within 100 characters per token, hold every token a text keeps and one more.
CHARS_PER_TOKEN = 100
_WORD = re.compile(r"\S+")


def clip(text: str, max_length: int) -> tuple[str, bool]:
    """The start of `text` that holds every token it can keep at `max_length` (and one more, so a cut
    text still counts as truncated), and whether anything was cut.

    Why: a tokenizer truncating a long pair keeps every overflowing window of both texts, so its time
    and memory grow with the product of their lengths (two texts of 20,000 words took 20 GB); cut
    first, the pair costs what its first few hundred tokens cost."""
    head = text[:CHARS_PER_TOKEN * (max_length + 1)]
    for count, word in enumerate(_WORD.finditer(head), start=1):
        if count > max_length + 1:
            return head[:word.start()].rstrip(), True
    return head, len(head) < len(text)


def encode(tokenizer, spec: ExampleSpec, max_length: int):
    """Tokenize one example; returns (model inputs, tokens, word_ids, segment_ids, special, truncated)."""
    parts = [clip(text, max_length) for text in (spec.text, spec.pair) if text is not None]
    args = tuple(text for text, _ in parts)
    full = tokenizer(*args, truncation=False, verbose=False)["input_ids"]
    inputs = tokenizer(*args, truncation=True, max_length=max_length, return_tensors="pt")
    special = special_flags(inputs["input_ids"][0].tolist(), special_ids(tokenizer))  # <unk> is content
    encoding = inputs.encodings[0]
    segments = np.array([-1 if s is None else s for s in encoding.sequence_ids], dtype=np.int64)
    words = np.array([-1 if w is None else w for w in encoding.word_ids], dtype=np.int64)
    # Word ids restart in sentence B; make them unique across the pair.
    if (segments == 1).any():
        words = np.where(segments == 1, words + words[segments == 0].max(initial=-1) + 1, words)
    segments = np.where(special, -1, segments)
    words = np.where(special, -1, words)
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
    return inputs, tokens, words, segments, special, any(cut for _, cut in parts) or len(full) > max_length


def run_example(model, tokenizer, spec: ExampleSpec, max_length: int, keep_qk: bool = False) -> ExampleRun:
    """One forward pass with attentions and value norms (for contributions); with `keep_qk`, also the
    query/key vectors (extras) for the q/k view."""
    import torch

    from reportgen.model.qk import capture_qk
    from reportgen.model.value_norms import value_norms

    inputs, tokens, words, segments, special, truncated = encode(tokenizer, spec, max_length)
    device = next(model.parameters()).device
    feed = {name: tensor.to(device) for name, tensor in inputs.items()}
    with capture_qk(model, enabled=keep_qk) as capture, value_norms(model) as norms, torch.inference_mode():
        with layer_attention(model, len(tokens)) as layers:
            outputs = model(**feed, output_attentions=True)
    extras = capture.extras() if keep_qk else {}
    if layers is not None and layers.complete:
        return ExampleRun(spec, tokens, words, segments, special, layers.attention, truncated, extras, norms.norms)
    if layers is not None and layers.count:  # some layers taken out, not all: the weights again, with no hook
        with torch.inference_mode():  # (outside value_norms and capture_qk, which would record a second pass)
            outputs = model(**feed, output_attentions=True)
    if not outputs.attentions or outputs.attentions[0] is None:
        raise RuntimeError("the model returned no attention weights; "
                           "it must be loaded with attn_implementation='eager'")
    returned = list(outputs.attentions)
    del outputs  # the layers' tensors are then only in `returned`, each freed as it is copied
    return ExampleRun(spec, tokens, words, segments, special, _as_numpy(returned), truncated, extras, norms.norms)


def _as_numpy(layers: list) -> np.ndarray:
    """The layers' attention [1, H, T, T] each as one float32 [L, H, T, T], each layer's tensor let go once
    copied: the copy never stands beside a second whole model's worth (torch.stack would make one)."""
    attention = np.empty((len(layers), *layers[0].shape[1:]), dtype=np.float32)
    for layer in range(len(layers)):
        attention[layer] = layers[layer][0].float().cpu().numpy()
        layers[layer] = None
    return attention
