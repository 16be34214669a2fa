"""The seed patterns on one example: the heads that show each one most there, and where.

Each example page lists, for the six seed patterns, the heads with the largest value of the
pattern's statistic on that example (the per-example value that patterns.py averages over the
inputs), with the (query, key) token pair where the head shows it most, so the page can open
the head view at that head and token (issue 12). A pattern whose best head stays below its
label threshold is marked weak: the page says so rather than promote it.
"""

from __future__ import annotations

import numpy as np

from reportgen.config import PatternSettings, Thresholds
from reportgen.patterns.measures import STATS, ExampleWeights, word_cells, word_match_cells
from reportgen.patterns.statistics import label_heads, load_settings
from reportgen.patterns.words import delimiter_keys, punctuation_keys, resegment
from reportgen.report import ExampleHead, ExamplePattern
from reportgen.runs import ExampleRun

SEED_PATTERNS = ("previous_token", "next_token", "same_token", "other_segment", "within_word", "delimiter")
SHOWN = 3  # heads listed per pattern


def threshold_of(pattern: str, thresholds: Thresholds) -> float:
    """The label threshold of a seed pattern (positional for previous / next token)."""
    return getattr(thresholds, "positional" if pattern in ("previous_token", "next_token") else pattern)


def example_patterns(run: ExampleRun, settings: PatternSettings | None = None,
                     shown: int = SHOWN) -> list[ExamplePattern]:
    """The six seed patterns on `run`, in SEED_PATTERNS order, each with its `shown` strongest heads
    (see `patterns_and_labels`)."""
    return patterns_and_labels(run, settings, shown)[0]


def patterns_and_labels(run: ExampleRun, settings: PatternSettings | None = None,
                        shown: int = SHOWN) -> tuple[list[ExamplePattern], list[list[str]]]:
    """The six seed patterns on `run` and each head's label on `run` alone, from one pass over its statistics.

    The labels are patterns.label_heads applied to this example's statistics instead of their means over
    the inputs (same thresholds, same tie rule), so the example page's head map shows what each head does
    on that example; a pattern the example cannot show (no split word, a single sentence) never labels a head.

    For the seed patterns (in SEED_PATTERNS order, each with its `shown` strongest heads),
    heads are ranked by the pattern's statistic on this example. For within_word only heads
    whose boundary selectivity on this example is above `thresholds.boundary_selectivity`
    are ranked: a purely positional head puts half its neighbour weight inside split words
    by position alone, and must not be shown as a word-piece head. The list is empty where the
    pattern does not apply (no split word, no word shared by the two sentences) or, for
    within_word, where no head is selective.
    """
    settings = settings or load_settings()
    run = resegment(run, settings.segmentation)
    values = dict(zip(STATS, ExampleWeights.of(run, settings.word_level).values(run.attention), strict=True))
    cells = pattern_cells(run)
    thresholds = settings.thresholds
    out = []
    for pattern in SEED_PATTERNS:
        value = np.asarray(values[pattern], dtype=np.float64)
        eligible = np.isfinite(value)
        if pattern == "within_word":
            eligible &= np.nan_to_num(values["boundary_selectivity"], nan=-np.inf) > thresholds.boundary_selectivity
        heads = [_head(run, pattern, cells.get(pattern), layer, head, value[layer, head])
                 for layer, head in ranked(value, eligible)[:shown]]
        threshold = threshold_of(pattern, thresholds)
        out.append(ExamplePattern(pattern=pattern, threshold=threshold, heads=heads,
                                  weak=not heads or not heads[0].value > threshold))
    return out, label_heads(values, thresholds)[0].tolist()


def pattern_cells(run: ExampleRun) -> dict[str, np.ndarray]:
    """[T, T] (query, key) cells of the token-pair patterns, on the example's pieces; the
    delimiter entry is its [T] key selection."""
    cls, sep = delimiter_keys(run)
    match = word_match_cells(run)
    return {"same_token": match["same_token"], "other_segment": match["other_segment"],
            "within_word": word_cells(run.word_ids)["own_word"], "delimiter": cls | sep | punctuation_keys(run)}


def ranked(value: np.ndarray, eligible: np.ndarray) -> list[tuple[int, int]]:
    """(layer, head) of the eligible heads, largest value first (ties: lower layer, then head)."""
    flat = np.where(eligible, value, -np.inf).reshape(-1)
    order = np.argsort(-flat, kind="stable")
    heads = value.shape[1]
    return [(int(i // heads), int(i % heads)) for i in order if np.isfinite(flat[i])]


def _head(run: ExampleRun, pattern: str, cells: np.ndarray | None, layer: int, head: int,
          value: float) -> ExampleHead:
    attention = run.attention[layer, head].astype(np.float64)
    query = key = weight = None
    if pattern == "delimiter" and cells.any():
        keys = np.flatnonzero(cells)
        mass = attention[:, keys].mean(0)
        key, weight = int(keys[mass.argmax()]), float(mass.max())
    elif pattern != "delimiter" and cells is not None and cells.any():
        flat = int(np.where(cells, attention, -np.inf).argmax())
        query, key = divmod(flat, run.n_tokens)
        weight = float(attention[query, key])
    return ExampleHead(layer=layer, head=head, value=round(float(value), 6), query=query, key=key,
                       query_token=None if query is None else run.tokens[query],
                       key_token=None if key is None else run.tokens[key],
                       weight=None if weight is None else round(weight, 6))
