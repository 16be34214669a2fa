"""Train a two-layer attention-only GPT-2 on CPU until induction heads form, and measure every head.

Olsson, Elhage, Nanda et al. 2022 ("In-context Learning and Induction Heads") found that induction heads
form in an abrupt phase change early in training, already in two-layer attention-only transformers: a
previous-token head in layer 0 and, reading its output through K-composition, a head in layer 1 that
attends to the token after the previous occurrence of the current token. This recipe trains such a model
here, within minutes on two CPU cores, and measures every head before and after training:

    OMP_NUM_THREADS=2 python recipes/induction/train.py [--out recipes/induction] [--threads 2]

It writes into OUT: model/ (the trained GPT2LMHeadModel, config.json + model.safetensors, and its fast
word-level tokenizer, which AutoModelForCausalLM / AutoTokenizer load), init/ (the same network before
training, the untrained control) and measured.json (every head's induction and previous-token score
before and after, their causal nulls, the training time, steps and loss), and texts.txt (200 held-out
stories, the data of the site's causal-LM ablation). model/, init/ and texts.txt are ignored by git;
measured.json is the record this folder's README.md and the docs' recipes guide
(docs/pages/guides/recipes.md) quote.

Attention-only in a GPT-2 checkpoint: every layer's MLP output projection (mlp.c_proj, weight and bias)
is set to zero and frozen (requires_grad False), so each MLP adds exactly 0 to the residual stream; the
rest of the MLP (c_fc) and its layer norm (ln_2) are frozen too, since nothing they compute reaches the
output. The saved checkpoint is reloaded and checked for all-zero c_proj tensors.

Training (this folder's README.md: what was tried and why): 2 layers x 4 heads, width 128, 128 positions,
untied output layer, AdamW 3e-3 with warm-up and cosine decay, 4000 steps of 32 sequences, the first 3000 on 64-token
sequences (a sequence-length warm-up: the heads form on short sequences, at half the cost per step) and
the last 1000 on 128 tokens. The data (induction_data.py): template stories mixed with uniformly random
spans and repeats of them. The detector (reportgen.patterns.decoder, or detect.py where reportgen lacks
it): /work/shared/REFERENCE.md's induction and previous-token scores on [BOS] + r + r inputs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the recipe's own modules, run as a script

import induction_data as data  # noqa: E402 - after the path above

try:  # reportgen's decoder patterns (issue 31); the recipe's local equivalent where reportgen lacks them
    from reportgen.patterns.decoder import induction, induction_input, induction_tokens, nulls, previous_token

    DETECTOR = "reportgen.patterns.decoder"
except ImportError:
    from detect import induction, induction_input, induction_tokens, nulls, previous_token  # noqa: E402

    DETECTOR = "recipes/induction/detect.py"

INDUCTION_THRESHOLD = 0.5  # the recipe's bar for "an induction head" (GPT-2 small's known ones: 0.4-0.9)
PREVIOUS_FACTOR = 4  # a previous-token head: more than this many times the uniform causal head's score


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="writes OUT/model, OUT/init, OUT/measured.json")
    parser.add_argument("--steps", type=int, default=4000, help="optimiser steps")
    parser.add_argument("--minutes", type=float, default=14.0, help="stop early if training takes longer")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--embd", type=int, default=128, help="residual width (n_embd)")
    parser.add_argument("--context", type=int, default=128, help="positions (n_positions) = training length")
    parser.add_argument("--tie", action=argparse.BooleanOptionalAction, default=False,
                        help="tie the output layer to the token embeddings (GPT-2's default; here off)")
    parser.add_argument("--init-std", type=float, default=0.02, help="initializer_range (GPT-2: 0.02)")
    parser.add_argument("--batch", type=int, default=32, help="sequences per step")
    parser.add_argument("--warm-length", type=int, default=64,
                        help="sequence-length warm-up: training sequences of this many tokens ...")
    parser.add_argument("--warm-steps", type=int, default=3000, help="... for the first this many steps")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (AdamW)")
    parser.add_argument("--warmup", type=int, default=100, help="linear warm-up steps, then cosine decay")
    parser.add_argument("--mix", type=float, nargs=len(data.KINDS), default=list(data.MIX), metavar=data.KINDS,
                        help="probabilities of the three kinds of chunk in a training sequence")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=None,
                        help="induction test: length of the repeated sequence (default: 50, or what the context holds)")
    parser.add_argument("--detect-batch", type=int, default=16, help="induction test: sequences")
    parser.add_argument("--detect-seed", type=int, default=1234)
    parser.add_argument("--log-every", type=int, default=100, help="steps between printed mean losses")
    parser.add_argument("--track-every", type=int, default=100,
                        help="steps between quick head scores during training (0: never)")
    args = parser.parse_args(argv)
    if args.n is None:
        args.n = min(50, (args.context - 1) // 2)
    if 2 * args.n + 1 > args.context:
        parser.error(f"--n {args.n} needs 2n + 1 = {2 * args.n + 1} positions, --context is {args.context}")
    return args


# ---------------------------------------------------------------- the model

def make_model(args: argparse.Namespace):
    """A GPT-2 with zeroed, frozen MLPs (attention-only), no dropout, the recipe's specials."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(args.seed)
    config = GPT2Config(vocab_size=len(data.VOCABULARY), n_positions=args.context, n_embd=args.embd,
                        n_layer=args.layers, n_head=args.heads, n_inner=args.embd, tie_word_embeddings=args.tie,
                        initializer_range=args.init_std,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=data.BOS_ID, eos_token_id=data.EOS_ID, pad_token_id=data.PAD_ID)
    model = GPT2LMHeadModel(config)
    attention_only(model)
    return model


