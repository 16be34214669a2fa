"""Task causal_lm (issue 31): a decoder's next-token loss under head masks, on tiny GPT-2 and Llama checkpoints
saved here with a byte-level BPE tokenizer trained here (nothing downloaded).

Every number is checked against transformers alone: the loss of `model(input_ids, labels=input_ids)` text by
text, pooled over predicted tokens (token-weighted), and a masked head against a copy of the model whose
head's columns of the attention output projection are zeroed by hand (GPT-2's Conv1D stores them as rows).
Padded batches give each text's own numbers, whatever id pads them (GPT-2 has no pad token).

The up-front model check (reportgen/model/loading.py `check_directory`, through `pretrained_kwargs`) admits
decoders under the file policy a build sets (`file_policy(decoders=True)`), which the `admitted` fixture sets
here; every other check of it stands.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from reportgen.ablation.engine import Engine, evaluate_plain
from reportgen.ablation.task_loading import load_task
from reportgen.ablation.tasks import CausalLMTask
from reportgen.errors import EXIT_DATA, EXIT_MODEL, DataError, ModelError

pytestmark = pytest.mark.slow  # training two tokenizers and saving two models take ~7 s, too much for the fast tier

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the sun is hot today", "she bought fresh red berries",
         "the dog sat on the cat and the mat", "it was a red car", "he ran to the store at noon",
         "the cat sat on the mat", "a ball", "the store is on the hill by the park"]
LAYERS, HEADS, HEAD_DIM = 2, 4, 8
LAYER, HEAD = 1, 2  # the head masked alone: in layer 1, so the engine replays layer 0 from its recording
MAX_LENGTH = 32


# -- checkpoints ------------------------------------------------------------------------------------
def _bpe(bos: bool):
    """A byte-level BPE trained on TEXTS; with `bos`, a template that starts every text with <s> (as Llama's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>"] if bos else ["<|endoftext|>"]
    tokenizer.train_from_iterator(TEXTS * 3, trainers.BpeTrainer(
        vocab_size=320, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                                 special_tokens=[("<s>", 0)])
    return tokenizer


def _save_gpt2(root: Path, cls_name: str = "GPT2LMHeadModel", seed: int = 0, **extra) -> Path:
    """A tiny GPT-2 (2 layers x 4 heads, hidden 32) and its tokenizer, which has no pad token."""
    import transformers
    from transformers import GPT2Config, GPT2TokenizerFast

    backend = _bpe(bos=False)
    tokenizer = GPT2TokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                  unk_token="<|endoftext|>")
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=backend.get_vocab_size(), n_embd=32, n_layer=LAYERS, n_head=HEADS, n_positions=64,
                        initializer_range=0.3, bos_token_id=0, eos_token_id=0, **extra)
    getattr(transformers, cls_name)(config).save_pretrained(root)
    tokenizer.save_pretrained(root)
    return root


def _save_llama(root: Path, cls_name: str = "LlamaForCausalLM") -> Path:
    """A tiny Llama (2 layers x 4 query heads sharing 2 key/value heads, hidden 32), a tokenizer that adds <s>."""
    import transformers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    backend = _bpe(bos=True)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=backend.get_vocab_size(), hidden_size=32, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=2, intermediate_size=48,
                         max_position_embeddings=64, initializer_range=0.3, bos_token_id=0, eos_token_id=1)
    getattr(transformers, cls_name)(config).save_pretrained(root)
    tokenizer.save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("decoders")
    return {"gpt2": _save_gpt2(root / "gpt2"), "llama": _save_llama(root / "llama")}


@pytest.fixture
def admitted():
    """The file policy a build sets, which admits decoders; outside a build `load_task` keeps the strict default
    (reportgen/model/loading.py `file_policy`), which refuses them with exit 3."""
    from reportgen.model import loading

    with loading.file_policy(decoders=True):
        yield


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


