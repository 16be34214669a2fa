"""Where an encoder keeps its attention heads, found from its structure.

`HeadMasker` gates heads at the input of each layer's attention output projection and, for
method "uniform" and the contributions, reads the values (from the value projection, or the
value part of a fused one: DeBERTa's in_proj, ModernBERT's Wqkv); both are found here by the
module names of each family (transformers 5) rather than by model type name. `attention_norms` says whether
a model has the plain BERT layer layout that lets a masked forward start inside a layer.

An encoder-decoder (BART, T5, Marian) has three kinds of heads, laid out flat in one list so that a
mask [n_layers, heads] covers all of them: the encoder's self-attention layers, then the decoder's
self-attention layers (causal), then the decoder's cross-attention layers (decoder queries over the
encoder's tokens), each group in depth order; `HeadSites.groups` names the group of each flat layer and
`group_layer` maps a flat index to (group, layer within the group). Encoders are one group "encoder",
decoders one group "decoder".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

from torch import Tensor, nn

from reportgen.errors import ModelError


def _identity(values: Tensor) -> Tensor:
    return values


@dataclass
class HeadSites:
    """Where the heads live in a model: one entry per depth (layer index)."""

    layers: list[nn.Module]  # the module run at each depth (ALBERT: the same module repeated; an encoder-
    # decoder: the attention module of each flat layer, all distinct)
    out_proj: list[nn.Module]  # attention output projection at each depth; its input is the per-head context
    value_proj: list[nn.Module]  # the module whose output holds the value vectors at each depth
    encoder: nn.Module  # runs the layers; a new forward starts when it is called
    heads: int
    head_dim: int
    # value_proj's output -> the value vectors [batch, tokens, heads * head_dim] (fused projections
    # hold queries and keys too: DeBERTa's in_proj, ModernBERT's Wqkv)
    values: Callable[[Tensor], Tensor] = _identity
    causal: bool = False  # each query sees only the keys up to itself (a decoder's self-attention)
    # the group of each flat layer: "encoder", "decoder" (causal self-attention) or "cross" (encoder-decoders'
    # decoder queries over the encoder's tokens); by default every layer is in the model's one group
    groups: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.groups:
            self.groups = ["decoder" if self.causal else "encoder"] * len(self.layers)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def encoder_decoder(self) -> bool:
        """Whether the heads are an encoder-decoder's three groups (so the layers do not run in flat order)."""
        return "cross" in self.groups

    def depths(self, group: str) -> list[int]:
        """The flat indexes of a group's layers, in depth order."""
        return [depth for depth, name in enumerate(self.groups) if name == group]

    def group_layer(self, depth: int) -> tuple[str, int]:
        """(group, layer within the group) of flat layer `depth`."""
        group = self.groups[depth]
        return group, self.groups[:depth].count(group)

    @property
    def shared(self) -> bool:
        """Whether one module runs at several depths (ALBERT), so a depth is known only by counting calls."""
        return len({id(module) for module in self.layers}) < len(self.layers)


