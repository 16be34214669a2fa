"""Exact patching's sweeps on Ray (`ablation.ray`, `reportgen build --ray`), as the ablation's masks run there.

The pairs are split into one chunk per slot of the cluster (a CPU, or a GPU when the model runs on CUDA); each Ray
task loads the model once and sweeps its chunk with the very code a local build runs (sweep.sweep), and the chunks
are joined in the pairs' order, so a Ray build's patching record equals a local one's. Ray is imported by the
ablation's `ray_runner.connected`; nothing here imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from reportgen.errors import ModelError
from reportgen.patching.pairs import PromptPair
from reportgen.patching.sweep import Sweep, sweep
from reportgen.progress import Callback


def sweep_here(model_dir: str, lm_task: str, device: str, policy: dict, fingerprint: str, pairs: list[PromptPair],
               directions: tuple[str, ...], chosen: list[tuple[int, int]] | None, positions: bool) -> Sweep:
    """One Ray task: the model loaded as the build loads it (its file policy: trust_remote_code, allow_pickle, the
    families it admits), the same files as the build's (`fingerprint`), and its chunk of pairs swept."""
    import torch

    from reportgen.ablation.task_loading import load_lm
    from reportgen.model import loading

    if device == "cpu":
        torch.set_num_threads(1)  # one CPU per task: the tasks share the machine's cores
    with loading.file_policy(**policy):
        if loading.fingerprint(loading.file_hashes(Path(model_dir))) != fingerprint:
            raise ModelError(f"model directory {model_dir} on this Ray node holds other files than the build's")
        model, _ = load_lm(lm_task, Path(model_dir), device)
    return sweep(model, pairs, directions, heads=chosen, positions=positions)


def sweep_on(cluster: Any, where: tuple[Path, str, str], pairs: list[PromptPair], directions: tuple[str, ...],
             chosen: list[tuple[int, int]] | None, positions: bool, progress: Callback, what: str) -> Sweep:
    """The sweep of `chosen` heads over the pairs on the cluster's slots; `where` is (model directory, the ablation
    task whose LM head the metric reads, device)."""
    import dataclasses

    from reportgen.model import loading

    model_dir, lm_task, device = where
    policy = dataclasses.asdict(loading.current_policy())
    fingerprint = loading.fingerprint(loading.file_hashes(Path(model_dir)))
    ray = cluster.ray
    chunks = [list(chunk) for chunk in np.array_split(np.arange(len(pairs)), min(cluster.slots(device), len(pairs)))]
    task = ray.remote(num_cpus=0 if device == "cuda" else 1, num_gpus=1 if device == "cuda" else 0)(sweep_here)
    refs = {task.remote(str(model_dir), lm_task, device, policy, fingerprint, [pairs[i] for i in chunk], directions,
                        chosen, positions): index for index, chunk in enumerate(chunks)}
    parts: dict[int, Sweep] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        try:
            parts[refs[ready[0]]] = ray.get(ready[0])
        except Exception as exc:  # Ray wraps the task's error; its last line says what went wrong
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            raise ModelError(f"patching on Ray ({cluster.address}) failed: {lines[-1][:200]}") from None
        progress(f"Patching: {what} (Ray)", sum(len(chunks[i]) for i in parts), len(pairs))
    return Sweep.joined([parts[index] for index in range(len(chunks))])
