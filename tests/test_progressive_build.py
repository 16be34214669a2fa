"""The site first, the experiments after (issue 32): a build whose experiments take a while writes a complete
site as they start, rewrites it as experiments finish, and ends with the finished site, which no partial write
changes. End to end on a tiny random BERT, made to write partial sites (conftest's first_site_at_once); each
written site is read back as a reader gets it (files on disk)."""

import json
import re
import shutil
from pathlib import Path

import pytest

from reportgen.ablation import watch
from reportgen.config import load_config
from reportgen.pipeline import build
from tests.helpers import SMALL_ABLATION, TWO_EXAMPLES, check_report, tiny_config, write_config

pytestmark = pytest.mark.slow

EXPERIMENTS = ["baseline", "single_heads", "random_fraction", "layer_halves", "whole_layers", "importance"]


@pytest.fixture
def project(tmp_path, tiny_model, first_site_at_once):  # noqa: ARG001 - a partial site even for a tiny model
    write_config(tmp_path, tiny_config(tiny_model, examples=TWO_EXAMPLES, ablation={**SMALL_ABLATION, "limit": 20}))
    return tmp_path


class Sites:
    """Every site a build swapped in, copied as it was (report.json, the home and ablation pages)."""

    def __init__(self, root: Path):
        self.root, self.seen = root, []

    def __call__(self, path: Path) -> None:
        copy = self.root / f"written-{len(self.seen)}"
        shutil.copytree(path, copy)
        self.seen.append(copy)

    def report(self, at: int) -> dict:
        return json.loads((self.seen[at] / "report.json").read_text(encoding="utf-8"))

    def page(self, at: int, name: str) -> str:
        return (self.seen[at] / name).read_text(encoding="utf-8")


def downloads(site: Path) -> set[str]:
    """Every chart download a site's pages link to (pages.Charts: href="charts/....ext" download)."""
    return {link for page in site.glob("*.html")
            for link in re.findall(r'href="(charts/[^"]+)" download', page.read_text(encoding="utf-8"))}


def test_the_first_site_comes_as_the_ablation_starts_and_says_it_is_running(project):
    sites = Sites(project)
    build(load_config(project / "reportgen.yaml"), reproducible=True, written=sites)
    assert len(sites.seen) >= 2
    first = sites.report(0)
    check_report(sites.seen[0])
    assert first["ablation"] is None and first["statistics"] is not None and len(first["examples"]) == 2
    progress = first["progress"]
    assert [item["name"] for item in progress["experiments"]] == EXPERIMENTS
    assert [item["state"] for item in progress["experiments"]] == ["running"] + ["waiting"] * (len(EXPERIMENTS) - 1)
    assert progress["experiments"][0]["masks_done"] == 0
    assert progress["experiments"][1]["masks"] == 2 * 4  # single heads: one mask per head
    home, ablation = sites.page(0, "index.html"), sites.page(0, "ablation.html")
    for page in (home, ablation):
        assert "Still being built" in page and "Running: the unmasked model (0 of 1 masks)" in page
        assert "Not run yet: single heads, random fractions of heads" in page
    assert "the head ablation is running" in home and "No task was measured" not in home
    assert (sites.seen[0] / "example-1.html").is_file() and (sites.seen[0] / "patterns.html").is_file()
    # the partial site offers its charts' data, not their pictures (4 to 5 s of the default first site's 10 s)
    first_links, final_links = downloads(sites.seen[0]), downloads(sites.seen[-1])
    assert first_links and {link.rsplit(".", 1)[1] for link in first_links} <= {"csv", "json"}
    assert {"png", "svg"} <= {link.rsplit(".", 1)[1] for link in final_links}
    assert not [path for path in (sites.seen[0] / "charts").iterdir()  # the head maps are the page's, not downloads
                if path.suffix in (".png", ".svg") and "head-map" not in path.name]
    for site, links in ((sites.seen[0], first_links), (sites.seen[-1], final_links)):
        assert all((site / link).is_file() for link in links)
    live = (sites.seen[0] / "build-progress.js").read_text(encoding="utf-8")  # the note's live line, loaded again
    assert live.startswith("window.reportgenBuildProgress && window.reportgenBuildProgress({")
    assert not (sites.seen[-1] / "build-progress.js").exists()  # the finished site has none
    final = sites.report(-1)
    assert final["progress"] is None and final["ablation"]["importance"] is not None
    assert "Still being built" not in sites.page(-1, "index.html")
    assert "Still being built" not in sites.page(-1, "ablation.html")
    # the finished site is what a build without any partial write gives: a warm rebuild writes once, the same bytes
    again = Sites(project / "again")
    (project / "again").mkdir()
    build(load_config(project / "reportgen.yaml"), reproducible=True, written=again)
    assert len(again.seen) == 1
    assert (again.seen[0] / "report.json").read_bytes() == (sites.seen[-1] / "report.json").read_bytes()


