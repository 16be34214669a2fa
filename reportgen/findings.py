"""Findings: the measured results turned into statements, as plain data for the findings page.

Each finding has a stable id derived from what it is (e.g. `ablation-whole-layers`), a
verdict ("supported" or "not supported") and the numbers a template needs to write its
sentence, with uncertainty (std over examples, bootstrap CI, corrected p-values) and links.
A result the data do not support is stated as such, never left out.
"""

from __future__ import annotations

import numpy as np

# Pattern findings: (id, statistic, label, threshold key in settings.thresholds).
PATTERN_FINDINGS = [
    ("patterns-previous-token", "previous_token", "previous_token", "positional"),
    ("patterns-next-token", "next_token", "next_token", "positional"),
    ("patterns-delimiter", "delimiter", "delimiter", "delimiter"),
    ("patterns-within-word", "within_word", "within_word", "within_word"),
    ("patterns-other-sentence", "other_segment", "other_segment", "other_segment"),
    ("patterns-same-word", "same_token", "same_token", "same_token"),
]


def _head(stats: dict, stat: str, layer: int, head: int) -> dict:
    s = stats[stat]
    return {"layer": layer, "head": head, "value": s["mean"][layer][head], "std": s["std"][layer][head],
            "example": s["example"][layer][head]}


def pattern_findings(stats: dict) -> list[dict]:
    """Which heads carry each pattern (over its threshold), strongest first; else the strongest candidate."""
    out = []
    thresholds = stats["settings"]["thresholds"]
    for fid, stat, label, threshold in PATTERN_FINDINGS:
        mean = np.array([[np.nan if v is None else v for v in row] for row in stats[stat]["mean"]], dtype=float)
        over = np.argwhere(np.nan_to_num(mean, nan=-1) > thresholds[threshold])
        heads = sorted((_head(stats, stat, int(l), int(h)) for l, h in over), key=lambda x: -x["value"])
        labelled = sum(row.count(label) for row in stats["labels"])
        best = np.unravel_index(np.nanargmax(mean), mean.shape) if np.isfinite(mean).any() else None
        finding = {"id": fid, "group": "patterns", "stat": stat, "threshold": thresholds[threshold],
                   "supported": bool(heads), "heads": heads[:5], "count": len(heads), "labelled": labelled,
                   "strongest": _head(stats, stat, int(best[0]), int(best[1])) if best is not None else None,
                   "applies_to": stats[stat]["count"]}
        if stat in ("previous_token", "next_token"):
            argmax = stats[f"{stat}_argmax"]["mean"]
            for h in finding["heads"] + ([finding["strongest"]] if finding["strongest"] else []):
                h["argmax"] = argmax[h["layer"]][h["head"]]
        out.append(finding)
    broad = [(l, h) for l, row in enumerate(stats["labels"]) for h, lab in enumerate(row) if lab == "broad"]
    out.append({"id": "patterns-broad", "group": "patterns", "stat": "entropy", "supported": bool(broad),
                "count": len(broad), "layers": sorted({l for l, _ in broad}),
                "baseline": stats["entropy"]["uniform_baseline"]})
    return out


def _within(value: float, ci: list[float]) -> bool:
    return ci[0] <= value <= ci[1]


def _safe_fraction(fractions: list[float], values: list[float], ci: list[float]) -> float:
    """The largest fraction up to which every mean stays inside the baseline's CI."""
    safe = 0.0
    for fraction, value in zip(fractions, values):
        if value is None or not _within(value, ci):
            break
        safe = fraction
    return safe


