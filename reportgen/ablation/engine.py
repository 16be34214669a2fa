"""The fast evaluation engine: a task's per-example outputs under many head masks.

Masking follows `reportgen.model.masking`: "zero" removes a head (Michel et al.), "uniform"
replaces its attention by 1/n over the keys (Kovaleva et al. 2019), "mean" replaces its context by its mean
at the same position over the task's inputs (Wang et al. 2022) and "resample" by its context on another of
the task's inputs (Chan et al. 2022), drawn by a fixed derangement of the seed (`Replacements`). Those two
cost one more unmasked pass (the means) and, for resample, one unmasked forward of each batch's donors, kept
per batch within `record_bytes`; every fast path below is exact for them, as a replacement is fixed per input
and position whatever the mask.

Speed: the cost is forward passes, so `Engine` (1) runs each distinct text once,
(2) buckets texts by exact token length, so a batch needs no padding (only buckets too
small for a forward of their own are merged with their neighbours), (3) runs under
`torch.inference_mode`, (4) records the unmasked model once and starts each masked forward
at the first layer its mask touches (a mask in layer l cannot change layers below l):
for methods "zero", "mean" and "resample" on the BERT layout it starts inside layer l, at its attention
LayerNorm, from the recorded per-head context and attention sum less the masked heads'
share of the output projection (`HeadMasker.resuming`), which skips layer l's Q, K, V
projections and attention too; otherwise it replays the outputs of layers below l
(`HeadMasker.replaying`), (5) stacks several masks in one forward when batches are small,
and (6) answers the all-ones mask from the recording pass itself.
`evaluate_plain` is the straightforward way, kept to check that both agree. An encoder-decoder's layers
do not run in the flat order of its masks (`reportgen.model.head_sites`), so for it (4) is off: every
masked forward runs from the start.

Every finished mask's per-example outputs are stored under the cache directory, keyed
by model fingerprint, data hash, method, mask and code version, so an interrupted run resumes;
each entry carries a sha256 (`ResultCache`), so a damaged one is recomputed, never published.
The experiments' statistics are stored beside them (`stats-<key>.json`, keyed by
`reportgen.ablation.experiment_context`), so a rebuild does not redo a bootstrap whose inputs it already saw.
`Runner` puts the two together: it answers masks from memory or the cache and evaluates the
rest in stacks that start at the same layer.

Precision (`ablation.precision`, the task's `precision`): float32, or bfloat16 / float16 (CUDA only) under
`torch.autocast` for every masked forward the engine makes, the recording pass included, whose outputs are
the all-ones mask's, so every change is measured within one format. The weights stay float32, autocast
runs the matrix products in the reduced format (and, on a CPU, LayerNorm on a reduced input); the
unit outputs are cast to float32 and everything after them (per-example outputs, metrics, statistics) is
float64 as before. A mask is 0 or 1 per head, exact in either format. Head importance (`Engine.importance`)
is float32 throughout, gradients and the loss's upstream outputs alike. The reduced formats' results are
cached apart from float32's: the task's `data_hash`, which names their folder, holds the precision when
it is not float32 (float32's paths are unchanged).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reportgen.ablation.tasks import Batch, Task
from reportgen.cache.store import Cache
from reportgen.model.masking import REPLACED, HeadMasker, Method, Replacement
from reportgen.model.replacements import DonorContexts, MeanContexts, derangement, donor_contexts, mean_contexts

CODE_VERSION = "ablation-4"  # bump when a change alters cached per-mask outputs or their file format
Progress = Callable[[str, int, int], None]  # experiment name, masks done, masks in all
REDUCED = {"bfloat16": torch.bfloat16, "float16": torch.float16}  # ablation.precision -> autocast dtype


def precision_scope(precision: str, device: torch.device) -> AbstractContextManager[Any]:
    """The scope a masked forward runs in: nothing for float32, else autocast to the reduced format."""
    if precision == "float32":
        return nullcontext()
    if precision not in REDUCED:
        raise ValueError(f"unknown precision {precision!r} (float32, bfloat16 or float16)")
    return torch.autocast(device_type=device.type, dtype=REDUCED[precision])


# -- result cache on disk -------------------------------------------------------------------------
class ResultCache:
    """One entry per finished mask, stored through `reportgen.cache.store.Cache`: a sha256 line, then the
    array in .npy format, written atomically. A damaged entry is recomputed with a warning, so a
    flipped bit can never reach a published number. Opening it removes the temp files that killed
    ablation runs left behind (`Cache.sweep`). `computed` and `loaded` count this object's writes
    and hits, so a caller can tell how a run got its numbers."""

    def __init__(self, root: Path, fingerprint: str, data_hash: str, method: str):
        self.store = Cache(root)
        self.directory = self.store.root / "ablation" / fingerprint / f"{data_hash}-{method}"
        self.prefix = f"{CODE_VERSION}|{fingerprint}|{data_hash}|{method}"
        self.computed = 0
        self.loaded = 0
        self.store.sweep(self.store.root / "ablation")

    def entry_path(self, kind: str, mask: np.ndarray) -> Path:
        """Where the `kind` ("mask" or "importance") result of `mask` is stored."""
        mask_bytes = np.ascontiguousarray(mask, dtype=np.float32).tobytes()
        key = hashlib.sha256(f"{self.prefix}|{kind}|".encode() + mask_bytes).hexdigest()[:24]
        return self.directory / f"{kind}-{key}.npy"

    def get(self, kind: str, mask: np.ndarray) -> np.ndarray | None:
        value = self.store.get_array(self.entry_path(kind, mask))
        if value is not None:
            self.loaded += 1
        return value

    def put(self, kind: str, mask: np.ndarray, value: np.ndarray) -> None:
        self.store.put_array(self.entry_path(kind, mask), value)
        self.computed += 1

    def stats_path(self, key: str) -> Path:
        """Where an experiment's record (its statistics) under `key` is stored, beside its masks."""
        return self.directory / f"stats-{key}.json"

    def get_stats(self, key: str) -> Any:
        """The experiment record stored under `key` (plain JSON data); None when missing or damaged."""
        payload = self.store.read_bytes(self.stats_path(key))
        if payload is None:
            return None
        try:
            return json.loads(payload)
        except ValueError:
            self.store.damaged(self.stats_path(key), "not JSON")
            return None

    def put_stats(self, key: str, record: Any) -> None:
        self.store.write_bytes(self.stats_path(key), json.dumps(record).encode())


