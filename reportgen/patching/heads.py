"""Recording each head's output and patching another run's in its place, exactly, in one batched forward.

A head's output here is its context vector: its slice of the input to the attention output projection
(`HeadSites.out_proj`), the same site reportgen.model.masking gates. Patching head h of layer l at positions P
replaces context[P, h] by the context the source run gave there, so everything downstream (the output
projection, the residual stream, later layers) sees the source run's head, as in Wang et al. 2022's path-free
activation patching ("patch the head's output"). One forward patches many variants: the batch repeats the target
prompt, and each row carries its own (layer, head, positions) to patch.

The source and target prompts have the same number of tokens (pairs.py refuses others), so positions match.
A model that runs one layer module at several depths (ALBERT) is told its depth by counting the projection's calls
since the layers' runner started, as reportgen.model.masking does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from reportgen.model.head_sites import HeadSites, locate
from reportgen.patching.pairs import PromptPair


@dataclass(frozen=True)
class Patch:
    """One variant of a forward: the heads to patch, each a (flat layer, head), at `positions` (None: every
    position)."""

    heads: tuple[tuple[int, int], ...]
    positions: tuple[int, ...] | None = None


# What one batch of patched or attributed rows may hold at once, in bytes: the attention of a long prompt grows with
# its tokens squared, and a fixed number of rows a batch held 10.5 GB at 1,024 tokens on GPT-2-small's 144 heads
# (8 pairs; benchmarks/patching_long.py). A row's attention cell (head, query, key) costs about three float32 copies:
# the scores, the weights, and what a backward keeps (1.45 GB a row of 1,024 tokens for attribution, measured).
BATCH_BYTES = 1 << 30
CELL_BYTES = 12


def rows_within(sites: HeadSites, pair: PromptPair, vocabulary: int, cap: int, backward: bool = False) -> int:
    """How many rows of `pair`'s length one batch takes within BATCH_BYTES, at least 1 and at most `cap`: a forward
    without gradients holds one layer's attention at a time, a forward for a backward every layer's; and the
    logits (only the last token's where the metric reads it, `PromptPair.at_last`)."""
    tokens = max(len(pair.clean), len(pair.decoder or ()))
    layers = sites.n_layers if backward else 1
    logits = 4 * vocabulary * (1 if pair.at_last else tokens) * (2 if backward else 1)
    per_row = CELL_BYTES * layers * sites.heads * tokens * tokens + logits
    return max(1, min(cap, BATCH_BYTES // per_row))


def _depth_counter(sites: HeadSites) -> tuple[Callable[[nn.Module], int], Callable[[], None]]:
    """(depth of a call of an output projection, reset at the start of a forward). One projection per layer: its
    depth is the module's. One module at several depths (ALBERT): the number of its calls since the layers' runner
    started, since the layers run in depth order."""
    if not sites.shared:
        depths = {id(module): depth for depth, module in enumerate(sites.out_proj)}
        return (lambda module: depths[id(module)]), (lambda: None)
    calls = [0]

    def depth(_module: nn.Module) -> int:
        calls[0] += 1
        return (calls[0] - 1) % sites.n_layers

    def reset() -> None:
        calls[0] = 0

    return depth, reset


@contextmanager
def hooked(sites: HeadSites, on_context) -> Iterator[None]:
    """`on_context(depth, context [rows, tokens, heads, head_dim])` at every output projection's input; its
    return value (same shape) or None (unchanged) is what the projection reads."""
    depth_of, reset = _depth_counter(sites)

    def hook(module, args):
        context = args[0]
        rows, tokens = context.shape[:2]
        changed = on_context(depth_of(module), context.view(rows, tokens, sites.heads, sites.head_dim))
        return None if changed is None else (changed.reshape(rows, tokens, -1), *args[1:])

    modules = list({id(module): module for module in sites.out_proj}.values())  # ALBERT's shared one once
    handles = [module.register_forward_pre_hook(hook) for module in modules]
    handles.append(sites.encoder.register_forward_pre_hook(lambda *_: reset()))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def logits_of(model: nn.Module, inputs: dict[str, torch.Tensor], last: bool = False) -> torch.Tensor:
    """The model's logits [rows, tokens, vocabulary]; with `last`, only the last token's ([rows, 1, vocabulary]) where
    the model can leave out the others (transformers' `logits_to_keep`, the causal LMs'): the output layer over a
    50,257-word vocabulary at every token is a third of a GPT-2-small forward that reads one token's logits."""
    if last and "logits_to_keep" in inspect.signature(model.forward).parameters:
        return model(**inputs, logits_to_keep=1).logits
    return model(**inputs).logits


def record_contexts(model: nn.Module, inputs: dict[str, torch.Tensor],
                    sites: HeadSites | None = None, last: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One forward of `inputs`: (its logits, `logits_of` with `last`, and each flat layer's contexts
    [rows, tokens, heads, head_dim])."""
    sites = sites or locate(model)
    recorded: dict[int, torch.Tensor] = {}

    def keep(depth: int, context: torch.Tensor) -> None:
        recorded[depth] = context.detach().clone()

    with hooked(sites, keep), torch.inference_mode():
        logits = logits_of(model, inputs, last)
    return logits, [recorded[depth] for depth in range(sites.n_layers)]


def patched_logits(model: nn.Module, inputs: dict[str, torch.Tensor], source: Sequence[torch.Tensor],
                   patches: Sequence[Patch], sites: HeadSites | None = None, last: bool = False) -> torch.Tensor:
    """The logits of `inputs` (one prompt, batch 1) run once per patch, each with its heads' contexts taken from
    `source` (record_contexts of the other prompt, batch 1): [patches, tokens, vocabulary]."""
    sites = sites or locate(model)
    rows = len(patches)
    wanted: dict[int, list[tuple[int, int, tuple[int, ...] | None]]] = {}  # depth -> (row, head, positions)
    for row, patch in enumerate(patches):
        for depth, head in patch.heads:
            wanted.setdefault(depth, []).append((row, head, patch.positions))

    def swap(depth: int, context: torch.Tensor) -> torch.Tensor | None:
        if depth not in wanted:
            return None
        # per layer: an encoder-decoder's decoder and cross layers have the decoder's tokens, not the source's
        replace = torch.zeros(context.shape[:3], dtype=torch.bool, device=context.device)
        for row, head, positions in wanted[depth]:
            replace[row, slice(None) if positions is None else list(positions), head] = True
        return torch.where(replace.unsqueeze(-1), source[depth].expand_as(context), context)

    batch = {name: value.expand(rows, *value.shape[1:]) for name, value in inputs.items()}
    with hooked(sites, swap), torch.inference_mode():
        return logits_of(model, batch, last)
