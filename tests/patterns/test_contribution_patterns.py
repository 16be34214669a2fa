"""Pattern statistics on what the heads pass on (Kobayashi et al. 2020), the paired test of the [CLS]/[SEP]
"no-op" reading, its finding and the patterns page that shows both. Hand-built attention and value norms with
known answers (fast); the default site's figures at the end (slow)."""

from __future__ import annotations

import html
import itertools
import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from reportgen.findings import pattern_findings
from reportgen.findings.contributions import FINDING_ID
from reportgen.patterns import noop, statistics
from reportgen.report import ExampleViews, PatternStatistics, head_link_expression
from reportgen.runs import shares
from reportgen.site import exports, pages
from reportgen.site.charts import chartdata
from reportgen.stats import sign_flip_p
from tests.helpers import (
    MIXED,
    NEXT,
    ON_SEP,
    PREVIOUS,
    ROOT,
    SENTENCE,
    SENTENCE_SEGMENTS,
    SENTENCE_WORDS,
    UNIFORM,
    check_report,
    one_hot_rows,
    synthetic_runs,
)
from tests.helpers import make_run as make_weight_run

TEMPLATES = ROOT / "site_src" / "templates"
HEADS = [NEXT, PREVIOUS, UNIFORM, ON_SEP, MIXED]
# ||f(x_j)|| per key: [CLS] and [SEP] short (as Kobayashi et al. found in BERT-base), the words long
NORMS = np.array([0.5, 1.0, 2.0, 1.0, 1.5, 1.0, 0.25], dtype=np.float32)


def make_run(heads=HEADS, norms=NORMS, scale: float = 1.0):
    """The hand-built sentence with value norms for each head (`scale` varies them between inputs)."""
    run = make_weight_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, heads)
    return replace(run, value_norms=np.broadcast_to(norms * scale, (1, len(heads), len(norms))).astype(np.float32))


def accumulate(runs) -> dict:
    accumulator = statistics.PatternAccumulator(statistics.load_settings())
    for run in runs:
        accumulator.add(run)
    return accumulator.result()


# -- the statistics on contribution shares ----------------------------------------------------------
def test_contribution_statistics_are_the_statistics_of_the_shares():
    run = make_run()
    by_hand = run.attention * NORMS[None, None, None, :]  # A[i, j] ||f(x_j)||
    by_hand = by_hand / by_hand.sum(-1, keepdims=True)
    contribution = accumulate([run])["contribution"]["statistics"]
    on_shares = accumulate([make_weight_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, list(by_hand[0]))])
    for name in statistics.STATS:
        np.testing.assert_allclose(np.array(contribution[name]["mean"], dtype=float),
                                   np.array(on_shares[name]["mean"], dtype=float), atol=2e-6, err_msg=name)
    # the uniform head (2): a key's share is its norm over all norms; [CLS] passes on 0.5 / 7.25
    assert contribution["cls"]["mean"][0][2] == pytest.approx(0.5 / NORMS.sum(), abs=1e-6)
    assert contribution["sep"]["mean"][0][2] == pytest.approx(0.25 / NORMS.sum(), abs=1e-6)
    # a head with all its weight on one key passes on only from that key, whatever its norm
    assert contribution["sep"]["mean"][0][3] == pytest.approx(1.0) and contribution["next_token"]["mean"][0][0] == 1.0
    # entropy of the uniform head's contribution shares is below ln n: the norms make it uneven
    assert contribution["entropy"]["mean"][0][2] < np.log(len(SENTENCE)) - 0.05


def test_contributions_count_every_input_and_link_and_pair_only_examples():
    runs = [make_run(scale=1.0), make_run(norms=NORMS[::-1].copy())]
    accumulator = statistics.PatternAccumulator(statistics.load_settings())
    accumulator.add(runs[0])
    accumulator.add(runs[1], linkable=False)  # a corpus sentence: counted, never the example a cell opens
    result = accumulator.result()
    contribution = result["contribution"]["statistics"]["cls"]
    assert contribution["count"] == 2 and contribution["example"][0][2] == 0
    first, second = (shares(run.attention, run.value_norms)[0][0, 2, :, 0].mean() for run in runs)
    assert contribution["mean"][0][2] == pytest.approx((first + second) / 2, abs=1e-6)
    # the no-op test pairs the examples only (memory must not grow with a corpus); heads chosen over all inputs
    test = result["contribution"]["delimiter"]
    assert test["examples"] == 1 and test["selected_over"] == 2 and "over all 2 inputs" in test["selection"]
    cls_sep = np.array(result["cls_sep"]["mean"], dtype=float).reshape(-1)
    chosen = [cls_sep[head["layer"] * 5 + head["head"]] for head in test["heads"]]
    assert chosen == sorted(chosen, reverse=True) and test["heads"][0]["head"] == 3  # ON_SEP: most weight there
    assert test["heads"][0]["weight"] == pytest.approx(float(runs[0].attention[0, 3, :, [0, 6]].sum(0).mean()))


