"""Capturing what every self-attention layer puts into its scores, for the query/key view.

The query/key view (bertviz calls it the neuron view) explains one attention row:
softmax(scaling * q . k + terms) over the visible keys. Rather than vendoring a patched copy
of one model, we hook the projections of whatever supported encoder is loaded, so the numbers
on the page come from the real forward pass. What each family puts into the score (transformers 5):

- BERT, RoBERTa, ELECTRA, XLM-R, ALBERT, ERNIE, Megatron-BERT: `query` / `key`; DistilBERT
  `q_lin` / `k_lin`: scaling * q . k alone.
- MPNet: `q` / `k`, plus a learned bias per head on the bucketed relative position j - i,
  shared by all layers (Song et al. 2020, after T5's); captured as the "position" term from the
  attention's `position_bias` argument.
- DeBERTa (`in_proj`, fused per head as [q | k | v], with `q_bias`) and DeBERTa-v2 (`query_proj` /
  `key_proj`): disentangled attention (He et al. 2021, eq. 4): content-to-content q . k plus
  content-to-position ("c2p", the query against the key's relative position) and
  position-to-content ("p2c", the key against the query's relative position), each scaled by
  1/sqrt(3 d) (1 + one per position term). The terms come from the model's own bias method, run
  once per term type.
- ModernBERT (`Wqkv`, fused as [q | k | v] over all heads): rotary positions (Su et al. 2021)
  applied to q and k by the model's own `apply_rotary_pos_emb`, so q . k of the stored vectors
  already holds them; local layers mask every key outside a sliding window ("visible").
- Decoders (GPT-2, Llama, Qwen2, Mistral, Gemma): read inside their model file's
  `eager_attention_forward`, which gets q and k as the scores use them (rotary applied), the
  causal mask (Mistral's sliding window in it) and the scaling; a key/value head shared by
  several query heads (grouped-query attention) is repeated for each, as transformers' repeat_kv does.
"""

from __future__ import annotations

import inspect
import math
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

# (query attribute, key attribute) on the module that owns both projections.
PROJECTION_NAMES: tuple[tuple[str, str], ...] = (("query", "key"), ("q_lin", "k_lin"), ("query_proj", "key_proj"),
                                                 ("q", "k"))
# DeBERTa's relative-position bias method (v1, v2): the c2p and p2c terms, summed.
BIAS_METHODS = ("disentangled_att_bias", "disentangled_attention_bias")
INTERFACE = "eager_attention_forward"  # the function a transformers 5 attention computes its scores with
TERM_ORDER = ("c2p", "p2c", "position")  # the order of the term columns on the page


@dataclass
class _Call:
    """What one attention forward put into its scores, for the first sequence of the batch."""

    queries: object = None  # torch [H, T, D]
    keys: object = None
    terms: dict = field(default_factory=dict)  # name -> torch [H, T, T], in score units
    visible: object = None  # torch bool [T, T], None when every key is visible
    rotary: object = None  # ModernBERT: the (cos, sin) its attention was given
    scaling: float | None = None  # decoders: the factor their attention function was given
    unsupported: str | None = None  # a score feature the view cannot show (a decoder's softcap)


@dataclass
class QKCapture:
    """What the hooks collected; the arrays are filled when the context exits."""

    heads: int
    queries: np.ndarray | None = None  # [L, H, T, head_dim] float32
    keys: np.ndarray | None = None  # [L, H, T, head_dim] float32
    scaling: float | None = None  # the factor the model multiplies q . k by, when it says so
    terms: dict[str, np.ndarray] = field(default_factory=dict)  # name -> [L, H, T, T] float32
    visible: np.ndarray | None = None  # [L, T, T] bool, False where the model masks a key
    _calls: list[_Call] = field(default_factory=list)  # one per attention forward, in call order

    def extras(self) -> dict[str, np.ndarray]:
        """The run's extras for the query/key view (reportgen.site.views.qk_payload reads them)."""
        extras = {"queries": self.queries, "keys": self.keys}
        if self.scaling is not None:
            extras["scaling"] = np.array(self.scaling, dtype=np.float64)
        if self.terms:
            extras["qk_terms"] = np.stack(list(self.terms.values())).astype(np.float32)
            extras["qk_term_names"] = np.array(list(self.terms))
        if self.visible is not None:
            extras["qk_visible"] = self.visible
        return extras


