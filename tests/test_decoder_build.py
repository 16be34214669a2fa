"""`reportgen build` on decoders (issue 31): tiny random GPT-2, Llama, Qwen2, Mistral and Gemma checkpoints with a
tokenizer trained here.

Every number of the decoder atlas is checked against attention read here with transformers alone and the
definitions of reportgen.patterns.decoder applied to it (the induction test's input rebuilt from its seed);
each null against the uniform causal head's formula written out here. The pages are the decoder's own: the
patterns page has a section per decoder statistic, no statistics page, no encoder pattern list; the head map
colours the decoder labels; the findings quote each score beside the uniform causal head's. What a decoder's
build cannot do is refused up front in one line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reportgen.findings import names
from reportgen.patterns import decoder
from tests.decoder_checkpoints import FAMILIES, make_decoder
from tests.helpers import build_tiny_site, check_report, tiny_config

pytestmark = pytest.mark.slow  # five tiny builds with a causal-LM ablation: ~60 s

EXAMPLES = [{"name": "a repeat", "text": "the cat sat on the mat. the cat sat on the mat."},
            {"text": "a dog was in the garden."}]
ABLATION = {"task": "causal_lm", "data": "texts.txt", "seeds": [0], "fractions": [0.0, 0.5],
            "bootstrap_samples": 100, "permutations": 100,
            "experiments": {"baseline": True, "single_heads": True, "random_fraction": False, "layer_halves": False,
                            "whole_layers": True, "importance": False}}
TEXTS = ["the cat sat on the mat.", "a dog was in the garden.", "the store was closed on monday.",
         "i bought fresh strawberries at the store."]
DECODER_FINDINGS = {"patterns-induction", "patterns-previous-token", "patterns-duplicate-token", "patterns-sink",
                    "patterns-delimiter"}


@pytest.fixture(scope="module")
def sites(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """family -> (model directory, site), each with a causal-LM ablation."""
    out = {}
    for family in FAMILIES:
        ablation = ABLATION
        root = tmp_path_factory.mktemp(family)
        model = make_decoder(family, root / "model", causal_lm=True)
        (root / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
        out[family] = model, build_tiny_site(root, tiny_config(model, examples=EXAMPLES, max_length=128,
                                                               ablation=ablation))
    return out


def attentions(model_dir: Path, ids: list[list[int]]) -> list[np.ndarray]:
    """[L, H, T, T] per input, read with transformers (eager attention), not through reportgen."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        return [torch.stack(model(input_ids=torch.tensor([row]), output_attentions=True).attentions)[:, 0].numpy()
                for row in ids]


def grid(values) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)