def attention_only(model) -> None:
    """Zero every MLP's output projection and freeze the MLP and its layer norm: the MLP adds exactly 0."""
    with torch.no_grad():
        for block in model.transformer.h:
            block.mlp.c_proj.weight.zero_()
            block.mlp.c_proj.bias.zero_()
            for parameter in [*block.mlp.parameters(), *block.ln_2.parameters()]:
                parameter.requires_grad_(False)


@contextmanager
def mlps_skipped(model):
    """Each MLP returns zeros without computing them, for as long as the block lasts: its output is exactly zero
    anyway (attention_only), and adding zero changes neither the residual stream nor any gradient, so training
    takes the same steps, a third fewer multiplications a step (the MLPs were a third of the blocks' work)."""
    for block in model.transformer.h:
        block.mlp.forward = torch.zeros_like
    try:
        yield
    finally:
        for block in model.transformer.h:
            del block.mlp.forward


def mlp_outputs_are_zero(model) -> bool:
    return all(not block.mlp.c_proj.weight.any() and not block.mlp.c_proj.bias.any() for block in model.transformer.h)


def load(directory: Path):
    """A saved checkpoint as any transformers user loads it, with eager attention (attention weights)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    if not mlp_outputs_are_zero(model):
        raise AssertionError(f"{directory}: an mlp.c_proj tensor is not all zero: the model is not attention-only")
    return model


# ---------------------------------------------------------------- the measurement

def induction_batch(n: int, batch: int, seed: int) -> np.ndarray:
    """[B, 2n + 1] induction inputs: [BOS] + r + r, r uniform over the vocabulary without the specials."""
    r = induction_tokens(len(data.VOCABULARY), n, batch, seed, exclude=range(data.FIRST_WORD_ID))
    return np.stack([induction_input(row, data.BOS_ID) for row in r])


@torch.no_grad()
def head_scores(model, inputs: np.ndarray, n: int) -> dict:
    """Every head's induction and previous-token score ([L][H], mean over the sequences), and the model's
    loss on the first and the second copy (the second is predictable only in context)."""
    if model.config._attn_implementation != "eager":
        raise ValueError("attention weights need attn_implementation='eager'")
    ids = torch.as_tensor(inputs)
    output = model(input_ids=ids, output_attentions=True)
    attention = torch.stack(output.attentions, dim=1).double().numpy()  # [B, L, H, T, T]
    inductions = np.stack([induction(sequence, n) for sequence in attention]).mean(axis=0)
    previous = np.stack([previous_token(sequence) for sequence in attention]).mean(axis=0)
    losses = F.cross_entropy(output.logits[:, :-1].transpose(1, 2).float(), ids[:, 1:], reduction="none")
    # logits at position p predict token p + 1: the first copy is tokens 2..n (token 1 follows only [BOS]),
    # the second copy tokens n + 2 .. 2n (its first token, n + 1, is r_1 again after r_n: not yet a copy)
    return {"induction": inductions.round(4).tolist(), "previous_token": previous.round(4).tolist(),
            "loss_first_copy": round(float(losses[:, 1:n].mean()), 4),
            "loss_second_copy": round(float(losses[:, n + 1:].mean()), 4)}


def best(scores: list[list[float]], layer: int | None = None) -> dict:
    table = np.asarray(scores)
    layers = range(table.shape[0]) if layer is None else [layer]
    top = max(((lay, head) for lay in layers for head in range(table.shape[1])), key=lambda lh: table[lh])
    return {"layer": top[0], "head": top[1], "score": round(float(table[top]), 4)}


# ---------------------------------------------------------------- training

def learning_rate(step: int, args: argparse.Namespace) -> float:
    """Linear warm-up over `warmup` steps, then cosine decay to a tenth of the peak at the last step."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def evaluation_loss(model, batch: np.ndarray) -> float:
    with torch.no_grad():
        ids = torch.as_tensor(batch)
        return round(float(model(input_ids=ids, labels=ids).loss), 4)