# -- replacements of methods mean and resample ----------------------------------------------------------
class Replacements:
    """What methods "mean" and "resample" replace a masked head by, for the forwards of one masker over one
    task (`reportgen.model.replacements`): the means from one unmasked pass over `mean_batches` (every input
    of the task once), made when first needed; for resample, input i's donor is input `donor_of[i]`, a
    derangement drawn from `seed` (the settings' first seed), and a batch's donor contexts are kept under its
    key while they fit in `budget` bytes (else computed again at each use). Nothing for zero and uniform."""

    def __init__(self, task: Task, masker: HeadMasker, seed: int, mean_batches: Callable[[], Sequence[Batch]],
                 budget: int = 2 << 30):
        self.task, self.masker, self.seed, self.budget = task, masker, seed, budget
        self._mean_batches = mean_batches
        self.means: MeanContexts | None = None
        self.donor_of: np.ndarray | None = None
        self._kept: dict[Any, DonorContexts] = {}
        self._kept_bytes = 0

    @property
    def needed(self) -> bool:
        return self.masker.method in REPLACED

    def prepare(self) -> None:
        """Compute the means (and draw the donors) once, before the first masked forward."""
        if self.needed and self.means is None:
            if self.masker.method == "resample":
                self.donor_of = derangement(len(self.task.units), self.seed)
            self.means = mean_contexts(self.masker, self._mean_batches(), self.task.unit_outputs)

    def for_batch(self, batch: Batch, key: Any = None) -> Replacement | None:
        """The replacement of masked forwards on `batch` (or its rows repeated for stacked masks); `key` names
        a batch that comes again (the engine's batch index), so its donors can be kept. None for zero, uniform."""
        if not self.needed:
            return None
        self.prepare()
        if self.masker.method == "mean":
            return self.means
        donors = self._kept.get(key) if key is not None else None
        if donors is None:
            donor_batch = self.task.make_batch(self.donor_of[batch.units])
            donors = donor_contexts(self.masker, donor_batch, self.task.unit_outputs, self.means)
            if key is not None and self._kept_bytes + donors.nbytes <= self.budget:
                self._kept[key] = donors
                self._kept_bytes += donors.nbytes
        return donors

    def using(self, replacement: Replacement | None) -> AbstractContextManager[None]:
        """One forward's scope for a `for_batch` replacement (nothing for zero and uniform)."""
        return nullcontext() if replacement is None else self.masker.replacing(replacement)

    def scope(self, batch: Batch, key: Any = None) -> AbstractContextManager[None]:
        """`using(for_batch(batch, key))`: the scope of one forward on `batch`."""
        return self.using(self.for_batch(batch, key))


