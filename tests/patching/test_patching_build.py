"""Activation patching through `reportgen build` (issue 49): a tiny random GPT-2 on the built-in induction pairs, a
character-level BERT masked LM and a BART on JSONL pairs of their own. The stage's numbers are the library's
(reportgen.patching.sweep / effects, each checked against a hand-patched forward in test_patching_exact.py) on the
same pairs; the record, the page, the findings, heads_frame and the cache are the build's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reportgen.config import config_from_mapping
from reportgen.errors import ConfigError, DataError
from tests.helpers import CHAR_SENTENCES, build_tiny_site, make_char_bert, tiny_config, wait_until

pytestmark = pytest.mark.slow  # three tiny builds with patching: ~40 s

SMALL = {"enabled": True, "pairs": 12, "tokens": 6, "bootstrap_samples": 200, "permutations": 200}
EXAMPLES = [{"text": "the cat sat on the mat."}]


def _report(site: Path) -> dict:
    return json.loads((site / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> tuple[Path, Path]:
    from tests.decoder_checkpoints import make_decoder

    root = tmp_path_factory.mktemp("gpt2")
    model = make_decoder("gpt2", root / "model", causal_lm=True)
    return model, build_tiny_site(root, tiny_config(model, examples=EXAMPLES, max_length=128,
                                                    ablation={"enabled": False}, patching=SMALL))


def test_a_decoders_effects_are_the_librarys_on_the_built_in_pairs(gpt2):
    """Every head's effect in both directions equals reportgen.patching's sweep and effects on the same pairs (the
    induction pairs rebuilt here from the seed), and significance is its interval and corrected test together."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reportgen.model.induction import begin_token
    from reportgen.patching.effects import effects
    from reportgen.patching.pairs import induction_pairs
    from reportgen.patching.sweep import sweep

    model_dir, site = gpt2
    patching = _report(site)["patching"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    pairs = induction_pairs(min(len(tokenizer), model.config.vocab_size), begin_token(tokenizer), 12, 6, 0,
                            tuple(tokenizer.all_special_ids))
    assert patching["pairs"]["count"] == len(pairs) and patching["pairs"]["tokens"] == 12
    swept = sweep(model, pairs)
    assert patching["pairs"]["clean"] == pytest.approx(swept.clean.mean(), abs=1e-5)
    for record in patching["directions"]:
        found = effects(swept.clean, swept.corrupted, swept.patched[record["direction"]], record["direction"], 200,
                        200, 0)
        np.testing.assert_allclose(np.array(record["effect"], dtype=float), found.effect, atol=1e-5)
        unpatched = 0.0 if record["direction"] == "denoising" else 1.0
        for layer, row in enumerate(record["significant"]):
            for head, significant in enumerate(row):
                low, high, p = (record[key][layer][head] for key in ("low", "high", "p_adjusted"))
                assert significant == (p < 0.05 and not low <= unpatched <= high and patching["pairs"]["present"])
    gap = swept.clean - swept.corrupted
    assert patching["pairs"]["difference"] == pytest.approx(gap.mean(), abs=1e-5)
    low, high = patching["pairs"]["difference_ci"]
    assert patching["pairs"]["present"] == (low > 0.5 or high < -0.5) and low <= gap.mean() <= high
    assert patching["exact_heads"] is None and patching["runs"] >= 12 * 2 * 8


def test_a_decoders_patching_page_findings_and_heads_frame(gpt2):
    from reportgen.report import Report

    _, site = gpt2
    report = Report.load(site / "report.json")
    page = (site / "patching.html").read_text(encoding="utf-8")
    assert "Activation patching" in (site / "index.html").read_text(encoding="utf-8")  # the menu
    for anchor in ("patching-denoising", "patching-noising", "patching-agreement"):
        assert f'id="{anchor}"' in page
    ids = {f.id for f in report.findings if f.group == "patching"}
    if report.patching.pairs.present:
        assert ids == {"patching-denoising", "patching-noising", "patching-agreement"}
    else:  # a random model's pairs need not differ: then that is the one finding, and no head is named
        absent = next(f for f in report.findings if f.id == "patching-absent")
        assert ids == {"patching-absent"} and not absent.supported and "no head is named" in absent.sentence
    for finding in report.findings:
        if finding.id in ("patching-denoising", "patching-noising"):
            said = "not supported" if not finding.supported else "supported"
            assert finding.sentence.endswith(f"— {said}.")
            record = next(d for d in report.patching.directions if d.direction == finding.numbers["direction"])
            assert finding.supported == record.significant[finding.numbers["layer"]][finding.numbers["head"]]
    frame = report.heads_frame()
    for direction in report.patching.directions:
        name = f"patching_{direction.direction}"
        got = frame[name].to_numpy().reshape(report.layers, report.heads)
        np.testing.assert_allclose(got, np.array(direction.effect, dtype=float))
        assert frame[f"{name}_significant"].dtype == bool and f"{name}_estimate" in frame


def test_positions_cover_each_head_at_each_token_of_the_first_prompt(gpt2):
    _, site = gpt2
    patching = _report(site)["patching"]
    assert [p["direction"] for p in patching["positions"]] == ["denoising", "noising"]
    for item in patching["positions"]:
        assert len(item["tokens"]) == 12 and len(item["heads"]) == 8  # every head fits max_masks here
        assert all(len(row) == 12 for row in item["effect"])


def test_the_record_is_cached_by_the_models_files_the_data_and_the_settings(gpt2):
    """What a rebuild reads instead of patching again (pipeline.analyses.run_patching): the record the build stored,
    under a key that every setting changing a number enters, and the data, but not `enabled` or where it ran."""
    from reportgen.config import PatchingSettings, load_config, load_section
    from reportgen.kinds import kind_of
    from reportgen.model import loading
    from reportgen.patching import study

    model, site = gpt2
    config = load_config(site.parent / "reportgen.yaml")
    fingerprint = loading.fingerprint(loading.file_hashes(model))
    stored = study.cached(config.patching, kind_of(model), fingerprint, config.cache_dir)
    assert stored.model_dump(mode="json", exclude={"example", "pairs"})["directions"] == \
        _report(site)["patching"]["directions"]
    key = study.cache_key(config.patching, kind_of(model), fingerprint)
    for change in ({"seed": 1}, {"pairs": 13}, {"alpha": 0.01}, {"max_masks": 10}, {"min_difference": 1.0}):
        other = load_section(PatchingSettings, "patching", {**config.patching.model_dump(), **change})
        assert study.cache_key(other, kind_of(model), fingerprint) != key, change
    assert study.cache_key(config.patching, kind_of(model), "0" * 16) != key


def test_past_max_masks_only_attributions_top_heads_are_patched_exactly(gpt2):
    """The stage on its own (reportgen.patching.study): 72 runs hold 3 heads of 12 pairs x 2 directions."""
    from reportgen.config import PatchingSettings, load_section
    from reportgen.kinds import kind_of
    from reportgen.model import loading
    from reportgen.patching import study

    model, _ = gpt2
    settings = load_section(PatchingSettings, "patching", {**SMALL, "max_masks": 24 * 3})
    with loading.file_policy(decoders=True):
        patching = study.study(study.load(settings, kind_of(model), model, "cpu"), settings)
    assert len(patching.exact_heads) == 3
    size = sum(np.abs(np.array(d.estimate, dtype=float) - (d.direction == "noising")) for d in patching.directions)
    assert {tuple(head) for head in patching.exact_heads} == {
        divmod(int(i), 4) for i in np.argsort(-size.ravel(), kind="stable")[:3]}  # attribution's top 3
    for direction in patching.directions:
        ran = {(layer, head) for layer, row in enumerate(direction.effect) for head, v in enumerate(row)
               if v is not None}
        assert ran == {tuple(head) for head in patching.exact_heads}
    assert patching.runs <= 72 and not patching.positions


# -- a masked-LM encoder and an encoder-decoder, on pairs of their own ---------------------------------------------
def _mlm_rows() -> list[dict]:
    """Each sentence with one character masked; the corrupted prompt changes its first character."""
    rows = []
    for sentence in CHAR_SENTENCES[:8]:
        at = len(sentence) // 2
        masked = sentence[:at] + "[MASK]" + sentence[at + 1:]
        other = "我" if sentence[0] != "我" else "他"
        rows.append({"clean": masked, "corrupted": other + masked[1:], "answer": sentence[at],
                     "wrong": "的" if sentence[at] != "的" else "了"})
    return rows


def test_a_masked_lm_encoder_is_patched_at_its_mask(tmp_path):
    model = make_char_bert(tmp_path / "model", CHAR_SENTENCES)
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in _mlm_rows()), encoding="utf-8")
    site = build_tiny_site(tmp_path, tiny_config(model, examples=EXAMPLES, ablation={"enabled": False},
                                                 patching={**SMALL, "data": "pairs.jsonl"}))
    report = _report(site)
    patching = report["patching"]
    assert patching["pairs"]["count"] == 8 and "[MASK]" in patching["pairs"]["metric"]
    assert patching["pairs"]["data"] == "pairs.jsonl"
    assert len(patching["directions"][0]["effect"]) == 2
    assert patching["pairs"]["tokens"] is None and patching["positions"] == []  # sentences of several lengths
    example = report["examples"][patching["example"]]
    assert "[MASK]" in example["text"]  # the first pair's clean prompt is an example, its head views linked
    assert f"example-{patching['example'] + 1}.html#view=head" in (site / "patching.html").read_text("utf-8")


