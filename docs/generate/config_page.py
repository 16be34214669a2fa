"""The configuration reference: every key of reportgen.yaml, section by section, from the schema that loads it
(reportgen.config: its types, allowed values, ranges and descriptions) and the shipped defaults (defaults.yaml).
"""

from __future__ import annotations

import json
from typing import Any

from docs.generate.markdown import code, table
from reportgen.config import defaults, json_schema

# Sections whose keys are a list or a free mapping, described by their item's record, not as a nested section.
LISTS = {"examples", "compare", "patterns.corpus"}


def render() -> str:
    schema = json.loads(json_schema())
    sections = list(_sections(schema["properties"], schema["$defs"], defaults(), ""))
    return "\n".join(f"## {title}\n\n{intro}\n\n{table(('Key', 'Type', 'Default', 'What it sets'), rows)}"
                     for title, intro, rows in sections)


def keys() -> list[str]:
    """Every documented key, dotted (ablation.experiments.baseline), in the page's order (for the docs' tests)."""
    schema = json.loads(json_schema())
    return [row[0].strip("`") for _, _, rows in _sections(schema["properties"], schema["$defs"], defaults(), "")
            for row in rows]


def _sections(properties: dict, defs: dict, values: dict, prefix: str, required: tuple = (), intro: str = ""):
    """(title, intro, rows) for this level's plain keys, then one section for each nested section (its intro the
    docstring of the record that checks it)."""
    nested, rows = [], []
    for key, spec in properties.items():
        dotted = prefix + key
        section = _section_of(spec, defs)
        if section is not None and dotted not in LISTS:
            nested.append((dotted, section))
            continue
        default = "required" if key in required else _default(values.get(key, spec.get("default")))
        rows.append((f"`{dotted}`", _type(spec, defs), default,
                     _description(spec, defs)))
    title = f"`{prefix[:-1]}`" if prefix else "Top level"
    intro = intro or (f"The keys under `{prefix[:-1]}:`." if prefix else "The file's top-level keys.")
    if prefix.endswith("[]."):
        title, intro = f"`{prefix[:-3]}` items", f"The keys of each item of the list `{prefix[:-3]}`."
    yield title, intro, rows
    for key, spec in properties.items():
        item = _item_of(spec, defs)
        if prefix + key in LISTS and item is not None:
            mark = "[]." if "items" in spec else "."
            yield from _sections(item["properties"], defs, {}, f"{prefix}{key}{mark}", tuple(item.get("required", ())),
                                 item.get("description", ""))
    for dotted, section in nested:
        yield from _sections(section["properties"], defs, values.get(dotted.rsplit(".", 1)[-1], {}) or {},
                             dotted + ".", intro=section.get("description", ""))


def _section_of(spec: dict, defs: dict) -> dict | None:
    ref = spec.get("$ref")
    return defs[ref.rsplit("/", 1)[1]] if ref and "properties" in defs[ref.rsplit("/", 1)[1]] else None


def _item_of(spec: dict, defs: dict) -> dict | None:
    """The record of a list's items or of an optional mapping (examples, patterns.corpus, compare)."""
    for option in [spec, *spec.get("anyOf", []), spec.get("items", {})]:
        found = _section_of(option, defs)
        if found is not None:
            return found
    return None


def _type(spec: dict, defs: dict) -> str:
    if "anyOf" in spec:
        return " or ".join(_type(option, defs) for option in spec["anyOf"])
    if "enum" in spec:
        return " | ".join(code(value) for value in spec["enum"])
    if "const" in spec:
        return code(spec["const"])
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[1]
        fields = ", ".join(defs[name].get("properties", {}))
        return f"mapping {{{fields}}}"
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}), defs)}"
    if kind == "object":
        return f"mapping of {_type(spec.get('additionalProperties', {}), defs)}"
    return kind + _range(spec)


def _range(spec: dict) -> str:
    low = spec.get("minimum", spec.get("exclusiveMinimum"))
    high = spec.get("maximum", spec.get("exclusiveMaximum"))
    if low is None and high is None:
        return ""
    left = "(" if "exclusiveMinimum" in spec else "["
    right = ")" if "exclusiveMaximum" in spec else "]"
    return f" in {left}{'' if low is None else low}, {'' if high is None else high}{right}"


def _default(value: Any) -> str:
    return code(value)


def _description(spec: dict, defs: dict) -> str:
    if "description" in spec:
        return spec["description"]
    for option in spec.get("anyOf", []) + [spec.get("items", {})]:
        ref = option.get("$ref")
        if ref and defs[ref.rsplit("/", 1)[1]].get("description"):
            return defs[ref.rsplit("/", 1)[1]]["description"]
    return ""
