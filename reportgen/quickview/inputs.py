"""One input made into an `ExampleRun`: by running a model on it, or from attention a user already has; an
encoder-decoder's (source, target) into a `Seq2SeqRun` too, whose encoder the `ExampleRun` holds."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from pydantic import ValidationError

from reportgen.config import ExampleSpec, load_config
from reportgen.errors import DataError, ModelError
from reportgen.runs import ExampleRun

if TYPE_CHECKING:
    from reportgen.runs import Seq2SeqRun

# Tokens that a tokenizer adds around a text, by their usual spellings (BERT, RoBERTa, T5, GPT-2, Llama):
# attention given without a tokenizer marks these as special, as a model run would.
SPECIAL_SPELLINGS = {"[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>", "<|endoftext|>", "<cls>", "<sep>"}
_LOADED: dict[tuple[str, str], Any] = {}  # (model directory, device) -> (model, tokenizer), for the next input


@dataclass
class QuickRun:
    """One input's run, with what to tell the reader about it."""

    run: ExampleRun
    model: str  # the model's display name ("" for attention given by the user)
    notes: list[str] = field(default_factory=list)  # truncation and the like, said once each
    # An encoder-decoder's (source, target) run, whose encoder `run` holds; its decoder and cross-attention
    # go into the payload's groups (reportgen.site.views.seq2seq_groups). None for any other model.
    pair_run: Seq2SeqRun | None = None
    special: dict[str, list[bool]] = field(default_factory=dict)  # "source", "target": special flags


