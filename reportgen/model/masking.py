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
- method "mean": the replacement is the head's mean context at the same token position over the task's
  inputs (mean ablation, Wang et al. 2022, "Interpretability in the Wild"), and method "resample": its
  context on another input of the task at that position (resample ablation, Chan et al. 2022, "Causal
  Scrubbing"). Both keep the head's output on the distribution the next layers were trained on, which
  zero does not. The replacements are computed from unmasked forwards (`capturing`) by
  `reportgen.model.replacements` and handed to the forwards they hold for (`replacing`).

Encoder-decoders (BART, T5, Marian; `HeadSites.groups`): the mask's rows are the flat layers
[encoder self-attention..., decoder self-attention..., cross-attention...], and each group is gated at
its own output projection (`out_proj`, T5's `o`) in the same way. Uniform masking is exact for each
group, with the keys that group's queries see: the encoder's self-attention spreads 1/n over the
source's non-padding tokens; the decoder's self-attention is causal, so target query i spreads
1/(i+1) over target tokens 0..i (the running mean of the values, as in a decoder); cross-attention
spreads 1/n over the source's non-padding tokens, with the values taken from the encoder's output.
The key masks are read from the encoder's and decoder's own calls (`attention_mask`, and the
decoder's `attention_mask` / `encoder_attention_mask`; none given means every token is real). The
layers of an encoder-decoder do not run in flat order (decoder self-attention and cross-attention
alternate), so its forwards cannot skip the layers below a flat depth: `can_replay` is False and
`recording` / `replaying` take depth 0 only.

The masker also tracks the layer index (ALBERT runs one shared layer module at every
depth, so the index is counted per call) and can record each layer's output and
replay it later, so a forward pass can skip the layers below the first masked one.

For methods "zero", "mean" and "resample" on the BERT layout (BERT, RoBERTa, XLM-R, ELECTRA, CamemBERT) it can
also start a forward *inside* the first masked layer l: up to the output projection the
self-attention block of layer l sees the unmasked model's input, so its per-head context
c and the sum s = dense(c) + input (what the attention LayerNorm receives) are those of the
unmasked model. Recorded once, they give the masked sum exactly as

    dense(c * m) + input = s - sum over heads h with m_h != 1 of (1 - m_h) W_O[:, h] c_h,

one small product per masked head instead of the Q, K, V projections, the attention and
the output projection of layer l (with a replacement r, c_h - r_h takes c_h's place: the masked sum
gains (1 - m_h) W_O[:, h] r_h); then the LayerNorm, the feed-forward block and layers
l+1.. run as usual (`recording(depth, attention=True)` / `resuming`; the arithmetic is in
`subtract_head_shares`).

Every setting is a scope (`with masker.masking(mask):`, `recording`, `replaying`, `resuming`,
`gated`, `replacing`, `capturing`) that holds for the forwards inside it and is undone when it ends, so no setting
outlives the code that needed it and no call order has to be remembered.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal, Protocol

import torch
from torch import nn

from reportgen.model.head_sites import HeadSites, attention_norms, locate

Method = Literal["zero", "uniform", "mean", "resample"]
METHODS: tuple[str, ...] = ("zero", "uniform", "mean", "resample")
REPLACED = ("mean", "resample")  # the methods whose replacement comes from `replacing`
AttentionRecord = tuple[torch.Tensor, torch.Tensor]  # per-head context, attention LayerNorm input


class Replacement(Protocol):
    """What a head is replaced by under methods "mean" and "resample" (`reportgen.model.replacements`)."""

    def at(self, depth: int, rows: int, tokens: int) -> torch.Tensor:
        """[rows or 1, tokens, heads * head_dim]: the replacement context of every head at flat layer `depth`
        for a forward of `rows` rows (stacked masks: the batch repeated) and `tokens` positions of that
        layer's stream."""


# (flat layer, unmasked context [rows, tokens, heads * head_dim], real query tokens [rows, tokens])
Capture = Callable[[int, torch.Tensor, torch.Tensor], None]


def tile(recorded: Any, copies: int) -> Any:
    """Repeat a recorded layer output `copies` times along the batch (masks stacked batch-major)."""
    if copies == 1:
        return recorded
    if isinstance(recorded, torch.Tensor):
        return recorded.repeat(copies, *([1] * (recorded.dim() - 1)))
    if isinstance(recorded, tuple):
        return tuple(tile(part, copies) for part in recorded)
    return recorded


def uniform_context(values: torch.Tensor, key_mask: torch.Tensor | None, causal: bool = False) -> torch.Tensor:
    """Context of heads whose attention is 1/n over the n non-padding keys they can see (Kovaleva et al.
    2019): the masked mean of the value vectors, the same for every query of an encoder; in a decoder
    query i sees keys 0..i only, so its uniform context is the running mean up to i.
    values: [rows, tokens, heads, dim]; returns [rows, 1 or tokens, heads, dim]."""
    rows, tokens = values.shape[:2]
    if key_mask is None or key_mask.shape[0] != rows:
        raise RuntimeError("uniform masking needs the batch's attention_mask")
    keys = key_mask[:, :tokens].to(values.dtype)
    weighted = values * keys.view(rows, tokens, 1, 1)
    if causal:
        counts = keys.cumsum(1).clamp_min(1).view(rows, tokens, 1, 1)
        return weighted.cumsum(1) / counts
    return weighted.sum(1, keepdim=True) / keys.sum(1).clamp_min(1).view(rows, 1, 1, 1)


def subtract_head_shares(total: torch.Tensor, context: torch.Tensor, drop: torch.Tensor, weight: torch.Tensor,
                         copies: int) -> None:
    """Take from recorded attention sums each masked head's share of the output projection, in place.

    total: [copies * rows, tokens, hidden], the recorded sum dense(c) + input repeated once per
    stacked mask; context: [rows, tokens, heads * dim], the recorded per-head context c;
    drop: 1 - m, [1, heads] for one mask or [copies * rows, heads]; weight: W_O, [hidden, heads * dim].
    Only heads and masks with a nonzero drop cost a product (see the module docstring)."""
    rows, tokens = context.shape[:2]
    heads = drop.shape[-1]
    head_dim = context.shape[-1] // heads
    blocks = total.view(copies, rows, tokens, total.shape[-1])
    per_row = drop.shape[0] > 1
    drop = drop.view(copies, rows, heads) if per_row else drop.view(1, 1, heads).expand(copies, 1, heads)
    per_head = context.view(rows, tokens, heads, head_dim)
    for head in torch.nonzero(drop.ne(0).any(dim=(0, 1))).flatten().tolist():
        share = per_head[:, :, head] @ weight[:, head * head_dim:(head + 1) * head_dim].t()
        for block in torch.nonzero(drop[:, :, head].ne(0).any(dim=1)).flatten().tolist():
            blocks[block].sub_(drop[block, :, head].view(-1, 1, 1) * share)


def head_gates(mask: torch.Tensor | None, gates: torch.Tensor | None, depth: int, rows: int,
               like: torch.Tensor) -> torch.Tensor:
    """[rows or 1, tokens or 1, heads]: the gate of each head at `depth` for a batch of `rows` rows,
    the mask (one for all rows or one per row) times the per-token gates, if any."""
    heads = mask.shape[-1] if mask is not None else gates.shape[-1]
    if mask is None:
        gate = torch.ones(1, 1, heads, dtype=like.dtype, device=like.device)
    elif mask.dim() == 2:
        gate = mask[depth].to(like.dtype).view(1, 1, heads)
    else:
        if mask.shape[0] != rows:
            raise ValueError(f"{mask.shape[0]} per-row masks for a batch of {rows} rows")
        gate = mask[:, depth].to(like.dtype).view(rows, 1, heads)
    if gates is not None:
        # one gate per token of the widest stream; an encoder-decoder's groups read their own stream's first tokens
        gate = gate * gates[depth][:, :like.shape[1]]
    return gate


def restore_forwards(patched: list[tuple[nn.Module, Any]]) -> None:
    """Undo `forward` patches, latest first: back to the class's forward or an enclosing masker's patch."""
    for module, previous in reversed(patched):
        if previous is None:
            del module.forward
        else:
            module.forward = previous


@dataclass(frozen=True)
class _Start:
    """Where the forwards start: the layers below `depth` are skipped."""

    depth: int = 0
    outputs: dict[int, Any] = field(default_factory=dict)  # replaying: the outputs of the skipped layers
    attention: AttentionRecord | None = None  # resuming: the recorded context and sum at `depth`
    copies: int = 1  # resuming: masks stacked along the batch


@dataclass(frozen=True)
class _Recording:
    depth: int  # record the layers at depths below this
    attention: bool  # the per-head context and attention sum rather than the layer output
    recorded: dict[int, Any]
    contexts: dict[int, torch.Tensor] = field(default_factory=dict)  # waiting for their layer's sum


class HeadMasker:
    """Hooks that gate heads; use as a context manager around forward passes, and inside it
    these scopes (each holds for the forwards in its `with` block):

    - `masking(mask)`: [layers, heads] for every row, or [rows, layers, heads] for one mask per
      batch row (several masks in one forward: repeat the batch, one block per mask);
    - `gated(gates)`: [layers, rows, tokens, heads] multiplied into the mask, one gate per token
      (Michel et al.'s per-token importance);
    - `recording(depth)` / `replaying(recorded, start)`: record the outputs of layers below
      `depth`, or skip the layers below `start` and use recorded outputs instead;
    - `recording(depth, attention=True)` / `resuming(recorded, start)` (`can_resume`: methods "zero",
      "mean", "resample" on the BERT layout): record each layer's unmasked context and attention sum, or
      start at layer `start`'s attention LayerNorm (see the module docstring);
    - `replacing(replacement)`: what methods "mean" and "resample" mix in (they refuse to mask without);
    - `capturing(capture)`: unmasked forwards that hand each layer's context to `capture`.
    """

    def __init__(self, model: nn.Module, method: Method = "zero"):
        if method not in METHODS:
            raise ValueError(f"unknown masking method {method!r}")
        self.model = model
        self.method = method
        self.sites: HeadSites = locate(model)
        # resuming needs the context's share of W_O, which uniform's value-derived replacement does not give
        self._norms = attention_norms(self.sites) if method != "uniform" else None
        self._reset()
        self._handles: list[Any] = []
        self._patched: list[tuple[nn.Module, Any]] = []

    def _reset(self) -> None:
        self._mask: torch.Tensor | None = None
        self._active: list[bool] = [False] * self.sites.n_layers  # layers whose heads the mask or gates touch
        self._gates: torch.Tensor | None = None
        self._start = _Start()
        self._recording: _Recording | None = None
        self._key_masks: dict[str, torch.Tensor | None] = {}  # group -> the keys its queries may see
        self._values: torch.Tensor | None = None
        self._replacement: Replacement | None = None
        self._capture: Capture | None = None
        self._depth = -1

    @property
    def can_replay(self) -> bool:
        """Whether forwards can skip the layers below a depth (`replaying`): not for an encoder-decoder,
        whose layers do not run in flat order."""
        return not self.sites.encoder_decoder

    @property
    def can_resume(self) -> bool:
        """Whether `resuming` is available: method "zero", "mean" or "resample" on a model with the BERT layout."""
        return self._norms is not None

    # -- scopes ------------------------------------------------------------------------------------
    @contextmanager
    def _scope(self, **state: Any) -> Iterator[None]:
        previous = {name: getattr(self, name) for name in state}
        for name, value in state.items():
            setattr(self, name, value)
        try:
            yield
        finally:
            for name, value in previous.items():
                setattr(self, name, value)

    def masking(self, mask: torch.Tensor) -> AbstractContextManager[None]:
        """Gate heads by `mask` (1 = keep, 0 = replace) in this scope's forwards."""
        shape = (self.sites.n_layers, self.sites.heads)
        if tuple(mask.shape[-2:]) != shape:
            raise ValueError(f"mask shape {tuple(mask.shape)} does not end with [layers, heads] = {list(shape)}")
        per_layer = mask.detach().reshape(-1, *shape).ne(1).any(dim=(0, 2)).tolist()
        return self._scope(_mask=mask, _active=[bool(touched) or mask.requires_grad for touched in per_layer])

    def gated(self, gates: torch.Tensor) -> AbstractContextManager[None]:
        """Multiply per-token gates into the mask in this scope's forwards (full forwards only)."""
        if self._start.attention is not None:
            raise RuntimeError("per-token gates need the full forward, not one resumed inside a layer")
        return self._scope(_gates=gates)

    def replacing(self, replacement: Replacement) -> AbstractContextManager[None]:
        """Mix `replacement` into masked heads (methods "mean" and "resample") in this scope's forwards; it
        must describe the rows of these forwards (a resample replacement is per row)."""
        return self._scope(_replacement=replacement)

    def capturing(self, capture: Capture) -> AbstractContextManager[None]:
        """Unmasked, full forwards in this scope (every mask, gate, start and recording set aside) that hand
        each layer's per-head context and its real query tokens to `capture`: what the replacements of
        methods "mean" and "resample" are computed from."""
        return self._scope(_capture=capture, _mask=None, _active=[False] * self.sites.n_layers, _gates=None,
                           _start=_Start(), _recording=None)

    @contextmanager
    def recording(self, depth: int, *, attention: bool = False) -> Iterator[dict[int, Any]]:
        """Record, for the layers below `depth` that run in this scope, their outputs (for `replaying`)
        or, with `attention`, their per-head context (input of the output projection) and attention
        LayerNorm input of an unmasked forward (an `AttentionRecord`, for `resuming`). Yields them by
        depth, complete when the scope ends."""
        if attention and depth and not self.can_resume:
            raise ValueError("recording the attention block needs the BERT layout and a method other than uniform")
        if depth and not self.can_replay:
            raise ValueError("an encoder-decoder's layers do not run in flat order; record depth 0 only")
        recorded: dict[int, Any] = {}
        with self._scope(_recording=_Recording(depth, attention, recorded)):
            yield recorded

    def replaying(self, recorded: dict[int, Any], start: int, copies: int = 1) -> AbstractContextManager[None]:
        """Skip the layers below `start`, returning their `recorded` outputs (a `recording` of the
        same batch, repeated `copies` times for stacked masks) instead."""
        if start and not self.can_replay:
            raise ValueError("an encoder-decoder's layers do not run in flat order; replay from depth 0 only")
        outputs = {depth: tile(recorded[depth], copies) for depth in range(start)}
        return self._scope(_start=_Start(start, outputs))

    def resuming(self, recorded: dict[int, AttentionRecord], start: int,
                 copies: int = 1) -> AbstractContextManager[None]:
        """Start each forward at layer `start`'s attention LayerNorm from `recorded[start]` (a
        `recording(..., attention=True)` of the same batch, repeated `copies` times): the layers below
        are skipped, and at `start` only the masked heads' share of the output projection is computed."""
        if not self.can_resume:
            raise ValueError("resume needs the BERT layout and a method other than uniform")
        if self.model.training:
            raise RuntimeError("resume needs the model in eval mode (dropout would differ)")
        if self._gates is not None:
            raise RuntimeError("per-token gates need the full forward, not one resumed inside a layer")
        return self._scope(_start=_Start(start, attention=recorded[start], copies=copies))

    # -- hooks -------------------------------------------------------------------------------------
    def __enter__(self) -> "HeadMasker":
        if self.sites.encoder_decoder:
            return self._enter_encoder_decoder()
        sites = self.sites
        base = getattr(self.model, "base_model", self.model)
        self._handles.append(base.register_forward_pre_hook(self._on_model, with_kwargs=True))
        self._handles.append(sites.encoder.register_forward_pre_hook(self._on_encoder))
        seen: set[int] = set()
        for depth, layer in enumerate(sites.layers):
            if id(layer) in seen:
                continue
            seen.add(id(layer))
            self._handles.append(layer.register_forward_pre_hook(self._depth_hook(None if sites.shared else depth)))
            self._handles.append(layer.register_forward_hook(self._on_layer_output))
            self._patch_forward(layer)
            self._handles.append(sites.out_proj[depth].register_forward_pre_hook(self._on_out_proj))
            if self._norms is not None:
                self._handles.append(self._norms[depth].register_forward_pre_hook(self._on_attention_norm))
            if self.method == "uniform":
                self._handles.append(sites.value_proj[depth].register_forward_hook(self._on_values))
        return self

    def _enter_encoder_decoder(self) -> "HeadMasker":
        """Hooks for an encoder-decoder: each attention module says its flat depth (they are all
        distinct), the two stacks say their key masks; nothing is skipped or replayed."""
        sites = self.sites
        base = getattr(self.model, "base_model", self.model)
        self._handles.append(base.encoder.register_forward_pre_hook(self._on_encoder_stack, with_kwargs=True))
        self._handles.append(base.decoder.register_forward_pre_hook(self._on_decoder_stack, with_kwargs=True))
        for depth, attention in enumerate(sites.layers):
            self._handles.append(attention.register_forward_pre_hook(self._depth_hook(depth)))
            self._handles.append(sites.out_proj[depth].register_forward_pre_hook(self._on_out_proj))
            if self.method == "uniform":
                self._handles.append(sites.value_proj[depth].register_forward_hook(self._on_values))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        restore_forwards(self._patched)
        self._patched = []
        self._reset()

    def _patch_forward(self, layer: nn.Module) -> None:
        """Let the layer be skipped (replaying, resuming) or entered at its attention LayerNorm."""
        previous = layer.__dict__.get("forward")
        original = layer.forward

        def forward(*args, **kwargs):
            start = self._start
            if self._depth < start.depth:
                if start.attention is not None:  # unused: the layer at the start ignores its input
                    return args[0] if args else kwargs["hidden_states"]
                return start.outputs[self._depth]
            if start.attention is not None and self._depth == start.depth:
                return self._resumed_layer(layer, self._depth)
            return original(*args, **kwargs)

        layer.forward = forward
        self._patched.append((layer, previous))

    def _on_model(self, _module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        keys = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
        if keys is None and ids is not None:
            keys = torch.ones(ids.shape[:2], device=ids.device)
        self._key_masks = {group: keys for group in ("encoder", "decoder")}

    def _on_encoder_stack(self, _module, _args, kwargs):
        self._key_masks["encoder"] = _real_tokens(kwargs.get("attention_mask"),
                                                  kwargs.get("input_ids"), kwargs.get("inputs_embeds"))

    def _on_decoder_stack(self, _module, _args, kwargs):
        self._key_masks["decoder"] = _real_tokens(kwargs.get("attention_mask"),
                                                  kwargs.get("input_ids"), kwargs.get("inputs_embeds"))
        self._key_masks["cross"] = _real_tokens(kwargs.get("encoder_attention_mask"),
                                                kwargs.get("encoder_hidden_states"), None)

    def _on_encoder(self, _module, _args):
        self._depth = -1

    def _depth_hook(self, static: int | None):
        def hook(_module, _args):
            self._depth = static if static is not None else self._depth + 1
            if self._depth >= self.sites.n_layers:
                raise RuntimeError(f"layer call {self._depth} beyond the model's {self.sites.n_layers} layers")

        return hook

    def _on_layer_output(self, _module, _args, output):
        recording = self._recording
        if recording is not None and not recording.attention and self._start.depth <= self._depth < recording.depth:
            recording.recorded[self._depth] = output

    def _on_values(self, _module, _args, output):
        self._values = self.sites.values(output)

    def _on_attention_norm(self, _module, args):
        recording = self._recording
        if recording is not None and recording.attention and self._depth < recording.depth:
            recording.recorded[self._depth] = (recording.contexts.pop(self._depth), args[0])

    def _on_out_proj(self, _module, args):
        depth = self._depth
        recording = self._recording
        if recording is not None and recording.attention and depth < recording.depth:
            recording.contexts[depth] = args[0]
        if self._capture is not None:
            self._capture(depth, args[0], self._query_tokens(depth, args[0]))
        if not self._active[depth] and self._gates is None:
            return None
        context = args[0]
        rows, tokens = context.shape[:2]
        per_head = context.view(rows, tokens, self.sites.heads, self.sites.head_dim)
        gate = head_gates(self._mask, self._gates, depth, rows, context).unsqueeze(-1)  # [rows, 1 or tokens, heads, 1]
        if self.method == "zero":
            mixed = per_head * gate
        elif self.method in REPLACED:
            mixed = per_head * gate + (1 - gate) * self._replaced(depth, rows, tokens, context).view(
                -1, tokens, self.sites.heads, self.sites.head_dim)
        else:
            group = self.sites.groups[depth]
            # cross-attention's values are the encoder's tokens: as many as the source, not the queries
            values = self._values.view(rows, -1, self.sites.heads, self.sites.head_dim)
            uniform = uniform_context(values, self._key_masks.get(group), group == "decoder")
            mixed = per_head * gate + (1 - gate) * uniform
        return (mixed.reshape(rows, tokens, -1),) + tuple(args[1:])

    def _resumed_layer(self, layer: nn.Module, depth: int) -> torch.Tensor:
        """Layer `depth` from its recorded attention sum, less the masked heads' share."""
        context, total = self._start.attention
        copies = self._start.copies
        out = total.repeat(copies, 1, 1) if copies > 1 else total.clone()
        if self._active[depth]:
            gate_rows = total.shape[0] * copies if self._mask.dim() == 3 else 1
            drop = 1 - head_gates(self._mask, self._gates, depth, gate_rows, total).view(-1, self.sites.heads)
            if self.method in REPLACED:  # dense(m c + (1 - m) r) = dense(c) - (1 - m) W_O (c - r)
                context = context - self._replaced(depth, context.shape[0], context.shape[1], context)
            subtract_head_shares(out, context, drop, self.sites.out_proj[depth].weight, copies)
        return layer.feed_forward_chunk(self._norms[depth](out))

    def _replaced(self, depth: int, rows: int, tokens: int, like: torch.Tensor) -> torch.Tensor:
        """The replacement context at `depth` for this forward, [rows or 1, tokens, heads * dim]."""
        if self._replacement is None:
            raise RuntimeError(f"method {self.method!r} masks a head only inside `replacing(...)`: its replacement "
                               "comes from the task's inputs (reportgen.model.replacements)")
        return self._replacement.at(depth, rows, tokens).to(like.dtype)

    def _query_tokens(self, depth: int, context: torch.Tensor) -> torch.Tensor:
        """[rows, tokens] bool: the real (non-padding) query tokens of `depth`'s stream; cross-attention's
        queries are the decoder's tokens."""
        group = self.sites.groups[depth]
        keys = self._key_masks.get("decoder" if group == "cross" else group)
        rows, tokens = context.shape[:2]
        if keys is None:
            return torch.ones(rows, tokens, dtype=torch.bool, device=context.device)
        return keys[:, :tokens].bool()


def _real_tokens(mask: torch.Tensor | None, ids: torch.Tensor | None,
                 embeds: torch.Tensor | None) -> torch.Tensor | None:
    """A stack's 2-d key mask [rows, tokens], or all ones from its inputs when it was given none."""
    if mask is not None:
        return mask
    shaped = ids if ids is not None else embeds
    return None if shaped is None else torch.ones(shaped.shape[:2], device=shaped.device)


@contextmanager
def masked(model: nn.Module, mask: torch.Tensor, method: Method = "zero") -> Iterator[HeadMasker]:
    """`with masked(model, mask): model(**batch)` runs the model with heads gated by `mask`."""
    with HeadMasker(model, method) as masker, masker.masking(mask):
        yield masker
