"""What the site calls each attention pattern and each task metric: one table for every page.

A pattern key (a statistic in report.json, or a head label) is never printed as it is
("within_word"), nor turned into words on the spot: the pages, the chart titles and legends
and the label table all read its name here, so a pattern is called the same thing everywhere.

`scale` says how a heatmap of the statistic is coloured. A share of attention is drawn on
the fixed range 0-1, so the same colour means the same share on every pattern; entropy has
its own scale in nats, and a difference of two shares is drawn on -1..1 around 0.

`colour` is a head label's colour wherever heads are coloured by their label (the head map,
the head-similarity map): the Okabe-Ito palette (Okabe and Ito 2008, "Color Universal Design"),
whose colours stay apart for the common kinds of colour blindness, and a neutral grey for
"mixed" (no pattern). Its sky blue, orange and yellow, and a light grey, have under 3:1 contrast
with the white page (WCAG 2.1 1.4.11: the colour is what tells a cell's pattern), so those four are
replaced by darker colours that stay apart from the others (issue 28). Only the labels of
patterns.LABELS have one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from reportgen.report import group_layer

Scale = Literal["share", "nats", "difference"]
SCALE_DOMAIN: dict[Scale, tuple[float, float] | None] = {"share": (0.0, 1.0), "nats": None, "difference": (-1.0, 1.0)}


@dataclass(frozen=True)
class PatternName:
    name: str  # as a title: "Same word in the other sentence"
    short: str  # what it measures, one plain sentence (tooltips, the glossary, the label table)
    term: str | None = None  # the glossary entry that explains how it is measured (glossary.TERMS id)
    scale: Scale = "share"
    colour: str | None = None  # a head label's colour (see the module docstring); None for other statistics


PATTERNS: dict[str, PatternName] = {
    "previous_token": PatternName("Previous token", "Attention on the token just before.", "argmax-test",
                                  colour="#0072b2"),
    "next_token": PatternName("Next token", "Attention on the token just after.", "argmax-test", colour="#6a3d9a"),
    "previous_token_argmax": PatternName(
        "Previous token, argmax share", "Share of the tokens whose largest weight is on the token just before.",
        "argmax-test"),
    "next_token_argmax": PatternName(
        "Next token, argmax share", "Share of the tokens whose largest weight is on the token just after.",
        "argmax-test"),
    "previous_token_clark": PatternName(
        "Previous token (Clark's /n)", "Attention on the token just before, summed and divided by all n tokens.",
        "denominator"),
    "next_token_clark": PatternName(
        "Next token (Clark's /n)", "Attention on the token just after, summed and divided by all n tokens.",
        "denominator"),
    "same_token": PatternName(
        "Same word", "Attention on the token itself and on other occurrences of its word in the same sentence.",
        colour="#009e73"),
    "other_segment": PatternName(
        "Same word in the other sentence", "Attention from a word on its occurrences in the other sentence of a pair.",
        colour="#cc79a7"),
    "within_word": PatternName(
        "Other pieces of the same word", "Attention from a word piece on the other pieces of its word.",
        "boundary-selectivity", colour="#d55e00"),
    "adjacent_same_word": PatternName(
        "Neighbour in the same word", "Attention on a neighbouring token that is a piece of the same word.",
        "boundary-selectivity"),
    "adjacent_boundary": PatternName(
        "Neighbour across a word boundary", "Attention on a neighbouring token that belongs to another word.",
        "boundary-selectivity"),
    "boundary_selectivity": PatternName(
        "Boundary selectivity",
        "Attention on a neighbour in the same word minus attention on a neighbour across a word boundary.",
        "boundary-selectivity", "difference"),
    "distant_within_word": PatternName(
        "Non-adjacent pieces of the same word", "Attention from a word piece on the pieces of its word that are "
        "not its neighbours.", "boundary-selectivity"),
    "cls": PatternName("[CLS]", "Attention on [CLS] (or <s>).", "no-op"),
    "sep": PatternName("[SEP]", "Attention on [SEP] (or </s>).", "no-op"),
    "cls_sep": PatternName("[CLS] and [SEP]", "Attention on [CLS] and [SEP] together.", "no-op"),
    "punctuation": PatternName("Punctuation", "Attention on '.' and ',' (only these two).", "no-op"),
    "delimiter": PatternName("[CLS], [SEP] and punctuation", "Attention on [CLS], [SEP], '.' and ',' together.",
                             "no-op", colour="#8f7500"),
    "entropy": PatternName("Entropy", "How spread the attention is, in nats.", "entropy", "nats"),
    "effective_share": PatternName(
        "Effective share", "exp(entropy) / n: the share of the tokens uniform attention would cover to be as spread.",
        "effective-share"),
    "max_weight": PatternName("Largest weight", "The largest weight of a token's attention, averaged over tokens."),
    "broad": PatternName("Broad attention", "Attention spread over many tokens (a high effective share).",
                         "effective-share", colour="#a03d5c"),
    # Decoder heads (causal self-attention; /work/shared/REFERENCE.md, "Decoder heads")
    "induction": PatternName(
        "Induction", "On random tokens repeated, attention from a token's repeat on the token that followed its "
        "earlier occurrence (Olsson et al. 2022).", "induction-test", colour="#b2182b"),
    "duplicate_token": PatternName("Duplicate token", "Attention on the earlier occurrences of the token itself.",
                                   colour="#1b7837"),
    "bos_delimiter": PatternName(
        "[BOS], special tokens and punctuation", "Attention on the special tokens ([BOS], [EOS]) and on '.' and ','.",
        "no-op", colour="#7a5c00"),
    "sink": PatternName("Attention sink", "Attention on the first token, whatever it is (Xiao et al. 2023).",
                        colour="#5d4037"),
    "causal_entropy": PatternName("Causal entropy", "How spread the attention over the visible tokens is, in nats.",
                                  "entropy", "nats"),
    # An encoder-decoder's cross-attention heads (reportgen.patterns.cross)
    "source_special": PatternName(
        "Source special tokens", "Cross-attention on the source's special tokens (its </s>): where a head with "
        "nothing to take from the source parks its weight, as Clark et al. (2019) read attention to [SEP].", "no-op"),
    "mixed": PatternName("Mixed", "No single pattern passes its threshold.", colour="#8c8c8c"),
}

# The patterns only a decoder's site measures (reportgen.patterns.decoder_atlas), only an encoder-decoder's
# cross-attention (reportgen.patterns.cross), and the ones every site measures.
DECODER_ONLY = frozenset({"induction", "duplicate_token", "bos_delimiter", "sink", "causal_entropy"})
CROSS_ONLY = frozenset({"source_special"})
SHARED = frozenset({"previous_token", "mixed"})


def on_site(key: str, atlases: tuple[str, ...]) -> bool:
    """Whether a site whose report holds `atlases` (Report.atlases) measures the pattern `key`, so its glossary
    names it: a decoder's site the decoder patterns, an encoder's the encoder's, an encoder-decoder's both and
    its cross-attention's."""
    if key in SHARED:
        return True
    return ("cross" if key in CROSS_ONLY else "decoder" if key in DECODER_ONLY else "encoder") in atlases