def train(model, args: argparse.Namespace, heldout: np.ndarray) -> dict:
    """`args.steps` AdamW steps on fresh sequences (induction_data.training_batch), next-token loss; every
    `track_every` steps the best layer-0 previous-token and layer-1 induction score on 4 induction inputs
    as long as the current training sequences (n = 31 during the 64-token warm-up, then args.n)."""
    rng = np.random.default_rng(args.seed)
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    start, history, recent, steps, tokens = time.monotonic(), [], [], 0, 0
    budget = args.minutes * 60
    for step in range(args.steps):
        if time.monotonic() - start > budget:
            print(f"time budget of {args.minutes} min spent after {steps} steps", flush=True)
            break
        model.train()
        for group in optimiser.param_groups:
            group["lr"] = learning_rate(step, args)
        length = min(args.warm_length, args.context) if step < args.warm_steps else args.context
        ids = torch.as_tensor(data.training_batch(rng, args.batch, length, args.mix))
        loss = model(input_ids=ids, labels=ids).loss
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimiser.step()
        steps += 1
        tokens += ids.numel()
        recent.append(loss.item())
        tracked = args.track_every and (steps % args.track_every == 0 or steps == args.steps)
        if steps % args.log_every == 0 or steps == args.steps or tracked:
            entry = {"step": steps, "seconds": round(time.monotonic() - start, 1),
                     "loss": round(float(np.mean(recent)), 4)}
            recent = []
            if tracked:
                model.eval()
                model.set_attn_implementation("eager")
                n = min(args.n, (length - 1) // 2)
                scores = head_scores(model, induction_batch(n, 4, args.detect_seed), n)
                model.set_attn_implementation("sdpa")
                entry.update(n=n, induction_l1=best(scores["induction"], layer=args.layers - 1)["score"],
                             previous_l0=best(scores["previous_token"], layer=0)["score"],
                             loss_second_copy=scores["loss_second_copy"])
            history.append(entry)
            print("  ".join(f"{key} {value}" for key, value in entry.items()), flush=True)
    seconds = time.monotonic() - start
    model.eval()
    return {"steps": steps, "seconds": round(seconds, 1), "tokens_seen": tokens,
            "final_loss": history[-1]["loss"] if history else None,  # mean over the last log_every steps
            "heldout_loss": evaluation_loss(model, heldout), "history": history}


def run(args: argparse.Namespace) -> dict:
    """Train, save and measure (module docstring); torch's thread count and determinism setting are
    restored afterwards, so that a caller in the same process (the recipe's test) keeps its own."""
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _run(args: argparse.Namespace) -> dict:
    began = time.monotonic()
    out = args.out
    check_texts(out / "texts.txt", stories(args.seed + 2))  # before any work, not after the training
    tokenizer = data.make_tokenizer(args.context)
    model = make_model(args)
    for name, target in (("init", out / "init"), ("model", out / "model")):
        target.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(target)
        if name == "init":
            model.save_pretrained(target)

    inputs = induction_batch(args.n, args.detect_batch, args.detect_seed)
    heldout = data.training_batch(np.random.default_rng(args.seed + 1), 64, args.context, args.mix)
    before = head_scores(load(out / "init"), inputs, args.n)
    before["heldout_loss"] = evaluation_loss(load(out / "init"), heldout)
    print(f"before training: best induction {best(before['induction'])}, "
          f"best previous-token {best(before['previous_token'])}", flush=True)

    with mlps_skipped(model):
        training = train(model, args, heldout)
    if not mlp_outputs_are_zero(model):
        raise AssertionError("an mlp.c_proj tensor changed during training")
    model.save_pretrained(out / "model")

    trained = load(out / "model")  # what a transformers user gets: the checks run on the saved checkpoint
    after = head_scores(trained, inputs, args.n)
    after["heldout_loss"] = evaluation_loss(trained, heldout)
    null = nulls(2 * args.n + 1, n=args.n)  # the uniform causal head on the same induction inputs
    null = {name: round(null[name], 4) for name in ("induction", "previous_token")}
    summary = {
        "before_best_induction": best(before["induction"]),
        "after_best_induction_layer1": best(after["induction"], layer=args.layers - 1),
        "after_best_previous_token_layer0": best(after["previous_token"], layer=0),
        "after_heads_above_threshold": [[layer, head] for layer, row in enumerate(after["induction"])
                                        for head, score in enumerate(row) if score > INDUCTION_THRESHOLD],
    }
    summary["expected_outcome"] = bool(
        summary["before_best_induction"]["score"] <= INDUCTION_THRESHOLD
        and summary["after_best_induction_layer1"]["score"] > INDUCTION_THRESHOLD
        and summary["after_best_previous_token_layer0"]["score"] > PREVIOUS_FACTOR * null["previous_token"])
    result = {
        "command": " ".join(["python recipes/induction/train.py", *sys.argv[1:]]) if __name__ == "__main__" else None,
        "detector": DETECTOR,
        "settings": {key: (_shown(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
        "model": {"n_layer": args.layers, "n_head": args.heads, "n_embd": args.embd, "n_positions": args.context,
                  "vocab_size": len(data.VOCABULARY), "tie_word_embeddings": args.tie,
                  "mlp": "c_proj zero and frozen (attention-only)",
                  "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)},
        "data": {"chunk_kinds": dict(zip(data.KINDS, args.mix, strict=True)), "span_tokens": list(data.SPAN)},
        "induction_test": {"n": args.n, "sequences": args.detect_batch, "seed": args.detect_seed,
                           "tokens": 2 * args.n + 1},
        "causal_nulls": null,
        "before": before,
        "after": after,
        "training": training,
        "summary": summary,
        "mlp_c_proj_all_zero_after_loading": True,  # load() raises otherwise
        "total_seconds": round(time.monotonic() - began, 1),
        "machine": {"torch": torch.__version__, "threads": args.threads, "python": platform.python_version(),
                    "cpus": os.cpu_count(), "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
    }
    (out / "measured.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    write_texts(out / "texts.txt", args.seed + 2)
    return result


STORIES = 200  # held-out stories for the site's causal-LM ablation (reportgen.yaml, ablation.data)


def stories(seed: int) -> str:
    """Held-out template stories, one a line (a seed training never used): names, objects and places come back
    in each story, so an induction head helps predict them and masking it should cost loss."""
    rng = np.random.default_rng(seed)
    return "".join(" ".join(data.story(rng)) + "\n" for _ in range(STORIES))


def check_texts(path: Path, text: str) -> None:
    """Refuse, before training, to overwrite a texts.txt that is not the one train.py writes."""
    if path.exists() and (path.is_symlink() or not path.is_file() or path.read_text(encoding="utf-8") != text):
        raise SystemExit(f"{path}: exists and is not the stories train.py writes; move it away (nothing was "
                         "overwritten)")


def write_texts(path: Path, seed: int) -> None:
    """The site's causal-LM data (`stories`), checked first (`check_texts`)."""
    text = stories(seed)
    check_texts(path, text)
    path.write_text(text, encoding="utf-8")


def _shown(path: Path) -> str:
    """A path as the record shows it: relative to the repository root when inside it."""
    root = HERE.parent.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def print_table(result: dict) -> None:
    for when in ("before", "after"):
        scores = result[when]
        print(f"\n{when} training (induction / previous-token per head; causal nulls "
              f"{result['causal_nulls']['induction']} / {result['causal_nulls']['previous_token']}):")
        for layer, (ind, prev) in enumerate(zip(scores["induction"], scores["previous_token"], strict=True)):
            print(f"  layer {layer}: " + "  ".join(f"h{h} {i:.3f}/{p:.3f}" for h, (i, p) in enumerate(zip(ind, prev,
                                                                                                      strict=True))))
        print(f"  loss on the first copy {scores['loss_first_copy']}, on the second copy "
              f"{scores['loss_second_copy']}, held-out training-mix loss {scores['heldout_loss']}")
    training, summary = result["training"], result["summary"]
    print(f"\n{training['steps']} steps in {training['seconds']} s (whole run {result['total_seconds']} s), "
          f"final training loss {training['final_loss']}, held-out {training['heldout_loss']}")
    print(f"summary: {json.dumps(summary)}")
    print(f"detector: {result['detector']}")


def main(argv: Sequence[str] | None = None) -> int:
    result = run(parse_args(argv))
    print_table(result)
    return 0 if result["summary"]["expected_outcome"] else 1


if __name__ == "__main__":
    sys.exit(main())
