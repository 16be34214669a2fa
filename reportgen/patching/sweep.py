"""Exact patching of every head, one at a time, in both directions, over a list of prompt pairs.

Per pair: one forward of each prompt records every head's context (heads.record_contexts); then the target
prompt runs once per head, batched `rows` heads a forward, with that head's context from the source prompt
(heads.patched_logits). The metric of each run is logit(answer) - logit(wrong) at the pair's position.
Memory is one pair's contexts (layers x tokens x hidden) and one batch of logits at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from reportgen.model.head_sites import locate
from reportgen.patching.effects import Direction
from reportgen.patching.heads import Patch, patched_logits, record_contexts
from reportgen.patching.pairs import PromptPair

ROWS = 32  # patched variants a forward


@dataclass
class Sweep:
    """The metric of every run: clean and corrupted [pairs], and each direction's patched runs [pairs, L, H]."""

    clean: np.ndarray
    corrupted: np.ndarray
    patched: dict[str, np.ndarray]


def logit_difference(logits: torch.Tensor, pair: PromptPair) -> torch.Tensor:
    """logit(answer) - logit(wrong) at the pair's position, per row of `logits` [rows, tokens, vocabulary]."""
    at = logits[:, pair.position]
    at = at.float() if at.dtype in (torch.float16, torch.bfloat16) else at  # half logits differ too coarsely
    return at[:, pair.answer] - at[:, pair.wrong]


def _inputs(ids: tuple[int, ...], device: torch.device) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.tensor([ids], device=device)}


def sweep(model: nn.Module, pairs: list[PromptPair], directions: tuple[Direction, ...] = ("denoising", "noising"),
          rows: int = ROWS) -> Sweep:
    """Every head patched alone, at every position, in each direction, for every pair."""
    sites = locate(model)
    device = next(model.parameters()).device
    every = [Patch(((depth, head),)) for depth in range(sites.n_layers) for head in range(sites.heads)]
    clean, corrupted = np.zeros(len(pairs)), np.zeros(len(pairs))
    patched = {direction: np.zeros((len(pairs), sites.n_layers, sites.heads)) for direction in directions}
    for index, pair in enumerate(pairs):
        runs = {name: _inputs(getattr(pair, name), device) for name in ("clean", "corrupted")}
        recorded = {name: record_contexts(model, runs[name], sites) for name in runs}
        clean[index] = float(logit_difference(recorded["clean"][0], pair)[0])
        corrupted[index] = float(logit_difference(recorded["corrupted"][0], pair)[0])
        for direction in directions:
            source, target = ("clean", "corrupted") if direction == "denoising" else ("corrupted", "clean")
            values = []
            for start in range(0, len(every), rows):
                logits = patched_logits(model, runs[target], recorded[source][1], every[start:start + rows], sites)
                values.append(logit_difference(logits, pair).cpu().numpy())
            patched[direction][index] = np.concatenate(values).reshape(sites.n_layers, sites.heads)
    return Sweep(clean, corrupted, patched)
