"""The Python API reference: each name `reportgen` exports (reportgen.__all__), with its signature and docstring,
the public methods of the classes it returns (Report, the notebook's View) and the errors it raises
(reportgen.errors), read from the code by `inspect`."""

from __future__ import annotations

import inspect

import reportgen
from reportgen import errors
from reportgen.notebook import View

ERRORS = ("ReportgenError", "ConfigError", "ModelError", "DataError", "OutputError", "BusyError")


def render() -> str:
    parts = [_function(name) for name in public_names() if inspect.isfunction(getattr(reportgen, name))]
    parts += [_class(getattr(reportgen, name), f"reportgen.{name}") for name in public_names()
              if inspect.isclass(getattr(reportgen, name))]
    parts.append(_class(View, "reportgen.notebook.View"))
    parts.append("## Errors\n\n" + _doc(errors) + "\n\n" + "\n".join(
        f"- `reportgen.errors.{name}`: exit code {getattr(errors, name).exit_code}. "
        + _doc(getattr(errors, name), inherited=False) for name in ERRORS))
    return "\n".join(parts)


def public_names() -> list[str]:
    """The names `import reportgen` offers (reportgen.__all__), the version aside."""
    return [name for name in reportgen.__all__ if name != "__version__"]


def _function(name: str) -> str:
    function = getattr(reportgen, name)
    return (f"## `reportgen.{name}` {{#{name}}}\n\n```python\nreportgen.{name}{_signature(function)}\n```\n\n"
            f"{_doc(function)}\n")


def _class(cls: type, shown: str) -> str:
    anchor = shown.rsplit(".", 1)[1].lower()
    parts = [f"## `{shown}` {{#{anchor}}}\n\n{_doc(cls, inherited=False)}\n"]
    for name, member in vars(cls).items():
        function = member.__func__ if isinstance(member, classmethod) else member
        function = function.fget if isinstance(function, property) else function
        if name.startswith("_") or not inspect.isfunction(function) or not function.__doc__:
            continue
        if isinstance(member, property):
            parts.append(f"### `{shown}.{name}` (property)\n\n{_doc(function)}\n")
        else:
            parts.append(f"### `{shown}.{name}`\n\n```python\n{shown}.{name}{_signature(function, skip_first=True)}"
                         f"\n```\n\n{_doc(function)}\n")
    return "\n".join(parts)


def _signature(function, skip_first: bool = False) -> str:
    """The parameters one a line, annotations as written in the source (they are strings under
    `from __future__ import annotations`)."""
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())[1 if skip_first else 0:]
    shown, star = [], False
    for parameter in parameters:
        if parameter.kind is parameter.KEYWORD_ONLY and not star:
            shown.append("*")
            star = True
        prefix = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
        text = prefix + parameter.name
        if parameter.annotation is not parameter.empty:
            text += f": {_annotation(parameter.annotation)}"
        if parameter.default is not parameter.empty:
            text += f" = {parameter.default!r}"
        shown.append(text)
    returned = signature.return_annotation
    returns = "" if returned is signature.empty else f" -> {_annotation(returned)}"
    if not shown:
        return f"(){returns}"
    return "(\n" + "".join(f"    {text},\n" for text in shown) + f"){returns}"


def _annotation(annotation) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _doc(obj, inherited: bool = True) -> str:
    text = inspect.getdoc(obj) if inherited else inspect.cleandoc(obj.__dict__.get("__doc__") or "")
    return text or ""
