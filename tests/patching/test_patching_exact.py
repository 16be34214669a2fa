"""Exact patching (reportgen.patching.heads, issue 49): a patched forward equals a hand-patched one, computed here
another way: not by replacing the head's context at the output projection's input, but by adding, to that
projection's output, the head's share of it from the source run less its share from this run,
(c_source,h - c_h) W_O,h. Random tiny GPT-2, Llama (grouped key/value heads), BART (all three groups), a BERT
masked-LM and an ALBERT masked-LM (one layer module run at every depth), each built from its config here."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from reportgen.model.head_sites import locate, projection_weight  # noqa: E402
from reportgen.patching.heads import Patch, patched_logits, record_contexts  # noqa: E402

pytestmark = pytest.mark.slow  # transformers' model code for four families (~5 s to import): out of the fast tier

VOCAB, TOKENS = 60, 9
FAMILIES = ("gpt2", "llama", "qwen2", "mistral", "gemma", "bart", "t5", "marian", "bert-mlm", "albert-mlm")
SEQ2SEQ = ("bart", "t5", "marian")


@pytest.fixture(scope="module")
def models() -> dict:
    torch.manual_seed(0)
    small = dict(vocab_size=VOCAB)
    return {
        "gpt2": transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                                                     **small)),
        "llama": transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=32, **small)),
        "bart": transformers.BartForConditionalGeneration(transformers.BartConfig(
            d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32, **small)),
        "bert-mlm": transformers.BertForMaskedLM(transformers.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=32, **small)),
        "qwen2": transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=32, **small)),
        "mistral": transformers.MistralForCausalLM(transformers.MistralConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=32, sliding_window=4, **small)),
        "gemma": transformers.GemmaForCausalLM(transformers.GemmaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
            head_dim=8, max_position_embeddings=32, **small)),
        "t5": transformers.T5ForConditionalGeneration(transformers.T5Config(
            d_model=32, d_kv=6, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
            relative_attention_num_buckets=8, decoder_start_token_id=0, **small)),
        "marian": transformers.MarianMTModel(transformers.MarianConfig(
            d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32, decoder_start_token_id=0, init_std=0.2,
            pad_token_id=0, **small)),
        "albert-mlm": transformers.AlbertForMaskedLM(transformers.AlbertConfig(
            hidden_size=32, embedding_size=16, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
            num_hidden_groups=1, inner_group_num=1, max_position_embeddings=32, **small)),
    }



def _prompts(family: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    ids = {"input_ids": torch.tensor(rng.integers(3, VOCAB, (1, TOKENS)))}
    if family in SEQ2SEQ:  # the same decoder input for both runs: the source prompt differs
        ids["decoder_input_ids"] = torch.tensor(np.random.default_rng(99).integers(3, VOCAB, (1, 6)))
    return ids


def _by_hand(model, target: dict, source: list, patch: Patch) -> torch.Tensor:
    """The target's logits with `patch` applied as a correction of each output projection's output."""
    sites = locate(model)
    size = sites.head_dim
    handles = []
    depths_of: dict[int, list[int]] = {}  # a module's depths in call order (ALBERT: one module, every depth)
    for depth, module in enumerate(sites.out_proj):
        depths_of.setdefault(id(module), []).append(depth)
    for module in {id(module): module for module in sites.out_proj}.values():
        weight = projection_weight(module)  # [out, in]
        calls = iter(depths_of[id(module)])

        def correct(_module, args, output, calls=calls, weight=weight):
            depth = next(calls)
            heads = [head for layer, head in patch.heads if layer == depth]
            context = args[0]
            delta = torch.zeros_like(output)
            for head in heads:
                part = slice(head * size, (head + 1) * size)
                moved = source[depth].reshape(1, context.shape[1], -1)[..., part] - context[..., part]
                if patch.positions is not None:
                    keep = torch.zeros(context.shape[1], dtype=torch.bool)
                    keep[list(patch.positions)] = True
                    moved = moved * keep[None, :, None]
                delta = delta + moved @ weight[:, part].T
            return output + delta

        handles.append(module.register_forward_hook(correct))
    try:
        with torch.inference_mode():
            return model(**target).logits[0]
    finally:
        for handle in handles:
            handle.remove()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_patched_forward_equals_the_hand_patched_one(models, family):
    model = models[family].eval()
    sites = locate(model)
    target, source_prompt = _prompts(family, 0), _prompts(family, 1)
    _, source = record_contexts(model, source_prompt, sites)
    last = sites.n_layers - 1
    patches = [Patch(((0, 1),)), Patch(((last, 3),)), Patch(((0, 0), (last, 2))), Patch(((1, 2),), (TOKENS - 1,)),
               Patch(((last, 0),), (0, 2))]
    if family in SEQ2SEQ:  # decoder-side positions: the decoder's 6 tokens
        patches = patches[:3] + [Patch(((3, 2),), (5,)), Patch(((5, 0),), (0, 2))]
    patched = patched_logits(model, target, source, patches, sites)
    plain, _ = record_contexts(model, target, sites)
    for row, patch in enumerate(patches):
        expected = _by_hand(model, target, source, patch)
        assert torch.allclose(patched[row], expected, atol=1e-5, rtol=1e-5), (family, patch)
        assert (patched[row] - plain[0]).abs().max() > 1e-6, (family, patch)  # the patch moved something


def test_a_run_patched_with_its_own_contexts_is_unchanged(models):
    model = models["llama"].eval()
    prompt = _prompts("llama", 3)
    logits, own = record_contexts(model, prompt)
    every = Patch(tuple((depth, head) for depth in range(2) for head in range(4)))
    assert torch.allclose(patched_logits(model, prompt, own, [every])[0], logits[0], atol=1e-6)
