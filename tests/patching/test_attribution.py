"""Attribution patching (reportgen.patching.attribution, issue 49): each head's estimate is the first-order
change of the metric, checked against the finite difference of a small step of that head's context toward the
source run's (exact patching of an interpolated context), on tiny GPT-2 and Llama in float64."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from reportgen.model.head_sites import locate  # noqa: E402
from reportgen.patching.attribution import attribution  # noqa: E402
from reportgen.patching.heads import Patch, patched_logits, record_contexts  # noqa: E402
from reportgen.patching.pairs import induction_pairs  # noqa: E402
from reportgen.patching.sweep import logit_difference, sweep  # noqa: E402

pytestmark = pytest.mark.slow  # transformers' model code (~5 s to import)

# The step of the central difference: not smaller, as Llama's eager attention takes its softmax in float32 even in
# a float64 model, so a smaller step's difference is rounding noise.
STEP = 1e-3


def _model(family: str):
    torch.manual_seed(1)
    if family == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=40)
        return transformers.GPT2LMHeadModel(config).double().eval()
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64, vocab_size=40)
    return transformers.LlamaForCausalLM(config).double().eval()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_each_estimate_is_the_first_order_change_of_patching_that_head(family):
    model = _model(family)
    sites = locate(model)
    pair = induction_pairs(vocab_size=40, bos=0, count=1, n=6, seed=0, exclude=(0,))[0]
    source, target = ({"input_ids": torch.tensor([ids])} for ids in (pair.clean, pair.corrupted))
    estimate = attribution(model, source, target, pair, sites)
    per_position = attribution(model, source, target, pair, sites, per_position=True)
    assert torch.allclose(per_position.sum(-1), estimate)
    _, own = record_contexts(model, target, sites)
    _, clean = record_contexts(model, source, sites)
    heads = [Patch(((d, h),)) for d in range(sites.n_layers) for h in range(sites.heads)]

    def stepped(step: float) -> torch.Tensor:  # each head's context moved `step` of the way to the source's
        moved = [own[d] + step * (clean[d] - own[d]) for d in range(sites.n_layers)]
        return logit_difference(patched_logits(model, target, moved, heads, sites), pair)

    finite = ((stepped(STEP) - stepped(-STEP)) / (2 * STEP)).reshape(sites.n_layers, sites.heads)  # central
    assert torch.allclose(estimate, finite, rtol=2e-3, atol=1e-6), (estimate, finite)
    assert estimate.abs().max() > 1e-3  # something to estimate


def test_a_sweep_gives_each_runs_metric_and_every_heads_patched_metric():
    model = _model("gpt2")
    pairs = induction_pairs(vocab_size=40, bos=0, count=3, n=5, seed=2, exclude=(0,))
    found = sweep(model, pairs, rows=5)  # 8 heads in two forwards of 5 and 3 rows
    for index, pair in enumerate(pairs):
        clean, corrupted = ({"input_ids": torch.tensor([ids])} for ids in (pair.clean, pair.corrupted))
        for name, run in (("clean", clean), ("corrupted", corrupted)):
            unpatched = float(logit_difference(record_contexts(model, run)[0], pair)[0])
            assert np.isclose(getattr(found, name)[index], unpatched)
        _, recorded = record_contexts(model, clean)
        one = patched_logits(model, corrupted, recorded, [Patch(((1, 3),))])
        assert np.isclose(found.patched["denoising"][index, 1, 3], float(logit_difference(one, pair)[0]))
    assert found.patched["noising"].shape == (3, 2, 4)


def test_a_sweep_of_chosen_heads_at_each_position_patches_one_position_at_a_time():
    model = _model("llama")
    pairs = induction_pairs(vocab_size=40, bos=0, count=2, n=4, seed=5, exclude=(0,))
    chosen = [(0, 2), (1, 1)]
    found = sweep(model, pairs, ("noising",), rows=3, heads=chosen, positions=True)
    patched = found.patched["noising"]
    assert patched.shape == (2, 2, 4, 8)
    assert np.isnan(patched[:, 0, 0]).all() and np.isfinite(patched[:, 1, 1]).all()  # only the chosen heads ran
    pair = pairs[1]
    clean, corrupted = ({"input_ids": torch.tensor([ids])} for ids in (pair.clean, pair.corrupted))
    _, recorded = record_contexts(model, corrupted)
    one = patched_logits(model, clean, recorded, [Patch(((1, 1),), (5,))])
    assert np.isclose(patched[1, 1, 1, 5], float(logit_difference(one, pair)[0]))
    with pytest.raises(ValueError, match="at most 64 tokens"):
        sweep(model, induction_pairs(vocab_size=40, bos=0, count=1, n=40, seed=0, exclude=(0,)), positions=True)


def _pairs_of_several_lengths() -> list:
    """Induction pairs of two lengths, and one whose metric is read before its last token (no logits_to_keep)."""
    from reportgen.patching.pairs import PromptPair

    pairs = induction_pairs(vocab_size=40, bos=0, count=3, n=5, seed=3, exclude=(0,))
    pairs += induction_pairs(vocab_size=40, bos=0, count=2, n=4, seed=4, exclude=(0,))
    first = pairs[0]
    pairs.append(PromptPair(first.clean, first.corrupted, first.answer, first.wrong, first.position - 2))
    return pairs


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_batched_attribution_of_both_directions_is_each_pairs_own(family):
    """attribution_both (the build's: pairs of one length batched, both directions from one backward of each prompt)
    equals `attribution` run pair by pair in each direction, in float64."""
    from reportgen.patching.attribution import attribution_both

    model = _model(family)
    sites = locate(model)
    pairs = _pairs_of_several_lengths()
    both = attribution_both(model, pairs, sites, rows=2)  # chunks of 2: a group split over batches
    for index, pair in enumerate(pairs):
        runs = {name: {"input_ids": torch.tensor([getattr(pair, name)])} for name in ("clean", "corrupted")}
        denoising = attribution(model, runs["clean"], runs["corrupted"], pair, sites)
        noising = attribution(model, runs["corrupted"], runs["clean"], pair, sites)
        assert torch.allclose(both["denoising"][index].double(), denoising, atol=1e-9), index
        assert torch.allclose(both["noising"][index].double(), noising, atol=1e-9), index
    assert both["denoising"].abs().max() > 1e-3
