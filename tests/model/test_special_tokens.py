"""One definition of a special token (reportgen.model.special_tokens, issue 47): the tokenizer's special tokens,
added or typed, except the unknown token, which stands for a word of the text, unless it has another role too.
The encoder's side, the decoder's side and the fast embedded path flag the same tokens."""

from __future__ import annotations

import pytest

from reportgen.config import ExampleSpec
from reportgen.model.run import encode
from reportgen.model.special_tokens import special_flags, special_ids
from tests.seq2seq_checkpoints import family_tokenizer, make_encoder_decoder

UNKNOWN = "Ж☃"  # characters none of the tests' tokenizers learnt: <unk> in a unigram vocabulary


@pytest.mark.parametrize("family", ["t5", "marian"])
def test_unknown_is_content_and_end_of_text_is_special_on_the_source(family):
    tokenizer = family_tokenizer(family)
    _, tokens, words, segments, special, _ = encode(tokenizer, ExampleSpec(text=f"the cat {UNKNOWN} sat"), 32)
    assert "<unk>" in tokens and tokens[-1] == "</s>"
    assert special.tolist() == [token in ("</s>", "<pad>") for token in tokens]
    unknown = tokens.index("<unk>")
    assert words[unknown] >= 0 and segments[unknown] == 0  # a word of the text, in its segment


def test_a_typed_special_token_is_special_and_a_shared_unknown_keeps_its_other_roles(tmp_path):
    import transformers

    from tests.decoder_checkpoints import make_decoder

    tokenizer = transformers.AutoTokenizer.from_pretrained(make_decoder("gpt2", tmp_path / "gpt2"))
    assert tokenizer.unk_token == tokenizer.eos_token == "<|endoftext|>"  # as GPT-2's own tokenizer
    _, tokens, _, _, special, _ = encode(tokenizer, ExampleSpec(text="the cat<|endoftext|>the dog"), 32)
    assert special.tolist() == [token == "<|endoftext|>" for token in tokens] and special.sum() == 1
    t5 = family_tokenizer("t5")
    assert t5.unk_token_id not in special_ids(t5) and {t5.eos_token_id, t5.pad_token_id} <= special_ids(t5)


@pytest.mark.slow  # a tiny T5 (~2 s)
def test_the_decoder_side_flags_the_tokens_the_source_side_flags(tmp_path):
    from reportgen.model import loading
    from reportgen.model.seq2seq import run_source_target

    with loading.file_policy(encoder_decoders=True):
        net, tokenizer = loading.load(make_encoder_decoder("t5", tmp_path / "t5"), "cpu")
    text = f"the cat {UNKNOWN} sat"
    run = run_source_target(net, tokenizer, ExampleSpec(text=text, target=text), 32)
    pair = run.seq2seq
    assert "<unk>" in pair.target_tokens and "<unk>" in run.tokens
    expected = special_flags(tokenizer.convert_tokens_to_ids(list(pair.target_tokens)), special_ids(tokenizer))
    assert pair.target_special.tolist() == expected.tolist()
    # the decoder reads <pad> (its start token), the target's words and </s>: only the first and last are special
    assert pair.target_special.tolist() == [token in ("<pad>", "</s>") for token in pair.target_tokens]
    source = dict(zip(run.tokens, run.special.tolist(), strict=False))
    target = dict(zip(pair.target_tokens, pair.target_special.tolist(), strict=False))
    assert all(source[token] == target[token] for token in set(source) & set(target))
    assert source["<unk>"] is False and target["<unk>"] is False
