"""recipes/induction: a two-layer attention-only GPT-2 trained until induction heads form (issue 31).

Fast: the recipe's local detector (recipes/induction/detect.py) on hand-built causal heads with known
answers, and in agreement with reportgen.patterns.decoder where that exists; the training sequences.
Slow: a short run of the recipe's own training, then the saved checkpoint loaded as any transformers
user loads it (AutoModelForCausalLM / AutoTokenizer) and scored here: a layer-1 head above 0.5 on
Olsson et al.'s induction test after training, none before, and the MLPs still exactly zero.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import ROOT

RECIPE = ROOT / "recipes" / "induction"
THRESHOLD = 0.5
# The slow tests' run (issue 44): train.py's own options, only its 64-token phase (the sequence-length warm-up),
# 2000 steps instead of 3000 at 64 then 1000 at 128 tokens, and 3 heads of the recipe's width 32 in a residual
# stream of 96 instead of 4 in 128: a quarter cheaper a step, and the heads formed by step 1000-1100 (0.81 induction,
# 0.55 previous-token at the end; the recipe's width: 0.68 and 0.37). Cheaper runs tried formed none or too weak
# a previous-token head: heads of width 16, batches of 8-16 or 32-48 tokens, learning rates 5e-3 and 1e-2,
# 1200-1400 steps (their cosine decay comes sooner).
CONTEXT = 64
QUICK_STEPS = 2000
# --minutes: train.py's time budget (14) only stops a hang here; a loaded CI machine took 14 min for 1972 steps
QUICK = ["--context", str(CONTEXT), "--embd", "96", "--heads", "3", "--steps", str(QUICK_STEPS), "--minutes", "60"]
N = min(50, (CONTEXT - 1) // 2)  # the induction test's n at CONTEXT positions (train.py's default --n): 31


def _module(name: str):
    """A recipe file as a module (the recipe is scripts, not a package), under a distinctive name
    (induction_train, induction_detect; induction_data keeps its own, the name train.py imports it by);
    the recipe's folder goes on sys.path, as when train.py runs as a script."""
    if str(RECIPE) not in sys.path:
        sys.path.insert(0, str(RECIPE))
    key = name if name.startswith("induction_") else f"induction_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, RECIPE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def detect():
    return _module("detect")


@pytest.fixture(scope="module")
def data():
    return _module("induction_data")


# ---------------------------------------------------------------- hand-built heads


def one_hot(keys: np.ndarray) -> np.ndarray:
    """[T, T]: row q all on key keys[q] (keys[q] <= q)."""
    head = np.zeros((len(keys), len(keys)))
    head[np.arange(len(keys)), keys] = 1.0
    return head


def uniform_causal(length: int) -> np.ndarray:
    return np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None]


def induction_head(n: int) -> np.ndarray:
    """On [BOS] + r + r: the second copy's query q on key q - n + 1, every other query on BOS."""
    keys = np.zeros(2 * n + 1, dtype=int)
    queries = np.arange(n + 1, 2 * n + 1)
    keys[queries] = queries - n + 1
    return one_hot(keys)


def previous_head(length: int) -> np.ndarray:
    return one_hot(np.maximum(np.arange(length) - 1, 0))


def test_the_detector_scores_known_heads(detect):
    n = 5
    length = 2 * n + 1
    heads = np.stack([induction_head(n), previous_head(length), uniform_causal(length), one_hot(np.zeros(length,
                                                                                                         int))])
    attention = heads.reshape(2, 2, length, length)  # [L, H, T, T]
    ind, prev = detect.induction(attention, n), detect.previous_token(attention)
    assert ind.shape == prev.shape == (2, 2)
    np.testing.assert_allclose(ind.ravel(), [1.0, 0.0, detect.causal_null_induction(n), 0.0])
    # the induction head and the BOS head hit the previous token only at query 1 (on BOS): 1 of 2n queries
    np.testing.assert_allclose(prev.ravel(), [1 / (2 * n), 1.0, detect.causal_null_previous(length), 1 / (2 * n)])
    # the uniform causal head's scores, by hand: mean of 1/(q+1) over the cells
    assert detect.causal_null_induction(n) == pytest.approx(np.mean([1 / (q + 1) for q in range(n + 1, 2 * n + 1)]))
    assert detect.causal_null_previous(length) == pytest.approx(np.mean([1 / (q + 1) for q in range(1, length)]))
    assert detect.nulls(length, n=n) == {"previous_token": detect.causal_null_previous(length),
                                         "induction": detect.causal_null_induction(n)}


