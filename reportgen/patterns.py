"""Per-head attention statistics (Clark, Khandelwal, Levy, Manning 2019, "What Does BERT Look At?").

Each statistic is computed per example as an [layers, heads] array, vectorised over
heads, queries and keys, then averaged over examples (with the spread across them).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from reportgen.attention import ExampleRun


def entropy(att: np.ndarray) -> np.ndarray:
    """Mean over queries of the row entropy in nats, [L, H].

    Clark et al. smooth A' = 0.9999 A + 0.0001 / n before taking -sum A' ln A';
    the uniform baseline is ln n.
    """
    n = att.shape[-1]
    smooth = 0.9999 * att + 0.0001 / n
    return -(smooth * np.log(smooth)).sum(-1).mean(-1)


def mass_on(att: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Mean over queries of the attention on a set of key positions (bool [T]), [L, H]."""
    return att[..., keys].sum(-1).mean(-1)


def delimiter_keys(run: ExampleRun) -> tuple[np.ndarray, np.ndarray]:
    """(cls, sep) key masks: the special token at position 0 is [CLS] (or <s>); the others are [SEP] (or </s>)."""
    cls = np.zeros(run.n_tokens, dtype=bool)
    cls[0] = bool(run.special[0])
    return cls, run.special & ~cls


def example_statistics(run: ExampleRun) -> dict[str, np.ndarray]:
    cls, sep = delimiter_keys(run)
    return {
        "entropy": entropy(run.attention),
        "cls": mass_on(run.attention, cls),
        "sep": mass_on(run.attention, sep),
        "cls_sep": mass_on(run.attention, cls | sep),
    }


def head_statistics(runs: Iterable[ExampleRun]) -> dict[str, dict]:
    """Mean and standard deviation over examples of each statistic, as nested lists [L][H]."""
    per_example: dict[str, list[np.ndarray]] = {}
    baselines = []
    for run in runs:
        for name, value in example_statistics(run).items():
            per_example.setdefault(name, []).append(value)
        baselines.append(np.log(run.n_tokens))
    out = {}
    for name, values in per_example.items():
        stack = np.stack(values)
        out[name] = {"mean": stack.mean(0).round(6).tolist(), "std": stack.std(0).round(6).tolist()}
    out["entropy"]["uniform_baseline"] = round(float(np.mean(baselines)), 6)
    return out
