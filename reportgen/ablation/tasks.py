"""The tasks a head ablation is measured on: similarity, classification, masked LM, causal LM, and
sequence-to-sequence LM.

A task turns its data into *units* (the distinct token sequences the model must
encode: in a similarity set one sentence appears in many pairs, so it is one unit)
and *examples* (what the metric is computed over: a pair, a labelled text, a text
with masked tokens). The model runs on units; `example_outputs` maps unit outputs to
a small per-example array, so a bootstrap can resample examples and a paired test can
swap one example's outputs between two conditions.

Per-example outputs (columns):
- similarity: [cosine]                      metric Spearman (also Pearson) vs the gold grade
- classification: [predicted label, loss]   metric accuracy (also macro-F1, MCC)
- mlm: [masked tokens, correct, loss sum]   metric masked-token accuracy (also loss)
- causal_lm: [predicted tokens, loss sum]   metric next-token cross-entropy (also perplexity); lower is better
- seq2seq: [predicted tokens, loss sum]     metric target-token cross-entropy of an encoder-decoder given the
                                            source, teacher-forced (also perplexity); lower is better

The language-model tasks pool over tokens: a metric is its sum over the examples' tokens divided by
their count (token-weighted, so a long text weighs more than a short one), also under every bootstrap
resample and permutation swap, which is why their per-example outputs are counts and sums, not means.

This module holds the task classes: how a loaded task is batched, run and scored. Building one from the
config (the model class it needs, its data read, encoded and deduplicated) is `reportgen.ablation.task_loading`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from reportgen.errors import ModelError
from reportgen.stats import pearson_rows, rank_rows


@dataclass
class Batch:
    """Padded model inputs for some units; `tokens` is the padded size rows x length."""

    units: np.ndarray
    inputs: dict[str, torch.Tensor]
    labels: torch.Tensor | None = None  # mlm: original ids at masked positions, -100 elsewhere

    @property
    def rows(self) -> int:
        return len(self.units)

    @property
    def tokens(self) -> int:
        """Padded tokens of every stream (an encoder-decoder's batch holds the decoder's too)."""
        return sum(int(self.inputs[name].numel()) for name in ("input_ids", "decoder_input_ids") if name in self.inputs)

    def tile(self, copies: int) -> "Batch":
        """The batch repeated `copies` times (block i is for mask i)."""
        if copies == 1:
            return self
        repeated = {name: tensor.repeat(copies, 1) for name, tensor in self.inputs.items()}
        labels = None if self.labels is None else self.labels.repeat(copies, 1)
        return Batch(np.tile(self.units, copies), repeated, labels)


# Similarity scores are compared to this many decimals (SimilarityTask.scored).
SCORE_DECIMALS = 5


@dataclass
class Task:
    """Data, model and metric of one task; subclasses say how outputs become a metric."""

    kind: str
    model: torch.nn.Module
    tokenizer: object
    units: list[dict[str, list[int]]]  # each: input_ids, optional token_type_ids / labels
    example_units: np.ndarray  # [examples, slots] unit index of each example's inputs
    gold: np.ndarray  # [examples] gold score / label index (zeros for mlm)
    settings: dict = field(default_factory=dict)  # what defines the task, for the cache key
    calibration: tuple[float, float] | None = None  # (slope, intercept) of the similarity loss, once fitted
    pad_id: int | None = None  # the id padding is filled with; None: the tokenizer's pad token, else 0
    # the number format of the masked forward passes (ablation.precision; `reportgen.ablation.engine`)
    precision: Literal["float32", "bfloat16", "float16"] = "float32"

    primary: ClassVar[str] = ""
    metric_names: ClassVar[tuple[str, ...]] = ()
    higher_is_better: ClassVar[dict[str, bool]] = {}

    @property
    def n_examples(self) -> int:
        return len(self.gold)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def scored(self, outputs: np.ndarray) -> np.ndarray:
        """Per-example outputs [examples, columns] as the metrics read them (see SimilarityTask.scored)."""
        return outputs

    # -- batching ----------------------------------------------------------------------
    def make_batch(self, unit_ids: Sequence[int]) -> Batch:
        """Pad the given units to the longest of them."""
        ids = np.asarray(unit_ids, dtype=np.int64)
        sequences = [self.units[i] for i in ids]
        shape = (len(sequences), max(len(seq["input_ids"]) for seq in sequences))
        pad = self.pad_id if self.pad_id is not None else self.tokenizer.pad_token_id or 0
        inputs = {"input_ids": torch.full(shape, pad, dtype=torch.long),
                  "attention_mask": torch.zeros(shape, dtype=torch.long)}
        has_types = "token_type_ids" in sequences[0]
        if has_types:
            inputs["token_type_ids"] = torch.zeros(shape, dtype=torch.long)
        labels = torch.full(shape, -100, dtype=torch.long) if "labels" in sequences[0] else None
        for row, seq in enumerate(sequences):
            length = len(seq["input_ids"])
            inputs["input_ids"][row, :length] = torch.tensor(seq["input_ids"])
            inputs["attention_mask"][row, :length] = 1
            if has_types:
                inputs["token_type_ids"][row, :length] = torch.tensor(seq["token_type_ids"])
            if labels is not None:
                labels[row, :length] = torch.tensor(seq["labels"])
        device = self.device
        return Batch(ids, {name: tensor.to(device) for name, tensor in inputs.items()},
                     None if labels is None else labels.to(device))

    def length_batches(self, token_budget: int, *, min_tokens: int | None = None,
                       max_waste: float = 1 / 16) -> list[Batch]:
        """Units bucketed by length so that a batch pads little or nothing.

        The units of one exact length form a bucket that needs no padding at all; a bucket
        over `token_budget` tokens is split into batches of nearly equal size. A bucket under
        `min_tokens` (default: a sixteenth of the budget), too small to be worth a forward
        of its own, is merged with the buckets of the next lengths as long as the merged
        batch spends at most `max_waste` of its tokens on padding and stays within the budget.
        """
        lengths = self.unit_lengths()
        order = np.argsort(lengths, kind="stable")
        small = token_budget // 16 if min_tokens is None else min_tokens
        groups: list[list[int]] = []
        for unit in order.tolist():
            if groups and lengths[groups[-1][-1]] == lengths[unit]:
                groups[-1].append(unit)
            else:
                groups.append([unit])
        merged: list[list[int]] = []
        for group in groups:
            if merged:
                current = merged[-1]
                width = int(lengths[group[0]])
                rows = len(current) + len(group)
                real = int(lengths[current].sum() + lengths[group].sum())
                tiny = len(current) * int(lengths[current[-1]]) < small or len(group) * width < small
                if tiny and rows * width <= token_budget and rows * width - real <= max_waste * rows * width:
                    current.extend(group)
                    continue
            merged.append(list(group))
        batches = []
        for units in merged:
            width = int(lengths[units[-1]])
            parts = max(1, math.ceil(len(units) * width / token_budget))
            for part in np.array_split(np.asarray(units, dtype=np.int64), parts):
                batches.append(self.make_batch(part))
        return batches

    def unit_lengths(self) -> np.ndarray:
        """Tokens of each unit, which batches are bucketed by."""
        return np.array([len(unit["input_ids"]) for unit in self.units])

    # -- outputs ---------------------------------------------------------------------------
    def unit_outputs(self, batch: Batch) -> torch.Tensor:
        """Run the model on a batch; one output row per batch row."""
        raise NotImplementedError

    def example_outputs(self, unit_out: torch.Tensor) -> torch.Tensor:
        """[examples, columns] from [units, ...]; differentiable (for importance)."""
        raise NotImplementedError

    def loss(self, unit_out: torch.Tensor) -> torch.Tensor:
        """The task loss whose gradient w.r.t. the head gates is Michel et al.'s importance."""
        raise NotImplementedError

    def metrics(self, out: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
        """Metrics of R resamples at once: out [R, n, columns], gold [R or 1, n] -> name -> [R]."""
        raise NotImplementedError

    def undefined_reason(self, outputs: np.ndarray) -> str | None:
        """Why the primary metric of these per-example outputs [n, columns] is undefined, in the
        task's own terms; None when it is defined. An undefined metric admits no test (ablation)."""
        value = self.metrics(outputs[None], self.gold[None])[self.primary][0]
        if np.isfinite(value):
            return None
        return self._why_undefined(outputs) or f"{self.primary} is not a number on these outputs"

    def _why_undefined(self, outputs: np.ndarray) -> str | None:
        """The reason in the task's own terms, for tasks that can name one (None: no reason known)."""

    def data_hash(self) -> str:
        """Identity of the inputs the model sees and of the gold answers, for the result cache; and of the
        number format the masked passes run in when it is not float32, so that no result computed in one
        format is read back for another (float32's hash, the cache's paths, are what they were before the
        precision setting existed)."""
        reduced = {} if self.precision == "float32" else {"precision": self.precision}
        digest = hashlib.sha256(json.dumps({"kind": self.kind, **self.settings, **reduced}, sort_keys=True).encode())
        for unit in self.units:
            digest.update(json.dumps(unit, sort_keys=True).encode())
        digest.update(self.example_units.astype(np.int64).tobytes())
        digest.update(self.gold.astype(np.float64).tobytes())
        return digest.hexdigest()[:16]


# -- statistics used by the metrics, vectorised over resample rows ---------------------------------
def classification_scores(pred: np.ndarray, gold: np.ndarray, classes: int) -> dict[str, np.ndarray]:
    """Accuracy, macro-F1 (over classes present in gold or prediction) and multiclass MCC per row."""
    pred = pred.astype(np.int64)
    gold = np.broadcast_to(gold, pred.shape).astype(np.int64)
    rows, examples = pred.shape
    flat = (np.arange(rows)[:, None] * classes + gold) * classes + pred
    confusion = np.bincount(flat.ravel(), minlength=rows * classes * classes).reshape(rows, classes, classes)
    tp = np.diagonal(confusion, axis1=1, axis2=2).astype(np.float64)
    true_count = confusion.sum(2).astype(np.float64)
    pred_count = confusion.sum(1).astype(np.float64)
    denom = true_count + pred_count  # 2TP + FP + FN
    present = denom > 0
    f1 = np.where(present, 2 * tp / np.where(present, denom, 1), 0.0)
    macro = f1.sum(1) / present.sum(1)
    correct = tp.sum(1)
    # Gorodkin's multiclass MCC (Gorodkin 2004, the R_K statistic), from the confusion matrix.
    cov_xy = correct * examples - (true_count * pred_count).sum(1)
    cov_xx = examples * examples - (pred_count**2).sum(1)
    cov_yy = examples * examples - (true_count**2).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mcc = np.where(cov_xx * cov_yy > 0, cov_xy / np.sqrt(cov_xx * cov_yy), 0.0)
    return {"accuracy": correct / examples, "macro_f1": macro, "mcc": mcc}


# -- the three tasks ---------------------------------------------------------------------------
POOLING_MODES = ("cls_token", "max_tokens", "mean_tokens", "mean_sqrt_len_tokens")  # sentence-transformers order


def pooling_modes(model_dir: Path) -> list[str]:
    """Pooling from the model's sentence-transformers config; mean pooling when it has none."""
    modules = model_dir / "modules.json"
    folder = None
    if modules.is_file():
        try:
            entries = json.loads(modules.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ModelError(f"{modules}: not valid JSON ({exc})") from None
        for entry in entries:
            if str(entry.get("type", "")).endswith("Pooling"):
                folder = model_dir / entry.get("path", "")
    if folder is None or not (folder / "config.json").is_file():
        return ["mean_tokens"]
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    modes = [m for m in POOLING_MODES if cfg.get(f"pooling_mode_{m}")]
    unsupported = [key for key, value in cfg.items()
                   if key.startswith("pooling_mode_") and value and key[len("pooling_mode_"):] not in POOLING_MODES]
    if unsupported or not modes:
        raise ModelError(f"{folder / 'config.json'}: pooling {', '.join(unsupported) or '(none)'} is not supported "
                         "(cls, max, mean, mean_sqrt_len are)")
    return modes


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, modes: Sequence[str]) -> torch.Tensor:
    """Sentence embedding as sentence-transformers' Pooling computes it (modes concatenated)."""
    real = attention_mask.unsqueeze(-1).to(hidden.dtype)  # 1 for a token, 0 for padding
    parts = []
    count = real.sum(1).clamp_min(1e-9)
    for mode in modes:
        if mode == "cls_token":
            parts.append(hidden[:, 0])
        elif mode == "max_tokens":
            parts.append(hidden.masked_fill(real == 0, -1e9).max(1).values)
        elif mode == "mean_tokens":
            parts.append((hidden * real).sum(1) / count)
        else:
            parts.append((hidden * real).sum(1) / count.sqrt())
    return torch.cat(parts, dim=-1)


class SimilarityTask(Task):
    primary = "spearman"
    metric_names = ("spearman", "pearson")
    higher_is_better = {"spearman": True, "pearson": True}

    def unit_outputs(self, batch: Batch) -> torch.Tensor:
        hidden = self.model(**batch.inputs).last_hidden_state
        return pool(hidden, batch.inputs["attention_mask"], self.settings["pooling"])

    def example_outputs(self, unit_out: torch.Tensor) -> torch.Tensor:
        first = unit_out[torch.as_tensor(self.example_units[:, 0], device=unit_out.device)]
        second = unit_out[torch.as_tensor(self.example_units[:, 1], device=unit_out.device)]
        return F.cosine_similarity(first, second, dim=-1).unsqueeze(-1)

    def scored(self, outputs: np.ndarray) -> np.ndarray:
        """Cosines rounded to SCORE_DECIMALS: two identical texts score 1 +- 1e-7 from float32 noise, and
        Spearman would rank pairs by that noise; rounded, scores the model cannot tell apart are ties (and
        get average ranks). 1e-5 is far above float32's noise and below any difference the model means."""
        return np.round(outputs, SCORE_DECIMALS)

    def scaled_gold(self) -> np.ndarray:
        """The grade rescaled to [0, 1], the target of sentence-transformers' CosineSimilarityLoss."""
        lowest, highest = self.gold.min(), self.gold.max()
        return (self.gold - lowest) / (highest - lowest if highest > lowest else 1.0)

    def fit_calibration(self, outputs: np.ndarray) -> dict[str, float]:
        """Fit target ~ slope * cosine + intercept by least squares on the unmasked model's outputs and
        keep it for `loss`: (slope, intercept, share of the squared error the fit removes).

        The metric is Spearman, which ignores any increasing linear map of the cosines, while the raw
        squared error also charges the model for its scale and offset (calibration). Measured after
        this fit, the loss (and so Michel et al.'s importance, its gradient) follows the errors that
        can change the ranking instead.
        """
        cosine, target = outputs[:, 0].astype(np.float64), self.scaled_gold()
        design = np.stack([cosine, np.ones_like(cosine)], axis=1)
        (slope, intercept), *_ = np.linalg.lstsq(design, target, rcond=None)
        before = float(np.mean((cosine - target) ** 2))
        after = float(np.mean((slope * cosine + intercept - target) ** 2))
        self.calibration = (float(slope), float(intercept))
        return {"slope": float(slope), "intercept": float(intercept),
                "error_removed": 1 - after / before if before > 0 else 0.0}

    def loss(self, unit_out: torch.Tensor) -> torch.Tensor:
        # Squared error between the (linearly calibrated, once fitted) cosine and the grade rescaled
        # to [0, 1], as in sentence-transformers' CosineSimilarityLoss.
        target = torch.as_tensor(self.scaled_gold(), dtype=unit_out.dtype, device=unit_out.device)
        slope, intercept = self.calibration or (1.0, 0.0)
        return (slope * self.example_outputs(unit_out)[:, 0] + intercept - target).pow(2).mean()

    def _why_undefined(self, outputs: np.ndarray) -> str | None:
        # A correlation needs two examples, and variation in both the gold scores and the predictions.
        if self.n_examples < 2:
            return "only one example"
        if np.all(self.gold == self.gold[0]):
            return "all gold scores are equal"
        if np.all(outputs[:, 0] == outputs[0, 0]):
            return "the model gives every pair the same similarity"
        return None

    def metrics(self, out: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
        pred = out[..., 0]
        # gold may be one row shared by all resamples: rank it once, broadcast after
        return {"spearman": pearson_rows(rank_rows(pred), rank_rows(gold)), "pearson": pearson_rows(pred, gold)}


class ClassificationTask(Task):
    primary = "accuracy"
    metric_names = ("accuracy", "macro_f1", "mcc")
    higher_is_better = {"accuracy": True, "macro_f1": True, "mcc": True}

    def unit_outputs(self, batch: Batch) -> torch.Tensor:
        return self.model(**batch.inputs).logits

    def example_outputs(self, unit_out: torch.Tensor) -> torch.Tensor:
        logits = unit_out[torch.as_tensor(self.example_units[:, 0], device=unit_out.device)].float()
        gold = torch.as_tensor(self.gold, dtype=torch.long, device=unit_out.device)
        loss = F.cross_entropy(logits, gold, reduction="none")
        return torch.stack([logits.argmax(-1).to(logits.dtype), loss], dim=-1)

    def loss(self, unit_out: torch.Tensor) -> torch.Tensor:
        return self.example_outputs(unit_out)[:, 1].mean()

    def metrics(self, out: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
        return classification_scores(out[..., 0], gold, int(self.settings["classes"]))


class MaskedLMTask(Task):
    primary = "accuracy"
    metric_names = ("accuracy", "loss")
    higher_is_better = {"accuracy": True, "loss": False}

    def unit_outputs(self, batch: Batch) -> torch.Tensor:
        logits = self.model(**batch.inputs).logits
        labels = batch.labels
        picked = labels != -100
        token_loss = F.cross_entropy(logits.transpose(1, 2).float(), labels, reduction="none", ignore_index=-100)
        correct = (logits.argmax(-1) == labels) & picked
        dtype = token_loss.dtype
        return torch.stack([picked.sum(1).to(dtype), correct.sum(1).to(dtype), token_loss.sum(1)], dim=-1)

    def example_outputs(self, unit_out: torch.Tensor) -> torch.Tensor:
        return unit_out[torch.as_tensor(self.example_units[:, 0], device=unit_out.device)]

    def loss(self, unit_out: torch.Tensor) -> torch.Tensor:
        out = self.example_outputs(unit_out)
        return out[:, 2].sum() / out[:, 0].sum()

    def _why_undefined(self, outputs: np.ndarray) -> str | None:
        # Accuracy over masked tokens needs at least one: texts that are all special tokens have none.
        return "no token to mask" if outputs[:, 0].sum() == 0 else None

    def metrics(self, out: np.ndarray, _gold: np.ndarray) -> dict[str, np.ndarray]:
        # No gold column: the masked tokens are the answers, and the outputs already count the correct ones.
        masked = out[..., 0].sum(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return {"accuracy": out[..., 1].sum(-1) / masked, "loss": out[..., 2].sum(-1) / masked}


def next_token_losses(logits: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[rows, 2]: each row's count of predicted tokens and the sum of their next-token cross-entropy.

    Position t predicts token t + 1: the labels are the input ids with padding as -100, shifted by
    one, as transformers' causal-LM loss takes them. Padding is never a label, and a real token never
    sees the padding after it (right padding, causal attention), so a row's numbers are those of its
    text alone, however the batch is padded."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    predicted = labels != -100
    token_loss = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), labels, reduction="none", ignore_index=-100)
    return torch.stack([predicted.sum(1).to(token_loss.dtype), token_loss.sum(1)], dim=-1)


LOGIT_CHUNK = 1 << 24  # logits (rows x positions x vocabulary) computed at once: 64 MB in float32
# Decoder families whose causal-LM logits are exactly lm_head(last hidden state): no scaling, no soft-capping
# (GPT-2, Llama, Qwen2, Mistral, Gemma 1), so the loss can be taken from the hidden states a slice at a time.
PLAIN_LM_HEADS = frozenset({"gpt2", "llama", "qwen2", "mistral", "gemma"})


def hidden_next_token_losses(hidden: torch.Tensor, head: nn.Linear, input_ids: torch.Tensor,
                             attention_mask: torch.Tensor, chunk: int = LOGIT_CHUNK) -> torch.Tensor:
    """`next_token_losses` from the last hidden states and the language-model head, a slice of positions at a
    time: a batch's whole logits (its tokens x a vocabulary of 128k, in float32) would take gigabytes, and
    each position's loss needs only its own row of them."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    states = hidden[:, :-1]
    rows, positions = labels.shape
    step = max(1, chunk // max(1, rows * head.weight.shape[0]))
    token_loss = torch.zeros(labels.shape, dtype=torch.float32, device=hidden.device)
    for start in range(0, positions, step):
        logits = head(states[:, start:start + step]).float()
        token_loss[:, start:start + step] = F.cross_entropy(logits.transpose(1, 2), labels[:, start:start + step],
                                                            reduction="none", ignore_index=-100)
    return torch.stack([(labels != -100).sum(1).to(token_loss.dtype), token_loss.sum(1)], dim=-1)


class CausalLMTask(Task):
    """Next-token prediction: the mean cross-entropy of every token given those before it, pooled over
    all predicted tokens of all texts (token-weighted), and its perplexity exp(loss). Lower is better:
    a head whose masking raises the loss is one the model needs (`higher_is_better` says so to the
    statistics and findings). Per-example outputs: [predicted tokens, loss sum], as for mlm."""

    primary = "loss"
    metric_names = ("loss", "perplexity")
    higher_is_better = {"loss": False, "perplexity": False}

    def unit_outputs(self, batch: Batch) -> torch.Tensor:
        inputs = batch.inputs
        # no cache: nothing is generated, and the engine may skip layers (replaying) that would fill it
        head = self.model.get_output_embeddings()
        if isinstance(head, nn.Linear) and self.model.config.model_type in PLAIN_LM_HEADS:
            # the base model runs with every masking hook, as inside the model's own forward
            hidden = self.model.base_model(**inputs, use_cache=False).last_hidden_state
            return hidden_next_token_losses(hidden, head, inputs["input_ids"], inputs["attention_mask"])
        logits = self.model(**inputs, use_cache=False).logits
        return next_token_losses(logits, inputs["input_ids"], inputs["attention_mask"])

    def example_outputs(self, unit_out: torch.Tensor) -> torch.Tensor:
        return unit_out[torch.as_tensor(self.example_units[:, 0], device=unit_out.device)]

    def loss(self, unit_out: torch.Tensor) -> torch.Tensor:
        out = self.example_outputs(unit_out)
        return out[:, 1].sum() / out[:, 0].sum()

    def _why_undefined(self, outputs: np.ndarray) -> str | None:
        return "no text has a token to predict" if outputs[:, 0].sum() == 0 else None

    def metrics(self, out: np.ndarray, _gold: np.ndarray) -> dict[str, np.ndarray]:
        # No gold column: each text's next tokens are the answers, already scored in the outputs.
        predicted = out[..., 0].sum(-1)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            loss = out[..., 1].sum(-1) / predicted
            return {"loss": loss, "perplexity": np.exp(loss)}


def _padded(sequences: Sequence[Sequence[int]], fill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids [rows, longest] and their attention mask."""
    ids = torch.full((len(sequences), max(len(seq) for seq in sequences)), fill, dtype=torch.long)
    real = torch.zeros_like(ids)
    for row, seq in enumerate(sequences):
        ids[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        real[row, :len(seq)] = 1
    return ids, real


class Seq2SeqTask(CausalLMTask):
    """An encoder-decoder's loss of each target given its source, teacher-forced: the decoder reads the
    target shifted right behind the decoder start token and predicts every target token
    (`reportgen.model.seq2seq`). The metric is the mean cross-entropy over all target tokens of all pairs
    (token-weighted) and its perplexity; lower is better, as for causal_lm, whose per-example outputs
    [predicted tokens, loss sum] and metrics it shares. A unit is a distinct pair: input_ids (the source),
    decoder_input_ids and labels (the target)."""

    def unit_lengths(self) -> np.ndarray:
        return np.array([len(unit["input_ids"]) + len(unit["labels"]) for unit in self.units])

    def make_batch(self, unit_ids: Sequence[int]) -> Batch:
        """Sources and decoder inputs padded to their longest, labels with -100 (never a label)."""
        ids = np.asarray(unit_ids, dtype=np.int64)
        pairs = [self.units[i] for i in ids]
        source, source_real = _padded([pair["input_ids"] for pair in pairs], self.pad_id)
        decoder, decoder_real = _padded([pair["decoder_input_ids"] for pair in pairs], self.pad_id)
        labels, _ = _padded([pair["labels"] for pair in pairs], -100)
        inputs = {"input_ids": source, "attention_mask": source_real, "decoder_input_ids": decoder,
                  "decoder_attention_mask": decoder_real}
        device = self.device
        return Batch(ids, {name: tensor.to(device) for name, tensor in inputs.items()}, labels.to(device))

    def unit_outputs(self, batch: Batch) -> torch.Tensor:
        # no cache: nothing is generated
        logits = self.model(**batch.inputs, use_cache=False).logits
        labels = batch.labels
        token_loss = F.cross_entropy(logits.transpose(1, 2).float(), labels, reduction="none", ignore_index=-100)
        return torch.stack([(labels != -100).sum(1).to(token_loss.dtype), token_loss.sum(1)], dim=-1)

    def _why_undefined(self, outputs: np.ndarray) -> str | None:
        return "no target has a token to predict" if outputs[:, 0].sum() == 0 else None
