"""Activation patching as a build runs it (config `patching:`): the pairs, attribution patching of every head, exact
patching of every head (or, past `max_masks`, of attribution's top heads: Kramár et al. 2024's AtP* does the same),
each head at each position where the prompts allow it, and the statistics, as the report's plain records.

Cost, in patched forward rows: pairs x 2 directions x heads for the heads, and x tokens for the positions. The
heads come first within `max_masks`; the positions take what is left, for the heads whose exact effect is largest.
The whole record is cached by the model's files, the pairs' data and the settings: a rebuild runs nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reportgen.cache.store import Cache, key_of
from reportgen.config import PatchingSettings
from reportgen.datafiles import file_sha256
from reportgen.kinds import ModelKind
from reportgen.patching.effects import Direction, agreement, effects, top_heads
from reportgen.patching.pairs import PromptPair
from reportgen.patching.sweep import Sweep, positions_possible, sweep
from reportgen.progress import Callback, silent
from reportgen.report import Patching, PatchingAgreement, PatchingEffects, PatchingPairs, PositionEffects

VERSION = 5  # part of the cache key: bump when a record's numbers change meaning
DIRECTIONS: tuple[Direction, ...] = ("denoising", "noising")
UNPATCHED = {"denoising": 0.0, "noising": 1.0}  # the normalised effect of patching nothing, per direction


@dataclass
class Loaded:
    """The model with its LM head, its tokenizer and the pairs, as `pairs.load_pairs` gives them."""

    model: object
    tokenizer: object
    pairs: list[PromptPair]
    behaviour: str
    metric: str
    where: tuple[Path, str, str]  # (model directory, the ablation task of its LM head, device): where Ray loads it
    cluster: object | None = None  # a connected Ray cluster (ray_runner.RayCluster): exact patching runs there


def cache_key(settings: PatchingSettings, kind: ModelKind, fingerprint: str) -> str:
    """The record's key: the model's files, the data (the file's bytes, or the built-in pairs' settings), the
    settings that change a number, and the kind that reads the pairs."""
    data = "builtin" if settings.data == "builtin" else file_sha256(Path(settings.data))
    fields = settings.model_dump(exclude={"enabled", "data"})
    return key_of("patching", VERSION, fingerprint, kind.name, data, sorted(fields.items()))


def cached(settings: PatchingSettings, kind: ModelKind, fingerprint: str, cache_dir: Path) -> Patching | None:
    stored = Cache(cache_dir).get_json("patching", cache_key(settings, kind, fingerprint))
    return Patching.model_validate(stored) if stored is not None else None


def study(loaded: Loaded, settings: PatchingSettings, progress: Callback = silent) -> Patching:
    """Every number of the patching page, from the loaded model and pairs."""
    layers, heads = _shape(loaded.model)
    started = time.perf_counter()
    estimate = _attributed(loaded, progress)
    attributed = time.perf_counter()
    per_head = len(loaded.pairs) * len(DIRECTIONS)
    # attribution's mean change of the metric by size, both directions: the estimate the page shows, times |gap|
    size = np.abs(estimate["denoising"].mean(0)) + np.abs(estimate["noising"].mean(0))
    chosen = (None if per_head * layers * heads <= settings.max_masks
              else top_heads(size, max(1, settings.max_masks // per_head)))
    exact = _swept(loaded, chosen, False, progress, "heads")
    ran = per_head * (len(chosen) if chosen is not None else layers * heads)
    pairs = _pairs_record(loaded, exact, settings)
    records = [_effects(exact, estimate[direction], direction, settings, pairs.present) for direction in DIRECTIONS]
    positions, ran = _positions(loaded, records, settings, ran, progress)
    return Patching(
        pairs=pairs, directions=records, positions=positions,
        agreement=[_agreement(exact, estimate[direction], direction, settings.top) for direction in DIRECTIONS],
        exact_heads=[list(head) for head in chosen] if chosen is not None else None, runs=ran,
        max_masks=settings.max_masks, alpha=settings.alpha, bootstrap_samples=settings.bootstrap_samples,
        permutations=settings.permutations, example=None,
        seconds={"attribution": round(attributed - started, 3), "exact": round(time.perf_counter() - attributed, 3)})


def _attributed(loaded: Loaded, progress: Callback) -> dict[str, np.ndarray]:
    """Attribution patching's estimated change of the metric, per direction [pairs, layers, heads]: one forward and
    backward of each prompt, batched over pairs of one length (reportgen.patching.attribution.attribution_both)."""
    from reportgen.patching.attribution import attribution_both  # torch, once there is work

    progress("Patching: attribution", 0, 1)
    estimate = attribution_both(loaded.model, loaded.pairs)
    progress("Patching: attribution", 1, 1)
    return {direction: values.numpy().astype(np.float64) for direction, values in estimate.items()}


def _shape(model) -> tuple[int, int]:
    from reportgen.model.head_sites import locate

    sites = locate(model)
    return sites.n_layers, sites.heads


def _swept(loaded: Loaded, chosen, positions: bool, progress: Callback, what: str) -> Sweep:
    """The sweep of `chosen` heads (None: all) over the pairs: on Ray when the build has a cluster, else here one
    pair at a time so the bar moves."""
    if loaded.cluster is not None:
        from reportgen.patching.ray_sweep import sweep_on

        return sweep_on(loaded.cluster, loaded.where, loaded.pairs, DIRECTIONS, chosen, positions, progress, what)
    parts = []
    for index, pair in enumerate(loaded.pairs):
        parts.append(sweep(loaded.model, [pair], DIRECTIONS, heads=chosen, positions=positions))
        progress(f"Patching: {what}", index + 1, len(loaded.pairs))
    return Sweep.joined(parts)


def _grid(values: np.ndarray) -> list[list[float | None]]:
    return [[float(v) if np.isfinite(v) else None for v in row] for row in np.asarray(values, dtype=np.float64)]


def _effects(exact: Sweep, estimate: np.ndarray, direction: Direction, settings: PatchingSettings,
             present: bool) -> PatchingEffects:
    """One direction's effects; a head is significant when its corrected test and its interval both pass and the
    behaviour is there at all (`present`): a ratio to a difference the pairs do not show says nothing."""
    found = effects(exact.clean, exact.corrupted, exact.patched[direction], direction, settings.bootstrap_samples,
                    settings.permutations, settings.seed)
    unpatched = UNPATCHED[direction]
    with np.errstate(invalid="ignore"):
        outside = (found.low > unpatched) | (found.high < unpatched)
        significant = (found.p_adjusted < settings.alpha) & outside & present
    gap = float(np.sum(exact.clean - exact.corrupted))
    moved = estimate.sum(0) / gap if abs(gap) > 1e-12 else np.full(estimate.shape[1:], np.nan)
    return PatchingEffects(direction=direction, effect=_grid(found.effect), low=_grid(found.low),
                           high=_grid(found.high), p_adjusted=_grid(found.p_adjusted),
                           significant=[[bool(v) for v in row] for row in significant],
                           estimate=_grid(moved + unpatched))


def _agreement(exact: Sweep, estimate: np.ndarray, direction: Direction, top: int) -> PatchingAgreement:
    """Attribution's mean change beside exact patching's, over the heads exact patching ran."""
    unpatched = exact.corrupted if direction == "denoising" else exact.clean
    change = (exact.patched[direction] - unpatched[:, None, None]).mean(0)
    ran = np.argwhere(np.isfinite(change))
    found = agreement(change[ran[:, 0], ran[:, 1]][None], estimate.mean(0)[ran[:, 0], ran[:, 1]][None], top)
    return PatchingAgreement(direction=direction, spearman=found.spearman if np.isfinite(found.spearman) else None,
                             overlap=found.overlap, top=found.top,
                             disagree=[[int(v) for v in ran[index]] for _, index in found.disagree])


def _positions(loaded: Loaded, records: list[PatchingEffects], settings: PatchingSettings, ran: int,
               progress: Callback) -> tuple[list[PositionEffects], int]:
    """Each head at each position, for the heads of largest exact effect that the budget left holds."""
    pairs = loaded.pairs
    if not settings.positions or not positions_possible(pairs):
        return [], ran
    tokens = len(pairs[0].clean)
    fits = (settings.max_masks - ran) // (len(pairs) * len(DIRECTIONS) * tokens)
    size = sum(np.nan_to_num(np.abs(np.asarray(r.effect, dtype=np.float64) - UNPATCHED[r.direction]))
               for r in records)
    order = [head for head in top_heads(size, size.size)
             if all(r.effect[head[0]][head[1]] is not None for r in records)][:max(0, fits)]
    if not order:
        return [], ran
    swept = _swept(loaded, order, True, progress, "positions")
    from reportgen.patching.effects import normalised

    shown = [loaded.tokenizer.convert_ids_to_tokens(list(getattr(pairs[0], name))) for name in ("clean", "corrupted")]
    rows = []
    for direction in DIRECTIONS:
        found = normalised(swept.clean, swept.corrupted, swept.patched[direction])
        rows.append(PositionEffects(direction=direction, heads=[list(head) for head in order], tokens=shown[0],
                                    corrupted_tokens=shown[1], effect=_grid(np.stack([found[h] for h in order]))))
    return rows, ran + len(pairs) * len(DIRECTIONS) * tokens * len(order)


def _pairs_record(loaded: Loaded, exact: Sweep, settings: PatchingSettings) -> PatchingPairs:
    """The pairs and the metric on them, with the behaviour's own test: the clean minus corrupted difference's 95%
    bootstrap interval over pairs must clear `min_difference` logits (either way), else there is nothing for a head to
    carry: a random network's pairs differ by a few hundredths of a logit, which a bootstrap can tell from 0 and no
    reader would call a behaviour."""
    lengths = {len(pair.clean) for pair in loaded.pairs}
    gap = exact.clean - exact.corrupted
    clean, corrupted, difference = (_mean_ci(values, settings) for values in (exact.clean, exact.corrupted, gap))
    return PatchingPairs(data=settings.data, behaviour=loaded.behaviour, count=len(loaded.pairs),
                         tokens=lengths.pop() if len(lengths) == 1 else None, metric=loaded.metric,
                         clean=clean[0], corrupted=corrupted[0], clean_ci=clean[1], corrupted_ci=corrupted[1],
                         difference=difference[0], difference_ci=difference[1],
                         min_difference=settings.min_difference,
                         present=difference[1][0] > settings.min_difference
                         or difference[1][1] < -settings.min_difference)


def _mean_ci(values: np.ndarray, settings: PatchingSettings) -> tuple[float, list[float]]:
    """The mean over pairs and its 95% percentile bootstrap interval (the pairs resampled, as for the effects)."""
    rng = np.random.default_rng([settings.seed, 50])
    draws = rng.integers(0, len(values), size=(settings.bootstrap_samples, len(values)))
    return float(values.mean()), [float(v) for v in np.percentile(values[draws].mean(1), [2.5, 97.5])]


def load(settings: PatchingSettings, kind: ModelKind, model_dir: Path, device: str, cluster=None) -> Loaded:
    """The model class whose LM head the metric reads (the ablation task of the same head, its trained weights
    checked), its tokenizer, and the pairs: the file's, or the built-in induction pairs."""
    from reportgen.ablation.task_loading import load_lm

    model, tokenizer = load_lm(kind.lm_task, model_dir, device)
    start = decoder_start(model.config.to_dict()) if kind.reads_target else None
    pairs, behaviour = read(settings, kind, tokenizer, int(model.config.vocab_size), start)
    return Loaded(model, tokenizer, pairs, behaviour, f"logit(answer) - logit(wrong) at {kind.metric_at}",
                  (model_dir, kind.lm_task, device), cluster)


