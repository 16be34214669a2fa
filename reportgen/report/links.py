"""Links into the site (head and model views of an example), and what the site draws beside the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    pass


# -- links into the site ------------------------------------------------------------------------
def head_link(example: int, layer: int, head: int, token: int | None = None, key: int | None = None,
              mode: Literal["contributions"] | None = None, group: str | None = None) -> str:
    """The head view of one head on an example page (0-based example index), optionally with one
    query token (`token`, left column) or else one key token (`key`, right column) pinned, and with
    `mode="contributions"` showing what the head passes on instead of its weights. An encoder-decoder's
    `group` ("decoder" or "cross"; `layer` within it) opens that group of its views; the encoder's is the default.

    The address format is the views' state, parsed and written by formatHash / parseHash in
    site_src/assets/javascripts/views-core.js; this module is its only spelling in Python.
    """
    pinned = f"&token={token}" if token is not None else f"&key={key}" if key is not None else ""
    shown = f"&mode={mode}" if mode is not None else ""
    return f"example-{example + 1}.html#view=head{_attention_group(group)}&layer={layer}&head={head}{pinned}{shown}"


def head_link_expression(mode: Literal["contributions"] | None = None, group: str | None = None) -> str:
    """`head_link(datum.example, datum.layer, datum.head, mode=mode, group=group)` as a Vega expression over a
    chart's row: a heatmap computes its cells' addresses from its rows' example, layer and head, rather than
    carrying one written out per head (87 KB of the patterns page's 502 KB; issue 47)."""
    shown = f"&mode={mode}" if mode is not None else ""
    return ("'example-' + (datum.example + 1) + " + json.dumps(f".html#view=head{_attention_group(group)}&layer=")
            + " + datum.layer + '&head=' + datum.head" + (f" + {json.dumps(shown)}" if shown else ""))


def model_link(layer: int, example: int = 0, group: str | None = None) -> str:
    """The model view of an example page at one layer (of an encoder-decoder's `group`, as in `head_link`)."""
    return f"example-{example + 1}.html#view=model{_attention_group(group)}&layer={layer}"


def group_layer(layer: int, groups: Sequence[str] | None) -> tuple[str | None, int]:
    """(group, layer within the group) of an encoder-decoder's flat layer `layer` (its `groups`, as
    Report.groups: encoder, then decoder, then cross layers); (None, layer) without groups."""
    if not groups:
        return None, layer
    group = groups[layer]
    return group, list(groups[:layer]).count(group)


def flat_head_link(layer: int, head: int, groups: Sequence[str] | None = None, example: int = 0) -> str:
    """`head_link` of a head given by its flat layer (an ablation's rows), opening its group's views."""
    group, within = group_layer(layer, groups)
    return head_link(example, within, head, group=group)


def flat_model_link(layer: int, groups: Sequence[str] | None = None, example: int = 0) -> str:
    """`model_link` of a flat layer (an ablation's rows), opening its group's views."""
    group, within = group_layer(layer, groups)
    return model_link(within, example, group)


def _attention_group(group: str | None) -> str:
    if group not in (None, "encoder", "decoder", "cross"):
        raise ValueError(f"not an attention group: {group!r}")
    return f"&attn={group}" if group not in (None, "encoder") else ""


# -- what the site draws beside the report ----------------------------------------------------------
@dataclass
class ExampleViews:
    """The attention of one example as the pages draw it: plain data made from the model run.

    Not part of report.json: the encoded views live in the example pages themselves.
    """

    tokens: list[str]
    segments: list[int]  # 0: first sentence, 1: second, -1: special token
    payload: dict[str, Any]  # views.example_payload: 8-bit attention rows for the head and model views
    qk_payload: dict[str, Any] | None  # views.qk_payload, for examples with a query/key page
    matrices: dict[tuple[int, int], list[list[float]]] = field(default_factory=dict)  # (layer, head) -> weights