def find_attention_modules(model) -> list[tuple[object, str, str]]:
    """(module, query attr, key attr) for every module that owns a query and a key projection,
    (module, fused attr, "") for DeBERTa's `in_proj` and ModernBERT's `Wqkv`, or (module, INTERFACE, "")
    for a decoder's attention, read where it computes its scores (`_reading_scores`).

    ALBERT shares one layer across depth, so it appears once here and its hooks fire
    once per layer; we therefore record in call order, not per module.
    """
    import torch

    found = []
    for module in model.modules():
        if _scores_through_interface(module):
            found.append((module, INTERFACE, ""))
            continue
        for fused in ("in_proj", "Wqkv"):
            if isinstance(getattr(module, fused, None), torch.nn.Linear):
                found.append((module, fused, ""))
                break
        else:
            for query_name, key_name in PROJECTION_NAMES:
                query, key = getattr(module, query_name, None), getattr(module, key_name, None)
                if isinstance(query, torch.nn.Linear) and isinstance(key, torch.nn.Linear):
                    found.append((module, query_name, key_name))
                    break
    return found


def _head_count(model) -> int:
    cfg = model.config
    for name in ("num_attention_heads", "n_heads"):
        if isinstance(getattr(cfg, name, None), int):
            return getattr(cfg, name)
    raise ValueError("the model config gives no attention head count")


def _scaling(owner, head_dim: int) -> float | None:
    """The factor on q . k: the module's own `scaling` where it has one (BERT in transformers 5),
    1/sqrt(d x (1 + position terms)) for DeBERTa, else None (1/sqrt(d))."""
    scaling = getattr(owner, "scaling", None)
    if isinstance(scaling, (int, float)):
        return float(scaling)
    if any(hasattr(owner, name) for name in BIAS_METHODS):
        kinds = getattr(owner, "pos_att_type", None) or []
        return 1 / math.sqrt(head_dim * (1 + sum(kind in kinds for kind in ("c2p", "p2c"))))
    return None


def _heads(output, heads: int):
    """The first sequence of a [B, T, H*D] projection output as [H, T, D]."""
    first = output[0].detach().float()
    return first.reshape(first.shape[0], heads, -1).transpose(0, 1)


