"""`reportgen build` on encoder-decoders (issue 31): tiny random BART, T5 and Marian checkpoints
(tests/seq2seq_checkpoints.py).

Each example is a source (`text`) and a `target`. Every group of each example page's views is checked against
attention read here with transformers alone (teacher-forced as the model was trained); the encoder's statistics
against the entropy formula on that attention; the ablation's heads are the three groups, named so in the
findings. What an encoder-decoder's build cannot take is refused up front in one line.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reportgen.model.special_tokens import special_flags, special_ids
from reportgen.report import head_link
from reportgen.site import view_files, views
from reportgen.site.token_text import shown_tokens
from tests.helpers import build_tiny_site, check_report, tiny_config
from tests.seq2seq_checkpoints import FAMILIES, make_encoder_decoder, model_attention, write_pairs

pytestmark = pytest.mark.slow  # three tiny builds with a sequence-to-sequence ablation: ~90 s

EXAMPLES = [{"name": "a cat", "text": "the cat sat on the mat.", "target": "le chat est assis sur le tapis."},
            {"text": "a dog was in the garden.", "target": "un chien était dans le jardin."}]
ABLATION = {"task": "seq2seq", "data": "pairs.jsonl", "max_length": 64, "seeds": [0], "fractions": [0.5],
            "bootstrap_samples": 100, "permutations": 100,
            "experiments": {"baseline": True, "single_heads": True, "random_fraction": False, "layer_halves": True,
                            "whole_layers": True, "importance": False}}
STEP = 0.5 / 255  # the views' 8-bit encoding rounds each weight within half a step
GROUP_WORDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}


@pytest.fixture(scope="module")
def sites(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """family -> (model directory, site), each with a sequence-to-sequence ablation."""
    out = {}
    for family in FAMILIES:
        root = tmp_path_factory.mktemp(family)
        model = make_encoder_decoder(family, root / "model")
        write_pairs(root / "pairs.jsonl")
        out[family] = model, build_tiny_site(root, tiny_config(model, examples=EXAMPLES, max_length=64,
                                                               ablation=ABLATION))
    return out


@pytest.fixture(scope="module")
def bart(tmp_path_factory) -> Path:
    """One tiny BART for the refusals, which never get as far as changing it."""
    return make_encoder_decoder("bart", tmp_path_factory.mktemp("bart") / "model")


def page_payload(site: Path, number: int) -> dict:
    """The example page's payload with its data files put back (reportgen.site.view_files.read_page_payload)."""
    return view_files.read_page_payload(site / f"example-{number}.html")