def locate(model: nn.Module) -> HeadSites:
    """Find the layers, output and value projections of an encoder or decoder by its structure."""
    base = getattr(model, "base_model", model)
    cfg = model.config
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads", None)
    # The module that runs the layers: BERT's encoder, DistilBERT's transformer, else the base model
    # itself (ModernBERT's and Llama's layers, GPT-2's h).
    encoder = getattr(base, "encoder", None) or getattr(base, "transformer", None) or base
    if not heads:
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its attention heads")
    if getattr(cfg, "is_encoder_decoder", False):
        return _encoder_decoder_sites(base, cfg, heads)
    if hasattr(encoder, "albert_layer_groups"):
        layers = _albert_layers(encoder, cfg)
    else:
        lists = [getattr(encoder, name, None) for name in ("layer", "layers", "h")]
        found_list = next((modules for modules in lists if isinstance(modules, nn.ModuleList)), None)
        if found_list is None:
            raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its layers")
        layers = list(found_list)
    if getattr(cfg, "z_steps", 0) > 1:
        raise ModelError("DeBERTa with z_steps > 1 reruns its last layer; reportgen cannot mask it")
    found = [_attention_site(layer, heads) for layer in layers]
    if any(site is None for site in found):
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its attention output projection")
    out_proj, value_proj, values = [s[0] for s in found], [s[1] for s in found], found[0][2]
    in_features = projection_weight(out_proj[0]).shape[1]
    if in_features % heads:
        raise ModelError(f"model type '{cfg.model_type}': {in_features} features do not split into {heads} heads")
    causal = any(getattr(module, "is_causal", False) for module in layers[0].modules())
    return HeadSites(layers, out_proj, value_proj, encoder, heads, in_features // heads, values, causal)


def _encoder_decoder_sites(base: nn.Module, cfg, heads: int) -> HeadSites:
    """An encoder-decoder's heads in the flat layout [encoder self..., decoder self..., cross...]; `layers`
    holds each attention module (they are distinct, so a pre-hook on one says which flat layer runs)."""
    stacks = [_stack_layers(getattr(base, name, None)) for name in ("encoder", "decoder")]
    if any(stack is None for stack in stacks):
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its encoder and decoder layers")
    encoder_layers, decoder_layers = stacks
    found = ([_seq2seq_attention(layer, False) for layer in encoder_layers]
             + [_seq2seq_attention(layer, False) for layer in decoder_layers]
             + [_seq2seq_attention(layer, True) for layer in decoder_layers])
    if any(site is None for site in found):
        raise ModelError(f"model type '{cfg.model_type}': reportgen cannot find its attention projections")
    counts = {getattr(cfg, name) for name in ("encoder_attention_heads", "decoder_attention_heads")
              if isinstance(getattr(cfg, name, None), int)}
    if len(counts) > 1:
        raise ModelError(f"model type '{cfg.model_type}': the encoder and decoder have different head counts "
                         f"({', '.join(map(str, sorted(counts)))}); reportgen masks heads on one [layers, heads] grid")
    widths = {projection_weight(site[1]).shape[1] for site in found}
    width = widths.pop()
    if widths or width % heads:
        raise ModelError(f"model type '{cfg.model_type}': the attention outputs do not split into {heads} equal heads")
    groups = ["encoder"] * len(encoder_layers) + ["decoder"] * len(decoder_layers) + ["cross"] * len(decoder_layers)
    return HeadSites([s[0] for s in found], [s[1] for s in found], [s[2] for s in found], base.encoder, heads,
                     width // heads, _identity, False, groups)


def _stack_layers(stack: nn.Module | None) -> list[nn.Module] | None:
    """The layers of one stack: BART's and Marian's `layers`, T5's `block`."""
    found = next((getattr(stack, name) for name in ("layers", "block")
                  if isinstance(getattr(stack, name, None), nn.ModuleList)), None)
    return list(found) if found is not None else None


def _seq2seq_attention(layer: nn.Module, cross: bool) -> tuple[nn.Module, nn.Module, nn.Module] | None:
    """(attention module, output projection, value projection) of a layer's self- or cross-attention
    (transformers 5): BART, Marian `self_attn` / `encoder_attn` with q/k/v/out_proj; T5's block holds
    `layer[0].SelfAttention` and, in the decoder, `layer[1].EncDecAttention`, with q/k/v/o."""
    attention = getattr(layer, "encoder_attn" if cross else "self_attn", None)
    sublayers = getattr(layer, "layer", None)
    if attention is None and isinstance(sublayers, nn.ModuleList) and len(sublayers) > int(cross):
        attention = getattr(sublayers[int(cross)], "EncDecAttention" if cross else "SelfAttention", None)
    for out_name, value_name in (("out_proj", "v_proj"), ("o", "v")):
        out_proj, value_proj = getattr(attention, out_name, None), getattr(attention, value_name, None)
        if isinstance(out_proj, nn.Linear) and isinstance(value_proj, nn.Linear):
            return attention, out_proj, value_proj
    return None


def projection_weight(projection: nn.Module) -> Tensor:
    """An output projection's weight as [out, in], whether a Linear (stored so) or GPT-2's Conv1D
    (stored [in, out])."""
    weight = projection.weight
    return weight if isinstance(projection, nn.Linear) else weight.t()


def _albert_layers(encoder: nn.Module, cfg) -> list[nn.Module]:
    groups = encoder.albert_layer_groups
    if cfg.inner_group_num != 1:
        raise ModelError(f"ALBERT with inner_group_num={cfg.inner_group_num}: reportgen masks heads only when "
                         "inner_group_num is 1")
    depth_count = cfg.num_hidden_layers
    # AlbertTransformer: depth i runs group int(i / (layers / groups)).
    return [groups[int(depth / (depth_count / cfg.num_hidden_groups))].albert_layers[0]
            for depth in range(depth_count)]


Site = tuple[nn.Module, nn.Module, Callable[[Tensor], Tensor]]  # output projection, value module, its values


def _attention_site(layer: nn.Module, heads: int) -> Site | None:
    """The output projection and the values of one layer, by the module names of each family
    (transformers 5); None for a layout reportgen does not know."""
    attention = getattr(layer, "attention", None)
    own = getattr(attention, "self", None)
    if hasattr(attention, "out_lin"):  # DistilBERT
        return attention.out_lin, attention.v_lin, _identity
    if hasattr(attention, "dense") and hasattr(attention, "value"):  # ALBERT
        return attention.dense, attention.value, _identity
    if hasattr(getattr(attention, "attn", None), "o"):  # MPNet: attention.attn.{q,k,v,o}
        return attention.attn.o, attention.attn.v, _identity
    if own is not None and hasattr(getattr(attention, "output", None), "dense"):
        if isinstance(getattr(own, "value", None), nn.Linear):  # BERT, RoBERTa, ELECTRA, XLM-R, ERNIE, ...
            return attention.output.dense, own.value, _identity
        if isinstance(getattr(own, "value_proj", None), nn.Linear):  # DeBERTa-v2
            return attention.output.dense, own.value_proj, _identity
        if isinstance(getattr(own, "in_proj", None), nn.Linear):  # DeBERTa: fused, per head [q | k | v]
            return attention.output.dense, own.in_proj, partial(_deberta_values, own.v_bias, heads)
    if hasattr(getattr(layer, "attn", None), "Wqkv"):  # ModernBERT: fused [q | k | v], each over all heads
        return layer.attn.Wo, layer.attn.Wqkv, _fused_values
    if hasattr(getattr(layer, "attn", None), "c_attn"):  # GPT-2: Conv1D c_attn [q | k | v], c_proj
        return layer.attn.c_proj, layer.attn.c_attn, _fused_values
    own = getattr(layer, "self_attn", None)
    if hasattr(own, "o_proj") and hasattr(own, "v_proj"):  # Llama, Mistral, Qwen2, Gemma: key/value heads shared
        head_dim = own.o_proj.in_features // heads
        groups = heads // (own.v_proj.out_features // head_dim)
        return own.o_proj, own.v_proj, partial(_shared_values, groups, head_dim)
    return None


def _deberta_values(bias: Tensor, heads: int, fused: Tensor) -> Tensor:
    """DeBERTa's values from its in_proj output: each head's slice is [q | k | v] (its
    transpose_for_scores then chunk(3)), and v_bias is added after."""
    rows, tokens, width = fused.shape
    per_head = fused.view(rows, tokens, heads, 3, width // (3 * heads))[:, :, :, 2]
    return (per_head.reshape(rows, tokens, -1) + bias).contiguous()


def _shared_values(groups: int, head_dim: int, values: Tensor) -> Tensor:
    """Grouped-query attention: each key/value head of v_proj serves `groups` query heads in a row
    (transformers' repeat_kv), so query head h reads key/value head h // groups; [.., kv*dim] -> [.., heads*dim]."""
    if groups == 1:
        return values
    rows, tokens, width = values.shape
    per_head = values.view(rows, tokens, width // head_dim, 1, head_dim)
    return per_head.expand(-1, -1, -1, groups, -1).reshape(rows, tokens, -1)


def _fused_values(fused: Tensor) -> Tensor:
    """ModernBERT's values from its Wqkv output, viewed as [.., 3, heads, dim]."""
    return fused[..., 2 * fused.shape[-1] // 3:]


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