def _check_text(name: str, value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise DataError(f"{name}: give a string, not {type(value).__name__}")
    if not value.strip():
        raise DataError(f"{name}: empty (or only whitespace); give some words")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(f"{name}: the text holds a lone surrogate (\\ud800-\\udfff), which is not text; "
                        "write the character itself") from None


def _spec(text: str, pair: str | None) -> ExampleSpec:
    for name, value in (("text", text), ("pair", pair)):
        _check_text(name, value)
    try:
        return ExampleSpec(text=text, pair=pair)
    except ValidationError as err:
        problem = err.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "text"
        raise DataError(f"{where}: {problem['msg'].removeprefix('Value error, ')}") from None


def run_text(text: str, pair: str | None = None, model: str | None = None,
             config: str | Path | None = None, target: str | None = None) -> QuickRun:
    """Runs `model` (default: the config's model, ./reportgen.yaml's if there is one, else the embedded
    default) on `text` (and `pair`), keeping the query/key vectors; an encoder-decoder on the source `text`
    and its `target`, which only an encoder-decoder takes (and it needs one). Texts longer than the config's
    `max_length` (or the model's limit) are truncated with the same note as a build's."""
    from reportgen.model import loading
    from reportgen.site.views import without_qk_over

    settings = load_config(config)
    spec = _spec(text, pair)
    _check_text("target", target)
    try:
        with _policy(settings):
            name, path = loading.resolve(model or settings.model)
    except ModelError as err:  # said as the user gave it: --model / model=, or the config's field
        raise ModelError(str(err).replace("(config field 'model')", "(--model)") if model else str(err)) from None
    max_length, length_note = loading.clamp_max_length(path, settings.max_length)
    if _takes_target(Path(path), name, pair, target):
        return _run_pair(Path(path), name, settings, (text, str(target)), (max_length, length_note))
    run = _loaded(Path(path), settings)(spec, max_length)
    # The default max_length above the model's limit is no news to someone who set neither: say it only
    # when a config file set it (the truncation itself is said below either way).
    notes = [length_note] if length_note and settings.config_file is not None else []
    if run.truncated:
        notes.append(f"the input was truncated to {max_length} tokens (config field 'max_length')")
    budget = settings.views.query_key_mb
    if "qk_bytes" in without_qk_over(run, budget * 1e6).extras:
        notes.append(f"no query/key view: its vectors would take {int(run.extras['qk_bytes']) / 1e6:.1f} MB, over the "
                     f"{budget:g} MB of config field 'views.query_key_mb'")
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return QuickRun(run, name, notes)


def _takes_target(path: Path, name: str, pair: str | None, target: str | None) -> bool:
    """Whether the model is an encoder-decoder, which reads a source and a target; refuses a target for any
    other model, and a missing target or a pair for an encoder-decoder, before the model is loaded."""
    from reportgen.kinds import kind_of

    if not kind_of(path).reads_target:
        if target is not None:
            raise DataError(f"target: {name} is not an encoder-decoder (BART, T5, Marian), so it reads no target; "
                            "leave --target out")
        return False
    if pair is not None:
        raise DataError(f"pair: {name} is an encoder-decoder, which reads a source and a target, not a pair; "
                        "give the target with --target")
    if target is None:
        raise DataError(f"target: {name} is an encoder-decoder; give the text its decoder reads with --target")
    return True


def _run_pair(path: Path, name: str, settings, texts: tuple[str, str],
              length: tuple[int, str | None]) -> QuickRun:
    """An encoder-decoder's QuickRun: the teacher-forced run of (source, target) (reportgen.model.seq2seq),
    with the encoder's self-attention as its `run` (the views' default group), so that every page that
    shows one run shows this one's encoder."""
    max_length, length_note = length
    pair_run, special = _loaded_seq2seq(path, settings)(*texts, max_length)
    source_special = np.array(special["source"], dtype=bool)
    spec = ExampleSpec.model_construct(text=texts[0], pair=None, name=None)
    norms = (pair_run.value_norms or {}).get("encoder")
    run = ExampleRun(spec, list(pair_run.source_tokens), np.where(source_special, -1, np.arange(len(source_special))),
                     np.where(source_special, -1, 0), source_special, pair_run.encoder_attention,
                     pair_run.source_truncated or pair_run.target_truncated, value_norms=norms)
    notes = [length_note] if length_note and settings.config_file is not None else []
    for which, cut in (("source", pair_run.source_truncated), ("target", pair_run.target_truncated)):
        if cut:
            notes.append(f"the {which} was truncated to {max_length} tokens (config field 'max_length')")
    for note in notes:
        warnings.warn(note, stacklevel=3)
    return QuickRun(run, name, notes, pair_run, special)


def _loaded_seq2seq(path: Path, settings) -> Callable[[str, str, int], tuple[Seq2SeqRun, dict[str, list[bool]]]]:
    """An encoder-decoder of `path` ready to run one (source, target), loaded once per process through
    transformers (eager attention); gives the run and each side's special flags (reportgen.model.special_tokens)."""
    from reportgen.model import loading
    from reportgen.model.seq2seq import run_pair
    from reportgen.model.special_tokens import special_flags, special_ids

    key = (str(path.resolve()), settings.device, "seq2seq")
    if key not in _LOADED:
        with _policy(settings):
            net, tokenizer = loading.load(path, settings.device)
        specials = special_ids(tokenizer)

        def run(source: str, target: str, max_length: int) -> tuple[Seq2SeqRun, dict[str, list[bool]]]:
            pair_run = run_pair(net, tokenizer, source, target, max_length)
            flags = {side: special_flags(tokenizer.convert_tokens_to_ids(list(tokens)), specials).tolist()
                     for side, tokens in (("source", pair_run.source_tokens), ("target", pair_run.target_tokens))}
            return pair_run, flags

        _LOADED[key] = run
    return _LOADED[key]


def _loaded(path: Path, settings) -> Callable[[ExampleSpec, int], ExampleRun]:
    """The model of `path` ready to run one input, loaded once per process: a BERT that
    reportgen.model.light_bert reproduces without transformers' model code (seconds less to start),
    any other through transformers, as a build loads it."""
    from reportgen.kinds import kind_of
    from reportgen.model import light_bert, loading
    from reportgen.model.run import run_example

    key = (str(path.resolve()), settings.device)
    if key not in _LOADED:
        light = None
        if light_bert.supports(path):
            try:
                light = light_bert.LightBert.load(path)
            except (ValueError, OSError, KeyError):
                light = None  # not the checkpoint it looked like: transformers loads it and says what is wrong
        if light is not None:
            _LOADED[key] = light.run
        else:
            with _policy(settings):
                net, tokenizer = loading.load(path, settings.device)
            pair_needs_separator = kind_of(path).pair_needs_separator

            def run(spec: ExampleSpec, max_length: int) -> ExampleRun:
                if spec.pair is not None and pair_needs_separator and tokenizer.sep_token is None:
                    raise DataError(f"pair: {path.name} is a decoder whose tokenizer has no separator token, so "
                                    "the two texts would read as one; give one text")
                return run_example(net, tokenizer, spec, max_length, keep_qk=True)

            _LOADED[key] = run
    return _LOADED[key]


def _policy(settings):
    """The config's file policy, with decoders and encoder-decoders accepted: the quick view shows their
    attention (builds do not take encoder-decoders yet)."""
    from reportgen.model import loading

    return loading.file_policy(settings.trust_remote_code, settings.allow_pickle, decoders=True,
                               encoder_decoders=True)


ROW_SUM_TOLERANCE = 1e-3  # a row of given attention sums to 1 within this, or within twice its dtype's rounding
# Unit roundoff of the floating-point types attention comes in below float32 (torch's names and numpy's):
# rounded weight by weight, a row's sum drifts from 1 by up to this (bfloat16 keeps 8 significant bits).
ROUNDOFF = {"torch.bfloat16": 2.0 ** -8, "bfloat16": 2.0 ** -8, "torch.float16": 2.0 ** -11, "float16": 2.0 ** -11}


def _row_sum_tolerance(layer: Any) -> float:
    """How far from 1 a row of `layer` may sum: ROW_SUM_TOLERANCE, or twice the unit roundoff of its dtype."""
    return max(ROW_SUM_TOLERANCE, 2 * ROUNDOFF.get(str(getattr(layer, "dtype", "")), 0.0))


def _as_array(layer: Any, index: int) -> np.ndarray:
    if hasattr(layer, "detach"):  # a torch tensor, without importing torch here
        layer = layer.detach().float().cpu().numpy()
    array = np.asarray(layer, dtype=np.float32)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4:
        raise DataError(f"attentions[{index}]: shape {tuple(array.shape)}; each layer's attention must be "
                        "[batch, heads, query, key]")
    return array[0]


def from_attentions(attentions: Sequence[Any], tokens: Sequence[str], sentence_b_start: int | None = None,
                    text: str | None = None) -> ExampleRun:
    """An `ExampleRun` from attention a user already has, as bertviz takes it: one array per layer of
    shape [batch, heads, query, key] (the first batch item is shown) or [heads, query, key], and the
    tokens. `sentence_b_start`: the index of the first token of sentence B of a pair.
    Checked before anything is drawn: every layer the same shape, square, as long as `tokens`, finite,
    rows that sum to 1 within 1e-3, or within twice their dtype's unit roundoff (bfloat16: 0.0078; a real
    model's bfloat16 rows sum to 1.002), as softmax output does (padding masked)."""
    if isinstance(tokens, str) or not tokens or not all(isinstance(token, str) for token in tokens):
        raise DataError("tokens: give the list of token strings, one per attention row")
    if not attentions:
        raise DataError("attentions: empty; give one [batch, heads, query, key] array per layer")
    tolerance = max(_row_sum_tolerance(layer) for layer in attentions) if attentions else ROW_SUM_TOLERANCE
    layers = [_as_array(layer, index) for index, layer in enumerate(attentions)]
    n = len(tokens)
    for index, layer in enumerate(layers):
        if layer.shape != layers[0].shape or layer.shape[1:] != (n, n):
            raise DataError(f"attentions[{index}]: shape {layer.shape} (heads, query, key) does not match "
                            f"{len(tokens)} tokens and layer 0's {layers[0].shape}")
    attention = np.stack(layers)
    if not np.isfinite(attention).all() or (attention < 0).any():
        raise DataError("attentions: hold values that are negative, infinite or NaN; give softmax weights")
    sums = attention.sum(axis=-1)
    if np.abs(sums - 1).max() > tolerance:
        raise DataError(f"attentions: rows sum to {sums.min():.4g} .. {sums.max():.4g}, not 1; give the "
                        "attention weights (after the softmax), not scores")
    special = np.array([token in SPECIAL_SPELLINGS for token in tokens])
    if sentence_b_start is not None and not 0 < sentence_b_start < n:
        raise DataError(f"sentence_b_start: {sentence_b_start} is not a token index between 1 and {n - 1}")
    segments = np.zeros(n, dtype=np.int64)
    if sentence_b_start is not None:
        segments[sentence_b_start:] = 1
    segments = np.where(special, -1, segments)
    words = np.where(special, -1, np.arange(n))
    shown = text if text is not None else " ".join(token for token, mark in zip(tokens, special, strict=True)
                                                  if not mark)
    spec = ExampleSpec.model_construct(text=shown or "(tokens)", pair=None, name=None)
    return ExampleRun(spec, [str(token) for token in tokens], words, segments, special,
                      attention.astype(np.float32))
