"""What a head passes on, not only where it looks (Kobayashi, Kuribayashi, Yokoi and Inui 2020,
"Attention is Not Only a Weight: Analyzing Transformers with Vector Norms").

Head h's output for query i is sum_j A[i, j] f(x_j), with f(x) = (x W_V + b_V) W_O restricted to the
head's slice of W_O (the output projection's bias is added once per layer, not per head). The norm

    ||A[i, j] f(x_j)|| = A[i, j] ||f(x_j)||

is what key j actually contributes to query i through that head: a large weight on a key whose
transformed value is short (Kobayashi found this for [CLS] and [SEP] in BERT-base) passes on little.
So one number per (layer, head, key token), ||f(x_j)||, turns a head's attention into its
contributions; `value_norms` captures it from the model's own value and output projections during
the forward pass that gives the attention, for any layout `reportgen.model.head_sites.locate` knows;
`reportgen.runs.shares` turns attention and these norms into per-row contribution shares.

An encoder-decoder's three groups of heads see different tokens, so their norms are kept apart
(`NormCapture.groups`): encoder self-attention [L_enc, H, S] and decoder self-attention [L_dec, H, T]
over their own stream's tokens, cross-attention [L_dec, H, S] over the source tokens, since its keys
and values are the encoder's outputs.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np


@dataclass
class NormCapture:
    """What the hooks collected; `norms` ([L, H, T] float32) is filled when the context exits."""

    norms: np.ndarray | None = None
    # encoder-decoders: group ("encoder", "decoder", "cross") -> [layers of the group, H, tokens it reads]
    groups: dict[str, np.ndarray] = field(default_factory=dict)
    _values: list = field(default_factory=list)  # value projection outputs, one per depth, in call order
    _by_depth: dict = field(default_factory=dict)  # encoder-decoders: depth -> value projection output


def head_outputs(values: np.ndarray, out_weight: np.ndarray, heads: int) -> np.ndarray:
    """f(x_j) per head: [H, T, hidden] from one layer's value projection outputs [T, H*D] and the output
    projection's weight [hidden, H*D] (a torch Linear's layout: out x in)."""
    tokens, width = values.shape
    per_head = values.reshape(tokens, heads, width // heads)
    weight = out_weight.reshape(out_weight.shape[0], heads, width // heads)
    return np.einsum("thd,ohd->hto", per_head, weight)


@contextmanager
def value_norms(model) -> Iterator[NormCapture]:
    """Context manager: hook every layer's value projection; on exit `capture.norms` is
    ||f(x_j)|| as [L, H, T] for the first sequence of the batch.

    A model whose heads `locate` cannot find leaves `norms` None (its pages show weights only).
    The value projections run in call order, one per layer (ALBERT runs one shared module at
    every depth, so the order, not the module, says the depth); an encoder-decoder's norms go to
    `capture.groups` instead (its groups read different tokens), `norms` staying None.
    """
    from reportgen.errors import ModelError
    from reportgen.model.head_sites import locate

    capture = NormCapture()
    try:
        sites = locate(model)
    except ModelError:  # a layout reportgen cannot find heads in: attention only, no contributions
        yield capture
        return

    def keep(_module, _args, output):
        capture._values.append(sites.values(output)[0].detach())

    def keep_at(depth: int):
        def hook(_module, _args, output):
            capture._by_depth[depth] = sites.values(output)[0].detach()

        return hook

    if sites.encoder_decoder:  # distinct modules, not run in flat order: each hook knows its depth
        handles = [module.register_forward_hook(keep_at(depth)) for depth, module in enumerate(sites.value_proj)]
    else:
        handles = [module.register_forward_hook(keep) for module in {id(m): m for m in sites.value_proj}.values()]
    try:
        yield capture
    finally:
        for handle in handles:
            handle.remove()
    if capture._by_depth:
        capture.groups = _group_norms(sites, capture._by_depth)
        capture._by_depth.clear()
    if not capture._values:
        return
    if len(capture._values) != sites.n_layers:
        raise RuntimeError(f"expected one value projection per layer ({sites.n_layers}), "
                           f"saw {len(capture._values)}")
    norms = [_norms(values, sites.out_proj[depth], sites.heads) for depth, values in enumerate(capture._values)]
    capture.norms = np.stack(norms).astype(np.float32)
    capture._values.clear()


def _norms(values, projection, heads: int) -> np.ndarray:
    """||f(x_j)|| [H, T] of one layer from its value projection output [T, H*D] (torch)."""
    from reportgen.model.head_sites import projection_weight

    weight = projection_weight(projection).detach().float().cpu().numpy()
    return np.linalg.norm(head_outputs(values.float().cpu().numpy(), weight, heads), axis=-1)


def _group_norms(sites, by_depth: dict) -> dict[str, np.ndarray]:
    """An encoder-decoder's norms by group, [layers of the group, H, tokens] float32 each."""
    if len(by_depth) != sites.n_layers:
        raise RuntimeError(f"expected one value projection per attention layer ({sites.n_layers}), "
                           f"saw {len(by_depth)}")
    return {group: np.stack([_norms(by_depth[depth], sites.out_proj[depth], sites.heads)
                             for depth in sites.depths(group)]).astype(np.float32)
            for group in dict.fromkeys(sites.groups)}