def uniform_causal(cells: list[tuple[int, int]]) -> float:
    """The uniform causal head's mean over (sequence length, query) cells: 1/(q+1) on each visible key."""
    return float(np.mean([1 / (query + 1) for _, query in cells]))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_decoder_atlas_is_the_definitions_on_the_models_own_attention(sites, family):
    from transformers import AutoTokenizer

    from reportgen.model.induction import INDUCTION_BATCH, begin_token
    from reportgen.runs import induction_input, induction_tokens

    model_dir, site = sites[family]
    report = check_report(site)
    assert report["architecture"] == "decoder" and report["statistics"] is None
    atlas = report["decoder"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = [tokenizer(example["text"])["input_ids"] for example in EXAMPLES]
    seen = attentions(model_dir, ids)
    tokens = [tokenizer.convert_ids_to_tokens(row) for row in ids]
    for name, score in (("previous_token", decoder.previous_token(seen)), ("sink", decoder.sink(seen)),
                        ("causal_entropy", decoder.causal_entropy(seen)),
                        ("duplicate_token", decoder.duplicate_token(seen, tokens))):
        assert np.abs(grid(atlas[name]["mean"]) - score).max() < 1e-5, name
    previous = [(len(row), q) for row in ids for q in range(1, len(row))]
    assert atlas["previous_token"]["null"] == pytest.approx(uniform_causal(previous), abs=1e-6)
    sink_null = np.mean([1 / (q + 1) for _, q in previous])
    assert atlas["sink"]["null"] == pytest.approx(sink_null, abs=1e-6)
    assert atlas["previous_token"]["queries"] == len(previous)
    # the example-by-example spread and the strongest example, from each example's own score, weighted by its
    # queries as the mean is (population std of every query carrying its example's score)
    per_example = np.stack([decoder.previous_token(one) for one in seen])
    weights = np.array([len(row) - 1 for row in ids], dtype=np.float64)
    centre = np.average(per_example, axis=0, weights=weights)
    assert np.abs(grid(atlas["previous_token"]["mean"]) - centre).max() < 1e-5
    spread = np.sqrt(np.average((per_example - centre) ** 2, axis=0, weights=weights))
    assert np.abs(grid(atlas["previous_token"]["std"]) - spread).max() < 1e-5
    assert (np.array(atlas["previous_token"]["example"]) == per_example.argmax(0)).all()
    # induction: the test's own input, rebuilt from its seed, through the model here
    test = atlas["induction_test"]
    assert (test["n"], test["sequences"], test["tokens"]) == (50, INDUCTION_BATCH, 101)
    vocabulary = min(len(tokenizer), json.loads((model_dir / "config.json").read_text())["vocab_size"])
    r = induction_tokens(vocabulary, test["n"], test["sequences"], test["seed"], exclude=tokenizer.all_special_ids)
    induction_ids = induction_input(r, begin_token(tokenizer)).tolist()
    expected = decoder.induction(np.stack(attentions(model_dir, induction_ids)), test["n"])
    assert np.abs(grid(atlas["induction"]["mean"]) - expected).max() < 1e-5
    assert atlas["induction"]["null"] == pytest.approx(np.mean([1 / (q + 1) for q in range(51, 101)]), abs=1e-6)
    assert all(example == -1 for row in atlas["induction"]["example"] for example in row)  # no page of its own


@pytest.mark.parametrize("family", FAMILIES)
def test_labels_follow_the_thresholds_and_the_head_map_colours_them(sites, family):
    _, site = sites[family]
    atlas = check_report(site)["decoder"]
    for layer, row in enumerate(atlas["labels"]):
        for head, label in enumerate(row):
            passing = [key for key, stat in atlas["label_stats"].items()
                       if (atlas[stat]["mean"][layer][head] or 0) > atlas["thresholds"][key]]
            assert (label == "mixed") == (not passing) and (label == "mixed" or label in passing)
    assert sum(atlas["label_counts"].values()) == len(atlas["labels"]) * len(atlas["labels"][0])
    home = (site / "index.html").read_text(encoding="utf-8")
    cells = re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="[\d.]+" height="[\d.]+" fill="(#[0-9a-f]{6})"/>',
                       home.split('id="head-map"', 1)[1].split("</figure>", 1)[0])
    labels = [label for row in atlas["labels"] for label in row]
    assert cells[:len(labels)] == [names.colour(label) for label in labels]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_findings_quote_each_score_beside_the_uniform_causal_head(sites, family):
    _, site = sites[family]
    report = check_report(site)
    found = {f["id"]: f for f in report["findings"] if f["group"] == "patterns"}
    assert set(found) == DECODER_FINDINGS
    for finding in found.values():
        numbers = finding["numbers"]
        assert f"{numbers['null']:.2f}" in finding["sentence"] and "uniform causal head" in finding["sentence"]
        assert finding["supported"] == bool(numbers["count"])
        strongest = numbers["strongest"]
        assert f"layer {strongest['layer']} head {strongest['head']}" in finding["sentence"].lower()
    assert "random tokens repeated twice" in found["patterns-induction"]["sentence"]
    assert report["ablation"]["task"]["type"] == "causal_lm" and report["ablation"]["task"]["metric"] == "loss"
    assert {f["id"] for f in report["findings"]} >= {"ablation-baseline", "ablation-single-heads"}


def test_the_pages_are_a_decoders(sites):
    _, site = sites["llama"]
    assert not (site / "statistics.html").exists()
    patterns = (site / "patterns.html").read_text(encoding="utf-8")
    for anchor in ("labels", "induction", "previous-token", "duplicate-token", "sink", "delimiter", "entropy"):
        assert f'id="{anchor}"' in patterns, anchor
    assert "uniform causal head" in patterns and "Next token" not in patterns
    example = (site / "example-1.html").read_text(encoding="utf-8")
    assert "attends only to itself and the tokens before it" in example
    assert 'id="patterns"' not in example  # the six seed patterns are an encoder's
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "statistics.html" not in home and "a decoder: each token sees only itself" in home
    qk = " ".join((site / "example-1-qk.html").read_text(encoding="utf-8").split())
    # the query/key page names the causal mask, and no terms or window the model does not have (issue 47)
    assert "Each query sees only itself and the tokens before it (a decoder's causal mask): the other keys" in qk
    assert "local window" not in qk and "more than the scaled" not in qk and "sliding window" not in qk


