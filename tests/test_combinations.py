"""Config combinations (issue 10, section 4): every switch a user may turn off builds a site
that says only what ran.

Walked on a tiny random BERT, in process, with one cache shared by all builds (each finished
ablation mask is cached, so the experiments run once): each ablation experiment off alone,
all of them off, ablation off, a comparison with ablation off, and a corpus with and without
word-level statistics. Each build must finish, and its pages must show every experiment that
ran (section, chart files, finding) and none that did not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reportgen.ablation.experiments import EXPERIMENTS
from tests.helpers import check_report

pytestmark = pytest.mark.slow

# The smallest ablation the schema allows (as tests/commands/test_bad_inputs.py ABLATION), with two
# fractions so that the sweeps have a point besides 0.
ABLATION = {"enabled": True, "limit": 8, "seeds": [0], "fractions": [0.0, 0.5], "bootstrap_samples": 100,
            "permutations": 100}
CORPUS = ["the cat sat on the mat.", "i bought fresh strawberries at the store.", "he was a red dog."]


def experiments(**off: bool) -> dict:
    return {"ablation": {**ABLATION, "experiments": {name: off.get(name, True) for name in EXPERIMENTS}}}


COMBINATIONS: dict[str, dict] = {
    **{f"without-{name}": experiments(**{name: False}) for name in EXPERIMENTS},
    "no-experiments": experiments(**dict.fromkeys(EXPERIMENTS, False)),
    "ablation-off": {"ablation": {"enabled": False}},
    "compare-ablation-off": {"ablation": {"enabled": False}, "compare": {"model": "./other", "name": "second"}},
    "corpus-pieces": {"ablation": {"enabled": False},
                      "patterns": {"word_level": False, "corpus": [{"path": "corpus.txt"}]}},
    "corpus-words": {"ablation": {"enabled": False},
                     "patterns": {"word_level": True, "corpus": [{"path": "corpus.txt"}]}},
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    from tests.helpers import make_tiny_bert

    work = tmp_path_factory.mktemp("combinations")
    make_tiny_bert(work / "tiny")
    make_tiny_bert(work / "other", seed=1)
    (work / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return work


def build_site(project: Path, name: str, overrides: dict) -> tuple[dict, Path]:
    from reportgen.config import load_config
    from reportgen.pipeline import build

    config = {"title": f"Combination {name}", "model": "./tiny", "device": "cpu", "max_length": 64,
              "cache_dir": "cache", "patterns": {"similarity": False},
              "examples": [{"text": "the cat sat on the mat."},
                           {"text": "i went to the store.", "pair": "at the store, i bought fresh strawberries."}]}
    for key, value in overrides.items():
        config[key] = {**config[key], **value} if isinstance(config.get(key), dict) else value
    path = project / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    out = project / f"site-{name}"
    build(load_config(path), out=out)
    return check_report(out), out


def read(site: Path, page: str) -> str:
    return (site / page).read_text(encoding="utf-8")


def ids(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


def anchor(name: str) -> str:
    return "ablation-" + name.replace("_", "-")


@pytest.mark.parametrize("name", list(COMBINATIONS))
def test_combination_builds_and_shows_only_what_ran(project, name):
    overrides = COMBINATIONS[name]
    report, site = build_site(project, name, overrides)
    home = read(site, "index.html")
    ablation = overrides["ablation"]
    if not ablation["enabled"]:
        assert report["ablation"] is None
        assert not (site / "ablation.html").exists()
        assert "ablation.html" not in home and "Head ablation" not in home
        assert "findings-ablation" not in ids(home)
    else:
        check_ablation(report, site, home, ablation["experiments"])
    if "compare" in overrides:
        check_comparison(report, site)
    else:
        assert not (site / "compare.html").exists() and "compare.html" not in home
    if overrides.get("patterns", {}).get("corpus"):
        check_corpus(report, site, overrides["patterns"]["word_level"])


def check_ablation(report: dict, site: Path, home: str, switches: dict[str, bool]) -> None:
    ran = [name for name in EXPERIMENTS if switches[name]]
    ab = report["ablation"]
    assert ab["experiments"] == ran
    page = read(site, "ablation.html")
    page_ids, home_ids = ids(page), ids(home)
    charts = {p.name.split("--")[1].split(".")[0] for p in (site / "charts").glob("ablation--*.png")}
    for name in EXPERIMENTS:
        on = switches[name]
        assert (ab[name] is not None) == on, name
        assert (f"finding-{anchor(name)}" in home_ids) == on, name
        if name == "baseline":
            assert ("<th>Baseline</th>" in page) == on
            continue
        assert (anchor(name) in page_ids) == on, name
        expected = {"importance": {"chart-importance", "chart-pruning"}}.get(name, {"chart-" + anchor(name)[9:]})
        assert bool(expected & charts) == on and (not on or expected <= charts), (name, charts)
    # The verdicts rest on paired tests against the unmasked model, which always runs: they need no
    # baseline experiment (its CI is not a test of a change).
    for name in {"random_fraction", "importance"} & set(ran):
        finding = re.search(rf'id="finding-{anchor(name)}".*?</div>', home, re.DOTALL).group()
        assert "paired" in finding and "no verdict" not in finding
    if not switches["baseline"]:
        assert "single heads matter significantly" not in home
    if not ran:
        assert "No experiment ran" in page and "No ablation experiment ran" in home
    else:
        assert "No experiment ran" not in page and "No ablation experiment ran" not in home


def check_comparison(report: dict, site: Path) -> None:
    comparison = report["comparison"]
    assert comparison["ablation"] is None and comparison["model"]["name"] == "second"
    page = read(site, "compare.html")
    assert "second" in page and "Task baseline" not in page
    assert not [i for i in ids(page) if i.startswith("compare-ablation")]
    assert "compare-previous-token" in ids(page)
    assert not list((site / "charts").glob("compare--compare-ablation*"))


def check_corpus(report: dict, site: Path, word_level: bool) -> None:
    counts = report["statistics"]["counts"]
    assert counts["examples"] == 2 + len(CORPUS)
    assert report["statistics"]["settings"]["word_level"] is word_level
    page = read(site, "patterns.html")
    text = re.sub(r"<[^>]+>", "", page)  # as read: glossary terms are links inside the sentence
    assert re.search(rf"the 2 examples and\s+{len(CORPUS)} corpus sentences", text)
    assert ("computed between words" in text) == word_level
    assert ("computed between tokens (word pieces)" in text) != word_level
