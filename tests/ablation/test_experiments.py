"""The ablation engine and experiments: fast path == plain path, importance, statistics, resume.

Models are tiny random BERTs (tests/helpers.py `make_ablation_bert`, with the embedded model's tokenizer
files only; conftest's `model_dir` and `data`); the test that runs the embedded model is marked slow."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from reportgen.ablation import experiments as ablation
from reportgen.ablation.engine import Engine, ResultCache, Runner, evaluate_plain
from reportgen.ablation.experiments import ablate
from reportgen.ablation.records import run_ablations
from reportgen.ablation.task_loading import load_ablation_task, load_task
from reportgen.ablation.tasks import pool
from reportgen.config import AblationSettings, defaults
from reportgen.model.head_sites import locate
from reportgen.report import Ablation
from reportgen.stats import adjust, bootstrap_ci, paired_permutation_p, relative_change
from tests.helpers import GRADED_PAIRS, embedded_model_dir, make_ablation_bert

# Similarity outputs are cosines rounded to SCORE_DECIMALS (5): float noise of 1e-7 can put two equal outputs
# one rounding step (1e-5) apart, so the tolerance is one step and a little more.
TOL = 1.1e-5


def _masks(layers=3, heads=4):
    """All ones, one head, one whole layer, six random heads, and every gate at 0.5."""
    rng = np.random.default_rng(0)
    ones = np.ones((layers, heads), dtype=np.float32)
    head = ones.copy()
    head[2, 1] = 0
    layer = ones.copy()
    layer[1] = 0
    random = ones.copy().ravel()
    random[rng.choice(layers * heads, 6, replace=False)] = 0
    soft = np.full((layers, heads), 0.5, dtype=np.float32)
    return [ones, head, layer, random.reshape(layers, heads), soft]


@pytest.mark.parametrize("method", ["zero", "uniform"])
@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_fast_path_equals_plain_path(model_dir, data, method):
    task = load_task("similarity", model_dir, data)
    assert len(task.units) < 2 * task.n_examples  # duplicates were merged
    masks = _masks()
    plain = [evaluate_plain(task, mask, method, batch_size=5) for mask in masks]
    with Engine(task, method, batch_tokens=96) as engine:
        assert len(engine.batches) > 1 and engine.record_depth is None
        fast = engine.evaluate(np.stack(masks))  # several masks per forward where batches are small
        one_by_one = [engine.evaluate(mask[None])[0] for mask in masks]
        # zero on BERT: every layer's attention recorded, a layer-l mask starts inside layer l;
        # uniform: outputs of layers 0 and 1 recorded, a layer-2 mask starts at layer 2
        assert engine.resumes == (method == "zero")
        assert engine.record_depth == (3 if method == "zero" else 2)
    for want, together, alone in zip(plain, fast, one_by_one, strict=True):
        assert np.abs(want - together).max() < TOL and np.abs(want - alone).max() < TOL
    assert np.abs(plain[0] - plain[2]).max() > 1e-3  # the masks change the outputs


@pytest.mark.parametrize("method", ["zero", "uniform"])
def test_layers_below_the_first_masked_one_are_not_run(model_dir, data, method):
    task = load_task("similarity", model_dir, data)
    with Engine(task, method) as engine:
        engine.evaluate(_masks()[0][None])  # records the unmasked layers
        sites = locate(task.model)
        attention = dict.fromkeys(range(3), 0)
        ffn = dict.fromkeys(range(3), 0)

        def counter(calls, depth):
            return lambda _module, _args: calls.__setitem__(depth, calls[depth] + 1)

        handles = [sites.out_proj[depth].register_forward_pre_hook(counter(attention, depth)) for depth in range(3)]
        handles += [sites.layers[depth].intermediate.register_forward_pre_hook(counter(ffn, depth))
                    for depth in range(3)]
        engine.evaluate(_masks()[1][None])  # head in layer 2
        for handle in handles:
            handle.remove()
    batches = len(engine.batches)
    assert ffn == {0: 0, 1: 0, 2: batches}
    # zero: layer 2 starts at its attention LayerNorm, so its attention does not run either
    assert attention == {0: 0, 1: 0, 2: 0 if method == "zero" else batches}


def _all_single_heads_and_some_groups(layers, heads, seed=0):
    rng = np.random.default_rng(seed)
    masks = []
    for layer in range(layers):
        for head in range(heads):
            mask = np.ones((layers, heads), dtype=np.float32)
            mask[layer, head] = 0
            masks.append(mask)
    for first in range(layers):  # several heads, the first in layer `first`, some above it
        mask = np.ones((layers, heads), dtype=np.float32)
        mask[first, rng.choice(heads, 2, replace=False)] = 0
        if first + 1 < layers:
            mask[first + 1:].ravel()[rng.choice((layers - first - 1) * heads, 3, replace=False)] = 0
        masks.append(mask)
    return masks


@pytest.mark.parametrize("batch_tokens", [96, 4096])
@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_zero_single_and_multi_head_masks_equal_plain(model_dir, data, batch_tokens, tmp_path):
    """Fast (resumed inside the first masked layer, stacked, bucketed) == plain for every single
    head and multi-head masks, evaluated together with mixed first layers and grouped by Runner."""
    task = load_task("similarity", model_dir, data)
    masks = _all_single_heads_and_some_groups(3, 4)
    plain = [evaluate_plain(task, mask, "zero", batch_size=5) for mask in masks]
    with Engine(task, "zero", batch_tokens=batch_tokens) as engine:
        assert engine.resumes
        together = engine.evaluate(np.stack(masks))  # first masked layers 0, 1 and 2 in one call
        runner = Runner(engine, ResultCache(tmp_path, "fp", "d", "zero"), None)
        by_runner = runner.outputs("x", masks)  # stacks of equal first layer
    for want, stacked, grouped in zip(plain, together, by_runner, strict=True):
        assert np.abs(want - stacked).max() < TOL and np.abs(want - grouped).max() < TOL


def test_the_runners_first_stack_of_several_masks_is_one_mask_then_stacks_as_before(model_dir, data, tmp_path):
    """The first partial site waits for the experiments' pace (ablation.watch.first_site_due): the runner makes its
    first stack of several masks a stack of one, so the pace is known a forward in, then stacks as before."""
    task = load_task("similarity", model_dir, data)
    ticks = []
    singles = _all_single_heads_and_some_groups(3, 4)[:12]  # every head alone: stacks of 4 per first layer
    with Engine(task, "zero", batch_tokens=4096) as engine:
        assert engine.masks_per_pass >= 4
        runner = Runner(engine, ResultCache(tmp_path, "fp", "d", "zero"), lambda *tick: ticks.append(tick))
        runner.outputs("baseline", [np.ones((3, 4), dtype=np.float32)])  # a stack of one already: no split
        assert not runner.paced
        first = runner.outputs("single", singles[:8])
        later = runner.outputs("more", singles[8:])
        plain = [evaluate_plain(task, mask, "zero", batch_size=5) for mask in singles]
    assert runner.paced
    assert [done for name, done, _ in ticks if name == "single"] == [0, 1, 4, 8]  # 1 mask, then 3, then 4
    assert [done for name, done, _ in ticks if name == "more"] == [0, 4]  # split once a run, not per experiment
    for want, got in zip(plain, first + later, strict=True):
        assert np.abs(want - got).max() < TOL


@pytest.mark.slow
def test_embedded_model_fast_equals_plain():
    """The real model (6 x 12 heads): single heads in every layer and multi-head masks, zero method."""
    task = load_task("similarity", embedded_model_dir(), "builtin", limit=24)
    layers, heads = 6, 12
    rng = np.random.default_rng(1)
    masks = []
    for layer in range(layers):
        mask = np.ones((layers, heads), dtype=np.float32)
        mask[layer, rng.integers(heads)] = 0
        masks.append(mask)
    for first in (0, 3, 5):
        mask = np.ones((layers, heads), dtype=np.float32)
        above = (layers - first) * heads
        mask[first:].ravel()[rng.choice(above, min(10, above), replace=False)] = 0
        mask[first, 0] = 0
        masks.append(mask)
    whole = np.ones((layers, heads), dtype=np.float32)
    whole[2] = 0
    masks.append(whole)
    plain = [evaluate_plain(task, mask, "zero") for mask in masks]
    with Engine(task, "zero", batch_tokens=512) as engine:
        assert engine.resumes and engine.record_depth is None
        fast = engine.evaluate(np.stack(masks))
        assert engine.record_depth == layers
        base = engine.evaluate(np.ones((1, layers, heads), dtype=np.float32))[0]
    for want, got in zip(plain, fast, strict=True):
        assert np.abs(want - got).max() < TOL
    assert np.abs(base - evaluate_plain(task, np.ones((layers, heads), np.float32), "zero")).max() < TOL
    assert max(np.abs(want - base).max() for want in plain) > 1e-4  # the masks change the cosines


def test_length_buckets_pad_only_where_small_buckets_merge(model_dir, data):
    task = load_task("similarity", model_dir, data)
    lengths = np.array([len(u["input_ids"]) for u in task.units])
    for budget in (64, 96, 4096):
        batches = task.length_batches(budget)
        assert sorted(np.concatenate([batch.units for batch in batches]).tolist()) == list(range(len(task.units)))
        for batch in batches:
            real = int(batch.inputs["attention_mask"].sum())
            in_batch = lengths[batch.units]
            assert batch.tokens <= max(budget, int(in_batch.max()))
            assert batch.tokens - real <= batch.tokens / 16  # merged buckets waste at most 1/16
            if len(set(in_batch.tolist())) > 1:  # only buckets too small for a forward merge
                assert any((in_batch == length).sum() * length < budget // 16 for length in set(in_batch.tolist()))
    exact = task.length_batches(4096, min_tokens=0)  # no merging: one exact length per batch, no padding
    assert all(batch.tokens == int(batch.inputs["attention_mask"].sum()) for batch in exact)
    assert len(exact) == len(set(lengths.tolist()))


def test_plain_path_inside_an_engine_leaves_both_intact(model_dir, data):
    task = load_task("similarity", model_dir, data)
    head, layer = _masks()[1], _masks()[2]
    with Engine(task, "zero") as engine:
        first = engine.evaluate(head[None])[0]
        plain = evaluate_plain(task, head, "zero")  # a second masker on the same model, nested
        again = engine.evaluate(layer[None])[0]
    assert np.abs(first - plain).max() < TOL
    assert np.abs(again - evaluate_plain(task, layer, "zero")).max() < TOL
    assert all("forward" not in layer_module.__dict__ for layer_module in locate(task.model).layers)


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_without_room_to_record_the_result_is_the_same(model_dir, data):
    task = load_task("similarity", model_dir, data)
    masks = np.stack(_masks()[:3])
    with Engine(task, "zero", record_bytes=0) as engine:
        slow = engine.evaluate(masks)
        assert engine.record_depth == 0
    with Engine(task, "zero") as engine:
        fast = engine.evaluate(masks)
    assert max(np.abs(full - resumed).max() for full, resumed in zip(slow, fast, strict=True)) < TOL


@pytest.mark.parametrize("kind", ["classification", "mlm"])
@pytest.mark.slow  # seconds of model runs: kept out of the edit-test loop
def test_fast_path_equals_plain_for_other_tasks(tmp_path, kind):
    if kind == "classification":
        root = make_ablation_bert(tmp_path / "m", "BertForSequenceClassification", num_labels=2)
        rows = "".join(f'{{"text": "{a}", "pair": "{b}", "label": {int(score > 2)}}}\n' for a, b, score in GRADED_PAIRS)
        columns = {"text": "text", "pair": "pair", "label": "label"}
    else:
        root = make_ablation_bert(tmp_path / "m", "BertForMaskedLM")
        rows = "".join(f'{{"text": "{a} {b}"}}\n' for a, b, _ in GRADED_PAIRS)
        columns = None
    path = tmp_path / "d.jsonl"
    path.write_text(rows, encoding="utf-8")
    task = load_task(kind, root, path, columns=columns)
    masks = _masks()[:3]
    with Engine(task, "uniform", batch_tokens=128) as engine:
        fast = engine.evaluate(np.stack(masks))
    for mask, got in zip(masks, fast, strict=True):
        want = evaluate_plain(task, mask, "uniform", batch_size=4)
        assert np.abs(want - got).max() < 1e-4  # losses are sums over tokens


def _reference_importance(task, mask):
    """Michel et al.'s per-token importance with hand-made gates, one padded batch, no engine."""
    model = task.model
    sites = locate(model)
    layers, heads, size = sites.n_layers, sites.heads, sites.head_dim
    batch = task.make_batch(range(len(task.units)))
    att = batch.inputs["attention_mask"]
    rows, tokens = att.shape
    gates = torch.ones(layers, rows, tokens, heads, requires_grad=True)
    mask_tensor = torch.as_tensor(mask)

    def hook_for(layer):
        def hook(_module, args):
            gated = args[0].view(rows, tokens, heads, size) * (gates[layer] * mask_tensor[layer]).unsqueeze(-1)
            return (gated.reshape(rows, tokens, heads * size),)
        return hook

    handles = [sites.out_proj[layer].register_forward_pre_hook(hook_for(layer)) for layer in range(layers)]
    try:
        with torch.enable_grad():
            embedded = pool(model(**batch.inputs).last_hidden_state, att, ["mean_tokens"])
            task.loss(embedded).backward()  # batch rows are units 0..rows-1 in order
    finally:
        for handle in handles:
            handle.remove()
    return ((gates.grad.abs() * att[None, :, :, None]).sum((1, 2)) / att.sum()).numpy()


