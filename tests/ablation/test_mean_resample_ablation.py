"""Ablation methods "mean" (Wang et al. 2022) and "resample" (Chan et al. 2022) through the engine and the
experiments: the engine's fast paths (resuming inside a layer on the BERT layout, replaying lower layers on a
decoder, full forwards on an encoder-decoder; stacked masks) equal the plain path, which computes the same
replacements from padded batches in file order; resample's donors follow the first seed, and its cached results
are kept per seed; a short run of the experiments gives finite numbers and names the method.

The models are the ablation tests' tiny random BERT (conftest's `model_dir`, `data`) and, for the other tasks,
the tiny checkpoints of tests/decoder_checkpoints.py and tests/seq2seq_checkpoints.py (marked slow)."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.ablation import experiments
from reportgen.ablation.engine import Engine, cache_method, evaluate_plain
from reportgen.ablation.experiment_context import METHOD_NOTES
from reportgen.ablation.records import run_ablations
from reportgen.ablation.task_loading import load_task
from reportgen.config import AblationSettings, defaults
from tests.helpers import GRADED_PAIRS, make_ablation_bert

TOL = 1.1e-5  # similarity outputs are cosines rounded to 5 decimals: one rounding step and a little more
METHODS = ("mean", "resample")


def _masks(layers: int = 3, heads: int = 4) -> list[np.ndarray]:
    """All ones, one head in the last layer, a whole middle layer, a real-valued gate on every head."""
    ones = np.ones((layers, heads), dtype=np.float32)
    head, layer = ones.copy(), ones.copy()
    head[-1, 1] = 0
    layer[layers // 2] = 0
    return [ones, head, layer, np.full((layers, heads), 0.5, dtype=np.float32)]


@pytest.mark.parametrize("method", METHODS)
def test_the_fast_path_equals_the_plain_path(model_dir, data, method):
    task = load_task("similarity", model_dir, data)
    masks = _masks()
    plain = [evaluate_plain(task, mask, method, batch_size=5, seed=3) for mask in masks]
    with Engine(task, method, batch_tokens=96, seed=3) as engine:
        fast = engine.evaluate(np.stack(masks))  # stacked masks, each forward resumed inside its first layer
        assert engine.resumes and engine.record_depth == 3 and len(engine.batches) > 1
        importance = engine.importance(masks[0])
    for want, got in zip(plain, fast, strict=True):
        assert np.abs(want - got).max() < TOL
    assert np.abs(plain[0] - plain[2]).max() > 1e-3  # the replaced layer changes the outputs
    assert importance.shape == (3, 4) and np.isfinite(importance).all() and (importance > 0).any()


def test_resample_follows_the_first_seed_and_is_cached_per_seed(model_dir, data):
    task = load_task("similarity", model_dir, data)
    layer = _masks()[2]
    with Engine(task, "resample", batch_tokens=96, seed=0) as engine:
        first = engine.evaluate(layer[None])[0]
        donors = engine.replacements.donor_of.copy()
    with Engine(task, "resample", batch_tokens=4096, seed=0) as engine:  # other batches, the same donors
        assert np.abs(engine.evaluate(layer[None])[0] - first).max() < TOL
    with Engine(task, "resample", batch_tokens=96, seed=1) as engine:
        other = engine.evaluate(layer[None])[0]
        assert not np.array_equal(engine.replacements.donor_of, donors)
    assert np.abs(other - first).max() > 1e-4
    assert not np.any(donors == np.arange(len(task.units)))  # every input reads another's output
    assert cache_method("resample", 0) != cache_method("resample", 1)
    assert cache_method("mean", 0) == cache_method("mean", 1) == "mean" and cache_method("zero", 5) == "zero"


def _settings(data, method: str) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(data=str(data), method=method, seeds=[0, 1], fractions=[0.0, 0.25], bootstrap_samples=100,
               permutations=100, batch_tokens=96, max_length=96,
               experiments={name: name in ("baseline", "single_heads", "whole_layers")
                            for name in experiments.EXPERIMENTS})
    return AblationSettings.model_validate(raw)


@pytest.mark.parametrize("method", METHODS)
def test_a_short_ablation_run_gives_finite_numbers_and_names_its_method(model_dir, data, tmp_path, method):
    report = run_ablations(model_dir, _settings(data, method), device="cpu", cache_dir=tmp_path, fingerprint="fp")
    assert report.task.method == method and report.task.method_note == METHOD_NOTES[method]
    assert ("Wang et al. 2022" if method == "mean" else "Chan et al. 2022") in report.task.method_note
    values = np.array(report.single_heads.value)
    assert values.shape == (3, 4) and np.isfinite(values).all() and np.isfinite(report.whole_layers.value).all()
    assert np.isfinite(report.baseline.value)
    assert np.abs(values - report.baseline.value).max() > 0  # some head's replacement moves the metric
    folders = [path.name for path in (tmp_path / "ablation" / "fp").iterdir() if path.is_dir()]
    assert len(folders) == 1 and folders[0].endswith(f"-{cache_method(method, 0)}")  # resample: per seed


def _other_task(kind: str, root):
    """A tiny model and data for `kind`: classification and mlm on the random BERT, causal_lm on GPT-2 (whose
    engine replays the lower layers) and Llama, seq2seq on BART (full forwards, groups in their own streams)."""
    from reportgen.model import loading
    from tests.decoder_checkpoints import make_decoder
    from tests.seq2seq_checkpoints import PAIRS, make_encoder_decoder, write_pairs

    path = root / "data.jsonl"
    if kind == "classification":
        model = make_ablation_bert(root / "m", "BertForSequenceClassification", num_labels=2)
        path.write_text("".join(f'{{"text": "{a}", "pair": "{b}", "label": {int(score > 2)}}}\n'
                                for a, b, score in GRADED_PAIRS), encoding="utf-8")
        return load_task(kind, model, path, columns={"text": "text", "pair": "pair", "label": "label"})
    if kind == "mlm":
        model = make_ablation_bert(root / "m", "BertForMaskedLM")
        path.write_text("".join(f'{{"text": "{a} {b}"}}\n' for a, b, _ in GRADED_PAIRS), encoding="utf-8")
        return load_task(kind, model, path)
    if kind in ("gpt2", "llama"):
        model = make_decoder(kind, root / kind, causal_lm=True)
        path.write_text("".join(f'{{"text": "{a} {b}"}}\n' for a, b, _ in GRADED_PAIRS[:8]), encoding="utf-8")
        with loading.file_policy(decoders=True):
            return load_task("causal_lm", model, path, max_length=32)
    model = make_encoder_decoder("bart", root / "bart")
    with loading.file_policy(encoder_decoders=True):
        return load_task("seq2seq", model, write_pairs(path, PAIRS), max_length=32)


@pytest.mark.slow  # five tiny models and their tokenizers: seconds
@pytest.mark.parametrize("kind", ["classification", "mlm", "gpt2", "llama", "seq2seq"])
@pytest.mark.parametrize("method", METHODS)
def test_every_task_and_architecture_fast_equals_plain(tmp_path, kind, method):
    task = _other_task(kind, tmp_path)
    with Engine(task, method, batch_tokens=64, seed=2) as engine:
        layers, heads = engine.layers, engine.heads
        masks = _masks(layers, heads)
        fast = engine.evaluate(np.stack(masks))
        importance = engine.importance(masks[0])
        assert len(engine.batches) > 1
    for mask, got in zip(masks, fast, strict=True):
        want = evaluate_plain(task, mask, method, batch_size=3, seed=2)
        assert np.abs(want - got).max() < 1e-4  # losses are sums over tokens
    assert np.abs(fast[0] - fast[2]).max() > 1e-4
    assert np.isfinite(importance).all() and importance.shape == (layers, heads)