def read(settings: PatchingSettings, kind: ModelKind, tokenizer, vocab_size: int,
         decoder_start: int | None = None) -> tuple[list[PromptPair], str]:
    """The pairs and what they test in words, the one whose clean prompt reads back as text first (see `shown`);
    `decoder_start`: an encoder-decoder's, which its decoder reads before each row's target."""
    from reportgen.model.induction import begin_token
    from reportgen.patching.pairs import induction_pairs, read_pairs

    if settings.data == "builtin":
        vocabulary = min(len(tokenizer), vocab_size)
        pairs = induction_pairs(vocabulary, begin_token(tokenizer), settings.pairs, settings.tokens, settings.seed,
                                tuple(tokenizer.all_special_ids))
        behaviour = (f"induction (Olsson et al. 2022): [BOS] then {settings.tokens} random tokens, repeated without "
                     "the last, whose answer is the first copy's last token; the corrupted prompt draws the first "
                     "copy anew")
    else:
        pairs = read_pairs(Path(settings.data), tokenizer, kind.masked_prompts, settings.limit, decoder_start)
        behaviour = f"the prompt pairs of {Path(settings.data).name}"
    first = next((index for index, pair in enumerate(pairs) if shown(pair, tokenizer) is not None), 0)
    return [pairs[first], *pairs[:first], *pairs[first + 1:]], behaviour


