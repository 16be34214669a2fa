"""The model side of encoder-decoders (issue 31): BART, T5 and Marian on tiny random checkpoints saved here
(tests/seq2seq_checkpoints.py), checked against references that do not use reportgen's hooks:

- the heads are found in three groups laid out flat [encoder self..., decoder self..., cross...];
- masking a head equals zeroing its columns of the output projection by hand, in every group, on a batch
  whose sources and targets are both padded;
- uniform masking equals the model's own attention made uniform by hand (the head's query weights zeroed,
  and T5's relative position bias for that head): 1/n over the source's real tokens for encoder
  self-attention and cross-attention, 1/(i+1) over decoder inputs 0..i for decoder self-attention;
- value norms ||f(x_j)|| per group equal the value vectors times the head's slice of the output projection,
  computed here from the attention modules' own inputs (for cross-attention: the encoder's output);
- `run_pair` returns the model's own `output_attentions` (rows sum to 1, nothing above the decoder's
  diagonal) for the decoder input that transformers' `prepare_decoder_input_ids_from_labels` makes;
- task seq2seq's loss equals transformers' `labels=` loss pair by pair, and under a masked head the loss of
  a copy of the model whose head is zeroed by hand; it is refused on a model that is not an encoder-decoder;
- the loading table and policy: a caller that does not set FilePolicy.encoder_decoders refuses them;
- task classification through BART's and T5's *ForSequenceClassification heads masks every group exactly as
  zeroing the head by hand (Marian has no such head in transformers).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from reportgen.ablation.engine import Engine, evaluate_plain  # noqa: E402
from reportgen.ablation.task_loading import load_task  # noqa: E402
from reportgen.ablation.tasks import Seq2SeqTask  # noqa: E402
from reportgen.errors import EXIT_MODEL, ModelError  # noqa: E402
from reportgen.model import loading  # noqa: E402
from reportgen.model.head_sites import locate, projection_weight  # noqa: E402
from reportgen.model.masking import masked  # noqa: E402
from reportgen.model.seq2seq import run_pair  # noqa: E402
from reportgen.model.value_norms import value_norms  # noqa: E402
from tests.seq2seq_checkpoints import FAMILIES, PAIRS, make_encoder_decoder, write_pairs  # noqa: E402

pytestmark = pytest.mark.slow  # three tokenizers and six models: ~20 s

LAYERS, HEADS, HEAD = 6, 4, 2  # flat layers: encoder 0-1, decoder self 2-3, cross 4-5
GROUPS = {"encoder": 1, "decoder": 3, "cross": 5}  # each group's layer 1, flat
MAX_LENGTH = 32


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("encoder-decoders")
    return {family: make_encoder_decoder(family, root / family) for family in FAMILIES}


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> Path:
    return write_pairs(tmp_path_factory.mktemp("data") / "pairs.jsonl", PAIRS + PAIRS[:2])  # two repeated pairs


def _lm(path: Path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(path, attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(path)


def _padded_batch() -> dict:
    """Three pairs of random ids; sources and decoder inputs padded at different lengths."""
    generator = torch.Generator().manual_seed(0)
    source = torch.randint(5, 60, (3, 9), generator=generator)
    target = torch.randint(5, 60, (3, 7), generator=generator)
    source_real, target_real = torch.ones(3, 9, dtype=torch.long), torch.ones(3, 7, dtype=torch.long)
    source_real[1, 6:] = source_real[2, 3:] = 0
    target_real[2, 4:] = target_real[0, 6:] = 0
    return {"input_ids": source, "attention_mask": source_real, "decoder_input_ids": target,
            "decoder_attention_mask": target_real, "use_cache": False}


def _outputs(model, batch, mask=None, method="zero") -> tuple[torch.Tensor, torch.Tensor]:
    """(decoder output, encoder output) at their real tokens."""
    with torch.no_grad():
        if mask is None:
            out = model(**batch, output_hidden_states=True)
        else:
            with masked(model, mask, method):
                out = model(**batch, output_hidden_states=True)
    decoded = out.decoder_hidden_states[-1][batch["decoder_attention_mask"].bool()]
    return decoded, out.encoder_last_hidden_state[batch["attention_mask"].bool()]


def _one_head(depth: int, head: int = HEAD) -> torch.Tensor:
    mask = torch.ones(LAYERS, HEADS)
    mask[depth, head] = 0
    return mask


def _gap(first, second) -> float:
    return max(float((a - b).abs().max()) for a, b in zip(first, second, strict=True))


def _zeroed(model, depth: int, head: int = HEAD):
    """A copy whose head's input columns of the output projection at flat layer `depth` are zero."""
    reference = copy.deepcopy(model)
    sites = locate(reference)
    with torch.no_grad():
        sites.out_proj[depth].weight[:, head * sites.head_dim:(head + 1) * sites.head_dim] = 0
    return reference


