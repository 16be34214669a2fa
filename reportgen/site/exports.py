"""Files a reader downloads: every chart as PNG, SVG, CSV and JSON, and the report's JSON files."""

from __future__ import annotations

import csv
import json
import re
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from reportgen.progress import Callback, silent
from reportgen.site.export_cache import NO_CACHE, ExportCache, drawn

FORMATS = ("png", "svg", "csv", "json")
# Charts shown side by side (pages.Charts.grid, the example attention matrices of a pattern): one
# picture of them all and their data in one table. A matrix is thousands of cells: as SVG and as
# indented JSON its 27 matrices were 3.3 MB of the site's 11 MB of downloads.
GRID_FORMATS = ("png", "csv")
# Pixels per CSS pixel of the PNGs: twice the page's for a chart; a grid of matrices, 1,000 px wide
# and more, as drawn. The SVG scales to any size.
PNG_SCALE = 2
GRID_PNG_SCALE = 1
# Charts exported at once. vl-convert holds the GIL while it draws; zlib lets it go while it compresses
# (recompressed, 3 s of the default site's 10 s of exports), so a second thread keeps the other core busy.
EXPORT_THREADS = 2


class Recorded(NamedTuple):
    """A chart a page shows, to export as `formats` under charts/<page>--<chart_id>.<format>."""

    page: str
    chart_id: str
    spec: dict
    formats: tuple[str, ...]


def export_charts(recorded: list[Recorded], target: Path, progress: Callback = silent,
                  cache: ExportCache = NO_CACHE) -> None:
    """Each chart as pictures (rendered here by vl-convert, no browser, or copied from `cache` when it
    drew them before) and its data as tables."""
    target.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(EXPORT_THREADS) as pool:
        futures = [pool.submit(_export_chart, chart, target, cache) for chart in recorded]
        for done, future in enumerate(futures, 1):
            future.result()
            progress("Exporting charts", done, len(recorded))


def _export_chart(chart: Recorded, target: Path, cache: ExportCache) -> None:
    stem = target / f"{chart.page}--{chart.chart_id}"
    drawing = _Drawing(chart.spec, from_svg="svg" in chart.formats)
    for fmt in chart.formats:
        path = stem.with_suffix(f".{fmt}")
        if fmt == "svg":
            path.write_text(cache.get_text(["chart", chart.spec], "svg", drawing.svg), encoding="utf-8")
        elif fmt == "png":
            inputs = ["chart", drawing.scale, drawing.from_svg, chart.spec]
            path.write_bytes(cache.get_bytes(inputs, "png", drawing.png))
        else:
            _WRITERS[fmt](path, chart.spec)


class _Drawing:
    """One chart, drawn by Vega once: its SVG file, and its PNG rasterised from that SVG when the chart
    has both (the pixels vegalite_to_png gives, without a second Vega pass: 70% of a PNG's time)."""

    def __init__(self, spec: dict, from_svg: bool):
        self.spec, self.from_svg = spec, from_svg
        self.scale = GRID_PNG_SCALE if "hconcat" in spec else PNG_SCALE
        self._svg: str | None = None

    def _vega_svg(self) -> str:
        """As vl-convert writes it, without the ARIA label Vega gives each mark on the page (a third of
        the file): a downloaded picture is for documents and slides, and the table beside it has every value."""
        import vl_convert

        if self._svg is None:
            spec = {**self.spec, "config": {**self.spec.get("config", {}), "aria": False}}
            self._svg = drawn(["vega-svg", spec], lambda: vl_convert.vegalite_to_svg(spec))
        return self._svg

    def svg(self) -> str:
        return _number_ids(self._vega_svg())

    def png(self) -> bytes:
        import vl_convert

        if self.from_svg:
            return drawn(["png-of-svg", self.scale, self.spec],
                         lambda: recompressed(vl_convert.svg_to_png(self._vega_svg(), scale=self.scale)))
        return drawn(["vega-png", self.scale, self.spec],
                     lambda: recompressed(vl_convert.vegalite_to_png(pixels_only(self.spec), scale=self.scale)))


def pixels_only(spec: dict) -> dict:
    """`spec` without what a picture cannot hold (the same pixels, byte for byte): the ARIA labels, links and
    tooltips Vega would make for every mark. A grid of three 64-token attention matrices is 12,288 cells, and
    their labels and links were a third of its drawing time."""
    def part(chart: dict) -> dict:
        chart = {key: [part(child) for child in value] if key in ("hconcat", "vconcat", "layer") else value
                 for key, value in chart.items()}
        if "encoding" in chart:
            chart["encoding"] = {channel: value for channel, value in chart["encoding"].items()
                                 if channel not in ("href", "tooltip", "description")}
        return chart

    return {**part(spec), "config": {**spec.get("config", {}), "aria": False}}


def side_by_side(specs: list[dict]) -> dict:
    """One Vega-Lite spec drawing `specs` in a row, each with its own data and title (for export)."""
    parts = [{key: value for key, value in spec.items() if key not in ("$schema", "config", "usermeta")}
             for spec in specs]  # usermeta: how a page lays one chart out (charts.js), not part of the picture
    combined = {"hconcat": parts, "spacing": 24}
    for key in ("$schema", "config"):
        if key in specs[0]:
            combined[key] = specs[0][key]
    return combined


def table_rows(spec: dict) -> list[dict]:
    """The rows behind a chart; for charts side by side, each row names its chart (its title) first."""
    if "hconcat" not in spec:
        return _rows(spec)
    return [{"chart": _title(part), **row} for part in spec["hconcat"] for row in _rows(part)]


def _rows(spec: dict) -> list[dict]:
    """One chart's table: its data, an attention matrix's a row per cell (vegalite.matrix_rows)."""
    from reportgen.site.charts import vegalite  # Altair, only once there are charts (a build that stops early
    # imports this module and must not pay for it: tests/test_api.py)
    return vegalite.matrix_rows(spec) or spec["data"]["values"]


def _title(spec: dict) -> str:
    title = spec.get("title", "")
    return title.get("text", "") if isinstance(title, dict) else str(title)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of every chunk of a PNG (PNG spec, section 5.3)."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    chunks, position = [], len(PNG_SIGNATURE)
    while position < len(png):
        (length,) = struct.unpack(">I", png[position:position + 4])
        chunks.append((png[position + 4:position + 8], png[position + 8:position + 8 + length]))
        position += length + 12
    return chunks


def recompressed(png: bytes) -> bytes:
    """The same PNG, pixel for pixel, with its image data deflated at zlib's best level.

    vl-convert deflates at a fast setting: its chart PNGs were 3-4 times the size (2.6 MB for the
    default site's charts against 0.8 MB). The filtered scanlines are kept as they are, only the
    compression changes, in one IDAT chunk where the first one was (PNG spec, section 5.3)."""
    chunks = png_chunks(png)
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


_WRITERS = {"csv": _write_csv, "json": _write_json}  # the tables; pictures are _Drawing's


def write_vega_bundle(target: Path, cache: ExportCache = NO_CACHE) -> None:
    """Vega, Vega-Lite and vega-embed from vl-convert-python, so no page needs a CDN.

    vl-convert bundles them anew in each process (3 s, more than the rest of a warm rebuild's drawing):
    kept in `cache` under its version, which is part of every key."""
    import vl_convert

    target.write_text(cache.get_text(["vega-bundle"], "js", vl_convert.javascript_bundle), encoding="utf-8")


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