# -- independent computations (transformers only) -----------------------------------------------------
def _plain(model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model_dir).eval(), AutoTokenizer.from_pretrained(model_dir)


def _reference_loss(model, tokenizer, texts) -> tuple[float, int]:
    """(token-weighted mean next-token loss, predicted tokens): each text alone, unpadded, through transformers'
    own causal-LM loss (a mean over the text's n - 1 predicted tokens, so times n - 1 for the pooled sum)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([tokenizer(text, truncation=True, max_length=MAX_LENGTH)["input_ids"]])
            predicted = ids.shape[1] - 1
            if predicted:
                total += float(model(input_ids=ids, labels=ids).loss) * predicted
                count += predicted
    return total / count, count


def _zeroed_head(model, layer: int, head: int):
    """A copy of `model` whose head's columns of the attention output projection are zero."""
    reference = copy.deepcopy(model)
    columns = slice(head * HEAD_DIM, (head + 1) * HEAD_DIM)
    with torch.no_grad():
        if hasattr(reference, "transformer"):  # GPT-2: Conv1D c_proj, weight [in, out]
            reference.transformer.h[layer].attn.c_proj.weight[columns, :] = 0
        else:  # Llama: Linear o_proj, weight [out, in]
            reference.model.layers[layer].self_attn.o_proj.weight[:, columns] = 0
    return reference


def _one_head(layer: int = LAYER, head: int = HEAD) -> np.ndarray:
    mask = np.ones((LAYERS, HEADS), dtype=np.float32)
    mask[layer, head] = 0
    return mask


def _loss(task, outputs: np.ndarray) -> float:
    return float(task.metrics(outputs[None], task.gold[None])["loss"][0])


# -- the metric ---------------------------------------------------------------------------------------
def test_metric_is_the_token_weighted_loss_and_lower_is_better():
    """[predicted tokens, loss sum] per text; the loss pools every token (a 3-token text weighs three times a
    1-token one), also per resample row; perplexity is exp(loss); both are declared lower-is-better."""
    out = np.array([[[3, 6.0], [1, 0.5], [2, 1.0]], [[3, 6.0], [3, 6.0], [1, 0.5]]])
    metrics = CausalLMTask.metrics(None, out, np.zeros((1, 3)))
    assert metrics["loss"].tolist() == pytest.approx([7.5 / 6, 12.5 / 7])
    assert metrics["perplexity"].tolist() == pytest.approx([math.exp(7.5 / 6), math.exp(12.5 / 7)])
    assert CausalLMTask.primary == "loss" and CausalLMTask.metric_names == ("loss", "perplexity")
    assert CausalLMTask.higher_is_better == {"loss": False, "perplexity": False}


# -- on the tiny checkpoints --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.usefixtures("admitted")
def test_baseline_loss_equals_transformers_text_by_text(name, checkpoints, text_file):
    task = load_task("causal_lm", checkpoints[name], text_file, max_length=MAX_LENGTH)
    assert task.n_examples == len(TEXTS) and len(task.units) == len(set(TEXTS))  # a repeated text runs once
    model, tokenizer = _plain(checkpoints[name])
    expected, count = _reference_loss(model, tokenizer, TEXTS)
    with Engine(task, "zero", batch_tokens=64) as engine:
        outputs = engine.evaluate(np.ones((1, LAYERS, HEADS), dtype=np.float32))[0]
    assert outputs[:, 0].sum() == count
    assert _loss(task, outputs) == pytest.approx(expected, abs=1e-5)
    plain = evaluate_plain(task, np.ones((LAYERS, HEADS), dtype=np.float32), "zero", batch_size=4)  # padded
    assert _loss(task, plain) == pytest.approx(expected, abs=1e-5)
    metrics = task.metrics(outputs[None], task.gold[None])
    assert metrics["perplexity"][0] == pytest.approx(math.exp(expected), rel=1e-5)
    if name == "llama":  # its tokenizer starts every text with <s>: the first word is predicted from it
        assert all(unit["input_ids"][0] == tokenizer.bos_token_id for unit in task.units)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.usefixtures("admitted")