def test_the_detector_reads_the_key_after_the_earlier_occurrence_not_its_neighbours(detect):
    n = 4  # [BOS a b c d a b c d]: queries 5..8 on keys 2, 3, 4, 5
    wrong = {"earlier occurrence itself (duplicate token)": -n, "two after it": -n + 2}
    for offset in wrong.values():
        keys = np.zeros(2 * n + 1, dtype=int)
        keys[n + 1:] = np.arange(n + 1, 2 * n + 1) + offset
        assert detect.induction(one_hot(keys)[None, None], n)[0, 0] == 0.0
    np.testing.assert_array_equal(np.nonzero(induction_head(n)[n + 1:])[1], [2, 3, 4, 5])
    batch = np.stack([induction_head(n)[None, None], uniform_causal(2 * n + 1)[None, None]])  # [B, L, H, T, T]
    np.testing.assert_allclose(detect.induction(batch, n)[:, 0, 0], [1.0, detect.causal_null_induction(n)])
    with pytest.raises(ValueError, match="2n \\+ 1"):
        detect.induction(induction_head(n)[None, None], n + 1)
    with pytest.raises(ValueError, match="n >= 3"):
        detect.induction(np.eye(5)[None, None], 2)


def test_the_induction_input_is_bos_then_r_twice_without_specials(detect):
    r = detect.induction_tokens(10, 50, 3, seed=7, exclude=range(4))
    assert r.shape == (3, 50) and r.min() >= 4 and r.max() <= 9 and len(np.unique(r)) == 6
    np.testing.assert_array_equal(r, detect.induction_tokens(10, 50, 3, seed=7, exclude=range(4)))
    ids = detect.induction_input(r, bos_id=0)
    assert ids.shape == (3, 101)
    np.testing.assert_array_equal(ids[:, 0], 0)
    np.testing.assert_array_equal(ids[:, 1:51], r)
    np.testing.assert_array_equal(ids[:, 51:], r)


def test_the_local_detector_agrees_with_reportgen_where_that_exists(detect):
    decoder = pytest.importorskip("reportgen.patterns.decoder")
    n, rng = 6, np.random.default_rng(0)
    raw = np.tril(rng.random((3, 2, 4, 2 * n + 1, 2 * n + 1)))  # [B, L, H, T, T], causal
    attention = raw / raw.sum(-1, keepdims=True)
    for sequence in attention:
        np.testing.assert_allclose(detect.induction(sequence, n), decoder.induction(sequence, n))
        np.testing.assert_allclose(detect.previous_token(sequence), decoder.previous_token(sequence))
    null = decoder.nulls(2 * n + 1, n=n)
    assert detect.nulls(2 * n + 1, n=n) == pytest.approx({key: null[key] for key in ("previous_token", "induction")})
    np.testing.assert_array_equal(detect.induction_tokens(50, n, 4, 3, exclude=[0, 1]),
                                  decoder.induction_tokens(50, n, 4, 3, exclude=[0, 1]))


# ---------------------------------------------------------------- the training data


def test_training_sequences_start_with_bos_and_repeat_their_random_spans(data):
    rng = np.random.default_rng(0)
    batch = data.training_batch(rng, 8, 128, mix=(0.0, 0.5, 0.5))
    assert batch.shape == (8, 128) and (batch[:, 0] == data.BOS_ID).all()
    assert (batch[:, 1:] >= data.FIRST_WORD_ID).all()  # no special token after BOS
    # with only random spans and copies, most 4-grams after the first chunk occur earlier in the sequence
    repeated = []
    for row in batch:
        grams = [tuple(row[i:i + 4]) for i in range(1, 125)]
        repeated.append(np.mean([gram in grams[:i] for i, gram in enumerate(grams)]))
    assert np.mean(repeated) > 0.3
    text = data.training_batch(np.random.default_rng(0), 2, 64, mix=(1.0, 0.0, 0.0))
    words = [data.VOCABULARY[i] for i in text[0]]
    assert words[0] == data.BOS and "." in words  # template sentences
    assert 200 <= len(data.VOCABULARY) <= 400


