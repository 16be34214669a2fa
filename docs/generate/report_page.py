"""The report.json reference: every record of the report, from the schema `reportgen schema --report` prints
(reportgen.report.report_schema: keys and JSON types) and the records' own docstrings and field comments
(reportgen/report/), in the order a reader meets them from the top level down."""

from __future__ import annotations

import inspect

from pydantic import BaseModel

from docs.generate.markdown import cell, table
from docs.generate.source_notes import field_notes
from reportgen.report import Report, report_schema


def render() -> str:
    schema = report_schema()
    defs = schema["$defs"]
    records = _records()
    parts = []
    for name in order(schema):
        definition = schema if name == "Report" else defs[name]
        cls = records.get(name)
        notes = _notes(cls) if cls else {}
        doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "") if cls else definition.get("description", "")
        rows = [(f"`{key}`", _type(spec), notes.get(key) or spec.get("description", ""))
                for key, spec in definition.get("properties", {}).items()]
        heading = "The top level (`Report`)" if name == "Report" else f"`{name}`"
        parts.append(f"### {heading} {{#{name.lower()}}}\n\n{cell(doc or '')}\n\n"
                     + table(("Key", "Type", "What it holds"), rows))
    return "\n".join(parts)


def _notes(cls: type) -> dict[str, str]:
    """Each field's comment in the class that declares it (a base record's for what a subclass inherits)."""
    notes: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if isinstance(base, type) and issubclass(base, BaseModel):
            notes.update(field_notes(base))
    return notes


def order(schema: dict) -> list[str]:
    """Report first, then each record the first time a key refers to it (breadth first)."""
    seen, queue = ["Report"], [schema]
    while queue:
        definition = queue.pop(0)
        for spec in definition.get("properties", {}).values():
            for name in _refs(spec):
                if name not in seen:
                    seen.append(name)
                    queue.append(schema["$defs"][name])
    return seen


def _refs(spec: dict) -> list[str]:
    found = [spec["$ref"].rsplit("/", 1)[1]] if "$ref" in spec else []
    for key in ("anyOf", "items", "additionalProperties", "prefixItems"):
        value = spec.get(key)
        for option in value if isinstance(value, list) else [value] if isinstance(value, dict) else []:
            found += _refs(option)
    return found


def _type(spec: dict) -> str:
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in spec:
        return " or ".join(_type(option) for option in spec["anyOf"])
    if "enum" in spec:
        return " | ".join(f'`"{value}"`' if isinstance(value, str) else f"`{value}`" for value in spec["enum"])
    if "const" in spec:
        return f"`{spec['const']}`"
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec['items'])}" if "items" in spec else "list"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"mapping of {_type(spec['additionalProperties'])}"
    return kind


def _records() -> dict[str, type[BaseModel]]:
    """Every record class reachable from Report, by name (the schema's $defs are named after them)."""
    found: dict[str, type[BaseModel]] = {}
    stack: list[type] = [Report]
    while stack:
        cls = stack.pop()
        if cls.__name__ in found:
            continue
        found[cls.__name__] = cls
        for field in cls.model_fields.values():
            stack += [arg for arg in _classes(field.annotation) if issubclass(arg, BaseModel)]
    return found


def _classes(annotation) -> list[type]:
    args = getattr(annotation, "__args__", ())
    own = [annotation] if isinstance(annotation, type) else []
    return own + [cls for arg in args for cls in _classes(arg)]
