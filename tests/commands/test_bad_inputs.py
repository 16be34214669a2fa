"""The bad-input matrix (issue 7, part 1): every bad input gets one line and a documented exit code.

Each case runs `reportgen build` in a project that already holds a good `site/` (built by a real
`python -m reportgen build` subprocess; the cases by helpers.WarmCli, a fork of a process that imported
reportgen once: a new process each, without the seconds of imports), and asserts: exactly one `error:`
line on stderr that names the problem (the whole line is compared, with the project directory
written as `<dir>`), no traceback, the exit code of `reportgen/errors.py` for that kind of mistake,
and `site/` byte for byte as it was. A few inputs are not errors (a text longer than the model takes, pickle weights the
config allows): those build, with the warning asserted, into another directory.

The docs' "Errors and exit codes" table (docs/pages/reference/errors.md) is rendered from CASES by
`render_table()`; a test checks that the page holds exactly that table. Regenerate it after changing a case:

    python -m tests.commands.test_bad_inputs            # print the table
    python -m tests.commands.test_bad_inputs --write    # rewrite the section of errors.md
    REGENERATE=1 python -m pytest tests/commands/test_bad_inputs.py -k docs_table   # the same, from pytest

Models are tiny random ones built here (never downloaded; HF_HUB_OFFLINE=1 for every run).
Not writable as root: chmod does not stop root, so the cases use an output path under a file
(the parent is not a directory) and one under /proc/sys, which the kernel refuses to root too
(skipped where /proc/sys is writable).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from reportgen import errors
from tests.helpers import (
    DOCS,
    Case,
    WarmCli,
    check_report,
    doc_section,
    is_progress,
    pythonpath,
    symlink,
    tree,
    write_doc_section,
)

ERRORS_PAGE = DOCS / "reference" / "errors.md"
START, END = "<!-- bad-inputs:start -->", "<!-- bad-inputs:end -->"

# The families the model check names when it refuses one (reportgen/model/loading.py SUPPORTED_ENCODERS).
SUPPORTED = ("BERT, RoBERTa, XLM-RoBERTa, CamemBERT, RoBERTa-PreLayerNorm, XLM-RoBERTa-XL, ELECTRA, ALBERT, "
             "DistilBERT, DeBERTa, DeBERTa-v2, ERNIE, Megatron-BERT, MPNet, ModernBERT")
DECODERS = "GPT-2, Llama, Qwen2, Mistral, Gemma"  # and the decoders (loading.VIEWABLE_DECODERS)
ENCODER_DECODERS = "BART, T5, Marian"  # and the encoder-decoders (loading.SUPPORTED_ENCODER_DECODERS)
BASE: dict[str, Any] = {
    "title": "Bad inputs",
    "model": "models/tiny",
    "device": "cpu",
    "max_length": 128,
    "examples": [{"text": "the cat sat on the mat."},
                 {"text": "i bought fresh strawberries.", "pair": "the dog sat on the mat."}],
    "patterns": {"similarity": False},
    "ablation": {"enabled": False},
}
# A quick ablation: baseline only, few examples, the smallest statistics the schema allows.
ABLATION: dict[str, Any] = {
    "enabled": True, "limit": 8, "seeds": [0], "fractions": [0.0], "bootstrap_samples": 100, "permutations": 100,
    "experiments": {"baseline": True, "single_heads": False, "random_fraction": False, "layer_halves": False,
                    "whole_layers": False, "importance": False},
}
SHORT_EXAMPLES = [{"text": "i bought fresh strawberries."}]  # one example keeps the builds that succeed quick
LONG_TEXT = " ".join(["the cat sat on the mat."] * 8)  # 58 tokens; models/short takes 32


def directory(name: str) -> Callable[[Path], AbstractContextManager]:
    """A Case setup: an empty directory `name` in the project."""
    @contextmanager
    def make(project: Path):
        (project / name).mkdir()
        yield
        (project / name).rmdir()
    return make


def ablation(**settings) -> dict:
    return {"ablation": {**ABLATION, **settings}}


SIM_HEADER = "sentence1\tsentence2\tscore\n"
SIM_ROWS = "the cat sat\tthe dog sat\t4.0\ni went to the store\ta red car\t0.5\n"
CLS_MODEL = {"model": "models/classifier"}
SIM_CSV = "sentence1,sentence2,score\n"
LONG_CELL = "the cat sat on the mat. " * 8400  # 201,600 characters: over csv's default field limit (131,072)


def not_a_file(name: str, kind: str) -> Callable[[Path], AbstractContextManager]:
    """A Case.setup that makes the project path `name` a FIFO or a directory for the run, removed after."""
    @contextmanager
    def setup(project: Path) -> Iterator[None]:
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.mkdir()
        try:
            yield
        finally:
            os.unlink(path) if kind == "fifo" else os.rmdir(path)

    return setup


def model_variant(name: str, config: dict | None = None, files: dict[str, str] | None = None
                  ) -> Callable[[Path], AbstractContextManager]:
    """A Case.setup: models/tiny copied to models/NAME with config.json keys and files replaced, removed after."""
    @contextmanager
    def setup(project: Path) -> Iterator[None]:
        target = shutil.copytree(project / "models" / "tiny", project / "models" / name)
        cfg = json.loads((target / "config.json").read_text(encoding="utf-8"))
        (target / "config.json").write_text(json.dumps({**cfg, **(config or {})}), encoding="utf-8")
        for file, text in (files or {}).items():
            (target / file).write_text(text, encoding="utf-8")
        try:
            yield
        finally:
            shutil.rmtree(target)
    return setup


def config_json_as(name: str, kind: str) -> Callable[[Path], AbstractContextManager]:
    """A Case.setup: models/tiny copied to models/NAME with its config.json made a FIFO, a symlink to /dev/zero,
    a symlink to itself or a directory (`kind`: fifo, dev-zero, loop, dir), removed after."""
    @contextmanager
    def setup(project: Path) -> Iterator[None]:
        target = shutil.copytree(project / "models" / "tiny", project / "models" / name)
        config = target / "config.json"
        config.unlink()
        {"fifo": lambda: os.mkfifo(config), "dev-zero": lambda: config.symlink_to("/dev/zero"),
         "loop": lambda: config.symlink_to("config.json"), "dir": config.mkdir}[kind]()
        try:
            yield
        finally:
            shutil.rmtree(target)
    return setup


def read_only_dir(name: str) -> Callable[[Path], AbstractContextManager]:
    """A Case.setup: an empty directory nobody may write in, root included (chattr +i makes it
    immutable; chmod does not stop root); skipped where neither works. Removed after."""
    @contextmanager
    def setup(project: Path) -> Iterator[None]:
        path = project / name
        path.mkdir()
        chattr = shutil.which("chattr")
        if chattr:
            subprocess.run([chattr, "+i", str(path)], capture_output=True, check=False)
        if os.geteuid() != 0:
            path.chmod(0o555)
        try:
            try:
                (path / "probe").mkdir()
            except OSError:
                pass
            else:
                (path / "probe").rmdir()
                pytest.skip("no way to make a directory read-only here (chattr +i failed)")
            yield
        finally:
            if chattr:
                subprocess.run([chattr, "-i", str(path)], capture_output=True, check=False)
            path.chmod(0o755)
            shutil.rmtree(path)
    return setup


def cache_entry_directory(cache: str) -> Callable[[Path], AbstractContextManager]:
    """A Case.setup: in cache directory CACHE, a directory where the embedded model's run of the
    first BASE example is stored (the path reportgen computes for it). Removed after."""
    @contextmanager
    def setup(project: Path) -> Iterator[None]:
        from reportgen.config import ExampleSpec
        from reportgen.model import loading
        from reportgen.pipeline.model_stage import run_key

        _, path = loading.resolve("default")
        max_length, _ = loading.clamp_max_length(path, BASE["max_length"])
        key = run_key(loading.fingerprint(loading.file_hashes(path)), ExampleSpec(text=BASE["examples"][0]["text"]),
                      max_length)
        (project / cache / "runs" / f"{key}.npz").mkdir(parents=True)
        try:
            yield
        finally:
            shutil.rmtree(project / cache)
    return setup


CASES: list[Case] = [
    # -- the config file (exit 2) ---------------------------------------------------------------
    Case("config-missing", "`--config` names a file that does not exist", None, errors.EXIT_CONFIG,
         "config-missing.yaml: config file not found"),
    Case("config-directory", "`--config` names a directory", None, errors.EXIT_CONFIG,
         "config-directory.yaml: is a directory, not a config file", setup=directory("config-directory.yaml")),
    Case("config-symlink-loop", "`--config` names a symlink loop", None, errors.EXIT_CONFIG,
         "config-symlink-loop.yaml: the config file is a symlink loop",
         setup=symlink("config-symlink-loop.yaml", "config-symlink-loop.yaml")),
    Case("config-dev-null", "`--config /dev/null`", None, errors.EXIT_CONFIG,
         "/dev/null: is not a regular file but a character device; reportgen reads data only from regular files",
         argv=["build", "--config", "/dev/null"]),
    Case("config-empty", "empty YAML file", "", errors.EXIT_CONFIG,
         "config-empty.yaml: the file is empty; write at least one key, e.g. 'title: My report'"),
    Case("config-invalid-yaml", "invalid YAML (an unclosed list)", "title: Bad\nexamples: [the cat\nmodel: x\n",
         errors.EXIT_CONFIG,
         "config-invalid-yaml.yaml: invalid YAML at line 3, column 6: expected ',' or ']', but got ':'"),
    Case("config-not-utf8", "config file not UTF-8 (Latin-1 bytes)", "title: Caf\u00e9\n".encode("latin-1"),
         errors.EXIT_CONFIG, "config-not-utf8.yaml: not a UTF-8 text file"),
    Case("config-not-mapping", "YAML that is a list, not a mapping", "- title: Bad\n", errors.EXIT_CONFIG,
         "config-not-mapping.yaml: expected a mapping of keys to values at the top level"),
    Case("config-duplicate-section",
         "a section written twice (`ablation: {enabled: false}` ... `ablation: {limit: 20}`)",
         "ablation: {enabled: false}\nexamples: [{text: the cat sat.}]\nablation: {limit: 20}\n", errors.EXIT_CONFIG,
         "config-duplicate-section.yaml: key 'ablation' is written twice in one mapping, at lines 1 and 3; YAML "
         "would keep only the second: merge them into one"),
    Case("config-duplicate-key", "a key written twice inside a section",
         "ablation:\n  enabled: false\n  limit: 3\n  limit: 4\n", errors.EXIT_CONFIG,
         "config-duplicate-key.yaml: key 'limit' is written twice in one mapping, at lines 3 and 4; YAML would "
         "keep only the second: merge them into one"),
    Case("config-unknown-key", "unknown key (a typo)", {"titel": "Bad"}, errors.EXIT_CONFIG,
         "config-unknown-key.yaml: unknown key 'titel'"),
    Case("config-unknown-nested-key", "unknown key inside a section", {"ablation": {"enabeld": True}},
         errors.EXIT_CONFIG, "config-unknown-nested-key.yaml: unknown key 'ablation.enabeld'"),
    Case("config-wrong-type", "wrong type (text for a number)", {"max_length": "long"}, errors.EXIT_CONFIG,
         "config-wrong-type.yaml: field 'max_length': Input should be a valid integer, "
         "unable to parse string as an integer"),
    Case("config-wrong-type-bool", "wrong type (text for a yes/no)", {"allow_pickle": "maybe"}, errors.EXIT_CONFIG,
         "config-wrong-type-bool.yaml: field 'allow_pickle': Input should be a valid boolean, "
         "unable to interpret input"),
    Case("example-empty", "an example with an empty text", {"examples": [{"text": ""}]}, errors.EXIT_CONFIG,
         "example-empty.yaml: field 'examples.0.text': String should have at least 1 character"),
    Case("example-blank", "an example whose text is only spaces", {"examples": [{"text": "   "}]},
         errors.EXIT_CONFIG, "example-blank.yaml: field 'examples.0.text': Value error, "
         "the text is blank (only whitespace); give some words or remove the example"),
    Case("task-without-data", "an experiment whose task has no data (classification on the builtin set)",
         ablation(task="classification"), errors.EXIT_CONFIG,
         "task-without-data.yaml: field 'ablation.data': the builtin demo set is a similarity task; "
         "task 'classification' needs a data file (or set ablation.enabled: false)"),
    Case("task-unknown", "an ablation task reportgen does not have (`task: causal`)", ablation(task="causal"),
         errors.EXIT_CONFIG, "task-unknown.yaml: field 'ablation.task': Input should be 'similarity', "
         "'classification', 'mlm', 'causal_lm' or 'seq2seq'"),
    Case("task-causal-lm-on-encoder", "`task: causal_lm` on an encoder (the tiny BERT)",
         ablation(task="causal_lm", data="data/texts.txt"), errors.EXIT_MODEL,
         "model directory <dir>/models/tiny: model type 'bert' is an encoder, which sees the whole text; task "
         "'causal_lm' predicts each token from the ones before it and needs a decoder (causal LM); for a masked-LM "
         "encoder use task 'mlm'", files={"data/texts.txt": "the cat sat on the mat.\na dog was in the garden.\n"}),
    Case("config-nul", "a NUL character in a config string", {"ablation": {"data": "data/a\x00b.tsv"}},
         errors.EXIT_CONFIG, "config-nul.yaml: field 'ablation.data': Value error, the text holds a NUL "
         "character (\\x00)"),
    Case("config-column-negative", "a negative column index", ablation(columns={"text": -1}), errors.EXIT_CONFIG,
         "config-column-negative.yaml: field 'ablation.columns': Value error, column indexes count from 0; "
         "text: -1 is not one"),
    Case("config-ray-address", "`ablation.ray` not an address Ray takes", ablation(ray="ray:/head:10001"),
         errors.EXIT_CONFIG, "config-ray-address.yaml: field 'ablation.ray': Value error, expected null, \"local\", "
         "\"auto\" or \"ray://host:port\" (port 1 to 65535), got 'ray:/head:10001'"),
    Case("config-title-surrogates", 'a title with a lone surrogate pair escape in YAML (`"Smile \\ud83d\\ude42"`)',
         'title: "Smile \\ud83d\\ude42"\n', errors.EXIT_CONFIG,
         "config-title-surrogates.yaml: field 'title': Value error, the text holds a lone surrogate (\\ud83d), "
         "which is not a character; write the character itself or its 8-digit escape (e.g. \\U0001F642)"),
    Case("config-seed-negative", "`ablation.seeds: [-1]`", ablation(seeds=[-1]), errors.EXIT_CONFIG,
         "config-seed-negative.yaml: field 'ablation.seeds.0': Input should be greater than or equal to 0"),
    Case("config-bootstrap-huge", "`ablation.bootstrap_samples: 100000000000000` (runs for days)",
         ablation(bootstrap_samples=100_000_000_000_000), errors.EXIT_CONFIG,
         "config-bootstrap-huge.yaml: field 'ablation.bootstrap_samples': Input should be less than or equal to "
         "1000000"),
    Case("config-permutations-huge", "`ablation.permutations: 10000000000`",
         ablation(permutations=10_000_000_000), errors.EXIT_CONFIG,
         "config-permutations-huge.yaml: field 'ablation.permutations': Input should be less than or equal to "
         "1000000"),
    Case("config-batch-below-text", "`ablation.batch_tokens: 64` below `ablation.max_length` (128)",
         ablation(batch_tokens=64, max_length=128), errors.EXIT_CONFIG,
         "config-batch-below-text.yaml: field 'ablation.batch_tokens': Value error, 64 tokens per pass cannot hold "
         "one text of ablation.max_length (128) tokens; raise batch_tokens or lower max_length"),
    Case("config-float16-cpu", "`ablation.precision: float16` with `device: cpu` (float16 is CUDA only)",
         ablation(precision="float16"), errors.EXIT_CONFIG,
         "config-float16-cpu.yaml: field 'ablation.precision': float16 runs only on a CUDA device and the device is "
         "'cpu'; use bfloat16 (which a CPU runs too) or float32"),
    Case("site-url-script", "`site_url` that breaks out of an attribute",
         {"site_url": 'https://example.com/x"><img src=x onerror=alert(1)>'}, errors.EXIT_CONFIG,
         "site-url-script.yaml: field 'site_url': Value error, the URL contains '\"'; quotes, angle brackets, "
         "braces, backslashes and whitespace are not allowed (percent-encode them)"),
    Case("site-url-javascript", "`site_url` a `javascript:` URL", {"site_url": "javascript:alert(1)"},
         errors.EXIT_CONFIG, "site-url-javascript.yaml: field 'site_url': Value error, expected the site's public "
         "address as an absolute http:// or https:// URL, e.g. https://user.github.io/project/"),
    Case("model-javascript-url", "`model` a `javascript:` URL", {"model": "javascript:alert(1)"},
         errors.EXIT_CONFIG, "model-javascript-url.yaml: field 'model': Value error, a javascript:, data: or "
         "vbscript: URL is not a path, file or model name"),
    # -- the model (exit 3) ------------------------------------------------------------------------
    Case("model-missing", "model path that does not exist", {"model": "./models/nope"}, errors.EXIT_MODEL,
         "model path <dir>/models/nope does not exist (config field 'model')"),
    Case("model-symlink-loop", "`model: ./loop`, a symlink to itself", {"model": "./loop"}, errors.EXIT_MODEL,
         "model path <dir>/loop is a symlink loop (config field 'model')", setup=symlink("loop", "loop")),
    Case("compare-model-symlink-loop", "`compare.model: ./loop`, a symlink to itself",
         {"compare": {"model": "./loop"}}, errors.EXIT_MODEL,
         "model path <dir>/loop is a symlink loop (config field 'compare.model')", setup=symlink("loop", "loop")),
    Case("model-is-file", "model path that is a file", {"model": "./notes.txt"}, errors.EXIT_MODEL,
         "model path <dir>/notes.txt is a file, not a model directory (config field 'model')",
         files={"notes.txt": "not a model\n"}),
    Case("model-no-config", "model directory without config.json", {"model": "./models/empty"}, errors.EXIT_MODEL,
         "model directory <dir>/models/empty has no config.json; is it a transformers model? (config field 'model')"),
    Case("model-config-fifo", "model config.json that is a FIFO (named pipe)", {"model": "./models/cfg-fifo"},
         errors.EXIT_MODEL, "<dir>/models/cfg-fifo/config.json: exists but is a named pipe (FIFO), not a regular "
         "file; a model's config.json must be one", setup=config_json_as("cfg-fifo", "fifo")),
    Case("model-config-dev-zero", "model config.json a symlink to /dev/zero", {"model": "./models/cfg-zero"},
         errors.EXIT_MODEL, "<dir>/models/cfg-zero/config.json: exists but is a character device, not a regular "
         "file; a model's config.json must be one", setup=config_json_as("cfg-zero", "dev-zero")),
    Case("model-config-self-link", "model config.json a symlink to itself", {"model": "./models/cfg-loop"},
         errors.EXIT_MODEL, "<dir>/models/cfg-loop/config.json: is a symlink loop; a model's config.json must be a "
         "regular file", setup=config_json_as("cfg-loop", "loop")),
    Case("model-config-directory", "model config.json that is a directory", {"model": "./models/cfg-dir"},
         errors.EXIT_MODEL, "<dir>/models/cfg-dir/config.json: exists but is a directory, not a regular file; a "
         "model's config.json must be one", setup=config_json_as("cfg-dir", "dir")),
    Case("model-config-not-json", "model config.json that is not JSON", {"model": "./models/broken"},
         errors.EXIT_MODEL, "<dir>/models/broken/config.json: not valid JSON "
         "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    Case("model-hub-offline", "a Hub id with no network (`HF_HUB_OFFLINE=1`, not in the cache)",
         {"model": "reportgen-tests/no-such-model"}, errors.EXIT_MODEL,
         "model 'reportgen-tests/no-such-model' is not in the local cache and HF_HUB_OFFLINE is set: offline; "
         "download it first or give a local directory"),
    Case("model-state-space", "a model with no attention heads to show: a state-space model (Mamba)",
         {"model": "./models/mamba"}, errors.EXIT_MODEL,
         "model directory <dir>/models/mamba: model type 'mamba' is a decoder (causal LM) reportgen does not "
         f"support; reportgen analyses the self-attention of these encoders: {SUPPORTED}; of these decoders: "
         f"{DECODERS}; and the three attention groups of these encoder-decoders: {ENCODER_DECODERS}",
         setup=model_variant("mamba", {"model_type": "mamba"})),
    Case("model-encoder-decoder", "an encoder-decoder outside the tables (Pegasus)", {"model": "./models/pegasus"},
         errors.EXIT_MODEL, "model directory <dir>/models/pegasus: model type 'pegasus' is an encoder-decoder "
         f"reportgen does not support; reportgen analyses the self-attention of these encoders: {SUPPORTED}; of "
         f"these decoders: {DECODERS}; and the three attention groups of these encoder-decoders: {ENCODER_DECODERS}",
         setup=model_variant("pegasus", {"model_type": "pegasus", "is_encoder_decoder": True})),
    Case("model-unsupported-encoder", "an encoder transformers knows but reportgen does not support (Funnel)",
         {"model": "./models/funnel"}, errors.EXIT_MODEL,
         "model directory <dir>/models/funnel: model type 'funnel' is not an architecture reportgen supports; "
         f"reportgen analyses the self-attention of these encoders: {SUPPORTED}; of these decoders: {DECODERS}; and "
         f"the three attention groups of these encoder-decoders: {ENCODER_DECODERS}",
         setup=model_variant("funnel", {"model_type": "funnel"})),
    Case("model-talking-heads", "a DeBERTa whose heads mix their scores (`talking_head: true`)",
         {"model": "./models/talking"}, errors.EXIT_MODEL,
         "<dir>/models/talking/config.json: DeBERTa with talking_head mixes the heads' scores, so a head's "
         "attention is not its own", setup=model_variant("talking", {"model_type": "deberta", "talking_head": True})),
    Case("model-uniform-local-window", "`ablation.method: uniform` on a model with local (sliding-window) layers",
         {"model": "./models/windowed", **ablation(method="uniform")}, errors.EXIT_MODEL,
         "config field 'ablation.method': 'uniform' spreads a head over every key, but windowed's local layers "
         "see only a window of keys; use method 'zero'",
         setup=model_variant("windowed", {"layer_types": ["full_attention", "sliding_attention"]})),
    Case("model-unknown-type", "a model type transformers does not know", {"model": "./models/alien"},
         errors.EXIT_MODEL, "<dir>/models/alien/config.json: model_type 'alien-net' is not a model type "
         "transformers knows (config field 'model')"),
    Case("model-no-type", "config.json without `model_type`", {"model": "./models/no-type"}, errors.EXIT_MODEL,
         "<dir>/models/no-type/config.json: has no model_type, so the architecture is unknown; a transformers "
         'model saves it (e.g. "model_type": "bert")'),
    Case("model-empty-vocab", "an empty `vocab.txt` and no tokenizer.json", {"model": "./models/empty-vocab"},
         errors.EXIT_MODEL, "<dir>/models/empty-vocab/vocab.txt: the tokenizer cannot be loaded (Exception: "
         "WordPiece error: Missing [UNK] token from the vocabulary)"),
    Case("model-no-tokenizer", "model directory without a tokenizer", {"model": "./models/no-tokenizer"},
         errors.EXIT_MODEL, "model directory <dir>/models/no-tokenizer has no tokenizer (none of tokenizer.json, "
         "vocab.txt, vocab.json, ...); save the tokenizer into the model directory"),
    Case("model-remote-code", "a `trust_remote_code` model (auto_map, its own .py) and `trust_remote_code: false`",
         {"model": "./models/remote-code"}, errors.EXIT_MODEL,
         "model directory <dir>/models/remote-code: config.json has an auto_map (custom model code); reportgen "
         "does not run a model's own code unless the config sets trust_remote_code: true"),
    Case("model-pickle", "pickle-only weights (pytorch_model.bin) and `allow_pickle: false`",
         {"model": "./models/pickle"}, errors.EXIT_MODEL,
         "model directory <dir>/models/pickle: weights only as pickle (pytorch_model.bin), which can run code "
         "when loaded; convert them to safetensors, or set allow_pickle: true in the config"),
    Case("model-weights-missing", "config.json that does not match the weights (`num_hidden_layers: 8` on 2 layers)",
         {"model": "./models/eight-layers"}, errors.EXIT_MODEL,
         "model directory <dir>/models/eight-layers: the weights do not match config.json: tensor "
         "'encoder.layer.2.attention.self.query.weight' is not in the weights (96 missing tensors would be random); "
         "check num_hidden_layers and the sizes in config.json",
         setup=model_variant("eight-layers", {"num_hidden_layers": 8})),
    Case("model-weights-unexpected", "config.json with fewer layers than the weights (`num_hidden_layers: 1` on 2)",
         {"model": "./models/one-layer"}, errors.EXIT_MODEL,
         "model directory <dir>/models/one-layer: the weights do not match config.json: tensor "
         "'encoder.layer.1.attention.output.LayerNorm.bias' in the weights has no place in the model "
         "(16 such tensors); check num_hidden_layers and the sizes in config.json",
         setup=model_variant("one-layer", {"num_hidden_layers": 1})),
    Case("model-weights-shape", "config.json with another size than the weights (`intermediate_size: 128` on 64)",
         {"model": "./models/wide"}, errors.EXIT_MODEL,
         "model directory <dir>/models/wide: the weights do not match config.json: tensor "
         "'encoder.layer.0.intermediate.dense.weight' has shape [64, 32] in the weights but [128, 32] in the model "
         "(6 such tensors); check the sizes in config.json",
         setup=model_variant("wide", {"intermediate_size": 128})),
    Case("model-zero-layers", "`num_hidden_layers: 0` in config.json", {"model": "./models/zero-layers"},
         errors.EXIT_MODEL, "<dir>/models/zero-layers/config.json: num_hidden_layers is 0; an encoder needs at least 1",
         setup=model_variant("zero-layers", {"num_hidden_layers": 0})),
    Case("model-tokenizer-corrupt", "a corrupt tokenizer.json (not JSON)", {"model": "./models/bad-tokenizer"},
         errors.EXIT_MODEL, "<dir>/models/bad-tokenizer/tokenizer.json: not valid JSON (Expecting property name "
         "enclosed in double quotes: line 1 column 2 (char 1)), so the tokenizer cannot be loaded",
         setup=model_variant("bad-tokenizer", files={"tokenizer.json": "{not json"})),
    Case("model-tokenizer-broken", "a tokenizer.json that is JSON but not a tokenizer",
         {"model": "./models/odd-tokenizer"}, errors.EXIT_MODEL,
         "<dir>/models/odd-tokenizer/tokenizer.json: the tokenizer cannot be loaded "
         "(KeyError: 'added_tokens')",
         setup=model_variant("odd-tokenizer", files={"tokenizer.json": '{"version": "1.0"}'})),
    Case("ray-unreachable", "`ablation.ray` a Ray cluster nothing answers at (`ray://127.0.0.1:9`)",
         ablation(ray="ray://127.0.0.1:9"), errors.EXIT_MODEL,
         "Ray cluster ray://127.0.0.1:9 cannot be reached (Connection refused); start its head with ray start "
         "--head, or check ablation.ray / --ray"),
    Case("patching-builtin-on-encoder", "`patching` with the built-in induction pairs on an encoder",
         {"patching": {"enabled": True}}, errors.EXIT_CONFIG,
         "patching-builtin-on-encoder.yaml: field 'patching.data': the built-in induction pairs are for decoders; an "
         "encoder needs a JSONL file of prompt pairs {clean, corrupted, answer, wrong}"),
    # -- data files (exit 4) -------------------------------------------------------------------------
    Case("examples-none", "zero examples (`examples: []`)", {"examples": []}, errors.EXIT_DATA,
         "examples-none.yaml: field 'examples': the list is empty; give at least one example"),
    Case("patching-pairs-missing", "`patching.data` file missing",
         {"patching": {"enabled": True, "data": "nope.jsonl"}}, errors.EXIT_DATA,
         "<dir>/nope.jsonl: prompt-pairs file not found"),
    Case("patching-pairs-lengths", "a prompt pair whose clean and corrupted prompts differ in length",
         {"patching": {"enabled": True, "data": "pairs.jsonl"}}, errors.EXIT_DATA,
         "<dir>/pairs.jsonl: row 1: 'clean' is 9 tokens and 'corrupted' 5; patching needs prompts of the same length, "
         "token for token", files={"pairs.jsonl": '{"clean": "the cat sat on the [MASK] .", "corrupted": '
                                                  '"a [MASK] .", "answer": "mat", "wrong": "cat"}\n'}),
    Case("patching-pairs-not-json", "a prompt-pairs row that is not JSON",
         {"patching": {"enabled": True, "data": "pairs.jsonl"}}, errors.EXIT_DATA,
         "<dir>/pairs.jsonl: row 2 is not JSON (Expecting value)",
         files={"pairs.jsonl": '{"clean": "a [MASK]", "corrupted": "the [MASK]", "answer": "cat", "wrong": "mat"}\n'
                               'clean: a cat\n'}),
    Case("data-missing", "`ablation.data` file missing", ablation(data="data/nope.tsv"), errors.EXIT_DATA,
         "<dir>/data/nope.tsv: data file not found"),
    Case("data-empty", "`ablation.data` file empty", ablation(data="data/empty.tsv"), errors.EXIT_DATA,
         "<dir>/data/empty.tsv: the file has no rows", files={"data/empty.tsv": ""}),
    Case("data-no-rows", "`ablation.data` with a header and zero examples", ablation(data="data/header.tsv"),
         errors.EXIT_DATA, "<dir>/data/header.tsv: the file has a header but no data rows",
         files={"data/header.tsv": SIM_HEADER}),
    Case("data-not-utf8", "`ablation.data` not UTF-8", ablation(data="data/latin1.tsv"), errors.EXIT_DATA,
         "<dir>/data/latin1.tsv: line 2: not UTF-8 text (byte 0xe9); re-save the file as UTF-8",
         files={"data/latin1.tsv": (SIM_HEADER + "caf\u00e9 au lait\ta cat\t1.0\n").encode("latin-1")}),
    Case("data-missing-column", "`ablation.data` without the score column", ablation(data="data/columns.tsv"),
         errors.EXIT_DATA, "<dir>/data/columns.tsv: line 1: no column named 'score' in the header "
         "(columns: sentence1, sentence2, grade)",
         files={"data/columns.tsv": "sentence1\tsentence2\tgrade\nthe cat\tthe dog\t1.0\n"}),
    Case("data-score-text", "`ablation.data` with a non-numeric score", ablation(data="data/text-score.tsv"),
         errors.EXIT_DATA, "<dir>/data/text-score.tsv: line 3: column 'score': 'high' is not a number",
         files={"data/text-score.tsv": SIM_HEADER + "the cat\tthe dog\t1.0\nthe mat\ta mat\thigh\n"}),
    Case("data-score-nan", "`ablation.data` with a NaN score", ablation(data="data/nan-score.tsv"),
         errors.EXIT_DATA, "<dir>/data/nan-score.tsv: line 3: column 'score': value 'nan' is not a finite number",
         files={"data/nan-score.tsv": SIM_HEADER + "the cat\tthe dog\t1.0\nthe mat\ta mat\tnan\n"}),
    Case("data-empty-text", "`ablation.data` with an empty text cell", ablation(data="data/empty-cell.tsv"),
         errors.EXIT_DATA, "<dir>/data/empty-cell.tsv: line 3: column 'sentence1' is empty",
         files={"data/empty-cell.tsv": SIM_HEADER + "the cat\tthe dog\t1.0\n \ta mat\t2.0\n"}),
    Case("data-label-unknown", "classification labels not in the model's label set",
         {**CLS_MODEL, **ablation(task="classification", data="data/labels.tsv")}, errors.EXIT_DATA,
         "<dir>/data/labels.tsv: line 4: label 'maybe' is neither one of the model's labels (neg, pos) "
         "nor an index below 2",
         files={"data/labels.tsv": "text\tlabel\nthe cat sat\tpos\nthe dog sat\t1\na red car\tmaybe\n"}),
    Case("data-label-nan", "classification label NaN",
         {**CLS_MODEL, **ablation(task="classification", data="data/nan-label.tsv")}, errors.EXIT_DATA,
         "<dir>/data/nan-label.tsv: line 3: label 'nan' is neither one of the model's labels "
         "(neg, pos) nor an index below 2",
         files={"data/nan-label.tsv": "text\tlabel\nthe cat sat\tneg\nthe dog sat\tnan\n"}),
    Case("corpus-missing", "`patterns.corpus` file missing", {"patterns": {"corpus": [{"path": "data/nope.txt"}]}},
         errors.EXIT_DATA, "<dir>/data/nope.txt: corpus file not found"),
    Case("corpus-symlink-loop", "`patterns.corpus` a symlink to itself",
         {"patterns": {"corpus": [{"path": "loop.txt"}]}}, errors.EXIT_DATA,
         "<dir>/loop.txt: the corpus file is a symlink loop", setup=symlink("loop.txt", "loop.txt")),
    Case("data-symlink-loop", "`ablation.data` a symlink to itself", ablation(data="loop.tsv"), errors.EXIT_DATA,
         "<dir>/loop.tsv: the data file is a symlink loop", setup=symlink("loop.tsv", "loop.tsv")),
    Case("corpus-bad-column", "`patterns.corpus` naming a column the file lacks",
         {"patterns": {"corpus": [{"path": "data/corpus.csv", "column": "sentence"}]}}, errors.EXIT_DATA,
         "<dir>/data/corpus.csv:1: no column 'sentence' (columns: text, label)",
         files={"data/corpus.csv": "text,label\nthe cat sat,1\n"}),
    Case("corpus-not-utf8", "`patterns.corpus` file not UTF-8", {"patterns": {"corpus": [{"path": "data/latin1.txt"}]}},
         errors.EXIT_DATA, "<dir>/data/latin1.txt:2: not UTF-8 text",
         files={"data/latin1.txt": "the cat sat.\ncaf\u00e9 au lait.\n".encode("latin-1")}),
    Case("data-cell-too-long",
         "`ablation.data` CSV cell over 1,048,576 characters (longer cells, to that bound, are read)",
         ablation(data="data/huge.csv"), errors.EXIT_DATA,
         "<dir>/data/huge.csv: line 3: a cell is longer than the 1,048,576 reportgen takes for one text "
         "(a text is cut to max_length tokens anyway, so shorten it)",
         files={"data/huge.csv": SIM_CSV + "the cat,the dog,1.0\n" + "x" * (1 << 20) + "y,a mat,2.0\n"}),
    Case("data-unterminated-quote", "`ablation.data` CSV with a quote that never closes",
         ablation(data="data/quote.csv"), errors.EXIT_DATA,
         "<dir>/data/quote.csv: line 3: unterminated quote (the quoted field runs to the end of the file)",
         files={"data/quote.csv": SIM_CSV + "the cat,the dog,1.0\n\"the mat,a mat,2.0\nthe car,a car,3.0\n"}),
    Case("data-fifo", "`ablation.data` a FIFO (named pipe)", ablation(data="data/pipe.tsv"), errors.EXIT_DATA,
         "<dir>/data/pipe.tsv: is not a regular file but a named pipe (FIFO); "
         "reportgen reads data only from regular files",
         setup=not_a_file("data/pipe.tsv", "fifo")),
    Case("data-directory", "`ablation.data` a directory", ablation(data="data/folder.tsv"), errors.EXIT_DATA,
         "<dir>/data/folder.tsv: is a directory, not a data file", setup=not_a_file("data/folder.tsv", "dir")),
    Case("data-json-nested", "`ablation.data` JSONL nested 100,000 levels deep", ablation(data="data/nested.jsonl"),
         errors.EXIT_DATA, "<dir>/data/nested.jsonl: line 2: not valid JSON (nested too deeply)",
         files={"data/nested.jsonl": '{"sentence1": "a", "sentence2": "b", "score": 1}\n' + "[" * 100_000 + "\n"}),
    Case("corpus-fifo", "`patterns.corpus` a FIFO (named pipe)", {"patterns": {"corpus": [{"path": "data/pipe.txt"}]}},
         errors.EXIT_DATA,
         "<dir>/data/pipe.txt: is not a regular file but a named pipe (FIFO); "
         "reportgen reads data only from regular files",
         setup=not_a_file("data/pipe.txt", "fifo")),
    Case("corpus-directory", "`patterns.corpus` a directory", {"patterns": {"corpus": [{"path": "data/sentences"}]}},
         errors.EXIT_DATA, "<dir>/data/sentences: is a directory, not a corpus file",
         setup=not_a_file("data/sentences", "dir")),
    Case("corpus-json-number", "`patterns.corpus` JSONL with a number of 5,000 digits",
         {"patterns": {"corpus": [{"path": "data/numbers.jsonl", "column": "text"}]}}, errors.EXIT_DATA,
         "<dir>/data/numbers.jsonl:2: invalid JSON: a number has more than 4,300 digits",
         files={"data/numbers.jsonl": '{"text": "the cat sat."}\n{"text": "x", "n": ' + "7" * 5000 + "}\n"}),
    # -- the cache directory (exit 5: reportgen writes it, like the output) --------------------------------
    Case("cache-is-file", "`cache_dir` naming a file", {"cache_dir": "notes.txt"}, errors.EXIT_OUTPUT,
         "cache_dir <dir>/notes.txt is a file, not a directory (config field 'cache_dir')",
         files={"notes.txt": "not a directory\n"}),
    Case("cache-symlink-loop", "`cache_dir` a symlink to itself", {"cache_dir": "loop-cache"}, errors.EXIT_OUTPUT,
         "cache_dir <dir>/loop-cache is a symlink loop (config field 'cache_dir')",
         setup=symlink("loop-cache", "loop-cache")),
    Case("cache-read-only", "a read-only empty cache directory (immutable: refused to root too)",
         {"cache_dir": "ro-cache"}, errors.EXIT_OUTPUT,
         "cache directory <dir>/ro-cache is not writable; make it writable or set cache_dir to another directory "
         "(config field 'cache_dir')", setup=read_only_dir("ro-cache")),
    Case("cache-foreign-folder", "`cache_dir` a folder of the user's files (the home folder, a project's)",
         {"cache_dir": "notes"}, errors.EXIT_OUTPUT, "cache_dir <dir>/notes holds files reportgen did not write "
         "(todo.txt); give the cache a folder of its own, such as .reportgen-cache (config field 'cache_dir')",
         files={"notes/todo.txt": "mine\n"}),
    Case("cache-entry-directory", "a cache entry that is a directory", {"model": "default", "cache_dir": "dir-cache"},
         errors.EXIT_OUTPUT, "cache entry <dir>/dir-cache/runs/c6e18435d420e69a2e81c4a8.npz is a directory, not a "
         "file; delete it (anything in the cache can be deleted)", setup=cache_entry_directory("dir-cache")),
    # -- not errors: built, with a warning (exit 0) ------------------------------------------------------
    Case("example-too-long", "an example longer than the model takes (58 tokens, 32 positions)",
         {"model": "models/short", "max_length": 512, "examples": [*SHORT_EXAMPLES, {"text": LONG_TEXT}]}, 0,
         "warning: config field 'max_length' is 512 but the model takes at most 32 tokens; longer texts are "
         "truncated to 32\nwarning: example 2 was truncated to 32 tokens (config field 'max_length')",
         out="site-long", page=("index.html", "example 2 was truncated to 32 tokens")),
    Case("model-pickle-allowed", "pickle-only weights and `allow_pickle: true`",
         {"model": "./models/pickle", "allow_pickle": True, "examples": SHORT_EXAMPLES}, 0,
         "warning: model directory <dir>/models/pickle: loading pickle weights because the config sets "
         "allow_pickle: true; pickle can run code, prefer safetensors",
         out="site-pickle", page=("index.html", "Bad inputs")),
    Case("model-with-head", "a model saved with a classification head (its `classifier.*` weights are extra)",
         {**CLS_MODEL, "examples": SHORT_EXAMPLES}, 0, "", out="site-with-head", page=("index.html", "Bad inputs")),
    Case("data-long-cell", "`ablation.data` CSV cell of 201,600 characters (over Python csv's default 131,072)",
         ablation(data="data/long.csv"), 0,
         "warning: ablation: 1 of 4 task inputs are longer than 128 tokens and were truncated, the first on line 2 "
         "of long.csv (config field 'ablation.max_length')", out="site-long-cell",
         page=("ablation.html", "4 distinct texts"),
         files={"data/long.csv": SIM_CSV + f'"{LONG_CELL}",the dog sat,4.0\nthe cat sat,a red car,0.5\n'}),
]


# -- the docs' table (docs/pages/reference/errors.md) ---------------------------------------------
def _exit_legend() -> list[tuple[int, str]]:
    """(code, meaning) from the comments of reportgen/errors.py, so the legend follows the code."""
    source = Path(errors.__file__).read_text(encoding="utf-8")
    return [(int(code), text.strip()) for code, text in re.findall(r"^EXIT_\w+ = (\d+)\s+#\s*(.*)$", source, re.M)]


def all_cases() -> list[Case]:
    """This module's cases and the output rules' (tests/site/test_output_rules.py), in exit-code order."""
    from tests.site.test_output_rules import OUTPUT_CASES

    return sorted(CASES + OUTPUT_CASES, key=lambda case: case.exit or 99)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table() -> str:
    """The section of errors.md between the markers, generated from CASES and reportgen/errors.py."""
    lines = [
        "Generated from `tests/commands/test_bad_inputs.py` and `tests/site/test_output_rules.py`"
        f" ({len(all_cases())} cases;",
        "`python -m tests.commands.test_bad_inputs --write`",
        "regenerates it). Each bad input ends the build with the one line shown (after `error: ` on stderr;",
        "`<dir>` is the project directory), no traceback, the exit code shown, and the previous `site/`",
        "untouched. Exit codes:",
        "",
    ]
    lines += [f"- `{code}`: {meaning}" for code, meaning in _exit_legend()]
    lines += ["- `0`: built; the warnings are printed as `warning: ...` lines and shown on the site's home page", ""]
    lines += ["| Bad input | Exit | What reportgen answers |", "|---|---|---|"]
    for case in all_cases():
        answer = " <br> ".join(f"`{_cell(part)}`" for part in case.answer.split("\n")) if case.answer else \
            "builds, no warning"
        lines.append(f"| {_cell(case.what)} | {case.exit} | {answer} |")
    return "\n".join(lines) + "\n"


def write_docs() -> None:
    write_doc_section(ERRORS_PAGE, START, END, render_table())


# -- the project: tiny models, a good site ------------------------------------------------------------
def make_models(models: Path) -> None:
    """The tiny BERT and its broken variants; all from random weights, nothing downloaded."""
    import torch
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer

    from tests.helpers import TINY_WORDS, make_tiny_bert

    tiny = make_tiny_bert(models / "tiny")
    vocab = {w: i for i, w in enumerate(TINY_WORDS)}
    (models / "empty").mkdir()
    (models / "broken").mkdir()
    (models / "broken" / "config.json").write_text("{model_type: bert", encoding="utf-8")
    shutil.copytree(tiny, models / "alien")
    cfg = json.loads((tiny / "config.json").read_text())
    (models / "alien" / "config.json").write_text(json.dumps({**cfg, "model_type": "alien-net"}))
    no_type = shutil.copytree(tiny, models / "no-type")
    (no_type / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "model_type"}))
    empty_vocab = shutil.copytree(tiny, models / "empty-vocab", ignore=shutil.ignore_patterns("tokenizer.json"))
    (empty_vocab / "vocab.txt").write_text("")
    shutil.copytree(tiny, models / "no-tokenizer", ignore=shutil.ignore_patterns("tokenizer*", "vocab*", "special*"))
    remote = shutil.copytree(tiny, models / "remote-code")
    (remote / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoModel": "modeling_evil.EvilModel"}}))
    (remote / "modeling_evil.py").write_text("raise SystemExit('the model code ran')\n")
    pickle = shutil.copytree(tiny, models / "pickle")
    torch.save(load_file(pickle / "model.safetensors"), pickle / "pytorch_model.bin")
    (pickle / "model.safetensors").unlink()
    torch.manual_seed(0)
    BertTokenizer(vocab=vocab).save_pretrained(models / "short")
    BertModel(BertConfig(vocab_size=len(TINY_WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=32)).save_pretrained(models / "short")
    BertTokenizer(vocab=vocab).save_pretrained(models / "classifier")
    BertForSequenceClassification(BertConfig(
        vocab_size=len(TINY_WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=128, num_labels=2, id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1},
    )).save_pretrained(models / "classifier")


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def config_bytes(config: dict | str | bytes) -> bytes:
    if isinstance(config, dict):
        return yaml.safe_dump(_merge(BASE, config), sort_keys=False, allow_unicode=True).encode("utf-8")
    return config if isinstance(config, bytes) else config.encode("utf-8")


def case_env(project: Path, env: dict | None = None) -> dict[str, str]:
    """Every run's environment: offline, the project's own Hugging Face home, no colours."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(project / "hf-home"), "PYTHONPATH": pythonpath(),
            "NO_COLOR": "1", **(env or {})}


