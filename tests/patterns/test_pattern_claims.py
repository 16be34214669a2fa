"""Issue 12, the pattern side: word structure beyond position, nulls on the same inputs, Clark's /n
figures, the conventions, per-example patterns, and findings that say which test each head passes."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.patterns import statistics
from reportgen.patterns.per_example import SEED_PATTERNS, example_patterns
from reportgen.report import Example, PatternStatistics
from reportgen.runs import ExampleRun

# [CLS] straw ##berries are un ##bel ##ie ##va ##bly good . [SEP]: two split words, one of five pieces
WORDY = ["[CLS]", "straw", "##berries", "are", "un", "##bel", "##ie", "##va", "##bly", "good", ".", "[SEP]"]
WORDY_IDS = [-1, 0, 0, 1, 2, 2, 2, 2, 2, 3, 4, -1]
WORDY_SEGMENTS = [-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1]
T = len(WORDY)


def make_run(heads, tokens=WORDY, word_ids=WORDY_IDS, segment_ids=WORDY_SEGMENTS, pair=None) -> ExampleRun:
    segments = np.array(segment_ids)
    attention = np.stack([np.asarray(h, dtype=np.float32) for h in heads])[None]
    return ExampleRun(ExampleSpec(text="x", pair=pair), list(tokens), np.array(word_ids), segments,
                      segments == -1, attention)


def rows_on(targets) -> np.ndarray:
    """Attention where row q puts all its weight on targets[q]."""
    att = np.zeros((len(targets), len(targets)))
    att[np.arange(len(targets)), targets] = 1.0
    return att


def previous_head(length: int = T) -> np.ndarray:
    return rows_on(np.maximum(np.arange(length) - 1, 0))


def next_head(length: int = T) -> np.ndarray:
    return rows_on(np.minimum(np.arange(length) + 1, length - 1))


def within_word_head() -> np.ndarray:
    """Each piece on its neighbour inside its own word (last piece: the one before); the rest on [SEP]."""
    targets = [11, 2, 1, 11, 5, 6, 7, 8, 7, 11, 11, 11]
    return rows_on(targets)


def stats_of(runs, **settings) -> dict:
    return statistics.head_statistics(runs, statistics.load_settings(settings) if settings else None)


def mean(out: dict, stat: str, head: int = 0) -> float | None:
    return out[stat]["mean"][0][head]


# ---------------------------------------------------------------- word structure beyond position


def test_a_pure_previous_token_head_is_not_labelled_within_word():
    out = stats_of([make_run([previous_head()])])
    # 5 of the 7 pieces in split words have their previous token in their word: 5/7 within word
    assert mean(out, "within_word") == pytest.approx(5 / 7, abs=1e-6)
    assert mean(out, "within_word") > statistics.load_settings().thresholds.within_word  # the old rule would label it
    assert mean(out, "boundary_selectivity") == pytest.approx(0.0, abs=1e-6)
    assert mean(out, "adjacent_same_word") == pytest.approx(0.5, abs=1e-6)
    assert mean(out, "adjacent_boundary") == pytest.approx(0.5, abs=1e-6)
    assert out["labels"][0][0] == "previous_token"
    assert "within_word" not in out["patterns"][0][0]
    # even with the positional tests out of reach, it is no word-piece head
    strict = stats_of([make_run([previous_head()])], thresholds={"positional": 1.0, "positional_argmax": 1.0})
    assert "within_word" not in strict["patterns"][0][0]


def test_any_mix_of_positional_and_uniform_attention_has_zero_selectivity():
    mixes = [0.7 * previous_head() + 0.3 * next_head(), 0.2 * previous_head() + 0.5 * next_head() + 0.3 / T,
             np.full((T, T), 1.0 / T)]
    out = stats_of([make_run(mixes)])
    np.testing.assert_allclose(out["boundary_selectivity"]["mean"][0], 0.0, atol=1e-6)
    assert all(label != "within_word" for label in out["labels"][0])


def test_a_head_attending_only_inside_words_is_selective_and_labelled():
    out = stats_of([make_run([within_word_head()])])
    # same-word neighbour pairs (q, k): 2 in strawberries, 8 in unbelievably; the head covers 2 + 5 of them
    assert mean(out, "adjacent_same_word") == pytest.approx(7 / 10, abs=1e-6)
    assert mean(out, "adjacent_boundary") == pytest.approx(0.0, abs=1e-6)
    assert mean(out, "boundary_selectivity") == pytest.approx(0.7, abs=1e-6)
    assert mean(out, "within_word") == pytest.approx(1.0, abs=1e-6)
    assert out["labels"][0][0] == "within_word"
    # the selectivity threshold is what decides
    assert stats_of([make_run([within_word_head()])], thresholds={"boundary_selectivity": 0.8})["labels"][0][0] \
        != "within_word"


def test_distant_within_word_counts_only_non_neighbouring_pieces():
    head = rows_on([0, 1, 2, 3, 8, 8, 4, 4, 4, 9, 10, 11])  # un, ##bel -> ##bly; ##ie, ##va, ##bly -> un
    out = stats_of([make_run([head])])
    # queries with a distant piece: un, ##bel, ##ie, ##va, ##bly (all five pieces of unbelievably);
    # distant keys carry: un 1 (##bly), ##bel 1 (##bly), ##ie 1 (un), ##va 1 (un), ##bly 1 (un)
    assert mean(out, "distant_within_word") == pytest.approx(1.0, abs=1e-6)
    assert mean(stats_of([make_run([previous_head()])]), "distant_within_word") == pytest.approx(0.0, abs=1e-6)
    no_long_word = make_run([previous_head(6)], ["[CLS]", "straw", "##berries", "are", "good", "[SEP]"],
                            [-1, 0, 0, 1, 2, -1], [-1, 0, 0, 0, 0, -1])
    assert stats_of([no_long_word])["distant_within_word"]["mean"][0][0] is None


def test_boundaries_from_a_segmentation_in_a_character_model():
    chars = ["[CLS]", "我", "喜", "欢", "吃", "草", "莓", "[SEP]"]
    run = ExampleRun(ExampleSpec(text="我 喜欢 吃 草莓"), chars, np.array([-1, 0, 1, 2, 3, 4, 5, -1]),
                     np.array([-1, 0, 0, 0, 0, 0, 0, -1]), np.array([True] + [False] * 6 + [True]),
                     np.stack([rows_on([7, 7, 3, 2, 7, 6, 5, 7]), previous_head(8)]).astype(np.float32)[None])
    out = stats_of([run], segmentation="spaces")
    assert out["boundary_selectivity"]["mean"][0][0] == pytest.approx(1.0, abs=1e-6)
    assert out["boundary_selectivity"]["mean"][0][1] == pytest.approx(0.0, abs=1e-6)
    assert out["labels"][0] == ["within_word", "previous_token"]
    assert stats_of([run])["boundary_selectivity"]["count"] == 0  # every character its own word: not measured


# ---------------------------------------------------------------- nulls


def _several_runs(rng) -> list[ExampleRun]:
    """Inputs of different lengths and word structure, with random heads and the three null heads."""
    runs = []
    for cut in (12, 9, 6):
        tokens = WORDY[: cut - 1] + ["[SEP]"]
        words = WORDY_IDS[: cut - 1] + [-1]
        segments = WORDY_SEGMENTS[: cut - 1] + [-1]
        noise = rng.random((cut, cut)) ** 3
        runs.append(make_run([np.full((cut, cut), 1.0 / cut), previous_head(cut), next_head(cut),
                              noise / noise.sum(1, keepdims=True)], tokens, words, segments))
    return runs


def test_heads_with_the_null_patterns_score_exactly_their_nulls():
    out = stats_of(_several_runs(np.random.default_rng(0)))
    assert set(out["nulls"]) == set(statistics.STATS)
    for stat in statistics.STATS:
        for head, null in enumerate(("uniform", "previous", "next")):
            value, expected = mean(out, stat, head), out["nulls"][stat][null]
            assert (value is None) == (expected is None), stat
            if value is not None:
                assert value == pytest.approx(expected, abs=2e-6), (stat, null)
    assert out["nulls"]["within_word"]["previous"] > 0.5  # position alone looks like word structure
    assert out["nulls"]["boundary_selectivity"] == {"uniform": 0.0, "previous": 0.0, "next": 0.0}


def test_nulls_are_taken_on_the_same_inputs():
    rng = np.random.default_rng(1)
    runs = _several_runs(rng)
    first, last = stats_of(runs[:1])["nulls"], stats_of(runs[1:])["nulls"]
    assert first["cls"]["uniform"] == pytest.approx(1 / 12, abs=1e-6)
    assert last["cls"]["uniform"] == pytest.approx((1 / 9 + 1 / 6) / 2, abs=1e-6)
    assert first["within_word"]["previous"] != last["within_word"]["previous"]
    # the attention of the real heads does not move the nulls
    shuffled = [make_run([np.roll(h, 1, axis=1) for h in r.attention[0]], r.tokens, r.word_ids, r.segment_ids)
                for r in runs[:1]]
    assert stats_of(shuffled)["nulls"] == first


def test_clark_divides_by_n():
    out = stats_of([make_run([next_head(), 0.5 * previous_head() + 0.5 / T])])
    assert mean(out, "next_token_clark") == pytest.approx((T - 1) / T, abs=1e-6)
    assert mean(out, "next_token") == pytest.approx(1.0, abs=1e-6)
    for head in (0, 1):
        for stat in ("next_token", "previous_token"):
            assert mean(out, f"{stat}_clark", head) == pytest.approx(mean(out, stat, head) * (T - 1) / T, abs=2e-6)


def test_conventions_are_written_from_the_settings():
    default = stats_of([make_run([previous_head()])])["conventions"]
    assert {"denominator", "averaging", "entropy_smoothing", "punctuation", "other_sentence",
            "word_level"} <= set(default)
    assert "n-1" in default["denominator"] and "0.9999 A + 0.0001/n" in default["entropy_smoothing"]
    assert "'.' and ','" in default["punctuation"] and "[CLS], [SEP]" in default["other_sentence"]
    other = stats_of([make_run([previous_head()])], word_level=True, thresholds={"broad_share": 0.4})["conventions"]
    assert "between words" in other["word_level"] and "between tokens" in default["word_level"]
    assert "0.4" in other["broad"] and "0.5" in default["broad"]


def test_punctuation_takes_no_part_in_word_matching():
    tokens = ["[CLS]", "go", "home", ".", "[SEP]", "go", ".", "[SEP]"]
    head = rows_on([0, 5, 2, 6, 4, 1, 3, 7])  # go <-> go, . <-> .
    run = make_run([head], tokens, [-1, 0, 1, 2, -1, 3, 4, -1], [-1, 0, 0, 0, -1, 1, 1, -1], pair="go.")
    out = stats_of([run])
    assert mean(out, "other_segment") == pytest.approx(1.0, abs=1e-6)  # over 'go' and 'go' only
    assert out["counts"]["other_segment_queries"] == 2
    assert mean(out, "punctuation") == pytest.approx(2 / 8, abs=1e-6)


# ---------------------------------------------------------------- per-example patterns


def test_example_patterns_name_the_heads_and_the_token_pair():
    heads = [previous_head(), within_word_head(), 0.5 * previous_head() + 0.5 * next_head(),
             rows_on([0] * T), next_head()]
    found = example_patterns(make_run(heads))
    assert [p.pattern for p in found] == list(SEED_PATTERNS)
    by = {p.pattern: p for p in found}
    previous = by["previous_token"].heads[0]
    assert (previous.layer, previous.head, previous.query, previous.key) == (0, 0, None, None)
    assert previous.value == pytest.approx(1.0) and not by["previous_token"].weak
    within = by["within_word"]
    # the previous-token head scores 5/7 within word here, but only the selective head is listed
    assert [(h.layer, h.head) for h in within.heads] == [(0, 1)] and not within.weak
    assert (within.heads[0].query_token, within.heads[0].key_token) == ("straw", "##berries")
    assert within.heads[0].weight == pytest.approx(1.0)
    delimiter = by["delimiter"].heads[0]
    assert (delimiter.head, delimiter.query, delimiter.key_token) == (3, None, "[CLS]")
    assert delimiter.weight == pytest.approx(1.0)
    assert by["other_segment"].heads == [] and by["other_segment"].weak  # a single sentence
    assert by["same_token"].weak and len(by["same_token"].heads) == 3


def test_example_patterns_on_a_tiny_model(tiny_model):
    from reportgen.kinds import kind_named
    from reportgen.model.loading import load
    from reportgen.model.run import run_example
    from reportgen.pipeline.assemble import describe_example

    net, tokenizer = load(tiny_model, "cpu")
    run = run_example(net, tokenizer, ExampleSpec(text="i went to the store.",
                                                  pair="at the store, i bought fresh strawberries."), 64)
    settings = statistics.load_settings()
    example = describe_example(1, run, settings, kind_named("encoder"))
    Example.model_validate(example.model_dump(mode="json"))
    values = statistics.example_statistics(run)
    assert [p.pattern for p in example.patterns] == list(SEED_PATTERNS)
    for found in example.patterns:
        value = np.nan_to_num(values[found.pattern], nan=-np.inf)
        shown = [h.value for h in found.heads]
        assert shown == sorted(shown, reverse=True) and len(shown) <= 3
        if found.pattern != "within_word":  # within_word lists only selective heads, maybe none
            assert len(shown) == 3 and shown[0] == pytest.approx(value.max(), abs=1e-6)
        assert found.weak == (not shown or shown[0] <= found.threshold)
        for head in found.heads:
            assert head.value == pytest.approx(values[found.pattern][head.layer, head.head], abs=1e-6)
            if head.key is not None:
                assert head.key_token == run.tokens[head.key]
            if head.query is not None:
                assert head.weight == pytest.approx(float(run.attention[head.layer, head.head, head.query, head.key]),
                                                    abs=1e-6)
            if found.pattern == "within_word":
                assert values["boundary_selectivity"][head.layer, head.head] > settings.thresholds.boundary_selectivity
                assert {head.query_token, head.key_token} == {"straw", "##berries"}
            if found.pattern == "other_segment":
                assert head.query_token == head.key_token and head.query != head.key


@pytest.mark.slow
def test_seed_pair_on_the_embedded_model(embedded_model_path):
    """The independent check quoted in issue 12 (seed pair, all-MiniLM-L6-v2)."""
    from reportgen.model.loading import load
    from reportgen.model.run import run_example

    net, tokenizer = load(embedded_model_path, "cpu")
    spec = ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries.")
    by = {p.pattern: p for p in example_patterns(run_example(net, tokenizer, spec, 512))}

    def top(pattern: str):
        head = by[pattern].heads[0]
        return head.layer, head.head, round(head.value, 2), head.query_token, head.key_token

    assert top("previous_token") == (0, 2, 0.99, None, None) and not by["previous_token"].weak
    assert top("next_token") == (1, 8, 0.65, None, None) and not by["next_token"].weak
    assert top("within_word")[:2] == (0, 4) and top("within_word")[3:] == ("straw", "##berries")
    assert round(by["within_word"].heads[0].weight, 2) == 0.92
    assert top("delimiter")[:2] == (2, 7) and top("delimiter")[4] == "[CLS]"
    assert round(by["delimiter"].heads[0].weight, 2) == 0.82
    assert by["same_token"].weak and round(by["same_token"].heads[0].value, 2) == 0.11
    assert by["other_segment"].weak and top("other_segment") == (2, 9, 0.21, "store", "store")
    assert all((h.layer, h.head) != (0, 2) for h in by["within_word"].heads)


# ---------------------------------------------------------------- findings


@pytest.fixture(scope="module")
def claim_statistics() -> PatternStatistics:
    """Head 0: pure previous token; head 1: next token on 3 of 4 queries (Clark passes, Voita fails);
    head 2: within words only; head 3: uniform; head 4: 0.6 next token plus 0.4 uniform."""
    next_mostly = next_head().copy()
    next_mostly[[3, 6, 9]] = rows_on([11] * T)[[3, 6, 9]]  # 3 of the 11 queries with a next token on [SEP]
    heads = [previous_head(), next_mostly, within_word_head(), np.full((T, T), 1 / T),
             0.6 * next_head() + 0.4 / T]
    return PatternStatistics.model_validate(stats_of([make_run(heads)]))


def test_positional_findings_name_both_tests(claim_statistics):
    from reportgen.findings.patterns import pattern_findings

    by = {f.id: f for f in pattern_findings(claim_statistics)}
    following = by["patterns-next-token"]
    heads = {(h["layer"], h["head"]): h for h in following.numbers["heads"]}
    assert heads[(0, 1)]["clark"] and not heads[(0, 1)]["voita"]
    assert heads[(0, 1)]["argmax"] == pytest.approx(8 / 11, abs=1e-6)
    assert "Clark's test" in following.sentence and "Voita's" in following.sentence
    assert "73% of tokens, failing Voita's" in following.sentence
    assert "passing Clark's test" in following.sentence
    assert "A uniform head scores 0.08" in following.sentence  # 1/12, the null on these inputs
    previous = by["patterns-previous-token"]
    assert "100% of tokens, passing Voita's" in previous.sentence


def test_within_word_finding_rests_on_boundary_selectivity(claim_statistics):
    from reportgen.findings.patterns import pattern_findings

    finding = {f.id: f for f in pattern_findings(claim_statistics)}["patterns-within-word"]
    assert finding.supported and finding.numbers["count"] == 1
    assert (finding.numbers["heads"][0]["layer"], finding.numbers["heads"][0]["head"]) == (0, 2)
    assert "layer 0 head 0" not in finding.sentence.lower()  # the previous-token head, 0.71 within word
    assert "boundary selectivity" in finding.sentence and "pure previous-token head scores 0.71" in finding.sentence


def test_within_word_finding_without_a_selective_head():
    from reportgen.findings.patterns import pattern_findings

    stats = PatternStatistics.model_validate(stats_of([make_run([previous_head(), next_head()])]))
    finding = {f.id: f for f in pattern_findings(stats)}["patterns-within-word"]
    assert not finding.supported and finding.numbers["count"] == 0
    assert finding.sentence.startswith("No head links the pieces of split words beyond what position explains")
    assert "pure previous-token head scores 0.71 within word" in finding.sentence
    assert "selectivity of 0.00" in finding.sentence


def test_broad_finding_states_the_rule_it_applies(claim_statistics):
    from reportgen.findings.patterns import pattern_findings

    broad = {f.id: f for f in pattern_findings(claim_statistics)}["patterns-broad"]
    share = np.array(claim_statistics.effective_share.mean, dtype=float)
    assert broad.numbers["count"] == int((share >= 0.5).sum()) >= 1
    assert "exp(entropy)/n is at least 0.5" in broad.sentence and "ln 2" not in broad.sentence
