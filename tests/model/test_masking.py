"""Head masking through hooks == independent references, for every supported architecture.

References that do not use the hooks:
- zeroing head h of layer l == zeroing columns h*d:(h+1)*d of that layer's output
  projection weight (the projection is linear in the per-head context);
- uniform attention for head h == zeroing the head's query and key weights, so every
  score is 0 and softmax gives 1/n over the non-padding keys;
- for BERT, the layer recomputed by hand with plain tensor algebra.
ALBERT shares one layer across depth, so its reference is an unshared copy (one group
per layer, same weights) edited at the one depth. The models, one per architecture, are
tests/helpers.py BUILDERS.
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AlbertModel, BertConfig, BertModel

from reportgen.model.head_sites import locate
from reportgen.model.masking import HeadMasker, masked
from tests.helpers import BUILDERS, TINY_SHAPE, tiny_albert

TOL = 1e-5


def _inputs():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 99, (3, 9), generator=gen)
    att = torch.ones(3, 9, dtype=torch.long)
    att[1, 6:] = 0  # one padded row
    att[2, 4:] = 0
    return ids, att


def _run(model, ids, att):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=att).last_hidden_state


def _close_on_tokens(a, b, att):
    keep = att.bool()
    return (a[keep] - b[keep]).abs().max().item()


def _make(name):
    torch.manual_seed(1)
    return BUILDERS[name]().eval()


def _unshared_albert(model):
    """An ALBERT with one layer group per depth holding copies of the shared weights."""
    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_groups = cfg.num_hidden_layers
    other = AlbertModel(cfg).eval()
    state = model.state_dict()
    new = {}
    for key in other.state_dict():
        parts = key.split(".")
        if key.startswith("encoder.albert_layer_groups."):
            parts[2] = "0"
        new[key] = state[".".join(parts)]
    other.load_state_dict(new)
    return other


def _reference_zero(model, layer, head):
    ref = _unshared_albert(model) if model.config.model_type == "albert" else copy.deepcopy(model)
    sites = locate(ref)
    size = sites.head_dim
    with torch.no_grad():
        sites.out_proj[layer].weight[:, head * size:(head + 1) * size] = 0
    return ref


def _qk_modules(layer_module):
    att = layer_module.attention
    if hasattr(att, "q_lin"):
        return att.q_lin, att.k_lin
    if hasattr(att, "self"):
        self_attention = att.self
        if hasattr(self_attention, "query"):
            return self_attention.query, self_attention.key
        return self_attention.query_proj, self_attention.key_proj
    return att.query, att.key  # ALBERT


def _reference_uniform(model, layer, head):
    ref = _unshared_albert(model) if model.config.model_type == "albert" else copy.deepcopy(model)
    sites = locate(ref)
    size = sites.head_dim
    with torch.no_grad():
        for linear in _qk_modules(sites.layers[layer]):
            linear.weight[head * size:(head + 1) * size] = 0
            linear.bias[head * size:(head + 1) * size] = 0
    return ref


@pytest.mark.parametrize("name", list(BUILDERS))
def test_zero_mask_matches_weight_edit(name):
    model = _make(name)
    ids, att = _inputs()
    sites = locate(model)
    assert sites.n_layers == 3 and sites.heads == 4
    mask = torch.ones(3, 4)
    mask[1, 2] = 0
    with masked(model, mask):
        got = _run(model, ids, att)
    want = _run(_reference_zero(model, 1, 2), ids, att)
    plain = _run(model, ids, att)
    assert _close_on_tokens(got, want, att) < TOL
    assert _close_on_tokens(got, plain, att) > 1e-3  # the head mattered, so the check has teeth


@pytest.mark.parametrize("name", list(BUILDERS))
def test_uniform_mask_matches_zeroed_scores(name):
    model = _make(name)
    ids, att = _inputs()
    mask = torch.ones(3, 4)
    mask[2, 1] = 0
    with masked(model, mask, method="uniform"):
        got = _run(model, ids, att)
    want = _run(_reference_uniform(model, 2, 1), ids, att)
    assert _close_on_tokens(got, want, att) < TOL
    assert _close_on_tokens(got, _run(model, ids, att), att) > 1e-4


@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.parametrize("method", ["zero", "uniform"])
def test_all_ones_mask_changes_nothing_and_hooks_go_away(name, method):
    model = _make(name)
    ids, att = _inputs()
    plain = _run(model, ids, att)
    with masked(model, torch.ones(3, 4), method=method):
        same = _run(model, ids, att)
    assert torch.equal(plain, same)
    zero = torch.zeros(3, 4)
    with masked(model, zero, method=method):
        changed = _run(model, ids, att)
    assert _close_on_tokens(plain, changed, att) > 1e-3
    assert torch.equal(_run(model, ids, att), plain)  # hooks and patches removed on exit


def test_albert_mask_follows_depth_not_module():
    """Masking layer 0 only must differ from masking every depth of the shared module."""
    model = _make("albert")
    ids, att = _inputs()
    one = torch.ones(3, 4)
    one[0, 3] = 0
    every = torch.ones(3, 4)
    every[:, 3] = 0
    with masked(model, one):
        got_one = _run(model, ids, att)
    with masked(model, every):
        got_every = _run(model, ids, att)
    assert _close_on_tokens(got_one, got_every, att) > 1e-4
    # masking head 3 at every depth == zeroing the shared weight's columns once
    ref = copy.deepcopy(model)
    with torch.no_grad():
        locate(ref).out_proj[0].weight[:, 3 * 8:4 * 8] = 0
    assert _close_on_tokens(got_every, _run(ref, ids, att), att) < TOL


def test_albert_groups_depth_mapping():
    torch.manual_seed(2)
    model = tiny_albert(groups=3).eval()
    sites = locate(model)
    assert len({id(module) for module in sites.layers}) == 3
    ids, att = _inputs()
    mask = torch.ones(3, 4)
    mask[2, 0] = 0
    with masked(model, mask):
        got = _run(model, ids, att)
    ref = copy.deepcopy(model)
    with torch.no_grad():
        locate(ref).out_proj[2].weight[:, 0:8] = 0
    assert _close_on_tokens(got, _run(ref, ids, att), att) < TOL


def _bert_layer_by_hand(layer, hidden, att, head, method):
    """One BERT layer in plain tensor algebra, with head `head` zeroed or made uniform."""
    self_attention, attention_output = layer.attention.self, layer.attention.output
    rows, tokens, width = hidden.shape
    heads, size = self_attention.num_attention_heads, self_attention.attention_head_size

    def split(projected):
        return projected.view(rows, tokens, heads, size).transpose(1, 2)  # [rows, heads, tokens, size]

    query, key = split(self_attention.query(hidden)), split(self_attention.key(hidden))
    value = split(self_attention.value(hidden))
    scores = query @ key.transpose(-1, -2) / size**0.5
    scores = scores.masked_fill(~att.bool()[:, None, None, :], float("-inf"))
    probs = scores.softmax(-1)
    if method == "uniform":
        uniform = att.float() / att.float().sum(1, keepdim=True)  # 1/n over non-padding keys
        probs[:, head] = uniform[:, None, :].expand(rows, tokens, tokens)
    context = probs @ value  # [rows, heads, tokens, size]
    if method == "zero":
        context[:, head] = 0
    context = context.transpose(1, 2).reshape(rows, tokens, width)
    attn_out = attention_output.LayerNorm(attention_output.dense(context) + hidden)
    inter = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(attn_out))
    return layer.output.LayerNorm(layer.output.dense(inter) + attn_out)


@pytest.mark.parametrize("method", ["zero", "uniform"])
def test_bert_layer_matches_hand_computation(method):
    torch.manual_seed(3)
    model = BertModel(BertConfig(**{**TINY_SHAPE, "num_hidden_layers": 1})).eval()
    ids, att = _inputs()
    mask = torch.ones(1, 4)
    mask[0, 2] = 0
    with masked(model, mask, method=method):
        got = _run(model, ids, att)
    with torch.no_grad():
        embedded = model.embeddings(input_ids=ids)
        want = _bert_layer_by_hand(model.encoder.layer[0], embedded, att, 2, method)
    assert _close_on_tokens(got, want, att) < TOL


def test_real_valued_mask_gradient_is_defined():
    """d output / d mask exists for a real-valued mask (Michel et al.'s importance)."""
    model = _make("bert")
    ids, att = _inputs()
    mask = torch.ones(3, 4, requires_grad=True)
    with masked(model, mask):
        out = model(input_ids=ids, attention_mask=att).last_hidden_state
    out.pow(2).sum().backward()
    assert mask.grad is not None and mask.grad.shape == (3, 4)
    assert (mask.grad.abs() > 0).all()


def test_per_row_masks_equal_separate_runs():
    """Several masks in one forward (batch repeated, one block per mask) == one mask per forward."""
    model = _make("distilbert")
    ids, att = _inputs()
    masks = torch.ones(2, 3, 4)
    masks[0, 0, 1] = 0
    masks[1, 2, 3] = 0
    with HeadMasker(model, "uniform") as masker, masker.masking(masks.repeat_interleave(3, dim=0)):
        both = _run(model, ids.repeat(2, 1), att.repeat(2, 1))
    for i in range(2):
        with masked(model, masks[i], "uniform"):
            alone = _run(model, ids, att)
        assert _close_on_tokens(both[3 * i:3 * i + 3], alone, att) < TOL


@pytest.mark.parametrize("name", ["bert", "albert", "deberta-v2"])
def test_replay_skips_lower_layers_with_same_result(name):
    model = _make(name)
    ids, att = _inputs()
    mask = torch.ones(3, 4)
    mask[2, 0] = 0
    with HeadMasker(model) as masker:
        with masker.recording(3) as recorded:
            _run(model, ids, att)
        assert sorted(recorded) == [0, 1, 2]
        calls = []
        handle = locate(model).out_proj[0].register_forward_pre_hook(lambda _module, _args: calls.append(1))
        with masker.masking(mask), masker.replaying(recorded, start=2):
            fast = _run(model, ids, att)
        handle.remove()
        after = _run(model, ids, att)  # the scopes ended: a full, unmasked forward
    with masked(model, mask):
        full = _run(model, ids, att)
    assert _close_on_tokens(fast, full, att) < TOL
    assert torch.equal(after, _run(model, ids, att))
    # ALBERT's out_proj is shared: it still runs at depth 2, but not at depths 0 and 1.
    assert len(calls) == (1 if name == "albert" else 0)


RESUMABLE = ["bert", "roberta", "xlm-roberta", "electra"]


@pytest.mark.parametrize("name", RESUMABLE)
def test_resume_inside_the_first_masked_layer_equals_full_forward(name):
    """Starting at layer l's attention LayerNorm from the recorded context and sum, less the
    masked heads' share of W_O, == the full masked forward; Q/K/V and attention of layers
    <= l and every layer below l are not run."""
    model = _make(name)
    ids, att = _inputs()
    masks = torch.ones(4, 3, 4)
    masks[0, 1, 2] = 0  # one head in layer 1
    masks[1, 1, :3] = 0  # three heads in layer 1
    masks[2, 1, 0] = 0.3  # a real-valued gate
    masks[2, 2, 1] = 0  # and a head above
    masks[3, 2] = 0  # nothing in layer 1 (its sum passes unchanged), all of layer 2
    with HeadMasker(model, "zero") as masker:
        assert masker.can_resume
        with masker.recording(3, attention=True) as recorded:
            _run(model, ids, att)
        assert sorted(recorded) == [0, 1, 2]
        sites = locate(model)
        calls = []
        handles = [sites.value_proj[depth].register_forward_pre_hook(
            lambda _module, _args, depth=depth: calls.append(depth)) for depth in range(3)]
        handles += [sites.out_proj[depth].register_forward_pre_hook(
            lambda _module, _args, depth=depth: calls.append(10 + depth)) for depth in range(3)]
        with masker.masking(masks.repeat_interleave(3, dim=0)), masker.resuming(recorded, 1, copies=4):
            stacked = _run(model, ids.repeat(4, 1), att.repeat(4, 1))  # four masks stacked in one forward
        assert sorted(set(calls)) == [2, 12]  # only layer 2's attention ran
        alone = []
        for i in range(4):
            with masker.masking(masks[i]), masker.resuming(recorded, 1):
                alone.append(_run(model, ids, att))
        for handle in handles:
            handle.remove()
        with masker.masking(masks[0]):  # the resume scope ended: a full forward
            full_in_same_masker = _run(model, ids, att)
    for i in range(4):
        with masked(model, masks[i]):
            full = _run(model, ids, att)
        assert _close_on_tokens(stacked[3 * i:3 * i + 3], full, att) < TOL
        assert _close_on_tokens(alone[i], full, att) < TOL
        if i == 0:
            assert _close_on_tokens(full_in_same_masker, full, att) < TOL
            assert _close_on_tokens(full, _run(model, ids, att), att) > 1e-3  # the mask matters


@pytest.mark.parametrize("name", ["distilbert", "albert", "deberta-v2"])
def test_resume_is_only_offered_for_the_bert_layout_and_zero(name):
    with HeadMasker(_make(name), "zero") as masker:
        assert not masker.can_resume
        with pytest.raises(ValueError, match="BERT layout"), masker.resuming({}, 0):
            pass
        with pytest.raises(ValueError, match="BERT layout"), masker.recording(1, attention=True):
            pass
    with HeadMasker(_make("bert"), "uniform") as masker:
        assert not masker.can_resume
    model = _make("bert").train()
    with HeadMasker(model, "zero") as masker, pytest.raises(RuntimeError, match="eval mode"):
        with masker.resuming({0: None}, 0):
            pass


def test_per_token_gates_refuse_a_resumed_forward():
    """Gates multiply the context of every token, which a forward resumed inside a layer never computes."""
    model = _make("bert")
    ids, att = _inputs()
    with HeadMasker(model, "zero") as masker:
        with masker.recording(3, attention=True) as recorded:
            _run(model, ids, att)
        gates = torch.ones(3, 3, 9, 4)
        with masker.gated(gates), pytest.raises(RuntimeError, match="full forward"), masker.resuming(recorded, 1):
            pass
        with masker.resuming(recorded, 1), pytest.raises(RuntimeError, match="full forward"), masker.gated(gates):
            pass


def test_scopes_nest_and_undo_themselves():
    """An inner mask holds inside its scope only; after an exception the masker is as before."""
    model = _make("bert")
    ids, att = _inputs()
    outer, inner = torch.ones(3, 4), torch.ones(3, 4)
    outer[0, 1] = 0
    inner[2, 3] = 0
    with masked(model, outer):
        want_outer = _run(model, ids, att)
    with masked(model, inner):
        want_inner = _run(model, ids, att)
    with HeadMasker(model) as masker, masker.masking(outer):
        with pytest.raises(KeyError), masker.masking(inner):
            assert _close_on_tokens(_run(model, ids, att), want_inner, att) < TOL
            raise KeyError("leave the scope by an exception")
        assert _close_on_tokens(_run(model, ids, att), want_outer, att) < TOL
    assert _close_on_tokens(want_outer, want_inner, att) > 1e-3


def test_bad_mask_shape_is_refused():
    model = _make("bert")
    with pytest.raises(ValueError, match="layers, heads"):
        with masked(model, torch.ones(4, 3)):
            pass
