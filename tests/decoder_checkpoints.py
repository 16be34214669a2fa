"""Tiny random decoders saved with a tokenizer trained here (nothing downloaded): GPT-2 and the Llama family
(Llama, Qwen2, Mistral, Gemma: grouped-query attention, rotary positions, Mistral's sliding window)."""

from __future__ import annotations

from pathlib import Path

CORPUS = ["the cat sat on the mat.", "a dog was in the garden.", "the cat and the dog sat on the mat.",
          "i bought fresh strawberries at the store.", "the store was closed on monday."]
SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             initializer_range=0.3, max_position_embeddings=128)
FAMILIES = {  # model_type -> (config class, model class, extra config)
    "gpt2": ("GPT2Config", "GPT2Model", {}),
    "llama": ("LlamaConfig", "LlamaModel", {"num_key_value_heads": 2}),
    "qwen2": ("Qwen2Config", "Qwen2Model", {"num_key_value_heads": 2}),
    "mistral": ("MistralConfig", "MistralModel", {"num_key_value_heads": 1, "sliding_window": 6}),
    "gemma": ("GemmaConfig", "GemmaModel", {"num_key_value_heads": 2, "head_dim": 8}),
}


def make_decoder(family: str, target: Path, causal_lm: bool = False) -> Path:
    """A random decoder of `family` with a byte-level BPE tokenizer (an end-of-text token, no separator); with
    `causal_lm`, saved with its language-model head (`*ForCausalLM`, GPT-2's `GPT2LMHeadModel`) for task causal_lm."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.model_input_names = ["input_ids", "attention_mask"]
    fast.save_pretrained(target)
    config_class, model_class, extra = FAMILIES[family]
    if family == "gpt2":
        config = transformers.GPT2Config(vocab_size=len(fast), n_embd=32, n_layer=2, n_head=4, n_positions=128,
                                         initializer_range=0.3, bos_token_id=0, eos_token_id=0)
    else:
        config = getattr(transformers, config_class)(vocab_size=len(fast), bos_token_id=0, eos_token_id=0,
                                                     pad_token_id=0, **SHAPE, **extra)
    torch.manual_seed(0)
    if causal_lm:
        model_class = "GPT2LMHeadModel" if family == "gpt2" else model_class.replace("Model", "ForCausalLM")
    getattr(transformers, model_class)(config).save_pretrained(target)
    return target


# The docs' decoder table (docs/pages/reference/architectures.md): check -> (header, what a "yes" means, the test
# file behind it). Every family in FAMILIES has every check (each test is parametrized over FAMILIES).
CHECKS = {
    "views": ("views", "the quick view holds the model's own attention within the 8-bit step, nothing above the "
                       "diagonal, with contributions", "tests/quickview/test_decoder_views.py"),
    "qk_check": ("query/key check", "the query/key softmax matches the model's weights within rounding, with "
                                    "rotary positions, shared key/value heads and the causal mask",
                 "tests/quickview/test_decoder_views.py"),
    "masking": ("masking exact", "masking a head equals zeroing its columns of the output projection; uniform "
                                 "masking is the causal uniform head", "tests/model/test_decoders.py"),
    "atlas": ("decoder atlas", "a built site's decoder statistics equal the definitions on the model's own "
                               "attention, induction test included", "tests/test_decoder_build.py"),
    "causal_lm": ("causal-LM task", "the build's next-token-loss ablation runs (baseline, single heads, whole "
                                    "layers)", "tests/test_decoder_build.py"),
}
DESCRIBED = {"gpt2": "`GPT2Config`: Conv1D projections", "llama": "`LlamaConfig`: 2 key/value heads, rotary",
             "qwen2": "`Qwen2Config`: 2 key/value heads, rotary", "mistral": "`MistralConfig`: 1 key/value head, "
             "sliding window of 6", "gemma": "`GemmaConfig`: 2 key/value heads, head size 8"}
NAMES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "gemma": "Gemma"}


def render_decoder_table() -> str:
    """The docs' decoder support table (docs/pages/reference/architectures.md), from FAMILIES and CHECKS."""
    from tests.helpers import family_table

    return family_table(["Decoders (causal self-attention) on tiny random checkpoints (2 or 3 layers x 4 heads, "
                         "hidden 32; a", "byte-level BPE tokenizer trained here, `tests/decoder_checkpoints.py`). "
                         "The columns, each a test", "parametrized over these families:"],
                        CHECKS, FAMILIES, NAMES, DESCRIBED)
