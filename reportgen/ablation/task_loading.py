"""Building a task from the config: the model class the task needs, its data read and encoded into the
units and examples of `reportgen.ablation.tasks`, and the warnings about what was cut or left out.

Kept apart from the task classes (`reportgen.ablation.tasks`: batching, outputs, metrics), which say
how a loaded task is run and scored; this module is what turns a model directory, a data file and the
`ablation` settings into one (`load_task`, `load_ablation_task`). The file's texts and scores are
checked before the model is loaded (`reportgen.ablation.task_checks`, torch-free); transformers is
imported only when a model is loaded. The warnings raised here are stored with the ablation record and
said again when it is read back (`reportgen.ablation.records.TASK_WARNINGS`).
"""

from __future__ import annotations

import json
import warnings
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from reportgen.ablation.task_checks import ROLES, TaskKind, check_task, read_fields, read_rows
from reportgen.ablation.tasks import (
    CausalLMTask,
    ClassificationTask,
    MaskedLMTask,
    Seq2SeqTask,
    SimilarityTask,
    Task,
    pooling_modes,
)
from reportgen.config import BUILTIN_DATA, AblationSettings, precision_problem
from reportgen.datafiles import Column, Rows
from reportgen.errors import ConfigError, DataError, ModelError
from reportgen.model.loading import (
    check_weights,
    clamp_max_length,
    load_tokenizer,
    pretrained_kwargs,
    quiet_transformers,
    resolve_device,
)
from reportgen.model.run import clip

if TYPE_CHECKING:  # torch is loaded by reportgen.ablation.tasks; here it only names the model's type
    import torch


def _load_model(kind: str, model_dir: Path, device: str) -> tuple[torch.nn.Module, object]:
    from transformers import (
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForMaskedLM,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
    )

    auto_class = {"similarity": AutoModel, "classification": AutoModelForSequenceClassification,
                  "mlm": AutoModelForMaskedLM, "causal_lm": AutoModelForCausalLM,
                  "seq2seq": AutoModelForSeq2SeqLM}[kind]
    quiet_transformers()
    device = resolve_device(device)
    # The same refusals as the model stage: custom code only if trusted, pickle only if allowed.
    kwargs = pretrained_kwargs(model_dir)
    check_task(kind, model_dir)
    tokenizer = load_tokenizer(model_dir, kwargs["trust_remote_code"])
    try:
        model, info = auto_class.from_pretrained(model_dir, output_loading_info=True, ignore_mismatched_sizes=True,
                                                 **kwargs)
    except Exception as exc:  # transformers raises many types for a broken directory
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ModelError(f"model directory {model_dir}: cannot be loaded for task {kind} "
                         f"({type(exc).__name__}: {first})") from None
    _check_head(kind, model_dir, model, info)
    # Similarity pools the token states: the pooler is never read. A task head reads it (classification).
    check_weights(model_dir, model, info, unused=("pooler",) if kind == "similarity" else ())
    for parameter in model.parameters():
        parameter.requires_grad_(False)  # never trained here; gradients are only taken w.r.t. head gates
    return model.to(device).eval(), tokenizer


def _check_head(kind: str, model_dir: Path, model, info: dict) -> None:
    """A task head the weights do not hold would be random: the model was not fine-tuned for the task."""
    if kind == "similarity":
        return
    prefix = getattr(model, "base_model_prefix", "")
    head = sorted(k for k in info.get("missing_keys") or () if not (prefix and k.startswith(prefix + ".")))
    if head and kind in ("causal_lm", "seq2seq"):
        name = "causal-LM" if kind == "causal_lm" else "sequence-to-sequence LM"
        raise ModelError(f"model directory {model_dir}: has no trained {name} head (missing {head[0]}); task "
                         f"'{kind}' needs the language-model head's weights (a checkpoint saved with its LM head)")
    if head:
        name = "classification" if kind == "classification" else "masked-LM"
        raise ModelError(f"model directory {model_dir}: has no trained {name} head (missing {head[0]}); "
                         f"task '{kind}' needs a fine-tuned model")


def _decoder_classifier_pad(model, model_dir: Path) -> int | None:
    """The padding id of a decoder's sequence classifier (GPT2ForSequenceClassification,
    LlamaForSequenceClassification, ...), None for an encoder's. Such a model reads each text's last
    token that is not config.pad_token_id, so the batches must be padded with that id; without one it
    takes the last position of every row, which only batches of one text allow: refused."""
    from reportgen.kinds import kind_for

    config = model.config
    if not kind_for(config.to_dict()).reads_last_token:
        return None
    pad = getattr(config, "pad_token_id", None)
    if pad is None:
        raise ModelError(f"model directory {model_dir}: config.json has no pad_token_id, which "
                         f"{type(model).__name__} needs to find each text's last token in a padded batch; "
                         "set it (usually to the eos_token_id the model was fine-tuned with)")
    return int(pad)