def test_runs_without_value_norms_have_no_contribution_statistics():
    weights_only = make_weight_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, HEADS)
    assert accumulate([weights_only])["contribution"] is None
    # one input without norms and the statistics would cover only some inputs: none at all, in either order
    assert accumulate([make_run(), weights_only])["contribution"] is None
    assert accumulate([weights_only, make_run()])["contribution"] is None
    stats = PatternStatistics.model_validate(accumulate([weights_only]))
    found = {f.id: f for f in pattern_findings(stats)}[FINDING_ID]
    assert not found.supported and "not measured" in found.sentence and found.numbers == {}


def test_word_level_contributions_are_the_word_level_statistics_of_the_shares():
    run = replace(make_run(), tokens=["[CLS]", "the", "straw", "##berries", "a", "cat", "[SEP]"],
                  word_ids=np.array([-1, 0, 1, 1, 2, 3, -1]))
    settings = statistics.load_settings({"word_level": True})
    accumulator = statistics.PatternAccumulator(settings)
    accumulator.add(run)
    contribution = accumulator.result()["contribution"]["statistics"]
    plain = statistics.PatternAccumulator(settings)
    plain.add(replace(run, attention=shares(run.attention, run.value_norms)[0], value_norms=None))
    on_shares = plain.result()
    for name in ("cls", "sep", "within_word", "entropy", "same_token"):
        assert contribution[name]["mean"] == on_shares[name]["mean"], name


# -- the paired test --------------------------------------------------------------------------------
def test_sign_flip_p_matches_exact_enumeration():
    differences = np.array([[0.3, 0.1], [0.2, -0.1], [0.25, 0.05], [-0.05, -0.02], [0.4, 0.0], [0.1, 0.03]])
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=len(differences))))
    flipped = np.abs(signs @ differences) / len(differences)
    exact = (flipped >= np.abs(differences.mean(0)) - 1e-12).mean(0)
    np.testing.assert_allclose(sign_flip_p(differences, 20_000, seed=1), exact, atol=0.01)
    assert sign_flip_p(np.zeros((8, 3)), 500, seed=0).tolist() == [1.0, 1.0, 1.0]


def test_weight_above_contribution_is_significant_and_equal_shares_are_not():
    rng = np.random.default_rng(0)
    weight = rng.uniform(0.1, 0.3, size=(20, 2, 3))
    weight[:, 1, 2] = rng.uniform(0.7, 0.9, size=20)  # the head that looks at [CLS]/[SEP] most
    weight[:, 0, 1] = rng.uniform(0.6, 0.8, size=20)
    contribution = weight.copy()
    contribution[:, 1, 2] -= 0.5  # passes on far less from there than it looks at
    result = noop.delimiter_test(weight, contribution, weight.mean(0), 20, heads=2, permutations=999)
    first, second = result["heads"]
    assert (first["layer"], first["head"], second["layer"], second["head"]) == (1, 2, 0, 1)  # most weight first
    assert first["significant"] and first["at_floor"] and first["p_value"] == pytest.approx(1 / 1000)
    assert first["p_adjusted"] == pytest.approx(2 / 1000)  # Holm over the 2 heads
    assert first["difference"] == pytest.approx(-0.5) and first["contribution"] == pytest.approx(first["weight"] - 0.5)
    assert not second["significant"] and second["p_value"] == 1.0 and second["difference"] == 0.0
    assert result["weight"] == pytest.approx(weight[:, [1, 0], [2, 1]].mean())
    assert result["smallest_p"] == pytest.approx(1 / 1000) and result["selected_over"] == result["examples"] == 20


def test_each_head_links_to_the_example_where_it_passes_on_least():
    weight = np.full((4, 1, 1), 0.8)
    contribution = np.array([0.6, 0.1, 0.7, 0.3]).reshape(4, 1, 1)
    assert noop.delimiter_test(weight, contribution, weight[0], 4, heads=1, permutations=99)["heads"][0]["example"] == 1


def test_few_examples_cannot_reach_significance_and_none_give_no_test():
    assert noop.smallest_p(3, 9_999) == 0.25 and noop.smallest_p(20, 9_999) == pytest.approx(1e-4)
    accumulator = statistics.PatternAccumulator(statistics.load_settings())
    accumulator.add(make_run(), linkable=False)  # corpus sentences only: nothing to pair
    stats = PatternStatistics.model_validate(accumulator.result())
    assert stats.contribution.statistics["cls"].count == 1 and stats.contribution.delimiter is None
    found = {f.id: f for f in pattern_findings(stats)}[FINDING_ID]
    assert not found.supported and "was not tested" in found.sentence


