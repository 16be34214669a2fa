"""`reportgen cache info`: how big the cache is, per model and per kind of entry, and what uses it.

Why per model: the cache grows mostly when the model changes (every run and mask again), so the
table has a column per model fingerprint. An entry's model is known from its folder (ablation
entries live under their model's fingerprint), from its content (a model-info entry names its
fingerprint), or from the build records (`reportgen.cache.usage`): an entry used by the latest
build of a config with a single model is that model's. The model's name is the one its config
gives; its shape comes from its model-info entry.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from pathlib import Path

from reportgen.cache.prune import Contents, cache_root, scan, used_entries
from reportgen.cache.store import Cache
from reportgen.cache.usage import BuildRecord, read_records

FINGERPRINT = re.compile(r"^[0-9a-f]{16}$")
KINDS = {"runs": "model runs", "patterns": "pattern statistics", "info": "model info",
         "ablation/mask": "ablation masks", "ablation/importance-calibrated": "importance masks",
         "ablation/stats": "experiment statistics", "ablation/record": "ablation records",
         "patching": "patching records", "exports": "chart exports", "live": "in-browser model",
         "used": "build records"}
UNKNOWN = "?"  # the column of entries whose model the cache cannot tell


def human(size: float) -> str:
    """A byte count in binary units, e.g. 7.7 MiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def model_info(root: Path, contents: Contents) -> dict[str, dict]:
    """fingerprint -> the model-info entry (type, layers, heads, parameters), with the entry's path."""
    cache = Cache(root)
    found = {}
    for entry in contents.entries:
        if entry.kind != "info":
            continue
        try:
            info = json.loads(cache.read_bytes(root / entry.relative, touch=False) or b"null")
        except ValueError:
            continue
        if isinstance(info, dict) and isinstance(info.get("fingerprint"), str):
            found[info["fingerprint"]] = {**info, "entry": entry.relative}
    return found


def owners(contents: Contents, infos: dict[str, dict], records: list[BuildRecord]) -> dict[str, str]:
    """entry -> the fingerprint of its model, where the cache can tell (see the module's doc)."""
    by_entry = {info["entry"]: fingerprint for fingerprint, info in infos.items()}
    for entry in contents.entries:
        folders = [part for part in entry.relative.split("/")[:-1] if FINGERPRINT.match(part)]
        if folders:
            by_entry[entry.relative] = folders[0]
    for record in records:
        models = {by_entry[entry] for entry in record.entries if entry in by_entry}
        if len(models) == 1:
            (only,) = models
            for entry in record.entries:
                by_entry.setdefault(entry, only)
    return by_entry


def model_names(infos: dict[str, dict], records: list[BuildRecord], by_entry: dict[str, str]) -> dict[str, str]:
    """fingerprint -> how the configs name that model, with its shape from its model-info entry."""
    names: dict[str, set[str]] = defaultdict(set)
    for record in records:
        models = {by_entry[entry] for entry in record.entries if entry in by_entry}
        if len(models) == 1 and len(record.models) == 1:
            names[next(iter(models))].add(record.models[0])
    shown = {}
    for fingerprint in set(infos) | set(by_entry.values()):
        info = infos.get(fingerprint, {})
        count = info.get("parameters", 0)
        parameters = f"{count / 1e6:.1f}M" if count >= 1e5 else f"{count:,}"
        shape = (f"{info.get('model_type', '?')}, {info.get('layers', '?')} layers x {info.get('heads', '?')} heads, "
                 f"{parameters} parameters") if info else "no model-info entry"
        shown[fingerprint] = f"{' / '.join(sorted(names[fingerprint])) or 'unnamed'} ({shape})"
    return shown


def table(rows: list[list[str]]) -> list[str]:
    """Left-aligned first column, right-aligned numbers, two spaces between columns."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(widths[0]) if column == 0 else cell.rjust(widths[column])
                      for column, cell in enumerate(row)).rstrip() for row in rows]


def size_table(contents: Contents, by_entry: dict[str, str]) -> list[str]:
    """Rows: kinds of entry; columns: models (by fingerprint), then the total."""
    sizes: dict[tuple[str, str], int] = defaultdict(int)
    for entry in contents.entries:
        sizes[entry.kind, by_entry.get(entry.relative, UNKNOWN)] += entry.size
    kinds = sorted({kind for kind, _ in sizes}, key=lambda kind: -sum(v for k, v in sizes.items() if k[0] == kind))
    models = sorted({model for _, model in sizes}, key=lambda model: (model == UNKNOWN, model))
    rows = [["kind", *(model[:8] for model in models), "total"]]
    for kind in kinds:
        cells = [sizes.get((kind, model), 0) for model in models]
        rows.append([KINDS.get(kind, kind), *(human(cell) if cell else "-" for cell in cells), human(sum(cells))])
    totals = [sum(v for k, v in sizes.items() if k[1] == model) for model in models]
    rows.append(["total", *map(human, totals), human(sum(totals))])
    return table(rows)


def describe(cache_dir: Path) -> str:
    """The text of `reportgen cache info`."""
    root = cache_root(cache_dir)
    if root is None:
        return f"No cache at {cache_dir} yet (a build creates it)."
    contents = scan(root)
    total = sum(entry.size for entry in contents.entries)
    lines = [f"Cache {root}: {human(total)} in {len(contents.entries)} entries"]
    if not contents.entries:
        return "\n".join(lines + foreign_lines(contents))
    records = read_records(root)
    infos = model_info(root, contents)
    by_entry = owners(contents, infos, records)
    lines += ["", *size_table(contents, by_entry), ""]
    names = model_names(infos, records, by_entry)
    lines += [f"{fingerprint[:8]}  {fingerprint}  {names[fingerprint]}" for fingerprint in sorted(names)]
    if any(entry.relative not in by_entry for entry in contents.entries):
        lines.append(f"{UNKNOWN:8}  entries whose model the cache cannot tell")
    return "\n".join(lines + [""] + usage_lines(contents, records) + foreign_lines(contents))


def usage_lines(contents: Contents, records: list[BuildRecord]) -> list[str]:
    """Which configs' builds use the cache, and what `cache prune` would remove."""
    sizes = {entry.relative: entry.size for entry in contents.entries}
    lines = []
    for record in records:
        held = [sizes[entry] for entry in record.entries if entry in sizes]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.started))
        state = "" if record.complete else ", did not finish"
        gone = "" if record.current() else " (the config no longer exists)"
        lines.append(f"Build of {record.label()}{gone}: {when}{state}; used {len(held)} entries ({human(sum(held))})")
    current = [record for record in records if record.current()]
    if not current:
        return lines + ["No build of a current config is recorded: `reportgen cache prune` needs one first."]
    used = used_entries(contents, current)
    unused = [entry.size for entry in contents.entries if entry.relative not in used]
    return lines + [f"Unused by the latest build of every current config: {len(unused)} entries "
                    f"({human(sum(unused))}); `reportgen cache prune` removes them."]


def foreign_lines(contents: Contents) -> list[str]:
    if not contents.foreign:
        return []
    return [f"{len(contents.foreign)} files or links here are not reportgen's entries; they are left alone."]
