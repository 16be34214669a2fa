"""Evaluating ablation masks on Ray actors (`ablation.ray`, `reportgen build --ray`).

The masks are independent, so a sweep spreads over Ray actors rather than a home-made pool:
each actor loads the task and an `Engine` once (which records the unmasked pass once) and then
evaluates the stacks of masks it is handed, the very stacks `Runner.outputs` would evaluate here,
so every per-mask output is the same computation as a local build's. The driver keeps the rest:
it loads the task too (baseline outputs, gradient importance), writes each finished mask into the
same `ResultCache` as soon as it arrives (an interrupted run resumes, locally or on Ray: the Ray
address is in no cache key), ticks the one progress callback, and computes every statistic.

Nothing here imports Ray at module level: `connected` imports it only when an address is given,
so a build without `--ray` never loads it; a "local" Ray is started only when a mask is not in the
cache, so a rebuild with every mask cached starts no Ray runtime. A killed actor is restarted by Ray and its unfinished
stacks are run again (`max_restarts`, `max_task_retries`); a cluster that cannot be reached is
one line and exit 3 before any model work.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from reportgen.ablation.engine import Engine, Progress, ResultCache, Runner
from reportgen.config import AblationSettings
from reportgen.errors import ModelError, ReportgenError

INSTALL_HINT = 'pip install "reportgen[ray]"'
CONNECT_TIMEOUT = 3.0  # seconds to wait for a ray:// address's port before calling it unreachable
IN_FLIGHT = 2  # stacks queued per actor: the next one is there while the driver stores the last
RESTARTS = 4  # a killed actor is restarted (and its pending stacks rerun) this many times at most
_QUIET = {"log_to_driver": False, "logging_level": logging.ERROR}
_active: ContextVar[RayCluster | None] = ContextVar("reportgen_ray_cluster", default=None)


# -- the connection ------------------------------------------------------------------------------------
class RayCluster:
    """A connected Ray (the `ray` module, imported by `connected`) and where it came from. A "local" Ray
    is started only when the first mask needs it (`start`): a build whose masks are all in the cache
    starts no Ray runtime."""

    def __init__(self, ray: Any, address: str, started: bool = True):
        self.ray = ray
        self.address = address
        self.started = started  # False: a local Ray not started yet
        self.owned = False  # started by this block, so shut down at its end

    def start(self) -> None:
        """Start the local Ray this cluster stands for, once."""
        if not self.started:
            self.owned = self.started = _connect(self.ray, self.address)

    def slots(self, device: str) -> int:
        """How many actors to start: one per GPU of the cluster when the masks run on CUDA, else one
        per CPU; at least one."""
        self.start()
        resources = self.ray.cluster_resources()
        return max(1, int(resources.get("GPU" if device == "cuda" else "CPU", 1)))

    def pool(self, model_dir: Path, settings: AblationSettings, device: str, fingerprint: str,
             data_hash: str) -> WorkerPool:
        """Actors for one model and task, started when the first stack needs them."""
        return WorkerPool(self, WorkerSpec(str(model_dir), settings, device, fingerprint, data_hash))


def active_cluster() -> RayCluster | None:
    """The cluster `connected` opened around this build, if any."""
    return _active.get()


@contextmanager
def connected(address: str | None) -> Iterator[RayCluster | None]:
    """Connect to Ray at `address` ("local", "auto" or "ray://host:port") for the block, or yield None
    when `address` is None. A Ray this block started or joined is shut down (left) at its end; one
    already initialised in this process (by the caller) is used as it is and left running."""
    if address is None:
        yield None
        return
    ray = _import_ray()
    lazy = address == "local" and not ray.is_initialized()  # started when the first mask needs it
    started = False if ray.is_initialized() or lazy else _connect(ray, address)
    cluster = RayCluster(ray, address, started=not lazy)
    token = _active.set(cluster)
    try:
        yield cluster
    finally:
        _active.reset(token)
        if started or cluster.owned:
            ray.shutdown()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ModelError(f"ablation.ray (or --ray) is set but Ray is not installed; {INSTALL_HINT}") from None
    return ray


def _connect(ray: Any, address: str) -> bool:
    """Start a local Ray or join a cluster; True when connected. A cluster that cannot be reached
    is a ModelError (exit 3), said within a few seconds."""
    if address == "local":
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, **_QUIET)
        return True
    if address.startswith("ray://"):
        _check_reachable(address)
    try:
        ray.init(address=address, **_QUIET)
    except ImportError as err:  # a ray:// address needs Ray Client (grpcio), which `reportgen[ray]` brings
        raise ModelError(f"Ray cluster {address}: Ray Client is not installed ({err}); {INSTALL_HINT}") from None
    except (ConnectionError, OSError, RuntimeError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(f"Ray cluster {address} cannot be reached: {reason} (ablation.ray or --ray)") from None
    return True


def _check_reachable(address: str) -> None:
    """Refuse a ray:// address whose port does not answer within CONNECT_TIMEOUT seconds (Ray Client
    itself would retry for a long time)."""
    parts = urlsplit(address)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ModelError(f"Ray cluster {address} cannot be reached ({reason}); start its head with ray start "
                         "--head, or check ablation.ray / --ray") from None


# -- the actors ------------------------------------------------------------------------------------------
class WorkerSpec:
    """What every actor needs to load the task on its machine, and what it must find there."""

    def __init__(self, model_dir: str, settings: AblationSettings, device: str, fingerprint: str, data_hash: str):
        from reportgen.model.loading import current_policy

        self.model_dir, self.settings, self.device = model_dir, settings, device
        self.fingerprint, self.data_hash = fingerprint, data_hash
        # the build's trust_remote_code / allow_pickle (and the families it admits) hold on the workers too
        self.policy = dataclasses.asdict(current_policy())


class MaskWorker:
    """One actor's state: the task and a recording `Engine`, loaded once, then stacks of masks.
    Made a Ray actor class by `_actor_class` (so that this module does not import Ray)."""

    def __init__(self, spec: WorkerSpec):
        import torch

        from reportgen.ablation.task_loading import load_ablation_task
        from reportgen.model import loading

        if spec.device == "cpu":
            torch.set_num_threads(1)  # one CPU per actor (`_actor_class`): the actors share the machine's cores
        loading.quiet_transformers()
        with loading.file_policy(**spec.policy):
            self.task = load_ablation_task(Path(spec.model_dir), spec.settings, device=spec.device)
            self.fingerprint = loading.fingerprint(loading.file_hashes(Path(spec.model_dir)))
        budget = token_budget(self.task, spec.settings) if spec.device == "cuda" else spec.settings.batch_tokens
        # the driver's seed: a resample worker draws the same donors (`Engine`'s `seed`)
        self.engine = Engine(self.task, spec.settings.method, batch_tokens=budget,
                             seed=spec.settings.seeds[0]).__enter__()
        self.engine.unit_outputs(np.ones((1, self.engine.layers, self.engine.heads), dtype=np.float32))

    def describe(self) -> tuple[int, str, str]:
        """(process id, model fingerprint, data hash) as this actor found them."""
        return os.getpid(), self.fingerprint, self.task.data_hash()

    def evaluate(self, stack: np.ndarray) -> list[np.ndarray]:
        return self.engine.evaluate(stack)


def token_budget(task: Any, settings: AblationSettings) -> int:
    """Padded tokens per forward on a GPU: about 40% of its free memory (after the model is loaded)
    over an estimate of what a token costs in float32 at the widest point of a layer (the
    feed-forward, the residual stream and its copies, and a row of attention scores per head;
    for tasks causal_lm and seq2seq also its row of logits over the vocabulary and their log-softmax);
    never below the CPU value `batch_tokens`."""
    import torch

    free, _total = torch.cuda.mem_get_info()
    config = task.model.config
    feed_forward = getattr(config, "intermediate_size", None) or 4 * config.hidden_size  # GPT-2: n_inner or 4 h
    per_token = 4 * (feed_forward + 8 * config.hidden_size + config.num_attention_heads * settings.max_length)
    if getattr(task, "kind", None) in ("causal_lm", "seq2seq"):
        per_token += 4 * 2 * config.vocab_size
    return max(settings.batch_tokens, int(0.4 * free) // per_token)


def _actor_class(ray: Any, device: str) -> Any:
    """MaskWorker as a Ray actor: one CPU (and one GPU on CUDA), restarted when killed."""
    return ray.remote(num_cpus=1, num_gpus=1 if device == "cuda" else 0, max_restarts=RESTARTS,
                      max_task_retries=RESTARTS)(MaskWorker)


class WorkerPool:
    """The actors of one ablation run: started on first use, killed when the run ends (`with`)."""

    def __init__(self, cluster: RayCluster, spec: WorkerSpec):
        self.cluster, self.spec = cluster, spec
        self.actors: list[Any] = []
        self.pids: list[int] = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        for actor in self.actors:
            self.cluster.ray.kill(actor)
        self.actors = []

    def runner(self, engine: Engine, cache: ResultCache, progress: Progress | None) -> RayRunner:
        return RayRunner(engine, cache, progress, self)

    def _start(self) -> list[Any]:
        """Start the actors and wait until each has loaded the task, checking that each found the
        same model files and data as the driver (else their numbers would enter its cache)."""
        if not self.actors:
            self.cluster.start()
            actor_class = _actor_class(self.cluster.ray, self.spec.device)
            count = self.cluster.slots(self.spec.device)
            self.actors = [actor_class.remote(self.spec) for _ in range(count)]
            found = self._get([actor.describe.remote() for actor in self.actors])
            self.pids = [pid for pid, _fingerprint, _data in found]
            for _pid, fingerprint, data_hash in found:
                if (fingerprint, data_hash) != (self.spec.fingerprint, self.spec.data_hash):
                    raise ModelError(f"a Ray worker found other model files or data at {self.spec.model_dir} than "
                                     "this machine; every worker must read the same model and data files")
        return self.actors

    def evaluate(self, stacks: list[np.ndarray]) -> Iterator[tuple[int, list[np.ndarray]]]:
        """(position, per-mask outputs) of every stack as the actors finish them, IN_FLIGHT stacks
        queued per actor, the next handed to whichever actor finished."""
        if not stacks:
            return
        ray = self.cluster.ray
        queue = deque(range(len(stacks)))
        pending: dict[Any, tuple[int, Any]] = {}

        def hand(actor: Any) -> None:
            number = queue.popleft()
            pending[actor.evaluate.remote(stacks[number])] = (number, actor)

        for actor in self._start():
            for _ in range(IN_FLIGHT):
                if queue:
                    hand(actor)
        while pending:
            ready, _rest = ray.wait(list(pending), num_returns=1)
            number, actor = pending.pop(ready[0])
            outputs = self._get(ready[0])
            if queue:
                hand(actor)
            yield number, outputs

    def _get(self, refs: Any) -> Any:
        """ray.get, a worker's failure turned into one line (a ReportgenError it raised as it was)."""
        errors = self.cluster.ray.exceptions
        try:
            return self.cluster.ray.get(refs)
        except errors.RayTaskError as err:
            if isinstance(err.cause, ReportgenError):
                raise err.cause from None
            raise ModelError(f"a Ray worker failed: {_last_line(err)}") from None
        except errors.RayActorError as err:
            raise ModelError(f"a Ray worker died and could not be restarted, or could not load the model from "
                             f"{self.spec.model_dir} (every worker must reach it): {_last_line(err)}") from None


def _last_line(err: BaseException) -> str:
    """The last non-empty line of a Ray error's text (its cause, after the traceback)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__


class RayRunner(Runner):
    """`Runner` whose stacks are evaluated by a `WorkerPool`'s actors; the cache, the memo and the
    progress are the driver's, as without Ray."""

    def __init__(self, engine: Engine, cache: ResultCache, progress: Progress | None, pool: WorkerPool):
        super().__init__(engine, cache, progress)
        self.pool = pool

    def evaluate_stacks(self, stacks: list[np.ndarray]) -> Iterator[tuple[int, list[np.ndarray]]]:
        return self.pool.evaluate(stacks)