def test_importance_matches_reference(model_dir, tmp_path):
    distinct = tmp_path / "d.tsv"  # no repeated texts: the reference does not dedupe
    distinct.write_text("sentence1\tsentence2\tscore\n"
                        + "".join(f"{a} {i}\t{b} {i}\t{score}\n" for i, (a, b, score) in enumerate(GRADED_PAIRS)),
                        encoding="utf-8")
    task = load_task("similarity", model_dir, distinct)
    mask = np.ones((3, 4), dtype=np.float32)
    mask[0, 2] = 0
    with Engine(task, "zero", batch_tokens=96) as engine:
        got = engine.importance(mask)
    want = _reference_importance(task, mask)
    assert got.shape == (3, 4) and got[0, 2] == 0 and (np.delete(got.ravel(), 2) > 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-9)



# over 60 s on a loaded machine: the embedded model's importance gradients, three passes on two threads
@pytest.mark.slow
def test_importance_is_bit_identical_pass_after_pass():
    """The gradients behind importance add threads' partial sums; with deterministic kernels two passes
    over the same inputs agree to the last bit (without them the embedded model's differed by 4e-8
    relative), so a --reproducible build is byte-identical. The caller's setting comes back after."""
    settings = AblationSettings.model_validate(defaults()["ablation"])
    task = load_ablation_task(embedded_model_dir(), settings, device="cpu")
    mask = np.ones((6, 12), dtype=np.float32)
    torch.use_deterministic_algorithms(False)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the tests' one thread (conftest) would hide the race
    try:
        with Engine(task, "zero", batch_tokens=settings.batch_tokens) as engine:
            passes = [engine.importance(mask) for _ in range(3)]
    finally:
        torch.set_num_threads(threads)
    assert not torch.are_deterministic_algorithms_enabled()
    assert all(np.array_equal(passes[0], other) for other in passes[1:])

