"""Prompt pairs for patching: a clean prompt, a corrupted one of the same length, and the answer the behaviour
gives against a wrong one, all as token ids, with the position the metric reads.

The metric (Wang et al. 2022) is logit(answer) - logit(wrong) at that position: the last token for a decoder, the
[MASK] token for a masked-LM encoder. From a JSONL file each row is {clean, corrupted, answer, wrong}; a row
whose prompts tokenize to different lengths, whose answer or wrong answer is not one token, or whose masked-LM
prompt has no single [MASK] is refused in one line that names the file, the row and the field.

Built in, for any decoder with no data file: induction (Olsson et al. 2022). The clean prompt is [BOS] + r + r
without its last token, for n random tokens r, so an induction head predicts r's last token; the corrupted one
resamples the first copy (r'), so the same head would predict r''s last token instead: answer r[-1], wrong r'[-1].
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reportgen.datafiles import check_regular_file
from reportgen.errors import DataError
from reportgen.runs import induction_tokens

FIELDS = ("clean", "corrupted", "answer", "wrong")


@dataclass(frozen=True)
class PromptPair:
    """One pair as the model reads it."""

    clean: tuple[int, ...]
    corrupted: tuple[int, ...]
    answer: int
    wrong: int
    position: int  # where the metric is read: the last token, or the [MASK] (an encoder-decoder's: in `decoder`)
    decoder: tuple[int, ...] | None = None  # what an encoder-decoder's decoder reads in both runs: start + target

    @property
    def at_last(self) -> bool:
        """Whether the metric is read at the last token of its stream (a decoder's prompt, an encoder-decoder's
        decoder), so that a forward may compute that token's logits alone (heads.logits_of)."""
        return self.position == len(self.decoder if self.decoder is not None else self.clean) - 1

    def inputs(self, name: str, device) -> dict:
        """The model's inputs for the `clean` or `corrupted` prompt, batch 1."""
        import torch

        inputs = {"input_ids": torch.tensor([getattr(self, name)], device=device)}
        if self.decoder is not None:
            inputs["decoder_input_ids"] = torch.tensor([self.decoder], device=device)
        return inputs


def read_pairs(path: Path, tokenizer, masked: bool = False, limit: int | None = None,
               decoder_start: int | None = None) -> list[PromptPair]:
    """The pairs of a JSONL file, tokenized as the model reads them (`masked`: an encoder's masked-LM pairs;
    `decoder_start`: an encoder-decoder's, whose decoder reads its start token and the row's optional `target`, the
    same in both runs, and the metric is read at its last token)."""
    check_regular_file(path, "prompt-pairs file")
    try:
        return _read(path, tokenizer, masked, limit, decoder_start)
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text (byte {err.start}); save the prompt pairs as UTF-8") from None


def _read(path: Path, tokenizer, masked: bool, limit: int | None, decoder_start: int | None) -> list[PromptPair]:
    pairs = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if limit is not None and len(pairs) >= limit:
                break
            row, where = _row(path, number, line), f"{path}: row {number}"
            pair = _pair(row, tokenizer, masked, where)
            if decoder_start is not None:
                pair = _with_decoder(pair, row, tokenizer, decoder_start, where)
            pairs.append(pair)
    if not pairs:
        raise DataError(f"{path}: no prompt pairs; each line is {{\"clean\", \"corrupted\", \"answer\", \"wrong\"}}")
    return pairs


def _row(path: Path, number: int, line: str) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: row {number} is not JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise DataError(f"{path}: row {number} is not an object with {', '.join(FIELDS)}")
    for field in FIELDS:
        if not isinstance(row.get(field), str) or not row[field].strip():
            raise DataError(f"{path}: row {number}: '{field}' is missing or not text")
    return row


def _pair(row: dict, tokenizer, masked: bool, where: str) -> PromptPair:
    clean, corrupted = (tuple(tokenizer(row[name])["input_ids"]) for name in ("clean", "corrupted"))
    if len(clean) != len(corrupted):
        raise DataError(f"{where}: 'clean' is {len(clean)} tokens and 'corrupted' {len(corrupted)}; patching "
                          "needs prompts of the same length, token for token")
    answer, wrong = (_one_token(tokenizer, row[name], where, name) for name in ("answer", "wrong"))
    if answer == wrong:
        raise DataError(f"{where}: 'answer' and 'wrong' are the same token")
    position = len(clean) - 1
    if masked:
        mask = tokenizer.mask_token_id
        at = [i for i, token in enumerate(clean) if token == mask]
        if len(at) != 1 or [i for i, token in enumerate(corrupted) if token == mask] != at:
            raise DataError(f"{where}: a masked-LM pair needs one {tokenizer.mask_token} in 'clean' and at the "
                              "same place in 'corrupted'")
        position = at[0]
    return PromptPair(clean, corrupted, answer, wrong, position)


def _with_decoder(pair: PromptPair, row: dict, tokenizer, start: int, where: str) -> PromptPair:
    target = row.get("target", "")
    if not isinstance(target, str):
        raise DataError(f"{where}: 'target' is not text")
    decoder = (start, *tokenizer(target, add_special_tokens=False)["input_ids"]) if target.strip() else (start,)
    return PromptPair(pair.clean, pair.corrupted, pair.answer, pair.wrong, len(decoder) - 1, tuple(decoder))


def _one_token(tokenizer, text: str, where: str, field: str) -> int:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise DataError(f"{where}: '{field}' {text!r} is {len(ids)} tokens; it must be one token "
                          "(a leading space is part of a word's token in byte-level vocabularies)")
    return int(ids[0])


def induction_pairs(vocab_size: int, bos: int, count: int, n: int, seed: int,
                    exclude: tuple[int, ...] = ()) -> list[PromptPair]:
    """`count` built-in induction pairs of n random tokens a copy (see the module's docstring)."""
    first = induction_tokens(vocab_size, n, count, seed, exclude)
    other = induction_tokens(vocab_size, n, count, seed + 1, exclude)
    pairs = []
    for r, resampled in zip(first, other, strict=True):
        resampled = np.where(resampled == r, np.roll(resampled, 1), resampled)  # a token that differs, where it can
        second = [int(t) for t in r[:-1]]
        pairs.append(PromptPair((bos, *map(int, r), *second), (bos, *map(int, resampled), *second),
                                int(r[-1]), int(resampled[-1]), 2 * n - 1))
    return [pair for pair in pairs if pair.answer != pair.wrong]