@pytest.mark.parametrize("family", FAMILIES)
def test_byte_level_spaces_show_as_the_space_mark_with_its_glossary_entry(sites, family):
    """The tiny decoders' tokenizer is byte-level BPE (decoder_checkpoints): "Ġcat" is shown "␣cat" in the
    token list, the views' data and the pattern lists, and the page says what ␣ means, linked to the glossary."""
    model, site = sites[family]
    raw = json.loads((model / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    assert any(token.startswith("\u0120") for token in raw)  # what would have been shown
    shown = {path.name: path.read_text(encoding="utf-8") for path in site.glob("example-1*")
             if path.suffix in (".html", ".js")}
    shown.update({path.name: path.read_text(encoding="utf-8") for path in (site / "example-1-data").glob("*.js")}
                 if (site / "example-1-data").is_dir() else {})
    # the glossary's definition (a link's tooltip, title="...") names Ġ on purpose; nothing else shows it
    untitled = {name: re.sub(r'title="[^"]*"', "", text) for name, text in shown.items()}
    assert not [name for name, text in untitled.items() if "\u0120" in text or "\\u0120" in text]
    tokens = re.search(r'<div class="rg-tokens">(.*?)</div>', shown["example-1.html"], re.S).group(1)
    assert "\u2423cat" in tokens and "\u2423mat" in tokens, tokens
    assert re.search(r'begins with a space \(the <a [^>]*href="glossary.html#space-mark"[^>]*>space mark</a>',
                     shown["example-1.html"]), "the space mark is explained and linked"
    assert 'id="space-mark"' in (site / "glossary.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("family", FAMILIES)
def test_the_query_key_page_names_the_masks_its_model_has(sites, family):
    """Mistral's layers (sliding_window 6, under the 14 tokens of example 1) mask the keys before the window too: its
    page says so; the other decoders' mask only the later keys (qk_masks, example_qk.md.j2)."""
    qk = " ".join((sites[family][1] / "example-1-qk.html").read_text(encoding="utf-8").split())
    assert "Each query sees only itself and the tokens before it (a decoder's causal mask)" in qk
    assert ("and in some layers only the nearest of those (a sliding window)" in qk) == (family == "mistral")
    assert "local window" not in qk


def test_a_statistic_that_does_not_apply_is_absent_and_said_so(tmp_path):
    model = make_decoder("gpt2", tmp_path / "model")
    site = build_tiny_site(tmp_path, tiny_config(model, examples=[{"text": "the store was closed"}],
                                                 ablation={"enabled": False}))
    report = check_report(site)
    assert report["examples"][0]["n_tokens"] > 2 and report["decoder"]["previous_token"] is not None
    assert report["decoder"]["duplicate_token"] is None  # no token repeats: not measured, not 0
    sentence = next(f for f in report["findings"] if f["id"] == "patterns-duplicate-token")["sentence"]
    assert sentence == "Duplicate-token heads were not measured: no input repeats a token."


def reportgen(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("extra, code, line", [
    ({"examples": [{"text": "the cat sat", "pair": "on the mat"}]}, 4,
     "field 'examples': the example 'the cat sat' has a 'pair', and this decoder's tokenizer has no separator "
     "token to join the two; give one text"),
    ({"examples": [{"text": "the cat sat", "target": "le chat"}]}, 4,
     "field 'examples': the example 'the cat sat' has a 'target', which only an encoder-decoder (BART, T5, Marian) "
     "reads; remove it"),
    ({"compare": {"model": "./model"}}, 2,
     "field 'compare': comparing models is for encoders; a decoder's build has no comparison yet (remove 'compare')"),
    ({"claims": "seed004"}, 2,
     "field 'claims': seed 004's claims are about an encoder's heads; remove 'claims' for a decoder"),
])
def test_what_a_decoders_build_cannot_do_is_refused_in_one_line(tmp_path, extra, code, line):
    model = make_decoder("gpt2", tmp_path / "model")
    config = {"examples": EXAMPLES, "ablation": {"enabled": False}, **extra}
    (tmp_path / "reportgen.yaml").write_text(tiny_config(model, **config), encoding="utf-8")
    done = reportgen(tmp_path, "build")
    assert done.returncode == code and not (tmp_path / "site").exists()
    assert done.stderr.strip().splitlines()[-1].endswith(line), done.stderr


def test_the_built_in_pairs_are_left_out_for_a_decoder_with_a_warning(tmp_path):
    from reportgen.config import builtin_examples

    model = make_decoder("gpt2", tmp_path / "model")
    site = build_tiny_site(tmp_path, tiny_config(model, examples="builtin", ablation={"enabled": False}))
    report = check_report(site)
    singles = [spec.text for spec in builtin_examples() if spec.pair is None]
    assert [example["text"] for example in report["examples"]] == singles
    pairs = len(builtin_examples()) - len(singles)
    assert f"{pairs} built-in examples with a second sentence left out: a decoder reads one text" in report["warnings"]


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_is_taken_out_a_layer_at_a_time_as_the_model_gives_it(sites, family, monkeypatch):
    """As for the encoders (tests/model/test_architectures.py): each layer's weights copied out by the hooks,
    none kept by the model, the copy bit for bit transformers' own."""
    from tests.model.capture_checks import check_layer_capture

    check_layer_capture(sites[family][0], monkeypatch)
