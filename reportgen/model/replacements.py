"""What a masked head's context is replaced by under methods "mean" and "resample" (`HeadMasker`).

- "mean" (mean ablation, Wang et al. 2022, "Interpretability in the Wild: a Circuit for Indirect Object
  Identification in GPT-2 small"): the head's mean unmasked context at the same token position over the
  task's inputs, real tokens only (`MeanContexts`). A position no input reaches (a forward longer than every
  input) gets the head's mean over all real tokens. An encoder-decoder's groups each count positions in their
  own stream: the encoder's in the source, the decoder's self- and cross-attention in the target.
- "resample" (resample ablation, Chan et al. 2022, "Causal Scrubbing"): the head's unmasked context on
  another input of the task at the same position, the inputs paired by a fixed derangement drawn from a seed
  (`derangement`), so a run is reproducible and its results can be cached; where the donor is shorter than
  the input it replaces, the mean context at that position stands in (`DonorContexts`).

Both keep a masked head's output on the distribution the later layers were trained on, where "zero" feeds
them values the model never met. The means take one unmasked pass over the task's inputs (memory: layers x
positions x heads x head_dim); a resample replacement is one unmasked forward of the donors of a batch, which
the engine keeps per batch within its memory budget (`reportgen.ablation.engine`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from reportgen.errors import ConfigError
from reportgen.model.masking import HeadMasker

Forward = Callable[[object], object]  # runs the model on one batch (a task's `unit_outputs`)


@dataclass(frozen=True)
class MeanContexts:
    """Each flat layer's mean context per position of its stream, and over all its real tokens."""

    by_position: list[torch.Tensor]  # per depth [positions, heads * head_dim]
    overall: list[torch.Tensor]  # per depth [heads * head_dim]

    def at(self, depth: int, rows: int, tokens: int) -> torch.Tensor:  # noqa: ARG002 (the same for every row)
        """[1, tokens, heads * head_dim]: the same for every row; past the longest input, the overall mean."""
        table = self.by_position[depth]
        if tokens > table.shape[0]:
            extra = self.overall[depth].expand(tokens - table.shape[0], -1)
            table = torch.cat([table, extra])
        return table[:tokens].unsqueeze(0)

    @property
    def nbytes(self) -> int:
        return sum(table.numel() * table.element_size() for table in [*self.by_position, *self.overall])


def mean_contexts(masker: HeadMasker, batches: Iterable[object], forward: Forward) -> MeanContexts:
    """The mean unmasked context of every head at every position over `batches` (all the task's inputs),
    from one pass of `forward` inside `masker` (entered); sums in float64, the means in float32."""
    layers = masker.sites.n_layers
    sums: list[torch.Tensor | None] = [None] * layers
    counts: list[torch.Tensor | None] = [None] * layers

    def capture(depth: int, context: torch.Tensor, real: torch.Tensor) -> None:
        weights = real.to(torch.float64)
        total = torch.einsum("rt,rtw->tw", weights, context.to(torch.float64))
        count = weights.sum(0)
        sums[depth], counts[depth] = _grown_add(sums[depth], total), _grown_add(counts[depth], count)

    with _plain_grad(), masker.capturing(capture):
        for batch in batches:
            forward(batch)
    if any(total is None for total in sums):
        raise RuntimeError("the mean pass saw no forward of some layer")
    by_position, overall = [], []
    for total, count in zip(sums, counts, strict=True):
        by_position.append((total / count.clamp_min(1)[:, None]).float())
        overall.append((total.sum(0) / count.sum().clamp_min(1)).float())
    return MeanContexts(by_position, overall)


def _grown_add(total: torch.Tensor | None, part: torch.Tensor) -> torch.Tensor:
    """`total + part` along the first (position) axis, the shorter padded with zeros."""
    if total is None:
        return part.clone()
    if part.shape[0] > total.shape[0]:
        total, part = part.clone(), total
    total[:part.shape[0]] += part
    return total


def derangement(count: int, seed: int) -> np.ndarray:
    """A permutation of range(count) with no fixed point, uniform over all such (rejection: about e draws),
    the same for the same seed: input i's donor is input result[i]."""
    if count < 2:
        raise ConfigError("ablation.method: resample replaces a head's output by its output on another input, "
                          f"but the task has {count} distinct input; use method mean or more data")
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(count)
        if not np.any(order == np.arange(count)):
            return order


@dataclass(frozen=True)
class DonorContexts:
    """The resample replacement of one batch: each row's donor's unmasked context per flat layer, and which
    of its positions are real; past a donor's end the mean context (`MeanContexts`) stands in."""

    contexts: list[torch.Tensor]  # per depth [rows, donor tokens, heads * head_dim]
    real: list[torch.Tensor]  # per depth [rows, donor tokens] bool
    means: MeanContexts

    @property
    def rows(self) -> int:
        return self.contexts[0].shape[0]

    def at(self, depth: int, rows: int, tokens: int) -> torch.Tensor:
        """[rows, tokens, heads * head_dim]; `rows` is this batch's rows times the masks stacked on it (the
        batch repeated, block i for mask i), so each row reads its own input's donor."""
        if rows % self.rows:
            raise ValueError(f"a resample replacement of {self.rows} rows for a forward of {rows}")
        context, real = self.contexts[depth], self.real[depth]
        mean = self.means.at(depth, 1, tokens).to(context.dtype)
        shared = min(tokens, context.shape[1])
        take = torch.zeros(self.rows, tokens, 1, dtype=torch.bool, device=context.device)
        take[:, :shared, 0] = real[:, :shared]
        donor = torch.zeros(self.rows, tokens, context.shape[-1], dtype=context.dtype, device=context.device)
        donor[:, :shared] = context[:, :shared]
        out = torch.where(take, donor, mean)
        return out.repeat(rows // self.rows, 1, 1) if rows > self.rows else out

    @property
    def nbytes(self) -> int:
        return sum(part.numel() * part.element_size() for part in [*self.contexts, *self.real])


def donor_contexts(masker: HeadMasker, donor_batch: object, forward: Forward, means: MeanContexts) -> DonorContexts:
    """The unmasked contexts of `donor_batch` (row i: the donor of the batch's row i) from one `forward`."""
    layers = masker.sites.n_layers
    contexts: list[torch.Tensor | None] = [None] * layers
    real: list[torch.Tensor | None] = [None] * layers

    def capture(depth: int, context: torch.Tensor, tokens: torch.Tensor) -> None:
        contexts[depth], real[depth] = context.detach().float(), tokens

    with _plain_grad(), masker.capturing(capture):
        forward(donor_batch)
    if any(context is None for context in contexts):
        raise RuntimeError("the donors' pass saw no forward of some layer")
    return DonorContexts(contexts, real, means)  # type: ignore[arg-type]


@contextmanager
def _plain_grad() -> Iterator[None]:
    """No autograd and no inference mode: the replacements are plain tensors, so an importance pass (which
    differentiates the gates) may mix them in even when they were computed inside `torch.inference_mode`;
    and float32, whatever autocast the caller runs in (a replacement is a statistic of the model)."""
    with ExitStack() as stack:
        stack.enter_context(torch.inference_mode(False))
        stack.enter_context(torch.no_grad())
        for device in ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",):
            stack.enter_context(torch.autocast(device, enabled=False))
        yield