# -- statistics ---------------------------------------------------------------------------------
def test_holm_and_bonferroni_known_values():
    p_values = [0.01, 0.04, 0.03, 0.005]
    assert adjust(p_values, "holm").tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust(p_values, "bonferroni").tolist() == pytest.approx([0.04, 0.16, 0.12, 0.02])


def test_relative_change_and_its_undefined_cases():
    assert relative_change([0.5, 0.9], 0.8).tolist() == pytest.approx([-0.375, 0.125])
    assert relative_change([-0.3], -0.2).tolist() == pytest.approx([-0.5])  # |base|: a lower value is a drop
    assert np.isnan(relative_change([0.5, 0.9], 0.0)).all()
    undefined = relative_change(np.ones((2, 3)), None)
    assert undefined.shape == (2, 3) and np.isnan(undefined).all()
    assert np.isnan(relative_change([0.5], float("nan"))).all()


def test_permutation_p_and_bootstrap_ci(model_dir, data):
    task = load_task("similarity", model_dir, data)
    base = task.gold[:, None] / 5.0  # perfectly ranked predictions
    assert paired_permutation_p(task, base, base.copy(), 500, 0) == 1.0
    worse = base[::-1].copy()  # reversed ranking
    assert paired_permutation_p(task, base, worse, 500, 0) < 0.05
    ci = bootstrap_ci(task, base + np.random.default_rng(0).normal(0, 0.3, base.shape), 300, 0)
    low, high = ci["spearman"]
    assert -1 <= low < high <= 1