def test_the_word_arrays_draw_as_the_word_lists(data):
    """story() draws from arrays made once (induction_data._ARRAYS), the same draws as from the lists, so the
    training sequences are the ones the recipe's measured.json was made with."""
    lists = {"names": data.NAMES, "objects": data.OBJECTS, "places": data.PLACES, "adjectives": data.ADJECTIVES,
             "verbs": data.VERBS_PAST, "moves": data.MOVES, "times": data.TIMES, "animals": data.ANIMALS,
             "feelings": data.FEELINGS, "numbers": data.NUMBERS}
    assert set(data._ARRAYS) == set(lists)
    for name, words in lists.items():
        for size, replace in ((None, True), (2, False)):
            a, b = np.random.default_rng(7), np.random.default_rng(7)
            assert np.array_equal(a.choice(data._ARRAYS[name], size=size, replace=replace),
                                  b.choice(words, size=size, replace=replace)), name


@pytest.mark.slow  # a GPT-2 built and stepped twice (torch, transformers)
def test_skipping_the_zero_mlps_changes_no_output_and_no_gradient(data):
    """train.mlps_skipped: the attention-only model's loss and every gradient are bit for bit those of the model
    that computes its MLPs, and the MLPs compute again once the block ends."""
    import torch

    train = _module("train")
    model = train.make_model(train.parse_args(["--context", "32", "--embd", "32", "--heads", "2"]))
    ids = torch.as_tensor(data.training_batch(np.random.default_rng(0), 4, 32))

    def loss_and_grads():
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    computed = loss_and_grads()
    with train.mlps_skipped(model):
        skipped = loss_and_grads()
        assert torch.equal(model.transformer.h[0].mlp(torch.ones(1, 2, 32)), torch.zeros(1, 2, 32))
    assert torch.equal(computed[0], skipped[0]) and all(map(torch.equal, computed[1], skipped[1]))
    assert "forward" not in vars(model.transformer.h[0].mlp)


@pytest.mark.slow
def test_the_tokenizer_encodes_the_stories_as_the_training_ids(data, tmp_path):
    from transformers import AutoTokenizer

    data.make_tokenizer(128).save_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    rng = np.random.default_rng(1)
    for _ in range(200):
        words = data.story(rng)
        assert tokenizer(" ".join(words))["input_ids"] == data.encode_words(words)
    ids = tokenizer("Mary gave the RED ball to John, then Mary gave the red ball to John.")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id == data.BOS_ID and data.UNK_ID not in ids
    assert tokenizer.convert_ids_to_tokens(ids)[1:5] == ["mary", "gave", "the", "red"]


# ---------------------------------------------------------------- a short training run


# over 60 s: the heads form only after about 1000 steps of 32 x 64 tokens (the comment at QUICK)
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(output folder, measured.json, training seconds): the recipe's train.py with the QUICK options."""
    train = _module("train")
    out = tmp_path_factory.mktemp("induction")
    start = time.monotonic()
    train.run(train.parse_args(["--out", str(out), *QUICK, "--threads", "1"]))
    seconds = time.monotonic() - start
    return out, json.loads((out / "measured.json").read_text(encoding="utf-8")), seconds


