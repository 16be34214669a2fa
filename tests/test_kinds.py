"""The kinds of model (reportgen/kinds/): decided once from config.json, asked by every stage.

What differs between encoders, decoders and encoder-decoders lives in one module per kind behind a registry.
The scan below keeps it there: a branch on the kind of model outside reportgen/kinds/ (a test of
`is_decoder` / `is_encoder_decoder`, a comparison with "encoder", "decoder" or "encoder-decoder", a test of a
report's `architecture`) fails unless it is listed in ALLOWED with why it is not a kind's behaviour.
"""

from __future__ import annotations

import ast
import typing
from collections import Counter
from pathlib import Path

import pytest

from reportgen.errors import ModelError
from reportgen.kinds import KINDS, ModelKind, kind_for, kind_named
from reportgen.report import Report
from tests.helpers import ROOT

PACKAGE = ROOT / "reportgen"
KIND_NAMES = {"is_decoder", "is_encoder_decoder", "encoder_decoder_config"}
KIND_WORDS = {"encoder", "decoder", "encoder-decoder"}
# module -> (branches on the kind allowed there, why they belong there and not to a kind)
ALLOWED = {
    "reportgen/model/loading.py": (11, "the one reading of config.json that says which families are which kind "
                                       "(the kinds' `holds` ask it) and the file policy's refusals, which run "
                                       "before any kind is known"),
    "reportgen/model/head_sites.py": (2, "where a checkpoint's attention modules are in transformers' module tree"),
    "reportgen/model/light_bert.py": (1, "the fast path reads only a plain BERT encoder's config"),
    "reportgen/model/masking.py": (1, "a group's name: the uniform head of an encoder-decoder's decoder group is "
                                      "causal"),
    "reportgen/live/weights.py": (1, "the in-browser model is an encoder's; the live stage refuses others"),
    "reportgen/site/views.py": (1, "a group's name in an example's payload"),
}


def kind_branches(path: Path) -> list[tuple[int, str]]:
    """(line, code) of each place `path` tells one kind of model from another."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(side, ast.Constant) and side.value in KIND_WORDS for side in sides) or any(
                    isinstance(side, ast.Attribute | ast.Name) and "architecture" in (getattr(side, "attr", None),
                                                                                      getattr(side, "id", None))
                    for side in sides):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Name | ast.Attribute) and (getattr(node, "id", None) in KIND_NAMES
                                                             or getattr(node, "attr", None) in KIND_NAMES):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and node.value in KIND_NAMES:
            found.append((node.lineno, repr(node.value)))
    return sorted(found)


def test_kind_branches_outside_the_kinds_are_the_listed_ones():
    counts = Counter()
    where: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("reportgen/kinds/"):
            continue
        for line, code in kind_branches(path):
            counts[relative] += 1
            where.setdefault(relative, []).append(f"{line}: {code}")
    unlisted = {module: lines for module, lines in where.items() if counts[module] > ALLOWED.get(module, (0,))[0]}
    assert not unlisted, f"a branch on the kind of model belongs to reportgen/kinds/: {unlisted}"
    assert {module: (counts[module], allowed) for module, (allowed, _) in ALLOWED.items()
            if counts[module] != allowed} == {}, "ALLOWED lists more than there is: lower its count"


def test_the_scan_sees_each_form_of_branch(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f(report, cfg, loading, path, architecture):\n"
                     "    a = report.architecture == 'decoder'\n    b = architecture != 'encoder'\n"
                     "    c = loading.is_decoder(path)\n    d = cfg.get('is_encoder_decoder')\n"
                     "    e = 'encoder-decoder' in cfg\n    g = report.groups is not None\n", encoding="utf-8")
    assert [line for line, _ in kind_branches(probe)] == [2, 3, 4, 5, 6]


@pytest.mark.parametrize(("config", "name"), [
    ({"model_type": "bert"}, "encoder"), ({"model_type": "modernbert"}, "encoder"),
    ({"model_type": "gpt2"}, "decoder"), ({"model_type": "llama"}, "decoder"), ({"model_type": "qwen2"}, "decoder"),
    ({"model_type": "bart"}, "encoder-decoder"), ({"model_type": "t5", "is_encoder_decoder": True}, "encoder-decoder"),
    ({"model_type": "marian"}, "encoder-decoder"),
    # T5's encoder alone (T5EncoderModel) keeps the model type but says it is no encoder-decoder
    ({"model_type": "t5", "is_encoder_decoder": False}, "encoder"),
])
def test_a_checkpoint_is_of_one_kind_from_its_config(config, name):
    assert kind_for(config).name == name
    assert sum(kind.holds(config) for kind in KINDS[:-1]) <= 1  # no two specific kinds claim one checkpoint


def test_every_architecture_a_report_can_name_has_its_kind():
    names = typing.get_args(Report.model_fields["architecture"].annotation)
    assert sorted(names) == sorted(kind.name for kind in KINDS)
    assert all(kind_named(name).name == name for name in names)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_each_kind_answers_every_question_of_the_interface(kind):
    """What has no default in ModelKind is a kind's own: a new kind that forgets one fails here, not in a build."""
    own = {"holds", "task_refusal", "run", "atlas", "labels"}
    missing = sorted(name for name in own if getattr(type(kind), name) is getattr(ModelKind, name))
    assert not missing, f"{kind.name} does not say {missing}"


TASKS = ("similarity", "classification", "mlm", "causal_lm", "seq2seq")


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
@pytest.mark.parametrize("task", TASKS)
def test_a_kind_runs_its_tasks_and_refuses_the_others_in_one_line(kind, task, tmp_path):
    if task in kind.tasks:
        kind.check_task(task, tmp_path, "some-type")
        return
    with pytest.raises(ModelError) as refused:
        kind.check_task(task, tmp_path, "some-type")
    line = str(refused.value)
    assert "\n" not in line and f"model type 'some-type' is {kind.article}" in line
    assert f"task '{task}'" in line


def test_the_tasks_each_need_their_kind():
    """causal_lm a decoder, seq2seq an encoder-decoder, similarity and mlm a single stack: no kind runs all."""
    runs = {task: sorted(kind.name for kind in KINDS if task in kind.tasks) for task in TASKS}
    assert runs == {"similarity": ["decoder", "encoder"], "classification": ["decoder", "encoder", "encoder-decoder"],
                    "mlm": ["decoder", "encoder"], "causal_lm": ["decoder"], "seq2seq": ["encoder-decoder"]}


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_each_kind_refuses_the_example_fields_it_does_not_read(kind, tmp_path):
    """A `target` only an encoder-decoder reads, and a `pair` it does not: any other kind would silently ignore
    what it was given (a decoder built an example with a target, exit 0, before this was a kind's rule)."""
    from reportgen.config import ExampleSpec, config_from_mapping
    from reportgen.errors import DataError

    config = config_from_mapping({"model": "default"}, "reportgen.yaml", tmp_path)
    with_target = ExampleSpec(text="the cat sat on the mat.", target="le chat")
    with_pair = ExampleSpec(text="the cat sat.", pair="on the mat.", target="le chat" if kind.reads_target else None)
    refused = [with_pair] if kind.reads_target else [with_target]
    for spec in refused:
        with pytest.raises(DataError) as error:
            kind.examples([spec], config)
        assert "reportgen.yaml: field 'examples': the example 'the cat sat" in str(error.value)
    if kind.reads_target:
        assert kind.examples([with_target], config)[0] == [with_target]
    else:
        assert kind.examples([ExampleSpec(text="the cat sat.")], config)[0] == [ExampleSpec(text="the cat sat.")]
