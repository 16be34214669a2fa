"""Methods "mean" (Wang et al. 2022) and "resample" (Chan et al. 2022) of `HeadMasker`, against references
computed here without reportgen's hooks.

The reference contexts are captured by forward pre-hooks written here on each layer's attention output
projection (its input is the per-head context); the reference mean of head h at position t is the plain mean,
by loops, of the contexts at t over the inputs whose token t is real; the reference masked forward patches head
h's slice of the context by hand in such a hook: m * c + (1 - m) * r. The models are tiny random ones of each
architecture the masker supports: the BERT layout and ALBERT (tests/helpers.py BUILDERS), GPT-2, Llama
(grouped-query attention) and the BART / T5 encoder-decoders, whose groups count positions in their own stream.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reportgen.errors import ConfigError
from reportgen.model.head_sites import locate
from reportgen.model.masking import HeadMasker
from reportgen.model.replacements import derangement, donor_contexts, mean_contexts
from tests.helpers import BUILDERS

TOL = 1e-5


def _gpt2():
    from transformers import GPT2Config, GPT2Model

    return GPT2Model(GPT2Config(vocab_size=99, n_embd=32, n_layer=3, n_head=4, n_positions=64, initializer_range=0.3))


def _llama():
    from transformers import LlamaConfig, LlamaModel

    return LlamaModel(LlamaConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64,
                                  initializer_range=0.3))


def _bart():
    from transformers import BartConfig, BartModel

    return BartModel(BartConfig(vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=2,
                                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
                                decoder_ffn_dim=48, max_position_embeddings=64, init_std=0.3, pad_token_id=1))


def _t5():
    from transformers import T5Config, T5Model

    return T5Model(T5Config(vocab_size=99, d_model=32, d_kv=6, d_ff=48, num_layers=2, num_decoder_layers=2,
                            num_heads=4, relative_attention_num_buckets=8, initializer_factor=1.0))


MODELS = {"bert": BUILDERS["bert"], "albert": BUILDERS["albert"], "gpt2": _gpt2, "llama": _llama, "bart": _bart,
          "t5": _t5}
ENCODER_DECODERS = ("bart", "t5")


def _model(name: str):
    torch.manual_seed(1)
    model = MODELS[name]().eval()
    if name in ("gpt2", "llama"):
        model.set_attn_implementation("eager")
    return model


def _padded(rows: int, tokens: int, lengths: list[int], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(5, 99, (rows, tokens), generator=torch.Generator().manual_seed(seed))
    real = torch.zeros(rows, tokens, dtype=torch.long)
    for row, length in enumerate(lengths):
        real[row, :length] = 1
    return ids, real


def _inputs(name: str, lengths=(9, 6, 4), target=(7, 3, 5), seed: int = 0) -> dict[str, torch.Tensor]:
    """One batch, right-padded (the tasks' padding); an encoder-decoder's target has lengths of its own."""
    ids, real = _padded(len(lengths), max(lengths), list(lengths), seed)
    inputs = {"input_ids": ids, "attention_mask": real}
    if name in ENCODER_DECODERS:
        decoder, decoder_real = _padded(len(target), max(target), list(target), seed + 1)
        inputs.update(decoder_input_ids=decoder, decoder_attention_mask=decoder_real)
    return inputs


def _outputs(model, inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(**inputs)
    return [out.last_hidden_state] + ([out.encoder_last_hidden_state] if "decoder_input_ids" in inputs else [])


def _streams(inputs) -> list[torch.Tensor]:
    """The real tokens of each of `_outputs`' tensors."""
    return [inputs.get("decoder_attention_mask", inputs["attention_mask"]), inputs["attention_mask"]]


def _max_difference(got, want, inputs) -> float:
    return max((a - b)[real.bool()].abs().max().item()
               for a, b, real in zip(got, want, _streams(inputs), strict=False))


def _query_real(sites, depth: int, inputs) -> torch.Tensor:
    group = sites.groups[depth]
    if group == "encoder" or "decoder_attention_mask" not in inputs:
        return inputs["attention_mask"]
    return inputs["decoder_attention_mask"]  # decoder self- and cross-attention: the target's tokens


def _hooked(sites, hook_for):
    """Pre-hooks on each distinct output projection; `hook_for(depth)` handles the call of flat layer `depth`
    (ALBERT's one shared projection runs once per depth, in depth order)."""
    calls: dict[int, int] = {}
    handles = []
    for key, module in {id(module): module for module in sites.out_proj}.items():
        depths = [depth for depth, other in enumerate(sites.out_proj) if other is module]

        def hook(_module, args, depths=depths, key=key):
            depth = depths[calls.get(key, 0) % len(depths)]
            calls[key] = calls.get(key, 0) + 1
            return hook_for(depth, args)

        handles.append(module.register_forward_pre_hook(hook))
    return handles


def _contexts(model, inputs) -> list[torch.Tensor]:
    """Each flat layer's unmasked context [rows, tokens, heads * head_dim], captured by hooks."""
    sites = locate(model)
    found: list[torch.Tensor | None] = [None] * sites.n_layers

    def keep(depth, args):
        found[depth] = args[0].detach().clone()

    handles = _hooked(sites, keep)
    _outputs(model, inputs)
    for handle in handles:
        handle.remove()
    return found


def _hand_means(model, inputs) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per depth: the mean context at each position over the rows whose token there is real (loops), and over
    all real tokens."""
    sites = locate(model)
    by_position, overall = [], []
    for depth, context in enumerate(_contexts(model, inputs)):
        real = _query_real(sites, depth, inputs)
        rows, tokens = real.shape
        by_position.append(torch.stack([
            torch.stack([context[row, t] for row in range(rows) if real[row, t]]).mean(0) for t in range(tokens)]))
        overall.append(torch.stack([context[row, t] for row in range(rows) for t in range(tokens)
                                    if real[row, t]]).mean(0))
    return by_position, overall


def _patched(model, inputs, mask: torch.Tensor, replacement) -> list[torch.Tensor]:
    """The forward with head h of flat layer l patched by hand: c_h <- m c_h + (1 - m) r_h, where
    `replacement(depth, rows, tokens)` is [rows, tokens, heads * head_dim]."""
    sites = locate(model)
    size = sites.head_dim

    def patch(depth, args):
        context = args[0].clone()
        rows, tokens = context.shape[:2]
        wanted = replacement(depth, rows, tokens)
        for head in range(sites.heads):
            m = float(mask[depth, head])
            if m != 1:
                part = slice(head * size, (head + 1) * size)
                context[:, :, part] = m * context[:, :, part] + (1 - m) * wanted[:, :, part]
        return (context,) + tuple(args[1:])

    handles = _hooked(sites, patch)
    try:
        return _outputs(model, inputs)
    finally:
        for handle in handles:
            handle.remove()


def _mask(name: str) -> torch.Tensor:
    """Heads in several layers (each group of an encoder-decoder), one gate real-valued."""
    sites_layers = {"llama": 2, "bart": 6, "t5": 6}.get(name, 3)
    mask = torch.ones(sites_layers, 4)
    mask[0, 1] = 0
    mask[-1, 2] = 0
    mask[sites_layers // 2, 3] = 0.3
    if name in ENCODER_DECODERS:  # encoder 0-1, decoder self 2-3, cross 4-5
        mask[2, 0] = 0
        mask[5, 0] = 0
    return mask


@pytest.mark.parametrize("name", list(MODELS))
def test_mean_replacement_is_the_hand_computed_mean_and_the_masked_forward_the_hand_patched(name):
    model = _model(name)
    inputs = _inputs(name)
    want_by_position, want_overall = _hand_means(model, inputs)
    mask = _mask(name)
    with HeadMasker(model, "mean") as masker:
        means = mean_contexts(masker, [inputs], lambda batch: model(**batch))
        for depth in range(masker.sites.n_layers):
            assert torch.allclose(means.by_position[depth], want_by_position[depth], atol=1e-6), depth
            assert torch.allclose(means.overall[depth], want_overall[depth], atol=1e-6), depth
        # the masked forward on other inputs of the same lengths: the means are the task's, not the batch's
        other = _inputs(name, seed=7)
        with masker.masking(mask), masker.replacing(means):
            got = _outputs(model, other)
    want = _patched(model, other, mask, lambda depth, rows, tokens: want_by_position[depth][:tokens].expand(
        rows, -1, -1))
    assert _max_difference(got, want, other) < TOL
    assert _max_difference(got, _outputs(model, other), other) > 1e-3  # the masked heads matter


def test_positions_past_every_input_take_the_overall_mean():
    model = _model("bert")
    inputs = _inputs("bert")  # 9 tokens at most
    _, overall = _hand_means(model, inputs)
    by_position, _ = _hand_means(model, inputs)
    longer = _inputs("bert", lengths=(12, 10, 5), seed=3)
    mask = torch.ones(3, 4)
    mask[1, 2] = 0
    with HeadMasker(model, "mean") as masker:
        means = mean_contexts(masker, [inputs], lambda batch: model(**batch))
        assert torch.allclose(means.at(1, 3, 12)[0, 9:], overall[1].expand(3, -1), atol=1e-6)
        with masker.masking(mask), masker.replacing(means):
            got = _outputs(model, longer)

    def wanted(depth, rows, tokens):
        table = torch.cat([by_position[depth], overall[depth].expand(tokens - 9, -1)])
        return table.expand(rows, -1, -1)

    assert _max_difference(got, _patched(model, longer, mask, wanted), longer) < TOL


@pytest.mark.parametrize("name", ["bert", "gpt2", "bart"])
def test_resample_replacement_is_the_donors_context_and_the_mean_past_its_end(name):
    model = _model(name)
    task_inputs = _inputs(name)
    by_position, _ = _hand_means(model, task_inputs)
    receivers = _inputs(name, lengths=(9, 6, 4), target=(7, 3, 5), seed=11)
    donors = _inputs(name, lengths=(5, 9, 2), target=(2, 7, 6), seed=12)  # row 0's donor is shorter, row 1's longer
    donor_context = _contexts(model, donors)
    sites = locate(model)
    mask = _mask(name)
    with HeadMasker(model, "resample") as masker:
        means = mean_contexts(masker, [task_inputs], lambda batch: model(**batch))
        replacement = donor_contexts(masker, donors, lambda batch: model(**batch), means)
        with masker.masking(mask), masker.replacing(replacement):
            got = _outputs(model, receivers)

    def wanted(depth, rows, tokens):
        real = _query_real(sites, depth, donors)
        out = torch.empty(rows, tokens, donor_context[depth].shape[-1])
        for row in range(rows):
            for t in range(tokens):
                donor_has = t < real.shape[1] and bool(real[row, t])
                out[row, t] = donor_context[depth][row, t] if donor_has else by_position[depth][t]
        return out

    for depth in range(sites.n_layers):
        tokens = _query_real(sites, depth, receivers).shape[1]
        assert torch.allclose(replacement.at(depth, 3, tokens), wanted(depth, 3, tokens), atol=1e-6), depth
    assert _max_difference(got, _patched(model, receivers, mask, wanted), receivers) < TOL
    assert _max_difference(got, _outputs(model, receivers), receivers) > 1e-3


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("method", ["mean", "resample"])
def test_an_all_ones_mask_changes_nothing(name, method):
    model = _model(name)
    inputs = _inputs(name)
    plain = _outputs(model, inputs)
    with HeadMasker(model, method) as masker:
        means = mean_contexts(masker, [inputs], lambda batch: model(**batch))
        replacement = means if method == "mean" else donor_contexts(
            masker, _inputs(name, seed=5), lambda batch: model(**batch), means)
        with masker.masking(torch.ones_like(_mask(name))), masker.replacing(replacement):
            same = _outputs(model, inputs)
    assert all(torch.equal(a, b) for a, b in zip(plain, same, strict=True))


def test_stacked_masks_read_each_rows_own_donor():
    """Two masks stacked along the batch (block i for mask i) == each mask alone: the resample replacement
    repeats per block, so every row keeps its own input's donor."""
    model = _model("gpt2")
    inputs, donors = _inputs("gpt2"), _inputs("gpt2", lengths=(4, 9, 6), seed=4)
    masks = torch.ones(2, 3, 4)
    masks[0, 0, 1] = 0
    masks[1, 2, 3] = 0
    stacked = {name: tensor.repeat(2, 1) for name, tensor in inputs.items()}
    with HeadMasker(model, "resample") as masker:
        means = mean_contexts(masker, [inputs], lambda batch: model(**batch))
        replacement = donor_contexts(masker, donors, lambda batch: model(**batch), means)
        with masker.masking(masks.repeat_interleave(3, dim=0)), masker.replacing(replacement):
            both = _outputs(model, stacked)[0]
        for i in range(2):
            with masker.masking(masks[i]), masker.replacing(replacement):
                alone = _outputs(model, inputs)[0]
            assert _max_difference([both[3 * i:3 * i + 3]], [alone], inputs) < TOL


@pytest.mark.parametrize("method", ["mean", "resample"])
def test_resuming_inside_the_first_masked_layer_is_exact_for_replacements(method):
    """On the BERT layout a forward may start at layer l's attention LayerNorm: the recorded sum less
    (1 - m) W_O (c - r) per masked head equals the full forward with the replacement."""
    model = _model("bert")
    inputs = _inputs("bert")
    masks = torch.ones(2, 3, 4)
    masks[0, 1, 2] = 0
    masks[1, 1, 0] = 0.4
    masks[1, 2, 3] = 0
    with HeadMasker(model, method) as masker:
        assert masker.can_resume
        means = mean_contexts(masker, [inputs], lambda batch: model(**batch))
        replacement = means if method == "mean" else donor_contexts(
            masker, _inputs("bert", lengths=(3, 9, 7), seed=9), lambda batch: model(**batch), means)
        with masker.recording(3, attention=True) as recorded:
            _outputs(model, inputs)
        stacked = {name: tensor.repeat(2, 1) for name, tensor in inputs.items()}
        with (masker.masking(masks.repeat_interleave(3, dim=0)), masker.resuming(recorded, 1, copies=2),
              masker.replacing(replacement)):
            resumed = _outputs(model, stacked)[0]
        for i in range(2):
            with masker.masking(masks[i]), masker.replacing(replacement):
                full = _outputs(model, inputs)[0]
            assert _max_difference([resumed[3 * i:3 * i + 3]], [full], inputs) < TOL
            assert _max_difference([full], _outputs(model, inputs)[:1], inputs) > 1e-3


def test_masking_without_a_replacement_is_refused():
    model = _model("bert")
    mask = torch.ones(3, 4)
    mask[0, 0] = 0
    with HeadMasker(model, "mean") as masker, masker.masking(mask), pytest.raises(RuntimeError, match="replacing"):
        _outputs(model, _inputs("bert"))
    with HeadMasker(model, "uniform") as masker:
        assert not masker.can_resume


def test_the_derangement_pairs_every_input_with_another_and_follows_the_seed():
    for count in (2, 3, 10, 101):
        order = derangement(count, seed=0)
        assert sorted(order.tolist()) == list(range(count)) and not np.any(order == np.arange(count))
        assert np.array_equal(order, derangement(count, seed=0))
    assert not np.array_equal(derangement(50, seed=0), derangement(50, seed=1))
    with pytest.raises(ConfigError, match="another input"):
        derangement(1, seed=0)
