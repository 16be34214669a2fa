"""The findings page's first screen (reportgen.site.story): the model, the patterns looked for and one take-home
sentence that says no more than the findings it reads (issue 47).

The reports are plain objects with the fields `lead` reads, so each case states its own truth; the default
site's page is checked in tests/site/browser/test_site_browser.py."""

from __future__ import annotations

from types import SimpleNamespace

from reportgen.report import Finding
from reportgen.site import story


def _atlas(labels: list[list[str]]) -> SimpleNamespace:
    counts = {"previous_token": 0, "delimiter": 0, "broad": 0, "mixed": 0}
    for row in labels:
        for label in row:
            counts[label] = counts.get(label, 0) + 1
    return SimpleNamespace(labels=labels, label_counts=counts)


def _finding(fid: str, **numbers) -> Finding:
    return Finding(id=fid, group="ablation", supported=True, sentence="", spans=[], links=[], numbers=numbers)


def _report(labels, findings=(), metric: str | None = "spearman", higher: bool = True, architecture="encoder"):
    task = None if metric is None else SimpleNamespace(metric=metric, higher_is_better={metric: higher})
    return SimpleNamespace(atlas=_atlas(labels), groups=None, findings=list(findings), heads=len(labels[0]),
                           model=SimpleNamespace(name="tiny <b>model</b>"), architecture=architecture,
                           ablation=None if task is None else SimpleNamespace(task=task))


MOSTLY_DELIMITER = [["delimiter", "delimiter", "previous_token"], ["delimiter", "mixed", "broad"]]


def test_the_lead_names_the_model_its_shape_and_the_heads_of_a_few():
    lead = story.lead(_report(MOSTLY_DELIMITER))
    assert lead.model == "tiny <b>model</b>" and lead.kind == "an encoder" and (lead.layers, lead.heads) == (2, 3)
    assert lead.unseen == []  # every pattern of this atlas shows in some head
    # a count of a few names its heads
    assert lead.named == {"delimiter": "layer 0 head 0, layer 0 head 1 and layer 1 head 0",
                          "previous_token": "layer 0 head 2", "broad": "layer 1 head 2"}


def test_the_take_home_reads_the_most_common_pattern_and_the_single_head_test():
    single = _finding("ablation-single-heads", count=1, total=6,
                      significant=[{"layer": 1, "head": 2, "delta": -0.1, "relative": -0.1}])
    lead = story.lead(_report(MOSTLY_DELIMITER, [single]))
    assert lead.take_home == ("3 of its 6 attention heads put most of their attention on [CLS], [SEP] or punctuation, "
                              "more than show any other pattern; masking one head alone changes Spearman "
                              "significantly for 1 of 6 heads (layer 1 head 2)")
    assert lead.significant == "layer 1 head 2"


def test_most_is_said_only_of_more_than_half_and_none_is_said_when_no_head_matters():
    labels = [["delimiter", "delimiter", "delimiter"], ["delimiter", "mixed", "broad"]]
    single = _finding("ablation-single-heads", count=0, total=6, significant=[])
    lead = story.lead(_report(labels, [single]))
    assert lead.take_home.startswith("Most of its attention heads (4 of 6) put most of their attention on")
    assert lead.take_home.endswith("masking any one head alone changes Spearman by no significant amount")
    assert lead.significant == ""


def test_a_loss_is_said_to_rise_and_a_report_without_a_task_says_it_measured_none():
    fraction = _finding("ablation-random-fraction", up_to=0.25, margin=0.05)
    lead = story.lead(_report(MOSTLY_DELIMITER, [fraction], metric="loss", higher=False, architecture="decoder"))
    assert "up to 25% of the heads can be masked at random, raising loss by less than 5%" in lead.take_home
    assert lead.kind.startswith("a decoder")
    plain = story.lead(_report(MOSTLY_DELIMITER, metric=None))
    assert plain.take_home.endswith("no task was measured, so this report does not say which heads the model needs")


def test_no_pattern_and_an_unnamed_pattern_are_said_plainly():
    assert story.lead(_report([["mixed", "mixed"]])).take_home.startswith(
        "None of its 2 attention heads passes the threshold of any pattern looked for")
    lead = story.lead(_report([["source_special", "mixed"]]))
    assert lead.take_home.startswith("Its most common head pattern is Source special tokens (1 of 2 attention heads)")


def test_a_site_written_while_its_ablation_runs_says_so_not_that_no_task_was_measured():
    running = _report(MOSTLY_DELIMITER, metric=None)
    running.progress = SimpleNamespace(interrupted=False)
    assert story.lead(running).take_home.endswith("the head ablation is still running, so which heads the model "
                                                  "needs is not said yet")
    running.progress = SimpleNamespace(interrupted=True)
    assert "the head ablation was stopped before it finished" in story.lead(running).take_home


def test_the_patterns_no_head_shows_are_named():
    lead = story.lead(_report([["delimiter", "mixed"]]))
    assert lead.unseen == ["Previous token", "Broad attention"]  # the atlas's labels with a count of 0


def _patching_report(*found: Finding) -> SimpleNamespace:
    report = _report(MOSTLY_DELIMITER, [_finding("ablation-single-heads", count=0, total=6, significant=[]), *found])
    report.patching = SimpleNamespace()
    return report


def _patched(fid: str, supported: bool, **numbers) -> Finding:
    return Finding(id=fid, group="patching", supported=supported, sentence="", spans=[], links=[], numbers=numbers)


def test_the_take_home_names_the_head_patching_supports_and_no_more():
    restored = _patched("patching-denoising", True, layer=1, head=2, effect=0.7, direction="denoising")
    assert story.lead(_patching_report(restored)).take_home.endswith(
        "; activation patching names layer 1 head 2 as the head that carries its prompt pairs' behaviour most: "
        "patched from the clean run, it alone restores 70% of the logit difference")
    weak = _patched("patching-denoising", False, layer=1, head=2, effect=0.2, direction="denoising")
    said = story.lead(_patching_report(weak)).take_home
    assert "layer 1 head 2" not in said and said.endswith("finds no single head that restores a significant share "
                                                          "of the behaviour")
    absent = _patched("patching-absent", False, difference=0.01)
    assert story.lead(_patching_report(absent)).take_home.endswith("show no behaviour for activation patching to "
                                                                   "locate")
    assert "patching" not in story.lead(_report(MOSTLY_DELIMITER)).take_home  # none configured: nothing said