def test_an_encoder_decoders_heads_are_named_by_group(tmp_path):
    from transformers import AutoTokenizer

    from tests.seq2seq_checkpoints import PAIRS, make_encoder_decoder

    model = make_encoder_decoder("bart", tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(model)
    words = [w for source, _ in PAIRS for w in source.split()]
    single = [w for w in dict.fromkeys(words) if len(tokenizer(" " + w, add_special_tokens=False)["input_ids"]) == 1]
    rows = [{"clean": source, "corrupted": " ".join([words[i + 1], *source.split()[1:]]), "target": target.split()[0],
             "answer": " " + single[0], "wrong": " " + single[1]} for i, (source, target) in enumerate(PAIRS)]
    rows = [row for row in rows if len(tokenizer(row["clean"])["input_ids"]) ==
            len(tokenizer(row["corrupted"])["input_ids"])]
    assert len(rows) >= 3
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    site = build_tiny_site(tmp_path, tiny_config(model, examples=[{"text": PAIRS[0][0], "target": PAIRS[0][1]}],
                                                 ablation={"enabled": False},
                                                 patching={**SMALL, "data": "pairs.jsonl"}))
    report = _report(site)
    assert report["groups"] and len(report["patching"]["directions"][0]["effect"]) == len(report["groups"])
    assert report["patching"]["positions"] == []  # two streams of two lengths: no per-position patching
    for finding in report["findings"]:  # a random model's pairs may show no behaviour: then no head is named
        if finding["id"] in ("patching-denoising", "patching-noising"):
            assert any(group in finding["sentence"] for group in ("encoder self-attention", "decoder self-attention",
                                                                  "cross-attention"))
    page = (site / "patching.html").read_text(encoding="utf-8")
    assert "enc 0" in page and "cross 1" in page  # the heatmaps' rows, by group


# -- refused before any model work ---------------------------------------------------------------------------------
def test_the_built_in_pairs_on_an_encoder_are_refused_before_the_model_loads(tmp_path):
    from reportgen.pipeline import build

    config = config_from_mapping({"patching": {"enabled": True}, "output": "site"}, "reportgen.yaml", tmp_path)
    with pytest.raises(ConfigError, match="field 'patching.data': the built-in induction pairs are for decoders"):
        build(config)
    assert not (tmp_path / "site").exists()


def test_a_pair_of_two_lengths_is_refused_naming_its_row(tmp_path, gpt2):
    from reportgen.pipeline import build

    model, _ = gpt2
    rows = [{"clean": "the cat sat", "corrupted": "the cat sat", "answer": "e", "wrong": "t"},
            {"clean": "the cat sat on", "corrupted": "a cat", "answer": "e", "wrong": "t"}]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    config = config_from_mapping({"model": str(model), "examples": EXAMPLES, "ablation": {"enabled": False},
                                  "patching": {"enabled": True, "data": "pairs.jsonl"}}, "reportgen.yaml", tmp_path)
    with pytest.raises(DataError, match=r"pairs.jsonl: row 2: 'clean' is \d+ tokens and 'corrupted' \d+"):
        build(config)


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_patching_page_draws_its_charts_and_has_no_serious_accessibility_violation(new_tab, gpt2, viewport):
    from tests.site.browser.test_accessibility_browser import serious_violations

    _, site = gpt2
    found = serious_violations(new_tab, site, viewport, ("patching.html", "index.html"))
    assert not found, "\n".join(found)
    page = new_tab(viewport).page
    page.goto((site / "patching.html").as_uri())
    wait_until(page, "() => document.querySelectorAll('.vega-embed svg').length >= 4", timeout=60_000)
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # the page never scrolls sideways
