"""Fast rebuilds on the analysis side (issue 16): the ablation statistics are cached, and computed faster.

- A rebuild with nothing changed reads the whole ablation record back without loading the model;
  a changed setting misses and recomputes, and each experiment then reuses its own statistics when
  what they read is unchanged (`Context.remembered`).
- The batched permutation tests and bootstrap intervals give the very numbers, to the last bit, of
  the one-test-at-a-time way they were computed before (written out here as the reference).

Models are tiny random BERTs (tests/helpers.py `make_tiny_bert`); nothing here is slow.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from reportgen.ablation import experiment_context, experiments
from reportgen.ablation.engine import ResultCache
from reportgen.ablation.experiment_context import EXPERIMENT_SETTINGS
from reportgen.ablation.experiments import EXPERIMENTS, ablate
from reportgen.ablation.records import record_key, run_ablations
from reportgen.ablation.task_loading import load_ablation_task
from reportgen.ablation.tasks import ClassificationTask, SimilarityTask
from reportgen.config import AblationSettings, defaults
from reportgen.stats import DRAWS_PER_CHUNK, SwappedRanks, paired_change_cis, paired_permutation_ps

PAIRS = [("the cat sat on the mat", "a cat sat on a mat", 5.0), ("the cat sat", "a red car", 1.0),
         ("i went to the store", "i bought fresh strawberries", 2.5), ("the dog sat", "the cat sat", 4.0),
         ("a red ball", "she bought a red car", 3.0), ("he was at the store", "the dog is on the mat", 0.5),
         ("she sat on the mat", "a dog sat on a mat", 4.5), ("the red car", "he bought a red ball", 2.0)]


def _data(path: Path, pairs=PAIRS) -> Path:
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs),
                    encoding="utf-8")
    return path


def _settings(data: Path, **over) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(data=str(data), seeds=[0, 1], fractions=[0.0, 0.25, 0.5], bootstrap_samples=100, permutations=100,
               batch_tokens=256, importance={**raw["importance"], "random_orders": 4})
    raw.update(over)
    return AblationSettings.model_validate(raw)


def _stats_entries(cache: Path) -> set[Path]:
    return set(cache.glob("ablation/*/*/stats-*.json"))


# -- the whole record: a rebuild with nothing changed ------------------------------------------------------
@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_a_rebuild_with_nothing_changed_reads_the_record_back_without_the_model(tiny_model, tmp_path, monkeypatch):
    data, cache = _data(tmp_path / "pairs.tsv"), tmp_path / "cache"
    first = run_ablations(tiny_model, _settings(data), device="cpu", cache_dir=cache, fingerprint="fp")
    records = list(cache.glob("ablation/fp/record-*.json"))
    assert len(records) == 1 and len(_stats_entries(cache)) == len(EXPERIMENTS)
    stored = json.loads(records[0].read_bytes().partition(b"\n")[2])  # after its checksum line
    assert set(stored) == {"record", "warnings", "uses", "masks"} and stored["warnings"] == []
    assert list(stored["masks"]) == list(EXPERIMENTS) and stored["masks"]["single_heads"] == 2 * 4  # for the manifest
    assert list((cache / stored["uses"]).glob("mask-*.npy")) and list((cache / stored["uses"]).glob("stats-*.json"))

    def no_model(*_args, **_kwargs):
        raise AssertionError("the task (and its model) was loaded on a rebuild with nothing changed")

    monkeypatch.setattr("reportgen.ablation.records.load_ablation_task", no_model)
    again = run_ablations(tiny_model, _settings(data), device="cpu", cache_dir=cache, fingerprint="fp")
    assert again == first
    assert again.model_dump_json() == first.model_dump_json()  # the report.json text too
    # the data file moved (same content): the record is the same but names the new place
    moved = _data(tmp_path / "moved.tsv")
    there = run_ablations(tiny_model, _settings(moved), device="cpu", cache_dir=cache, fingerprint="fp")
    assert there.task.data == str(moved) and there.single_heads == first.single_heads


def test_the_record_key_holds_the_data_content_the_model_and_every_setting(tmp_path):
    data = _data(tmp_path / "pairs.tsv")
    base = _settings(data)
    key = record_key(base, "fp", "sha")
    assert record_key(_settings(tmp_path / "elsewhere.tsv"), "fp", "sha") == key  # where the file is: no
    assert record_key(base, "fp2", "sha") != key and record_key(base, "fp", "sha2") != key
    switches = {**defaults()["ablation"]["experiments"], "importance": False}
    changed = {"permutations": 200, "bootstrap_samples": 200, "alpha": 0.01, "margin": 0.02, "seeds": [0],
               "fractions": [0.0, 0.5], "correction": "bonferroni", "method": "uniform", "max_length": 64,
               "limit": 3, "batch_tokens": 512, "experiments": switches}
    for field, value in changed.items():
        assert record_key(_settings(data, **{field: value}), "fp", "sha") != key, field


@pytest.mark.slow  # a subprocess or real drawing/waiting: seconds, kept out of the edit-test loop
def test_a_changed_setting_misses_and_only_the_experiments_that_read_it_recompute(tiny_model, tmp_path):
    data, cache = _data(tmp_path / "pairs.tsv"), tmp_path / "cache"
    first = run_ablations(tiny_model, _settings(data), device="cpu", cache_dir=cache, fingerprint="fp")
    before = _stats_entries(cache)
    more = run_ablations(tiny_model, _settings(data, permutations=600), device="cpu", cache_dir=cache,
                         fingerprint="fp")
    assert len(list(cache.glob("ablation/fp/record-*.json"))) == 2  # a record of its own
    assert more.single_heads.permutations == 600 and first.single_heads.permutations == 320  # raised for Holm
    assert more.whole_layers.permutations == 600 and first.whole_layers.permutations == 100
    added = _stats_entries(cache) - before
    readers = [name for name in EXPERIMENTS if "permutations" in EXPERIMENT_SETTINGS[name]]
    assert len(added) == len(readers) == 4  # single heads, whole layers, layer halves, importance
    assert more.baseline == first.baseline and more.random_fraction == first.random_fraction
    fresh = run_ablations(tiny_model, _settings(data, permutations=600), device="cpu", cache_dir=tmp_path / "fresh",
                          fingerprint="fp")
    assert fresh == more  # what was reused is what would have been computed


def _records_without_stats_cache(tiny_model: Path, data: Path, root: Path, **over) -> dict:
    """Every experiment's record computed from scratch (a fresh cache each time) under the settings."""
    settings = _settings(data, **over)
    task = load_ablation_task(tiny_model, settings, device="cpu")
    record = ablate(task, settings, ResultCache(root / json.dumps(over, sort_keys=True).encode().hex()[:40], "fp",
                                                task.data_hash(), settings.method))
    return {name: record[name] for name in EXPERIMENTS}


