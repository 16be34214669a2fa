"""End to end on a tiny random BERT: files, report, cache, and failures that leave the old site alone."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reportgen.config import load_config
from reportgen.errors import DataError, OutputError
from reportgen.model import loading
from reportgen.model import run as model_run
from reportgen.pipeline import build
from tests.helpers import SMALL_ABLATION, TWO_EXAMPLES, check_report, tiny_config, tree, write_config

# The build tests' site: a title with markup, the second example named, 40 pairs for the ablation.
TINY_SECTIONS = {"title": "Tiny <b>report</b>", "examples": [TWO_EXAMPLES[0], {**TWO_EXAMPLES[1], "name": "store"}],
                 "ablation": {**SMALL_ABLATION, "limit": 40}}


@pytest.fixture
def project(tmp_path, tiny_model):
    write_config(tmp_path, tiny_config(tiny_model, **TINY_SECTIONS))
    return tmp_path


@pytest.mark.slow
def test_tiny_build_writes_a_complete_site(project):
    built = build(load_config(project / "reportgen.yaml"), reproducible=True)
    site = project / "site"
    for name in ["index.html", "statistics.html", "examples.html", "example-1.html", "example-2.html",
                 "404.html", ".nojekyll", "report.json", "assets/javascripts/vega-bundle.js",
                 "search/search_index.js"]:
        assert (site / name).is_file(), name
    data = check_report(site)
    assert data["layers"] == 2 and data["heads"] == 4 and data["built"] is None
    assert np.array(data["statistics"]["entropy"]["mean"]).shape == (2, 4)
    assert data["examples"][1]["pair"].startswith("at the store")
    assert built.computed == 2 and data == built.report.model_dump(mode="json")
    ablation = data["ablation"]
    assert ablation["task"]["examples"] == 40 and np.array(ablation["single_heads"]["delta"]).shape == (2, 4)
    assert (site / "ablation.html").is_file() and (site / "manifest.html").is_file()
    # No staging directory and no lock file are left next to the output.
    assert [p.name for p in project.iterdir() if p.name.startswith(".site")] == []
    # The title is user text: shown escaped, never as markup.
    index = (site / "index.html").read_text()
    assert "Tiny &lt;b&gt;report&lt;/b&gt;" in index and "<b>report</b>" not in index


@pytest.mark.slow
def test_second_build_takes_everything_from_the_cache(project, monkeypatch):
    config = load_config(project / "reportgen.yaml")
    assert build(config).computed == 2

    def no_model(*_args, **_kwargs):
        raise AssertionError("the model was loaded although everything was cached")

    monkeypatch.setattr(loading, "load", no_model)
    monkeypatch.setattr(model_run, "run_example", no_model)
    again = build(config)
    assert (again.computed, again.cached) == (0, 2)


@pytest.mark.slow
def test_a_changed_example_runs_only_that_example(project):
    build(load_config(project / "reportgen.yaml"))
    path = project / "reportgen.yaml"
    path.write_text(path.read_text().replace("the cat sat on the mat.", "the dog sat on the mat."))
    assert build(load_config(path)).computed == 1


@pytest.mark.slow
def test_damaged_cache_entry_is_recomputed(project):
    config = load_config(project / "reportgen.yaml")
    build(config)
    entry = next((config.cache_dir / "runs").glob("*.npz"))
    entry.write_bytes(entry.read_bytes()[:-50])
    with pytest.warns(UserWarning, match="damaged"):
        assert build(config).computed == 1


def test_zero_examples_and_output_that_is_a_file(project, tmp_path):
    path = project / "reportgen.yaml"
    path.write_text(f"model: {load_config(path).model}\nexamples: []\n")
    with pytest.raises(DataError, match="examples"):
        build(load_config(path))
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    with pytest.raises(OutputError, match="not a directory"):
        build(load_config(path), out=blocker)


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=cwd, capture_output=True, text=True)


# over 60 s on a loaded machine: real `reportgen build` subprocesses (imports included), a good one first
@pytest.mark.slow
def test_cli_bad_config_is_one_line_and_keeps_the_old_site(project):
    done = run_cli("build", cwd=project)
    assert done.returncode == 0, done.stderr
    before = tree(project / "site")
    (project / "bad.yaml").write_text("title: x\nshow_everything: true\n")
    failed = run_cli("build", "--config", "bad.yaml", cwd=project)
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines() == ["error: bad.yaml: unknown key 'show_everything'"]
    assert "Traceback" not in failed.stderr + failed.stdout
    assert tree(project / "site") == before


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
def test_cli_version_and_schema(tmp_path):
    from reportgen import __version__

    assert run_cli("--version", cwd=tmp_path).stdout.strip() == f"reportgen {__version__}"
    schema = json.loads(run_cli("schema", cwd=tmp_path).stdout)
    assert "examples" in schema["properties"]


@pytest.mark.slow
def test_serve_previews_the_built_site(tmp_path, default_site):
    """`reportgen serve` in a subprocess over a built site: the embedded default's, named as the config's output
    (serving reads it and changes nothing)."""
    import socket
    import time
    import urllib.request

    (tmp_path / "reportgen.yaml").write_text(f"output: {json.dumps(str(default_site))}\n", encoding="utf-8")
    project = tmp_path
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "reportgen", "serve", "--port", str(port)], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        assert b"Findings" in page and page == (default_site / "index.html").read_bytes()
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.slow
def test_corpus_sentences_count_in_the_patterns_but_links_stay_on_example_pages(project):
    corpus = project / "corpus.txt"
    corpus.write_text("the dog and the cat.\n\nthe red car was at the store.\nshe bought a ball.\n")
    path = project / "reportgen.yaml"
    path.write_text(path.read_text() + "patterns:\n  corpus:\n    - path: corpus.txt\n")
    build(load_config(path))
    stats = check_report(project / "site")["statistics"]
    assert stats["counts"]["examples"] == 2 + 3  # blank lines are skipped
    examples = np.array(stats["next_token"]["example"])
    assert ((examples >= 0) & (examples < 2)).all()
    assert check_report(project / "site")["statistics"]["counts"]["examples"] == 5
    (project / "corpus.txt").unlink()
    with pytest.raises(DataError, match="corpus.txt"):
        build(load_config(path))


@pytest.mark.slow
def test_reproducible_builds_are_byte_identical_and_carry_a_manifest(project, tiny_model):
    config = load_config(project / "reportgen.yaml")
    build(config, out=project / "one", reproducible=True)
    build(config, out=project / "two", reproducible=True)
    one, two = tree(project / "one"), tree(project / "two")
    assert one.keys() == two.keys() and len(one) > 50
    assert [name for name in one if one[name] != two[name]] == []
    manifest = json.loads((project / "one" / "manifest.json").read_text())
    assert manifest["config"]["device"] == "cpu" and manifest["seconds"] is None
    weights = manifest["model_files"]["model.safetensors"]
    import hashlib

    assert weights == hashlib.sha256((tiny_model / "model.safetensors").read_bytes()).hexdigest()
    normal = build(config, out=project / "three")
    assert set(normal.report.manifest.seconds) == {"model", "patterns", "ablation"}


@pytest.mark.slow
def test_the_published_site_shows_no_local_paths(project, tiny_model):
    """Privacy (issue 10, part 5): paths relative to the config file, "builtin" for shipped data."""
    import reportgen

    (project / "data").mkdir()
    (project / "data" / "pairs.tsv").write_text("sentence1\tsentence2\tscore\nthe cat sat\tthe dog sat\t4.0\n"
                                                "i went to the store\ta red car\t0.5\nthe mat\ta mat\t3.0\n")
    (project / "corpus.txt").write_text("the dog and the cat.\n")
    path = project / "reportgen.yaml"
    experiments = dict.fromkeys(("single_heads", "random_fraction", "layer_halves", "whole_layers", "importance"),
                                False)
    ablation = {**TINY_SECTIONS["ablation"], "data": "data/pairs.tsv", "experiments": experiments}
    path.write_text(tiny_config(tiny_model, **{**TINY_SECTIONS, "ablation": ablation},
                                patterns={"corpus": [{"path": "corpus.txt"}]}))
    build(load_config(path), reproducible=True)
    private = [str(project), str(tiny_model), str(Path(reportgen.__file__).parent), sys.prefix]
    leaks = {name: [p for p in private if p.encode() in content] for name, content in tree(project / "site").items()}
    assert {name: found for name, found in leaks.items() if found} == {}
    manifest = json.loads((project / "site" / "manifest.json").read_text())
    assert set(manifest["data_files"]) == {"corpus.txt", "data/pairs.tsv"}
    assert manifest["config"]["model"] == os.path.relpath(tiny_model, project)
    report = check_report(project / "site")
    assert report["ablation"]["task"]["data"] == "data/pairs.tsv"
    assert report["model"]["fingerprint"] and report["model"]["name"] == tiny_model.name