def test_masking_a_head_equals_zeroing_its_output_columns(name, checkpoints, text_file):
    task = load_task("causal_lm", checkpoints[name], text_file, max_length=MAX_LENGTH)
    model, tokenizer = _plain(checkpoints[name])
    base, _ = _reference_loss(model, tokenizer, TEXTS)
    expected, _ = _reference_loss(_zeroed_head(model, LAYER, HEAD), tokenizer, TEXTS)
    assert abs(expected - base) > 1e-4  # the head matters, so the comparison can fail
    with Engine(task, "zero", batch_tokens=64) as engine:
        fast = engine.evaluate(np.stack([np.ones((LAYERS, HEADS), dtype=np.float32), _one_head()]))[1]
    assert _loss(task, fast) == pytest.approx(expected, abs=1e-5)
    plain = evaluate_plain(task, _one_head(), "zero", batch_size=4)
    assert _loss(task, plain) == pytest.approx(expected, abs=1e-5)
    first_layer, _ = _reference_loss(_zeroed_head(model, 0, 1), tokenizer, TEXTS)
    assert _loss(task, evaluate_plain(task, _one_head(0, 1), "zero")) == pytest.approx(first_layer, abs=1e-5)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.usefixtures("admitted")
def test_padded_batches_equal_one_text_at_a_time_whatever_pads_them(name, checkpoints, text_file):
    task = load_task("causal_lm", checkpoints[name], text_file, max_length=MAX_LENGTH)
    if name == "gpt2":  # no pad token: padded with the end-of-text id
        assert task.tokenizer.pad_token_id is None and task.pad_id == task.tokenizer.eos_token_id
    everything = task.make_batch(range(len(task.units)))
    lengths = [len(unit["input_ids"]) for unit in task.units]
    assert min(lengths) < everything.inputs["input_ids"].shape[1]  # some rows are padded
    assert (everything.inputs["attention_mask"].sum(1).tolist()) == lengths
    with torch.no_grad():
        together = task.unit_outputs(everything)
        alone = torch.cat([task.unit_outputs(task.make_batch([unit])) for unit in range(len(task.units))])
        task.pad_id = 7  # any other id: the attention mask hides it and it is never a label
        other_pad = task.unit_outputs(task.make_batch(range(len(task.units))))
    assert together[:, 0].tolist() == [length - 1 for length in lengths]
    assert torch.allclose(together, alone, atol=1e-5, rtol=0)
    assert torch.allclose(other_pad, alone, atol=1e-5, rtol=0)


@pytest.mark.usefixtures("admitted")
def test_texts_and_columns(checkpoints, text_file, tmp_path):
    """A .txt file, or the `text` column of a csv/jsonl file (the role ablation.columns can rename)."""
    from_txt = load_task("causal_lm", checkpoints["gpt2"], text_file, max_length=MAX_LENGTH)
    jsonl = tmp_path / "texts.jsonl"
    jsonl.write_text("".join(json.dumps({"body": text, "id": i}) + "\n" for i, text in enumerate(TEXTS)),
                     encoding="utf-8")
    from_jsonl = load_task("causal_lm", checkpoints["gpt2"], jsonl, columns={"text": "body"}, max_length=MAX_LENGTH)
    csv = tmp_path / "texts.csv"
    csv.write_text("text\n" + "".join(f"{text}\n" for text in TEXTS), encoding="utf-8")
    from_csv = load_task("causal_lm", checkpoints["gpt2"], csv, limit=4, max_length=MAX_LENGTH)
    assert from_txt.units == from_jsonl.units and from_txt.data_hash() != from_jsonl.data_hash()  # the data differs
    assert from_csv.n_examples == 4 and from_csv.units == from_txt.units[:4]
    assert all(list(unit) == ["input_ids"] for unit in from_txt.units)  # a decoder has no segments


