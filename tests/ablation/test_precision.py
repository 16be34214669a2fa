"""ablation.precision (issue 32): the masked passes in float32 (as before), bfloat16 or float16 (CUDA only).

float32 runs exactly as before the setting existed (no autocast, the cache's paths unchanged); bfloat16 runs
every masked pass, the unmasked one included, under autocast, stays within BF16_TOL of float32 on a tiny
random BERT (tests/helpers.py `make_ablation_bert`), and is cached apart from float32; importance stays
float32; float16 on a CPU is refused before any work (the CLI's one line and exit 2 are a case of
tests/commands/test_bad_inputs.py). What bfloat16 costs on real models is benchmarks/ablation_precision.py's."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from reportgen.ablation.engine import Engine, ResultCache
from reportgen.ablation.experiments import ablate
from reportgen.ablation.records import record_key
from reportgen.ablation.task_loading import load_task
from reportgen.config import AblationSettings, config_from_mapping, defaults, load_config, precision_problem
from reportgen.errors import EXIT_CONFIG, ConfigError
from reportgen.model.head_sites import locate

# The tiny BERT's cosines in bfloat16 differ from float32's by up to 0.0104 (measured, both methods): bfloat16
# keeps 8 bits of mantissa (relative rounding 2^-9, 0.2%) and this random model's activations are large
# (initializer_range 0.3). Three times that leaves room for other torch builds' kernels.
BF16_TOL = 0.03


def _settings(**over) -> AblationSettings:
    raw = defaults()["ablation"]
    raw.update(data="x", seeds=[0], fractions=[0.0, 0.25], bootstrap_samples=200, permutations=200,
               batch_tokens=96, max_length=96, **over)
    raw["experiments"] = {**raw["experiments"], "random_fraction": False, "layer_halves": False,
                          "importance": False}
    return AblationSettings.model_validate(raw)


def _masks(layers: int = 3, heads: int = 4) -> np.ndarray:
    """All ones, then every single head."""
    masks = [np.ones((layers, heads), dtype=np.float32)]
    for index in range(layers * heads):
        mask = np.ones(layers * heads, dtype=np.float32)
        mask[index] = 0
        masks.append(mask.reshape(layers, heads))
    return np.stack(masks)


def _autocast_seen(task) -> tuple[list[bool], list]:
    """Whether autocast was on at each forward of the model's first layer (a hook), and the hook's handle."""
    seen: list[bool] = []
    layer = locate(task.model).layers[0]
    handle = layer.register_forward_pre_hook(lambda _m, _a: seen.append(torch.is_autocast_enabled("cpu")))
    return seen, handle


# -- the setting ---------------------------------------------------------------------------------------
def test_default_is_float32_and_the_manifest_says_it():
    config = load_config(None)
    assert config.ablation.precision == "float32"
    assert config.as_written()["ablation"]["precision"] == "float32"  # the manifest's config as used
    assert AblationSettings.model_fields["precision"].description  # the schema explains it


def test_float16_refused_without_cuda_before_any_work(tmp_path):
    with pytest.raises(ConfigError) as refused:
        config_from_mapping({"device": "cpu", "ablation": {"precision": "float16"}}, "p.yaml", tmp_path)
    assert refused.value.exit_code == EXIT_CONFIG
    assert str(refused.value) == ("p.yaml: field 'ablation.precision': float16 runs only on a CUDA device and the "
                                  "device is 'cpu'; use bfloat16 (which a CPU runs too) or float32")
    # switched off, the field is not read: no refusal (as for ablation.data)
    off = config_from_mapping({"device": "cpu", "ablation": {"enabled": False, "precision": "float16"}}, "p.yaml",
                              tmp_path)
    assert off.ablation.precision == "float16"
    assert precision_problem("bfloat16", "cpu") is None and precision_problem("float16", "cuda") is None
    assert precision_problem("float16", "cuda:1") is None
    assert precision_problem("float16", "auto") is None  # the config cannot tell (no torch): the task load does
    assert precision_problem("float16", "auto", "cuda") is None
    assert precision_problem("float16", "auto", "cpu") == ("float16 runs only on a CUDA device and device 'auto' "
                                                           "finds no CUDA device here; use bfloat16 (which a CPU "
                                                           "runs too) or float32")
    with pytest.raises(ConfigError, match="Input should be 'float32', 'bfloat16' or 'float16'"):
        config_from_mapping({"ablation": {"precision": "fp8"}}, "p.yaml", tmp_path)


def test_load_task_refuses_float16_on_a_cpu_before_reading_anything(tmp_path):
    """The ablation stage (and tests and benchmarks, which load tasks directly): the same refusal, "auto" resolved,
    before the data or the model is looked at."""
    devices = ["cpu"] if torch.cuda.is_available() else ["cpu", "auto"]
    for device in devices:
        with pytest.raises(ConfigError, match="field 'ablation.precision': float16 runs only on a CUDA device"):
            load_task("similarity", tmp_path / "no-model", tmp_path / "no-data.tsv", device=device,
                      precision="float16")


# -- float32: as before --------------------------------------------------------------------------------
def _hash_before_precision(task) -> str:
    """`Task.data_hash` as it was before ablation.precision existed (copied from that version)."""
    digest = hashlib.sha256(json.dumps({"kind": task.kind, **task.settings}, sort_keys=True).encode())
    for unit in task.units:
        digest.update(json.dumps(unit, sort_keys=True).encode())
    digest.update(task.example_units.astype(np.int64).tobytes())
    digest.update(task.gold.astype(np.float64).tobytes())
    return digest.hexdigest()[:16]


@pytest.mark.slow  # over 0.3 s (model loads and passes): the fast tier stays under a minute
def test_float32_runs_as_before(model_dir, data, tmp_path):
    """float32 (the default) enters no autocast, and its outputs are bit for bit those of a task loaded
    without the setting; its cache folder and entry paths are the ones computed before it existed."""
    default = load_task("similarity", model_dir, data)
    explicit = load_task("similarity", model_dir, data, precision="float32")
    assert default.precision == explicit.precision == "float32"
    assert default.data_hash() == explicit.data_hash() == _hash_before_precision(default)
    outputs = []
    for task in (default, explicit):
        seen, handle = _autocast_seen(task)
        with Engine(task, "zero", batch_tokens=96) as engine:
            outputs.append(np.stack(engine.evaluate(_masks())))
            importance = engine.importance(_masks()[0])
        handle.remove()
        assert seen and not any(seen)
    assert np.array_equal(outputs[0], outputs[1]) and np.isfinite(importance).all()
    cache = ResultCache(tmp_path, "fp", explicit.data_hash(), "zero")
    assert cache.directory == tmp_path / "ablation" / "fp" / f"{_hash_before_precision(default)}-zero"


# -- bfloat16 --------------------------------------------------------------------------------------------
@pytest.mark.slow  # seconds of model runs
@pytest.mark.parametrize("method", ["zero", "uniform"])
def test_bfloat16_close_to_float32_and_importance_float32(model_dir, data, method):
    f32 = load_task("similarity", model_dir, data)
    bf16 = load_task("similarity", model_dir, data, precision="bfloat16")
    with Engine(f32, method, batch_tokens=96) as engine:
        want = np.stack(engine.evaluate(_masks()))
        want_importance = engine.importance(_masks()[0])
    seen, handle = _autocast_seen(bf16)
    with Engine(bf16, method, batch_tokens=96) as engine:
        got = np.stack(engine.evaluate(_masks()))  # the recording pass (all ones) and every masked one
        masked_passes = len(seen)
        got_importance = engine.importance(_masks()[0])
    handle.remove()
    assert masked_passes and all(seen[:masked_passes])  # every masked pass under autocast, the unmasked one too
    assert not any(seen[masked_passes:])  # importance: float32 forwards (and their gradients)
    assert got.dtype == np.float64 and want.shape == got.shape
    difference = np.abs(got - want).max()
    assert 0 < difference < BF16_TOL  # it did run in bfloat16, and stays close
    changes = lambda outputs: outputs[1:] - outputs[:1]  # noqa: E731  each head's change, within one format
    assert np.abs(changes(got) - changes(want)).max() < 2 * BF16_TOL
    np.testing.assert_allclose(got_importance, want_importance, rtol=1e-5, atol=1e-8)


@pytest.mark.slow  # seconds of model runs
def test_bfloat16_is_cached_apart_from_float32(model_dir, data, tmp_path):
    """One cache directory, both formats: neither reads the other's masks, and each reads its own back."""
    settings = {name: _settings(precision=name) for name in ("float32", "bfloat16")}
    records, caches = {}, {}
    for name in ("float32", "bfloat16", "float32", "bfloat16"):
        task = load_task("similarity", model_dir, data, precision=name)
        cache = ResultCache(tmp_path, "fp", task.data_hash(), "zero")
        records.setdefault(name, []).append(ablate(task, settings[name], cache))
        caches.setdefault(name, []).append(cache)
    masks = 1 + 12 + 3  # all ones, the heads, the layers
    for name in ("float32", "bfloat16"):
        first, again = caches[name]
        assert (first.computed, first.loaded) == (masks, 0)  # nothing read from the other format's entries
        assert (again.computed, again.loaded) == (0, masks)  # its own, read back
        assert records[name][0] == records[name][1]
    assert caches["float32"][0].directory != caches["bfloat16"][0].directory
    f32_files = {path.name for path in caches["float32"][0].directory.iterdir()}
    bf16_files = {path.name for path in caches["bfloat16"][0].directory.iterdir()}
    assert f32_files and bf16_files and not f32_files & bf16_files
    f32, bf16 = records["float32"][0], records["bfloat16"][0]
    # the whole record's key (run_ablations) dumps every setting, the precision with them
    assert record_key(settings["float32"], "fp", "d") != record_key(settings["bfloat16"], "fp", "d")
    pearson = [record.baseline.metrics["pearson"] for record in (f32, bf16)]
    assert pearson[0] != pearson[1] and abs(pearson[0] - pearson[1]) < 0.05  # each computed in its own format