# -- where the heads are --------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_the_heads_are_laid_out_in_three_groups(family, checkpoints):
    model, _ = _lm(checkpoints[family])
    sites = locate(model)
    assert sites.groups == ["encoder"] * 2 + ["decoder"] * 2 + ["cross"] * 2 and sites.encoder_decoder
    assert [sites.group_layer(depth) for depth in range(LAYERS)] == [
        ("encoder", 0), ("encoder", 1), ("decoder", 0), ("decoder", 1), ("cross", 0), ("cross", 1)]
    assert sites.depths("cross") == [4, 5] and sites.heads == HEADS
    assert sites.head_dim == (6 if family == "t5" else 8)  # T5's d_kv 6: heads hold 24 of the 32 features
    base = model.get_encoder(), model.get_decoder()
    if family == "t5":
        expected = ([block.layer[0].SelfAttention.o for block in base[0].block]
                    + [block.layer[0].SelfAttention.o for block in base[1].block]
                    + [block.layer[1].EncDecAttention.o for block in base[1].block])
    else:
        expected = ([layer.self_attn.out_proj for layer in base[0].layers]
                    + [layer.self_attn.out_proj for layer in base[1].layers]
                    + [layer.encoder_attn.out_proj for layer in base[1].layers])
    assert all(found is wanted for found, wanted in zip(sites.out_proj, expected, strict=True))


# -- masking --------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_masking_a_head_equals_zeroing_its_output_columns_in_every_group(family, checkpoints):
    model, _ = _lm(checkpoints[family])
    batch = _padded_batch()
    unmasked = _outputs(model, batch)
    for depth in range(LAYERS):
        expected = _outputs(_zeroed(model, depth), batch)
        assert _gap(_outputs(model, batch, _one_head(depth)), expected) < 1e-5, depth
        assert _gap(unmasked, expected) > 1e-3, depth  # the head mattered, so the comparison can fail


def _uniform_by_hand(model, family: str, depth: int):
    """A copy in which the head at flat layer `depth` scores every key alike (its query weights zeroed, and
    for T5's self-attention its relative position bias), so the model's own softmax and masks spread it
    evenly over the keys its queries may see."""
    reference = copy.deepcopy(model)
    sites = locate(reference)
    attention, dim = sites.layers[depth], sites.head_dim
    query = attention.q if family == "t5" else attention.q_proj
    with torch.no_grad():
        query.weight[HEAD * dim:(HEAD + 1) * dim] = 0
        if query.bias is not None:
            query.bias[HEAD * dim:(HEAD + 1) * dim] = 0
    if family == "t5" and sites.groups[depth] != "cross":  # layer 1 gets layer 0's bias as an argument

        def no_bias(_module, args, kwargs):
            bias = kwargs["position_bias"].clone()
            bias[:, HEAD] = 0
            return args, {**kwargs, "position_bias": bias}

        attention.register_forward_pre_hook(no_bias, with_kwargs=True)
    return reference


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("group", GROUPS)
def test_uniform_masking_spreads_a_head_over_the_keys_its_queries_see(family, group, checkpoints):
    model, _ = _lm(checkpoints[family])
    batch, depth = _padded_batch(), GROUPS[group]
    expected = _outputs(_uniform_by_hand(model, family, depth), batch)
    assert _gap(_outputs(model, batch, _one_head(depth), "uniform"), expected) < 1e-5
    assert _gap(_outputs(model, batch, _one_head(depth)), expected) > 1e-3  # not the same as zeroing it
    assert _gap(_outputs(model, batch), expected) > 1e-3


