"""Tokens as readers see them: the markers tokenizers write for spaces and line breaks made visible.

Byte-level BPE (GPT-2, Qwen2, ...) writes every byte as a printable character, so a token that starts with
a space reads "Ġthe" and a line break "Ċ"; SentencePiece (Llama, T5, ...) writes a word's leading space as
"▁". A newcomer reads neither: the pages and views show one visible space mark, ␣, for both (and ↵ and ⇥
for byte-level line breaks and tabs), and the glossary's "Space mark" entry says what it means. The report
keeps the tokenizer's own tokens; only what is shown changes.
"""

from __future__ import annotations

from collections.abc import Iterable

SPACE_MARK = "\u2423"  # ␣ OPEN BOX, the typographers' sign for a space
# byte-level BPE's printable stand-ins (GPT-2's bytes_to_unicode: space 0x20 -> U+0120, \n -> U+010A,
# \t -> U+0109) and SentencePiece's word-start mark U+2581
_MARKS = str.maketrans({"\u0120": SPACE_MARK, "\u2581": SPACE_MARK, "\u010a": "\u21b5", "\u0109": "\u21e5"})


def shown_token(token: str) -> str:
    """`token` as the pages show it: "Ġthe" and "▁the" as "␣the", a lone "Ġ" as "␣", "Ċ" as "↵"."""
    return str(token).translate(_MARKS)


def shown_tokens(tokens: Iterable[str]) -> list[str]:
    """Every token of a list as the pages show it (`shown_token`)."""
    return [shown_token(token) for token in tokens]
