"""Head-ablation experiments: which heads, layers and fractions of heads a model can lose.

Experiments (each optional):
- baseline: the task metric with a 95% percentile bootstrap CI over examples;
- single_heads: each head masked alone; paired permutation test over examples against
  the baseline, Holm-corrected (or Bonferroni) for the number of heads;
- random_fraction: p% of all heads masked at random, several seeds per p;
- layer_halves: p% of all heads taken only from the lower half of the layers, and only
  from the upper half (lower = the first floor(L/2) layers);
- whole_layers: every head of one layer masked, for each layer (same test as heads);
- importance: Michel, Levy and Neubig (2019) head importance, E_x |d L / d xi_h| with
  the absolute value taken per token and averaged over tokens; optional per-layer L2
  normalisation as in their code; then pruning the least important heads 10% at a time
  (optionally recomputing importance after each step) next to random pruning orders.

Masking follows `reportgen.masking`: "zero" removes a head (Michel et al.), "uniform"
replaces its attention by 1/n over the keys (Kovaleva et al. 2019).

Speed: the cost is forward passes, so `Engine` (1) runs each distinct text once,
(2) buckets texts by exact token length, so a batch needs no padding (only buckets too
small for a forward of their own are merged with their neighbours), (3) runs under
`torch.inference_mode`, (4) records the unmasked model once and starts each masked forward
at the first layer its mask touches (a mask in layer l cannot change layers below l):
for method "zero" on the BERT layout it starts inside layer l, at its attention
LayerNorm, from the recorded per-head context and attention sum less the masked heads'
share of the output projection (`HeadMasker.resume`), which skips layer l's Q, K, V
projections and attention too; otherwise it replays the outputs of layers below l,
(5) stacks several masks in one forward when batches are small, and (6) answers the
all-ones mask from the recording pass itself.
`evaluate_plain` is the straightforward way, kept to check that both agree.

Every finished mask's per-example outputs are stored under the cache directory, keyed
by model fingerprint, data hash, method, mask and code version, so an interrupted run resumes;
each entry carries a sha256 (`ResultCache`), so a damaged one is recomputed, never published.

An undefined metric (Spearman of one pair, or of gold scores that are all equal; masked-LM
accuracy with no token to mask) has no change to test: no test runs, no head or layer is
marked significant, its p-values are None, and the report and a warning name the cause.
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reportgen.cache import Cache
from reportgen.config import AblationSettings
from reportgen.masking import HeadMasker, Method
from reportgen.tasks import Task, load_task

CODE_VERSION = "ablation-3"  # bump when a change alters cached per-mask outputs or their file format
EXPERIMENTS = ("baseline", "single_heads", "random_fraction", "layer_halves", "whole_layers", "importance")
Progress = Callable[[str, int, int], None]


# -- result cache on disk -------------------------------------------------------------------------
class ResultCache:
    """One entry per finished mask, stored through `reportgen.cache.Cache`: a sha256 line, then the
    array in .npy format, written atomically. A damaged entry is recomputed with a warning, so a
    flipped bit can never reach a published number. Opening it removes the temp files that killed
    ablation runs left behind (`Cache.sweep`)."""

    def __init__(self, root: Path, fingerprint: str, data_hash: str, method: str):
        self.store = Cache(root)
        self.dir = self.store.root / "ablation" / fingerprint / f"{data_hash}-{method}"
        self.prefix = f"{CODE_VERSION}|{fingerprint}|{data_hash}|{method}"
        self.computed = 0
        self.loaded = 0
        self.store.sweep(self.store.root / "ablation")

    def _path(self, kind: str, mask: np.ndarray) -> Path:
        key = hashlib.sha256(f"{self.prefix}|{kind}|".encode() + np.ascontiguousarray(mask, dtype=np.float32).tobytes()).hexdigest()[:24]
        return self.dir / f"{kind}-{key}.npy"

    def get(self, kind: str, mask: np.ndarray) -> np.ndarray | None:
        value = self.store.get_array(self._path(kind, mask))
        if value is not None:
            self.loaded += 1
        return value

    def put(self, kind: str, mask: np.ndarray, value: np.ndarray) -> None:
        self.store.put_array(self._path(kind, mask), value)
        self.computed += 1


# -- the fast evaluation engine ---------------------------------------------------------------------
def first_masked_layer(mask: np.ndarray) -> int:
    """Lowest layer with a head not kept as is; the number of layers when none is masked."""
    touched = np.flatnonzero((mask != 1).any(axis=-1))
    return int(touched[0]) if len(touched) else mask.shape[-2]


class Engine:
    """Evaluates masks fast; see the module docstring for what makes it fast."""

    def __init__(self, task: Task, method: Method, *, batch_tokens: int = 4096, record_bytes: int = 2 << 30, max_stack: int = 16):
        self.task = task
        self.batch_tokens = batch_tokens
        self.batches = task.length_batches(batch_tokens)
        self.masker = HeadMasker(task.model, method)
        self.layers = self.masker.sites.n_layers
        self.heads = self.masker.sites.heads
        self.record_bytes = record_bytes
        self.max_stack = max_stack
        self.resumes = self.masker.can_resume  # start inside the first masked layer (zero, BERT layout)
        self._recorded: list[dict[int, Any]] | None = None
        self._record_depth = 0
        self._unmasked: torch.Tensor | None = None

    @property
    def masks_per_pass(self) -> int:
        """How many masks to evaluate together: as many as the smallest batch can stack in one
        forward within the budget (larger batches take them a few at a time)."""
        smallest = min(b.tokens for b in self.batches)
        return int(max(1, min(self.max_stack, self.batch_tokens // smallest)))

    def stack(self, batch) -> int:
        """Masks per forward for this batch: the batch repeated stays within the token budget."""
        return int(max(1, min(self.max_stack, self.batch_tokens // batch.tokens)))

    def __enter__(self) -> "Engine":
        self.masker.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.masker.__exit__(*exc)
        self._recorded = None

    def _record(self) -> None:
        """One unmasked pass over every batch that keeps, for depths 0..K-1 (K fits the memory
        budget), each layer's attention context and sum (when resuming) or its output, and
        the unmasked unit outputs."""
        hidden = self.task.model.config.hidden_size
        tokens = sum(b.tokens for b in self.batches)
        if self.resumes:
            per_layer = tokens * (hidden + self.heads * self.masker.sites.head_dim) * 4
            self._record_depth = int(min(self.layers, self.record_bytes // max(per_layer, 1)))
        else:
            per_layer = tokens * hidden * 4
            self._record_depth = int(min(self.layers - 1, self.record_bytes // max(per_layer, 1)))
        self._recorded = []
        results: torch.Tensor | None = None
        with torch.inference_mode():
            for batch in self.batches:
                self.masker.set_mask(None)
                self.masker.replay({}, 0)
                if self.resumes:
                    self.masker.record_attention_below(self._record_depth)
                else:
                    self.masker.record_below(self._record_depth)
                out = self.task.unit_outputs(batch).float()
                if results is None:
                    results = torch.zeros(len(self.task.units), *out.shape[1:], device=out.device)
                results[torch.as_tensor(batch.units, device=out.device)] = out
                self._recorded.append(self.masker.recorded_attention if self.resumes else self.masker.recorded)
        self.masker.record_below(0)
        self.masker.record_attention_below(0)
        self._unmasked = results

    def unit_outputs(self, masks: np.ndarray) -> torch.Tensor:
        """[masks, units, ...] outputs of the model on every distinct text under each mask."""
        if self._recorded is None:
            self._record()
        masks = np.asarray(masks, dtype=np.float32).reshape(-1, self.layers, self.heads)
        first = min(first_masked_layer(m) for m in masks)
        if first >= self.layers:  # nothing masked: the recording pass computed exactly this
            with torch.inference_mode():
                return self._unmasked.unsqueeze(0).repeat(len(masks), *([1] * self._unmasked.dim()))
        resume = self.resumes and self._record_depth > 0
        start = min(first, self._record_depth - 1) if resume else min(first, self._record_depth)
        results: torch.Tensor | None = None
        with torch.inference_mode():
            for batch, recorded in zip(self.batches, self._recorded):
                parts = math.ceil(len(masks) / self.stack(batch))
                for lo, hi in _even_split(len(masks), parts):
                    chunk = torch.as_tensor(masks[lo:hi], device=self.task.device)
                    k = len(chunk)
                    self.masker.set_mask(chunk[0] if k == 1 else chunk.repeat_interleave(batch.rows, dim=0))
                    if resume:
                        self.masker.resume(recorded, start, copies=k)
                    else:
                        self.masker.replay(recorded, start, copies=k)
                    out = self.task.unit_outputs(batch.tile(k)).float()
                    out = out.view(k, batch.rows, *out.shape[1:])
                    if results is None:
                        results = torch.zeros(len(masks), len(self.task.units), *out.shape[2:], device=out.device)
                    results[lo:lo + k, torch.as_tensor(batch.units, device=out.device)] = out
        self.masker.clear()
        return results

    def evaluate(self, masks: np.ndarray) -> list[np.ndarray]:
        """Per-example outputs [examples, columns] for each mask."""
        units = self.unit_outputs(masks)
        with torch.inference_mode():
            return [self.task.example_outputs(u).double().cpu().numpy() for u in units]

    def importance(self, mask: np.ndarray) -> np.ndarray:
        """Michel et al. head importance at `mask`: mean over tokens of |d loss / d gate|, [layers, heads].

        One gate per (token, head) is multiplied into the mask; the absolute gradient is
        summed over all real tokens and divided by their number (their code's per-token
        variant). The loss depends on the gates only through the unit outputs, so we take
        d loss / d unit outputs once on the whole set and back-propagate it batch by batch.
        """
        mask_t = torch.as_tensor(np.asarray(mask, dtype=np.float32), device=self.task.device)
        with torch.enable_grad():
            units = self.unit_outputs(mask[None])[0].clone().requires_grad_(True)
            self.task.loss(units).backward()
            upstream = units.grad
        total = torch.zeros(self.layers, self.heads, dtype=torch.float64, device=self.task.device)
        tokens = 0
        for batch in self.batches:
            att = batch.inputs["attention_mask"]
            gates = torch.ones(self.layers, batch.rows, att.shape[1], self.heads, device=self.task.device, requires_grad=True)
            self.masker.set_mask(mask_t)
            self.masker.replay({}, 0)
            self.masker.gates = gates
            with torch.enable_grad():
                out = self.task.unit_outputs(batch).float()
                (out * upstream[torch.as_tensor(batch.units, device=out.device)]).sum().backward()
            real = att.to(torch.float64)[None, :, :, None]
            total += (gates.grad.abs().to(torch.float64) * real).sum(dim=(1, 2))
            tokens += int(att.sum())
        self.masker.clear()
        return (total / max(tokens, 1)).cpu().numpy()


def _even_split(n: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges splitting range(n) into `parts` runs of nearly equal length."""
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def evaluate_plain(task: Task, mask: np.ndarray, method: Method, batch_size: int = 32) -> np.ndarray:
    """The straightforward way, for checks and the benchmark: examples in file order,
    padded to the batch maximum, every text of every example encoded, full forward."""
    slots = task.example_units.shape[1]
    results: torch.Tensor | None = None
    with HeadMasker(task.model, method) as masker, torch.no_grad():
        masker.set_mask(torch.as_tensor(np.asarray(mask, dtype=np.float32), device=task.device))
        for lo in range(0, task.n_examples, batch_size):
            for slot in range(slots):
                units = task.example_units[lo:lo + batch_size, slot]
                out = task.unit_outputs(task.make_batch(units)).float()
                if results is None:
                    results = torch.zeros(len(task.units), *out.shape[1:], device=out.device)
                results[torch.as_tensor(units, device=out.device)] = out
        return task.example_outputs(results).double().cpu().numpy()


