"""Tokens and words: which pieces make a word, how a character-level tokenization gets word
boundaries from a segmentation, and attention between words rather than pieces.

"Same word" (patterns' same_token / other_segment) compares the lower-cased word rebuilt
from its pieces; word-level attention follows Clark et al. 2019 (to a word = sum over its
pieces, from a word = mean over its pieces).
"""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from typing import Literal, Sequence

import numpy as np

from reportgen.errors import ConfigError, DataError
from reportgen.runs import ExampleRun

_CONTINUATION = "##"  # WordPiece marks pieces inside a word
_WORD_START = "\u0120\u2581"  # 'Ġ' (byte-level BPE) and '▁' (SentencePiece) mark a word's first piece
PUNCTUATION = (".", ",")  # Clark et al.: "punctuation" is only these two


def piece_text(token: str) -> str:
    """The characters a piece contributes to its word, without tokenizer markers."""
    if token.startswith(_CONTINUATION) and len(token) > len(_CONTINUATION):
        return token[len(_CONTINUATION):]
    return token.lstrip(_WORD_START) or token


def word_strings(tokens: Sequence[str], word_ids: np.ndarray) -> list[str]:
    """Per token, the lower-cased string of its word rebuilt from its pieces; '' for specials.

    This is what "same word" means in same_token / other_segment: 'Store' and 'store'
    match, and 'straw' + '##berries' is the word 'strawberries'.
    """
    parts: dict[int, list[str]] = {}
    for token, word in zip(tokens, word_ids.tolist(), strict=True):
        if word >= 0:
            parts.setdefault(word, []).append(piece_text(token))
    words = {w: "".join(p).lower() for w, p in parts.items()}
    return [words.get(w, "") for w in word_ids.tolist()]


def word_codes(strings: Sequence[str], valid: np.ndarray) -> np.ndarray:
    """Integer code per string (equal strings, equal codes); -1 where not valid."""
    _, inverse = np.unique(np.asarray(strings, dtype=object).astype(str), return_inverse=True)
    return np.where(valid, inverse.reshape(-1), -1)


def delimiter_keys(run: ExampleRun) -> tuple[np.ndarray, np.ndarray]:
    """(cls, sep) key selections: the special token at position 0 is [CLS] (or <s>); the others are [SEP] (or </s>)."""
    cls = np.zeros(run.n_tokens, dtype=bool)
    cls[0] = bool(run.special[0])
    return cls, run.special & ~cls


def punctuation_keys(run: ExampleRun) -> np.ndarray:
    """Keys that are '.' or ',' (Clark's punctuation), markers like 'Ġ' stripped."""
    text = np.array([piece_text(t) for t in run.tokens], dtype=object)
    return np.isin(text, PUNCTUATION) & ~run.special


# ---------------------------------------------------------------- character-level segmentation


