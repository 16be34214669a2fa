"""Numbers are never published wrong without a word (issue 10, part 3).

- a cached ablation entry with one flipped bit is recomputed, with a warning, and the report
  equals a clean run's; the temp files a killed writer left are removed by the next run;
  a cache directory that cannot be used is one line and exit 5;
- a config.json that does not match the weights is refused (exit 3) naming the first tensor,
  while the weights of a task head the model class leaves out, and an unused pooler, are fine;
  tokenizer failures name the file;
- an undefined task metric runs no test, marks nothing significant and names its cause;
- the model's name comes from this build's config, not from the cache.

Models are tiny random BERTs built here; the slow tests build through the CLI.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from reportgen import errors
from reportgen.ablation.engine import ResultCache
from reportgen.ablation.experiments import ablate
from reportgen.ablation.records import run_ablations
from reportgen.ablation.task_loading import load_ablation_task, load_task
from reportgen.cache.store import Cache, temp_path
from reportgen.config import AblationSettings, defaults, load_config
from reportgen.errors import ModelError, OutputError
from reportgen.model import loading as model
from reportgen.pipeline.model_stage import run_model
from reportgen.report import Ablation
from reportgen.stats import adjust, paired_permutation_p
from tests.helpers import TINY_WORDS, check_report, make_tiny_bert, pythonpath, write_config

PAIRS = [("the cat sat on the mat", "a cat sat on a mat", 5.0), ("the cat sat", "a red car", 1.0),
         ("i went to the store", "i bought fresh strawberries", 2.5), ("the dog sat", "the cat sat", 4.0),
         ("a red ball", "she bought a red car", 3.0), ("he was at the store", "the dog is on the mat", 0.5)]


def sim_file(path: Path, pairs) -> Path:
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs),
                    encoding="utf-8")
    return path


def settings(data: Path, **over) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(data=str(data), seeds=[0], fractions=[0.0, 0.25], bootstrap_samples=100, permutations=100,
               batch_tokens=256)
    raw.update(over)
    return AblationSettings.model_validate(raw)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """models/base (BertModel), models/classifier (with a classification head), models/mlm (with an
    MLM head): 2 layers x 4 heads, random weights, one WordPiece vocabulary."""
    import torch
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        BertForSequenceClassification,
        BertTokenizer,
    )

    root = tmp_path_factory.mktemp("models")
    make_tiny_bert(root / "base")
    vocab = {w: i for i, w in enumerate(TINY_WORDS)}
    config = {"vocab_size": len(TINY_WORDS), "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 64, "max_position_embeddings": 128}
    for name, cls in (("classifier", BertForSequenceClassification), ("mlm", BertForMaskedLM)):
        torch.manual_seed(0)
        BertTokenizer(vocab=vocab).save_pretrained(root / name)
        cls(BertConfig(**config)).save_pretrained(root / name)
    return root


def variant(models: Path, source: str, name: str, **config) -> Path:
    """A copy of a model directory with some config.json keys changed."""
    target = models / name
    if not target.exists():
        shutil.copytree(models / source, target)
        cfg = json.loads((target / "config.json").read_text())
        (target / "config.json").write_text(json.dumps({**cfg, **config}))
    return target


# -- the ablation cache ----------------------------------------------------------------------------
def flip_bit(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


def cached_run(model_dir: Path, s: AblationSettings, cache_dir: Path) -> tuple[Ablation, ResultCache]:
    """run_ablations, with the cache it used kept to read its counts: what it computed, what it loaded."""
    task = load_ablation_task(model_dir, s, device="cpu")
    cache = ResultCache(cache_dir, "fp", task.data_hash(), s.method)
    return ablate(task, s, cache), cache


@pytest.mark.parametrize("where", ["checksum", "array header", "array data"])
@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_a_flipped_bit_in_a_cached_entry_is_recomputed_with_a_warning(models, tmp_path, where):
    data = sim_file(tmp_path / "pairs.tsv", PAIRS)
    s = settings(data)
    clean = run_ablations(models / "base", s, device="cpu", cache_dir=tmp_path / "clean", fingerprint="fp")
    first, cache = cached_run(models / "base", s, tmp_path / "c")
    entry = cache.entry_path("mask", np.ones((first.layers, first.heads), dtype=np.float32))  # the baseline's
    assert entry.is_file()
    raw = entry.read_bytes()
    position = {"checksum": 0, "array header": raw.index(b"\n") + 20, "array data": len(raw) - 1}[where]
    flip_bit(entry, position)
    if where == "array data":  # the bit flip alone would have changed the published baseline
        damaged = np.load(io.BytesIO(entry.read_bytes().partition(b"\n")[2]))
        assert not np.array_equal(damaged, np.load(io.BytesIO(raw.partition(b"\n")[2])))
    with pytest.warns(UserWarning, match=r"cache entry .*mask-[0-9a-f]{24}\.npy is damaged \(checksum mismatch\); "
                                         r"recomputing it"):
        rerun, cache = cached_run(models / "base", s, tmp_path / "c")
    assert cache.computed == 1  # only the damaged entry
    assert rerun == clean == first
    assert entry.read_bytes() == raw  # rewritten whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again, cache = cached_run(models / "base", s, tmp_path / "c")
    assert cache.computed == 0 and cache.loaded > 0 and again == first


def test_a_truncated_or_emptied_entry_is_recomputed(models, tmp_path):
    data = sim_file(tmp_path / "pairs.tsv", PAIRS)
    s = settings(data, experiments={**defaults()["ablation"]["experiments"], "importance": False})
    first, cache = cached_run(models / "base", s, tmp_path / "c")
    entries = sorted(cache.directory.glob("mask-*.npy"))
    entries[0].write_bytes(entries[0].read_bytes()[:-9])
    entries[1].write_bytes(b"")
    with pytest.warns(UserWarning, match="is damaged"):
        rerun, cache = cached_run(models / "base", s, tmp_path / "c")
    assert cache.computed == 2 and rerun == first


KILLED_WRITER = """\
import os, signal, sys
from pathlib import Path
from reportgen.cache.store import temp_path
for entry in sys.argv[1:]:
    tmp = temp_path(Path(entry))
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(b"half an entry")
print(os.getpid(), flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"""


def killed_writer(*entries: Path) -> int:
    """Leave temp files as a writer killed by SIGTERM between write and rename does; its pid."""
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, *map(str, entries)], env={**os.environ,
                          "PYTHONPATH": pythonpath()}, capture_output=True, check=False)
    assert done.returncode == -signal.SIGTERM, done.stderr
    return int(done.stdout)


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_temp_files_of_a_killed_writer_are_removed_by_the_next_run(models, tmp_path):
    cache = tmp_path / "cache"
    key = "0123456789abcdef01234567"
    entry = cache / "ablation" / "fp" / f"data-zero/mask-{key}.npy"
    other = cache / "ablation" / "fp2" / f"data-zero/importance-{key}.npy"
    dead = killed_writer(entry, other)
    left = [temp_path(entry, dead), temp_path(other, dead)]
    legacy = entry.with_name(f"mask-{key}.tmp{dead}")  # what reportgen before the checksum wrote
    live = temp_path(entry.with_name(f"mask-{'f' * 24}.npy"))  # this process: a writer still running
    foreign = [entry.with_name(f"notes.tmp{dead}"), entry.with_name(f"mask-{key}.npy.tmp{dead}.bak"),
               tmp_path / f"mask-{key}.npy.tmp{dead}"]  # not reportgen's names, or not in the cache
    for path in [legacy, live, *foreign]:
        path.write_bytes(b"x")
    assert all(p.is_file() for p in left)

    run_ablations(models / "base", settings(sim_file(tmp_path / "pairs.tsv", PAIRS), experiments={
        name: name == "baseline" for name in defaults()["ablation"]["experiments"]}),
        device="cpu", cache_dir=cache, fingerprint="fp")
    assert not any(p.exists() for p in [*left, legacy])
    assert live.is_file() and all(p.is_file() for p in foreign)
    assert not [p for p in cache.rglob("*.tmp*") if p not in (live, *foreign)]


def test_sweep_covers_every_kind_of_entry(tmp_path):
    cache = Cache(tmp_path)
    entries = [tmp_path / "runs" / f"{'a' * 24}.npz", tmp_path / "info" / f"{'b' * 24}.json"]
    dead = killed_writer(*entries)
    assert sorted(cache.sweep()) == sorted(temp_path(e, dead) for e in entries)
    assert list(tmp_path.rglob("*.tmp*")) == []


def test_a_write_that_fails_leaves_no_temp_file(tmp_path):
    cache = Cache(tmp_path)
    target = tmp_path / "runs" / f"{'c' * 24}.npz"
    target.mkdir(parents=True)  # os.replace cannot put a file there
    with pytest.raises(OutputError):
        cache.write_bytes(target, b"payload")
    assert list(tmp_path.rglob("*.tmp*")) == []


@pytest.mark.parametrize("case", ["cache_dir is a file", "entry is a directory", "parent is a file",
                                  "entry is a FIFO"])
def test_cache_problems_are_one_line_and_exit_5(tmp_path, case):
    root = tmp_path / "cache"
    key = "d" * 24
    entry = root / "info" / f"{key}.json"
    if case == "cache_dir is a file":
        root.write_text("not a cache")
        expected = f"cache_dir {root} is a file, not a directory (config field 'cache_dir')"
    elif case == "entry is a directory":
        entry.mkdir(parents=True)
        expected = f"cache entry {entry} is a directory, not a file; delete it (anything in the cache can be deleted)"
    elif case == "parent is a file":
        root.mkdir()
        (root / "info").write_text("x")
        expected = (f"cache entry {root / 'info'} is a file where the cache needs a directory; delete it "
                    "(anything in the cache can be deleted)")
    else:
        entry.parent.mkdir(parents=True)
        os.mkfifo(entry)
        expected = f"cache entry {entry} is not a regular file; delete it (anything in the cache can be deleted)"
    cache = Cache(root)
    for action in (lambda: cache.get_json("info", key), lambda: cache.put_json("info", key, {"a": 1})):
        with pytest.raises(OutputError) as caught:
            action()
        assert str(caught.value) == expected and caught.value.exit_code == errors.EXIT_OUTPUT == 5
    if case != "cache_dir is a file":
        assert root.is_dir()  # nothing of the user's was removed or replaced


# -- loading: the weights must fill the model config.json describes ----------------------------------
MISMATCHES = [
    ("base", {"num_hidden_layers": 4},
     "tensor 'encoder.layer.2.attention.self.query.weight' is not in the weights (32 missing tensors would be random)"),
    ("base", {"num_hidden_layers": 1},
     "tensor 'encoder.layer.1.attention.output.LayerNorm.bias' in the weights has no place in the model "
     "(16 such tensors)"),
    ("base", {"intermediate_size": 96},
     ("tensor 'encoder.layer.0.intermediate.dense.weight' has shape [64, 32] in the weights but [96, 32] in the model "
     "(6 such tensors)")),
    ("base", {"vocab_size": 200},
     (f"tensor 'embeddings.word_embeddings.weight' has shape [{len(TINY_WORDS)}, 32] in the weights but [200, 32] in "
     "the model (1 such tensors)")),
    # a checkpoint saved with its head: the encoder's weights carry the "bert." prefix
    ("classifier", {"num_hidden_layers": 1},
     ("tensor 'bert.encoder.layer.1.attention.output.LayerNorm.bias' in the weights has no place in the model "
     "(16 such tensors)")),
    ("classifier", {"num_hidden_layers": 3},
     "tensor 'encoder.layer.2.attention.self.query.weight' is not in the weights (16 missing tensors would be random)"),
]


@pytest.mark.parametrize(("source", "config", "message"), MISMATCHES)
def test_weights_that_do_not_match_the_config_are_refused(models, source, config, message):
    path = variant(models, source, f"{source}-" + "-".join(f"{k}{v}" for k, v in config.items()), **config)
    with pytest.raises(ModelError) as caught:
        model.load(path, "cpu")
    assert str(caught.value).startswith(f"model directory {path}: the weights do not match config.json: {message}; ")
    assert caught.value.exit_code == errors.EXIT_MODEL == 3
    with pytest.raises(ModelError, match="the weights do not match config.json"):  # the ablation's loading too
        load_task("similarity", path, sim_file(models / "pairs.tsv", PAIRS))


@pytest.mark.parametrize("source", ["classifier", "mlm"])
def test_an_encoder_saved_with_a_task_head_loads_as_its_base_model(models, source):
    """classifier.* / cls.predictions.* are heads on top of the encoder (BertModel has none), and an
    MLM checkpoint has no pooler (reportgen never reads it): both are fine, and the encoder is the saved one."""
    from safetensors.torch import load_file

    net, _ = model.load(models / source, "cpu")
    saved = load_file(models / source / "model.safetensors")
    for name, tensor in net.state_dict().items():
        if not name.startswith("pooler.") and f"bert.{name}" in saved:
            assert (tensor == saved[f"bert.{name}"]).all(), name
    assert net.config.num_hidden_layers == 2


@pytest.mark.slow
def test_the_embedded_model_loads_without_complaint(embedded_model_path):
    """The sentence-transformers layout (model.safetensors of a BertModel beside 1_Pooling/)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net, tokenizer = model.load(embedded_model_path, "cpu")
    assert net.config.num_hidden_layers == 6 and tokenizer.is_fast


def test_task_models_tell_a_missing_head_from_a_mismatch(models, tmp_path):
    labels = tmp_path / "labels.tsv"
    labels.write_text("text\tlabel\nthe cat sat\t0\nthe dog sat\t1\n", encoding="utf-8")
    texts = tmp_path / "texts.tsv"
    texts.write_text("text\nthe cat sat on the mat\n", encoding="utf-8")
    with pytest.raises(ModelError, match=r"has no trained classification head \(missing classifier\.bias\)"):
        load_task("classification", models / "mlm", labels)
    with pytest.raises(ModelError, match=r"has no trained masked-LM head \(missing cls\.predictions"):
        load_task("mlm", models / "classifier", texts)
    deeper = variant(models, "classifier", "classifier-deeper", num_hidden_layers=3)
    missing = "tensor 'bert.encoder.layer.2.attention.self.query.weight' is not in the weights"
    with pytest.raises(ModelError, match=missing):
        load_task("classification", deeper, labels)
    assert load_task("classification", models / "classifier", labels).n_examples == 2
    assert load_task("mlm", models / "mlm", texts).n_examples == 1


def test_zero_layers_is_one_line(models):
    path = variant(models, "base", "zero-layers", num_hidden_layers=0)
    with pytest.raises(ModelError) as caught:
        model.resolve(str(path))
    assert str(caught.value) == f"{path / 'config.json'}: num_hidden_layers is 0; an encoder needs at least 1"


NOT_JSON = "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
TOKENIZER_FAILURES = [
    ("tokenizer.json", b"{not json", f"tokenizer.json: {NOT_JSON}, so the tokenizer cannot be loaded"),
    ("tokenizer.json", b"\xff\xfe broken", "tokenizer.json: not UTF-8 text, so the tokenizer cannot be loaded"),
    ("tokenizer.json", b'{"version": "1.0"}',
     "tokenizer.json: the tokenizer cannot be loaded (KeyError: 'added_tokens')"),
    ("tokenizer_config.json", b"{", f"tokenizer_config.json: {NOT_JSON}, so the tokenizer cannot be loaded"),
]


@pytest.mark.parametrize(("file", "content", "message"), TOKENIZER_FAILURES)
def test_tokenizer_failures_name_the_file_and_the_error(models, tmp_path, file, content, message):
    path = shutil.copytree(models / "base", tmp_path / "model")
    (path / file).write_bytes(content)
    pairs = sim_file(tmp_path / "p.tsv", PAIRS)
    for load in (lambda: model.load(path, "cpu"), lambda: load_task("similarity", path, pairs)):
        with pytest.raises(ModelError) as caught:
            load()
        assert str(caught.value) == f"{path}/{message}"


# -- an undefined metric is not a significant change ------------------------------------------------
UNDEFINED = {
    "all gold scores are equal": ("similarity", "base", [(a, b, 3.0) for a, b, _ in PAIRS]),
    "only one example": ("similarity", "base", PAIRS[:1]),
    "no token to mask": ("mlm", "mlm", ["\u200b", "\u200b\u200b"]),  # nothing but [CLS] and [SEP]
}


@pytest.mark.parametrize("reason", list(UNDEFINED))
def test_an_undefined_metric_runs_no_test_and_marks_nothing(models, tmp_path, reason):
    kind, source, rows = UNDEFINED[reason]
    if kind == "similarity":
        data = sim_file(tmp_path / "data.tsv", rows)
    else:
        data = tmp_path / "data.tsv"
        data.write_text("text\n" + "".join(f"{t}\n" for t in rows), encoding="utf-8")
    metric = "spearman" if kind == "similarity" else "accuracy"
    with pytest.warns(UserWarning) as caught:
        report = run_ablations(models / source, settings(data, task=kind), device="cpu", cache_dir=tmp_path / "c",
                               fingerprint="fp")
    said = [str(w.message) for w in caught if str(w.message).startswith("ablation:")]
    assert said == [(f"ablation: {metric} is undefined on the task data ({reason}); no significance test was run "
                     "and no head or layer is marked significant")]
    assert report.task.undefined == reason
    assert report.baseline.value is None
    assert report.baseline.ci[metric] == [None, None]
    for experiment in ("single_heads", "whole_layers"):
        tests = getattr(report, experiment)
        assert not np.array(tests.significant).any(), experiment
        assert set(np.ravel(np.array(tests.p_value, dtype=object))) == {None}
        assert set(np.ravel(np.array(tests.p_adjusted, dtype=object))) == {None}
        assert tests.test == f"no test: {metric} is undefined on the task data ({reason})"


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_a_defined_metric_is_still_tested(models, tmp_path):
    report = run_ablations(models / "base", settings(sim_file(tmp_path / "p.tsv", PAIRS)), device="cpu",
                           cache_dir=tmp_path / "c", fingerprint="fp")
    assert report.task.undefined is None
    assert report.single_heads.test.startswith("paired permutation test")
    assert all(p is not None for row in report.single_heads.p_value for p in row)


def test_an_undefined_change_is_not_a_test(models, tmp_path):
    """A mask whose metric is undefined (every prediction equal) gets p NaN, not the smallest p-value,
    and does not count in the correction."""
    task = load_task("similarity", models / "base", sim_file(tmp_path / "p.tsv", PAIRS))
    base = np.linspace(0, 1, task.n_examples)[:, None]
    constant = np.full_like(base, 0.5)
    assert np.isnan(paired_permutation_p(task, base, constant, 200, 0))
    assert task.undefined_reason(constant) == "the model gives every pair the same similarity"
    assert task.undefined_reason(base) is None
    p = adjust([0.01, np.nan, 0.02], "holm")
    assert p[0] == pytest.approx(0.02) and np.isnan(p[1]) and p[2] == pytest.approx(0.02)
    assert adjust([0.01, np.nan], "bonferroni")[0] == pytest.approx(0.01)


# -- the model's name -------------------------------------------------------------------------------
def test_renaming_the_model_directory_renames_it_on_the_site(models, tmp_path):
    first = shutil.copytree(models / "base", tmp_path / "first-name")
    config = "model: ./{}\ndevice: cpu\nmax_length: 128\nexamples: [{{text: the cat sat on the mat.}}]\n"
    stage = run_model(load_config(write_config(tmp_path, config.format("first-name"))))
    assert stage.info.name == "first-name" and stage.computed == 1
    first.rename(tmp_path / "second-name")
    stage = run_model(load_config(write_config(tmp_path, config.format("second-name"))))
    assert stage.computed == 0  # the same files: everything from the cache
    assert stage.info.name == "second-name" and stage.info.path == str((tmp_path / "second-name").resolve())


# over 60 s on a loaded machine: `reportgen build` subprocesses, before and after the cache entries are damaged
# -- end to end -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_damaged_entry_never_reaches_the_published_site(models, tmp_path):
    sim_file(tmp_path / "pairs.tsv", PAIRS)
    write_config(tmp_path, f"""\
model: {models / 'base'}
device: cpu
examples: [{{text: the cat sat on the mat.}}]
patterns: {{similarity: false}}
ablation:
  data: pairs.tsv
  seeds: [0]
  fractions: [0.0]
  bootstrap_samples: 100
  permutations: 100
  experiments: {{single_heads: false, random_fraction: false, layer_halves: false, importance: false}}
""")

    def build():
        done = subprocess.run([sys.executable, "-m", "reportgen", "build", "--reproducible"], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": pythonpath(), "NO_COLOR": "1"}, capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
        return check_report(tmp_path / "site")["ablation"], done.stderr

    clean, _ = build()
    entries = list((tmp_path / ".reportgen-cache" / "ablation").rglob("mask-*.npy"))
    assert len(entries) == 3  # the baseline, and layer 0 and layer 1 masked
    records = list((tmp_path / ".reportgen-cache" / "ablation").rglob("record-*.json"))
    assert len(records) == 1  # the whole ablation record, which a rebuild reads instead of the masks
    for entry in [*entries, *records]:
        flip_bit(entry, len(entry.read_bytes()) - 1)
    rebuilt, stderr = build()
    assert rebuilt == clean
    damaged = [line for line in stderr.splitlines() if "is damaged (checksum mismatch); recomputing it" in line]
    # one line for them all (issue 27: a damaged cache printed one warning per entry), naming the first
    assert len(damaged) == 1 and damaged[0].startswith("warning: 4 cache entries are damaged and were "
                                                       "recomputed; the first: cache entry ")
    assert damaged[0].split()[13] in {str(entry) for entry in [*entries, *records]}