STATISTICS_SETTINGS = {"bootstrap_samples": 150, "permutations": 150, "alpha": 0.01, "correction": "bonferroni",
                       "margin": 0.2, "seeds": [0, 5], "fractions": [0.0, 0.5],
                       "importance": {"normalize": "none", "recompute": True, "random_orders": 3}}


@pytest.mark.slow  # a subprocess or real drawing/waiting: seconds, kept out of the edit-test loop
def test_every_setting_an_experiment_reads_is_in_its_key(tiny_model, tmp_path):
    """An experiment whose key leaves a setting out must not change when that setting changes: else a
    stale record would be read back. (Settings of the data and the model change the outputs, which
    the key holds by content.) The first seed is every experiment's, so it is changed apart."""
    data = _data(tmp_path / "pairs.tsv")
    plain = _records_without_stats_cache(tiny_model, data, tmp_path)
    for field, value in STATISTICS_SETTINGS.items():
        changed = _records_without_stats_cache(tiny_model, data, tmp_path, **{field: value})
        for name in EXPERIMENTS:
            if field not in EXPERIMENT_SETTINGS[name]:
                assert changed[name] == plain[name], f"{name} reads {field} but its key leaves it out"
        assert any(changed[name] != plain[name] for name in EXPERIMENTS), f"{field} changed nothing: a weak test"
    assert set(STATISTICS_SETTINGS) >= {field for fields in EXPERIMENT_SETTINGS.values() for field in fields}


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_an_experiment_record_is_reused_only_for_the_same_outputs(tiny_model, tmp_path):
    data = _data(tmp_path / "pairs.tsv")
    settings = _settings(data)
    task = load_ablation_task(tiny_model, settings, device="cpu")
    cache = ResultCache(tmp_path / "c", "fp", task.data_hash(), settings.method)
    first = ablate(task, settings, cache)
    with experiments.Engine(task, settings.method) as engine:
        ctx = experiment_context.make_context(task, experiments.Runner(engine, cache, None), settings)
        outputs = np.ones((3, task.n_examples, 1))
        nudged = outputs.copy()
        nudged[1, 2, 0] = np.nextafter(1.0, 2.0)  # one output one ulp apart
        assert ctx.stats_key("single_heads", {"outputs": outputs}) != ctx.stats_key("single_heads", {"outputs": nudged})
        assert ctx.stats_key("single_heads", {"outputs": outputs}) == ctx.stats_key("single_heads",
                                                                                    {"outputs": outputs.copy()})
        assert ctx.stats_key("single_heads", {"outputs": outputs}) != ctx.stats_key("whole_layers",
                                                                                    {"outputs": outputs})
        reseeded = experiment_context.Context(*[getattr(ctx, name) for name in ("task", "runner")],
                                           _settings(data, seeds=[4, 1]), *ctx.shape, ctx.base_outputs,
                                           ctx.base_value, ctx.undefined, ctx.stats)
        assert all(ctx.stats_key(name, {}) != reseeded.stats_key(name, {}) for name in EXPERIMENTS)  # the first seed
    entries = sorted(cache.directory.glob("stats-*.json"))
    assert len(entries) == len(EXPERIMENTS)
    entries[0].write_bytes(entries[0].read_bytes()[:-5])  # damaged: recomputed with a warning, never trusted
    with pytest.warns(UserWarning, match="is damaged"):
        again = ablate(task, settings, ResultCache(tmp_path / "c", "fp", task.data_hash(), settings.method))
    assert again == first and len(list(cache.directory.glob("stats-*.json"))) == len(EXPERIMENTS)


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_warnings_about_the_data_are_said_again_when_the_record_is_read_back(tiny_model, tmp_path):
    data, cache = _data(tmp_path / "same.tsv", [(a, b, 3.0) for a, b, _ in PAIRS]), tmp_path / "cache"
    for _ in range(2):  # computed, then read back
        with pytest.warns(UserWarning) as caught:
            record = run_ablations(tiny_model, _settings(data), device="cpu", cache_dir=cache, fingerprint="fp")
        said = [str(w.message) for w in caught if str(w.message).startswith("ablation:")]
        assert said == ["ablation: spearman is undefined on the task data (all gold scores are equal); no "
                        "significance test was run and no head or layer is marked significant"]
        assert any("reportgen" in w.filename for w in caught)  # where the CLI looks for them
        assert record.task.undefined == "all gold scores are equal"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a data set without problems stays quiet, computed or read back
        for _ in range(2):
            run_ablations(tiny_model, _settings(_data(tmp_path / "fine.tsv")), device="cpu", cache_dir=cache,
                          fingerprint="fp")