def _normalise(text: str) -> str:
    """Lower case, accents and whitespace removed: how uncased (and Chinese) BERT tokenizers see text."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn" and not c.isspace())


def _import_jieba():
    try:
        import jieba  # optional: only for `segmentation: jieba`
    except ImportError:
        raise ConfigError("patterns.segmentation is 'jieba' but the jieba package is not installed; "
                          "run 'pip install jieba' or use 'spaces' with pre-segmented text") from None
    return jieba


def segment_words(text: str, mode: Literal["spaces", "jieba"]) -> list[str]:
    """The words of `text`: split at spaces (pre-segmented input) or by jieba."""
    if mode == "spaces":
        return text.split()
    if mode == "jieba":
        return [w for w in _import_jieba().lcut(text) if w.strip()]
    raise ValueError(f"unknown segmentation {mode!r}")


def _is_unknown(token: str) -> bool:
    return token in ("[UNK]", "<unk>", "<UNK>")


def char_word_ids(tokens: Sequence[str], words: Sequence[str], start: int = 0) -> np.ndarray:
    """Word index (start, start+1, ...) of each token of one segment, from a segmentation.

    The tokens (special tokens excluded) are matched character by character against the
    concatenated words, so each token takes the word of its first character; this gives
    word boundaries to character-level tokenizations (Chinese BERT splits every CJK
    character into its own "word"). An unknown token ([UNK]) takes the characters up to
    where the next known token matches (one each in a run of them). Raises DataError when a
    token cannot be aligned.
    """
    owner: list[int] = []
    for index, word in enumerate(words):
        owner.extend([start + index] * len(_normalise(word)))
    chars = "".join(_normalise(w) for w in words)
    texts = [_normalise(piece_text(t)) for t in tokens]
    out = np.full(len(tokens), -1, dtype=np.int64)
    cursor = 0
    for index, (token, text) in enumerate(zip(tokens, texts, strict=True)):
        if cursor >= len(chars):
            raise DataError(f"cannot align token {token!r} with the segmentation {' '.join(words)!r}: text used up")
        out[index] = owner[cursor]
        if text and chars.startswith(text, cursor):
            cursor += len(text)
        elif _is_unknown(token):
            cursor = _after_unknown(tokens[index + 1:], texts[index + 1:], chars, cursor)
        else:
            raise DataError(f"cannot align token {token!r} with the segmentation {' '.join(words)!r} "
                            f"at character {cursor}")
    return out


def _after_unknown(tokens: Sequence[str], texts: Sequence[str], chars: str, cursor: int) -> int:
    """Where the text goes on after an unknown token at `cursor`, given the tokens after it.

    An unknown token followed by another takes one character (a character-level tokenizer's
    [UNK] stands for one character); the last of a run takes the characters up to where the
    next known token matches, or the rest of the text."""
    if tokens and _is_unknown(tokens[0]):
        return cursor + 1
    following = next((text for token, text in zip(tokens, texts, strict=True) if text and not _is_unknown(token)), None)
    found = chars.find(following, cursor + 1) if following else -1
    return found if found > 0 else len(chars)


def resegment(run: ExampleRun, mode: Literal["none", "spaces", "jieba"]) -> ExampleRun:
    """The run with word ids from a segmentation of its text (and pair); 'none' keeps the tokenizer's.

    Word ids stay unique across the pair and -1 for special tokens, as in ExampleRun.
    """
    if mode == "none":
        return run
    word_ids = np.full(run.n_tokens, -1, dtype=np.int64)
    texts = [run.spec.text] + ([run.spec.pair] if run.spec.pair is not None else [])
    start = 0
    for segment, text in enumerate(texts):
        at = np.flatnonzero((run.segment_ids == segment) & ~run.special)
        words = segment_words(text, mode)
        word_ids[at] = char_word_ids([run.tokens[i] for i in at], words, start)
        start += len(words)
    return replace(run, word_ids=word_ids)


# ---------------------------------------------------------------- word-level attention


def token_units(word_ids: np.ndarray) -> np.ndarray:
    """Unit index per token for the word-level view: one unit per word, each special token its own unit.

    Units are numbered in order of their first token.
    """
    key = np.where(word_ids >= 0, word_ids, -1 - np.arange(len(word_ids)))  # specials: unique negative keys
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def word_level_attention(attention: np.ndarray, word_ids: np.ndarray) -> np.ndarray:
    """Attention between words, [..., U, U] from [..., T, T] (Clark et al. 2019, section 4.1 / app.).

    Attention TO a split word is the sum over its pieces; attention FROM a split word
    is the mean over its pieces, so rows still sum to 1. Special tokens are units alone.
    """
    units = token_units(word_ids)
    assign = np.zeros((units.max() + 1, len(units)))
    assign[units, np.arange(len(units))] = 1.0  # [U, T]
    from_mean = assign / assign.sum(1, keepdims=True)
    return from_mean @ attention.astype(np.float64) @ assign.T


def word_level_run(run: ExampleRun) -> ExampleRun:
    """The run converted to words: tokens are the words' pieces joined, attention as `word_level_attention`."""
    units = token_units(run.word_ids)
    first = np.unique(units, return_index=True)[1]
    pieces: dict[int, list[str]] = {}
    for token, unit in zip(run.tokens, units.tolist(), strict=True):
        pieces.setdefault(unit, []).append(token if not pieces.get(unit) else piece_text(token))
    tokens = ["".join(pieces[u]) for u in range(len(first))]
    special = run.special[first]
    word_ids = run.word_ids[first]  # each word keeps its id; specials stay -1
    attention = word_level_attention(run.attention, run.word_ids).astype(np.float32)
    return replace(run, tokens=tokens, word_ids=word_ids, segment_ids=run.segment_ids[first],
                   special=special, attention=attention, extras={**run.extras, "token_units": units})