def test_each_partial_site_has_the_finished_experiments_and_the_rest_null_with_their_state(project, monkeypatch):
    monkeypatch.setattr(watch, "REWRITE_SHARE", 1000.0)  # every experiment is worth a site here
    sites = Sites(project)
    built = build(load_config(project / "reportgen.yaml"), written=sites)
    assert len(sites.seen) == len(EXPERIMENTS) + 1  # the first, one after each but the last, the finished one
    final = built.report.model_dump(mode="json")
    for at in range(1, len(EXPERIMENTS)):
        report = sites.report(at)
        states = {item["name"]: item["state"] for item in report["progress"]["experiments"]}
        assert [states[name] for name in EXPERIMENTS] == ["done"] * at + ["running"] + ["waiting"] * (
            len(EXPERIMENTS) - at - 1)
        for name in EXPERIMENTS:  # a finished experiment's numbers are the finished site's, the others null
            assert report["ablation"][name] == (final["ablation"][name] if states[name] == "done" else None), name
        assert report["progress"]["seconds_left"] > 0 and report["progress"]["seconds_per_mask"] > 0
        assert "About " in sites.page(at, "ablation.html") and " left, at the " in sites.page(at, "ablation.html")
    manifest = final["manifest"]
    assert list(manifest["experiments"]) == EXPERIMENTS
    assert manifest["experiments"]["single_heads"]["masks"] == 8
    assert manifest["experiments"]["single_heads"]["computed"] == 8
    assert all(cost["seconds"] >= 0 for cost in manifest["experiments"].values())


def test_an_interrupted_build_leaves_its_site_saying_it_stopped_and_resumes_from_the_cache(project):
    """Issue 48: the site a stopped build left said for ever that its ablation was running. Ctrl+C (here raised at a
    progress tick, as the terminal's handler does) rewrites the last partial site as stopped, with what was done,
    without the live line, and `reportgen publish` refuses it unless told --partial."""
    from reportgen.commands.publish import unfinished

    config = load_config(project / "reportgen.yaml")
    sites = Sites(project / "copies")
    (project / "copies").mkdir()

    def stop(stage: str, done: int, _total: int) -> None:
        if stage == "Ablation: random fraction" and done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build(config, progress=stop, written=sites)
    assert len(sites.seen) == 2 and not sites.report(0)["progress"]["interrupted"]  # the first site, then the stopped
    left = json.loads((project / "site" / "report.json").read_text(encoding="utf-8"))
    assert left["progress"]["interrupted"]
    assert left["ablation"]["single_heads"] is not None and left["ablation"]["importance"] is None  # what finished
    states = {item["name"]: item["state"] for item in left["progress"]["experiments"]}
    assert states["single_heads"] == "done" and states["random_fraction"] == "running"
    assert states["importance"] == "waiting"
    home, ablation = (project / "site" / "index.html").read_text(), (project / "site" / "ablation.html").read_text()
    for page in (home, ablation):
        assert "Stopped before it finished" in page and "Still being built" not in page
        assert "data-progress-src" not in page  # nothing polls for a build that is gone
    assert "Stopped in: random fractions of heads" in ablation and "is running" not in home
    assert not (project / "site" / "build-progress.js").exists()
    assert "was stopped before it finished (experiments done: baseline, single heads)" in unfinished(project / "site")
    assert (project / "site" / "index.html").is_file() and not (project / ".site.building").exists()
    resumed = build(load_config(project / "reportgen.yaml"))
    manifest = resumed.report.manifest
    assert manifest.experiments["single_heads"].computed == 0  # its masks came from the cache
    assert resumed.report.progress is None