def decoded_shares(payload: dict, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(weights, contribution shares) of one group as the page decodes them."""
    encoded, contributions = views.group_attention(payload, name)
    if contributions.get("encoding") == "norms-f32":
        share, _ = views.decode_norm_contributions(encoded, contributions)
    else:
        share, _ = views.decode_contributions(contributions)
    return views.decode_attention(encoded), share


# over 60 s (its fixture, once per family): an encoder-decoder's site with its seq2seq ablation
@pytest.mark.parametrize("family", FAMILIES)
def test_every_group_of_each_example_page_is_the_models_own_attention(sites, family):
    model, site = sites[family]
    report = check_report(site)
    assert report["architecture"] == "encoder-decoder" and report["layers"] == 6
    assert report["groups"] == ["encoder"] * 2 + ["decoder"] * 2 + ["cross"] * 2
    for number, example in enumerate(EXAMPLES, 1):
        attention, source, decoder = model_attention(model, example["text"], example["target"])
        payload = page_payload(site, number)
        described = report["examples"][number - 1]
        assert (described["text"], described["target"]) == (example["text"], example["target"])
        assert described["n_tokens"] == len(source) and described["n_target_tokens"] == len(decoder)
        assert described["qk_page"] is None and not (site / f"example-{number}-qk.html").exists()
        source, decoder = shown_tokens(source), shown_tokens(decoder)  # as the views show them ("Ġc" as "␣c")
        assert payload["tokens"] == source and payload["target"] == example["target"]
        sides = {"encoder": (source, source), "decoder": (decoder, decoder), "cross": (decoder, source)}
        for group in payload["groups"]:
            assert (group["queries"], group["keys"]) == sides[group["name"]]
            weights, share = decoded_shares(payload, group["name"])
            assert np.abs(weights - attention[group["name"]]).max() <= STEP + 1e-6, group["name"]
            # each share rounded within half a step of the 8-bit encoding, or computed from the norms
            assert np.allclose(share.sum(-1), 1, atol=share.shape[-1] * STEP)
            assert not np.allclose(share, weights, atol=1e-3)
        # the encoder's statistics read the encoder's attention: Clark et al.'s smoothed entropy per head
        encoder = attention["encoder"].astype(np.float64)
        smooth = 0.9999 * encoder + 0.0001 / encoder.shape[-1]
        expected = -(smooth * np.log(smooth)).sum(-1).mean(-1)
        assert np.allclose(np.array(described["entropy"], dtype=float), expected, atol=2e-4)


def grid(values) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_decoder_self_attention_has_the_decoder_atlas_on_its_own_attention(sites, family):
    from reportgen.patterns import decoder

    model, site = sites[family]
    report = check_report(site)
    runs = [model_attention(model, example["text"], example["target"]) for example in EXAMPLES]
    seen = [attention["decoder"] for attention, _, _ in runs]
    tokens = [decoder_tokens for _, _, decoder_tokens in runs]
    atlas = report["decoder"]
    assert atlas["counts"]["layers"] == 2 and atlas["counts"]["examples"] == len(EXAMPLES)
    for name, score in (("previous_token", decoder.previous_token(seen)), ("sink", decoder.sink(seen)),
                        ("causal_entropy", decoder.causal_entropy(seen)),
                        ("duplicate_token", decoder.duplicate_token(seen, tokens))):
        assert np.abs(grid(atlas[name]["mean"]) - score).max() < 1e-5, name
    previous = [(len(row), q) for row in tokens for q in range(1, len(row))]
    assert atlas["previous_token"]["null"] == pytest.approx(np.mean([1 / (q + 1) for _, q in previous]), abs=1e-6)
    assert atlas["induction"] is None and "does not define" in atlas["induction_missing"]
    # its findings have ids of their own, name the group and open the decoder's group of the views
    found = {f["id"]: f for f in report["findings"] if f["id"].startswith("decoder-patterns-")}
    assert set(found) == {"decoder-patterns-induction", "decoder-patterns-previous-token",
                          "decoder-patterns-duplicate-token", "decoder-patterns-sink", "decoder-patterns-delimiter"}
    sink = found["decoder-patterns-sink"]
    assert "decoder self-attention layer" in sink["sentence"]
    assert [link["href"] for link in sink["links"]] == ["decoder-patterns.html#sink"]
    views = [span["link"] for span in sink["spans"] if span.get("link")]
    assert views and all("&attn=decoder&" in href for href in views)
    page = (site / "decoder-patterns.html").read_text(encoding="utf-8")
    assert "this page is about its <strong>decoder's self-attention</strong>" in page
    assert "attn=decoder" in page and 'id="chart-sink"' in page


@pytest.mark.parametrize("family", FAMILIES)
def test_the_cross_attention_statistics_are_the_formulas_on_its_own_attention(sites, family):
    from transformers import AutoTokenizer

    model, site = sites[family]
    report = check_report(site)
    tokenizer = AutoTokenizer.from_pretrained(model)
    specials = special_ids(tokenizer)  # one definition for every statistic: <unk> is content
    runs = [model_attention(model, example["text"], example["target"]) for example in EXAMPLES]
    on_special, entropy, null_special, null_entropy, queries = 0.0, 0.0, 0.0, 0.0, 0
    for attention, source, _ in runs:
        cross = attention["cross"].astype(np.float64)  # [L, H, T, S]
        special = special_flags(tokenizer.convert_tokens_to_ids(list(source)), specials)
        on_special = on_special + cross[..., special].sum((-1, -2))
        entropy = entropy - np.where(cross > 0, cross * np.log(np.where(cross > 0, cross, 1)), 0).sum((-1, -2))
        null_special += cross.shape[2] * special.sum() / len(source)
        null_entropy += cross.shape[2] * np.log(len(source))
        queries += cross.shape[2]
    stats = report["cross"]
    assert np.abs(grid(stats["source_special"]["mean"]) - on_special / queries).max() < 1e-5
    assert np.abs(grid(stats["entropy"]["mean"]) - entropy / queries).max() < 1e-4
    assert stats["source_special"]["null"] == pytest.approx(null_special / queries, abs=1e-6)
    assert stats["entropy"]["null"] == pytest.approx(null_entropy / queries, abs=1e-6)
    finding = next(f for f in report["findings"] if f["id"] == "cross-patterns-source-special")
    assert "cross-attention layer" in finding["sentence"] and "a uniform head over the source puts" in \
        finding["sentence"]
    assert all("&attn=cross&" in span["link"] for span in finding["spans"] if span.get("link"))
    page = (site / "cross-attention.html").read_text(encoding="utf-8")
    assert 'id="chart-source-special"' in page and 'id="chart-entropy"' in page and "attn=cross" in page
    # beside the finding, the attention of the head it names, linked to that head's cross-attention view (issue 47)
    numbers = finding["numbers"]
    named = numbers["heads"][0] if numbers["heads"] else numbers["strongest"]
    home = (site / "index.html").read_text(encoding="utf-8")
    block = home[home.index('id="finding-cross-patterns-source-special"'):]
    block = block[:block.index("</figure>", block.index('class="rg-finding-attention"'))]
    link = head_link(named["example"], named["layer"], named["head"], group="cross")
    assert f'<a href="{html.escape(link)}" class="rg-attention-link"' in block


def test_the_heads_frame_has_a_row_per_head_of_every_group(sites):
    pytest.importorskip("pandas")
    from reportgen.report import Report

    _, site = sites["bart"]
    frame = Report.load(site).heads_frame()
    report = check_report(site)
    assert len(frame) == 6 * 4 and list(frame["group"].unique()) == ["encoder", "decoder", "cross"]
    encoder, decoder_rows, cross = (frame[frame["group"] == group] for group in ("encoder", "decoder", "cross"))
    assert list(encoder["group_layer"].unique()) == [0, 1] and list(cross["group_layer"].unique()) == [0, 1]
    assert np.allclose(encoder["entropy"], grid(report["statistics"]["entropy"]["mean"]).ravel())
    assert decoder_rows["entropy"].isna().all() and encoder["sink"].isna().all()
    assert np.allclose(decoder_rows["sink"], grid(report["decoder"]["sink"]["mean"]).ravel())
    assert cross["label"].isna().all() and encoder["label"].notna().all()
    assert np.allclose(cross["cross_source_special"], grid(report["cross"]["source_special"]["mean"]).ravel())
    assert encoder["cross_entropy"].isna().all()
    assert (cross["cross_entropy_null"] == report["cross"]["entropy"]["null"]).all()
    assert np.allclose(frame["ablation_value"], grid(report["ablation"]["single_heads"]["value"]).ravel())


@pytest.mark.parametrize("family", FAMILIES)
def test_the_ablation_masks_the_three_groups_and_names_them(sites, family):
    _, site = sites[family]
    report = check_report(site)
    ablation = report["ablation"]
    assert ablation["task"]["type"] == "seq2seq" and ablation["groups"] == report["groups"]
    assert np.shape(ablation["single_heads"]["relative"]) == (6, 4)
    assert len(ablation["whole_layers"]["layers"]) == 6
    sentences = {f["id"]: f["sentence"] for f in report["findings"]}
    named = re.findall(r"(encoder self-attention|decoder self-attention|cross-attention) layer (\d)",
                       sentences["ablation-single-heads"] + sentences["ablation-whole-layers"])
    assert named and all(int(layer) < 2 for _, layer in named)
    assert not re.search(r"(?<![-a-z] )layer [2-5]\b", sentences["ablation-whole-layers"])
    # a flat layer's links open its group's views at its layer within the group
    charts = (site / "ablation.html").read_text(encoding="utf-8")
    assert "example-1.html#view=head\\u0026attn=cross\\u0026layer=1\\u0026head=3" in charts  # JSON in a script
    assert "example-1.html#view=model\\u0026attn=decoder\\u0026layer=0" in charts
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "an encoder-decoder" in home and "2 encoder self-attention + 2 decoder self-attention + 2 cross-attention" \
        in home


def test_the_pages_say_which_group_the_statistics_are_about(sites):
    _, site = sites["bart"]
    for page in ("statistics.html", "patterns.html"):
        text = re.sub(r"<[^>]+>", "", (site / page).read_text(encoding="utf-8"))
        assert "this page is about its encoder's self-attention" in text, page
    example = re.sub(r"<[^>]+>", "", (site / "example-1.html").read_text(encoding="utf-8"))
    assert "Source the cat sat on the mat." in " ".join(example.split())
    assert "Target le chat est assis sur le tapis." in " ".join(example.split())
    assert "Encoder-decoders have no query/key view yet." in " ".join(example.split())


def test_a_rebuild_reads_every_run_from_the_cache(sites, tmp_path):
    from reportgen.config import load_config
    from reportgen.pipeline import build

    model, site = sites["t5"]
    project = site.parent
    again = build(load_config(project / "reportgen.yaml"), out=tmp_path / "again")
    assert (again.computed, again.cached) == (0, len(EXAMPLES))
    first = json.loads((site / "report.json").read_text(encoding="utf-8"))
    second = json.loads((tmp_path / "again" / "report.json").read_text(encoding="utf-8"))
    for key in ("examples", "statistics", "groups", "findings"):
        assert first[key] == second[key], key
    assert page_payload(site, 1)["groups"] == page_payload(tmp_path / "again", 1)["groups"]


def reportgen(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("extra, code, line", [
    ({"examples": [{"text": "the cat sat on the mat."}]}, 4,
     "field 'examples': the example 'the cat sat on the mat.' has no 'target'; an encoder-decoder reads a source "
     "('text') and a 'target' for its decoder"),
    ({"examples": [{"text": "the cat sat", "pair": "on the mat", "target": "le chat"}]}, 4,
     "field 'examples': the example 'the cat sat' has a 'pair'; an encoder-decoder reads a source ('text') and a "
     "'target', not a pair"),
    ({"examples": "builtin"}, 4,
     "field 'examples': an encoder-decoder reads a source and a target, and the built-in examples have no target; "
     "give examples with 'text' and 'target'"),
    ({"compare": {"model": "<the model>"}}, 2,
     "field 'compare': comparing models is for encoders; an encoder-decoder's build has no comparison yet "
     "(remove 'compare')"),
    ({"claims": "seed004"}, 2,
     "field 'claims': seed 004's claims are about an encoder's heads; remove 'claims' for an encoder-decoder"),
    ({"patterns": {"corpus": [{"path": "pairs.jsonl", "column": "source"}]}}, 2,
     "field 'patterns.corpus': an encoder-decoder's statistics are over its examples (each a source and a "
     "target); remove 'corpus'"),
    ({"ablation": {"task": "similarity", "data": "builtin"}}, 3,
     "is an encoder-decoder; task 'similarity' reads a single stack of an encoder, so for an encoder-decoder use "
     "task 'seq2seq' (a target's loss given its source) or 'classification'"),
])
def test_what_an_encoder_decoders_build_cannot_take_is_refused_in_one_line(bart, tmp_path, extra, code, line):
    model = bart
    write_pairs(tmp_path / "pairs.jsonl")
    if "compare" in extra:  # the same model again: refused before it is looked at
        extra = {"compare": {"model": str(model)}}
    config = {"examples": EXAMPLES, "ablation": {"enabled": False}, **extra}
    (tmp_path / "reportgen.yaml").write_text(tiny_config(model, **config), encoding="utf-8")
    done = reportgen(tmp_path, "build")
    assert done.returncode == code and not (tmp_path / "site").exists(), done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(line), done.stderr
    assert "Traceback" not in done.stderr


def test_a_target_is_refused_for_a_model_that_is_not_an_encoder_decoder(tmp_path):
    from tests.architectures import make_checkpoint

    model = make_checkpoint("bert", tmp_path / "model")
    examples = [{"text": "the cat sat on the mat.", "target": "le chat"}]
    (tmp_path / "reportgen.yaml").write_text(tiny_config(model, examples=examples, ablation={"enabled": False}),
                                             encoding="utf-8")
    done = reportgen(tmp_path, "build")
    assert done.returncode == 4 and not (tmp_path / "site").exists()
    assert done.stderr.strip().splitlines()[-1].endswith(
        "field 'examples': the example 'the cat sat on the mat.' has a 'target', which only an encoder-decoder "
        "(BART, T5, Marian) reads; remove it"), done.stderr


def test_the_built_in_examples_are_left_out_beside_the_users_with_a_warning(tmp_path):
    from reportgen.config import builtin_examples

    model = make_encoder_decoder("marian", tmp_path / "model")
    site = build_tiny_site(tmp_path, tiny_config(model, examples=["builtin", EXAMPLES[0]], ablation={"enabled": False}))
    report = check_report(site)
    assert [example["target"] for example in report["examples"]] == [EXAMPLES[0]["target"]]
    dropped = len(builtin_examples())
    assert f"{dropped} built-in examples without a target left out: an encoder-decoder reads a source and a target" \
        in report["warnings"]