# -- the finding ------------------------------------------------------------------------------------
ON_DELIMITERS = 0.5 * (one_hot_rows(len(SENTENCE), [0] * len(SENTENCE)) + ON_SEP)  # half on [CLS], half on [SEP]
# Five heads with 7/8 ... 3/8 of their weight on [CLS]/[SEP] and the rest on the next token: every weight a
# multiple of 1/8, so rows sum to 1 exactly and equal norms give shares equal to the weights, bit for bit.
DELIMITER_HEADS = [share * ON_DELIMITERS + (1 - share) * NEXT for share in (0.875, 0.75, 0.625, 0.5, 0.375)]


def no_op_statistics(inputs: int = 12, same: bool = False) -> PatternStatistics:
    """Inputs whose heads look at [CLS]/[SEP] but pass on from them little, the specials' values being
    short, as Kobayashi et al. found (`same`: every value as long, so they pass on as much as they look)."""
    rng = np.random.default_rng(3)
    runs = []
    for _ in range(inputs):
        norms = rng.uniform(1.0, 2.0, len(SENTENCE)).astype(np.float32)
        norms[[0, -1]] = rng.uniform(0.1, 0.3, 2)
        runs.append(make_run(DELIMITER_HEADS, np.ones_like(norms) if same else norms))
    return PatternStatistics.model_validate(accumulate(runs))


def test_the_finding_quotes_the_test_s_numbers():
    stats = no_op_statistics()
    test = stats.contribution.delimiter
    found = {f.id: f for f in pattern_findings(stats)}[FINDING_ID]
    assert found.numbers == test.model_dump() and found.test == test.test
    assert f"{test.weight:.2f} of the attention weight goes there but only {test.contribution:.2f}" in found.sentence
    assert "paired over 12 examples" in found.sentence
    significant = [head for head in test.heads if head.significant]
    lower = [head for head in significant if head.difference < 0]
    assert found.supported == (len(lower) == len(test.heads))
    for head in test.heads:
        assert f"layer {head.layer} head {head.head} {head.weight:.2f} \u2192 {head.contribution:.2f}" in found.sentence
    links = [span.link for span in found.spans if span.link]
    assert links == [f"example-{head.example + 1}.html#view=head&layer={head.layer}&head={head.head}"
                     "&mode=contributions" for head in test.heads]


def test_the_finding_says_not_supported_when_weight_and_contribution_agree():
    stats = no_op_statistics(same=True)  # equal norms: the shares are the weights
    test = stats.contribution.delimiter
    assert test.weight == pytest.approx(test.contribution) and not any(head.significant for head in test.heads)
    found = {f.id: f for f in pattern_findings(stats)}[FINDING_ID]
    assert not found.supported and found.p_value is None
    assert found.sentence.startswith('The "no-op" reading of attention to [CLS] and [SEP] is not supported here:')
    assert f"{test.weight:.2f} of the weight and {test.contribution:.2f} of what they pass on" in found.sentence


def test_too_few_inputs_are_said_to_be_too_few():
    found = {f.id: f for f in pattern_findings(no_op_statistics(inputs=3))}[FINDING_ID]
    assert not found.supported
    assert "On 3 examples no head can reach significance after the correction" in found.sentence


