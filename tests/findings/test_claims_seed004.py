"""Seed 004's claims beside this model's results (config `claims: seed004`, reportgen/findings/claims.py).

Every verdict (supported, not supported here, contradicted, not measured) is reached by a case whose
numbers make it so: per-example outputs constructed so the truth is known, put through the real
statistics of reportgen.ablation.experiment_stats (as tests/findings/test_claims.py does; both build layer
halves with tests/helpers.py `layer_halves`), attention heads with known patterns through the real
pattern statistics, and a tiny random model through the real ablation run. Each row must quote exactly
the number the report holds.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from reportgen.ablation import experiment_stats
from reportgen.ablation import experiments as ablation
from reportgen.ablation.experiment_context import Context
from reportgen.ablation.records import run_ablations
from reportgen.ablation.tasks import SimilarityTask
from reportgen.config import AblationSettings, ExampleSpec, defaults, load_config
from reportgen.errors import ConfigError
from reportgen.findings import ablation_findings, all_findings, pattern_findings
from reportgen.findings.claims import PLANNED_TESTS, SEED004_CLAIMS, claim_checks, middle_layers, seed_layer_here
from reportgen.findings.formatting import change, interval
from reportgen.patterns import statistics as patterns
from reportgen.pipeline import build
from reportgen.report import Ablation, AblationTask, ClaimCheck, PatternStatistics, RandomFraction
from reportgen.runs import ExampleRun
from tests.helpers import TINY_WORDS, check_report, layer_halves, write_config

EXAMPLES = 300
VERDICTS = {"supported", "not supported here", "contradicted", "not measured"}


# -- constructed outputs through the real statistics -------------------------------------------------------
def _task(seed: int = 0) -> SimilarityTask:
    """The real similarity task (Spearman of outputs vs gold) on constructed gold scores; no model needed."""
    gold = np.random.default_rng([seed, 9]).uniform(0, 5, EXAMPLES)
    return SimilarityTask(kind="similarity", model=None, tokenizer=None, units=[],
                          example_units=np.zeros((EXAMPLES, 2), dtype=np.int64), gold=gold)


def _noisy(task: SimilarityTask, scale: float, stream: int) -> np.ndarray:
    """Per-example outputs [examples, 1]: the gold score plus noise (more noise, lower Spearman)."""
    return (task.gold + np.random.default_rng([stream, 7]).normal(0, scale, EXAMPLES))[:, None]


def _jitter(base: np.ndarray, scale: float, stream: int) -> np.ndarray:
    return base + np.random.default_rng(stream).normal(0, scale, base.shape)


class _ScriptedRunner:
    """Stands in for the model: the outputs under a mask are those constructed for the layer it masks whole."""

    def __init__(self, per_layer: dict[int, np.ndarray]):
        self.per_layer = per_layer

    def outputs(self, _name: str, masks: list[np.ndarray], **_progress) -> list[np.ndarray]:
        return [self.per_layer[int(np.flatnonzero(mask.sum(1) == 0)[0])] for mask in masks]


def _context(task: SimilarityTask, base: np.ndarray, layers: int = 2, runner=None) -> Context:
    raw = defaults()["ablation"]
    raw.update(seeds=[0, 1, 2], bootstrap_samples=1000, permutations=200)
    value = float(task.metrics(base[None], task.gold[None])["spearman"][0])
    return Context(task, runner, AblationSettings.model_validate(raw), layers, 2, base, value, None)


def _record(layers: int = 2, **experiments) -> Ablation:
    task = AblationTask(type="similarity", data="builtin", examples=EXAMPLES, distinct_texts=2 * EXAMPLES,
                        metric="spearman", metrics=["spearman", "pearson"], higher_is_better={"spearman": True},
                        method="zero", method_note="", undefined=None)
    return Ablation(task=task, layers=layers, heads=2, experiments=list(experiments), **experiments)


def _claims(record: Ablation | None, statistics: PatternStatistics | None = None) -> dict[str, ClaimCheck]:
    statistics = statistics or _pattern_statistics([_uniform_runs()])
    rows = claim_checks("seed004", record, all_findings(statistics, record), statistics)
    assert [row.id for row in rows] == [f"seed004-{key}" for key in SEED004_CLAIMS]
    assert all(row.verdict in VERDICTS and row.why for row in rows)
    return {row.id.removeprefix("seed004-"): row for row in rows}


def _random_fraction(ctx: Context, masked: list[np.ndarray], fraction: float = 0.1) -> RandomFraction:
    """Fractions 0 and `fraction`, one constructed output per seed at `fraction`."""
    outputs = np.stack([np.stack([ctx.base_outputs] * 3), np.stack(masked)])
    values = experiment_stats._metric(ctx, outputs)
    return RandomFraction(fractions=[0.0, fraction], n_masked=[0, 1], seeds=[0, 1, 2], baseline=ctx.base_value,
                          non_inferiority=experiment_stats._non_inferiority(ctx, [0.0, fraction], outputs),
                          **experiment_stats._sweep(ctx, values).model_dump())


RANDOM_CASES = {  # noise added at 10% -> (claim 1 "costs nothing", claim 2 "the bump is real")
    "less noise": (("gold", 0.8), "supported", "supported"),
    "no change": (("jitter", 0.01), "supported", "not supported here"),
    "a small loss": (("jitter", 0.2), "not supported here", "not supported here"),
    "a loss near the margin": (("jitter", 0.3), "not supported here", "contradicted"),
    "a large loss": (("gold", 1.6), "contradicted", "contradicted"),
}


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
@pytest.mark.parametrize("case", list(RANDOM_CASES))
def test_random_masking_claims_follow_the_paired_ci_at_10_percent(case):
    (kind, scale), costs_nothing, bump = RANDOM_CASES[case]
    task = _task()
    base = _noisy(task, 1.0, 1)
    ctx = _context(task, base)
    masked = [_noisy(task, scale, s) if kind == "gold" else _jitter(base, scale, s) for s in (2, 3, 4)]
    sweep = _random_fraction(ctx, masked)
    rows = _claims(_record(random_fraction=sweep))
    ci, margin = sweep.non_inferiority.change_ci[1], sweep.non_inferiority.margin
    first, second = rows["random-under-20"], rows["bump-at-10"]
    assert (first.verdict, second.verdict) == (costs_nothing, bump), (ci, first.why, second.why)
    # the verdicts are the rules applied to the report's own CI
    assert (first.verdict == "supported") == (ci[0] > -margin)
    assert (first.verdict == "contradicted") == (ci[1] < -margin)
    assert second.verdict == ("supported" if ci[0] > 0 else "contradicted" if ci[1] < 0 else "not supported here")
    for row in (first, second):
        assert row.ci == ci and row.value == sweep.relative_mean[1]  # the report's numbers, not recomputed
        assert interval(ci) in row.number and change(sweep.relative_mean[1]) in row.number
        assert row.metric == "spearman" and row.number.startswith("Spearman ")
        assert [link.href for link in row.links] == ["index.html#finding-ablation-random-fraction",
                                                     "ablation.html#ablation-random-fraction"]
    assert first.test == f"non-inferiority: {sweep.non_inferiority.test}" and "above -1%" in first.test
    assert second.test.endswith("the 95% CI of the relative change against 0")
    if bump == "not supported here":
        assert f"the paired 95% CI {interval(ci)} contains 0" in second.why


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_without_10_percent_the_bump_is_not_measured_and_costs_nothing_uses_the_largest_fraction_below_20():
    task = _task(2)
    base = _noisy(task, 1.0, 1)
    ctx = _context(task, base)
    sweep = _random_fraction(ctx, [_jitter(base, 0.01, s) for s in (2, 3, 4)], fraction=0.15)
    rows = _claims(_record(random_fraction=sweep))
    assert rows["bump-at-10"].verdict == "not measured"
    assert rows["bump-at-10"].why == "10% is not among ablation.fractions" and rows["bump-at-10"].number == "\u2013"
    assert rows["random-under-20"].verdict == "supported"
    assert rows["random-under-20"].number.startswith("Spearman at 15%: ")
    assert rows["random-under-20"].numbers["fractions"] == [0.15]


@pytest.mark.parametrize("lower_noise, upper_noise, verdict", [
    (2.0, 0.2, "supported"), (0.2, 2.0, "contradicted"), (1.1, 1.1, "not supported here")])
def test_lower_vs_upper_layers_by_the_paired_test(lower_noise, upper_noise, verdict):
    task = _task()
    base = _noisy(task, 1.0, 1)
    ctx = _context(task, base)
    halves = layer_halves(ctx, _noisy(task, lower_noise, 2), _noisy(task, upper_noise, 3), n_masked=2)
    row = _claims(_record(layer_halves=halves))["lower-layers"]
    test = halves.comparison
    assert row.verdict == verdict, row.why
    assert (row.verdict != "not supported here") == test.significant[0]
    assert row.p_value == test.p_adjusted[0] and row.value == test.difference[0]
    assert change(halves.lower.relative_mean[0]) in row.number and change(halves.upper.relative_mean[0]) in row.number
    assert row.test.startswith(test.test) and "Lower = layers 0, upper = 1 of this model's 2" in row.note


WHOLE_LAYER_CASES = {  # noise per layer masked (6 layers; the middle ones are 2-4) -> verdict
    "layer 3 helps": ({3: 0.6}, "supported"),
    "the middle layers hurt": ({2: 2.0, 3: 2.0, 4: 2.5}, "contradicted"),
    "only an outer layer helps": ({0: 0.6, 5: 2.0}, "not supported here"),
}


@pytest.mark.parametrize("case", list(WHOLE_LAYER_CASES))
def test_a_whole_middle_layer_by_its_corrected_paired_test(case):
    noise, verdict = WHOLE_LAYER_CASES[case]
    task = _task(3)
    base = _noisy(task, 1.0, 1)
    runner = _ScriptedRunner({layer: _noisy(task, noise[layer], 10 + layer) if layer in noise
                              else _jitter(base, 0.01, 10 + layer) for layer in range(6)})
    tests = ablation.whole_layers(_context(task, base, layers=6, runner=runner))
    row = _claims(_record(layers=6, whole_layers=tests))["middle-layer"]
    assert row.verdict == verdict, (row.why, tests.relative, tests.p_adjusted)
    best = row.numbers["best"]
    assert best in (2, 3, 4) and row.value == tests.relative[best] and row.p_value == tests.p_adjusted[best]
    assert f"layer {best}: {change(tests.relative[best])}" in row.number
    assert "layers 2-4 of this model's 6" in row.note and "its layer 8 is layer 4" in row.note
    assert "Holm-corrected over the 6 layers" in row.test
    if verdict == "supported":
        assert best == 3 and tests.significant[3] and tests.relative[3] > 0
    if verdict == "contradicted":
        assert row.numbers["losing"] == [2, 3, 4] and not row.numbers["improving"]
    if verdict == "not supported here":
        assert tests.significant[0] and tests.relative[0] > 0  # it would count, were layer 0 a middle layer


def test_middle_layers_map_by_relative_depth():
    assert middle_layers(12) == [5, 6, 7, 8, 9] and seed_layer_here(12) == 8
    assert middle_layers(6) == [2, 3, 4] and seed_layer_here(6) == 4
    assert middle_layers(24) == list(range(10, 20)) and middle_layers(2) == [1]


def test_switched_off_or_undefined_experiments_are_not_measured_and_say_why():
    rows = _claims(None)
    for key in ("random-under-20", "bump-at-10", "lower-layers", "middle-layer"):
        assert rows[key].verdict == "not measured" and "ablation.enabled: false" in rows[key].why
        assert rows[key].number == "\u2013" and rows[key].links == [] and rows[key].test == PLANNED_TESTS[key]
    task = _task()
    halves = layer_halves(_context(task, _noisy(task, 1.0, 1)), _noisy(task, 1.0, 2), _noisy(task, 1.0, 3), n_masked=2)
    rows = _claims(_record(layer_halves=halves))
    assert rows["random-under-20"].why == ("the random_fraction experiment is switched off "
                                           "(ablation.experiments.random_fraction: false)")
    assert rows["middle-layer"].verdict == "not measured" and "whole_layers: false" in rows["middle-layer"].why
    assert rows["lower-layers"].verdict != "not measured"


# -- a tiny random model through the real ablation run -------------------------------------------------------
def _pairs_file(path: Path, count: int, gold: float | None = None) -> Path:
    words = [w for w in TINY_WORDS if w.isalpha() and len(w) > 1 and not w.startswith("[")]
    rng = np.random.default_rng(4)
    lines = ["sentence1\tsentence2\tscore"]
    for _ in range(count):
        first, second = (" ".join(rng.choice(words, size=int(rng.integers(3, 7)))) for _ in range(2))
        lines.append(f"{first}\t{second}\t{rng.uniform(0, 5) if gold is None else gold:.2f}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _settings(data: Path) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(data=str(data), seeds=[0, 1], fractions=[0.0, 0.1, 0.5], bootstrap_samples=200, permutations=100,
               batch_tokens=512, experiments={**raw["experiments"], "single_heads": False, "importance": False})
    return AblationSettings.model_validate(raw)


def test_a_tiny_model_run_quotes_the_reports_numbers(tiny_model, tmp_path):
    record = run_ablations(tiny_model, _settings(_pairs_file(tmp_path / "pairs.tsv", 40)), device="cpu",
                           cache_dir=tmp_path / "cache", fingerprint="fp")
    rows = _claims(record)
    sweep, test = record.random_fraction, record.random_fraction.non_inferiority
    for key in ("random-under-20", "bump-at-10"):
        assert rows[key].ci == test.change_ci[1] and rows[key].value == sweep.relative_mean[1]
    halves = record.layer_halves.comparison
    at = halves.fractions.index(rows["lower-layers"].numbers["fraction"])
    assert rows["lower-layers"].p_value == halves.p_adjusted[at] and rows["lower-layers"].value == halves.difference[at]
    assert rows["middle-layer"].numbers["middle"] == [1]  # 2 layers: the second is at relative depth 0.75
    assert rows["middle-layer"].p_value == record.whole_layers.p_adjusted[1]
    assert all(rows[key].verdict != "not measured" for key in ("random-under-20", "bump-at-10", "lower-layers",
                                                              "middle-layer"))
    assert ClaimCheck.model_validate(rows["bump-at-10"].model_dump(mode="json")) == rows["bump-at-10"]


def test_an_undefined_metric_is_not_measured(tiny_model, tmp_path):
    with pytest.warns(UserWarning, match="undefined"):
        record = run_ablations(tiny_model, _settings(_pairs_file(tmp_path / "pairs.tsv", 12, gold=3.0)),
                               device="cpu", cache_dir=tmp_path / "cache", fingerprint="fp")
    rows = _claims(record)
    for key in ("random-under-20", "bump-at-10", "lower-layers", "middle-layer"):
        assert rows[key].verdict == "not measured"
        assert rows[key].why == "Spearman is undefined on the task data (all gold scores are equal), so no change " \
                                "can be tested"


# -- attention heads with known patterns through the real pattern statistics -------------------------------
# [CLS] straw ##berries are un ##bel ##ie ##va ##bly good . [SEP]: two split words, one of five pieces
WORDY = (["[CLS]", "straw", "##berries", "are", "un", "##bel", "##ie", "##va", "##bly", "good", ".", "[SEP]"],
         [-1, 0, 0, 1, 2, 2, 2, 2, 2, 3, 4, -1], [-1] + [0] * 10 + [-1])
# [CLS] go home . [SEP] go . [SEP]: a pair that shares the word "go"
PAIR = (["[CLS]", "go", "home", ".", "[SEP]", "go", ".", "[SEP]"], [-1, 0, 1, 2, -1, 3, 4, -1],
        [-1, 0, 0, 0, -1, 1, 1, -1])
PLAIN = (["[CLS]", "go", "home", ".", "[SEP]"], [-1, 0, 1, 2, -1], [-1, 0, 0, 0, -1])


def _rows_on(targets: list[int]) -> np.ndarray:
    attention = np.zeros((len(targets), len(targets)))
    attention[np.arange(len(targets)), targets] = 1.0
    return attention


def _run(tokens_words_segments: tuple, heads: list[np.ndarray], pair: str | None = None) -> ExampleRun:
    tokens, words, segments = tokens_words_segments
    segments = np.array(segments)
    return ExampleRun(ExampleSpec(text="x", pair=pair), list(tokens), np.array(words), segments, segments == -1,
                      np.stack(heads).astype(np.float32)[None])


def _uniform_runs() -> ExampleRun:
    size = len(WORDY[0])
    return _run(WORDY, [np.full((size, size), 1 / size)] * 3)


def _pattern_statistics(runs: list[ExampleRun]) -> PatternStatistics:
    return PatternStatistics.model_validate(patterns.head_statistics(runs, patterns.load_settings()))


def _patterned_runs() -> list[ExampleRun]:
    """Head 0: the previous token; head 1: within words only (the rest on [SEP]); head 2: the same word in the
    other sentence (elsewhere uniform)."""
    size = len(WORDY[0])
    previous = _rows_on([0] + list(range(size - 1)))
    wordy = _run(WORDY, [previous, _rows_on([11, 2, 1, 11, 5, 6, 7, 8, 7, 11, 11, 11]),
                         np.full((size, size), 1 / size)])
    pair_size = len(PAIR[0])
    pair = _run(PAIR, [_rows_on([0] + list(range(pair_size - 1))), np.full((pair_size, pair_size), 1 / pair_size),
                       _rows_on([0, 5, 2, 6, 4, 1, 3, 7])], pair="go.")
    return [wordy, pair]


def test_heads_with_the_patterns_support_the_pattern_claims():
    statistics = _pattern_statistics(_patterned_runs())
    rows = _claims(None, statistics)
    boundaries, order, terms = rows["word-boundaries"], rows["word-order"], rows["term-matching"]
    assert (boundaries.verdict, order.verdict, terms.verdict) == ("supported",) * 3
    assert boundaries.value == statistics.boundary_selectivity.mean[0][1] == pytest.approx(0.7, abs=1e-6)
    assert (boundaries.numbers["head"]["layer"], boundaries.numbers["head"]["head"]) == (0, 1)
    assert "layer 0 head 1: within word 1.00" in boundaries.number and "selectivity 0.70" in boundaries.number
    assert "WordPiece" in boundaries.note  # segmentation none: the tokenizer's words, not the seed's
    assert order.value == statistics.previous_token.mean[0][0] and "1 previous-token head" in order.number
    assert [link.label for link in order.links] == ["previous token finding", "previous token chart",
                                                    "next token finding", "next token chart"]
    assert terms.value == statistics.other_segment.mean[0][2] == pytest.approx(1.0, abs=1e-6)
    assert "over 1 pair" in terms.test
    assert [link.href for link in terms.links] == ["index.html#finding-patterns-other-sentence",
                                                   "patterns.html#other-sentence"]


def test_uniform_heads_do_not_support_them_and_missing_inputs_are_not_measured():
    sizes = [len(WORDY[0]), len(PAIR[0])]
    runs = [_run(WORDY, [np.full((sizes[0],) * 2, 1 / sizes[0])] * 3),
            _run(PAIR, [np.full((sizes[1],) * 2, 1 / sizes[1])] * 3, pair="go.")]
    statistics = _pattern_statistics(runs)
    rows = _claims(None, statistics)
    for key in ("word-boundaries", "word-order", "term-matching"):
        assert rows[key].verdict == "not supported here", key
    assert rows["term-matching"].value == statistics.other_segment.mean[0][0]
    assert rows["word-boundaries"].number.startswith("highest within word: layer 0 head 0")
    size = len(PLAIN[0])
    plain = _claims(None, _pattern_statistics([_run(PLAIN, [np.full((size, size), 1 / size)] * 3)]))
    assert plain["word-boundaries"].verdict == plain["term-matching"].verdict == "not measured"
    assert plain["word-boundaries"].why == "no input has a word split into pieces"
    assert plain["term-matching"].why.startswith("no input pair shares a word")


# -- the config key -------------------------------------------------------------------------------------------
def test_claims_are_off_by_default_and_only_known_studies_are_accepted(tmp_path):
    assert defaults()["claims"] is None
    statistics = _pattern_statistics([_uniform_runs()])
    assert claim_checks(None, None, pattern_findings(statistics), statistics) is None
    assert load_config(write_config(tmp_path, "claims: seed004\n")).claims == "seed004"
    with pytest.raises(ConfigError, match="claims"):
        load_config(write_config(tmp_path, "claims: seed005\n"))


def test_findings_are_untouched_by_the_claims():
    task = _task()
    halves = layer_halves(_context(task, _noisy(task, 1.0, 1)), _noisy(task, 1.0, 2), _noisy(task, 1.0, 3), n_masked=2)
    record = _record(layer_halves=halves)
    before = [f.model_dump() for f in ablation_findings(record)]
    _claims(record)
    assert [f.model_dump() for f in ablation_findings(record)] == before


# -- the findings page ----------------------------------------------------------------------------------------
class _ClaimsTable(HTMLParser):
    """The rows of the claims table (each row's cell texts and links), the tags, links and text of the claims
    section, and every element id of the page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: dict[str, dict] = {}
        self.ids: set[str] = set()
        self.section = {"tags": [], "hrefs": [], "text": ""}
        self._row: str | None = None
        self._in_section = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.ids.add(attrs.get("id") or "")
        if tag == "h2":
            self._in_section = attrs.get("id") == "claims-seed004"
        if self._in_section:
            self.section["tags"].append(tag)
            self.section["hrefs"] += [value for name, value in attrs.items() if name in ("href", "src")]
        if tag == "tr" and (attrs.get("id") or "").startswith("claim-"):
            self._row = attrs["id"]
            self.rows[self._row] = {"cells": [], "links": []}
        elif self._row and tag == "td":
            self.rows[self._row]["cells"].append("")
        elif self._row and tag == "a":
            self.rows[self._row]["links"].append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._in_section:
            self.section["text"] += data
        if self._row and self.rows[self._row]["cells"]:
            self.rows[self._row]["cells"][-1] += data


HOSTILE = "<img src=x onerror=alert(1)>*b* [l](javascript:alert(2))"


@pytest.mark.slow
def test_the_findings_page_shows_the_claims_table_with_hostile_text_escaped(tmp_path, tiny_model):
    import shutil

    model = shutil.copytree(tiny_model, tmp_path / f"model {HOSTILE}")
    data = _pairs_file(tmp_path / f"{HOSTILE}.tsv", 30)
    write_config(tmp_path, f"""\
title: "{HOSTILE}"
model: "./{model.name}"
device: cpu
max_length: 128
claims: seed004
examples:
  - text: the cat sat on the mat.
  - text: i went to the store.
    pair: at the store, i bought fresh strawberries.
ablation: {{data: "./{data.name}", seeds: [0], fractions: [0.0, 0.1, 0.5], bootstrap_samples: 100,
            permutations: 100, experiments: {{importance: false}}}}
""")
    built = build(load_config(tmp_path / "reportgen.yaml"), reproducible=True)
    site = tmp_path / "site"
    assert check_report(site)["claims"] == [row.model_dump(mode="json") for row in built.report.claims]
    page = _ClaimsTable()
    page.feed((site / "index.html").read_text(encoding="utf-8"))
    assert list(page.rows) == [f"claim-seed004-{key}" for key in SEED004_CLAIMS]
    for row in built.report.claims:
        shown = page.rows[f"claim-{row.id}"]
        claim, seed_number, number, test, verdict = shown["cells"]
        assert (claim, seed_number, test) == (row.claim, row.study_number, row.test)
        assert number == row.number + (row.note or "") and verdict.startswith(f"{row.verdict}: {row.why}")
        assert shown["links"] == [link.href for link in row.links]
        for href in shown["links"]:  # every link lands on an element of the site
            page_name, anchor = href.split("#")
            target = _ClaimsTable()
            target.feed((site / page_name).read_text(encoding="utf-8"))
            assert anchor in target.ids, href
    # the model's and the data file's names are shown as text; no user markup became an element or a link
    intro = " ".join(page.section["text"].split())
    assert f"what model {HOSTILE} shows on {HOSTILE}.tsv" in intro
    assert ("relative changes of this task's primary metric, Spearman (similarity task), not the seed's 5-grade "
            "classification accuracy.") in intro
    assert set(page.section["tags"]) <= {"h2", "a", "p", "table", "tr", "th", "td", "br", "small", "strong"}
    # (the site's own words link to the glossary: "relative changes", "accuracy"; issue 28)
    assert all(href.startswith(("#", "index.html#", "ablation.html#", "patterns.html#", "glossary.html#"))
               for href in page.section["hrefs"])