def build_args(config_name: str, out: str | None = None, argv: list[str] | None = None) -> list[str]:
    if argv is not None:
        return argv
    return ["build", "--config", config_name, *(["--out", out] if out is not None else [])]


def run_build(project: Path, config_name: str, out: str | None = None, env: dict | None = None,
              argv: list[str] | None = None, cli: WarmCli | None = None):
    """`python -m reportgen` in `project` as a subprocess, or by `cli` when given."""
    args = build_args(config_name, out, argv)
    if cli is not None:
        return cli.run(args, project, case_env(project, env), timeout=300)
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=project, env=case_env(project, env),
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("bad-inputs")
    make_models(work / "models")
    (work / "good.yaml").write_bytes(config_bytes({}))
    done = run_build(work, "good.yaml")
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stderr.splitlines() if not is_progress(line)], done.stderr
    check_report(work / "site")
    return work


@pytest.fixture(scope="module")
def cli(project) -> Iterator[WarmCli]:
    """The cases' command line: warm, in the same environment as the project's own build."""
    warm = WarmCli(case_env(project), project.parent / "warm-cli")
    yield warm
    warm.close()


@pytest.fixture(scope="module")
def good_site(project) -> dict[str, bytes]:
    site = tree(project / "site")
    assert "index.html" in site
    return site


