"""Masking attention heads without `head_mask`, which transformers 5 removed.

Each head's context vector (its slice of the input to the attention output
projection) is gated by a forward pre-hook on that projection. A gate m in [0, 1]
mixes the head's context with a replacement:

    context_h <- m * context_h + (1 - m) * replacement_h

- method "zero": the replacement is 0, i.e. the head is removed (Michel, Levy and
  Neubig 2019, "Are Sixteen Heads Really Better Than One?"); with a real-valued mask
  that requires grad, d loss / d m is their head importance.
- method "uniform": the replacement is the context the head would produce with
  uniform attention, 1/n over the non-padding keys (Kovaleva, Romanov, Rogers and
  Rumshisky 2019, "Revealing the Dark Secrets of BERT"). Since uniform weights
  give every query the same mix, that context is the masked mean of the head's value
  vectors over keys, which we take from a forward hook on the value projection; the
  attention implementation (eager or sdpa) does not matter.

The masker also tracks the layer index (ALBERT runs one shared layer module at every
depth, so the index is counted per call) and can record each layer's output and
replay it later, so a forward pass can skip the layers below the first masked one.

For method "zero" on the BERT layout (BERT, RoBERTa, XLM-R, ELECTRA, CamemBERT) it can
also start a forward *inside* the first masked layer l: up to the output projection the
self-attention block of layer l sees the unmasked model's input, so its per-head context
c and the sum s = dense(c) + input (what the attention LayerNorm receives) are those of the
unmasked model. Recorded once, they give the masked sum exactly as

    dense(c * m) + input = s - sum over heads h with m_h != 1 of (1 - m_h) W_O[:, h] c_h,

one small product per masked head instead of the Q, K, V projections, the attention and
the output projection of layer l; then the LayerNorm, the feed-forward block and layers
l+1.. run as usual (`record_attention_below` / `resume`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Literal

import torch
from torch import nn

from reportgen.errors import ModelError

Method = Literal["zero", "uniform"]


@dataclass
class HeadSites:
    """Where the heads live in a model: one entry per depth (layer index)."""

    layers: list[nn.Module]  # the module run at each depth (ALBERT: the same module repeated)
    out_proj: list[nn.Module]  # attention output projection at each depth; its input is the per-head context
    value_proj: list[nn.Module]  # value projection at each depth
    encoder: nn.Module  # runs the layers; a new forward starts when it is called
    heads: int
    head_dim: int

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def shared(self) -> bool:
        return len({id(m) for m in self.layers}) < len(self.layers)


def locate(model: nn.Module) -> HeadSites:
    """Find the layers, output and value projections of a BERT-family model by its structure."""
    base = getattr(model, "base_model", model)
    cfg = model.config
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads", None)
    encoder = getattr(base, "encoder", None) or getattr(base, "transformer", None)
    if encoder is None or not heads:
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its attention heads")
    if hasattr(encoder, "albert_layer_groups"):
        groups = encoder.albert_layer_groups
        if cfg.inner_group_num != 1:
            raise ModelError(f"ALBERT with inner_group_num={cfg.inner_group_num}: reportgen masks heads only when inner_group_num is 1")
        n = cfg.num_hidden_layers
        # AlbertTransformer: depth i runs group int(i / (layers / groups)).
        layers = [groups[int(i / (n / cfg.num_hidden_groups))].albert_layers[0] for i in range(n)]
        out_proj = [layer.attention.dense for layer in layers]
        value_proj = [layer.attention.value for layer in layers]
    elif hasattr(encoder, "layer"):
        layers = list(encoder.layer)
        first = layers[0].attention
        if hasattr(first, "out_lin"):  # DistilBERT
            out_proj = [layer.attention.out_lin for layer in layers]
            value_proj = [layer.attention.v_lin for layer in layers]
        elif hasattr(first, "output") and hasattr(first.output, "dense") and hasattr(first, "self"):
            out_proj = [layer.attention.output.dense for layer in layers]
            # BERT, RoBERTa, ELECTRA, XLM-R: self.value; DeBERTa-v2: self.value_proj.
            value_proj = [getattr(layer.attention.self, "value", None) or layer.attention.self.value_proj for layer in layers]
        else:
            raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its attention output projection")
        if getattr(cfg, "z_steps", 0) > 1:
            raise ModelError("DeBERTa with z_steps > 1 reruns its last layer; reportgen cannot mask it")
    else:
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its layers")
    in_features = out_proj[0].in_features
    if in_features % heads:
        raise ModelError(f"model type '{cfg.model_type}': {in_features} features do not split into {heads} heads")
    return HeadSites(layers, out_proj, value_proj, encoder, heads, in_features // heads)


RESUMABLE_LAYERS = frozenset({"BertLayer", "RobertaLayer", "XLMRobertaLayer", "ElectraLayer", "CamembertLayer"})


def attention_norms(model: nn.Module, sites: HeadSites) -> list[nn.Module] | None:
    """The attention block's LayerNorm at each depth when the layers have the BERT layout
    (LayerNorm(dense(context) + input), then `feed_forward_chunk`); None otherwise."""
    if sites.shared:
        return None
    norms = []
    for layer in sites.layers:
        out = getattr(getattr(layer, "attention", None), "output", None)
        if (
            type(layer).__name__ not in RESUMABLE_LAYERS
            or not hasattr(layer, "feed_forward_chunk")
            or getattr(out, "dense", None) is None
            or not isinstance(getattr(out, "LayerNorm", None), nn.LayerNorm)
            or getattr(layer, "is_decoder", False)
            or getattr(layer, "add_cross_attention", False)
        ):
            return None
        norms.append(out.LayerNorm)
    return norms


def _tile(obj: Any, k: int) -> Any:
    """Repeat a recorded layer output k times along the batch (masks stacked batch-major)."""
    if k == 1:
        return obj
    if isinstance(obj, torch.Tensor):
        return obj.repeat(k, *([1] * (obj.dim() - 1)))
    if isinstance(obj, tuple):
        return tuple(_tile(o, k) for o in obj)
    return obj


class HeadMasker:
    """Hooks that gate heads; use as a context manager around forward passes.

    State set between forwards:
    - `set_mask(mask)`: [layers, heads] for every row, or [rows, layers, heads] for one
      mask per batch row (several masks in one forward: repeat the batch, one block per mask).
    - `gates`: optional [layers, rows, tokens, heads] multiplied into the mask, one gate per
      token, for Michel et al.'s per-token importance.
    - `record_below(d)` / `replay(outputs, start)`: record layer outputs of depths < d, or
      return recorded ones for depths < start instead of running those layers.
    - `record_attention_below(d)` / `resume(recorded, start)` (method "zero", BERT layout,
      `can_resume`): record each depth's unmasked context and attention sum, or start the
      next forward at depth `start`'s attention LayerNorm (see the module docstring).
    """

    def __init__(self, model: nn.Module, method: Method = "zero"):
        if method not in ("zero", "uniform"):
            raise ValueError(f"unknown masking method {method!r}")
        self.model = model
        self.method = method
        self.sites = locate(model)
        self._norms = attention_norms(model, self.sites) if method == "zero" else None
        self.mask: torch.Tensor | None = None
        self.gates: torch.Tensor | None = None
        self._active: list[bool] = [False] * self.sites.n_layers
        self._key_mask: torch.Tensor | None = None
        self._values: torch.Tensor | None = None
        self._depth = -1
        self._record_below = 0
        self.recorded: dict[int, Any] = {}
        self._replay: dict[int, Any] = {}
        self._replay_start = 0
        self._record_attention_below = 0
        self._attention: dict[int, list[Any]] = {}
        self._resume: tuple[torch.Tensor, torch.Tensor] | None = None
        self._resume_copies = 1
        self._handles: list[Any] = []
        self._patched: list[tuple[nn.Module, Any]] = []

    # -- state -------------------------------------------------------------------------
    def set_mask(self, mask: torch.Tensor | None) -> None:
        """Set the mask (1 = keep, 0 = replace); None removes it."""
        shape = (self.sites.n_layers, self.sites.heads)
        if mask is not None and tuple(mask.shape[-2:]) != shape:
            raise ValueError(f"mask shape {tuple(mask.shape)} does not end with [layers, heads] = {list(shape)}")
        self.mask = mask
        if mask is None:
            self._active = [False] * self.sites.n_layers
        else:
            per_layer = mask.detach().reshape(-1, *shape).ne(1).any(dim=(0, 2)).tolist()
            self._active = [bool(a) or mask.requires_grad for a in per_layer]

    def record_below(self, depth: int) -> None:
        """Record the outputs of layers at depths < `depth` in `self.recorded` on the next forward."""
        self._record_below = depth
        self.recorded = {}

    def replay(self, outputs: dict[int, Any], start: int, copies: int = 1) -> None:
        """Skip layers below `start`, returning `outputs` (tiled `copies` times) instead."""
        self._replay = {d: _tile(outputs[d], copies) for d in range(start)}
        self._replay_start = start
        self._resume = None

    @property
    def can_resume(self) -> bool:
        """Whether `resume` is available: method "zero" on a model with the BERT layout."""
        return self._norms is not None

    def record_attention_below(self, depth: int) -> None:
        """On the next (unmasked) forward, record for depths < `depth` the per-head context
        (input of the output projection) and the attention LayerNorm's input, in
        `self.recorded_attention`."""
        if depth and not self.can_resume:
            raise ValueError("recording the attention block needs method 'zero' and the BERT layout")
        self._record_attention_below = depth
        self._attention = {}

    @property
    def recorded_attention(self) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        return {d: (ctx, pre) for d, (ctx, pre) in self._attention.items()}

    def resume(self, recorded: dict[int, tuple[torch.Tensor, torch.Tensor]], start: int, copies: int = 1) -> None:
        """Start the next forward at depth `start`'s attention LayerNorm from `recorded[start]`
        (a `recorded_attention` entry of the same batch, which is repeated `copies` times):
        layers below `start` are skipped, and at `start` only the masked heads' share of the
        output projection is computed. Needs `can_resume`, eval mode and no per-token gates."""
        if not self.can_resume:
            raise ValueError("resume needs method 'zero' and the BERT layout")
        if self.model.training:
            raise RuntimeError("resume needs the model in eval mode (dropout would differ)")
        self._replay = {}
        self._replay_start = start
        self._resume = recorded[start]
        self._resume_copies = copies

    def clear(self) -> None:
        self.set_mask(None)
        self.gates = None
        self._record_below = 0
        self._record_attention_below = 0
        self._replay = {}
        self._replay_start = 0
        self._resume = None

    # -- hooks ---------------------------------------------------------------------------
    def __enter__(self) -> "HeadMasker":
        s = self.sites
        base = getattr(self.model, "base_model", self.model)
        self._handles.append(base.register_forward_pre_hook(self._on_model, with_kwargs=True))
        self._handles.append(s.encoder.register_forward_pre_hook(self._on_encoder))
        seen: set[int] = set()
        for depth, layer in enumerate(s.layers):
            if id(layer) in seen:
                continue
            seen.add(id(layer))
            static = None if s.shared else depth
            self._handles.append(layer.register_forward_pre_hook(self._depth_hook(static)))
            self._handles.append(layer.register_forward_hook(self._on_layer_output))
            self._patch_forward(layer)
            self._handles.append(s.out_proj[depth].register_forward_pre_hook(self._on_out_proj))
            if self._norms is not None:
                self._handles.append(self._norms[depth].register_forward_pre_hook(self._on_attention_norm))
            if self.method == "uniform":
                self._handles.append(s.value_proj[depth].register_forward_hook(self._on_values))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for module, previous in reversed(self._patched):
            if previous is None:
                del module.forward  # back to the class's forward
            else:
                module.forward = previous  # an enclosing masker's patch
        self._patched = []
        self.clear()

    def _patch_forward(self, layer: nn.Module) -> None:
        previous = layer.__dict__.get("forward")
        original = layer.forward

        def forward(*args, **kwargs):
            if self._depth < self._replay_start:
                if self._resume is not None:  # unused: the layer at the start ignores its input
                    return args[0] if args else kwargs["hidden_states"]
                return self._replay[self._depth]
            if self._resume is not None and self._depth == self._replay_start:
                return self._resumed_layer(layer, self._depth)
            return original(*args, **kwargs)

        layer.forward = forward
        self._patched.append((layer, previous))

    def _on_model(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        att = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
        self._key_mask = att if att is not None else (torch.ones(ids.shape[:2], device=ids.device) if ids is not None else None)
        return None

    def _on_encoder(self, module, args):
        self._depth = -1

    def _depth_hook(self, static: int | None):
        def hook(module, args):
            self._depth = static if static is not None else self._depth + 1
            if self._depth >= self.sites.n_layers:
                raise RuntimeError(f"layer call {self._depth} beyond the model's {self.sites.n_layers} layers")

        return hook

    def _on_layer_output(self, module, args, output):
        if self._depth < self._record_below and self._depth >= self._replay_start:
            self.recorded[self._depth] = output

    def _on_values(self, module, args, output):
        self._values = output

    def _on_attention_norm(self, module, args):
        if self._depth < self._record_attention_below:
            self._attention[self._depth].append(args[0])

    def _resumed_layer(self, layer: nn.Module, depth: int) -> torch.Tensor:
        """Layer `depth` from its recorded attention sum, less the masked heads' share."""
        if self.gates is not None:
            raise RuntimeError("per-token gates need the full forward; call replay({}, 0) first")
        context, pre = self._resume
        k = self._resume_copies
        rows, tokens, hidden = pre.shape
        out = pre.repeat(k, 1, 1) if k > 1 else pre.clone()
        if self._active[depth]:
            heads, dh = self.sites.heads, self.sites.head_dim
            drop = 1 - self._gate(depth, rows * k if self.mask.dim() == 3 else 1, 1, pre).view(-1, heads)
            blocks = out.view(k, rows, tokens, hidden)
            per_row = drop.shape[0] > 1
            drop = drop.view(k, rows, heads) if per_row else drop.view(1, 1, heads).expand(k, 1, heads)
            weight = self.sites.out_proj[depth].weight  # [hidden, heads * dh]
            per_head = context.view(rows, tokens, heads, dh)
            for h in torch.nonzero(drop.ne(0).any(dim=(0, 1))).flatten().tolist():
                share = per_head[:, :, h] @ weight[:, h * dh:(h + 1) * dh].t()  # head h's part of dense(context)
                for b in torch.nonzero(drop[:, :, h].ne(0).any(dim=1)).flatten().tolist():
                    blocks[b].sub_(drop[b, :, h].view(-1, 1, 1) * share)
        attention_output = self._norms[depth](out)
        return layer.feed_forward_chunk(attention_output)

    def _on_out_proj(self, module, args):
        depth = self._depth
        if depth < self._record_attention_below:
            self._attention[depth] = [args[0]]
        if not self._active[depth] and self.gates is None:
            return None
        context = args[0]
        rows, tokens = context.shape[:2]
        per_head = context.view(rows, tokens, self.sites.heads, self.sites.head_dim)
        gate = self._gate(depth, rows, tokens, context)  # [rows, 1 or tokens, heads]
        gate = gate.unsqueeze(-1)
        if self.method == "zero":
            mixed = per_head * gate
        else:
            mixed = per_head * gate + (1 - gate) * self._uniform_context(rows, tokens)
        return (mixed.reshape(rows, tokens, -1),) + tuple(args[1:])

    def _gate(self, depth: int, rows: int, tokens: int, like: torch.Tensor) -> torch.Tensor:
        heads = self.sites.heads
        if self.mask is None:
            gate = torch.ones(1, 1, heads, dtype=like.dtype, device=like.device)
        elif self.mask.dim() == 2:
            gate = self.mask[depth].to(like.dtype).view(1, 1, heads)
        else:
            if self.mask.shape[0] != rows:
                raise ValueError(f"{self.mask.shape[0]} per-row masks for a batch of {rows} rows")
            gate = self.mask[:, depth].to(like.dtype).view(rows, 1, heads)
        if self.gates is not None:
            gate = gate * self.gates[depth]
        return gate

    def _uniform_context(self, rows: int, tokens: int) -> torch.Tensor:
        """Context of a head whose attention is 1/n over the n non-padding keys (Kovaleva et al.)."""
        values = self._values.view(rows, tokens, self.sites.heads, self.sites.head_dim)
        keys = self._key_mask
        if keys is None or keys.shape[0] != rows:
            raise RuntimeError("uniform masking needs the batch's attention_mask")
        keys = keys[:, :tokens].to(values.dtype)
        mean = torch.einsum("bthd,bt->bhd", values, keys) / keys.sum(1).clamp_min(1).view(rows, 1, 1)
        return mean.unsqueeze(1)  # same for every query token


@contextmanager
def masked(model: nn.Module, mask: torch.Tensor, method: Method = "zero") -> Iterator[HeadMasker]:
    """`with masked(model, mask): model(**batch)` runs the model with heads gated by `mask`."""
    with HeadMasker(model, method) as masker:
        masker.set_mask(mask)
        yield masker