# The heads with a known simple pattern whose scores on the same inputs are each statistic's nulls
# (report.PatternNull): uniform attention, and all weight on the previous or the next token.
NULL_HEADS = {"uniform": "uniform head", "previous": "pure previous-token head", "next": "pure next-token head"}

# The six patterns each example page lists its strongest heads for (issue 12, "per-example patterns").
SEED_PATTERNS = ("previous_token", "next_token", "same_token", "other_segment", "within_word", "delimiter")

METRICS = {"spearman": "Spearman", "pearson": "Pearson", "accuracy": "accuracy", "macro_f1": "macro-F1",
           "mcc": "MCC", "loss": "loss", "perplexity": "perplexity"}
TASK_TYPES = {"similarity": "similarity", "classification": "classification", "mlm": "masked-token prediction",
              "causal_lm": "next-token prediction", "seq2seq": "sequence-to-sequence (target given source)"}
BUILTIN_DATA = "the built-in query-title relevance set"
# the ablation experiments as a sentence names them (a build still running lists them)
EXPERIMENT_NAMES = {"baseline": "the unmasked model", "single_heads": "single heads",
                    "random_fraction": "random fractions of heads", "layer_halves": "lower vs upper layers",
                    "whole_layers": "whole layers", "importance": "head importance and pruning",
                    "head_pairs": "pairs of heads"}


def pattern(key: str) -> PatternName:
    """The pattern's names; a key missing from the table is shown as it is (tests keep the table complete)."""
    return PATTERNS.get(key) or PatternName(key, key)


def name(key: str) -> str:
    return pattern(key).name


def domain(key: str) -> tuple[float, float] | None:
    """The colour domain of the statistic's heatmaps: fixed for shares and differences, free for entropy."""
    return SCALE_DOMAIN[pattern(key).scale]


def colour(label: str) -> str:
    """A head label's colour (the head map, the head-similarity map); "mixed"'s grey for a key without one."""
    return pattern(label).colour or PATTERNS["mixed"].colour


def label_colours() -> dict[str, str]:
    """Every head label's colour, label key -> "#rrggbb", in the table's order ("mixed" last)."""
    return {key: entry.colour for key, entry in PATTERNS.items() if entry.colour}


def metric(key: str) -> str:
    return METRICS.get(key, key)


def task_data(data: str) -> str:
    """The task's data as the pages name it: the built-in set by its description, a file by its path."""
    return BUILTIN_DATA if data == "builtin" else data


# -- layers and heads of an ablation -------------------------------------------------------------------
# An encoder-decoder's heads are laid out flat (reportgen.model.head_sites): its encoder self-attention
# layers, then its decoder self-attention layers, then its cross-attention layers. `groups` names the group
# of each flat layer (report.Ablation.groups); None for every other model, whose flat layer is its depth.
GROUPS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}
GROUP_SHORT = {"encoder": "enc", "decoder": "dec", "cross": "cross"}  # axis labels: "enc 0", "cross 1"


def layer_name(layer: int, groups: Sequence[str] | None = None, capital: bool = False) -> str:
    """A layer as every page and finding writes it: "layer 3"; an encoder-decoder's by its group and its
    layer within the group, "cross-attention layer 1" (flat layer `layer` of `groups`)."""
    group, within = group_layer(layer, groups)
    text = f"layer {within}" if group is None else f"{GROUPS.get(group, group)} layer {within}"
    return text[:1].upper() + text[1:] if capital else text


def head_name(layer: int, head: int, groups: Sequence[str] | None = None, capital: bool = False) -> str:
    """A head as every page and finding writes it: "layer 3 head 1", "cross-attention layer 1 head 0"."""
    return f"{layer_name(layer, groups, capital)} head {head}"


def layer_label(layer: int, groups: Sequence[str] | None = None) -> str:
    """A flat layer as a chart's axis labels it: "3"; an encoder-decoder's "enc 0", "dec 1", "cross 1"."""
    group, within = group_layer(layer, groups)
    return str(layer) if group is None else f"{GROUP_SHORT.get(group, group)} {within}"
