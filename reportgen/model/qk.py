"""Capturing the query and key vectors of every self-attention layer, for the query/key view.

The query/key view (bertviz calls it the neuron view) explains one attention row:
softmax(q . k / sqrt(d)) over the keys. Rather than vendoring a patched copy of
one model, we hook the query and key projections of whatever BERT-family model
is loaded, so the numbers on the page come from the real forward pass.

Projection names by family (transformers 5):
- BERT, RoBERTa, ELECTRA, XLM-R, ALBERT: `query` / `key`
- DistilBERT: `q_lin` / `k_lin`
- DeBERTa-v2: `query_proj` / `key_proj` (its attention adds relative-position
  terms, so softmax(q . k * scale) alone does not reproduce its weights; the
  view shows the model's own weights next to it).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

# (query attribute, key attribute) on the module that owns both projections.
PROJECTION_NAMES: tuple[tuple[str, str], ...] = (("query", "key"), ("q_lin", "k_lin"), ("query_proj", "key_proj"))


@dataclass
class QKCapture:
    """What the hooks collected; `queries`/`keys` are filled when the context exits."""

    heads: int
    queries: np.ndarray | None = None  # [L, H, T, head_dim] float32
    keys: np.ndarray | None = None  # [L, H, T, head_dim] float32
    scaling: float | None = None  # the factor the model multiplies q . k by, when it says so
    _q: list = field(default_factory=list)  # the query projections' outputs, one per layer, until the exit
    _k: list = field(default_factory=list)  # the key projections' outputs, likewise


def find_attention_modules(model) -> list[tuple[object, str, str]]:
    """(module, query attr, key attr) for every module that owns a query and a key projection.

    ALBERT shares one layer across depth, so it appears once here and its hooks fire
    once per layer; we therefore record in call order, not per module.
    """
    import torch

    found = []
    for module in model.modules():
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


def _split_heads(chunks: list, heads: int) -> np.ndarray:
    """[B, T, H*D] outputs (first example of the batch) -> [L, H, T, D] float32."""
    stacked = np.stack([c[0].float().cpu().numpy() for c in chunks])  # [L, T, H*D]
    layers, tokens, width = stacked.shape
    return stacked.reshape(layers, tokens, heads, width // heads).transpose(0, 2, 1, 3).copy()


@contextmanager
def capture_qk(model, enabled: bool = True) -> Iterator[QKCapture]:
    """Context manager: hook the query/key projections; on exit `capture.queries/keys` are [L, H, T, D].

    With `enabled=False` it hooks nothing (so callers need one code path). Only the first call
    of each projection per attention forward is kept: DeBERTa-v2 also runs its projections
    over the relative-position embeddings afterwards.
    """
    if not enabled:
        yield QKCapture(heads=0)
        return
    modules = find_attention_modules(model)
    if not modules:
        raise ValueError(f"{type(model).__name__}: no self-attention with query/key projections found")
    capture = QKCapture(heads=_head_count(model))
    scaling = getattr(modules[0][0], "scaling", None)
    capture.scaling = float(scaling) if isinstance(scaling, (int, float)) else None
    handles = []
    for owner, query_name, key_name in modules:
        seen = {"query": False, "key": False}

        def reset(_module, _args, seen=seen):
            seen["query"] = seen["key"] = False

        def keep(which, store, seen=seen):
            def hook(_module, _args, output):
                if not seen[which]:
                    seen[which] = True
                    store.append(output.detach())

            return hook

        handles.append(owner.register_forward_pre_hook(reset))
        handles.append(getattr(owner, query_name).register_forward_hook(keep("query", capture._q)))
        handles.append(getattr(owner, key_name).register_forward_hook(keep("key", capture._k)))
    try:
        yield capture
    finally:
        for handle in handles:
            handle.remove()
    if capture._q:
        capture.queries = _split_heads(capture._q, capture.heads)
        capture.keys = _split_heads(capture._k, capture.heads)
        capture._q.clear()
        capture._k.clear()


def attention_from_qk(queries: np.ndarray, keys: np.ndarray, scaling: float | None = None) -> np.ndarray:
    """softmax(q k^T * scaling) per layer and head, [L, H, T, T]; scaling defaults to 1/sqrt(head_dim).

    No mask: a single unpadded example gets none in BERT-family encoders.
    """
    if scaling is None:
        scaling = 1.0 / math.sqrt(queries.shape[-1])
    scores = np.einsum("lhqd,lhkd->lhqk", queries.astype(np.float64), keys.astype(np.float64)) * scaling
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)