def _install(owner, query_name: str, key_name: str, heads: int, calls: list[_Call]) -> list:
    """Hooks on one attention module that append one `_Call` per forward and fill it; returns the handles."""
    signature = inspect.signature(owner.forward)

    def start(_module, args, kwargs):
        call = _Call()
        bound = signature.bind_partial(*args, **kwargs).arguments
        bias = bound.get("position_bias")
        if bias is not None:  # MPNet: [B, H, T, T], added to every layer's scores
            call.terms["position"] = bias[0].detach().float()
        call.rotary = bound.get("position_embeddings")
        call.visible = _visible(bound.get("attention_mask"))
        calls.append(call)

    def projection(which: str):
        def hook(_module, _args, output):
            call = calls[-1]
            if getattr(call, which) is None:  # DeBERTa-v2 also runs them over the position embeddings
                setattr(call, which, _heads(output, heads))
        return hook

    def fused(_module, _args, output):
        call = calls[-1]
        if call.queries is not None:
            return
        first = output[:1].detach()
        tokens, width = first.shape[1], first.shape[2]
        if query_name == "in_proj":  # DeBERTa: per head [q | k | v], q_bias added after
            per_head = first.view(tokens, heads, 3, width // (3 * heads)).transpose(0, 1)
            call.queries = (per_head[:, :, 0] + owner.q_bias.detach().view(heads, 1, -1)).float()
            call.keys = per_head[:, :, 1].float()
            return
        qkv = first.view(1, tokens, 3, heads, width // (3 * heads))  # ModernBERT: [q | k | v], all heads each
        queries, keys = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)
        if call.rotary is not None:
            cos, sin = call.rotary
            rotate = sys.modules[type(owner).__module__].apply_rotary_pos_emb
            queries, keys = rotate(queries, keys, cos[:1], sin[:1], unsqueeze_dim=1)
        call.queries, call.keys = queries[0].float(), keys[0].float()

    handles = [owner.register_forward_pre_hook(start, with_kwargs=True)]
    if query_name == INTERFACE:
        pass  # filled by `_reading_scores`
    elif key_name:
        handles.append(getattr(owner, query_name).register_forward_hook(projection("queries")))
        handles.append(getattr(owner, key_name).register_forward_hook(projection("keys")))
    else:
        handles.append(getattr(owner, query_name).register_forward_hook(fused))
    return handles


def _visible(mask):
    """The keys a [B, 1, T, T] attention mask leaves visible to each query of the first sequence, or
    None when it masks none (a padding-free example in a bidirectional layer). Additive masks hold 0
    where visible and -inf or the dtype's minimum where masked; boolean and integer ones are true
    (nonzero) where visible."""
    import torch

    if not isinstance(mask, torch.Tensor) or mask.dim() != 4:
        return None
    first = mask[0, 0].detach()
    if first.dtype == torch.bool:
        visible = first
    elif first.dtype.is_floating_point:
        visible = first > torch.finfo(first.dtype).min / 2
    else:  # DeBERTa: 1 where visible, 0 where masked
        visible = first != 0
    return None if bool(visible.all()) else visible


@contextmanager
def _position_terms(owner, heads: int, calls: list[_Call]) -> Iterator[None]:
    """While active, DeBERTa's bias method also records its c2p and p2c terms apart, by running the
    model's own method once per term type (He et al. 2021, eq. 4)."""
    name = next((name for name in BIAS_METHODS if hasattr(owner, name)), None)
    if name is None:
        yield
        return
    original = getattr(owner, name)

    def recorded(*args, **kwargs):
        total = original(*args, **kwargs)
        kinds = list(owner.pos_att_type)
        try:
            for kind in kinds:
                owner.pos_att_type = [kind]
                term = original(*args, **kwargs)
                calls[-1].terms[kind] = term.reshape(-1, heads, *term.shape[-2:])[0].detach().float()
        finally:
            owner.pos_att_type = kinds
        return total

    setattr(owner, name, recorded)
    try:
        yield
    finally:
        delattr(owner, name)


@contextmanager
def capture_qk(model, enabled: bool = True) -> Iterator[QKCapture]:
    """Context manager: hook every attention layer; on exit `capture` holds [L, H, T, D] queries and
    keys, the scaling, the additive score terms and the visible keys (see the module docstring).

    With `enabled=False` it hooks nothing (so callers need one code path).
    """
    if not enabled:
        yield QKCapture(heads=0)
        return
    modules = find_attention_modules(model)
    if not modules:
        raise ValueError(f"{type(model).__name__}: no self-attention with query/key projections found")
    capture = QKCapture(heads=_head_count(model))
    with ExitStack() as stack:
        for owner, query_name, key_name in modules:
            for handle in _install(owner, query_name, key_name, capture.heads, capture._calls):
                stack.callback(handle.remove)
            stack.enter_context(_position_terms(owner, capture.heads, capture._calls))
        for python_module in {sys.modules[type(owner).__module__] for owner, name, _ in modules if name == INTERFACE}:
            stack.enter_context(_reading_scores(python_module, capture.heads, capture._calls))
        yield capture
    if capture._calls:
        _collect(capture, modules[0][0])


def _scores_through_interface(module) -> bool:
    """Whether `module` is a decoder's self-attention that computes its scores with its model file's
    `eager_attention_forward` (GPT-2's `c_attn`, Llama-style `q_proj`/`o_proj`)."""
    if not getattr(module, "is_causal", False) or getattr(module, "is_cross_attention", False):
        return False
    has_projections = hasattr(module, "c_attn") or (hasattr(module, "q_proj") and hasattr(module, "o_proj"))
    return has_projections and hasattr(sys.modules.get(type(module).__module__), INTERFACE)


@contextmanager
def _reading_scores(python_module, heads: int, calls: list[_Call]) -> Iterator[None]:
    """While active, the model file's eager attention function also records what it computes the scores
    from: the queries and keys as the model uses them (rotary positions applied, each key/value head
    repeated for the query heads that share it, as transformers' repeat_kv does), its scaling and its mask
    (a decoder's causal mask: key j is visible to query i only when j <= i)."""
    original = getattr(python_module, INTERFACE)

    def recorded(module, query, key, value, attention_mask, *args, **kwargs):
        call = calls[-1]
        keys = key[0].detach().float()
        call.queries = query[0].detach().float()
        call.keys = keys.repeat_interleave(heads // keys.shape[0], dim=0) if keys.shape[0] != heads else keys
        scaling = kwargs.get("scaling", args[0] if args else None)
        call.scaling = float(scaling) if scaling is not None else None
        call.visible = _visible(attention_mask)
        if kwargs.get("softcap"):  # Gemma 2 squashes its scores with tanh: not a sum of terms
            call.unsupported = "softcap"
        return original(module, query, key, value, attention_mask, *args, **kwargs)

    setattr(python_module, INTERFACE, recorded)
    try:
        yield
    finally:
        setattr(python_module, INTERFACE, original)


def _collect(capture: QKCapture, owner) -> None:
    """Stack the calls into per-layer arrays."""
    import torch

    calls = capture._calls
    capture.queries = torch.stack([call.queries for call in calls]).cpu().numpy().astype(np.float32)
    capture.keys = torch.stack([call.keys for call in calls]).cpu().numpy().astype(np.float32)
    capture.scaling = _scaling(owner, capture.queries.shape[-1])
    given = {call.scaling for call in calls if call.scaling is not None}
    if len(given) > 1:
        raise ValueError(f"the layers scale q . k differently ({sorted(given)}); the query/key view takes one factor")
    if given:
        capture.scaling = given.pop()
    unsupported = next((call.unsupported for call in calls if call.unsupported), None)
    if unsupported:
        raise ValueError(f"the model's scores use {unsupported}, which the query/key view cannot show")
    names = sorted(calls[0].terms, key=lambda name: (TERM_ORDER.index(name) if name in TERM_ORDER else len(TERM_ORDER),
                                                     name))
    capture.terms = {name: torch.stack([call.terms[name] for call in calls]).cpu().numpy().astype(np.float32)
                     for name in names}
    if any(call.visible is not None for call in calls):
        tokens = capture.queries.shape[2]
        full = torch.ones(tokens, tokens, dtype=torch.bool)
        capture.visible = torch.stack([full if call.visible is None else call.visible.cpu()
                                       for call in calls]).numpy()
    calls.clear()


def attention_from_qk(queries: np.ndarray, keys: np.ndarray, scaling: float | None = None,
                      terms: np.ndarray | None = None, visible: np.ndarray | None = None) -> np.ndarray:
    """softmax(q k^T * scaling + sum of terms) over the visible keys, per layer and head, [L, H, T, T];
    scaling defaults to 1/sqrt(head_dim), terms ([N, L, H, T, T]) to none, visible ([L, T, T]) to all."""
    if scaling is None:
        scaling = 1.0 / math.sqrt(queries.shape[-1])
    scores = np.einsum("lhqd,lhkd->lhqk", queries.astype(np.float64), keys.astype(np.float64)) * scaling
    if terms is not None:
        scores = scores + terms.astype(np.float64).sum(axis=0)
    if visible is not None:
        scores = np.where(visible[:, None], scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)

