"""The induction recipe's vocabulary, tokenizer and training sequences (no files, no downloads).

The vocabulary is 237 lower-case English words and two punctuation marks, one token each, after four
specials ([BOS], [EOS], [PAD], [UNK]). A training sequence is [BOS] followed by chunks of three kinds,
drawn with the probabilities MIX, until it is full:

- text (35%): a short story from templates ("on monday tom went to the market . tom bought a green kite
  at the market . ..."), in which names, objects and phrases recur within the story;
- random (15%): a span of 4-24 tokens drawn uniformly from the vocabulary (specials excluded);
- copy (50%): a repeat of one of the random spans that occurred earlier in the same sequence.

A repeated random span can be predicted only in context: by finding the previous occurrence of the
current token and copying what followed it, which is what an induction head does; half of the chunks
are such repeats, so that the heads form within minutes on a CPU (Olsson et al. 2022 trained on natural
text for billions of tokens). The text is what makes a previous-token head pay for itself before any
induction head exists (the word before the current one helps to predict the next one), so it forms
early in layer 0 and the layer-1 head can compose with it; it also keeps the model a language model of
something word-like, so that reportgen's examples read as text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOS, EOS, PAD, UNK = "[BOS]", "[EOS]", "[PAD]", "[UNK]"
SPECIALS = [BOS, EOS, PAD, UNK]

NAMES = ("mary john anna tom lucy peter sara david emma paul alice mark nina oscar julia leo rosa max "
         "clara ben ivy sam kate adam lily noah grace owen ruth hugo").split()
ANIMALS = "cat dog bird horse fox rabbit mouse cow goat duck sheep frog".split()
OBJECTS = ("apple ball book box cake chair coat cup door hat key lamp letter map pen phone plate ring "
           "rope shoe spoon table ticket toy watch basket bottle bread candle clock flower glass kite "
           "knife mirror paper pencil picture radio scarf stone umbrella").split()
PLACES = ("market school garden kitchen station park library river bridge forest beach castle farm "
          "harbour hospital museum office village church shop").split()
ADJECTIVES = ("red blue green yellow old new small big heavy light warm cold bright dark soft hard "
              "clean dirty long short round broken quiet loud sweet strange").split()
VERBS_PAST = ("found lost bought sold took left saw painted washed opened closed carried dropped hid "
              "made broke kept wanted").split()
MOVES = "went ran walked drove hurried returned".split()
FEELINGS = "happy sad tired angry surprised hungry proud worried".split()
TIMES = "monday tuesday wednesday thursday friday saturday sunday morning evening night today".split()
NUMBERS = "one two three four five six seven eight nine ten".split()
FUNCTION = ("the a to at in on under near with and but then later when because so it was is were "
            "she he they her his their gave asked told said put of for from into after before "
            "again also very every day there what where who do not had has this that about by".split())
PUNCTUATION = [".", ","]

WORDS: list[str] = list(dict.fromkeys(NAMES + ANIMALS + OBJECTS + PLACES + ADJECTIVES + VERBS_PAST + MOVES
                                      + FEELINGS + TIMES + NUMBERS + FUNCTION + PUNCTUATION))
VOCABULARY: list[str] = SPECIALS + WORDS
TOKEN_ID = {token: index for index, token in enumerate(VOCABULARY)}
BOS_ID, EOS_ID, PAD_ID, UNK_ID = (TOKEN_ID[token] for token in SPECIALS)
FIRST_WORD_ID = len(SPECIALS)  # random tokens are drawn from FIRST_WORD_ID .. len(VOCABULARY) - 1

SPAN = (4, 24)  # shortest and longest random span or copy, in tokens
KINDS = ("text", "random", "copy")
MIX = (0.35, 0.15, 0.5)  # share of chunks of each kind (a copy needs a random span earlier to copy)


def make_tokenizer(context: int):
    """A fast word-level tokenizer (tokenizers), lower-casing, splitting words from punctuation, that puts
    [BOS] in front of every text as in training; wrapped for transformers' save_pretrained. `context`:
    the model's positions (the tokenizer's model_max_length)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(WordLevel(vocab=dict(TOKEN_ID), unk_token=UNK))
    core.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A $B:1",
                                                        special_tokens=[(BOS, BOS_ID)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, model_max_length=context)


