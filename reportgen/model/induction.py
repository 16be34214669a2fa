"""The induction test's model run (Olsson, Elhage, Nanda et al. 2022, "In-context Learning and Induction
Heads"): a decoder's attention on [BOS] + r_1..r_n + r_1..r_n, with r drawn uniformly from the vocabulary
without its special tokens, n about 50 and a batch of a few sequences (/work/shared/REFERENCE.md,
"Decoder heads"). Random tokens leave a head nothing to go on but the repeat, so a head that puts its
weight on the token that followed the current token's earlier occurrence does so by induction, not by
what the text means; `reportgen.patterns.decoder.induction` scores the attention this returns; the input itself is
`reportgen.runs.induction_input`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.runs import MIN_INDUCTION_N, induction_input, induction_tokens

INDUCTION_N = 50  # random tokens per copy (TransformerLens and Olsson et al. use sequences of this order)
INDUCTION_BATCH = 4  # sequences; each query of every second copy counts once


@dataclass
class InductionRun:
    """The input and the attention the model gave it."""

    ids: np.ndarray  # [B, 2n + 1] token ids: BOS, then r twice
    attention: np.ndarray  # [B, L, H, 2n + 1, 2n + 1] float32
    n: int  # random tokens per copy
    seed: int


def induction_length(max_tokens: int | None, n: int = INDUCTION_N) -> int:
    """The n that fits the model's positions: 2n + 1 tokens at most `max_tokens`."""
    if max_tokens is not None:
        n = min(n, (max_tokens - 1) // 2)
    if n < MIN_INDUCTION_N:
        raise ValueError(f"the model takes {max_tokens} tokens, too few for the induction test (2 x "
                         f"{MIN_INDUCTION_N} + 1 at least)")
    return n


def begin_token(tokenizer) -> int:
    """The token a sequence starts with: the tokenizer's BOS, else its end-of-text token (GPT-2 uses
    <|endoftext|> for both)."""
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return int(token_id)
    raise ValueError("the tokenizer has neither a BOS nor an end-of-text token to start the induction input")


def run_induction(model, tokenizer, n: int = INDUCTION_N, batch: int = INDUCTION_BATCH,
                  seed: int = 0) -> InductionRun:
    """The model's attention on `batch` sequences [BOS] + r + r of 2n + 1 tokens, one forward pass each
    (no padding, so no mask but the model's own causal one)."""
    import torch

    vocabulary = min(len(tokenizer), int(model.config.vocab_size))
    tokens = induction_tokens(vocabulary, n, batch, seed, exclude=tokenizer.all_special_ids)
    ids = induction_input(tokens, begin_token(tokenizer))
    device = next(model.parameters()).device
    attention = []
    with torch.inference_mode():
        for row in ids:
            out = model(input_ids=torch.as_tensor(row[None], device=device), output_attentions=True)
            attention.append(torch.stack(out.attentions)[:, 0].float().cpu().numpy())
    return InductionRun(ids, np.stack(attention), n, seed)
