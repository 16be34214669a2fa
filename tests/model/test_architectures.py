"""Every encoder family reportgen claims, each on a tiny random checkpoint of its own (issue 30).

For each family of tests/architectures.py FAMILIES (its checkpoints: random weights, a tokenizer trained
here, nothing downloaded) this module checks each column of the docs' support table
(docs/pages/reference/architectures.md):

- views: `reportgen build` of a tiny site; each example page's stored attention is within the 8-bit
  step (0.5/255) of the attention transformers itself gives for that input (eager, output_attentions);
- query/key check: each example's query/key page states a difference within its rounding bound;
- patterns: report.json has the per-head pattern statistics for every head;
- contributions: each example page has contributions (the value norms were captured) that decode to
  per-row shares of the attention's shape;
- masking exact: `HeadMasker` (method "zero") masking one head gives, on a padded batch, the output of
  the model with that head's columns of the attention output projection zeroed by hand, to 1e-5;
- similarity / classification / masked-LM task: the ablation stage runs on the family's checkpoint for
  that task (base model, sequence classifier, masked-LM head) with a baseline and every single head, and
  the task's outputs agree between padded batches, one unpadded input at a time and the engine's fast
  path, and change when one head is masked.

The sites are full builds but for drawing the charts' PNG/SVG downloads (see the `sites` fixture).

The docs' table is rendered from CHECKS and SUPPORT, the same declarations the tests are parametrized
with (`families_for`), so it claims only what this module tests. Regenerate it (and the decoder and
encoder-decoder tables beside it) after changing them:

    python -m tests.model.test_architectures            # print the table
    python -m tests.model.test_architectures --write    # rewrite the sections of architectures.md

Sites and checkpoints are built once per session, lazily: a family's site serves four of its checks,
and a family whose build fails fails those checks with the same error without building again.
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.architectures import (
    FAMILIES,
    MAX_LENGTH,
    NUM_LABELS,
    STYLES,
    TASKS,
    Checkpoints,
    describe,
    shape_text,
)
from tests.decoder_checkpoints import FAMILIES as DECODER_FAMILIES
from tests.decoder_checkpoints import NAMES as DECODER_NAMES
from tests.decoder_checkpoints import render_decoder_table
from tests.helpers import (
    DOCS,
    SINGLE_HEADS_ABLATION,
    TWO_EXAMPLES,
    build_tiny_site,
    check_report,
    doc_section,
    tiny_config,
    write_doc_section,
    write_graded_pairs,
    write_labelled_pairs,
    write_sentences,
)
from tests.seq2seq_checkpoints import FAMILIES as ENCODER_DECODER_FAMILIES
from tests.seq2seq_checkpoints import NAMES as ENCODER_DECODER_NAMES
from tests.seq2seq_checkpoints import render_encoder_decoder_table

# The tests of each family run as a group of their own on the pytest-xdist workers (conftest.py):
# a family's checks share its own site and checkpoints.
SPLIT_BY = "family"

ARCHITECTURES_PAGE = DOCS / "reference" / "architectures.md"
START, END = "<!-- support:start -->", "<!-- support:end -->"

# The docs table's columns: check id -> (header, what a "yes" means). Each check is the test `test_<id>`.
CHECKS: dict[str, tuple[str, str]] = {
    "views": ("views", "a built site's attention views hold the model's own attention, within the 8-bit step"),
    "qk_check": ("query/key check", "the query/key page's softmax matches the model's weights within rounding"),
    "patterns": ("patterns", "report.json has every pattern statistic for every head"),
    "contributions": ("contributions", "the views have contributions (value norms captured)"),
    "masking": ("masking exact", "masking a head equals zeroing its columns of the output projection, to 1e-5, "
                                 "on a padded batch"),
    "similarity": ("similarity task", "the ablation (baseline, each head masked) runs on the base model; padded "
                                      "batches, one input at a time and the fast path give the same outputs"),
    "classification": ("classification task", "the same on a sequence classifier"),
    "mlm": ("masked-LM task", "the same on a masked-LM head"),
}
# Which checks each family has. Every family has all of them: a family that lacked one would say so here,
# and the docs would show it.
SUPPORT: dict[str, tuple[str, ...]] = {family: tuple(CHECKS) for family in FAMILIES}

ROW_STEP = 0.5 / 255  # the 8-bit attention encoding's largest error (reportgen/site/views.py)
FLOAT_SLACK = 1e-6  # float32 attention against its float64 decoding
MASK_TOL = 1e-5
# Per-head statistics every input measures (the others need words of several pieces, or a pair sharing words).
HEAD_STATISTICS = ("entropy", "max_weight", "effective_share", "cls", "sep", "cls_sep", "delimiter", "punctuation",
                   "next_token", "previous_token", "next_token_argmax", "previous_token_argmax", "same_token")
MASKING_TEXTS = ["the cat sat on the mat.", "i went to the store.",
                 "at the store, i bought fresh strawberries and a red ball for the dog."]
ABLATION_ROWS = 12


def families_for(check: str) -> list[str]:
    """The families the test of `check` runs on, in FAMILIES order (also the docs table's "yes" cells)."""
    return [family for family in FAMILIES if check in SUPPORT[family]]


# -- the docs' tables (docs/pages/reference/architectures.md) ----------------------------------------------
def render_support_table() -> str:
    """The section of architectures.md between the markers, generated from FAMILIES, CHECKS and SUPPORT."""
    lines = [
        "Generated from `tests/model/test_architectures.py` (`python -m tests.model.test_architectures --write`",
        "regenerates it). Each \"yes\" is a test of that module on a tiny checkpoint of the family built by",
        f"`tests/architectures.py` ({shape_text()}): random weights,",
        "task heads included, and a tokenizer of the family's own kind trained on a few sentences; nothing is",
        "downloaded. The columns:",
        "",
    ]
    lines += [f"- {header}: {meaning}" for header, meaning in CHECKS.values()]
    lines += ["", "| Architecture (`model_type`) | Tiny config tested | " + " | ".join(h for h, _ in CHECKS.values())
              + " |", "|---|---|" + "---|" * len(CHECKS)]
    for model_type, family in FAMILIES.items():
        cells = ["yes" if check in SUPPORT[model_type] else "no" for check in CHECKS]
        lines.append(f"| {family.name} (`{model_type}`) | {describe(family)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


DECODERS_START, DECODERS_END = "<!-- decoders:start -->", "<!-- decoders:end -->"
SEQ2SEQ_START, SEQ2SEQ_END = "<!-- encoder-decoders:start -->", "<!-- encoder-decoders:end -->"


def write_docs() -> None:
    write_doc_section(ARCHITECTURES_PAGE, START, END, render_support_table())
    write_doc_section(ARCHITECTURES_PAGE, DECODERS_START, DECODERS_END, render_decoder_table())
    write_doc_section(ARCHITECTURES_PAGE, SEQ2SEQ_START, SEQ2SEQ_END, render_encoder_decoder_table())


def test_docs_decoder_table_is_generated_from_the_decoder_tests():
    from reportgen.model.loading import VIEWABLE_DECODERS

    text = ARCHITECTURES_PAGE.read_text(encoding="utf-8")
    assert doc_section(text, DECODERS_START, DECODERS_END) == render_decoder_table(), (
        "the decoder table of docs/pages/reference/architectures.md is stale: "
        "run `python -m tests.model.test_architectures --write`")
    assert set(DECODER_FAMILIES) == set(VIEWABLE_DECODERS) and DECODER_NAMES == VIEWABLE_DECODERS


def test_docs_encoder_decoder_table_is_generated_from_the_encoder_decoder_tests():
    from reportgen.model.loading import SUPPORTED_ENCODER_DECODERS

    text = ARCHITECTURES_PAGE.read_text(encoding="utf-8")
    assert doc_section(text, SEQ2SEQ_START, SEQ2SEQ_END) == render_encoder_decoder_table(), (
        "the encoder-decoder table of docs/pages/reference/architectures.md is stale: "
        "run `python -m tests.model.test_architectures --write`")
    assert set(ENCODER_DECODER_FAMILIES) == set(SUPPORTED_ENCODER_DECODERS)
    assert ENCODER_DECODER_NAMES == SUPPORTED_ENCODER_DECODERS


def test_docs_support_table_is_generated_from_the_tests():
    text = ARCHITECTURES_PAGE.read_text(encoding="utf-8")
    assert START in text and END in text, "docs/pages/reference/architectures.md lacks the support-table markers"
    assert doc_section(text, START, END) == render_support_table(), (
        "the support table of docs/pages/reference/architectures.md is stale: "
        "run `python -m tests.model.test_architectures --write`")


def test_every_supported_encoder_is_a_family_and_no_other():
    """The families reportgen supports (loading.SUPPORTED_ENCODERS, which its up-front check lets through and
    its error message names) are exactly the tested ones, by the same names: none goes without its tests,
    and the table lists none that reportgen refuses."""
    from reportgen.model.loading import SUPPORTED_ENCODERS

    assert {family: spec.name for family, spec in FAMILIES.items()} == SUPPORTED_ENCODERS
    assert "modernbert" in FAMILIES


def test_every_column_is_a_test_over_its_families():
    """Each column of the table is the test `test_<check>`, parametrized over exactly `families_for(check)`."""
    module = sys.modules[__name__]
    for check in CHECKS:
        test = getattr(module, f"test_{check}", None)
        assert callable(test), f"no test_{check} for the column {CHECKS[check][0]!r}"
        marks = {mark.name: mark for mark in getattr(test, "pytestmark", [])}
        assert "slow" in marks
        assert marks["parametrize"].args == ("family", families_for(check)), check


# -- shared builds ---------------------------------------------------------------------------------------------
class Once:
    """`make(key)` computed once per key; a failure is kept and raised again for every later use of the key."""

    def __init__(self, make: Callable):
        self.make = make
        self.done: dict = {}

    def __call__(self, key):
        if key not in self.done:
            try:
                self.done[key] = (True, self.make(key))
            except Exception as err:  # noqa: BLE001 - raised again below, for this and every later test
                self.done[key] = (False, err)
        ok, value = self.done[key]
        if not ok:
            raise value
        return value


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("architectures")


@pytest.fixture(scope="session")
def checkpoints(workdir) -> Checkpoints:
    return Checkpoints(workdir / "checkpoints")


@pytest.fixture(scope="session")
def task_data(workdir) -> dict[str, Path]:
    """Each task's data file: the graded pairs (similarity), their grade >= 3 as a label of the pair
    (classification) and their texts (masked LM)."""
    folder = workdir / "data"
    folder.mkdir()
    return {"similarity": write_graded_pairs(folder / "pairs.tsv"),
            "classification": write_labelled_pairs(folder / "labelled.tsv"),
            "mlm": write_sentences(folder / "texts.jsonl")}


@pytest.fixture(scope="session")
def sites(workdir, checkpoints, task_data) -> Once:
    """family -> its tiny site: `reportgen build` of TWO_EXAMPLES with the similarity task's baseline and
    single heads (built on first use).

    The one step left out is drawing the charts' PNG and SVG downloads (`exports.export_charts`), which
    depends on no architecture (only on the numbers charted; tests/site/ test it) and took half of each
    build: with it, fifteen builds would not fit the module's few minutes."""
    from reportgen.site import exports

    def no_drawings(_recorded, target: Path, *_args, **_kwargs) -> None:
        target.mkdir(parents=True, exist_ok=True)

    def build(family: str) -> Path:
        project = workdir / "sites" / family
        project.mkdir(parents=True)
        ablation = {**SINGLE_HEADS_ABLATION, "data": task_data["similarity"], "limit": ABLATION_ROWS}
        config = tiny_config(checkpoints.get(family), title=f"A tiny {FAMILIES[family].name}", max_length=MAX_LENGTH,
                             ablation=ablation)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(exports, "export_charts", no_drawings)
            return build_tiny_site(project, config)

    return Once(build)


def ablation_settings(task: str, data: Path):
    """The baseline and single heads on the first ABLATION_ROWS rows of `data`, with few resamples."""
    from reportgen.config import AblationSettings, defaults

    raw = {**defaults()["ablation"], **SINGLE_HEADS_ABLATION}
    raw.update(task=task, data=str(data), limit=ABLATION_ROWS)
    if task == "classification":
        raw["columns"] = {"text": "text", "pair": "pair", "label": "label"}
    return AblationSettings.model_validate(raw)


@pytest.fixture(scope="session")
def ablations(workdir, checkpoints, task_data) -> Once:
    """(family, task) -> the ablation record of the baseline and single heads on that task's checkpoint."""
    from reportgen.ablation.records import run_ablations

    def run(key: tuple[str, str]):
        family, task = key
        return run_ablations(checkpoints.get(family, task), ablation_settings(task, task_data[task]), device="cpu",
                             cache_dir=workdir / "ablation-cache", fingerprint=f"{family}-{task}")

    return Once(run)


def page_payload(page: Path, kind: str) -> dict:
    """The payload of the `kind` view ("views", "qk") of a built page, with its data files put back
    (reportgen.site.view_files.read_page_payload)."""
    from reportgen.site.view_files import read_page_payload

    payload = read_page_payload(page)
    if payload.get("kind") != kind:
        raise AssertionError(f"{page.name} has no {kind} payload")
    return payload


def model_attention(path: Path, example: dict):
    """[layers, heads, tokens, tokens] as transformers computes it for `example` (eager attention)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    texts = [example["text"]] + ([example["pair"]] if "pair" in example else [])
    inputs = tokenizer(*texts, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
    with torch.no_grad():
        attentions = model(**inputs, output_attentions=True).attentions
    return torch.stack(attentions)[:, 0].double().numpy()


# -- the checkpoints themselves ----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_checkpoint_is_a_model_directory_reportgen_loads(family, checkpoints):
    """Each checkpoint loads through reportgen as a user's would; its fast tokenizer marks a pair with the
    family's special tokens, has word ids and a mask token, and gives only inputs the model's forward takes."""
    import inspect

    from transformers import AutoConfig

    from reportgen.model.loading import load, read_shape

    path = checkpoints.get(family)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in path.iterdir()}
    assert read_shape(path) == (family, 3, 4, 32)
    model, tokenizer = load(path, "cpu")
    assert tokenizer.is_fast and tokenizer.mask_token is not None
    first, second = tokenizer("the cat sat", add_special_tokens=False), tokenizer("a dog", add_special_tokens=False)
    encoded = tokenizer("the cat sat", "a dog", return_special_tokens_mask=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    between = [tokenizer.sep_token] * STYLES[FAMILIES[family].tokenizer].separators
    want = ([tokenizer.cls_token] + tokenizer.convert_ids_to_tokens(first["input_ids"]) + between
            + tokenizer.convert_ids_to_tokens(second["input_ids"]) + [tokenizer.sep_token])
    assert tokens == want
    assert [word for word in encoded.word_ids() if word is not None]
    accepted = inspect.signature(model.forward).parameters
    assert [name for name in encoded if name != "special_tokens_mask" and name not in accepted] == []
    for task in TASKS[1:]:
        config = AutoConfig.from_pretrained(checkpoints.get(family, task))
        assert config.model_type == family and config.architectures == [FAMILIES[family].classes[task]]
        assert config.num_labels == NUM_LABELS


# -- the table's columns -----------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("views"))
def test_views(family, sites, checkpoints):
    import numpy as np

    from reportgen.site.views import decode_attention

    site = sites(family)
    report = check_report(site)
    assert (report["layers"], report["heads"]) == (3, 4) and report["warnings"] == []
    for example, entry in zip(TWO_EXAMPLES, report["examples"], strict=True):
        payload = page_payload(site / entry["page"], "views")
        stored = decode_attention(payload["attention"])
        want = model_attention(checkpoints.get(family), example)
        assert stored.shape == want.shape and len(payload["tokens"]) == want.shape[-1]
        assert np.abs(stored - want).max() <= ROW_STEP + FLOAT_SLACK


@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("qk_check"))
def test_qk_check(family, sites):
    site = sites(family)
    for entry in check_report(site)["examples"]:
        assert entry["qk_page"], f"example {entry['id']} has no query/key page"
        check = page_payload(site / entry["qk_page"], "qk")["check"]
        assert math.isfinite(check["difference"]) and check["difference"] <= check["rounding"], check


@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("patterns"))
def test_patterns(family, sites):
    import numpy as np

    statistics = check_report(sites(family))["statistics"]
    for name in HEAD_STATISTICS:
        for key in ("mean", "std"):
            values = np.array(statistics[name][key], dtype=float)  # None (not measured) becomes NaN
            assert values.shape == (3, 4) and np.isfinite(values).all(), (name, key, values)
    assert np.array(statistics["labels"]).shape == (3, 4)


@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("contributions"))
def test_contributions(family, sites, checkpoints):
    import numpy as np

    from reportgen.site.views import decode_attention, decode_contributions

    site = sites(family)
    report = check_report(site)
    for example, entry in zip(TWO_EXAMPLES, report["examples"], strict=True):
        payload = page_payload(site / entry["page"], "views")
        assert payload.get("contributions"), f"{entry['page']} has no contributions"
        shares, totals = decode_contributions(payload["contributions"])
        attention = decode_attention(payload["attention"])
        assert shares.shape == attention.shape and totals.shape == attention.shape[:3]
        assert np.abs(shares.sum(-1) - 1).max() <= 0.01 and (shares >= 0).all()
        assert np.isfinite(totals).all() and (totals > 0).all()
        # a key the head gives no weight to (outside a sliding window) passes nothing on
        unseen = model_attention(checkpoints.get(family), example) == 0
        assert (shares[unseen] <= ROW_STEP + FLOAT_SLACK).all()
    contribution = report["statistics"]["contribution"]["statistics"]
    for name in HEAD_STATISTICS:
        values = np.array(contribution[name]["mean"], dtype=float)
        assert values.shape == (3, 4) and np.isfinite(values).all(), (name, values)


def zeroed_head(model, layer: int, head: int):
    """A copy of `model` whose attention output projection runs at depth `layer` with the columns of `head`
    zeroed (the projection is linear in the per-head context, so this removes the head). Where one
    projection runs at several depths (ALBERT), the copy edits its weight for the call at `layer` only."""
    import torch

    from reportgen.model.head_sites import locate

    reference = copy.deepcopy(model)
    sites = locate(reference)
    projection, size = sites.out_proj[layer], sites.head_dim
    original = projection.weight.detach().clone()
    zeroed = original.clone()
    zeroed[:, head * size:(head + 1) * size] = 0
    depths = [depth for depth in range(sites.n_layers) if sites.out_proj[depth] is projection]
    if depths == [layer]:
        with torch.no_grad():
            projection.weight.copy_(zeroed)
        return reference
    calls = [0]

    def start(_module, _args):
        calls[0] = 0

    def before(module, _args):
        with torch.no_grad():
            module.weight.copy_(zeroed if depths[calls[0]] == layer else original)
        calls[0] += 1

    sites.encoder.register_forward_pre_hook(start)
    projection.register_forward_pre_hook(before)
    return reference


@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("masking"))
def test_masking(family, checkpoints):
    import torch

    from reportgen.model.head_sites import locate
    from reportgen.model.loading import load
    from reportgen.model.masking import HeadMasker

    model, tokenizer = load(checkpoints.get(family), "cpu")
    batch = tokenizer(MASKING_TEXTS, padding=True, return_tensors="pt")
    real = batch["attention_mask"].bool()
    assert not real.all(), "the batch has no padding"
    sites = locate(model)
    assert (sites.n_layers, sites.heads) == (3, 4)
    layer, head = 1, 2
    mask = torch.ones(3, 4)
    mask[layer, head] = 0

    def run(net):
        with torch.no_grad():
            return net(**batch).last_hidden_state

    with HeadMasker(model, "zero") as masker, masker.masking(mask):
        got = run(model)
    want = run(zeroed_head(model, layer, head))
    plain = run(model)
    assert (got - want)[real].abs().max().item() < MASK_TOL
    assert (got - plain)[real].abs().max().item() > 1e-3  # the head mattered, so the check has teeth


def check_ablation(family: str, task: str, ablations, checkpoints, task_data) -> None:
    """The ablation record has a defined baseline and every single head; and under it, the task's model gives
    the same per-example outputs in padded batches as one unpadded input at a time, the engine's fast path
    the same as the plain one, and masking one head changes them (so a random task head whose metric no
    mask moves, as a masked-LM accuracy of 0, still shows that the masks reach the task's model)."""
    import numpy as np
    import torch

    from reportgen.ablation.engine import Engine, evaluate_plain
    from reportgen.ablation.task_loading import load_ablation_task

    record = ablations((family, task))
    assert record.task.type == task and record.task.undefined is None
    assert record.task.examples == ABLATION_ROWS
    assert math.isfinite(record.baseline.value)
    for values in (record.single_heads.value, record.single_heads.delta):
        values = np.array(values, dtype=float)
        assert values.shape == (3, 4) and np.isfinite(values).all(), values

    loaded = load_ablation_task(checkpoints.get(family, task), ablation_settings(task, task_data[task]), device="cpu")
    masks = np.ones((2, 3, 4), dtype=np.float32)
    masks[1, 1, 2] = 0
    with torch.no_grad():
        alone = torch.cat([loaded.unit_outputs(loaded.make_batch([unit])) for unit in range(len(loaded.units))])
        alone = loaded.scored(loaded.example_outputs(alone).double().numpy())
    plain = [evaluate_plain(loaded, mask, "zero") for mask in masks]  # padded to the longest of each batch
    with Engine(loaded, "zero") as engine:
        fast = engine.evaluate(masks)
    assert np.allclose(plain[0], alone, rtol=1e-4, atol=1e-4), np.abs(plain[0] - alone).max()
    for want, got in zip(plain, fast, strict=True):
        assert np.allclose(got, want, rtol=1e-4, atol=1e-4), np.abs(got - want).max()
    assert np.abs(plain[1] - plain[0]).max() > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("similarity"))
def test_similarity(family, ablations, checkpoints, task_data):
    check_ablation(family, "similarity", ablations, checkpoints, task_data)


@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("classification"))
def test_classification(family, ablations, checkpoints, task_data):
    check_ablation(family, "classification", ablations, checkpoints, task_data)


@pytest.mark.slow
@pytest.mark.parametrize("family", families_for("mlm"))
def test_mlm(family, ablations, checkpoints, task_data):
    check_ablation(family, "mlm", ablations, checkpoints, task_data)


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_docs()
        print(f"rewrote the support tables in {ARCHITECTURES_PAGE}")
    else:
        sys.stdout.write(render_support_table())


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_attention_is_taken_out_a_layer_at_a_time_as_the_model_gives_it(family, checkpoints, monkeypatch):
    """run_example copies each layer's weights out as the layer computes them (reportgen/model/attention_capture.py)
    and the model keeps none of them: the copy is transformers' own attention, bit for bit."""
    from tests.model.capture_checks import check_layer_capture

    check_layer_capture(checkpoints.get(family), monkeypatch)