def test_resampling_reports_its_progress_when_it_takes_more_than_one_chunk(model_dir, data, monkeypatch):
    """Issue 27: a statistic with many resamples shows progress (`reportgen.progress.drew`), each draw counted
    once, in order, up to the total; one that fits in one chunk adds no bar; listening changes no number."""
    from reportgen import stats
    from reportgen.progress import reporting_draws

    task = load_task("similarity", model_dir, data)
    outputs = task.gold[:, None] / 5.0 + np.random.default_rng(0).normal(0, 0.3, (task.n_examples, 1))
    seen: list[tuple[str, int, int]] = []
    with reporting_draws(lambda kind, done, total: seen.append((kind, done, total))):
        quiet = bootstrap_ci(task, outputs, 300, 0), paired_permutation_p(task, outputs, outputs[::-1].copy(), 300, 0)
    assert seen == []  # each fits in one chunk of DRAWS_PER_CHUNK draws
    chunk = 7
    monkeypatch.setattr(stats, "DRAWS_PER_CHUNK", chunk * task.n_examples)
    unheard = bootstrap_ci(task, outputs, 300, 0)
    with reporting_draws(lambda kind, done, total: seen.append((kind, done, total))):
        heard = bootstrap_ci(task, outputs, 300, 0)
    assert heard == unheard and set(quiet[0]) == set(heard)
    assert [kind for kind, _, _ in seen] == ["resamples"] * 43  # ceil(300 / 7) chunks
    assert [done for _, done, _ in seen] == [*range(7, 300, 7), 300] and {total for _, _, total in seen} == {300}
    seen.clear()
    with reporting_draws(lambda kind, done, total: seen.append((kind, done, total))):
        paired_permutation_p(task, outputs, outputs[::-1].copy(), 300, 0)
    assert seen[-1] == ("permutations", 300, 300) and len(seen) == 43


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_an_experiments_resampling_shows_as_a_stage_of_its_own(model_dir, data, tmp_path, monkeypatch):
    """What `reportgen build` draws as bars: "<experiment>: resamples" beside the experiment's masks."""
    from reportgen import stats

    monkeypatch.setattr(stats, "DRAWS_PER_CHUNK", 50)
    seen: list[tuple[str, int, int]] = []
    run_ablations(model_dir, _settings(data=str(data)), device="cpu", cache_dir=tmp_path, fingerprint="fp",
                  progress=lambda name, done, total: seen.append((name, done, total)))
    stages = {name for name, _, _ in seen}
    assert {"baseline: resamples", "single_heads: permutations", "random_fraction: resamples"} <= stages
    baseline = [(done, total) for name, done, total in seen if name == "baseline: resamples"]
    assert baseline[-1] == (200, 200) and [done for done, _ in baseline] == sorted(done for done, _ in baseline)