# -- value norms ----------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_value_norms_of_each_group_equal_a_by_hand_computation(family, checkpoints):
    model, tokenizer = _lm(checkpoints[family])
    sites = locate(model)
    inputs: dict[int, torch.Tensor] = {}

    def keep(depth):  # what the attention's keys and values are computed from
        def hook(_module, args, kwargs):
            states = kwargs.get("key_value_states")
            inputs[depth] = (states if states is not None else args[0])[0].detach()

        return hook

    handles = [attention.register_forward_pre_hook(keep(depth), with_kwargs=True)
               for depth, attention in enumerate(sites.layers)]
    source, target = (torch.tensor([tokenizer(text)["input_ids"]]) for text in PAIRS[2])
    with value_norms(model) as capture, torch.no_grad():
        model(input_ids=source, decoder_input_ids=target, use_cache=False)
    for handle in handles:
        handle.remove()
    assert capture.norms is None and set(capture.groups) == {"encoder", "decoder", "cross"}
    lengths = {"encoder": source.shape[1], "decoder": target.shape[1], "cross": source.shape[1]}
    dim = sites.head_dim
    for depth in range(LAYERS):
        group, layer = sites.group_layer(depth)
        with torch.no_grad():
            values = sites.value_proj[depth](inputs[depth])  # [tokens, heads * dim]
            weight = projection_weight(sites.out_proj[depth])
            by_hand = torch.stack([(values[:, h * dim:(h + 1) * dim] @ weight[:, h * dim:(h + 1) * dim].T).norm(dim=-1)
                                   for h in range(HEADS)])
        assert capture.groups[group].shape == (2, HEADS, lengths[group])
        assert np.allclose(capture.groups[group][layer], by_hand.numpy(), rtol=1e-5, atol=1e-6), depth


# -- one pair, teacher-forced ---------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_a_pair_run_holds_the_models_own_attention(family, checkpoints):
    model, tokenizer = _lm(checkpoints[family])
    source, target = PAIRS[0]
    run = run_pair(model, tokenizer, source, target, max_length=MAX_LENGTH)
    ids = torch.tensor([tokenizer(source)["input_ids"]])
    labels = torch.tensor([tokenizer(text_target=target)["input_ids"]])
    decoder_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)  # transformers' own shift
    with torch.no_grad():
        out = model(input_ids=ids, decoder_input_ids=decoder_ids, output_attentions=True, use_cache=False)
    S, T = ids.shape[1], labels.shape[1]  # noqa: N806 - the papers' names for the lengths
    assert run.source_tokens == tokenizer.convert_ids_to_tokens(ids[0].tolist())
    assert run.target_tokens == tokenizer.convert_ids_to_tokens(decoder_ids[0].tolist())
    assert run.label_tokens == tokenizer.convert_ids_to_tokens(labels[0].tolist())
    for mine, theirs, shape in ((run.encoder_attention, out.encoder_attentions, (2, HEADS, S, S)),
                                (run.decoder_attention, out.decoder_attentions, (2, HEADS, T, T)),
                                (run.cross_attention, out.cross_attentions, (2, HEADS, T, S))):
        assert mine.shape == shape
        assert np.abs(mine - torch.stack(theirs)[:, 0].numpy()).max() < 1e-6
        assert np.allclose(mine.sum(-1), 1, atol=1e-5)
    assert run.decoder_attention[..., np.triu(np.ones((T, T), dtype=bool), 1)].max() == 0
    # every earlier target token is seen, checked where no weight underflows to 0: T5 does not scale its query-key
    # products, and a sharp random head gave weights below float32's range; a tenth of each query keeps them in it
    gentle = copy.deepcopy(model)
    with torch.no_grad():
        for name, weight in gentle.named_parameters():
            if name.endswith(("q.weight", "q_proj.weight")):
                weight.mul_(0.1)
    seen = run_pair(gentle, tokenizer, source, target, max_length=MAX_LENGTH).decoder_attention
    assert seen[..., np.triu(np.ones((T, T), dtype=bool), 1)].max() == 0
    assert seen[..., np.tril(np.ones((T, T), dtype=bool))].min() > 0
    assert {group: norms.shape for group, norms in run.value_norms.items()} == {
        "encoder": (2, HEADS, S), "decoder": (2, HEADS, T), "cross": (2, HEADS, S)}
    assert not run.source_truncated and not run.target_truncated
    short = run_pair(model, tokenizer, source, target, max_length=5)
    assert short.source_truncated and short.target_truncated
    assert short.encoder_attention.shape == (2, HEADS, 5, 5) and short.cross_attention.shape == (2, HEADS, 5, 5)
    assert short.label_tokens[-1] == tokenizer.eos_token  # truncation keeps the end token