def _skip_reason(case: Case) -> str | None:
    if case.needs == "readonly-proc" and (not Path("/proc/sys").is_dir() or os.access("/proc/sys", os.W_OK)):
        return "/proc/sys is writable here"
    return None


@pytest.fixture(scope="module")
def run_case(project: Path, cli: WarmCli) -> Callable[[Case], subprocess.CompletedProcess]:
    """run_case(case): the case's command in the project, run once per module (a build that succeeds is read by
    more than one test: its row of the table and test_long_example_is_marked_truncated_on_its_pages)."""
    runs: dict[str, subprocess.CompletedProcess] = {}

    def run(case: Case) -> subprocess.CompletedProcess:
        if case.id not in runs:
            runs[case.id] = _run_case(case, project, cli)
        return runs[case.id]

    return run


def _run_case(case: Case, project: Path, cli: WarmCli) -> subprocess.CompletedProcess:
    for name, content in case.files.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    if case.config is not None:
        (project / case.config_name).write_bytes(config_bytes(case.config))
    try:
        with (case.setup or nullcontext)(project):
            return run_build(project, case.config_name, case.out, case.env, case.argv, cli)
    finally:
        for name in case.files:
            (project / name).unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, project: Path, good_site: dict[str, bytes], run_case):
    if reason := _skip_reason(case):
        pytest.skip(reason)
    done = run_case(case)

    def normalize(line: str) -> str:
        for prefix in {str(project.resolve()), str(project)}:
            line = line.replace(prefix, "<dir>")
        return line

    stderr = done.stderr
    assert "Traceback" not in stderr, stderr
    lines = [normalize(line) for line in stderr.splitlines() if line.strip() and not is_progress(line)]
    assert done.returncode == case.exit, stderr
    documented = {code for code, _ in _exit_legend()} | {0}
    assert case.exit in documented
    if case.exit:
        assert lines == [f"error: {case.answer}"], stderr
    else:
        assert "\n".join(lines) == case.answer, stderr
        out = project / case.out
        page = (out / case.page[0]).read_text(encoding="utf-8")
        assert case.page[1] in page
    # The previous site is untouched, byte for byte, and no staging directory is left behind.
    # Named files, not a diff of the two trees' bytes: pytest's diff of large byte dicts runs for hours.
    site = tree(project / "site")
    assert not sorted(name for name in site.keys() | good_site.keys() if site.get(name) != good_site.get(name))
    assert not [p.name for p in project.iterdir() if p.name.endswith((".building", ".previous"))]