# -- settings, experiments and resume -----------------------------------------------------------
def _settings(**over) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(data="x", seeds=[0, 1], fractions=[0.0, 0.25, 0.5], bootstrap_samples=200, permutations=200,
               batch_tokens=96, max_length=96)  # a pass holds one whole text
    raw.update(over)
    return AblationSettings.model_validate(raw)


def test_defaults_validate_and_mistakes_are_refused():
    settings = AblationSettings.model_validate(defaults()["ablation"])
    assert settings.data == "builtin" and settings.task == "similarity" and settings.experiments.single_heads
    with pytest.raises(ValidationError, match="extra"):
        AblationSettings.model_validate({**defaults()["ablation"], "sedes": [1]})
    with pytest.raises(ValidationError, match="fractions must be in"):
        AblationSettings.model_validate({**defaults()["ablation"], "fractions": [0.5, 1.0]})


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_report_shapes_and_json(model_dir, data, tmp_path):
    seen = []
    report = run_ablations(model_dir, _settings(data=str(data)), device="cpu", cache_dir=tmp_path, fingerprint="fp",
                           progress=lambda name, done, total: seen.append((name, done, total)))
    assert isinstance(report, Ablation)
    dumped = report.model_dump(mode="json")
    json.dumps(dumped, allow_nan=False)
    assert Ablation.model_validate(dumped) == report  # the record survives its JSON form
    assert report.experiments == list(ablation.EXPERIMENTS)
    base = report.baseline
    assert base.ci["spearman"][0] <= base.value <= base.ci["spearman"][1]
    heads = report.single_heads
    assert np.array(heads.value).shape == (3, 4) and np.array(heads.significant).dtype == bool
    assert (np.array(heads.p_adjusted) >= np.array(heads.p_value) - 1e-12).all()
    assert heads.permutations >= 2 * 12 / 0.05  # the smallest p-value can pass Holm over 12 heads
    assert np.array(heads.delta) == pytest.approx(np.array(heads.value) - base.value)
    assert np.array(heads.relative) == pytest.approx((np.array(heads.value) - base.value) / abs(base.value))
    assert len(report.whole_layers.value) == 3 and report.whole_layers.layers == [0, 1, 2]
    fractions = report.random_fraction
    assert fractions.n_masked == [0, 3, 6] and np.array(fractions.values).shape == (3, 2)
    assert fractions.values[0] == [base.value] * 2  # p = 0 is the baseline
    assert fractions.mean == pytest.approx(np.array(fractions.values).mean(1).tolist())
    halves = report.layer_halves
    assert halves.lower_layers == [0] and halves.upper_layers == [1, 2]
    assert halves.fractions == [0.0, 0.25]  # the lower half holds only 4 of 12 heads: 50% (6) does not fit
    assert np.array(halves.lower.values).shape == (2, 2)
    importance = report.importance
    norms = np.linalg.norm(np.array(importance.importance), axis=1)
    assert norms == pytest.approx(np.ones(3))  # per-layer L2 normalisation
    assert importance.pruning.n_pruned == [0, 3, 6] and len(importance.pruning.order) == 6
    # the first random pruning orders reuse the random-fraction masks (one per seed); more are drawn up to the setting
    orders = importance.random_order
    assert orders.orders == 20 and np.array(orders.values).shape == (20, 3)
    assert np.array(orders.values)[:2].T.tolist() == fractions.values
    assert importance.area.floor == pytest.approx(1 / 21) and importance.area.p_value >= importance.area.floor
    assert importance.comparison.fractions == [0.25, 0.5]  # nothing is pruned at 0
    assert importance.non_inferiority.non_inferior[0] and importance.non_inferiority.change_ci[0] == [0.0, 0.0]
    assert importance.calibration.error_removed >= 0
    inferiority = fractions.non_inferiority
    assert inferiority.margin == 0.01 and len(inferiority.change_ci) == 3 and inferiority.worst[1] in (0, 1)
    assert halves.comparison.fractions == [0.25] and len(halves.same_mask) == 2
    last = {}
    for name, done, total in seen:
        assert done <= total and done >= last.get(name, 0)
        last[name] = done
    assert set(last) == set(ablation.EXPERIMENTS)
    assert all(last[name] == total for name, _, total in seen)  # every bar reaches its end