# -- the patterns page ------------------------------------------------------------------------------
def render_patterns(stats: PatternStatistics, tmp_path: Path) -> tuple[str, dict[str, exports.Recorded]]:
    """The patterns page's Markdown and its recorded charts by id, rendered as the site stage does (no MkDocs)."""
    env = pages.environment(TEMPLATES)
    recorder = pages.Charts()
    report = SimpleNamespace(layers=stats.counts.layers, heads=stats.counts.heads, examples=[None] * 12)
    views = [ExampleViews(tokens=SENTENCE, segments=SENTENCE_SEGMENTS, payload={}, qk_payload=None)] * 12
    pages.render(env, "patterns.md.j2", tmp_path / "patterns.md", recorder, report=report, stats=stats,
                 sections=chartdata.pattern_sections(stats, views), conventions=chartdata.conventions(stats),
                 similarity=None)
    return (tmp_path / "patterns.md").read_text(encoding="utf-8"), {r.chart_id: r for r in recorder.recorded}


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_patterns_page_shows_contributions_beside_the_weights(tmp_path):
    stats = no_op_statistics()
    text, charts = render_patterns(stats, tmp_path)
    for key, anchor, *_ in chartdata.PATTERN_SECTIONS:
        assert charts[f"chart-{anchor}"].formats == exports.FORMATS  # the weights: every format, as before
        assert charts[f"chart-{anchor}-contribution"].formats == pages.BESIDE_FORMATS  # beside them: the data
        weight, contribution = charts[f"chart-{anchor}"].spec, charts[f"chart-{anchor}-contribution"].spec
        assert weight["encoding"]["color"]["scale"].get("domain") == contribution["encoding"]["color"]["scale"].get(
            "domain"), anchor  # one colour, one value on both
        rows = {(row["layer"], row["head"]): row for row in contribution["data"]["values"]}
        for (layer, head), row in rows.items():
            assert row["value"] == stats.contribution.statistics[key].mean[layer][head]
            assert row["weight"] == stats[key].mean[layer][head]
            example = stats.contribution.statistics[key].example[layer][head]  # its cell's link is computed from it
            assert row["example"] == (example if example >= 0 else None), (anchor, layer, head)
        links = [step["calculate"] for step in contribution["transform"] if step.get("as") == "url"]
        assert links == [f"isValid(datum.example) ? {head_link_expression(mode='contributions')} : ''"], anchor
        assert f'id="heatmaps-{anchor}"' in text
    top = stats.top_heads["sep"][0]
    value = stats.contribution.statistics["sep"].mean[top.layer][top.head]
    assert re.search(rf"\| layer {top.layer} head {top.head} \| {top.value:.2f} \| [0-9.]+ \| {value:.2f} \|", text)
    section = html.unescape(text.split("{ #delimiter-contribution }", 1)[1].split("\n## ", 1)[0])
    for head in stats.contribution.delimiter.heads:
        assert (f"| layer {head.layer} head {head.head} | {head.weight:.2f} | {head.contribution:.2f} | "
                f"{head.difference:.2f} \u00b1 {head.std:.2f} |") in section
        assert f"&head={head.head}&mode=contributions" in section


def test_patterns_page_says_when_contributions_are_not_available(tmp_path):
    weights_only = make_weight_run(SENTENCE, SENTENCE_WORDS, SENTENCE_SEGMENTS, HEADS)
    text, charts = render_patterns(PatternStatistics.model_validate(accumulate([weights_only])), tmp_path)
    assert "Contributions (what a head passes on, Kobayashi et al. 2020) are not available for this model" in text
    assert not [chart for chart in charts if chart.endswith("-contribution")] and "chart-previous-token" in charts
    assert "delimiter-contribution" not in text and "| Contribution |" not in text


# -- the default site (slow) ------------------------------------------------------------------------
@pytest.mark.slow
def test_default_site_tests_the_no_op_reading_and_shows_contributions(default_site):
    report = check_report(default_site)
    test = report["statistics"]["contribution"]["delimiter"]
    found = next(f for f in report["findings"] if f["id"] == FINDING_ID)
    assert found["numbers"] == test and test["examples"] == test["selected_over"] == len(report["examples"])
    assert f"{test['weight']:.2f} of the attention weight goes there but only {test['contribution']:.2f}" in found[
        "sentence"]
    # all-MiniLM-L6-v2 behaves as BERT-base did for Kobayashi et al.: much weight, little passed on
    assert found["supported"] and test["weight"] > 0.6 and test["contribution"] < 0.5 * test["weight"]
    page = (default_site / "patterns.html").read_text(encoding="utf-8")
    specs = dict(re.findall(r'<script type="application/json" data-rg-chart="([^"]+)">(.*?)</script>', page, re.S))
    spec = json.loads(specs["chart-cls-contribution"])
    rows = spec["data"]["values"]
    assert len(rows) == 72 and all(row["example"] is not None for row in rows)
    links = [step["calculate"] for step in spec["transform"] if step.get("as") == "url"]  # each cell's, computed
    assert links and links[0].endswith('"&mode=contributions" : \'\'')
    assert 'id="delimiter-contribution"' in page


@pytest.mark.slow  # 450 inputs through the statistics under tracemalloc, as tests/patterns/test_scale.py
def test_memory_does_not_grow_with_the_corpus_with_contributions():
    import tracemalloc

    def peak(count: int) -> int:
        rng = np.random.default_rng(1)
        accumulator = statistics.PatternAccumulator(statistics.load_settings())
        tracemalloc.start()
        for index, run in enumerate(synthetic_runs(count)):
            norms = rng.uniform(0.1, 2.0, run.attention.shape[:2] + (run.n_tokens,)).astype(np.float32)
            accumulator.add(replace(run, value_norms=norms), linkable=index < 5)  # 5 examples, then a corpus
        assert accumulator.result()["contribution"]["delimiter"]["examples"] == 5
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    small, large = peak(50), peak(400)
    assert large < 1.25 * small, (small, large)  # 8x the sentences, about the same memory
