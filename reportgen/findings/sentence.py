"""How a finding's sentence is built and how its numbers are written: one rounding for every page."""

from __future__ import annotations

from typing import Any

import numpy as np

from reportgen.findings.names import GROUPS
from reportgen.report import Finding, Link, Span, head_link

SHOWN_HEADS = 5  # heads a pattern finding names
SHOWN_SIGNIFICANT = 8  # significant single heads a finding names


class Sentence:
    """Builds a finding's sentence piece by piece: `s.strong("3 heads...").text(" Layer 2 ...")`."""

    def __init__(self):
        self.spans: list[Span] = []

    def text(self, text: str) -> Sentence:
        self.spans.append(Span(text=text))
        return self

    def strong(self, text: str) -> Sentence:
        self.spans.append(Span(text=text, style="strong"))
        return self

    def code(self, text: str) -> Sentence:
        self.spans.append(Span(text=text, style="code"))
        return self

    def link(self, text: str, href: str) -> Sentence:
        self.spans.append(Span(text=text, link=href))
        return self

    def finding(self, fid: str, group: str, supported: bool, links: list[Link], numbers: dict[str, Any],
                **evidence: Any) -> Finding:
        return Finding(id=fid, group=group, supported=supported, sentence="".join(s.text for s in self.spans),
                       spans=self.spans, links=links, numbers=numbers, **evidence)


# -- how numbers are written (the rounding itself is reportgen.findings.formatting) -------------------------
def head_name(head: dict, capital: bool = False) -> str:
    """"layer 1 head 2"; a head of an encoder-decoder's group (head["group"], its layer within the group)
    "decoder self-attention layer 1 head 2"."""
    text = f"layer {head['layer']} head {head['head']}"
    if head.get("group"):
        text = f"{GROUPS[head['group']]} {text}"
    return text[:1].upper() + text[1:] if capital else text


def plus_minus(head: dict) -> str:
    return f"{head['value']:.2f} ± {head['std'] or 0:.2f}"


def plural(count: int, many: str, one: str = "") -> str:
    return one if count == 1 else many


def view(sentence: Sentence, head: dict) -> Sentence:
    """The link to the head's view on the example where it shows the pattern most. Its words name the example, so
    that printed (links print as text) it still says where to look, not a bare "view"."""
    href = head_link(head["example"], head["layer"], head["head"], group=head.get("group"))
    return sentence.link(f"view on example {head['example'] + 1}", href)


def grid(values: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
