"""The head_pairs experiment: which pairs are masked, the interaction of each, its test, the page section.

A tiny random BERT (3 layers x 4 heads, conftest's `model_dir`) on twelve graded pairs (`data`); the site
build and the browser check are marked slow."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from reportgen.ablation import experiments as ablation
from reportgen.ablation.engine import ResultCache, Runner, evaluate_plain
from reportgen.ablation.experiments import ablate
from reportgen.ablation.head_pairs import chosen_heads, pair_masks, pair_positions
from reportgen.ablation.task_loading import load_ablation_task
from reportgen.config import AblationSettings, defaults
from reportgen.report import Ablation
from reportgen.stats import bootstrap_contrasts, spearman_rows
from tests.helpers import check_report, write_config, write_graded_pairs

OFF = dict.fromkeys((*ablation.EXPERIMENTS, *ablation.OPTIONAL_EXPERIMENTS), False)


def _settings(data, **over) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(data=str(data), seeds=[0], bootstrap_samples=200, permutations=200, batch_tokens=256,
               experiments={**OFF, "head_pairs": True}, head_pairs={"top_k": 4, "all": False})
    raw.update(over)
    return AblationSettings.model_validate(raw)


def _run(model_dir, settings, root, monkeypatch=None) -> tuple[Ablation, dict[str, list[np.ndarray]]]:
    """The record, and the masks each experiment asked the runner for (the real runner, recorded)."""
    asked: dict[str, list[np.ndarray]] = {}
    if monkeypatch is not None:
        real = Runner.outputs

        def recording(self, name, masks, done=0, total=None):
            asked.setdefault(name, []).extend(np.asarray(mask).copy() for mask in masks)
            return real(self, name, masks, done=done, total=total)

        monkeypatch.setattr(Runner, "outputs", recording)
    task = load_ablation_task(model_dir, settings, device="cpu")
    record = ablate(task, settings, ResultCache(root, "fp", task.data_hash(), settings.method))
    return record, asked


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_the_pairs_are_those_among_the_top_k_heads_by_single_change(model_dir, data, tmp_path, monkeypatch):
    settings = _settings(data, experiments={**OFF, "single_heads": True, "head_pairs": True})
    record, asked = _run(model_dir, settings, tmp_path / "c", monkeypatch)
    pairs, singles = record.head_pairs, record.single_heads
    assert record.experiments == ["single_heads", "head_pairs"]
    delta = np.array(singles.delta, dtype=np.float64).ravel()
    top = sorted(range(12), key=lambda flat: (-abs(delta[flat]), flat))[:4]
    assert pairs.heads == [[flat // 4, flat % 4] for flat in top]
    assert abs(delta[top[0]]) > abs(delta[top[-1]])  # a real ordering, not ties
    assert pairs.single_change == pytest.approx([delta[flat] for flat in top], abs=1e-12)
    assert [(pair.first, pair.second) for pair in pairs.pairs] == [
        (pairs.heads[i], pairs.heads[j]) for i, j in itertools.combinations(range(4), 2)]
    assert pairs.top_k == 4 and "top k = 4" in pairs.selection and "6 pairs" in pairs.selection
    # the runner was asked for every single head (read back from single_heads' cache) and exactly the 6 pairs
    requested = asked["head_pairs"]
    assert len(requested) == 12 + 6
    assert [np.flatnonzero(mask.ravel() == 0).tolist() for mask in requested[:12]] == [[flat] for flat in range(12)]
    zeros = {tuple(np.flatnonzero(mask.ravel() == 0).tolist()) for mask in requested[12:]}
    assert zeros == {tuple(sorted(pair)) for pair in itertools.combinations(top, 2)}
    assert all(set(np.unique(mask)) == {0.0, 1.0} for mask in requested)


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_the_interaction_is_the_pairs_change_minus_both_single_changes(model_dir, data, tmp_path):
    settings = _settings(data)
    record, _ = _run(model_dir, settings, tmp_path / "c")
    task = load_ablation_task(model_dir, settings, device="cpu")

    def metric(zeroed: list[list[int]]) -> float:  # the slow plain path, head by head
        mask = np.ones((3, 4), dtype=np.float32)
        for layer, head in zeroed:
            mask[layer, head] = 0
        outputs = evaluate_plain(task, mask, settings.method)
        return float(task.metrics(outputs[None], task.gold[None])[task.primary][0])

    base = metric([])
    assert record.head_pairs.baseline == pytest.approx(base, abs=1e-6)
    for pair in record.head_pairs.pairs:
        both, first, second = metric([pair.first, pair.second]), metric([pair.first]), metric([pair.second])
        expected = (both - base) - (first - base) - (second - base)
        assert pair.interaction == pytest.approx(expected, abs=1e-6)
        assert pair.interaction_relative == pytest.approx(expected / abs(base), abs=1e-6)
        assert pair.change == pytest.approx(both - base, abs=1e-6) and pair.value == pytest.approx(both, abs=1e-6)
    assert any(abs(pair.interaction) > 1e-3 for pair in record.head_pairs.pairs)  # not all zero: a real check


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_all_pairs_and_the_test_can_pass_the_correction(model_dir, data, tmp_path):
    record, _ = _run(model_dir, _settings(data, head_pairs={"top_k": 4, "all": True}), tmp_path / "c")
    pairs = record.head_pairs
    assert len(pairs.pairs) == 12 * 11 // 2 and pairs.top_k is None and "every pair" in pairs.selection
    assert {(tuple(pair.first), tuple(pair.second)) for pair in pairs.pairs} == {
        (divmod(a, 4), divmod(b, 4)) for a, b in itertools.combinations(range(12), 2)}
    assert pairs.heads == [[flat // 4, flat % 4] for flat in range(12)]
    assert pairs.tested == 66 and pairs.bootstrap_samples == 200
    for pair in pairs.pairs:
        assert 1 >= pair.p_adjusted >= pair.p_value > 0
        assert pair.ci[0] <= pair.ci[1] and pair.significant == (pair.p_adjusted < 0.05)
    assert pairs.significant_count == sum(pair.significant for pair in pairs.pairs)
    json.dumps(record.model_dump(mode="json"), allow_nan=False)
    assert Ablation.model_validate(record.model_dump(mode="json")) == record


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_switched_off_there_is_no_record_and_no_section(model_dir, data, tmp_path):
    from reportgen.site.charts import chartdata

    record, asked = _run(model_dir, _settings(data, experiments={**OFF, "whole_layers": True}), tmp_path / "c")
    assert record.head_pairs is None and "head_pairs" not in record.experiments
    assert "head_pairs" not in chartdata.ablation_charts(record)
    assert AblationSettings.model_validate(defaults()["ablation"]).experiments.head_pairs is False


def test_the_settings_are_validated(data):
    with pytest.raises(ValueError, match="top_k"):
        _settings(data, head_pairs={"top_k": 1, "all": False})
    with pytest.raises(ValueError, match="extra"):
        _settings(data, head_pairs={"top_k": 4, "all": False, "every": True})


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_the_bootstrap_matches_a_direct_loop_over_resamples(model_dir, data):
    """bootstrap_contrasts against its definition, one resample at a time: the same draws (stream 5 of
    the seed), all four conditions scored on each, the percentile CI and the two-sided normal p-value
    from the resamples' standard deviation."""
    task = load_ablation_task(model_dir, _settings(data), device="cpu")
    rng = np.random.default_rng(7)
    outputs = task.gold[None, :, None] + rng.normal(0, 2.0, (5, task.n_examples, 1))  # 5 noisy conditions
    terms = np.array([[1, 2, 3, 0], [4, 1, 2, 0], [3, 4, 1, 0]])
    signs = np.array([1.0, -1.0, -1.0, 1.0])
    tested = bootstrap_contrasts(task, outputs, terms, signs, samples=300, seed=3)

    def contrasts(values: np.ndarray, gold: np.ndarray) -> np.ndarray:
        rho = spearman_rows(values[..., 0], np.broadcast_to(gold, values.shape[:-1]))
        return (rho[terms] * signs).sum(-1)

    observed = contrasts(outputs, task.gold)
    picked = np.random.default_rng([3, 5]).integers(0, task.n_examples, size=(300, task.n_examples))
    draws = np.stack([contrasts(outputs[:, rows], task.gold[rows]) for rows in picked])
    se = draws.std(0, ddof=1)
    p = [math.erfc(abs(value) / deviation / math.sqrt(2)) for value, deviation in zip(observed, se, strict=True)]
    assert tested["observed"] == pytest.approx(observed, abs=1e-12)
    assert tested["se"] == pytest.approx(se, abs=1e-12) and tested["p"] == pytest.approx(p, abs=1e-12)
    assert tested["ci"] == pytest.approx(np.percentile(draws, [2.5, 97.5], axis=0).T, abs=1e-12)
    alone = bootstrap_contrasts(task, outputs, terms[1:2], signs, samples=300, seed=3)
    assert alone["p"][0] == tested["p"][1]  # batching the tests changes no p-value


