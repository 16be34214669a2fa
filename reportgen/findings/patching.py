"""Findings about activation patching (report.Patching): which heads restore a behaviour when patched from the clean
run, which the behaviour needs (patched from the corrupted run, it falls), and how far attribution patching's
estimate agrees with exact patching. Each head's claim rests on its bootstrap interval over pairs and its
Holm-corrected sign-flip test (reportgen.patching.effects); a head is named as supported only when both pass."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reportgen.findings import names
from reportgen.findings.formatting import p_number, percent
from reportgen.findings.sentence import Sentence
from reportgen.report import Finding, Link, Patching, PatchingEffects, group_layer, head_link

TEST = "paired sign-flip permutation test over pairs, Holm-corrected over heads; 95% percentile bootstrap over pairs"
SOURCE = {"denoising": ("clean", "corrupted"), "noising": ("corrupted", "clean")}


def patching_findings(patching: Patching, groups: Sequence[str] | None = None) -> list[Finding]:
    """One finding per direction, then the agreement of attribution with exact patching; where the pairs show no
    behaviour (the clean and corrupted metrics do not differ), that alone."""
    if not patching.pairs.present:
        return [_absent(patching)]
    found = [_direction(patching, effects, groups) for effects in patching.directions]
    agreement = next((a for a in patching.agreement if a.direction == "denoising"), None)
    if agreement is not None and agreement.spearman is not None:
        found.append(_agreement(patching, groups))
    return found


def _absent(patching: Patching) -> Finding:
    pairs = patching.pairs
    low, high = pairs.difference_ci
    s = Sentence().text(f"On these {pairs.count} pairs the corrupted prompt moves the logit difference by ").strong(
        f"{pairs.difference:.2f} [{low:.2f}, {high:.2f}]").text(
        f" (clean minus corrupted, 95% interval), which does not clear {pairs.min_difference:g} logits "
        "(patching.min_difference): the pairs show no behaviour for a head to carry, and no head is named — ").strong(
        "not supported").text(".")
    return s.finding("patching-absent", "patching", False,
                     [Link(label="details", href="patching.html")],
                     {"difference": pairs.difference, "count": pairs.count, "min_difference": pairs.min_difference},
                     test="95% percentile bootstrap over pairs", ci=[low, high])


def _cells(effects: PatchingEffects) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in effects.effect], dtype=np.float64)


def _view(patching: Patching, layer: int, head: int, groups: Sequence[str] | None, direction: str) -> str:
    """The head's view on the patched prompt (the example that is the first pair's clean prompt), else the chart."""
    if patching.example is None:
        return f"patching.html#patching-{direction}"
    group, within = group_layer(layer, groups)
    return head_link(patching.example, within, head, group=group)


def _direction(patching: Patching, effects: PatchingEffects, groups: Sequence[str] | None) -> Finding:
    """The head that moves the behaviour most in this direction: restores most of it (denoising), or whose
    corrupted output leaves least of it (noising); supported when its interval and its corrected test both pass."""
    cells = _cells(effects)
    denoising = effects.direction == "denoising"
    layer, head = np.unravel_index(np.nanargmax(cells if denoising else -cells), cells.shape)
    layer, head = int(layer), int(head)
    value, low, high = cells[layer, head], effects.low[layer][head], effects.high[layer][head]
    p = effects.p_adjusted[layer][head]
    supported = bool(effects.significant[layer][head])
    count = int(np.sum(effects.significant))
    source, target = SOURCE[effects.direction]
    name = names.head_name(layer, head, groups)
    verb = "restores" if denoising else "leaves"
    s = Sentence().text("Patching ").link(name, _view(patching, layer, head, groups, effects.direction)).text(
        f" from the {source} run into the {target} one {verb} ").strong(
        f"{percent(value)} [{_percent(low)}, {_percent(high)}]").text(
        " of the logit difference" + ("" if denoising else ", the rest of the behaviour falling away") +
        f" (corrected p = {p_number(p, patching.alpha) if p is not None else 'undefined'}")
    total = sum(v is not None for row in effects.effect for v in row)
    s.text(f"; {count} of {total} heads {'move' if count != 1 else 'moves'} it significantly in this direction) — ")
    s.strong("supported" if supported else "not supported")
    s.text(".")
    numbers = {"direction": effects.direction, "layer": layer, "head": head, "effect": float(value),
               "significant": count, "tested": total}
    return s.finding(f"patching-{effects.direction}", "patching", supported,
                     [Link(label="chart", href=f"patching.html#patching-{effects.direction}")], numbers, test=TEST,
                     p_value=p, ci=[low, high])


def _percent(value: float | None) -> str:
    return "–" if value is None else percent(value)


def _agreement(patching: Patching, groups: Sequence[str] | None) -> Finding:
    agreement = next(a for a in patching.agreement if a.direction == "denoising")
    ran = (len(patching.exact_heads) if patching.exact_heads is not None
           else sum(v is not None for row in patching.directions[0].effect for v in row))
    s = Sentence().text("Attribution patching, every head from two forward passes and one backward pass a pair, ")
    s.strong(f"ranks the heads with Spearman ρ = {agreement.spearman:.2f}").text(
        f" against exact patching over the {ran} heads patched exactly, and puts {agreement.overlap} of exact "
        f"patching's top {agreement.top} in its own top {agreement.top}")
    if agreement.disagree:
        shown = ", ".join(names.head_name(layer, head, groups) for layer, head in agreement.disagree[:4])
        s.text(f"; the tops differ on {shown}{' and more' if len(agreement.disagree) > 4 else ''}")
    s.text(".")
    numbers = {"spearman": agreement.spearman, "overlap": agreement.overlap, "top": agreement.top,
               "heads": ran}
    return s.finding("patching-agreement", "patching", True,
                     [Link(label="table", href="patching.html#patching-agreement")], numbers)