def _encode(tokenizer, texts: Sequence[str], pairs: Sequence[str] | None,
            max_length: int) -> tuple[list[dict[str, list[int]]], np.ndarray]:
    """Each input's token ids at `max_length`, and which inputs were truncated. Texts are cut to what
    they can keep first (`clip`: a cell may hold a megabyte, and a long pair's truncation costs the
    product of its lengths)."""
    first = [clip(text, max_length) for text in texts]
    second = [clip(text, max_length) for text in pairs] if pairs is not None else None
    args = ([text for text, _ in first], [text for text, _ in second] if second is not None else None)
    encoding = tokenizer(*args, truncation=True, max_length=max_length)
    lengths = np.array([len(ids) for ids in tokenizer(*args, truncation=False, verbose=False)["input_ids"]])
    cut = np.array([one or bool(second and second[row][1]) for row, (_, one) in enumerate(first)], dtype=bool)
    keys = [key for key in ("input_ids", "token_type_ids") if key in encoding]
    units = [{key: list(encoding[key][row]) for key in keys} for row in range(len(texts))]
    return units, cut | (lengths > max_length)


def _shown_source(source: str) -> str:
    """The data as a published warning names it: the file's name, not its path."""
    return "the builtin set" if Path(source) == BUILTIN_DATA else Path(source).name


def _warn_truncated(truncated: np.ndarray, rows: Rows, source: str, max_length: int) -> None:
    """Say how many inputs were cut to ablation.max_length, and where the first one is (the texts of a
    similarity pair are two inputs of one row)."""
    if not truncated.any():
        return
    line = rows.lines[int(np.flatnonzero(truncated)[0]) % len(rows)]
    name = _shown_source(source)
    warnings.warn(f"ablation: {int(truncated.sum())} of {len(truncated)} task inputs are longer than "
                  f"{max_length} tokens and were truncated, the first on line {line} of {name} "
                  "(config field 'ablation.max_length')", stacklevel=1)


def _predicting(encoded: list[dict[str, list[int]]], rows: Rows, source: str) -> np.ndarray:
    """Which texts have a token to predict (two tokens or more, special tokens included, as the model
    sees them). A text of one token predicts nothing: left out with a warning naming the first;
    none left is the user's mistake."""
    kept = np.array([len(unit["input_ids"]) > 1 for unit in encoded], dtype=bool)
    if not kept.any():
        raise DataError(f"{rows.path}: every text is a single token, so there is nothing to predict; task "
                        "causal_lm scores each token from the ones before it and needs texts of two tokens or more")
    if not kept.all():
        line = rows.lines[int(np.flatnonzero(~kept)[0])]
        warnings.warn(f"ablation: {int((~kept).sum())} of {len(kept)} texts are a single token, which leaves "
                      f"nothing to predict, and were left out, the first on line {line} of {_shown_source(source)} "
                      "(task causal_lm)", stacklevel=1)
    return kept


def _seq2seq_units(model, tokenizer, sources: Sequence[str], targets: Sequence[str], max_length: int, rows: Rows,
                   source: str) -> tuple[list[dict[str, list[int]]], np.ndarray]:
    """Each pair as a unit (source ids, teacher-forced decoder input, labels) at `max_length` tokens per
    text, deduplicated, and the unit of each pair kept. A pair whose source or target has no token (a
    tokenizer that adds no end token, on a text it drops whole) is left out with a warning naming the first."""
    from reportgen.model.seq2seq import decoder_start, encode_text, shift_right

    start = decoder_start(model)
    encoded = [encode_text(tokenizer, text, max_length) for text in sources]
    labelled = [encode_text(tokenizer, text, max_length, target=True) for text in targets]
    _warn_truncated(np.array([cut for _, cut in encoded + labelled], dtype=bool), rows, source, max_length)
    kept = np.array([bool(ids) and bool(labels) for (ids, _), (labels, _) in zip(encoded, labelled, strict=True)])
    if not kept.any():
        raise DataError(f"{rows.path}: no pair has both a source and a target token; task seq2seq needs both")
    if not kept.all():
        line = rows.lines[int(np.flatnonzero(~kept)[0])]
        warnings.warn(f"ablation: {int((~kept).sum())} of {len(kept)} pairs have no source or no target token and "
                      f"were left out, the first on line {line} of {_shown_source(source)} (task seq2seq)",
                      stacklevel=1)
    units = [{"input_ids": ids, "decoder_input_ids": shift_right(labels, start), "labels": labels}
             for (ids, _), (labels, _), keep in zip(encoded, labelled, kept, strict=True) if keep]
    return _dedupe(units)


