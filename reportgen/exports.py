"""Files a reader downloads: every chart as PNG, SVG, CSV and JSON, and the report's JSON files."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from reportgen.progress import Callback, silent


def export_charts(recorded: list[tuple[str, str, dict]], target: Path, progress: Callback = silent) -> None:
    """Each chart as PNG and SVG (rendered here by vl-convert, no browser) and its data as CSV and JSON."""
    import vl_convert

    target.mkdir(parents=True, exist_ok=True)
    for done, (page, chart_id, spec) in enumerate(recorded, 1):
        stem = target / f"{page}--{chart_id}"
        stem.with_suffix(".svg").write_text(_number_ids(vl_convert.vegalite_to_svg(spec)), encoding="utf-8")
        stem.with_suffix(".png").write_bytes(vl_convert.vegalite_to_png(spec, scale=2))
        rows = spec["data"]["values"]
        with open(stem.with_suffix(".csv"), "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
            writer.writeheader()
            writer.writerows(rows)
        write_json(stem.with_suffix(".json"), rows)
        progress("Exporting charts", done, len(recorded))


def write_vega_bundle(target: Path) -> None:
    """Vega, Vega-Lite and vega-embed from vl-convert-python, so no page needs a CDN."""
    import vl_convert

    target.write_text(vl_convert.javascript_bundle(), encoding="utf-8")


def _number_ids(svg: str) -> str:
    """Vega numbers gradient/clip ids with a process-wide counter; renumber them per file so
    that identical charts give identical files (reproducible builds)."""
    ids: dict[str, str] = {}
    return re.sub(r"\b(gradient|clip)(_?\d+)\b",
                  lambda m: ids.setdefault(m.group(0), f"{m.group(1)}_rg{len(ids) + 1}"), svg)


def write_json(target: Path, data) -> None:
    target.write_text(json.dumps(data, indent=1, sort_keys=True, allow_nan=False), encoding="utf-8")