# -- statistics -------------------------------------------------------------------------------------
def bootstrap_ci(task: Task, outputs: np.ndarray, samples: int, seed: int, level: float = 0.95) -> dict[str, list[float]]:
    """Percentile bootstrap CI of every metric, resampling examples with replacement."""
    rng = np.random.default_rng([seed, 1])
    n = task.n_examples
    draws: dict[str, list[np.ndarray]] = {}
    for lo in range(0, samples, _rows_per_chunk(n)):
        idx = rng.integers(0, n, size=(min(_rows_per_chunk(n), samples - lo), n))
        for name, values in task.metrics(outputs[idx], task.gold[idx]).items():
            draws.setdefault(name, []).append(values)
    tail = (1 - level) / 2 * 100
    return {name: [float(np.nanpercentile(np.concatenate(v), tail)), float(np.nanpercentile(np.concatenate(v), 100 - tail))] for name, v in draws.items()}


def _rows_per_chunk(n: int) -> int:
    return max(1, 2_000_000 // max(n, 1))


def paired_permutation_p(task: Task, base: np.ndarray, other: np.ndarray, permutations: int, seed: int) -> float:
    """Two-sided p-value of the primary metric's change, swapping each example's two outputs at random.

    Under the null that masking does not matter, an example's (baseline, masked) outputs are
    exchangeable; the p-value counts swaps that change the metric at least as much as observed.
    NaN when the observed change is undefined (the metric is undefined under either condition):
    there is nothing to test. A swap whose change is undefined counts as at least as large, so
    an undefined resample can only make the test more conservative.
    """
    metric = task.primary
    gold = task.gold[None]
    observed = abs(task.metrics(other[None], gold)[metric][0] - task.metrics(base[None], gold)[metric][0])
    if not np.isfinite(observed):
        return float("nan")
    rng = np.random.default_rng([seed, 2])
    n = task.n_examples
    hits = 0
    for lo in range(0, permutations, _rows_per_chunk(n)):
        swap = rng.random((min(_rows_per_chunk(n), permutations - lo), n, 1)) < 0.5
        a = np.where(swap, base[None], other[None])
        b = np.where(swap, other[None], base[None])
        delta = np.abs(task.metrics(a, gold)[metric] - task.metrics(b, gold)[metric])
        hits += int(np.sum((delta >= observed - 1e-12) | ~np.isfinite(delta)))
    return (1 + hits) / (1 + permutations)


def adjust(p: Sequence[float], method: str) -> np.ndarray:
    """Family-wise corrected p-values: Holm's step-down or Bonferroni.

    The family is the tests that ran: a NaN p-value (no test, the change was undefined)
    stays NaN and does not count towards the number of tests."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full(len(p), np.nan)
    ran = np.flatnonzero(np.isfinite(p))
    m = len(ran)
    if method == "bonferroni":
        out[ran] = np.minimum(1.0, p[ran] * m)
        return out
    order = ran[np.argsort(p[ran], kind="stable")]
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(1.0, stepped)
    return out


# -- running the experiments ---------------------------------------------------------------------
class Runner:
    """Evaluates masks through the cache and reports progress per experiment."""

    def __init__(self, engine: Engine, cache: ResultCache, progress: Progress | None):
        self.engine = engine
        self.cache = cache
        self.progress = progress
        self.memo: dict[bytes, np.ndarray] = {}

    def outputs(self, name: str, masks: Sequence[np.ndarray], done: int = 0, total: int | None = None) -> list[np.ndarray]:
        """Per-example outputs of each mask, from memory, disk, or computed in stacks of equal start layer."""
        total = len(masks) + done if total is None else total
        result: list[np.ndarray | None] = [None] * len(masks)
        todo: list[int] = []
        for i, mask in enumerate(masks):
            key = mask.astype(np.float32).tobytes()
            hit = self.memo.get(key)
            if hit is None:
                hit = self.cache.get("mask", mask)
            if hit is not None:
                self.memo[key] = hit
                result[i] = hit
            else:
                todo.append(i)
        finished = done + len(masks) - len(todo)
        self._tick(name, finished, total)
        todo.sort(key=lambda i: first_masked_layer(masks[i]))
        step = self.engine.masks_per_pass
        while todo:
            first = first_masked_layer(masks[todo[0]])
            group = [i for i in todo[:step] if first_masked_layer(masks[i]) == first]
            todo = todo[len(group):]
            for i, out in zip(group, self.engine.evaluate(np.stack([masks[i] for i in group]))):
                self.cache.put("mask", masks[i], out)
                self.memo[masks[i].astype(np.float32).tobytes()] = out
                result[i] = out
            finished += len(group)
            self._tick(name, finished, total)
        return result  # type: ignore[return-value]

    def importance(self, mask: np.ndarray) -> np.ndarray:
        hit = self.cache.get("importance", mask)
        if hit is None:
            hit = self.engine.importance(mask)
            self.cache.put("importance", mask, hit)
        return hit

    def _tick(self, name: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(name, done, total)


def _floats(a) -> list:
    return np.asarray(a, dtype=np.float64).tolist()


def _prefix_mask(order: np.ndarray, count: int, shape: tuple[int, int]) -> np.ndarray:
    """Mask the first `count` heads of a random order (flat head indices).

    Each seed draws one order and every fraction masks a prefix of it: each mask is still a
    uniform random subset of its size, the curves over p are nested (less noisy), and the
    random pruning order of the importance experiment reuses the very same masks.
    """
    mask = np.ones(shape[0] * shape[1], dtype=np.float32)
    mask[order[:count]] = 0
    return mask.reshape(shape)


def _random_order(seed: int, pool: np.ndarray, stream: int) -> np.ndarray:
    return np.random.default_rng([seed, stream]).permutation(pool)


def run_ablations(
    model_dir: Path,
    settings: AblationSettings,
    *,
    device: str,
    cache_dir: Path,
    fingerprint: str,
    progress: Progress | None = None,
) -> dict:
    """Run the enabled experiments and return plain JSON-able results (see the module docstring)."""
    started = time.perf_counter()
    task = load_task(
        settings.task, Path(model_dir), settings.data, device=device, fmt=settings.format, header=settings.header,
        columns=settings.columns, limit=settings.limit, max_length=settings.max_length,
        mlm_probability=settings.mlm_probability, mlm_seed=settings.mlm_seed,
    )
    cache = ResultCache(Path(cache_dir), fingerprint, task.data_hash(), settings.method)
    with Engine(task, settings.method, batch_tokens=settings.batch_tokens) as engine:
        runner = Runner(engine, cache, progress)
        report = _experiments(task, engine, runner, settings)
    report["cache"] = {"computed": cache.computed, "from_cache": cache.loaded, "directory": str(cache.dir)}
    report["seconds"] = round(time.perf_counter() - started, 2)
    return plain(report)


def plain(value: Any) -> Any:
    """JSON-able copy: numpy arrays and scalars become lists and numbers, NaN becomes None."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(value) else float(value)
    return value


def _experiments(task: Task, engine: Engine, runner: Runner, s: AblationSettings) -> dict:
    L, H = engine.layers, engine.heads
    shape = (L, H)
    seed = s.seeds[0]
    on = s.experiments
    base_mask = np.ones(shape, dtype=np.float32)

    def point(outputs: np.ndarray) -> dict[str, float]:
        return {k: float(v[0]) for k, v in task.metrics(outputs[None], task.gold[None]).items()}

    base = runner.outputs("baseline", [base_mask])[0]
    base_metrics = point(base)
    base_value = base_metrics[task.primary]
    undefined = task.undefined_reason(base)
    if undefined:
        warnings.warn(f"ablation: {task.primary} is undefined on the task data ({undefined}); no significance "
                      "test was run and no head or layer is marked significant")

    def relative(value: float) -> float:
        return (value - base_value) / abs(base_value) if base_value else float("nan")

    report: dict[str, Any] = {
        "task": {
            "type": task.kind, "data": s.data, "examples": task.n_examples, "distinct_texts": len(task.units),
            "metric": task.primary, "metrics": list(task.metric_names), "higher_is_better": task.higher_is_better,
            "method": s.method, "method_note": "zero: head output removed (Michel et al. 2019)" if s.method == "zero"
            else "uniform: head attention replaced by 1/n over non-padding keys (Kovaleva et al. 2019)",
            "undefined": undefined,  # why the metric is undefined on this data, else None
        },
        "layers": L, "heads": H,
        "experiments": [name for name in EXPERIMENTS if getattr(on, name)],
    }
    if on.baseline:
        report["baseline"] = {
            "metric": task.primary, "value": base_value, "metrics": base_metrics,
            "ci": {name: [math.nan, math.nan] for name in task.metric_names} if undefined
            else bootstrap_ci(task, base, s.bootstrap_samples, seed), "confidence": 0.95,
            "bootstrap_samples": s.bootstrap_samples, "ci_method": "percentile bootstrap over examples",
        }

    def tested(name: str, masks: list[np.ndarray]) -> dict:
        outs = runner.outputs(name, masks)
        values = np.array([point(o)[task.primary] for o in outs])
        if undefined:  # no change can be measured, so none is tested and none is significant
            p = np.full(len(masks), np.nan)
            perms = 0
            test = f"no test: {task.primary} is undefined on the task data ({undefined})"
        else:
            # enough permutations that the smallest attainable p-value can pass the correction
            perms = max(s.permutations, math.ceil(2 * len(masks) / s.alpha))
            p = np.array([paired_permutation_p(task, base, o, perms, seed) for o in outs])
            test = f"paired permutation test over examples ({perms} permutations, two-sided)"
        p_adj = adjust(p, s.correction)
        return {
            "value": values, "delta": values - base_value, "relative": (values - base_value) / abs(base_value) if base_value else values * np.nan,
            "p_value": p, "p_adjusted": p_adj, "significant": np.isfinite(p_adj) & (p_adj < s.alpha),
            "test": test, "correction": s.correction, "alpha": s.alpha, "permutations": perms,
        }

    if on.single_heads:
        masks = []
        for l in range(L):
            for h in range(H):
                m = base_mask.copy()
                m[l, h] = 0
                masks.append(m)
        r = tested("single_heads", masks)
        report["single_heads"] = {
            k: (_floats(v.reshape(L, H)) if k in ("value", "delta", "relative", "p_value", "p_adjusted")
                else v.reshape(L, H).tolist() if k == "significant" else v)
            for k, v in r.items()
        }
        report["single_heads"]["baseline"] = base_value

    if on.whole_layers:
        masks = []
        for l in range(L):
            m = base_mask.copy()
            m[l] = 0
            masks.append(m)
        r = tested("whole_layers", masks)
        report["whole_layers"] = {k: (_floats(v) if k != "significant" and isinstance(v, np.ndarray) else v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()}
        report["whole_layers"]["layers"] = list(range(L))
        report["whole_layers"]["baseline"] = base_value

    def fraction_sweep(name: str, pools: dict[str, np.ndarray], fractions: list[float], first_stream: int) -> dict:
        orders = {(group, sd): _random_order(sd, pool, first_stream + i) for i, (group, pool) in enumerate(pools.items()) for sd in s.seeds}
        masks = [_prefix_mask(orders[group, sd], int(round(p * L * H)), shape) for group in pools for p in fractions for sd in s.seeds]
        outs = runner.outputs(name, masks)
        values = np.array([point(o)[task.primary] for o in outs]).reshape(len(pools), len(fractions), len(s.seeds))
        out = {}
        for gi, group in enumerate(pools):
            v = values[gi]
            rel = (v - base_value) / abs(base_value) if base_value else v * np.nan
            out[group] = {
                "values": _floats(v), "relative": _floats(rel), "mean": _floats(v.mean(1)), "std": _floats(v.std(1)),
                "min": _floats(v.min(1)), "max": _floats(v.max(1)),
                "relative_mean": _floats(rel.mean(1)), "relative_std": _floats(rel.std(1)),
            }
        return out

    all_heads = np.arange(L * H)
    if on.random_fraction:
        fractions = sorted(set(s.fractions))
        swept = fraction_sweep("random_fraction", {"all": all_heads}, fractions, 0)["all"]  # stream 0, as the random pruning order
        report["random_fraction"] = {"fractions": fractions, "n_masked": [int(round(p * L * H)) for p in fractions],
                                     "seeds": s.seeds, "baseline": base_value, **swept}

    if on.layer_halves:
        half = L // 2
        pools = {"lower": all_heads[: half * H], "upper": all_heads[half * H:]}
        limit = min(len(v) for v in pools.values())
        fractions = sorted(p for p in set(s.fractions) if round(p * L * H) <= limit)
        report["layer_halves"] = {
            "fractions": fractions, "n_masked": [int(round(p * L * H)) for p in fractions], "seeds": s.seeds,
            "lower_layers": list(range(half)), "upper_layers": list(range(half, L)), "baseline": base_value,
            "note": "p is a fraction of all heads, drawn only from one half; fractions above what a half holds are left out",
            **fraction_sweep("layer_halves", pools, fractions, 1),
        }

    if on.importance:
        report["importance"] = _importance(task, runner, s, shape, base_value, point)
    return report


def _importance(task: Task, runner: Runner, s: AblationSettings, shape: tuple[int, int], base_value: float, point) -> dict:
    L, H = shape
    fractions = sorted(set(s.fractions) | {0.0})
    targets = [int(round(p * L * H)) for p in fractions]
    steps_imp = len(fractions) - 1 if s.importance.recompute else 1
    total = steps_imp + len(fractions) * (1 + len(s.seeds))
    done = 0

    def normalised(raw: np.ndarray) -> np.ndarray:
        if s.importance.normalize == "layer_l2":  # Michel et al.'s code: divide each layer by its L2 norm
            return raw / (np.sqrt((raw**2).sum(-1, keepdims=True)) + 1e-20)
        return raw

    runner._tick("importance", 0, total)
    mask = np.ones(shape, dtype=np.float32)
    first = normalised(runner.importance(mask))
    done += 1
    runner._tick("importance", done, total)
    scores = first
    order: list[list[int]] = []
    prune_masks = []
    for step, count in enumerate(targets):
        if order and s.importance.recompute and count > len(order):
            scores = normalised(runner.importance(mask))
            done += 1
            runner._tick("importance", done, total)
        alive = np.flatnonzero(mask.ravel() == 1)
        need = count - len(order)
        if need > 0:
            ranked = alive[np.argsort(scores.ravel()[alive], kind="stable")][:need]
            mask = mask.copy()
            mask.ravel()[ranked] = 0
            order += [[int(i // H), int(i % H)] for i in ranked]
        prune_masks.append(mask.copy())
    done = steps_imp
    outs = runner.outputs("importance", prune_masks, done=done, total=total)
    pruned = np.array([point(o)[task.primary] for o in outs])
    done += len(prune_masks)
    random_masks = []
    for sd in s.seeds:
        perm = _random_order(sd, np.arange(L * H), 0)  # the random_fraction experiment's orders
        random_masks += [_prefix_mask(perm, count, shape) for count in targets]
    routs = runner.outputs("importance", random_masks, done=done, total=total)
    rvalues = np.array([point(o)[task.primary] for o in routs]).reshape(len(s.seeds), len(fractions))
    rel = (lambda v: (v - base_value) / abs(base_value)) if base_value else (lambda v: v * np.nan)
    return {
        "importance": _floats(first),
        "normalization": "per-layer L2 (Michel et al.'s code)" if s.importance.normalize == "layer_l2" else "none",
        "variant": "mean over tokens of |d loss / d gate| per token and head (Michel et al. 2019)",
        "loss": {"similarity": "squared error of cosine vs grade rescaled to [0, 1]", "classification": "cross-entropy",
                 "mlm": "cross-entropy over masked tokens"}[task.kind],
        "recompute": s.importance.recompute,
        "pruning": {"fractions": fractions, "n_pruned": targets, "value": _floats(pruned), "relative": _floats(rel(pruned)),
                    "order": order, "baseline": base_value},
        "random_order": {"seeds": s.seeds, "values": _floats(rvalues), "mean": _floats(rvalues.mean(0)), "std": _floats(rvalues.std(0)),
                         "relative_mean": _floats(rel(rvalues).mean(0))},
    }
