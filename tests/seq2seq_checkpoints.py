"""Tiny random encoder-decoder checkpoints (BART, T5, Marian), saved as a user's model directory is.

`make_encoder_decoder(family, target_dir)` writes config.json + model.safetensors of the family's
sequence-to-sequence LM class (so the LM head is there for task seq2seq; the base model loads from the
same files) and a fast tokenizer made here from PAIRS (BART's trained with `tokenizers`; nothing is
downloaded), saved as a `PreTrainedTokenizerFast` with the family's special tokens and template:

- BART: byte-level BPE, <s> 0, <pad> 1, </s> 2, <unk> 3, <mask> 4; "<s> text </s>"; the decoder starts
  with </s> (BART's decoder_start_token_id is its eos).
- T5: unigram (_unigram_pieces), <pad> 0, </s> 1, <unk> 2; "text </s>"; the decoder starts with <pad>.
- Marian: unigram (_unigram_pieces), </s> 0, <unk> 1, <pad> 2; "text </s>"; the decoder starts with <pad>;
  sinusoidal positions.

Each has 2 encoder layers and 2 decoder layers of 4 heads, hidden 32. T5's heads are 6 wide (d_kv 6, so
the heads hold 24 features, not the hidden 32) with 8 relative-position buckets.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

FAMILIES = ("bart", "t5", "marian")
MAX_LENGTH = 64
# Source/target pairs: what the tokenizers are trained on and what the tests translate.
PAIRS = [
    ("the cat sat on the mat.", "le chat est assis sur le tapis."),
    ("a dog was in the garden.", "un chien était dans le jardin."),
    ("i bought fresh strawberries at the store.", "j'ai acheté des fraises fraîches au magasin."),
    ("the store was closed on monday.", "le magasin était fermé lundi."),
    ("we walked to the park after dinner.", "nous avons marché au parc après le dîner."),
    ("the children were playing with a ball.", "les enfants jouaient avec un ballon."),
    ("my brother plays football every weekend.", "mon frère joue au football chaque week-end."),
    ("the museum opens at nine.", "le musée ouvre à neuf heures."),
]

SPECIALS = {  # family -> special tokens in vocabulary order (ids 0, 1, ...)
    "bart": ("<s>", "<pad>", "</s>", "<unk>", "<mask>"),
    "t5": ("<pad>", "</s>", "<unk>"),
    "marian": ("</s>", "<unk>", "<pad>"),
}
ROLES = {
    "bart": dict(bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>"),
    "t5": dict(eos_token="</s>", pad_token="<pad>", unk_token="<unk>"),
    "marian": dict(eos_token="</s>", pad_token="<pad>", unk_token="<unk>"),
}
SIZES = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=MAX_LENGTH, init_std=0.2,
             dropout=0.0, attention_dropout=0.0)


@lru_cache(maxsize=None)
def _trained(family: str) -> str:
    """The family's `tokenizers` model made from PAIRS, as JSON (a str: the cache shares nothing mutable): BART's BPE
    trained by `tokenizers`, the unigram models' pieces counted here (_unigram_pieces)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = list(SPECIALS[family])
    texts = [text for pair in PAIRS for text in pair]
    if family == "bart":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=300, special_tokens=specials, show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    else:
        tokenizer = Tokenizer(models.Unigram([(token, 0.0) for token in specials] + _unigram_pieces(texts, 150),
                                             unk_id=specials.index("<unk>")))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    assert ids == {token: index for index, token in enumerate(specials)}, f"{family}: special ids {ids}"
    eos = ("</s>", ids["</s>"])
    if family == "bart":  # <s> a </s> (pair: <s> a </s></s> b </s>), as BART's tokenizer
        bos = ("<s>", ids["<s>"])
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[bos, eos])
    else:  # a </s> (pair: a </s> b </s>), as T5's and Marian's tokenizers
        tokenizer.post_processor = processors.TemplateProcessing(
            single="$A </s>", pair="$A </s> $B </s>", special_tokens=[eos])
    return tokenizer.to_str()


def _unigram_pieces(texts: list[str], size: int) -> list[tuple[str, float]]:
    """A unigram vocabulary of `texts` made here, not by `tokenizers`' UnigramTrainer: the most frequent words
    ("▁word", scored by the log of their frequency), then the word parts that cover the most text, then every
    character, each scored lower than the last kind, so that a word the vocabulary lacks splits into few parts.

    The trainer sums its EM scores in hash order, so the same texts gave scores 1e-4 apart and near-equal pieces
    other ids from one process to the next (a CI worker's tokenizer was another one, so was its random model,
    whose masked head then hardly mattered). Made this way, every process has the same checkpoint."""
    import math
    from collections import Counter

    words = Counter("▁" + word for word in " ".join(texts).split())
    parts: Counter[str] = Counter()
    for word, count in words.items():
        for i in range(len(word)):
            for j in range(i + 2, min(len(word), i + 5) + 1):
                parts[word[i:j]] += count
    characters = sorted({character for word in words for character in word})
    room = size - len(characters)
    kept = sorted(words, key=lambda w: (-words[w], w))[:room // 2]
    rest = sorted((p for p in parts if p not in kept), key=lambda p: (-parts[p] * len(p), p))[:room - len(kept)]
    total_words, total_parts = sum(words[w] for w in kept), sum(parts[p] for p in rest)
    return ([(w, math.log(words[w] / total_words)) for w in kept]
            + [(p, math.log(parts[p] / total_parts) / 10 - 10) for p in rest]
            + [(c, -20.0) for c in characters if c not in kept])


def family_tokenizer(family: str):
    """A `PreTrainedTokenizerFast` over the trained model, with the family's special tokens."""
    import transformers
    from tokenizers import Tokenizer

    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(_trained(family)),
                                                model_max_length=MAX_LENGTH, **ROLES[family])
    fast.model_input_names = ["input_ids", "attention_mask"]
    return fast