def shown(pair: PromptPair, tokenizer) -> str | None:
    """The clean prompt as a text that the tokenizer reads back to the same tokens (an example page of it shows the
    heads on the very prompt patched), or None when no such text is found. The tokens the tokenizer adds around any
    text ([CLS] ... [SEP], a [BOS]) are left out of the text, and the [MASK] kept."""
    ids = list(pair.clean)
    added = tokenizer("")["input_ids"]
    middles = [ids[i:len(ids) - (len(added) - i)] for i in range(len(added) + 1)
               if ids[:i] == added[:i] and ids[len(ids) - (len(added) - i):] == added[i:]]
    for middle in [*middles, ids]:
        text = tokenizer.decode(middle)
        if tuple(tokenizer(text)["input_ids"]) == pair.clean:
            return text
    return None


def prompt_example(settings: PatchingSettings, kind: ModelKind, model_dir: Path) -> dict | None:
    """The first pair's clean prompt as an example ({name, text, target}), for its head views; None when no text
    reads back as its tokens. Reading the pairs here, with the tokenizer alone, says a mistake in the data file
    before any model work."""
    from reportgen.model.loading import load_tokenizer, pretrained_kwargs, read_config

    config = read_config(model_dir)
    tokenizer = load_tokenizer(model_dir, pretrained_kwargs(model_dir)["trust_remote_code"])
    start = decoder_start(config) if kind.reads_target else None
    pairs, _ = read(settings, kind, tokenizer, int(config.get("vocab_size") or len(tokenizer)), start)
    text = shown(pairs[0], tokenizer)
    if text is None:
        return None
    target = tokenizer.decode(list(pairs[0].decoder[1:])) if pairs[0].decoder is not None else None
    return {"name": "The first patching pair's clean prompt", "text": text, "target": target}


def decoder_start(config: dict) -> int:
    """The token an encoder-decoder's decoder starts from: its config's decoder_start_token_id (T5 and Marian start
    from the padding token, which some configs leave implicit)."""
    for key in ("decoder_start_token_id", "pad_token_id", "bos_token_id"):
        if config.get(key) is not None:
            return int(config[key])
    return 0
