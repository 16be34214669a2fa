"""Seed 004's classification path end to end, on a tiny model trained here by the recipe's own code.

A tiny random BERT is fine-tuned as a 5-grade cross-encoder by recipes/seed004/train.py's `train`
on a graded TSV written here; reportgen's ablation then reads the grades from that file and
masks heads. Every number the ablation reports is recomputed here without reportgen: the
accuracy from the saved model's own logits, pair by pair, and a masked condition by zeroing
heads' context with a hook of this file (Michel et al. 2019's head removal)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from reportgen.ablation.records import run_ablations
from reportgen.config import AblationSettings, defaults
from tests.helpers import ROOT, make_tiny_bert

pytestmark = pytest.mark.slow  # training a tiny model: over half a second of the fast tier

RECIPE = ROOT / "recipes" / "seed004" / "train.py"
# The grade is the title's noun: a signal a 2-layer model can pick up in a few dozen steps.
NOUNS = {"cat": 1, "dog": 2, "car": 3, "ball": 4, "mat": 5}
EPOCHS = 20
QUERIES = ["i went to the store", "he sat on it", "she bought a red", "the cat and the dog", "it was fresh"]


def _recipe():
    """recipes/seed004/train.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("seed004_train", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def _rows() -> list[tuple[str, str, str]]:
    """(query, title, grade) for every query x noun, grade as the string the file holds."""
    return [(query, f"the {noun} was red", str(grade)) for query in QUERIES for noun, grade in NOUNS.items()]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(recipe module, train result, saved model directory, graded TSV, the untrained classifier)."""
    recipe = _recipe()
    root = tmp_path_factory.mktemp("seed004")
    base = make_tiny_bert(root / "base", layers=1)  # one layer: masking it cuts [CLS] off the title
    data = root / "graded.tsv"
    data.write_text("query\ttitle\tgrade\n" + "".join(f"{q}\t{t}\t{g}\n" for q, t, g in _rows()), encoding="utf-8")
    pairs = [recipe.StsPair(query, title, float(grade)) for query, title, grade in _rows()]
    untrained, _ = recipe.load_classifier(base, seed=0)  # the head train() starts from (same seed)
    result = recipe.train(base, pairs, root / "out", epochs=EPOCHS, minutes=1.0, lr=1e-2, batch_size=5, threads=1,
                          log=lambda _line: None)
    return recipe, result, root / "out" / "model", data, untrained.eval()


def _logits(model_dir: Path, rows, hook_layers: dict[int, list[int]] | None = None) -> np.ndarray:
    """The saved model's logits, one unpadded pair at a time; `hook_layers` {layer: heads} zeroes
    those heads' context vectors before the attention output projection (head removal)."""
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    size = model.config.hidden_size // model.config.num_attention_heads
    handles = []
    for layer, heads in (hook_layers or {}).items():
        keep = torch.ones(model.config.hidden_size)
        for head in heads:
            keep[head * size:(head + 1) * size] = 0
        dense = model.bert.encoder.layer[layer].attention.output.dense
        handles.append(dense.register_forward_pre_hook(lambda _module, args, keep=keep: (args[0] * keep,)))
    with torch.no_grad():
        out = np.stack([model(**tokenizer(query, title, truncation=True, max_length=128, return_tensors="pt"))
                        .logits[0].numpy() for query, title, _ in rows])
    for handle in handles:
        handle.remove()
    return out


def _accuracy(model_dir: Path, logits: np.ndarray, rows) -> float:
    """Share of rows whose predicted label, named by the saved config, is the file's grade."""
    names = AutoModelForSequenceClassification.from_pretrained(model_dir).config.id2label
    return float(np.mean([names[int(index)] == grade for index, (_, _, grade) in zip(logits.argmax(1), rows,
                                                                                        strict=True)]))


def _settings(data: Path) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(task="classification", data=str(data), columns={"text": "query", "pair": "title", "label": "grade"},
               seeds=[0, 1], fractions=[0.0, 0.25, 0.5], bootstrap_samples=200, permutations=200,
               experiments={**raw["experiments"], "importance": False, "layer_halves": False})
    return AblationSettings.model_validate(raw)


def test_training_moves_the_classifier_head(trained):
    recipe, result, model_dir, _, untrained = trained
    saved = AutoModelForSequenceClassification.from_pretrained(model_dir)
    assert saved.config.id2label == dict(enumerate(recipe.LABELS)) and saved.config.num_labels == 5
    assert not torch.allclose(saved.classifier.weight, untrained.classifier.weight)
    assert torch.equal(saved.classifier.weight, result.model.classifier.weight)  # what was saved is what trained
    rows = _rows()
    gold = torch.tensor([int(grade) - 1 for _, _, grade in rows])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        before = np.stack([untrained(**tokenizer(q, t, return_tensors="pt")).logits[0].numpy() for q, t, _ in rows])
    after = _logits(model_dir, rows)
    loss = [float(torch.nn.functional.cross_entropy(torch.as_tensor(x), gold)) for x in (before, after)]
    assert loss[1] < 0.5 * loss[0], f"cross-entropy {loss[0]:.3f} before training, {loss[1]:.3f} after"
    assert np.mean(result.step_losses[-5:]) < np.mean(result.step_losses[:5])
    assert result.stopped_by == "epochs" and result.steps == EPOCHS * len(rows) // 5


def test_ablation_numbers_match_an_independent_computation(trained, tmp_path):
    _, _, model_dir, data, _ = trained
    rows = _rows()
    report = run_ablations(model_dir, _settings(data), device="cpu", cache_dir=tmp_path, fingerprint="tiny")
    base = _accuracy(model_dir, _logits(model_dir, rows), rows)
    assert report.task.type == "classification" and report.task.examples == len(rows)
    assert base > 0.5  # trained well above chance (0.2), so masking has something to lose
    assert report.baseline.value == pytest.approx(base, abs=1e-12)
    # The only layer masked whole: [CLS] no longer sees the title, every pair gets one grade.
    whole = _accuracy(model_dir, _logits(model_dir, rows, {0: list(range(report.heads))}), rows)
    assert whole < base
    assert report.whole_layers.value[0] == pytest.approx(whole, abs=1e-12)
    assert report.whole_layers.relative[0] == pytest.approx((whole - base) / base, rel=1e-9)
    for head in range(report.heads):
        alone = _accuracy(model_dir, _logits(model_dir, rows, {0: [head]}), rows)
        assert report.single_heads.value[0][head] == pytest.approx(alone, abs=1e-12)
        assert report.single_heads.relative[0][head] == pytest.approx((alone - base) / base, rel=1e-9, abs=1e-12)
