"""Where a BERT-family model keeps its attention heads, found from its structure.

`HeadMasker` gates heads at the input of each layer's attention output projection and, for
method "uniform", reads the value projection; both are found here rather than by model type
name, so every architecture with the usual module names works. `attention_norms` says whether
a model has the plain BERT layer layout that lets a masked forward start inside a layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from reportgen.errors import ModelError


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
        """Whether one module runs at several depths (ALBERT), so a depth is known only by counting calls."""
        return len({id(module) for module in self.layers}) < len(self.layers)


def locate(model: nn.Module) -> HeadSites:
    """Find the layers, output and value projections of a BERT-family model by its structure."""
    base = getattr(model, "base_model", model)
    cfg = model.config
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads", None)
    encoder = getattr(base, "encoder", None) or getattr(base, "transformer", None)
    if encoder is None or not heads:
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its attention heads")
    if hasattr(encoder, "albert_layer_groups"):
        layers, out_proj, value_proj = _albert_sites(encoder, cfg)
    elif hasattr(encoder, "layer"):
        layers, out_proj, value_proj = _layer_list_sites(encoder, cfg)
    else:
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its layers")
    in_features = out_proj[0].in_features
    if in_features % heads:
        raise ModelError(f"model type '{cfg.model_type}': {in_features} features do not split into {heads} heads")
    return HeadSites(layers, out_proj, value_proj, encoder, heads, in_features // heads)


def _albert_sites(encoder: nn.Module, cfg) -> tuple[list[nn.Module], list[nn.Module], list[nn.Module]]:
    groups = encoder.albert_layer_groups
    if cfg.inner_group_num != 1:
        raise ModelError(f"ALBERT with inner_group_num={cfg.inner_group_num}: reportgen masks heads only when "
                         "inner_group_num is 1")
    depth_count = cfg.num_hidden_layers
    # AlbertTransformer: depth i runs group int(i / (layers / groups)).
    layers = [groups[int(depth / (depth_count / cfg.num_hidden_groups))].albert_layers[0]
              for depth in range(depth_count)]
    return layers, [layer.attention.dense for layer in layers], [layer.attention.value for layer in layers]


def _layer_list_sites(encoder: nn.Module, cfg) -> tuple[list[nn.Module], list[nn.Module], list[nn.Module]]:
    layers = list(encoder.layer)
    first = layers[0].attention
    if hasattr(first, "out_lin"):  # DistilBERT
        out_proj = [layer.attention.out_lin for layer in layers]
        value_proj = [layer.attention.v_lin for layer in layers]
    elif hasattr(first, "output") and hasattr(first.output, "dense") and hasattr(first, "self"):
        out_proj = [layer.attention.output.dense for layer in layers]
        # BERT, RoBERTa, ELECTRA, XLM-R: self.value; DeBERTa-v2: self.value_proj.
        value_proj = [getattr(layer.attention.self, "value", None) or layer.attention.self.value_proj
                      for layer in layers]
    else:
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its attention output projection")
    if getattr(cfg, "z_steps", 0) > 1:
        raise ModelError("DeBERTa with z_steps > 1 reruns its last layer; reportgen cannot mask it")
    return layers, out_proj, value_proj


RESUMABLE_LAYERS = frozenset({"BertLayer", "RobertaLayer", "XLMRobertaLayer", "ElectraLayer", "CamembertLayer"})


def attention_norms(sites: HeadSites) -> list[nn.Module] | None:
    """The attention block's LayerNorm at each depth when the layers have the BERT layout
    (LayerNorm(dense(context) + input), then `feed_forward_chunk`); None otherwise.

    Only that layout lets a forward start at the LayerNorm from a recorded sum, so any
    doubt (a decoder, cross-attention, a shared layer, another class) answers None."""
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
