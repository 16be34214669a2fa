"""The live line of a site written while its build runs: `build-progress.js` beside the pages, rewritten as the
ablation's masks finish, which the pages' note loads every few seconds (site_src/assets/javascripts/
build-progress.js). One small file, replaced atomically; the finished site, swapped in over this one, has none."""

from __future__ import annotations

import json
import os
from pathlib import Path

from reportgen.findings import names
from reportgen.report import BuildProgress

FILE = "build-progress.js"


def write_progress(site: Path, progress: BuildProgress) -> None:
    """Write the state into `site`/build-progress.js (each experiment with the label the pages give it). JSON in a
    script, with "<" escaped so that nothing in it can end a script element."""
    state = progress.model_dump(mode="json")
    for item in state["experiments"]:
        item["label"] = names.EXPERIMENT_NAMES.get(item["name"], item["name"].replace("_", " "))
    text = json.dumps(state, sort_keys=True).replace("<", "\\u003c")
    temporary = site / f".{FILE}.tmp"
    temporary.write_text(f"window.reportgenBuildProgress && window.reportgenBuildProgress({text});\n",
                         encoding="utf-8")
    os.replace(temporary, site / FILE)