# -- task seq2seq ---------------------------------------------------------------------------------
def _reference_loss(model, tokenizer, pairs) -> tuple[float, int]:
    """(token-weighted mean target loss, target tokens): each pair alone through transformers' `labels=` loss
    (a mean over the target's tokens, so times their count for the pooled sum)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for source, target in pairs:
            ids = torch.tensor([tokenizer(source, truncation=True, max_length=MAX_LENGTH)["input_ids"]])
            labels = torch.tensor([tokenizer(text_target=target, truncation=True, max_length=MAX_LENGTH)["input_ids"]])
            total += float(model(input_ids=ids, labels=labels).loss) * labels.shape[1]
            count += labels.shape[1]
    return total / count, count


def _task(path: Path, data: Path) -> Seq2SeqTask:
    with loading.file_policy(encoder_decoders=True):
        return load_task("seq2seq", path, data, max_length=MAX_LENGTH)


def _loss(task, outputs: np.ndarray) -> float:
    return float(task.metrics(outputs[None], task.gold[None])["loss"][0])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_task_loss_equals_transformers_and_follows_a_masked_head(family, checkpoints, pairs_file):
    task = _task(checkpoints[family], pairs_file)
    assert isinstance(task, Seq2SeqTask) and task.higher_is_better == {"loss": False, "perplexity": False}
    assert task.n_examples == len(PAIRS) + 2 and len(task.units) == len(PAIRS)  # a repeated pair runs once
    model, tokenizer = _lm(checkpoints[family])
    pairs = PAIRS + PAIRS[:2]
    expected, count = _reference_loss(model, tokenizer, pairs)
    ones = np.ones((LAYERS, HEADS), dtype=np.float32)
    masks = np.stack([ones, _one_head(GROUPS["cross"]).numpy(), _one_head(0).numpy()])
    with Engine(task, "zero", batch_tokens=96) as engine:
        baseline, cross, encoder = engine.evaluate(masks)
        importance = engine.importance(ones)
    assert baseline[:, 0].sum() == count
    assert _loss(task, baseline) == pytest.approx(expected, abs=1e-5)
    assert task.metrics(baseline[None], task.gold[None])["perplexity"][0] == pytest.approx(math.exp(expected),
                                                                                              rel=1e-5)
    plain = evaluate_plain(task, ones, "zero", batch_size=3)  # padded batches in file order
    assert _loss(task, plain) == pytest.approx(expected, abs=1e-5)
    for depth, fast in ((GROUPS["cross"], cross), (0, encoder)):
        zeroed, _ = _reference_loss(_zeroed(model, depth), tokenizer, pairs)
        assert abs(zeroed - expected) > 1e-4  # the head matters, so the comparison can fail
        assert _loss(task, fast) == pytest.approx(zeroed, abs=1e-5)
        assert _loss(task, evaluate_plain(task, masks[1 if depth else 2], "zero", batch_size=3)) == pytest.approx(
            zeroed, abs=1e-5)
    assert importance.shape == (LAYERS, HEADS) and np.isfinite(importance).all() and (importance > 0).all()


@pytest.mark.parametrize("family", ["bart", "t5"])
def test_the_engine_agrees_with_plain_evaluation_under_uniform_masks(family, checkpoints, pairs_file):
    task = _task(checkpoints[family], pairs_file)
    masks = np.stack([_one_head(depth).numpy() for depth in GROUPS.values()])
    with Engine(task, "uniform", batch_tokens=96) as engine:
        fast = engine.evaluate(masks)
    for mask, outputs in zip(masks, fast, strict=True):
        assert np.allclose(outputs, evaluate_plain(task, mask, "uniform", batch_size=3), atol=1e-4)


def test_the_task_is_refused_on_a_model_that_is_not_an_encoder_decoder(tmp_path, pairs_file):
    from tests.architectures import make_checkpoint

    bert = make_checkpoint("bert", tmp_path / "bert", "mlm")
    with pytest.raises(ModelError) as raised:
        _task(bert, pairs_file)
    assert str(raised.value) == (f"model directory {bert}: model type 'bert' is an encoder; for a masked-LM encoder "
                                 "use task 'mlm'; task 'seq2seq' scores a target given its source and needs an "
                                 "encoder-decoder (BART, T5, Marian)")
    assert raised.value.exit_code == EXIT_MODEL and "\n" not in str(raised.value)


def test_other_tasks_refuse_an_encoder_decoder(checkpoints, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("the cat sat on the mat.\na dog was in the garden.\n", encoding="utf-8")
    with loading.file_policy(encoder_decoders=True), pytest.raises(ModelError, match="'bart' is an encoder-decoder"):
        load_task("causal_lm", checkpoints["bart"], texts)


# -- loading --------------------------------------------------------------------------------------
def test_the_loading_table_and_the_policy(checkpoints, tmp_path):
    from tests.architectures import make_checkpoint

    bart = checkpoints["bart"]
    assert all(loading.is_encoder_decoder(checkpoints[family]) for family in FAMILIES)
    assert set(loading.SUPPORTED_ENCODER_DECODERS) == set(FAMILIES)
    bert = make_checkpoint("bert", tmp_path / "bert")
    assert not loading.is_encoder_decoder(bert)
    for policy in (loading.FilePolicy(), loading.FilePolicy(decoders=True)):  # a caller that does not set it refuses
        with pytest.raises(ModelError) as raised:
            loading.check_directory(bart, policy)
        assert str(raised.value).startswith(f"model directory {bart}: model type 'bart' is an encoder-decoder, which "
                                            "this command does not analyse; reportgen analyses the self-attention "
                                            "of these encoders: BERT,")
        assert str(raised.value).endswith("encoder-decoders: BART, T5, Marian")
    for family in FAMILIES:
        loading.check_directory(checkpoints[family], loading.FilePolicy(encoder_decoders=True))
        assert loading.read_shape(checkpoints[family]) == (family, LAYERS, HEADS, 32)  # flat layers
        config = json.loads((checkpoints[family] / "config.json").read_text(encoding="utf-8"))
        with loading.file_policy(encoder_decoders=True):
            base, _ = loading.load(checkpoints[family], "cpu")
            lm, _ = loading.load(checkpoints[family], "cpu", lm_head=True)
        assert type(base).__name__ in ("BartModel", "T5Model", "MarianModel") and config["model_type"] == family
        assert type(lm).__name__ == {"bart": "BartForConditionalGeneration", "t5": "T5ForConditionalGeneration",
                                     "marian": "MarianMTModel"}[family]
        assert base.config._attn_implementation == lm.config._attn_implementation == "eager"
    with pytest.raises(ModelError, match="not an encoder-decoder"):
        loading.load(bert, "cpu", lm_head=True)


# -- classification through the family's *ForSequenceClassification head (Marian has none) ------------------------
CLASSIFIERS = {"bart": "BartForSequenceClassification", "t5": "T5ForSequenceClassification"}


@pytest.fixture(scope="module")
def classifiers(tmp_path_factory) -> dict[str, Path]:
    """family -> a tiny random classifier of 2 labels with its tokenizer, saved as a user's fine-tuned model is."""
    import transformers

    from tests.seq2seq_checkpoints import family_tokenizer, model_config

    root, out = tmp_path_factory.mktemp("classifiers"), {}
    for family, name in CLASSIFIERS.items():
        tokenizer = family_tokenizer(family)
        config = model_config(family, tokenizer)
        config.id2label, config.label2id = {0: "no", 1: "yes"}, {"no": 0, "yes": 1}
        torch.manual_seed(0)
        getattr(transformers, name)(config).eval().save_pretrained(root / family)
        tokenizer.save_pretrained(root / family)
        out[family] = root / family
    return out