def cache_method(method: str, seed: int) -> str:
    """The method as `ResultCache` keys it: resample's outputs depend on its donors, drawn from the first seed,
    so its results are kept per seed ("resample-<seed>"); the other methods' keys are their names."""
    return f"{method}-{seed}" if method == "resample" else method


# -- the engine -------------------------------------------------------------------------------------
def first_masked_layer(mask: np.ndarray) -> int:
    """Lowest layer with a head not kept as is; the number of layers when none is masked."""
    touched = np.flatnonzero((mask != 1).any(axis=-1))
    return int(touched[0]) if len(touched) else mask.shape[-2]


def _even_split(count: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges splitting range(count) into `parts` runs of nearly equal length."""
    bounds = [round(part * count / parts) for part in range(parts + 1)]
    return [(lo, hi) for lo, hi in pairwise(bounds) if hi > lo]


def _place(results: torch.Tensor | None, out: torch.Tensor, rows: int, where: Any) -> torch.Tensor:
    """Write `out` into `results[where]`, allocating [rows, *out.shape[1:]] zeros on first use."""
    if results is None:
        results = torch.zeros(rows, *out.shape[1:], device=out.device)
    results[where] = out
    return results


class Engine:
    """Evaluates masks fast; see the module docstring for what makes it fast.

    Use it as a context manager: the masker's hooks live as long as the `with` block. The first
    evaluation makes the recording pass; `record_depth` then says how many layers it kept. Its masked
    passes run in the task's `precision` (module docstring); importance in float32. `seed` draws method
    "resample"'s donors (the settings' first seed).
    """

    def __init__(self, task: Task, method: Method, *, batch_tokens: int = 4096, record_bytes: int = 2 << 30,
                 max_stack: int = 16, seed: int = 0):
        self.task = task
        self.batch_tokens = batch_tokens
        self.batches = task.length_batches(batch_tokens)
        self.masker = HeadMasker(task.model, method)
        self.layers = self.masker.sites.n_layers
        self.heads = self.masker.sites.heads
        # the group of each flat layer (head_sites.HeadSites.groups): "encoder", "decoder" or "cross"
        self.groups = list(self.masker.sites.groups)
        self.record_bytes = record_bytes
        self.max_stack = max_stack
        self.resumes = self.masker.can_resume  # start inside the first masked layer (BERT layout, not uniform)
        self.replacements = Replacements(task, self.masker, seed, lambda: self.batches, record_bytes)
        self.record_depth: int | None = None  # None until the recording pass ran
        self._recorded: list[dict[int, Any]] = []  # per batch, what the recording pass kept
        self._unmasked: torch.Tensor | None = None
        self.precision = task.precision
        if self.precision == "float16" and task.device.type != "cuda":
            raise ValueError("precision float16 needs the model on a CUDA device (ablation.precision)")

    def reduced(self) -> AbstractContextManager[Any]:
        """The scope of a masked forward: autocast to the reduced format, or nothing for float32."""
        return precision_scope(self.precision, self.task.device)

    @property
    def masks_per_pass(self) -> int:
        """How many masks to evaluate together: as many as the smallest batch can stack in one
        forward within the budget (larger batches take them a few at a time)."""
        smallest = min(batch.tokens for batch in self.batches)
        return int(max(1, min(self.max_stack, self.batch_tokens // smallest)))

    def stack(self, batch: Batch) -> int:
        """Masks per forward for this batch: the batch repeated stays within the token budget."""
        return int(max(1, min(self.max_stack, self.batch_tokens // batch.tokens)))

    def __enter__(self) -> "Engine":
        self.masker.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.masker.__exit__(*exc)
        self.replacements = Replacements(self.task, self.masker, self.replacements.seed, lambda: self.batches,
                                         self.record_bytes)
        self._recorded = []
        self._unmasked = None
        self.record_depth = None

    def _affordable_depth(self) -> int:
        """How many layers' recordings (float32, every batch) fit in `record_bytes`. Replaying
        never needs the last layer's output; resuming needs the last layer's attention. Nothing for an
        encoder-decoder, whose layers do not run in flat order."""
        if not self.masker.can_replay:
            return 0
        hidden = self.task.model.config.hidden_size
        tokens = sum(batch.tokens for batch in self.batches)
        if self.resumes:
            per_layer = tokens * (hidden + self.heads * self.masker.sites.head_dim) * 4
            return int(min(self.layers, self.record_bytes // max(per_layer, 1)))
        per_layer = tokens * hidden * 4
        return int(min(self.layers - 1, self.record_bytes // max(per_layer, 1)))

    def _record(self) -> None:
        """One unmasked pass over every batch that keeps, for the layers below `record_depth`,
        each layer's attention context and sum (when resuming) or its output, and the unmasked
        unit outputs."""
        self.replacements.prepare()
        self.record_depth = self._affordable_depth()
        self._recorded = []
        results: torch.Tensor | None = None
        with torch.inference_mode():
            for batch in self.batches:
                with self.masker.recording(self.record_depth, attention=self.resumes) as recorded, self.reduced():
                    out = self.task.unit_outputs(batch).float()
                results = _place(results, out, len(self.task.units), torch.as_tensor(batch.units, device=out.device))
                self._recorded.append(recorded)
        self._unmasked = results

    def unit_outputs(self, masks: np.ndarray) -> torch.Tensor:
        """[masks, units, ...] outputs of the model on every distinct text under each mask."""
        if self.record_depth is None:
            self._record()
        masks = np.asarray(masks, dtype=np.float32).reshape(-1, self.layers, self.heads)
        first = min(first_masked_layer(mask) for mask in masks)
        if first >= self.layers:  # nothing masked: the recording pass computed exactly this
            with torch.inference_mode():
                return self._unmasked.unsqueeze(0).repeat(len(masks), *([1] * self._unmasked.dim()))
        resume = self.resumes and self.record_depth > 0
        start = min(first, self.record_depth - 1) if resume else min(first, self.record_depth)
        start_from = self.masker.resuming if resume else self.masker.replaying
        results: torch.Tensor | None = None
        with torch.inference_mode():
            for index, (batch, recorded) in enumerate(zip(self.batches, self._recorded, strict=True)):
                replacement = self.replacements.for_batch(batch, index)
                for lo, hi in _even_split(len(masks), math.ceil(len(masks) / self.stack(batch))):
                    chunk = torch.as_tensor(masks[lo:hi], device=self.task.device)
                    copies = len(chunk)
                    stacked = chunk[0] if copies == 1 else chunk.repeat_interleave(batch.rows, dim=0)
                    with (self.masker.masking(stacked), start_from(recorded, start, copies=copies),
                          self.replacements.using(replacement), self.reduced()):
                        out = self.task.unit_outputs(batch.tile(copies)).float()
                    out = out.view(copies, batch.rows, *out.shape[1:])
                    units = torch.as_tensor(batch.units, device=out.device)
                    if results is None:
                        results = torch.zeros(len(masks), len(self.task.units), *out.shape[2:], device=out.device)
                    results[lo:hi, units] = out
        return results

    def evaluate(self, masks: np.ndarray) -> list[np.ndarray]:
        """Per-example outputs [examples, columns] for each mask."""
        units = self.unit_outputs(masks)
        with torch.inference_mode():
            return [self.task.scored(self.task.example_outputs(per_mask).double().cpu().numpy())
                    for per_mask in units]

    def importance(self, mask: np.ndarray) -> np.ndarray:
        """Michel et al. head importance at `mask`: mean over tokens of |d loss / d gate|, [layers, heads].

        One gate per (token, head) is multiplied into the mask; the absolute gradient is
        summed over all real tokens and divided by their number (their code's per-token
        variant). An encoder-decoder's encoder layers count the source's tokens, its decoder
        self- and cross-attention layers the decoder input's (`_gate_tokens`). The loss depends
        on the gates only through the unit outputs, so we take d loss / d unit outputs once on
        the whole set and back-propagate it batch by batch.

        Float32 throughout whatever the precision: the gated passes and their gradients, and the unit
        outputs d loss / d outputs is taken at (under a reduced precision they come from a float32 forward
        of their own, `_float32_outputs`, not from the reduced masked pass).
        """
        with _deterministic():
            return self._importance(mask)

    def _importance(self, mask: np.ndarray) -> np.ndarray:
        mask_tensor = torch.as_tensor(np.asarray(mask, dtype=np.float32), device=self.task.device)
        with torch.enable_grad():
            at = self.unit_outputs(mask[None])[0] if self.precision == "float32" else self._float32_outputs(mask)
            units = at.clone().requires_grad_(True)
            self.task.loss(units).backward()
            upstream = units.grad
        total = torch.zeros(self.layers, self.heads, dtype=torch.float64, device=self.task.device)
        tokens = torch.zeros(self.layers, dtype=torch.float64, device=self.task.device)
        for index, batch in enumerate(self.batches):
            real = _gate_tokens(batch, self.masker.sites.groups)  # [layers, rows, tokens]
            gates = torch.ones(self.layers, batch.rows, real.shape[-1], self.heads, device=self.task.device,
                               requires_grad=True)
            replaced = self.replacements.scope(batch, index)
            with self.masker.masking(mask_tensor), self.masker.gated(gates), replaced, torch.enable_grad():
                out = self.task.unit_outputs(batch).float()
                (out * upstream[torch.as_tensor(batch.units, device=out.device)]).sum().backward()
            total += (gates.grad.abs().to(torch.float64) * real[..., None]).sum(dim=(1, 2))
            tokens += real.sum(dim=(1, 2))
        return (total / tokens.clamp_min(1)[:, None]).cpu().numpy()

    def _float32_outputs(self, mask: np.ndarray) -> torch.Tensor:
        """[units, ...] outputs under `mask` from full float32 forwards (no recording, no autocast)."""
        mask_tensor = torch.as_tensor(np.asarray(mask, dtype=np.float32), device=self.task.device)
        results: torch.Tensor | None = None
        with torch.inference_mode(), self.masker.masking(mask_tensor):
            for index, batch in enumerate(self.batches):
                with self.replacements.scope(batch, index):
                    out = self.task.unit_outputs(batch).float()
                results = _place(results, out, len(self.task.units), torch.as_tensor(batch.units, device=out.device))
        return results


def _gate_tokens(batch: Batch, groups: Sequence[str]) -> torch.Tensor:
    """[layers, rows, tokens] float64: 1 at the real tokens whose per-token gates each layer's heads read,
    over the widest stream. A one-stack model's layers read its one input; an encoder-decoder's encoder
    layers read the source, its decoder self- and cross-attention layers the decoder input (the gates of
    a shorter stream are its first tokens: `reportgen.model.masking.head_gates`)."""
    source = batch.inputs["attention_mask"]
    target = batch.inputs.get("decoder_attention_mask", source)
    width = max(source.shape[1], target.shape[1])
    streams = {name: torch.nn.functional.pad(real, (0, width - real.shape[1])).to(torch.float64)
               for name, real in (("source", source), ("target", target))}
    by_group = {"encoder": streams["source"], "decoder": streams["target"], "cross": streams["target"]}
    if "cross" not in groups:  # a decoder-only model's layers ("decoder") read its one input
        by_group["decoder"] = streams["source"]
    return torch.stack([by_group[group] for group in groups])


@contextmanager
def _deterministic() -> Iterator[None]:
    """Deterministic kernels for one scope, then the caller's setting back.

    Some backward kernels on the CPU add their threads' partial sums in whatever order the threads
    finish, so two importance passes over the same inputs differed in the 8th significant digit
    (measured: 4e-8 relative, between calls and between processes), and a `--reproducible` build
    with it. Their deterministic variants make the gradients bit-identical (and cost nothing
    measurable: 0.74 s against 0.64-1.13 s per pass of the default task here)."""
    before = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=warn_only)


def evaluate_plain(task: Task, mask: np.ndarray, method: Method, batch_size: int = 32, seed: int = 0) -> np.ndarray:
    """The straightforward way, for checks and the benchmark: examples in file order,
    padded to the batch maximum, every text of every example encoded, full forward (in the task's precision).
    Methods mean and resample take their means from padded batches of the distinct texts in order, and
    resample its donors (drawn from `seed`) from one forward per batch."""
    slots = task.example_units.shape[1]
    results: torch.Tensor | None = None
    mask_tensor = torch.as_tensor(np.asarray(mask, dtype=np.float32), device=task.device)
    def in_order() -> list[Batch]:
        return [task.make_batch(range(lo, min(lo + batch_size, len(task.units))))
                for lo in range(0, len(task.units), batch_size)]

    with HeadMasker(task.model, method) as masker:
        replacements = Replacements(task, masker, seed, in_order)
        replacements.prepare()
        with masker.masking(mask_tensor), torch.no_grad(), precision_scope(task.precision, task.device):
            for lo in range(0, task.n_examples, batch_size):
                for slot in range(slots):
                    units = task.example_units[lo:lo + batch_size, slot]
                    batch = task.make_batch(units)
                    with replacements.scope(batch):
                        out = task.unit_outputs(batch).float()
                    results = _place(results, out, len(task.units), torch.as_tensor(units, device=out.device))
        return task.scored(task.example_outputs(results).double().cpu().numpy())


# -- evaluating through the cache ---------------------------------------------------------------------
def _stack_groups(masks: Sequence[np.ndarray], todo: list[int], step: int) -> list[list[int]]:
    """`todo` (indexes into `masks`) in stacks of at most `step` masks that start at the same layer,
    so one forward pass serves a whole stack."""
    todo = sorted(todo, key=lambda index: first_masked_layer(masks[index]))
    groups = []
    while todo:
        first = first_masked_layer(masks[todo[0]])
        group = [index for index in todo[:step] if first_masked_layer(masks[index]) == first]
        todo = todo[len(group):]
        groups.append(group)
    return groups


class Runner:
    """Evaluates masks through the cache and reports progress per experiment."""

    def __init__(self, engine: Engine, cache: ResultCache, progress: Progress | None):
        self.engine = engine
        self.cache = cache
        self.progress = progress
        self.memo: dict[bytes, np.ndarray] = {}
        self.counted: dict[str, tuple[int, int]] = {}  # experiment -> (masks asked for, masks computed)
        self.paced = False  # whether a stack was split for a one-mask forward (the pace a build's first site waits for)

    def outputs(self, name: str, masks: Sequence[np.ndarray], done: int = 0,
                total: int | None = None) -> list[np.ndarray]:
        """Per-example outputs of each mask, from memory, disk, or computed in stacks of equal start layer."""
        total = len(masks) + done if total is None else total
        result: list[np.ndarray | None] = [None] * len(masks)
        todo: list[int] = []
        for index, mask in enumerate(masks):
            key = mask.astype(np.float32).tobytes()
            hit = self.memo.get(key)
            if hit is None:
                hit = self.cache.get("mask", mask)
            if hit is not None:
                self.memo[key] = hit
                result[index] = hit
            else:
                todo.append(index)
        asked, computed = self.counted.get(name, (0, 0))
        self.counted[name] = (asked + len(masks), computed + len(todo))
        finished = done + len(masks) - len(todo)
        self.tick(name, finished, total)
        groups = _stack_groups(masks, todo, self.engine.masks_per_pass)
        if groups and len(groups[0]) > 1 and not self.paced:  # one mask first: its time is the pace (first_site_due)
            self.paced = True
            groups[:1] = [groups[0][:1], groups[0][1:]]
        stacks = [np.stack([masks[index] for index in group]) for group in groups]
        for number, evaluated in self.evaluate_stacks(stacks):
            group = groups[number]
            for index, out in zip(group, evaluated, strict=True):
                self.cache.put("mask", masks[index], out)
                self.memo[masks[index].astype(np.float32).tobytes()] = out
                result[index] = out
            finished += len(group)
            self.tick(name, finished, total)
        return result  # type: ignore[return-value]

    def evaluate_stacks(self, stacks: list[np.ndarray]) -> Iterator[tuple[int, list[np.ndarray]]]:
        """(position in `stacks`, per-mask outputs) for every stack, in the order they finish: the seam
        where `reportgen.ablation.ray_runner.RayRunner` hands the same stacks to Ray actors instead."""
        for number, stack in enumerate(stacks):
            yield number, self.engine.evaluate(stack)

    def importance(self, mask: np.ndarray) -> np.ndarray:
        """Michel et al. head importance at `mask` (`Engine.importance`), from the cache when stored."""
        kind = "importance-calibrated"  # the similarity loss is calibrated since issue 12: not the old entries
        hit = self.cache.get(kind, mask)
        if hit is None:
            hit = self.engine.importance(mask)
            self.cache.put(kind, mask, hit)
        return hit

    def tick(self, name: str, done: int, total: int) -> None:
        """Tell the progress callback, if any, that `done` of `total` steps of `name` are finished."""
        if self.progress is not None:
            self.progress(name, done, total)
