"""Findings: the measured results turned into statements, computed with the analyses.

Each finding has a stable id derived from what it is (e.g. `ablation-whole-layers`), a
verdict (`supported`), its sentence with the numbers it quotes and their uncertainty (std
over examples, bootstrap CI, corrected p-values), the test behind it, and links to the
chart and the attention view that show it. A result the data do not support is stated as
such, never left out. The findings page only prints what is here.
"""

from __future__ import annotations

from reportgen.findings.ablation import ablation_findings
from reportgen.findings.decoder import cross_finding, decoder_findings
from reportgen.findings.patching import patching_findings
from reportgen.findings.patterns import PATTERN_FINDINGS, pattern_findings
from reportgen.report import (
    Ablation,
    CrossStatistics,
    DecoderStatistics,
    Finding,
    Headline,
    Patching,
    PatternStatistics,
)

__all__ = ["PATTERN_FINDINGS", "ablation_findings", "all_findings", "decoder_findings", "headline",
           "patching_findings", "pattern_findings"]


def all_findings(statistics: PatternStatistics | DecoderStatistics, ablation: Ablation | None,
                 decoder_group: DecoderStatistics | None = None, cross: CrossStatistics | None = None,
                 patching: Patching | None = None, groups: list[str] | None = None) -> list[Finding]:
    """The pattern findings (an encoder's or a decoder's; an encoder-decoder's encoder's, then its
    `decoder_group`'s, the decoder self-attention's, then its `cross`-attention's), then the ablation's, then
    activation patching's (an encoder-decoder's heads named by their `groups`)."""
    decoder = isinstance(statistics, DecoderStatistics)
    patterns = decoder_findings(statistics) if decoder else pattern_findings(statistics)
    if decoder_group is not None:
        patterns += decoder_findings(decoder_group, "decoder")
    if cross is not None:
        patterns.append(cross_finding(cross))
    return (patterns + (ablation_findings(ablation) if ablation else [])
            + (patching_findings(patching, groups) if patching else []))


def headline(statistics: PatternStatistics | DecoderStatistics, findings: list[Finding]) -> Headline:
    """The few numbers at the top of the report."""
    by_id = {f.id: f for f in findings}
    single = by_id.get("ablation-single-heads")
    return Headline(heads=statistics.counts.layers * statistics.counts.heads, labels=statistics.label_counts,
                    baseline=by_id.get("ablation-baseline"),
                    significant_heads=single.numbers["count"] if single else None)