@pytest.mark.parametrize("family", list(CLASSIFIERS))
def test_classification_masks_every_group_as_zeroing_the_head_by_hand(family, classifiers, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps({"text": source, "label": ("no", "yes")[i % 2]}) + "\n"
                            for i, (source, _) in enumerate(PAIRS)), encoding="utf-8")
    with loading.file_policy(encoder_decoders=True):
        task = load_task("classification", classifiers[family], data, max_length=MAX_LENGTH)
    model = AutoModelForSequenceClassification.from_pretrained(classifiers[family], attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(classifiers[family])

    def logits(net) -> np.ndarray:  # text by text, unpadded: the model's own forward
        with torch.no_grad():
            return np.stack([net(**tokenizer(source, return_tensors="pt")).logits[0].numpy() for source, _ in PAIRS])

    def outputs(scores: np.ndarray) -> np.ndarray:  # the task's per-example [predicted label, loss]
        gold = np.arange(len(PAIRS)) % 2
        log_p = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
        return np.stack([scores.argmax(-1), -log_p[np.arange(len(gold)), gold]], axis=-1)

    masks = np.stack([_one_head(depth).numpy() for depth in GROUPS.values()])
    with Engine(task, "zero", batch_tokens=96) as engine:
        fast = engine.evaluate(masks)
    for mask, depth, got in zip(masks, GROUPS.values(), fast, strict=True):
        expected = logits(_zeroed(model, depth))
        assert np.abs(expected - logits(model)).max() > 1e-4  # the head matters, so the comparison can fail
        assert np.allclose(got, outputs(expected), atol=1e-4), depth
        assert np.allclose(evaluate_plain(task, mask, "zero", batch_size=3), outputs(expected), atol=1e-4), depth
