"""Memory bounded by a layer, not the model (issue 46): a long example's attention [L, H, T, T] goes through the
statistics, the decoder atlas and the views' encoding a layer at a time, so what they allocate beside their input
does not grow with the number of layers (past what they return). Before, each took several float64 copies of the
whole model's attention: 4.9 GB for one 1,001-token example on GPT-2-small's 12 x 12 heads.

Measured with tracemalloc (numpy reports its buffers to it) on random attention of 8 and 16 layers of 8 heads
(blocks of a fixed size, the head similarity's 4M numbers and the encoding's 4,096 rows, are full at 8 already);
the allowance per extra layer is
two float32 copies of a layer (and what the analysis returns), where one float64 copy of the model would take
2 of them by itself and the code before took over 10."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.patterns.decoder_atlas import decoder_atlas
from reportgen.patterns.statistics import PatternAccumulator, example_statistics, load_settings
from reportgen.runs import ExampleRun, shares
from reportgen.site.attention_encoding import encode_attention, encode_contributions

HEADS, TOKENS = 8, 256


def run_of(layers: int, causal: bool) -> ExampleRun:
    """Random attention of `layers` x HEADS heads over TOKENS tokens (causal: a decoder's), with value norms."""
    rng = np.random.default_rng(layers)
    logits = rng.normal(size=(layers, HEADS, TOKENS, TOKENS)).astype(np.float32)
    if causal:
        logits[..., np.triu_indices(TOKENS, 1)[0], np.triu_indices(TOKENS, 1)[1]] = -np.inf
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    attention = (weights / weights.sum(-1, keepdims=True)).astype(np.float32)
    tokens = [f"w{i % 40}" for i in range(TOKENS)]
    special = np.zeros(TOKENS, dtype=bool)
    return ExampleRun(ExampleSpec(text="x"), tokens, np.arange(TOKENS), np.zeros(TOKENS, dtype=np.int64), special,
                      attention, False, value_norms=rng.random((layers, HEADS, TOKENS)).astype(np.float32))


def encoder_statistics(run: ExampleRun) -> None:
    accumulator = PatternAccumulator(load_settings())
    accumulator.add(run)
    accumulator.result()


ANALYSES = {
    "encoder statistics": encoder_statistics,
    "one example's statistics": lambda run: example_statistics(run),
    "decoder atlas": lambda run: decoder_atlas([run], None, None, load_settings()),
    "attention encoding": lambda run: encode_attention(run.attention),
    "contributions encoding": lambda run: encode_contributions(run.attention, run.value_norms),
    "contribution shares": lambda run: shares(run.attention, run.value_norms),
}
RETURNED = {"contribution shares": 4 + 4 / TOKENS,  # bytes per weight it returns: the shares and row totals
            "attention encoding": 4 / 3 + 1, "contributions encoding": 4 / 3 + 1}  # base64 text, and its codes


def peak_beside_input(analysis, run: ExampleRun) -> int:
    tracemalloc.start()
    analysis(run)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.mark.slow  # two runs of each analysis under tracemalloc: 1-2 s each
@pytest.mark.parametrize("name", ANALYSES)
def test_an_analysis_holds_a_layer_at_a_time_not_the_model(name):
    causal = name == "decoder atlas"
    small, large = (peak_beside_input(ANALYSES[name], run_of(layers, causal)) for layers in (8, 16))
    layer_f32 = HEADS * TOKENS * TOKENS * 4
    allowed = 8 * (2 * layer_f32 + RETURNED.get(name, 0) * layer_f32 / 4)
    assert large - small <= allowed, f"{name}: {(large - small) / layer_f32:.1f} float32 layers more for 8 layers more"