# The word lists as arrays, which rng.choice draws from exactly as from the lists (the same draws, the same words).
_ARRAYS = {name: np.asarray(words) for name, words in (
    ("names", NAMES), ("objects", OBJECTS), ("places", PLACES), ("adjectives", ADJECTIVES), ("verbs", VERBS_PAST),
    ("moves", MOVES), ("times", TIMES), ("animals", ANIMALS), ("feelings", FEELINGS), ("numbers", NUMBERS))}


def story(rng: np.random.Generator) -> list[str]:
    """A few template sentences about two people, an object and a place, which come back in the story."""
    pick = _ARRAYS  # rng.choice turns a list into an array at every call: the arrays are made once
    first, second = rng.choice(pick["names"], size=2, replace=False)
    thing, place, other_place = rng.choice(pick["objects"]), *rng.choice(pick["places"], size=2, replace=False)
    colour, verb, move = rng.choice(pick["adjectives"]), rng.choice(pick["verbs"]), rng.choice(pick["moves"])
    time, animal, feeling = rng.choice(pick["times"]), rng.choice(pick["animals"]), rng.choice(pick["feelings"])
    count = rng.choice(pick["numbers"])
    sentences = [
        f"on {time} {first} {move} to the {place} .",
        f"{first} {verb} a {colour} {thing} at the {place} .",
        f"then {first} gave the {colour} {thing} to {second} .",
        f"{second} was {feeling} and put the {colour} {thing} on the table .",
        f"later {second} {move} to the {other_place} with the {colour} {thing} .",
        f"a {animal} was near the {other_place} , so {second} asked {first} what to do .",
        f"{first} said the {animal} was {feeling} because it {verb} {count} {thing}s .",
        f"every day {first} and {second} {move} to the {place} and {verb} a {thing} .",
        f"when {second} saw the {animal} , {second} told {first} about the {colour} {thing} .",
    ]
    chosen = sorted(rng.choice(len(sentences), size=int(rng.integers(2, 5)), replace=False))
    words = " ".join(sentences[index] for index in chosen).split()
    return [word[:-1] if word not in TOKEN_ID and word.endswith("s") else word for word in words]  # no plurals


def training_sequence(rng: np.random.Generator, length: int, mix: Sequence[float] = MIX) -> np.ndarray:
    """One training sequence of `length` token ids: [BOS] and chunks of text, random spans and copies of
    earlier random spans, drawn with the probabilities `mix` (text, random, copy)."""
    ids: list[int] = [BOS_ID]
    spans: list[tuple[int, int]] = []  # (start, end) of the random spans so far
    while len(ids) < length:
        kind = KINDS[rng.choice(len(KINDS), p=mix)]
        if kind == "copy" and spans:
            start, end = spans[int(rng.integers(len(spans)))]
            ids.extend(ids[start:end])
        elif kind == "text":
            ids.extend(TOKEN_ID[word] for word in story(rng))
        else:  # a random span (also a copy with no random span before it to copy)
            span = int(rng.integers(SPAN[0], SPAN[1] + 1))
            spans.append((len(ids), len(ids) + span))
            ids.extend(rng.integers(FIRST_WORD_ID, len(VOCABULARY), size=span).tolist())
    return np.asarray(ids[:length], dtype=np.int64)


def training_batch(rng: np.random.Generator, batch: int, length: int, mix: Sequence[float] = MIX) -> np.ndarray:
    return np.stack([training_sequence(rng, length, mix) for _ in range(batch)])


def encode_words(words: Sequence[str]) -> list[int]:
    """[BOS] + the ids of `words` (each must be in the vocabulary), what the tokenizer gives for the text."""
    return [BOS_ID] + [TOKEN_ID[word] for word in words]
