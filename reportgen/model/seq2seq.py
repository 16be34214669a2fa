"""Running an encoder-decoder (BART, T5, Marian) on a (source, target) pair with teacher forcing, keeping
what the analyses need as plain numpy data.

Teacher forcing: the decoder reads the target as the model was trained to, shifted right behind the
model's `decoder_start_token_id` (BART's </s>, T5's and Marian's <pad>), and at each position predicts
the next target token: the labels are the target's token ids (its special tokens included, as the
family's tokenizer adds them with `text_target`), the decoder input is [start] + labels[:-1], so both have
T tokens. One forward gives the three groups of attention (encoder self-attention over the S source
tokens, causal decoder self-attention over the T decoder inputs, cross-attention of the decoder inputs over
the source) and, for contributions, the value norms of each group (Kobayashi et al. 2020;
`reportgen.model.value_norms`).
"""

from __future__ import annotations

from reportgen.config import ExampleSpec
from reportgen.errors import ModelError
from reportgen.model.run import clip, encode
from reportgen.model.special_tokens import special_flags, special_ids
from reportgen.runs import ExampleRun, Seq2SeqRun


def decoder_start(model) -> int:
    """The token the decoder starts from; an encoder-decoder config without one cannot be teacher-forced."""
    start = getattr(model.config, "decoder_start_token_id", None)
    if start is None:
        raise ModelError(f"model type '{model.config.model_type}': config.json has no decoder_start_token_id, "
                         "so reportgen cannot build the decoder's input from a target")
    return int(start)


def shift_right(labels: list[int], start: int) -> list[int]:
    """The decoder input for teacher forcing: the start token, then the labels but the last."""
    return [start, *labels[:-1]]


def encode_text(tokenizer, text: str, max_length: int, target: bool = False) -> tuple[list[int], bool]:
    """A text's token ids at `max_length` (as a target: `text_target`, which a family's tokenizer may
    encode with its target vocabulary), and whether it was cut. The text is first cut to what it can keep
    (`reportgen.model.run.clip`)."""
    clipped, cut = clip(text, max_length)
    key = "text_target" if target else "text"
    full = tokenizer(**{key: clipped}, truncation=False, verbose=False)["input_ids"]
    ids = tokenizer(**{key: clipped}, truncation=True, max_length=max_length)["input_ids"]
    return list(ids), cut or len(full) > max_length


def run_pair(model, tokenizer, source: str, target: str, max_length: int = 128) -> Seq2SeqRun:
    """One teacher-forced forward of (source, target), each truncated to `max_length` tokens, with the
    attention of every group (the model must use eager attention) and the value norms."""
    import torch

    from reportgen.model.value_norms import value_norms

    source_ids, source_cut = encode_text(tokenizer, source, max_length)
    labels, target_cut = encode_text(tokenizer, target, max_length, target=True)
    decoder_ids = shift_right(labels, decoder_start(model))
    device = next(model.parameters()).device
    inputs = {"input_ids": torch.tensor([source_ids], device=device),
              "decoder_input_ids": torch.tensor([decoder_ids], device=device)}
    with value_norms(model) as norms, torch.inference_mode():
        out = model(**inputs, output_attentions=True, use_cache=False)
    stacks = (out.encoder_attentions, out.decoder_attentions, out.cross_attentions)
    if any(not stack or stack[0] is None for stack in stacks):
        raise RuntimeError("the model returned no attention weights; "
                           "it must be loaded with attn_implementation='eager'")
    encoder, decoder, cross = (torch.stack(stack)[:, 0].float().cpu().numpy() for stack in stacks)
    tokens = tokenizer.convert_ids_to_tokens
    return Seq2SeqRun(source, target, tokens(source_ids), tokens(decoder_ids), tokens(labels), encoder, decoder,
                      cross, norms.groups or None, source_cut, target_cut)


def run_source_target(model, tokenizer, spec: ExampleSpec, max_length: int) -> ExampleRun:
    """A build's example on an encoder-decoder: the teacher-forced run of (spec.text, spec.target), as an
    `ExampleRun` of its encoder's side (the source's tokens, words and special tokens as the tokenizer gives
    them, the encoder's self-attention and value norms), with the whole run in `seq2seq`."""
    pair_run = run_pair(model, tokenizer, spec.text, spec.target, max_length)
    _, tokens, words, segments, special, _ = encode(tokenizer, ExampleSpec(text=spec.text), max_length)
    if list(tokens) != list(pair_run.source_tokens):  # both read the same text at the same max_length
        raise RuntimeError("the source was tokenized two ways; report this as a bug")
    pair_run.target_special = special_flags(tokenizer.convert_tokens_to_ids(list(pair_run.target_tokens)),
                                            special_ids(tokenizer))
    return ExampleRun(spec, list(tokens), words, segments, special, pair_run.encoder_attention,
                      pair_run.source_truncated or pair_run.target_truncated,
                      value_norms=(pair_run.value_norms or {}).get("encoder"), seq2seq=pair_run)