def _dedupe(encoded: list[dict[str, list[int]]]) -> tuple[list[dict[str, list[int]]], np.ndarray]:
    """Distinct token sequences and the unit index of each input (repeated texts run once)."""
    seen: dict[str, int] = {}
    units, index = [], np.empty(len(encoded), dtype=np.int64)
    for position, seq in enumerate(encoded):
        key = json.dumps(seq, sort_keys=True)
        if key not in seen:
            seen[key] = len(units)
            units.append(seq)
        index[position] = seen[key]
    return units, index


def _mask_for_mlm(unit: dict[str, list[int]], special: set[int], mask_id: int, probability: float,
                  seed: int) -> dict[str, list[int]]:
    """Replace a fixed random share of a sequence's ordinary tokens by [MASK].

    The generator is seeded by the seed and the token ids, so the same text gets the
    same masked positions in every run and every condition. Unlike BERT pre-training
    (80/10/10) every chosen token becomes [MASK], so the task is plain cloze accuracy.
    """
    ids = np.array(unit["input_ids"])
    candidates = np.flatnonzero(~np.isin(ids, list(special)))
    rng = np.random.default_rng([seed, zlib.crc32(ids.astype(np.int32).tobytes())])
    count = max(1, int(round(probability * len(candidates)))) if len(candidates) else 0
    chosen = rng.choice(candidates, size=count, replace=False) if count else np.array([], dtype=np.int64)
    labels = np.full(len(ids), -100)
    labels[chosen] = ids[chosen]
    ids[chosen] = mask_id
    return {**unit, "input_ids": ids.tolist(), "labels": labels.tolist()}


def _masked_units(tokenizer, model_dir: Path, texts: Sequence[str], max_length: int, probability: float,
                  seed: int) -> tuple[list[dict[str, list[int]]], np.ndarray]:
    """The texts encoded with their chosen tokens replaced by [MASK] (see `_mask_for_mlm`)."""
    if tokenizer.mask_token_id is None:
        raise ModelError(f"model directory {model_dir}: the tokenizer has no mask token; task 'mlm' needs one")
    special = set(tokenizer.all_special_ids)
    units, truncated = _encode(tokenizer, texts, None, max_length)
    return [_mask_for_mlm(unit, special, tokenizer.mask_token_id, probability, seed) for unit in units], truncated


def _label_indices(rows: Rows, role: str, model) -> tuple[np.ndarray, int]:
    label2id = {str(k): int(v) for k, v in (getattr(model.config, "label2id", None) or {}).items()}
    classes = int(model.config.num_labels)
    out = np.empty(len(rows), dtype=np.int64)
    for row, value in enumerate(rows.texts(role)):
        value = value.strip()
        if value in label2id:
            out[row] = label2id[value]
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not (0 <= number < classes and number == int(number)):
            raise DataError(f"{rows.path}: line {rows.line_of(row)}: label '{value}' is neither one of the model's "
                            f"labels ({', '.join(label2id)}) nor an index below {classes}")
        out[row] = int(number)
    return out, classes


def load_task(
    kind: TaskKind,
    model_dir: Path,
    data: str | Path,
    *,
    device: str = "cpu",
    fmt: str = "auto",
    header: bool = True,
    columns: Mapping[str, Column | None] | None = None,
    limit: int | None = None,
    max_length: int = 128,
    mlm_probability: float = 0.15,
    mlm_seed: int = 0,
    precision: Literal["float32", "bfloat16", "float16"] = "float32",
) -> Task:
    """Load the model class the task needs from `model_dir` and the task's data ("builtin" = demo set);
    its masked passes run in `precision` (float16 only on a CUDA device: else a ConfigError, before any work)."""
    if kind not in ROLES:
        raise ConfigError(f"ablation.task: unknown task '{kind}' ({', '.join(ROLES)})")
    if problem := precision_problem(precision, device, resolve_device(device) if device == "auto" else None):
        raise ConfigError(f"field 'ablation.precision': {problem}")
    task = _load_task(kind, model_dir, data, device=device, fmt=fmt, header=header, columns=columns, limit=limit,
                      max_length=max_length, mlm_probability=mlm_probability, mlm_seed=mlm_seed)
    task.precision = precision
    return task


