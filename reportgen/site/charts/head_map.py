"""The head map's data: every head of a model as one cell of a layers x heads grid (issue 15).

A reader who opens the findings page should see the whole model before reading a sentence: which
heads have a pattern (a cell's label), which ones the task needs (masking the head alone changes the
metric significantly, and in which direction), and where to look next (the cell's link). This module
turns the report into those cells as plain, JSON-able records; reportgen.site.charts.head_map_svg draws them.

Three maps are made from a report: the model's (labels from the statistics' means over the inputs,
linked to each head's strongest example), the comparison model's (the same, linked to its section of
the comparison page: the example pages draw only the first model's attention), and one per example
(the labels on that example alone, `Example.labels`, linked to the head view on the same page).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from reportgen.report import Ablation, DecoderStatistics, Example, HeadTests, PatternStatistics, Report, head_link

Atlas = PatternStatistics | DecoderStatistics
# The statistic whose strongest example a "mixed" head links to (the head-similarity map does the same).
MIXED_STATISTIC = "entropy"
# The section of the comparison page (chartdata.comparison_sections) that shows each label's statistic
# for both models; tests/site/test_head_map.py checks each anchor against the sections the page has.
COMPARE_SECTIONS = {"previous_token": "compare-previous-token", "next_token": "compare-next-token",
                    "same_token": "compare-same-word", "other_segment": "compare-other-sentence",
                    "within_word": "compare-within-word", "delimiter": "compare-delimiter",
                    "broad": "compare-broad", "mixed": "compare-broad"}
COMPARE_PAGE = "compare.html"


@dataclass(frozen=True)
class Masking:
    """The head masked alone (ablation.single_heads): the relative change of the task's metric, its test."""

    relative: float | None  # (masked - unmasked) / |unmasked|; None where the metric is undefined
    p_adjusted: float | None  # corrected over all heads
    p_value: float | None  # before correction: at its floor 1/(permutations + 1) the page writes a bound
    permutations: int
    significant: bool
    sign: Literal[-1, 0, 1]  # of the change: +1 the metric rises when the head is masked, -1 it falls


@dataclass(frozen=True)
class Cell:
    layer: int
    head: int
    label: str  # patterns.LABELS: the head's main pattern, "mixed" where none passes
    statistic: str | None  # the statistic behind the label (statistics.label_stats); None for "mixed"
    value: float | None  # that statistic's value for this head; None where the map has no value for it
    entropy: float | None  # nats
    effective_share: float | None
    masking: Masking | None  # None without a single-head experiment
    link: str  # where a click goes: a head view, or the comparison page's section for the label


@dataclass(frozen=True)
class HeadMap:
    id: str  # the map's element id on its page: unique there
    model: str  # the model's name as the report gives it (user text: escape it)
    scope: Literal["inputs", "example"]  # labels from the means over the inputs, or from one example
    layers: int
    heads: int
    metric: str | None  # the task's primary metric key (names.metric); None without single-head masking
    cells: list[Cell]  # row by row: layer 0 head 0, layer 0 head 1, ...

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def masking(tests: HeadTests | None, layer: int, head: int) -> Masking | None:
    """The single-head test of one head, or None where the experiment did not run."""
    if tests is None:
        return None
    relative = tests.relative[layer][head]
    sign = 0 if not relative else (1 if relative > 0 else -1)
    return Masking(relative=relative, p_adjusted=tests.p_adjusted[layer][head], p_value=tests.p_value[layer][head],
                   permutations=tests.permutations, significant=bool(tests.significant[layer][head]), sign=sign)


def _single_heads(ablation: Ablation | None) -> HeadTests | None:
    return ablation.single_heads if ablation is not None else None


def statistic_of(statistics: Atlas, label: str) -> str | None:
    """The statistic a label rests on (broad: the effective share); None for "mixed"."""
    return statistics.label_stats.get(label)


def entropy_of(statistics: Atlas) -> str:
    """The atlas's entropy statistic: a decoder's is over the visible prefix (`causal_entropy`)."""
    return "causal_entropy" if isinstance(statistics, DecoderStatistics) else MIXED_STATISTIC


def strongest_view(statistics: Atlas) -> Callable[[int, int, str], str]:
    """(layer, head, label) -> the head view on the example where the head shows its label's statistic
    most (statistics.<stat>.example; an example page exists for each, -1 (none, or the induction test's
    sequences, which have no page) falls back to the first)."""
    def link(layer: int, head: int, label: str) -> str:
        example = statistics[statistic_of(statistics, label) or entropy_of(statistics)].example[layer][head]
        return head_link(max(example, 0), layer, head)
    return link


def compare_section(_layer: int, _head: int, label: str) -> str:
    """The comparison page's section for the label: the second model has no head view of its own."""
    return f"{COMPARE_PAGE}#{COMPARE_SECTIONS[label]}"


def same_page_view(layer: int, head: int, _label: str) -> str:
    """The head view on the page the map is on (an example page): only the address's anchor, which the
    views apply on hashchange without reloading (views-start.js), as the page's pattern list links."""
    return "#" + head_link(0, layer, head).partition("#")[2]


def model_map(statistics: Atlas, ablation: Ablation | None, map_id: str, model: str,
              link: Callable[[int, int, str], str]) -> HeadMap:
    """A model's map: labels and values from the statistics' means over the inputs."""
    tests = _single_heads(ablation)
    entropy = statistics[entropy_of(statistics)].mean
    share = statistics.effective_share.mean if isinstance(statistics, PatternStatistics) else None
    cells = []
    for layer, row in enumerate(statistics.labels):
        for head, label in enumerate(row):
            statistic = statistic_of(statistics, label)
            cells.append(Cell(layer=layer, head=head, label=label, statistic=statistic,
                              value=statistics[statistic].mean[layer][head] if statistic else None,
                              entropy=entropy[layer][head], effective_share=share[layer][head] if share else None,
                              masking=masking(tests, layer, head), link=link(layer, head, label)))
    return HeadMap(id=map_id, model=model, scope="inputs", layers=len(statistics.labels),
                   heads=len(statistics.labels[0]), metric=ablation.task.metric if tests else None, cells=cells)


def findings_maps(report: Report) -> list[HeadMap]:
    """The findings page's maps: the model's, then the comparison model's when the config has one."""
    maps = [model_map(report.atlas, report.ablation, "head-map", report.model.name, strongest_view(report.atlas))]
    if report.comparison is not None:
        other = report.comparison
        maps.append(model_map(other.statistics, other.ablation, "head-map-compare", other.model.name,
                              compare_section))
    return maps


def example_map(report: Report, example: Example) -> HeadMap:
    """An example's map: each head's label on that example alone, the entropy there, the single-head
    masking result of the task (the same for every example), linked to the head view on its page."""
    tests = _single_heads(report.ablation)
    cells = [Cell(layer=layer, head=head, label=label, statistic=statistic_of(report.atlas, label),
                  value=None, entropy=example.entropy[layer][head], effective_share=None,
                  masking=masking(tests, layer, head), link=same_page_view(layer, head, label))
             for layer, row in enumerate(example.labels) for head, label in enumerate(row)]
    return HeadMap(id="head-map-example", model=report.model.name, scope="example", layers=report.layers,
                   heads=report.heads, metric=report.ablation.task.metric if tests else None, cells=cells)
