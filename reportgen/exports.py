"""Files a reader downloads: every chart as PNG, SVG, CSV and JSON, and the report's JSON files."""

from __future__ import annotations

import csv
import json
import re
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

from reportgen.progress import Callback, silent

FORMATS = ("png", "svg", "csv", "json")
# Charts shown side by side (pages.Charts.grid, the example attention matrices of a pattern): one
# picture of them all and their data in one table. A matrix is thousands of cells: as SVG and as
# indented JSON its 27 matrices were 3.3 MB of the site's 11 MB of downloads.
GRID_FORMATS = ("png", "csv")
# Pixels per CSS pixel of the PNGs: twice the page's for a chart; a grid of matrices, 1,000 px wide
# and more, as drawn. The SVG scales to any size.
PNG_SCALE = 2
GRID_PNG_SCALE = 1


class Recorded(NamedTuple):
    """A chart a page shows, to export as `formats` under charts/<page>--<chart_id>.<format>."""

    page: str
    chart_id: str
    spec: dict
    formats: tuple[str, ...]


def export_charts(recorded: list[Recorded], target: Path, progress: Callback = silent) -> None:
    """Each chart as pictures (rendered here by vl-convert, no browser) and its data as tables."""
    target.mkdir(parents=True, exist_ok=True)
    for done, chart in enumerate(recorded, 1):
        stem = target / f"{chart.page}--{chart.chart_id}"
        for fmt in chart.formats:
            _WRITERS[fmt](stem.with_suffix(f".{fmt}"), chart.spec)
        progress("Exporting charts", done, len(recorded))


def side_by_side(specs: list[dict]) -> dict:
    """One Vega-Lite spec drawing `specs` in a row, each with its own data and title (for export)."""
    parts = [{key: value for key, value in spec.items() if key not in ("$schema", "config")} for spec in specs]
    combined = {"hconcat": parts, "spacing": 24}
    for key in ("$schema", "config"):
        if key in specs[0]:
            combined[key] = specs[0][key]
    return combined


def table_rows(spec: dict) -> list[dict]:
    """The rows behind a chart; for charts side by side, each row names its chart (its title) first."""
    if "hconcat" not in spec:
        return spec["data"]["values"]
    return [{"chart": _title(part), **row} for part in spec["hconcat"] for row in part["data"]["values"]]


def _title(spec: dict) -> str:
    title = spec.get("title", "")
    return title.get("text", "") if isinstance(title, dict) else str(title)


def _write_svg(path: Path, spec: dict) -> None:
    """The chart as SVG, without the ARIA label Vega gives each mark on the page (a third of the file):
    a downloaded picture is for documents and slides, and the table beside it has every value."""
    import vl_convert

    plain = {**spec, "config": {**spec.get("config", {}), "aria": False}}
    path.write_text(_number_ids(vl_convert.vegalite_to_svg(plain)), encoding="utf-8")


def _write_png(path: Path, spec: dict) -> None:
    import vl_convert

    scale = GRID_PNG_SCALE if "hconcat" in spec else PNG_SCALE
    path.write_bytes(recompressed(vl_convert.vegalite_to_png(spec, scale=scale)))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def recompressed(png: bytes) -> bytes:
    """The same PNG, pixel for pixel, with its image data deflated at zlib's best level.

    vl-convert deflates at a fast setting: its chart PNGs were 3-4 times the size (2.6 MB for the
    default site's charts against 0.8 MB). The filtered scanlines are kept as they are, only the
    compression changes, in one IDAT chunk where the first one was (PNG spec, section 5.3)."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    chunks, position = [], len(PNG_SIGNATURE)
    while position < len(png):
        (length,) = struct.unpack(">I", png[position:position + 4])
        chunks.append((png[position + 4:position + 8], png[position + 8:position + 8 + length]))
        position += length + 12
    data: bytes | None = zlib.compress(zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT")), 9)
    out = [PNG_SIGNATURE]
    for kind, body in chunks:
        if kind == b"IDAT":
            if data is None:
                continue
            body, data = data, None
        out.append(struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body)))
    return b"".join(out)


def _write_csv(path: Path, spec: dict) -> None:
    rows = table_rows(spec)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
        writer.writeheader()
        writer.writerows(rows)


def _write_json(path: Path, spec: dict) -> None:
    write_json(path, table_rows(spec), indent=None)


_WRITERS = {"png": _write_png, "svg": _write_svg, "csv": _write_csv, "json": _write_json}


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


def write_json(target: Path, data, indent: int | None = 1) -> None:
    """`data` as JSON; `indent=None` writes it compact (a chart's rows: thousands of small objects)."""
    separators = (",", ":") if indent is None else None
    target.write_text(json.dumps(data, indent=indent, separators=separators, sort_keys=True, allow_nan=False),
                      encoding="utf-8")