def model_config(family: str, tokenizer):
    """The family's tiny config for this tokenizer's vocabulary and special ids."""
    import transformers

    vocab, pad, eos = len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id
    if family == "t5":
        return transformers.T5Config(vocab_size=vocab, d_model=32, d_kv=6, d_ff=64, num_layers=2, num_decoder_layers=2,
                                     num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                                     dropout_rate=0.0, initializer_factor=2.0, pad_token_id=pad, eos_token_id=eos,
                                     decoder_start_token_id=pad)
    if family == "bart":
        return transformers.BartConfig(vocab_size=vocab, pad_token_id=pad, bos_token_id=tokenizer.bos_token_id,
                                       eos_token_id=eos, decoder_start_token_id=eos, forced_eos_token_id=eos,
                                       **SIZES)
    return transformers.MarianConfig(vocab_size=vocab, decoder_vocab_size=vocab, pad_token_id=pad, eos_token_id=eos,
                                     decoder_start_token_id=pad, scale_embedding=True, **SIZES)


LM_CLASSES = {"bart": "BartForConditionalGeneration", "t5": "T5ForConditionalGeneration", "marian": "MarianMTModel"}


def make_encoder_decoder(family: str, target_dir: Path, seed: int = 0) -> Path:
    """A random tiny encoder-decoder of `family` with its LM head and tokenizer in `target_dir`; returns it."""
    import torch
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"family {family!r} is none of {FAMILIES}")
    target_dir = Path(target_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = family_tokenizer(family)
    torch.manual_seed(seed)
    model = getattr(transformers, LM_CLASSES[family])(model_config(family, tokenizer)).eval()
    model.save_pretrained(target_dir)
    tokenizer.save_pretrained(target_dir)
    return target_dir


def model_attention(path: Path, source: str, target: str):
    """({group: [L, H, Q, K] numpy}, source tokens, decoder tokens) of (source, target) teacher-forced, read with
    transformers alone (eager attention; the decoder input from its own `prepare_decoder_input_ids_from_labels`),
    not through reportgen: the reference the views and the atlases are checked against."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSeq2SeqLM.from_pretrained(path, attn_implementation="eager").eval()
    ids = torch.tensor([tokenizer(source)["input_ids"]])
    labels = torch.tensor([tokenizer(text_target=target)["input_ids"]])
    decoder_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)
    with torch.no_grad():
        out = model(input_ids=ids, decoder_input_ids=decoder_ids, output_attentions=True, use_cache=False)
    stacks = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    tokens = tokenizer.convert_ids_to_tokens
    return ({name: torch.stack(stack)[:, 0].numpy() for name, stack in stacks.items()},
            tokens(ids[0].tolist()), tokens(decoder_ids[0].tolist()))


def write_pairs(path: Path, pairs=PAIRS) -> Path:
    """The pairs as a JSONL file with `source` and `target` fields (task seq2seq's default columns)."""
    path.write_text("".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in pairs), encoding="utf-8")
    return path


# The docs' encoder-decoder table (docs/pages/reference/architectures.md): check -> (header, what a "yes" means,
# the test file behind it). Every family in FAMILIES has every check (each test is parametrized over FAMILIES).
CHECKS = {
    "views": ("views", "the quick view's Encoder, Decoder and Cross groups hold the model's own attention within the "
                       "8-bit step, with contributions", "tests/quickview/test_encoder_decoder_views.py"),
    "masking": ("masking exact", "masking a head of any group equals zeroing its columns of the output projection",
                "tests/model/test_encoder_decoders.py"),
    "seq2seq": ("seq2seq task", "the target-token loss equals transformers' own `labels=` loss, masked heads too",
                "tests/model/test_encoder_decoders.py"),
    "pages": ("build pages", "every group of each built example page is the model's own attention",
              "tests/test_encoder_decoder_build.py"),
    "atlases": ("encoder and decoder atlases", "the encoder's statistics and the decoder self-attention's equal "
                                               "the definitions on the model's own attention",
                "tests/test_encoder_decoder_build.py"),
    "ablation": ("ablation in groups", "the build's seq2seq ablation masks the three groups and names each head "
                                       "by its group", "tests/test_encoder_decoder_build.py"),
}
DESCRIBED = {"bart": "`BartConfig`: learned positions", "t5": "`T5Config`: relative position buckets, heads 6 wide",
             "marian": "`MarianConfig`: sinusoidal positions"}
NAMES = {"bart": "BART", "t5": "T5", "marian": "Marian"}


def render_encoder_decoder_table() -> str:
    """The docs' encoder-decoder support table (docs/pages/reference/architectures.md), from FAMILIES and CHECKS."""
    from tests.helpers import family_table

    return family_table(["Encoder-decoders on tiny random checkpoints (2 encoder and 2 decoder layers x 4 heads, "
                         "hidden 32; a", "tokenizer trained here, `tests/seq2seq_checkpoints.py`). The columns, each "
                         "a test parametrized over", "these families:"], CHECKS, FAMILIES, NAMES, DESCRIBED)