@pytest.mark.usefixtures("admitted")
def test_one_token_texts_predict_nothing_and_are_left_out(checkpoints, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoints["gpt2"])
    single = next(word for word in ("cat", "the", "a") if len(tokenizer(word)["input_ids"]) == 1)
    data = tmp_path / "short.txt"
    data.write_text(f"the cat sat on the mat\n{single}\nit was a red car\n{single}\n", encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        task = load_task("causal_lm", checkpoints["gpt2"], data, max_length=MAX_LENGTH)
    said = [str(w.message) for w in caught if str(w.message).startswith("ablation:")]
    assert said == ["ablation: 2 of 4 texts are a single token, which leaves nothing to predict, and were left out, "
                    "the first on line 2 of short.txt (task causal_lm)"]
    assert task.n_examples == 2 and len(task.units) == 2
    only = tmp_path / "only.txt"
    only.write_text(f"{single}\n{single}\n", encoding="utf-8")
    with pytest.raises(DataError) as raised:
        load_task("causal_lm", checkpoints["gpt2"], only, max_length=MAX_LENGTH)
    assert str(raised.value) == (f"{only}: every text is a single token, so there is nothing to predict; task "
                                 "causal_lm scores each token from the ones before it and needs texts of two tokens "
                                 "or more")
    assert raised.value.exit_code == EXIT_DATA and "\n" not in str(raised.value)


@pytest.mark.usefixtures("admitted")
def test_long_texts_are_truncated_with_the_usual_warning(checkpoints, tmp_path):
    data = tmp_path / "long.txt"
    data.write_text("the cat sat\n" + " ".join(["the cat sat on the mat"] * 20) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        task = load_task("causal_lm", checkpoints["gpt2"], data, max_length=16)
    said = [str(w.message) for w in caught if str(w.message).startswith("ablation:")]
    assert said == ["ablation: 1 of 2 task inputs are longer than 16 tokens and were truncated, the first on "
                    "line 2 of long.txt (config field 'ablation.max_length')"]
    assert max(len(unit["input_ids"]) for unit in task.units) == 16


# -- refusals: one line each, exit 3 ----------------------------------------------------------------------
def test_an_encoder_checkpoint_is_refused(tmp_path, text_file):
    """BERT passes the model check, and transformers would load it as a BertLMHeadModel that sees the whole
    text; task causal_lm refuses it from config.json (no `admitted`: this is the real path)."""
    from transformers import BertConfig, BertForMaskedLM, GPT2TokenizerFast

    root = tmp_path / "bert"
    backend = _bpe(bos=False)
    GPT2TokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>").save_pretrained(root)
    BertForMaskedLM(BertConfig(vocab_size=backend.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=48)).save_pretrained(root)
    with pytest.raises(ModelError) as raised:
        load_task("causal_lm", root, text_file)
    assert str(raised.value) == (f"model directory {root}: model type 'bert' is an encoder, which sees the whole "
                                 "text; task 'causal_lm' predicts each token from the ones before it and needs a "
                                 "decoder (causal LM); for a masked-LM encoder use task 'mlm'")
    assert raised.value.exit_code == EXIT_MODEL


@pytest.mark.usefixtures("admitted")
def test_a_checkpoint_without_its_lm_head_is_refused(tmp_path, text_file):
    """A base Llama (no tied embeddings) has no lm_head weights: the loss would come from a random head."""
    root = _save_llama(tmp_path / "llama-base", "LlamaModel")
    with pytest.raises(ModelError) as raised:
        load_task("causal_lm", root, text_file)
    assert str(raised.value) == (f"model directory {root}: has no trained causal-LM head (missing lm_head.weight); "
                                 "task 'causal_lm' needs the language-model head's weights (a checkpoint saved with "
                                 "its LM head)")
    assert raised.value.exit_code == EXIT_MODEL and "\n" not in str(raised.value)


def test_without_admission_the_model_check_still_refuses_decoders(checkpoints, text_file):
    """Outside a build's file policy (`decoders=True`), `pretrained_kwargs` -> `check_directory` refuses a decoder."""
    with pytest.raises(ModelError, match=r"model type 'gpt2' is a decoder, which this command does not analyse"):
        load_task("causal_lm", checkpoints["gpt2"], text_file)


# -- classification on a decoder (GPT2ForSequenceClassification) -------------------------------------------
@pytest.mark.usefixtures("admitted")
def test_decoder_classifier_reads_each_texts_last_token(tmp_path):
    """A decoder's classifier reads the last token that is not config.pad_token_id: padded with that id, a
    batch gives each text's own logits; a config without one is refused (it could only take one text a time)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    data = tmp_path / "labelled.csv"
    data.write_text("text,label\n" + "".join(f"{text},{i % 2}\n" for i, text in enumerate(TEXTS)), encoding="utf-8")
    root = _save_gpt2(tmp_path / "gpt2-cls", "GPT2ForSequenceClassification", num_labels=2, pad_token_id=0)
    task = load_task("classification", root, data, max_length=MAX_LENGTH)
    assert task.pad_id == 0
    model = AutoModelForSequenceClassification.from_pretrained(root).eval()
    tokenizer = AutoTokenizer.from_pretrained(root)
    with torch.no_grad():
        batch = task.make_batch(range(len(task.units)))
        assert (batch.inputs["attention_mask"] == 0).any()
        together = task.unit_outputs(batch)
        alone = torch.cat([model(**tokenizer(text, return_tensors="pt")).logits
                           for text in dict.fromkeys(TEXTS)])  # the units: distinct texts, in order
    assert torch.allclose(together, alone, atol=1e-5, rtol=0)
    unpadded = _save_gpt2(tmp_path / "gpt2-cls-nopad", "GPT2ForSequenceClassification", num_labels=2)
    with pytest.raises(ModelError) as raised:
        load_task("classification", unpadded, data, max_length=MAX_LENGTH)
    assert str(raised.value) == (f"model directory {unpadded}: config.json has no pad_token_id, which "
                                 "GPT2ForSequenceClassification needs to find each text's last token in a padded "
                                 "batch; set it (usually to the eos_token_id the model was fine-tuned with)")


# -- the ablation stage end to end --------------------------------------------------------------------------
def _train(model_dir: Path, steps: int = 150) -> None:
    """A few Adam steps on TEXTS, saved over the checkpoint: the heads now carry what the texts repeat, so
    masking them costs loss."""
    model, tokenizer = _plain(model_dir)
    model.train()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    ids = [torch.tensor([tokenizer(text)["input_ids"]]) for text in TEXTS]
    torch.manual_seed(0)
    for step in range(steps):
        batch = ids[step % len(ids)]
        loss = model(input_ids=batch, labels=batch).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval().save_pretrained(model_dir)


@pytest.mark.usefixtures("admitted")
def test_ablation_stage_reports_a_rising_loss_as_a_cost(tmp_path, text_file):
    from reportgen.ablation.records import run_ablations
    from reportgen.config import AblationSettings, defaults
    from reportgen.findings.ablation import ablation_findings

    model_dir = _save_gpt2(tmp_path / "gpt2")
    _train(model_dir)
    raw = defaults()["ablation"]
    raw.update(task="causal_lm", data=str(text_file), seeds=[0, 1], fractions=[0.0, 0.25, 0.5], bootstrap_samples=200,
               permutations=200, max_length=MAX_LENGTH, batch_tokens=64, margin=0.6,
               importance={**raw["importance"], "random_orders": 5})
    report = run_ablations(model_dir, AblationSettings.model_validate(raw), device="cpu", cache_dir=tmp_path / "cache",
                           fingerprint="tiny-gpt2")
    model, tokenizer = _plain(model_dir)
    base, _ = _reference_loss(model, tokenizer, TEXTS)
    assert report.task.type == "causal_lm" and report.task.metric == "loss"
    assert report.task.higher_is_better == {"loss": False, "perplexity": False}
    assert report.baseline.value == pytest.approx(base, abs=1e-5)
    assert report.baseline.metrics["perplexity"] == pytest.approx(math.exp(base), rel=1e-5)
    # each head's numbers: the loss with it masked, the change masked - unmasked, relative to the unmasked loss
    value, delta = np.array(report.single_heads.value), np.array(report.single_heads.delta)
    for layer, head in [(0, 0), (LAYER, HEAD)]:
        masked, _ = _reference_loss(_zeroed_head(model, layer, head), tokenizer, TEXTS)
        assert value[layer, head] == pytest.approx(masked, abs=1e-5)
    assert delta == pytest.approx(value - report.baseline.value, abs=1e-12)
    assert np.array(report.single_heads.relative) == pytest.approx(delta / abs(report.baseline.value), abs=1e-12)
    # masking a whole trained layer raises the loss: a positive change, which is a cost
    assert min(report.whole_layers.delta) > 0
    # non-inferiority for a loss: the CI of the change must stay below +margin, fractions in increasing order
    test = report.random_fraction.non_inferiority
    ok = [ci[1] is not None and ci[1] < test.margin for ci in test.change_ci]
    assert test.non_inferior == ok and "below +60%" in test.test
    assert test.up_to == max([0.0] + [f for f, good in zip(report.random_fraction.fractions, ok, strict=True)
                                      if good and all(ok[:report.random_fraction.fractions.index(f) + 1])])
    findings = {finding.id: finding for finding in ablation_findings(report)}
    worst_head = findings["ablation-single-heads"].numbers["worst"]
    assert (worst_head["layer"], worst_head["head"]) == np.unravel_index(np.argmax(delta), delta.shape)
    assert worst_head["delta"] > 0  # the head that hurts most when masked raises the loss most
    layers = findings["ablation-whole-layers"].numbers
    assert layers["worst"]["layer"] == int(np.argmax(report.whole_layers.delta)) and layers["worst"]["delta"] > 0
    assert not layers["improves"]
    assert findings["ablation-whole-layers"].sentence.startswith(f"Removing layer {layers['worst']['layer']} costs "
                                                                 "most: +")
    assert "loss lower than random pruning orders" in findings["ablation-importance"].sentence
    fraction = findings["ablation-random-fraction"]
    assert fraction.supported == (test.up_to > 0)
    if test.up_to > 0:  # so on this model: +27% to +55% at 25% of the heads, +71% to +124% at 50%
        assert fraction.sentence.startswith(f"Up to {round(100 * test.up_to)}% of the heads can be masked at random "
                                            "raising loss by less than 60%:")
        assert "lies below +60%" in fraction.sentence
    else:
        assert "not shown to raise loss by less than 60%" in fraction.sentence
    _check_pages(report, list(findings.values()), tmp_path)


def _values(spec, key: str) -> list:
    """Every value of `key` anywhere in a nested chart spec."""
    if isinstance(spec, dict):
        return ([spec[key]] if key in spec else []) + [v for value in spec.values() for v in _values(value, key)]
    if isinstance(spec, list):
        return [v for value in spec for v in _values(value, key)]
    return []


def _check_pages(report, findings, tmp_path: Path) -> None:
    """The ablation page and the charts of a loss: red is a rise, the margin line is at +margin."""
    from types import SimpleNamespace

    from reportgen.site import pages
    from reportgen.site.charts import chartdata, finding_pictures
    from tests.helpers import ROOT

    charts = chartdata.ablation_charts(report)
    assert _values(charts["single_heads"], "reverse") == [True]  # redblue reversed: a rise is red
    assert _values(charts["whole_layers"], "test") == ["datum.value > 0"]  # red bars where the loss rose
    assert "margin +60%" in json.dumps(charts["random_fraction"])  # the margin line above 0
    assert "margin -60%" not in json.dumps(charts["random_fraction"])
    page = tmp_path / "ablation.md"
    pages.render(pages.environment(ROOT / "site_src" / "templates"), "ablation.md.j2", page, pages.Charts(),
                 report=SimpleNamespace(layers=LAYERS, heads=HEADS), ablation=report, charts=charts)
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert "must lie below plus the margin, 60% of the unmasked loss" in text
    assert 'the whole paired 95% CI of the change lies below +60%' in text and "lies above -60%" not in text
    drawn = finding_pictures.pictures(SimpleNamespace(ablation=report, layers=LAYERS, heads=HEADS, findings=findings,
                                                      decoder=None))
    assert _values(drawn["ablation-whole-layers"], "test")[0] == "datum.value > 0"
    assert _values(drawn["ablation-single-heads"], "reverse") == [True]
    assert "reaches above the +60% margin" in drawn["ablation-random-fraction"]["description"]


# -- how the pages say it ---------------------------------------------------------------------------------
def test_the_pages_say_the_loss_and_that_a_rise_is_the_cost():
    """The findings page's task sentence and summary for a loss (numbers as reportgen/findings/ablation.py
    gives them: `higher_is_better` False), rendered as the site renders home.md.j2."""
    import re
    from html import unescape

    import markdown

    from reportgen.findings import names
    from reportgen.report import Finding, Span
    from reportgen.site import pages
    from tests.helpers import ROOT

    def finding(fid: str, lead: str, numbers: dict) -> Finding:
        return Finding(id=fid, group="ablation", supported=True, sentence=lead, spans=[Span(text=lead, style="strong")],
                       links=[], numbers={"metric": "loss", "higher_is_better": False, **numbers})

    head = {"layer": 1, "head": 2, "delta": 0.25, "relative": 0.377}
    found = [finding("ablation-single-heads", "No single head", {"count": 0, "total": 8, "alpha": 0.05,
                                                                 "correction": "holm", "worst": head, "best": head}),
             finding("ablation-random-fraction", "Up to", {"up_to": 0.25, "margin": 0.6, "seeds": 2, "failing": 0.5,
                                                           "ci": [0.266, 0.547]})]
    task = {"type": "causal_lm", "data": "texts.txt", "examples": 10, "metric": "loss", "method": "zero"}
    data = {"title": "t", "model": {"name": "tiny-gpt2", "model_type": "gpt2", "parameters": 1000}, "layers": 2,
            "heads": 4, "statistics": {"counts": {"examples": 2}}, "decoder": None,
            "ablation": {"task": task, "experiments": []},
            "claims": None, "examples": [1], "built": None, "warnings": [], "findings": found,
            "versions": {"torch": "2", "transformers": "5", "reportgen": "0", "python": "3"}}
    env = pages.environment(ROOT / "site_src" / "templates")
    source = env.get_template("home.md.j2").render(
        report=data, findings=found, headline={"heads": 8, "labels": {"mixed": 8}, "baseline": None,
                                               "significant_heads": None},
        task_data=names.task_data("texts.txt"), head_maps=[], pictures={}, chart=None)
    html = markdown.markdown(source, extensions=["admonition", "attr_list", "md_in_html", "tables", "toc",
                                                 "reportgen.site.term_links"])
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    assert ("The model predicts each token of a text from the tokens before it; its quality here is its loss, the "
            "mean cross-entropy of the next token over all predicted tokens of 10 texts of texts.txt") in text
    assert "Lower is better: a masked head that raises it is one the model needs." in text
    assert "the largest rise in loss is +37.7% (+0.250 loss, layer 1 head 2)" in text
    assert "Up to 25% of the heads can be masked at random raising loss by less than 60%" in text
    assert "largest drop" not in text and "losing less than" not in text