def test_experiments_switched_off_are_null(model_dir, data, tmp_path):
    off = dict.fromkeys(ablation.EXPERIMENTS, False)
    report = run_ablations(model_dir, _settings(data=str(data), experiments={**off, "whole_layers": True}),
                           device="cpu", cache_dir=tmp_path, fingerprint="fp")
    assert report.experiments == ["whole_layers"] and report.whole_layers.layers == [0, 1, 2]
    assert all(report[name] is None for name in ablation.EXPERIMENTS if name != "whole_layers")


@pytest.mark.slow  # seconds of model runs: kept out of the edit-test loop
def test_interrupted_run_resumes_without_recomputing(model_dir, data, tmp_path, monkeypatch):
    settings = _settings(data=str(data))
    task = load_ablation_task(model_dir, settings, device="cpu")

    def cache(name: str) -> ResultCache:
        return ResultCache(tmp_path / name, "fp", task.data_hash(), settings.method)

    stored: list[tuple[str, bytes]] = []
    real_put = ResultCache.put

    def counting_put(self, kind, mask, value):
        stored.append((kind, np.asarray(mask, np.float32).tobytes()))
        real_put(self, kind, mask, value)

    monkeypatch.setattr(ResultCache, "put", counting_put)

    def stop_midway(name, done, _total):
        if name == "single_heads" and done >= 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ablate(task, settings, cache("c"), progress=stop_midway)
    finished = set(stored)
    assert len(finished) >= 5 and len(finished) < 13  # baseline + some heads, not all

    evaluated: list[bytes] = []
    real_evaluate = Engine.evaluate

    def counting_evaluate(self, masks):
        evaluated.extend(np.asarray(mask, np.float32).tobytes() for mask in masks)
        return real_evaluate(self, masks)

    monkeypatch.setattr(Engine, "evaluate", counting_evaluate)
    second = cache("c")
    resumed = ablate(task, settings, second)
    assert not {("mask", mask) for mask in evaluated} & finished  # nothing finished was recomputed
    assert second.loaded >= len(finished)

    evaluated.clear()
    third = cache("c")
    again = ablate(task, settings, third)
    assert evaluated == [] and third.computed == 0 and third.loaded > 0

    fresh = ablate(task, settings, cache("other"))
    assert resumed == fresh == again


