"""Head ablation of encoder-decoders (BART, T5) with the heads as named groups.

An encoder-decoder's heads are laid out flat [encoder self..., decoder self..., cross...]
(`reportgen.model.head_sites`); the ablation record names the group of each flat layer (`Ablation.groups`),
the layer halves are taken within each group (`experiments.half_layers`, `half_pools`), and the findings and
the charts name a head or a layer by its group and its layer within the group (`reportgen.findings.names`).
An encoder's record has no groups, and its halves, names and charts are what they always were.

The tiny random checkpoints are tests/seq2seq_checkpoints.py's (2 encoder and 2 decoder layers of 4 heads);
the encoder is the ablation tests' random 3 x 4 BERT (conftest's `model_dir` and `data`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from reportgen.ablation import experiments
from reportgen.ablation.experiment_context import encoder_decoder_groups
from reportgen.ablation.experiments import half_layers, half_pools
from reportgen.ablation.records import record_key, run_ablations
from reportgen.config import AblationSettings, defaults
from reportgen.findings import names
from reportgen.findings.ablation import ablation_findings
from reportgen.findings.sentence import head_name as sentence_head_name
from reportgen.report import Ablation

FLAT = ["encoder", "encoder", "decoder", "decoder", "cross", "cross"]  # the tiny checkpoints' flat layers
HEADS = 4
EXPERIMENTS_ON = ("baseline", "single_heads", "whole_layers", "layer_halves")


def _settings(data: Path, task: str) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(task=task, data=str(data), seeds=[0, 1], fractions=[0.0, 0.25, 0.5], bootstrap_samples=100,
               permutations=100, batch_tokens=96, max_length=32,
               experiments={name: name in EXPERIMENTS_ON for name in experiments.EXPERIMENTS})
    return AblationSettings.model_validate(raw)


# -- the halves within each group (plain arrays) ----------------------------------------------------------
def test_the_halves_of_an_encoder_decoder_are_taken_within_each_group():
    groups = ["encoder"] * 3 + ["decoder"] * 2 + ["cross"] * 2  # encoder 0-2, decoder 3-4, cross 5-6
    lower, upper = half_layers(len(groups), groups)
    assert lower == [0, 3, 5] and upper == [1, 2, 4, 6]  # floor(L_g / 2) of each group below, the rest above
    pools = half_pools(len(groups), 3, groups)
    for name, layers in (("lower", lower), ("upper", upper)):
        assert pools[name].dtype == np.int64
        assert pools[name].tolist() == [layer * 3 + head for layer in layers for head in range(3)]
    for group in ("encoder", "decoder", "cross"):  # each group's own halves, exactly
        depths = [depth for depth, name in enumerate(groups) if name == group]
        in_lower = sorted({int(flat) // 3 for flat in pools["lower"]} & set(depths))
        in_upper = sorted({int(flat) // 3 for flat in pools["upper"]} & set(depths))
        assert in_lower == depths[: len(depths) // 2] and in_upper == depths[len(depths) // 2:]
    assert sorted(np.concatenate(list(pools.values())).tolist()) == list(range(len(groups) * 3))  # all, once
    # the tiny checkpoints: each group's first layer below, its second above
    assert half_layers(6, FLAT) == ([0, 2, 4], [1, 3, 5])


def test_without_groups_the_halves_are_the_flat_order_as_before():
    for layers, heads in ((3, 4), (6, 12), (1, 2)):
        pools = half_pools(layers, heads)
        flat = np.arange(layers * heads)
        half = layers // 2
        assert np.array_equal(pools["lower"], flat[: half * heads]) and np.array_equal(pools["upper"],
                                                                                        flat[half * heads:])
        assert pools["lower"].dtype == flat.dtype  # the same draws: rng.permutation of the same array
        assert half_layers(layers) == (list(range(half)), list(range(half, layers)))
    assert encoder_decoder_groups(["encoder"] * 3) is None and encoder_decoder_groups(["decoder"] * 2) is None
    assert encoder_decoder_groups(None) is None and encoder_decoder_groups(FLAT) == tuple(FLAT)


def test_an_encoder_decoder_record_has_a_key_of_its_own_and_no_other_key_changes():
    settings = AblationSettings.model_validate(defaults()["ablation"])
    assert record_key(settings, "fp", "sha") == record_key(settings, "fp", "sha", False)
    assert record_key(settings, "fp", "sha", True) != record_key(settings, "fp", "sha")


# -- names ------------------------------------------------------------------------------------------------
def test_names_of_flat_layers_and_heads():
    assert names.layer_name(0, FLAT) == "encoder self-attention layer 0"
    assert names.layer_name(1, FLAT) == "encoder self-attention layer 1"
    assert names.layer_name(2, FLAT) == "decoder self-attention layer 0"
    assert names.layer_name(5, FLAT) == "cross-attention layer 1"
    assert names.head_name(4, 0, FLAT) == "cross-attention layer 0 head 0"
    assert names.head_name(3, 2, FLAT, capital=True) == "Decoder self-attention layer 1 head 2"
    assert [names.layer_label(layer, FLAT) for layer in range(6)] == ["enc 0", "enc 1", "dec 0", "dec 1", "cross 0",
                                                                      "cross 1"]
    # without groups: today's wording exactly
    assert names.layer_name(3) == names.layer_name(3, None) == "layer 3"
    assert names.layer_name(3, capital=True) == "Layer 3" and names.layer_label(3) == "3"
    for layer, head, capital in ((3, 1, False), (0, 0, True), (11, 7, False)):
        assert names.head_name(layer, head, None, capital) == sentence_head_name({"layer": layer, "head": head},
                                                                                 capital=capital)


# -- encoder-decoders end to end ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ablations(tmp_path_factory) -> dict[str, Ablation]:
    from reportgen.model import loading
    from tests.seq2seq_checkpoints import PAIRS, make_encoder_decoder, write_pairs

    root = tmp_path_factory.mktemp("encoder-decoder-ablation")
    data = write_pairs(root / "pairs.jsonl", PAIRS)
    out = {}
    with loading.file_policy(encoder_decoders=True):
        for family in ("bart", "t5"):
            model = make_encoder_decoder(family, root / family)
            out[family] = run_ablations(model, _settings(data, "seq2seq"), device="cpu", cache_dir=root / "cache",
                                        fingerprint=family)
            # read back whole from the cache: the groups survive the stored record
            again = run_ablations(model, _settings(data, "seq2seq"), device="cpu", cache_dir=root / "cache",
                                  fingerprint=family)
            assert again == out[family]
    return out


@pytest.mark.slow  # two tiny encoder-decoders through four experiments: seconds
@pytest.mark.parametrize("family", ["bart", "t5"])
def test_an_encoder_decoder_ablation_names_its_groups(family, ablations):
    ablation = ablations[family]
    assert ablation.groups == FLAT and (ablation.layers, ablation.heads) == (6, HEADS)
    assert sorted(ablation.experiments) == sorted(EXPERIMENTS_ON) and ablation.task.type == "seq2seq"
    assert ablation.whole_layers.layers == list(range(6)) and np.shape(ablation.single_heads.delta) == (6, HEADS)
    halves = ablation.layer_halves
    assert halves.lower_layers == [0, 2, 4] and halves.upper_layers == [1, 3, 5]  # within each group
    assert "within each group" in halves.note
    # a half holds 12 of the 24 heads: every fraction fits; at 50% every seed masks the whole half
    assert halves.fractions == [0.0, 0.25, 0.5] and halves.n_masked == [0, 6, 12] and halves.same_mask[2]
    assert ablation.model_dump(mode="json")["groups"] == FLAT


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bart", "t5"])
def test_the_findings_and_charts_name_heads_by_their_group(family, ablations):
    from reportgen.site.charts.chartdata import ablation_charts

    ablation = ablations[family]
    found = {finding.id: finding for finding in ablation_findings(ablation)}
    assert {"ablation-baseline", "ablation-single-heads", "ablation-whole-layers"} <= set(found)
    single, whole = found["ablation-single-heads"].sentence, found["ablation-whole-layers"].sentence
    group_names = "|".join(re.escape(name) for name in names.GROUPS.values())
    assert re.search(rf"(?i:{group_names}) layer [01] head \d", single), single
    assert not re.search(r"(?<!attention )\b[Ll]ayer \d+ head", single), single  # no head by its flat layer alone
    layer = rf"({group_names}) layer [01]"
    assert re.search(rf"(Removing {layer} costs most|removing {layer} helps least)", whole), whole
    worst = found["ablation-single-heads"].numbers["worst"]  # the numbers keep the flat index
    assert 0 <= worst["layer"] < 6 and names.head_name(worst["layer"], worst["head"], FLAT) in single
    if "ablation-layer-halves" in found:
        assert "layers of each group" in found["ablation-layer-halves"].sentence

    charts = ablation_charts(ablation)
    heatmap = charts["single_heads"]
    rows = heatmap["data"]["values"]
    assert {row["layer_name"] for row in rows if row["layer"] == 4} == {"cross-attention layer 0"}
    axis = [layer["encoding"]["y"]["axis"]["labelExpr"] for layer in heatmap["layer"]]
    assert all('"enc 0", "enc 1", "dec 0", "dec 1", "cross 0", "cross 1"' in expr for expr in axis)
    assert "self-attention layer" in heatmap["description"] or "cross-attention layer" in heatmap["description"]
    bars = charts["whole_layers"]
    assert "cross 1" in bars["layer"][0]["encoding"]["x"]["axis"]["labelExpr"]
    assert charts["layer_halves"]["title"].endswith("lower vs upper layers of each group")
    assert charts["layer_names"] == [names.layer_name(layer, FLAT) for layer in range(6)]  # the page's text


# -- an encoder: nothing changes ------------------------------------------------------------------------------
@pytest.mark.slow  # a tiny BERT through four experiments: over a second
def test_an_encoder_has_no_groups_and_its_names_are_unchanged(model_dir, data, tmp_path):
    from reportgen.site.charts.chartdata import ablation_charts

    ablation = run_ablations(model_dir, _settings(data, "similarity"), device="cpu", cache_dir=tmp_path,
                             fingerprint="fp")
    assert ablation.groups is None and ablation.layers == 3
    assert ablation.layer_halves.lower_layers == [0] and ablation.layer_halves.upper_layers == [1, 2]
    assert "group" not in ablation.layer_halves.note
    found = {finding.id: finding for finding in ablation_findings(ablation)}
    single, whole = found["ablation-single-heads"], found["ablation-whole-layers"]
    worst = single.numbers["worst"]
    assert sentence_head_name(worst) in single.sentence or sentence_head_name(worst, capital=True) in single.sentence
    assert "attention layer" not in single.sentence + whole.sentence
    lead = "Removing layer {} costs most:" if whole.numbers["costs"] else "removing layer {} helps least:"
    assert lead.format(whole.numbers["worst"]["layer"]) in whole.sentence
    charts = ablation_charts(ablation)
    assert all("layer_name" not in row for row in charts["single_heads"]["data"]["values"])
    assert all("labelExpr" not in str(layer["encoding"]["y"]) for layer in charts["single_heads"]["layer"])
    assert charts["layer_halves"]["title"].endswith("lower vs upper layers") and "layer_names" not in charts