def test_helpers_choose_and_mask_as_documented():
    assert chosen_heads(np.array([[0.1, -0.5], [np.nan, 0.3]]), 3).tolist() == [1, 3, 0]  # NaN last
    assert chosen_heads(np.zeros((2, 2)), None).tolist() == [0, 1, 2, 3]
    pairs = pair_positions(3)
    assert pairs.tolist() == [[0, 1], [0, 2], [1, 2]]
    masks = pair_masks(np.array([5, 0, 2]), pairs, (2, 3))
    assert [np.flatnonzero(mask.ravel() == 0).tolist() for mask in masks] == [[0, 5], [2, 5], [0, 2]]


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_ablation_page_shows_the_pairs_heatmap(tmp_path_factory, model_dir, open_page, viewport):
    from reportgen.config import load_config
    from reportgen.pipeline import build

    project = tmp_path_factory.getbasetemp() / "pairs-site"
    if not (project / "site" / "ablation.html").exists():  # one build for both viewports
        project.mkdir(exist_ok=True)
        data = write_graded_pairs(project / "pairs.tsv")
        write_config(project, f"model: {model_dir}\ndevice: cpu\nexamples:\n  - text: the cat sat on the mat.\n"
                               f"ablation:\n  data: {data}\n  seeds: [0]\n  fractions: [0.0, 0.5]\n"
                               "  bootstrap_samples: 100\n  permutations: 100\n"
                               "  experiments: {head_pairs: true, importance: false, layer_halves: false}\n"
                               "  head_pairs: {top_k: 5}\n")
        build(load_config(project / "reportgen.yaml"))
    report = check_report(project / "site")  # the published schema holds the new record
    pairs = report["ablation"]["head_pairs"]
    assert len(pairs["pairs"]) == 10
    view = open_page((project / "site" / "ablation.html").as_uri(), viewport)
    heading = view.page.locator("#ablation-head-pairs")
    assert heading.count() == 1 and "Pairs of heads" in heading.inner_text()
    view.page.wait_for_selector("#chart-head-pairs svg", timeout=10_000)
    rows = view.page.evaluate("() => document.getElementById('chart-head-pairs').rgView.data('source_0')")
    assert len(rows) == 10
    first = pairs["pairs"][0]
    cell = next(row for row in rows if row["first"] == f"L{first['first'][0]} H{first['first'][1]}"
                and row["second"] == f"L{first['second'][0]} H{first['second'][1]}")
    assert cell["interaction"] == pytest.approx(first["interaction"], abs=1e-9)
    text = view.page.locator("#ablation-head-pairs ~ p").first.inner_text()
    assert f"{pairs['tested']} pairs were tested" in text and f"significant for {pairs['significant_count']}" in text
    box = view.page.locator("#chart-head-pairs svg").bounding_box()
    assert box["width"] > 100 and box["height"] > 100
    assert view.errors == [] and view.remote_requests == []