def test_cache_key_depends_on_fingerprint_and_method(tmp_path):
    mask = np.ones((2, 2), dtype=np.float32)
    first = ResultCache(tmp_path, "fpA", "data", "zero")
    first.put("mask", mask, np.zeros((3, 1)))
    assert first.get("mask", mask) is not None
    assert ResultCache(tmp_path, "fpB", "data", "zero").get("mask", mask) is None
    assert ResultCache(tmp_path, "fpA", "data", "uniform").get("mask", mask) is None
    other = mask.copy()
    other[0, 0] = 0
    assert first.get("mask", other) is None


def test_halves_with_no_fraction_to_compare_state_no_finding(model_dir, data, tmp_path):
    """With fractions [0, 0.5] on 3 layers the lower half (4 of 12 heads) holds no tested fraction: the halves
    have no comparison, and the findings say nothing about them rather than fail."""
    from reportgen.findings.ablation import ablation_findings

    off = dict.fromkeys(ablation.EXPERIMENTS, False)
    report = run_ablations(model_dir, _settings(data=str(data), fractions=[0.0, 0.5],
                                                experiments={**off, "baseline": True, "layer_halves": True}),
                           device="cpu", cache_dir=tmp_path, fingerprint="fp")
    assert report.layer_halves.fractions == [0.0] and report.layer_halves.comparison is None
    found = [finding.id for finding in ablation_findings(report)]
    assert found and "ablation-layer-halves" not in found