def _scores(model_dir: Path, batch: int = 8, seed: int = 99) -> tuple[np.ndarray, np.ndarray, object]:
    """Induction and previous-token scores [L, H] of a saved checkpoint, computed here: fresh random tokens
    (another seed than train.py's), n as long as the model's positions allow (at most 50), the model as
    AutoModelForCausalLM loads it, eager attention."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    detect = _module("detect")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager").eval()
    n = min(50, (model.config.n_positions - 1) // 2)
    r = detect.induction_tokens(len(tokenizer), n, batch, seed, exclude=tokenizer.all_special_ids)
    ids = torch.as_tensor(detect.induction_input(r, tokenizer.bos_token_id))
    with torch.no_grad():
        attention = torch.stack(model(input_ids=ids, output_attentions=True).attentions, dim=1).double().numpy()
    return detect.induction(attention, n).mean(0), detect.previous_token(attention).mean(0), model


@pytest.mark.slow
def test_a_short_run_forms_an_induction_head_that_the_untrained_model_lacks(trained):
    out, measured, seconds = trained
    induction, previous, model = _scores(out / "model")
    induction_before, previous_before, _ = _scores(out / "init")
    n = measured["induction_test"]["n"]
    assert n == N
    null = _module("detect").nulls(2 * n + 1, n=n)
    print(f"\n{QUICK_STEPS} steps, {seconds:.0f} s; layer-1 induction {induction[1].round(3)}, "
          f"layer-0 previous-token {previous[0].round(3)}; before: max induction {induction_before.max():.3f}")
    assert induction_before.max() < 2 * null["induction"] < THRESHOLD  # untrained: near the uniform causal head
    assert previous_before.max() < 2 * null["previous_token"]
    assert induction[1].max() > THRESHOLD, f"no layer-1 induction head after {QUICK_STEPS} steps: {induction[1]}"
    assert previous[0].max() > 5 * null["previous_token"]  # the previous-token head it composes with
    # attention-only: the saved MLP output projections are exactly zero, so every MLP adds nothing
    for block in model.transformer.h:
        assert not block.mlp.c_proj.weight.any() and not block.mlp.c_proj.bias.any()
    # the recipe's own record says the same as this independent measurement (other random tokens)
    assert measured["training"]["steps"] == QUICK_STEPS
    assert measured["summary"]["after_best_induction_layer1"]["score"] > THRESHOLD
    assert measured["summary"]["before_best_induction"]["score"] < THRESHOLD
    assert np.max(measured["after"]["induction"]) == pytest.approx(induction.max(), abs=0.1)
    assert measured["summary"]["expected_outcome"] is True


@pytest.mark.slow
def test_the_recipes_site_names_the_induction_and_previous_token_heads(trained):
    """The recipe's own reportgen.yaml, built on the short run's model: its findings name a layer-1 induction head
    and a layer-0 previous-token head (each above its threshold, beside the uniform causal head), the head map
    labels them, and the causal-LM ablation on the held-out stories ran."""
    import shutil

    from reportgen.config import load_config
    from reportgen.pipeline import build

    out, _, _ = trained
    shutil.copy(RECIPE / "reportgen.yaml", out / "reportgen.yaml")
    report = build(load_config(out / "reportgen.yaml")).report
    found = {finding.id: finding for finding in report.findings}
    induction, previous = found["patterns-induction"], found["patterns-previous-token"]
    assert induction.supported and induction.numbers["heads"][0]["layer"] == 1, induction.sentence
    assert previous.supported and any(head["layer"] == 0 for head in previous.numbers["heads"]), previous.sentence
    top = induction.numbers["heads"][0]
    assert induction.sentence.startswith(f"Layer 1 head {top['head']} is an induction head: {top['value']:.2f}")
    assert report.decoder.labels[1][top["head"]] == "induction"
    assert report.ablation.task.type == "causal_lm" and report.ablation.single_heads is not None
    assert (out / "site" / "patterns.html").is_file() and (out / "site" / "ablation.html").is_file()
    # activation patching (issue 49): the head that restores the behaviour from the clean run is the induction
    # score's head, and the head the behaviour needs most (patched from the corrupted run) is one of the two
    restored, needed = found["patching-denoising"], found["patching-noising"]
    assert restored.supported and (restored.numbers["layer"], restored.numbers["head"]) == (1, top["head"]), \
        restored.sentence
    previous_heads = {(head["layer"], head["head"]) for head in previous.numbers["heads"]}
    assert needed.supported and (needed.numbers["layer"], needed.numbers["head"]) in previous_heads | {(1, top["head"])}
    assert report.patching.pairs.present and (out / "site" / "patching.html").is_file()
    example = report.examples[report.patching.example]  # the first pair's clean prompt, its head views linked
    assert example.n_tokens == report.patching.pairs.tokens


@pytest.mark.slow
def test_an_untrained_models_patching_names_no_head(trained):
    """The same pairs on the untrained network (init/): its clean and corrupted prompts' logit differences differ by
    a few hundredths of a logit, short of patching.min_difference, so no head is significant and none is named."""
    from reportgen.config import load_config
    from reportgen.pipeline import build

    out, _, _ = trained
    text = (RECIPE / "reportgen.yaml").read_text(encoding="utf-8")
    text = text.replace("model: ./model", "model: ./init").replace("output: site", "output: site-untrained")
    # no ablation, and 20 pairs not patched per position: what is asked is whether the pairs show a behaviour at all
    text = text.replace("  enabled: true\n  task: causal_lm", "  enabled: false\n  task: causal_lm").replace(
        "  pairs: 50\n", "  pairs: 20\n  positions: false\n")
    (out / "untrained.yaml").write_text(text, encoding="utf-8")
    report = build(load_config(out / "untrained.yaml")).report
    assert report.ablation is None
    patching = report.patching
    assert not patching.pairs.present and abs(patching.pairs.difference) < patching.pairs.min_difference
    assert not any(any(row) for direction in patching.directions for row in direction.significant)
    assert [f.id for f in report.findings if f.group == "patching"] == ["patching-absent"]
    assert all(not finding.supported for finding in report.findings if finding.id.startswith("patching-")
               and finding.id != "patching-agreement")
