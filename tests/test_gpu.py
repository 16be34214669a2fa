"""On a CUDA GPU (`device: cuda`): the build, the ablation engine and its token budget run there, with the same
numbers as on the CPU. Skipped, with the reason, on a machine without one (this project's CI has none)."""

import json

import numpy as np
import pytest

from reportgen.config import load_config
from reportgen.pipeline import build
from tests.helpers import SMALL_ABLATION, TWO_EXAMPLES, tiny_config, write_config

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not torch.cuda.is_available(),
                                                   reason="needs a CUDA GPU (device: cuda); this machine has none")]


def built(project, device: str) -> dict:
    write_config(project, tiny_config(project.parent / "model", device=device, examples=TWO_EXAMPLES,
                                      ablation=SMALL_ABLATION))
    build(load_config(project / "reportgen.yaml"), project / "site", reproducible=True)
    return json.loads((project / "site" / "report.json").read_text(encoding="utf-8"))


def test_a_cuda_build_gives_the_cpu_builds_numbers(tmp_path, tiny_model):
    (tmp_path / "model").symlink_to(tiny_model)
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cuda").mkdir()
    on_cpu, on_gpu = built(tmp_path / "cpu", "cpu"), built(tmp_path / "cuda", "cuda")
    assert on_gpu["manifest"]["device"] == "cuda"
    np.testing.assert_allclose(on_gpu["statistics"]["entropy"]["mean"], on_cpu["statistics"]["entropy"]["mean"],
                               atol=1e-4)
    np.testing.assert_allclose(on_gpu["ablation"]["single_heads"]["delta"], on_cpu["ablation"]["single_heads"]["delta"],
                               atol=1e-4)
    assert on_gpu["ablation"]["single_heads"]["significant"] == on_cpu["ablation"]["single_heads"]["significant"]


def test_the_engine_on_a_gpu_takes_a_token_budget_from_its_free_memory(tiny_model):
    from reportgen.ablation.experiments import _token_budget
    from reportgen.ablation.task_loading import load_ablation_task
    from reportgen.config import AblationSettings, defaults

    settings = AblationSettings.model_validate({**defaults()["ablation"], **SMALL_ABLATION})
    task = load_ablation_task(tiny_model, settings, device="cuda")
    assert task.device.type == "cuda"
    assert _token_budget(task, settings) >= settings.batch_tokens