def test_a_build_stopped_before_any_experiment_finished_says_it_measured_nothing(project):
    def stop(stage: str, done: int, _total: int) -> None:
        if stage == "Ablation: baseline" and done:  # its mask done, the experiment not yet recorded
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build(load_config(project / "reportgen.yaml"), progress=stop)
    left = json.loads((project / "site" / "report.json").read_text(encoding="utf-8"))
    assert left["progress"]["interrupted"] and left["ablation"] is None
    home = (project / "site" / "index.html").read_text(encoding="utf-8")
    assert "The head ablation was stopped before it finished, so this report states none of its findings" in home
    assert "was not measured: the head ablation was stopped" in home and "Done: none yet." in home
    assert re.search(r'id="about"', home)  # the sentence keeps its own paragraph: the next heading stands


@pytest.mark.parametrize("before", ["a site", "nothing", "an empty directory"])
def test_a_build_that_fails_after_its_first_site_leaves_the_output_as_it_found_it(project, before):
    """A failure during the ablation (here an OSError, as a full disk gives) puts the old site back, or leaves
    no site where there was none: never a site that says it is still being built by a build that died."""
    config = load_config(project / "reportgen.yaml")
    if before == "a site":
        build(config, reproducible=True, out=project / "site")
        (project / "site" / "index.html").write_text("the old site", encoding="utf-8")
        shutil.rmtree(config.cache_dir)  # the next build runs its experiments again
    elif before == "an empty directory":
        (project / "site").mkdir()
    sites = Sites(project / "copies")
    (project / "copies").mkdir()

    def fail(stage: str, done: int, _total: int) -> None:
        if stage == "Ablation: random fraction" and done:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        build(load_config(project / "reportgen.yaml"), progress=fail, written=sites, out=project / "site")
    assert sites.seen and sites.report(0)["progress"] is not None  # a partial site had been swapped in
    assert not [p.name for p in project.iterdir() if p.name.endswith((".before", ".previous", ".building"))]
    if before == "a site":
        assert (project / "site" / "index.html").read_text(encoding="utf-8") == "the old site"
    elif before == "an empty directory":
        assert not any((project / "site").iterdir())
    else:
        assert not (project / "site").exists()


def test_a_warm_rebuild_gives_each_experiments_masks_with_none_computed(project):
    build(load_config(project / "reportgen.yaml"))
    rebuilt = build(load_config(project / "reportgen.yaml"), reproducible=True)
    costs = rebuilt.report.manifest.experiments
    assert costs["single_heads"].masks == 8
    assert costs["single_heads"].computed is None and costs["single_heads"].seconds is None  # reproducible
    warm = build(load_config(project / "reportgen.yaml")).report.manifest.experiments
    assert warm["single_heads"].masks == 8 and warm["single_heads"].computed == 0


def test_an_ablation_with_less_than_the_first_site_threshold_to_go_writes_the_finished_site_only(project, monkeypatch):
    """Without `first_site_at_once`'s zeros: the first partial site waits until the experiments' pace says they
    have FIRST_SITE_SECONDS to go (here 10 min: a tiny model's take a second or two, however loaded the machine)."""
    monkeypatch.setattr(watch, "FIRST_SITE_MASKS", 2)
    monkeypatch.setattr(watch, "FIRST_SITE_SECONDS", 600.0)
    sites = Sites(project)
    built = build(load_config(project / "reportgen.yaml"), written=sites)
    assert len(sites.seen) == 1 and sites.report(0)["progress"] is None
    assert built.report.manifest.experiments["single_heads"].computed == 8  # the experiments ran: no partial site


def test_no_ablation_means_one_site_and_no_progress(project):
    write_config(project, tiny_config(load_config(project / "reportgen.yaml").model, examples=TWO_EXAMPLES,
                                      ablation={"enabled": False}))
    sites = Sites(project)
    build(load_config(project / "reportgen.yaml"), written=sites)
    assert len(sites.seen) == 1 and sites.report(0)["progress"] is None
    assert not (sites.seen[0] / "ablation.html").exists()
