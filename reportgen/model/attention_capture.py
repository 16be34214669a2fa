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

A capture of more than SPOOL_BYTES goes to an unnamed temp file as each layer comes, not into memory: the run's
attention is then a `reportgen.runs.StoredAttention` that the analyses read a layer at a time, and the model stage
moves it into the run's cache entry. At 4,096 tokens on a Llama-shaped 8 x 8 heads the whole is 4.3 GB; a build
holds one layer of it (537 MB). The temp file goes where `spooling_to` says (a build: its cache directory, on the
disk the entry goes to; /tmp is often memory) or else to TMPDIR; a folder it cannot be written in ends the build
with one line (OutputError) naming the folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np

from reportgen.errors import OutputError
from reportgen.runs import StoredAttention, kept_in_file

_SPOOL_FOLDER: ContextVar[Path | None] = ContextVar("spool_folder", default=None)


@contextmanager
def spooling_to(folder: Path) -> Iterator[None]:
    """Long inputs' temp files go to `folder` (made if missing) within this block (the build's cache directory)."""
    token = _SPOOL_FOLDER.set(Path(folder))
    try:
        yield
    finally:
        _SPOOL_FOLDER.reset(token)


def _temp_file():
    folder = _SPOOL_FOLDER.get()
    try:
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryFile(prefix="reportgen-attention-", dir=folder)
    except OSError as exc:
        raise _spool_error(folder, exc) from None


def _spool_error(folder: Path | None, exc: OSError) -> OutputError:
    where = folder if folder is not None else Path(tempfile.gettempdir())
    hint = "set cache_dir to another directory (config field 'cache_dir')" if folder is not None else "set TMPDIR"
    return OutputError(f"a long input's attention cannot be written to {where} ({exc.strerror or exc}); free space "
                       f"there or {hint}")


class LayerAttention:
    """The float32 [layers, heads, tokens, tokens] the hooks fill, a layer per call, in the order the layers run:
    an array, or past SPOOL_BYTES (reportgen.runs) a StoredAttention over a temp file."""

    def __init__(self, layers: int, heads: int, tokens: int) -> None:
        shape = (layers, heads, tokens, tokens)
        if kept_in_file(4 * layers * heads * tokens * tokens):
            self.attention = StoredAttention(shape, _temp_file())
        else:
            self.attention = np.empty(shape, dtype=np.float32)
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
        layer = weights[0].detach().float().cpu().numpy()
        if isinstance(self.attention, StoredAttention):
            try:
                _write_at(self.attention.handle.fileno(), np.ascontiguousarray(layer, dtype="<f4"),
                          self.count * layer.nbytes)
            except OSError as exc:  # a full disk: said in one line, not through the model's forward
                raise _spool_error(_SPOOL_FOLDER.get(), exc) from None
        else:
            self.attention[self.count] = layer
        del layer
        self.count += 1
        if self._empty is None:
            self._empty = weights.new_empty(0)
        return (output[0], self._empty, *output[2:])


def _write_at(fd: int, array: np.ndarray, start: int) -> None:
    view, done = memoryview(array.reshape(-1)).cast("B"), 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], start + done)


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