def ablation_findings(ab: dict) -> list[dict]:
    """Statements about the head-ablation experiments that ran (see ablation.py for the tests used)."""
    out = []
    metric = ab["task"]["metric"]
    base = ab.get("baseline")
    undefined = ab["task"].get("undefined")  # the cause, e.g. "all gold scores are equal"
    if undefined or (base is not None and base["value"] is None):
        # e.g. Spearman of constant predictions: nothing can be said about what masking changes
        return [{"id": "ablation-undefined", "group": "ablation", "supported": False, "metric": metric,
                 "examples": ab["task"]["examples"], "reason": undefined}]
    ci = base["ci"][metric] if base else None
    if base:
        out.append({"id": "ablation-baseline", "group": "ablation", "supported": True, "metric": metric,
                    "value": base["value"], "ci": ci, "examples": ab["task"]["examples"]})
    if "single_heads" in ab:
        sh = ab["single_heads"]
        delta = np.array(sh["delta"], dtype=float)
        significant = np.array(sh["significant"], dtype=bool)
        heads = [{"layer": int(l), "head": int(h), "delta": float(delta[l, h]),
                  "p": sh["p_adjusted"][l][h]} for l, h in np.argwhere(significant)]
        worst = np.unravel_index(np.nanargmin(delta), delta.shape)
        best = np.unravel_index(np.nanargmax(delta), delta.shape)
        out.append({"id": "ablation-single-heads", "group": "ablation", "supported": bool(heads), "metric": metric,
                    "significant": sorted(heads, key=lambda x: x["delta"])[:8], "count": len(heads),
                    "total": int(delta.size), "test": sh["test"], "correction": sh["correction"],
                    "alpha": sh["alpha"],
                    "worst": {"layer": int(worst[0]), "head": int(worst[1]), "delta": float(delta[worst]),
                              "p": sh["p_adjusted"][worst[0]][worst[1]]},
                    "best": {"layer": int(best[0]), "head": int(best[1]), "delta": float(delta[best]),
                             "p": sh["p_adjusted"][best[0]][best[1]]}})
    if "random_fraction" in ab and not ci:
        out.append(_needs_baseline("ablation-random-fraction", "Random fractions of heads", metric))
    elif "random_fraction" in ab:
        rf = ab["random_fraction"]
        safe = _safe_fraction(rf["fractions"], rf["mean"], ci)
        out.append({"id": "ablation-random-fraction", "group": "ablation", "supported": safe > 0, "metric": metric,
                    "safe_fraction": safe, "seeds": len(rf["seeds"]), "last_fraction": rf["fractions"][-1],
                    "last_relative": rf["relative_mean"][-1]})
    if "layer_halves" in ab:
        lh = ab["layer_halves"]
        i = len(lh["fractions"]) - 1
        lower, upper = lh["lower"]["relative_mean"][i], lh["upper"]["relative_mean"][i]
        spread = max(lh["lower"]["relative_std"][i], lh["upper"]["relative_std"][i])
        out.append({"id": "ablation-layer-halves", "group": "ablation", "metric": metric,
                    "fraction": lh["fractions"][i], "lower": lower, "upper": upper,
                    "more": "upper" if upper < lower else "lower", "difference": abs(upper - lower),
                    # over the seeds' spread: a difference smaller than it is not a finding
                    "supported": abs(upper - lower) > 2 * spread, "spread": spread})
    if "whole_layers" in ab:
        wl = ab["whole_layers"]
        delta = np.array(wl["delta"], dtype=float)
        worst, best = int(np.nanargmin(delta)), int(np.nanargmax(delta))
        out.append({"id": "ablation-whole-layers", "group": "ablation", "metric": metric, "supported": True,
                    "worst": {"layer": worst, "delta": float(delta[worst]), "relative": wl["relative"][worst],
                              "significant": wl["significant"][worst], "p": wl["p_adjusted"][worst]},
                    "best": {"layer": best, "delta": float(delta[best]), "relative": wl["relative"][best],
                             "significant": wl["significant"][best], "p": wl["p_adjusted"][best]},
                    "improves": bool(delta[best] > 0)})
    if "importance" in ab and not ci:
        out.append(_needs_baseline("ablation-importance", "Importance-ordered pruning", metric))
    elif "importance" in ab:
        pr, ro = ab["importance"]["pruning"], ab["importance"]["random_order"]
        pruned = _safe_fraction(pr["fractions"], pr["value"], ci)
        random = _safe_fraction(pr["fractions"], ro["mean"], ci)
        out.append({"id": "ablation-importance", "group": "ablation", "metric": metric,
                    "supported": pruned > random, "pruned_safe": pruned, "random_safe": random,
                    "normalization": ab["importance"]["normalization"]})
    return out


def _needs_baseline(fid: str, title: str, metric: str) -> dict:
    """An experiment that ran but whose statement compares with the baseline's confidence
    interval, when the baseline experiment is off: its chart is there, its verdict is not."""
    return {"id": fid, "group": "ablation", "supported": False, "needs_baseline": True, "title": title,
            "metric": metric}


def headline(report: dict, findings: list[dict]) -> dict:
    """The few numbers at the top of the report."""
    labels = report["statistics"]["label_counts"]
    by_id = {f["id"]: f for f in findings}
    return {"heads": report["layers"] * report["heads"], "labels": labels,
            "baseline": by_id.get("ablation-baseline"),
            "significant_heads": by_id.get("ablation-single-heads", {}).get("count")}
