"""`reportgen build`: config -> model run -> analyses -> report (plain data) -> site.

Each stage hands plain data to the next; only the model stage sees torch, and
only the site stage writes to the output directory (atomically, at the very end).
"""

from __future__ import annotations

import platform
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from reportgen import __version__, model, patterns
from reportgen.attention import ExampleRun, run_example
from reportgen.cache import Cache, key_of
from reportgen.config import Config
from reportgen.errors import DataError
from reportgen.model import ModelInfo
from reportgen.progress import Callback, silent
from reportgen.qk import QK_MAX_TOKENS

REPORT_SCHEMA_VERSION = 1


@dataclass
class ModelStage:
    info: ModelInfo
    runs: list[ExampleRun]
    computed: int  # examples the model actually ran on (0 on a warm rebuild)
    seconds: float
    warnings: list[str] = field(default_factory=list)


def run_model(config: Config, progress: Callback = silent) -> ModelStage:
    """Attention for every example, from the cache when it has it; the model is loaded only if needed."""
    start = time.perf_counter()
    specs = config.examples
    if not specs:
        raise DataError(f"{config.source}: field 'examples': the list is empty; give at least one example")
    name, path = model.resolve(config.model)
    fingerprint = model.fingerprint(path)
    cache = Cache(config.cache_dir)
    keys = [key_of("run", fingerprint, s.text, s.pair, config.max_length) for s in specs]
    runs = [cache.get_run(k, s) for k, s in zip(keys, specs)]
    info = cache.get_json("info", key_of("info", fingerprint))
    missing = [i for i, r in enumerate(runs) if r is None]
    if missing or info is None:
        progress("Loading model", 0, 1)
        net, tokenizer = model.load(path, config.device)
        progress("Loading model", 1, 1)
        info = model.describe(name, path, net).to_dict()
        cache.put_json("info", key_of("info", fingerprint), info)
        for done, i in enumerate(missing, 1):
            runs[i] = run_example(net, tokenizer, specs[i], config.max_length, keep_qk=True)
            if runs[i].n_tokens > QK_MAX_TOKENS:  # the q/k page is built only for short examples
                runs[i].extras.clear()
            cache.put_run(keys[i], runs[i])
            progress("Running examples", done, len(missing))
    notes = [f"example {i + 1} was truncated to {config.max_length} tokens (config field 'max_length')"
             for i, r in enumerate(runs) if r.truncated]
    for note in notes:
        warnings.warn(note)
    return ModelStage(ModelInfo(**info), runs, len(missing), time.perf_counter() - start, notes)


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "reportgen": __version__}


def make_report(config: Config, stage: ModelStage, statistics: dict, reproducible: bool) -> dict:
    """Everything the site shows, as JSON-able data: templates and charts read only this."""
    info = stage.info.to_dict()
    info.pop("path")  # a local path says nothing to a reader and differs between machines
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "title": config.title,
        "site_url": config.site_url,
        "built": None if reproducible else datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions(),
        "model": info,
        "layers": info["layers"],
        "heads": info["heads"],
        "examples": [
            {"id": i, "name": r.spec.name, "text": r.spec.text, "pair": r.spec.pair,
             "n_tokens": r.n_tokens, "truncated": r.truncated, "page": f"example-{i}.html",
             "qk_page": f"example-{i}-qk.html" if "queries" in r.extras else None}
            for i, r in enumerate(stage.runs, 1)
        ],
        "statistics": statistics,
        "warnings": stage.warnings,
    }


def build(config: Config, out: Path | None = None, reproducible: bool = False,
          progress: Callback = silent) -> dict:
    """Run the whole pipeline and write the site; returns the report (with stage timings)."""
    from reportgen import site  # rendering is imported only by the stage that renders

    out = Path(out) if out is not None else config.output
    site.check_output(out)
    stage = run_model(config, progress)
    statistics = patterns.head_statistics(stage.runs)
    report = make_report(config, stage, statistics, reproducible)
    site.write_site(report, stage.runs, config, out, progress)
    report["model_stage"] = {"computed": stage.computed, "cached": len(stage.runs) - stage.computed,
                             "seconds": round(stage.seconds, 3)}
    return report
