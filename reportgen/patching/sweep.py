"""Exact patching of every head, one at a time, in both directions, over a list of prompt pairs.

Per pair: one forward of each prompt records every head's context (heads.record_contexts); then the target
prompt runs once per head, batched `rows` heads a forward (fewer for a long prompt: heads.rows_within), with that
head's context from the source prompt (heads.patched_logits). The metric of each run is logit(answer) -
logit(wrong) at the pair's position. Memory is one pair's contexts (layers x tokens x hidden) and one batch's
attention and logits at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from reportgen.model.head_sites import locate
from reportgen.patching.effects import Direction
from reportgen.patching.heads import Patch, patched_logits, record_contexts, rows_within
from reportgen.patching.pairs import PromptPair

ROWS = 32  # patched variants a forward
MAX_POSITIONS = 64  # tokens a prompt may have for patching each head at each position (issue 49)


def positions_possible(pairs: list[PromptPair]) -> bool:
    """Whether each head can be patched at each position: prompts of one length, at most MAX_POSITIONS tokens, read
    by one stack (an encoder-decoder's groups have two lengths, the source's and the decoder's)."""
    tokens = len(pairs[0].clean)
    return tokens <= MAX_POSITIONS and all(len(pair.clean) == tokens and pair.decoder is None for pair in pairs)


@dataclass
class Sweep:
    """The metric of every run: clean and corrupted [pairs], and each direction's patched runs [pairs, L, H]."""

    clean: np.ndarray
    corrupted: np.ndarray
    patched: dict[str, np.ndarray]

    @staticmethod
    def joined(parts: list[Sweep]) -> Sweep:
        """Sweeps of consecutive chunks of pairs as one, in their order."""
        return Sweep(np.concatenate([p.clean for p in parts]), np.concatenate([p.corrupted for p in parts]),
                     {d: np.concatenate([p.patched[d] for p in parts]) for d in parts[0].patched})


def logit_difference(logits: torch.Tensor, pair: PromptPair) -> torch.Tensor:
    """logit(answer) - logit(wrong) at the pair's position, per row of `logits` [rows, tokens, vocabulary]; logits of
    one token (heads.logits_of with `last`) are the last token's, where an `at_last` pair reads its metric."""
    at = logits[:, -1 if logits.shape[1] == 1 else pair.position]
    at = at.float() if at.dtype in (torch.float16, torch.bfloat16) else at  # half logits differ too coarsely
    return at[:, pair.answer] - at[:, pair.wrong]


def sweep(model: nn.Module, pairs: list[PromptPair], directions: tuple[Direction, ...] = ("denoising", "noising"),
          rows: int = ROWS, heads: list[tuple[int, int]] | None = None, positions: bool = False) -> Sweep:
    """Every head (or only `heads`, (flat layer, head)) patched alone in each direction, for every pair: at every
    position at once, or with `positions` at each position alone (the pairs' prompts of one length, at most
    MAX_POSITIONS tokens). `patched` holds [pairs, layers, heads] (or [..., tokens]), NaN for a head not run."""
    sites = locate(model)
    device = next(model.parameters()).device
    chosen = heads if heads is not None else [(d, h) for d in range(sites.n_layers) for h in range(sites.heads)]
    tokens = len(pairs[0].clean)
    if positions and not positions_possible(pairs):
        raise ValueError(f"patching each position needs prompts of one length, at most {MAX_POSITIONS} tokens")
    every = ([Patch((head,), (at,)) for head in chosen for at in range(tokens)] if positions
             else [Patch((head,)) for head in chosen])
    shape = (len(pairs), sites.n_layers, sites.heads, *((tokens,) if positions else ()))
    clean, corrupted = np.zeros(len(pairs)), np.zeros(len(pairs))
    patched = {direction: np.full(shape, np.nan) for direction in directions}
    layer_of, head_of = (np.array([head[i] for head in chosen]) for i in (0, 1))
    for index, pair in enumerate(pairs):
        runs = {name: pair.inputs(name, device) for name in ("clean", "corrupted")}
        recorded = {name: record_contexts(model, runs[name], sites, pair.at_last) for name in runs}
        clean[index] = float(logit_difference(recorded["clean"][0], pair)[0])
        corrupted[index] = float(logit_difference(recorded["corrupted"][0], pair)[0])
        for direction in directions:
            source, target = ("clean", "corrupted") if direction == "denoising" else ("corrupted", "clean")
            values, step = [], rows_within(sites, pair, int(model.config.vocab_size), rows)
            for start in range(0, len(every), step):
                logits = patched_logits(model, runs[target], recorded[source][1], every[start:start + step], sites,
                                        pair.at_last)
                values.append(logit_difference(logits, pair).cpu().numpy())
            found = np.concatenate(values).reshape(len(chosen), *((tokens,) if positions else ()))
            patched[direction][index][layer_of, head_of] = found
    return Sweep(clean, corrupted, patched)