# -- the batched tests give the numbers of one test at a time ----------------------------------------------
def _reference_p(task, first: np.ndarray, second: np.ndarray, permutations: int, seed: int) -> float:
    """The pooled paired permutation test one test at a time, each swap scored by the task's own
    metric (the sort-based Spearman): the way reportgen computed it before issue 16."""
    gold = task.gold

    def metric(outputs: np.ndarray) -> np.ndarray:  # [..., pairs, examples, columns] -> [..., pairs]
        flat = outputs.reshape(-1, *outputs.shape[-2:])
        return task.metrics(flat, gold[None])[task.primary].reshape(outputs.shape[:-2])

    observed = np.mean(metric(second) - metric(first))
    if not np.isfinite(observed):
        return float("nan")
    rng = np.random.default_rng([seed, 2])
    chunk = max(1, DRAWS_PER_CHUNK // (task.n_examples * len(first)))
    hits = 0
    for lo in range(0, permutations, chunk):
        swap = rng.random((min(chunk, permutations - lo), 1, task.n_examples, 1)) < 0.5
        one, two = np.where(swap, first[None], second[None]), np.where(swap, second[None], first[None])
        delta = np.abs(np.mean(metric(two) - metric(one), axis=-1))
        hits += int(np.sum((delta >= abs(observed) - 1e-12) | ~np.isfinite(delta)))
    return (1 + hits) / (1 + permutations)


def _similarity(examples: int, rng: np.random.Generator) -> SimilarityTask:
    gold = rng.integers(1, 6, examples).astype(np.float64)  # graded: many ties in the gold ranks
    return SimilarityTask("similarity", None, None, [], np.zeros((examples, 2), dtype=np.int64), gold)


def _outputs(rng: np.random.Generator, shape: tuple[int, ...], ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Two conditions' cosines with the ties a real run can have: none, some equal in both conditions
    (a mask that leaves a pair unchanged), or equal values across examples."""
    first = rng.normal(size=(*shape, 1))
    second = first + rng.normal(0, 0.3, first.shape)
    if ties == "unchanged pairs":
        second[..., ::3, :] = first[..., ::3, :]
    if ties == "across examples":
        first, second = np.round(first, 1), np.round(second, 1)
    return first, second


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
@pytest.mark.parametrize("ties", ["none", "unchanged pairs", "across examples"])
@pytest.mark.parametrize("examples", [9, 40, 121])
def test_batched_permutation_tests_equal_one_test_at_a_time(examples, ties):
    rng = np.random.default_rng(examples)
    task = _similarity(examples, rng)
    first, second = _outputs(rng, (5, 3, examples), ties)
    batched = paired_permutation_ps(task, first, second, 400, 7)
    alone = [_reference_p(task, one, two, 400, 7) for one, two in zip(first, second, strict=True)]
    assert batched.tolist() == alone  # exactly, not approximately
    assert len(set(alone)) > 1  # the tests differ: a weak check otherwise


@pytest.mark.parametrize(("ties", "tied"), [("none", False), ("unchanged pairs", False), ("across examples", True)])
def test_swapped_ranks_give_the_sorted_spearman_and_know_which_ties_matter(ties, tied):
    from reportgen.stats import spearman_rows

    rng = np.random.default_rng(3)
    gold = rng.integers(1, 6, 30).astype(np.float64)
    first, second = _outputs(rng, (2, 2, 30), ties)
    ranks = SwappedRanks(first[..., 0], second[..., 0], gold)
    assert ranks.tied.tolist() == [tied] * 4  # equal values of one example never share a side: no tie
    swap = rng.random((6, 30)) < 0.5
    one = np.where(swap[:, None, None, :], first[None, ..., 0], second[None, ..., 0])
    two = np.where(swap[:, None, None, :], second[None, ..., 0], first[None, ..., 0])
    want = np.abs(np.mean(spearman_rows(two, gold) - spearman_rows(one, gold), axis=-1))
    assert ranks.changes(swap).tolist() == want.tolist()


def test_a_constant_side_gives_nan_and_the_classification_metric_takes_the_general_way():
    rng = np.random.default_rng(1)
    task = _similarity(12, rng)
    base = rng.normal(size=(1, 1, 12, 1))
    constant = np.ones((1, 1, 12, 1))
    assert np.isnan(paired_permutation_ps(task, base, constant, 200, 0)).all()
    gold = rng.integers(0, 3, 30).astype(np.float64)
    classes = ClassificationTask("classification", None, None, [], np.zeros((30, 1), dtype=np.int64), gold,
                                 {"classes": 3})
    first = np.stack([rng.integers(0, 3, (4, 2, 30)), rng.random((4, 2, 30))], axis=-1).astype(np.float64)
    second = first.copy()
    second[:2, :, ::2, 0] = gold[::2]  # right where the first was often wrong
    batched = paired_permutation_ps(classes, first, second, 300, 2)
    assert batched.tolist() == [_reference_p(classes, one, two, 300, 2) for one, two in zip(first, second, strict=True)]
    assert batched[2] == batched[3] == 1.0 and batched[0] < 1.0


def _reference_ci(task, base: np.ndarray, masked: np.ndarray, samples: int, seed: int):
    """The paired bootstrap CI of one set of conditions, as computed before issue 16."""
    rng = np.random.default_rng([seed, 3])
    stacked = np.concatenate([base[None], masked])
    chunk = max(1, DRAWS_PER_CHUNK // (task.n_examples * len(stacked)))
    changes = []
    for lo in range(0, samples, chunk):
        picked = rng.integers(0, task.n_examples, size=(min(chunk, samples - lo), task.n_examples))
        resampled = stacked[:, picked].swapaxes(0, 1)
        gold = np.broadcast_to(task.gold[picked][:, None, :], resampled.shape[:-1]).reshape(-1, task.n_examples)
        values = task.metrics(resampled.reshape(-1, *resampled.shape[-2:]), gold)[task.primary].reshape(
            resampled.shape[:2])
        changes.append(values[:, 1:] - values[:, :1])
    change = np.concatenate(changes)

    tail = (1 - 0.95) / 2 * 100  # 2.4999999999999996, as the library computes it

    def bounds(values):
        return [float(np.nanpercentile(values, tail)), float(np.nanpercentile(values, 100 - tail))]

    return bounds(change.mean(1)), [bounds(change[:, pair]) for pair in range(change.shape[1])]


@pytest.mark.slow  # many resamples: over half a second of the fast tier
@pytest.mark.parametrize("pairs", [1, 3, 20])
def test_batched_bootstrap_intervals_equal_one_set_at_a_time(pairs):
    rng = np.random.default_rng(pairs)
    task = _similarity(50, rng)
    base = rng.normal(size=(50, 1))
    masked = base + rng.normal(0, 0.4, (4, pairs, 50, 1))
    batched = paired_change_cis(task, base, masked, 700, 5)
    assert [tuple(result) for result in batched] == [_reference_ci(task, base, one, 700, 5) for one in masked]