def _load_task(kind: TaskKind, model_dir: Path, data: str | Path, *, device: str, fmt: str, header: bool,
               columns: Mapping[str, Column | None] | None, limit: int | None, max_length: int,
               mlm_probability: float, mlm_seed: int) -> Task:
    rows, columns, source = read_rows(kind, data, fmt, header, columns, limit)
    # The file's texts and scores are checked before the model is loaded (check_data: before the build's
    # first stage), so a mistake in it is reported at once; labels need the model's label set, so later.
    texts, pairs, third = read_fields(kind, rows, columns)
    gold = targets = third  # a similarity's scores, a seq2seq's targets
    model, tokenizer = _load_model(kind, Path(model_dir), device)
    max_length, note = clamp_max_length(Path(model_dir), max_length, "ablation.max_length")
    if note:  # stacklevel 1: the CLI shows the warnings raised in reportgen's own files
        warnings.warn(note, stacklevel=1)
    settings: dict = {"max_length": max_length, "data": source}
    if kind == "similarity":
        encoded, truncated = _encode(tokenizer, texts, None, max_length)
        _warn_truncated(truncated, rows, source, max_length)
        units, index = _dedupe(encoded)
        settings["pooling"] = pooling_modes(Path(model_dir))
        sentences = np.stack([index[:len(rows)], index[len(rows):]], 1)  # each pair's two units
        return SimilarityTask(kind, model, tokenizer, units, sentences, gold, settings)
    if kind == "seq2seq":
        units, index = _seq2seq_units(model, tokenizer, texts, targets, max_length, rows, source)
        pad = next((i for i in (tokenizer.pad_token_id, model.config.pad_token_id) if i is not None), 0)
        return Seq2SeqTask(kind, model, tokenizer, units, index[:, None], np.zeros(len(index)), settings, pad_id=pad)
    decoder_pad = _decoder_classifier_pad(model, Path(model_dir)) if kind == "classification" else None
    if kind == "classification":
        labels, classes = _label_indices(rows, "label", model)
        encoded, truncated = _encode(tokenizer, texts, pairs, max_length)
        if decoder_pad is not None:  # a decoder has no segments (GPT-2 would add a token embedding per type id)
            encoded = [{"input_ids": unit["input_ids"]} for unit in encoded]
        _warn_truncated(truncated, rows, source, max_length)
        units, index = _dedupe(encoded)
        settings["classes"] = classes
        return ClassificationTask(kind, model, tokenizer, units, index[:, None], labels.astype(np.float64), settings,
                                  pad_id=decoder_pad)
    if kind == "causal_lm":
        encoded, truncated = _encode(tokenizer, texts, None, max_length)
        _warn_truncated(truncated, rows, source, max_length)
        kept = _predicting(encoded, rows, source)
        # the ids alone: a decoder has no segments (GPT-2 would add a token embedding per type id)
        units, index = _dedupe([{"input_ids": unit["input_ids"]}
                                for unit, keep in zip(encoded, kept, strict=True) if keep])
        # Any id pads (GPT-2 has no pad token): the attention mask hides it and it is never a label.
        pad = next((i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id) if i is not None), 0)
        return CausalLMTask(kind, model, tokenizer, units, index[:, None], np.zeros(len(index)), settings, pad_id=pad)
    encoded, truncated = _masked_units(tokenizer, model_dir, texts, max_length, mlm_probability, mlm_seed)
    _warn_truncated(truncated, rows, source, max_length)
    units, index = _dedupe(encoded)
    settings.update(mlm_probability=mlm_probability, mlm_seed=mlm_seed)
    return MaskedLMTask(kind, model, tokenizer, units, index[:, None], np.zeros(len(rows)), settings)


def load_ablation_task(model_dir: Path, settings: AblationSettings, *, device: str) -> Task:
    """The task the settings describe, on the model in `model_dir`."""
    return load_task(
        settings.task, Path(model_dir), settings.data, device=device, fmt=settings.format, header=settings.header,
        columns=settings.columns, limit=settings.limit, max_length=settings.max_length,
        mlm_probability=settings.mlm_probability, mlm_seed=settings.mlm_seed, precision=settings.precision,
    )


def load_lm(kind: TaskKind, model_dir: Path, device: str) -> tuple[torch.nn.Module, object]:
    """The model class task `kind` needs, its trained head checked, and its tokenizer: activation patching
    (reportgen.patching) reads the same language-model heads as tasks mlm, causal_lm and seq2seq."""
    return _load_model(kind, model_dir, device)
