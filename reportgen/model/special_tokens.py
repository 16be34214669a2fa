"""What a special token is: one definition for every statistic that reads the flag (issue 47).

A special token is one the tokenizer declares special ([CLS], [SEP], <s>, </s>, <pad>, [MASK], <|endoftext|>...),
wherever it stands: added by the tokenizer, or typed in the text. The unknown token (<unk>, [UNK]) is the exception:
it stands for a word of the text that the vocabulary lacks, so it is a content token, unless the tokenizer also
gives it another role (GPT-2's <|endoftext|> is its unknown, beginning and end token at once). The encoder's
patterns, the decoder's delimiter share and the cross-attention's share on the source's special tokens all read
this one flag: before, a T5 build flagged <unk> on the decoder's side only (by its name), which moved a decoder
head's delimiter share by up to 0.16 while the cross statistics counted it as content.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

ROLES = ("bos", "eos", "pad", "cls", "sep", "mask")  # the roles that make a token special even if it is also <unk>


def special_ids(tokenizer) -> frozenset[int]:
    """The ids a transformers tokenizer's text is flagged special at (see the module's docstring)."""
    ids = {int(i) for i in tokenizer.all_special_ids}
    unknown = getattr(tokenizer, "unk_token_id", None)
    roles = {getattr(tokenizer, f"{role}_token_id", None) for role in ROLES}
    if unknown is not None and unknown not in roles:
        ids.discard(int(unknown))
    return frozenset(ids)


def special_ids_of(tokenizer) -> frozenset[int]:
    """The same for a `tokenizers.Tokenizer` (the embedded model's fast path): its special added tokens, less
    its model's unknown token (a WordPiece or BPE `unk_token`; such a tokenizer names no other roles)."""
    ids = {int(i) for i, token in tokenizer.get_added_tokens_decoder().items() if token.special}
    unknown = getattr(tokenizer.model, "unk_token", None)
    unknown_id = tokenizer.token_to_id(unknown) if unknown else None
    if unknown_id is not None:
        ids.discard(int(unknown_id))
    return frozenset(ids)


def special_flags(ids: Iterable[int], specials: frozenset[int]) -> np.ndarray:
    """[T] bool: which of the token ids are special."""
    return np.isin(np.asarray(list(ids), dtype=np.int64), np.fromiter(specials, dtype=np.int64, count=len(specials)))
