"""Each layer's attention weights copied out as the layer computes them, so that a forward never holds them all.

Why: asked for its attentions, a model hands back every layer's [1, H, T, T] at once, beside the float32 copy the
analyses read: at 1,024 tokens on GPT-2-small's 12 x 12 heads that is 604 MB twice, most of a build's peak memory
(issue 46). Eager attention returns each layer's weights as the second item of its attention module's output; a
forward hook on every module copies the first such tensor of each layer into one float32 [L, H, T, T] and hands on
an empty tensor in its place, which is what the model's own collection (its output recorder, or each layer's
return value) then keeps: the layer's weights are freed with the rest of the layer.

Which module that is differs per family (BertSelfAttention, GPT2Attention, LlamaAttention, ...), so the hooks
look at what a module returns, not at its name: a tuple whose second item is a [1, H, T, T] tensor of this
input's tokens, not yet seen. Wrappers that pass the weights on (BertAttention) see the empty tensor and are
skipped; a model whose modules return no such tensor is captured by none (`complete` is False) and the caller
reads the model's outputs as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


class LayerAttention:
    """The float32 [layers, heads, tokens, tokens] the hooks fill, a layer per call, in the order the layers run."""

    def __init__(self, layers: int, heads: int, tokens: int) -> None:
        self.attention = np.empty((layers, heads, tokens, tokens), dtype=np.float32)
        self.count = 0
        self._empty = None

    @property
    def complete(self) -> bool:
        return self.count == len(self.attention)

    def hook(self, _module, _args, output):
        """A forward hook: takes the layer's weights out of `output` (see the module docstring)."""
        import torch

        if not isinstance(output, tuple) or len(output) < 2 or self.complete:
            return None
        weights = output[1]
        if not isinstance(weights, torch.Tensor) or tuple(weights.shape) != (1, *self.attention.shape[1:]):
            return None
        self.attention[self.count] = weights[0].detach().float().cpu().numpy()
        self.count += 1
        if self._empty is None:
            self._empty = weights.new_empty(0)
        return (output[0], self._empty, *output[2:])


def _layout(config) -> tuple[int, int] | None:
    """(layers, heads) from a config, or None where it does not say (the outputs are read then)."""
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    return (int(layers), int(heads)) if layers and heads else None


@contextmanager
def layer_attention(model, tokens: int) -> Iterator[LayerAttention | None]:
    """Hooks on every module of `model` (an encoder or a decoder: reportgen.model.seq2seq runs encoder-decoders) for
    one forward of `tokens` tokens (batch 1), removed on exit; yields the LayerAttention they fill, or None where
    the config gives no layers and heads."""
    layout = _layout(model.config)
    if layout is None:
        yield None
        return
    capture = LayerAttention(*layout, tokens)
    handles = [module.register_forward_hook(capture.hook) for module in model.modules()]
    try:
        yield capture
    finally:
        for handle in handles:
            handle.remove()
