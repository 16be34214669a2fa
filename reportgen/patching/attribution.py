"""Attribution patching: every head's patching effect estimated at once (Nanda 2023; Kramár et al. 2024, AtP).

Patching head h replaces its context c_h by the source run's c'_h. To first order the metric m moves by

    m(patched) - m(target) ~ sum over positions and dimensions of (c'_h - c_h) * dm/dc_h,

with the gradient taken once, in the target run. So one forward and one backward of the target prompt, and one
forward of the source prompt (for c'), estimate every head at every position; the estimate is exact where the
metric is linear in the head's context, and tests/patching/test_attribution.py checks it against the finite
difference of a small step toward the source. Where a head's effect is far from linear (its attention saturates)
the estimate can miss it: the site shows its agreement with exact patching, and exact patching runs on the heads
the estimate ranks first.
"""

from __future__ import annotations

import torch
from torch import nn

from reportgen.model.head_sites import HeadSites, locate
from reportgen.patching.heads import hooked, logits_of, record_contexts, rows_within
from reportgen.patching.pairs import PromptPair
from reportgen.patching.sweep import logit_difference


def head_gradients(model: nn.Module, inputs: dict[str, torch.Tensor], pair: PromptPair,
                   sites: HeadSites | None = None) -> tuple[float, list[torch.Tensor], list[torch.Tensor]]:
    """One forward and backward of `inputs`: (its metric, the metric's gradient with respect to each flat layer's
    contexts, and those contexts; each [tokens, heads, head_dim])."""
    sites = sites or locate(model)
    kept: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def keep(depth: int, context: torch.Tensor) -> torch.Tensor:
        # the projection reads context + 0: the zero's gradient is dm/dc with every later layer recomputed from it,
        # as patching the head recomputes them (a detached context would cut the paths through later heads)
        zero = torch.zeros_like(context, requires_grad=True)
        kept[depth] = (zero, context.detach())
        return context + zero

    with hooked(sites, keep), torch.enable_grad():
        metric = logit_difference(logits_of(model, inputs, pair.at_last), pair)[0]
        grads = torch.autograd.grad(metric, [kept[depth][0] for depth in range(sites.n_layers)])
    return (float(metric.detach()), [grad[0].detach() for grad in grads],
            [kept[depth][1][0] for depth in range(sites.n_layers)])


def attribution(model: nn.Module, source: dict[str, torch.Tensor], target: dict[str, torch.Tensor],
                pair: PromptPair, sites: HeadSites | None = None, per_position: bool = False) -> torch.Tensor:
    """The estimated change of the metric when each head of `target` takes its context from `source`:
    [layers, heads], or [layers, heads, tokens] with `per_position`. Two forwards and one backward."""
    sites = sites or locate(model)
    _, contexts = record_contexts(model, source, sites, last=True)  # its logits are not read
    _, grads, own = head_gradients(model, target, pair, sites)
    per = [((contexts[d][0] - own[d]) * grads[d]).sum(-1).T for d in range(sites.n_layers)]  # [heads, tokens]
    if not per_position:  # an encoder-decoder's layers have the source's or the decoder's tokens: summed first
        return torch.stack([layer.sum(-1) for layer in per])
    return torch.stack(per)


def attribution_both(model: nn.Module, pairs: list[PromptPair], sites: HeadSites | None = None,
                     rows: int = 32) -> dict[str, torch.Tensor]:
    """`attribution` of every pair in both directions, [pairs, layers, heads] per direction, batched: the pairs whose
    prompts have one length go `rows` at a time (fewer for long prompts, heads.rows_within), and the rows of a batch
    do not meet in the model, so the gradient of the sum of their metrics is each row's own gradient. One forward and
    backward of the clean prompts and one of the corrupted ones give both directions: denoising reads the corrupted
    run's gradient, noising the clean run's."""
    sites = sites or locate(model)
    device = next(model.parameters()).device
    dtype = torch.float64 if next(model.parameters()).dtype == torch.float64 else torch.float32
    out = {name: torch.zeros(len(pairs), sites.n_layers, sites.heads, dtype=dtype) for name in ("denoising", "noising")}
    groups: dict[tuple, list[int]] = {}
    for index, pair in enumerate(pairs):
        groups.setdefault((len(pair.clean), pair.decoder), []).append(index)
    vocabulary = int(model.config.vocab_size)
    for members in groups.values():
        step = rows_within(sites, pairs[members[0]], vocabulary, rows, backward=True)  # 1 a batch at 1,024 tokens
        for start in range(0, len(members), step):
            chunk = members[start:start + step]
            runs = {name: _stacked([pairs[i] for i in chunk], name, device) for name in ("clean", "corrupted")}
            found = {name: _batch_gradients(model, runs[name], [pairs[i] for i in chunk], sites) for name in runs}
            for direction, (source, target) in (("denoising", ("clean", "corrupted")),
                                                ("noising", ("corrupted", "clean"))):
                grads, own = found[target]
                other = found[source][1]
                out[direction][chunk] = torch.stack([((other[d] - own[d]) * grads[d]).sum((1, 3)).cpu()
                                                     for d in range(sites.n_layers)], 1)
    return out


def _stacked(pairs: list[PromptPair], name: str, device) -> dict[str, torch.Tensor]:
    """The pairs' `name` prompts (all of one length) as one batch."""
    inputs = [pair.inputs(name, device) for pair in pairs]
    return {key: torch.cat([each[key] for each in inputs]) for key in inputs[0]}


def _batch_gradients(model: nn.Module, inputs: dict[str, torch.Tensor], pairs: list[PromptPair],
                     sites: HeadSites) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(the gradient of each row's own metric with respect to each flat layer's contexts, and those contexts), each
    [rows, tokens, heads, head_dim]: one forward and one backward of the batch."""
    kept: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def keep(depth: int, context: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros_like(context, requires_grad=True)  # as head_gradients: dm/dc through every later layer
        kept[depth] = (zero, context.detach())
        return context + zero

    with hooked(sites, keep), torch.enable_grad():
        logits = logits_of(model, inputs, all(pair.at_last for pair in pairs))
        metric = sum(logit_difference(logits[row:row + 1], pair)[0] for row, pair in enumerate(pairs))
        grads = torch.autograd.grad(metric, [kept[depth][0] for depth in range(sites.n_layers)])
    return [grad.detach() for grad in grads], [kept[depth][1] for depth in range(sites.n_layers)]