@pytest.mark.slow
def test_long_example_is_marked_truncated_on_its_pages(project, run_case):
    """The text longer than the model takes: the examples table and its own page say it was truncated. The
    example-too-long case's build (run_case: built by whichever of the two tests comes first)."""
    case = next(c for c in CASES if c.id == "example-too-long")
    done = run_case(case)
    assert done.returncode == 0, done.stderr
    site = project / case.out
    assert "(truncated)" in (site / "examples.html").read_text(encoding="utf-8")
    assert "Truncated" in (site / "example-2.html").read_text(encoding="utf-8")
    report = check_report(site)
    assert [e["truncated"] for e in report["examples"]] == [False, True]
    assert report["examples"][1]["n_tokens"] == 32


def test_model_file_policy_and_token_limit(tmp_path):
    """In process, no model loaded: what the config keys let through, and the position limits."""
    from reportgen.errors import ModelError
    from reportgen.model import loading

    def directory(name: str, config: dict, files: tuple[str, ...] = ("model.safetensors", "tokenizer.json")) -> Path:
        path = tmp_path / name
        path.mkdir()
        shape = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32}
        (path / "config.json").write_text(json.dumps({**shape, **config}))
        for file in files:
            (path / file).write_bytes(b"")
        return path

    custom = directory("custom", {"model_type": "bert", "auto_map": {"AutoModel": "m.M"}})
    with pytest.raises(ModelError, match="trust_remote_code: true"):
        loading.check_directory(custom)
    with loading.file_policy(trust_remote_code=True):
        assert loading.check_directory(custom).trust_remote_code
    pickled = directory("pickled", {"model_type": "bert"}, ("pytorch_model.bin", "vocab.txt"))
    with pytest.raises(ModelError, match="allow_pickle: true"):
        loading.check_directory(pickled)
    with pytest.warns(UserWarning, match="pickle"):
        assert loading.pretrained_kwargs(pickled, loading.FilePolicy(allow_pickle=True)) == {
            "use_safetensors": False, "trust_remote_code": False}
    both = directory("both", {"model_type": "bert"}, ("pytorch_model.bin", "model.safetensors", "vocab.txt"))
    assert loading.pretrained_kwargs(both)["use_safetensors"] is True  # safetensors first, no warning
    roberta = directory("roberta", {"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1})
    assert loading.max_tokens(roberta) == 512
    assert loading.clamp_max_length(roberta, 128) == (128, None)
    assert loading.clamp_max_length(roberta, 1024)[0] == 512
    relative = directory("deberta", {"model_type": "deberta-v2", "max_position_embeddings": 512,
                                     "position_biased_input": False})
    assert loading.max_tokens(relative) is None
    encoder_decoder = directory("t5", {"model_type": "t5", "is_encoder_decoder": True})
    with pytest.raises(ModelError, match="encoder-decoder"):
        loading.check_directory(encoder_decoder)


def test_matrix_has_at_least_25_error_cases():
    assert len({c.id for c in CASES}) == len(CASES)
    assert sum(c.exit != 0 for c in CASES) >= 25


def test_docs_table_is_generated_from_the_cases():
    text = ERRORS_PAGE.read_text(encoding="utf-8")
    if os.environ.get("REGENERATE") == "1":
        write_docs()
        text = ERRORS_PAGE.read_text(encoding="utf-8")
    assert START in text and END in text, "docs/pages/reference/errors.md lacks the bad-inputs markers"
    assert doc_section(text, START, END) == render_table(), (
        "the errors table of docs/pages/reference/errors.md is stale: "
        "run `python -m tests.commands.test_bad_inputs --write`")


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_docs()
        print(f"rewrote the bad-inputs table in {ERRORS_PAGE}")
    else:
        sys.stdout.write(render_table())
