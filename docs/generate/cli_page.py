"""The command-line reference: every `reportgen` command and sub-command with its arguments and options, read
from the typer app itself (reportgen.commands.cli) through the click command it builds."""

from __future__ import annotations

import typer

from docs.generate.markdown import cell, table
from reportgen.commands.cli import app


def render() -> str:
    root = typer.main.get_command(app)
    return "\n".join(_command(name, command) for name, command in commands(root))


def commands(root=None) -> list[tuple[str, object]]:
    """("reportgen build", its command), ... for every command, sub-commands of a group after it."""
    root = root or typer.main.get_command(app)
    found = []
    for name, command in sorted(root.commands.items()):
        if hasattr(command, "commands"):  # a group (typer carries its own click: duck-typed)
            found += [(f"reportgen {name} {sub}", child) for sub, child in sorted(command.commands.items())]
        else:
            found.append((f"reportgen {name}", command))
    return found


def _command(name: str, command) -> str:
    arguments = [param for param in command.params if param.param_type_name == "argument"]
    options = [param for param in command.params if param.param_type_name == "option"]
    usage = " ".join([name, *(param.name.upper() for param in arguments), "[OPTIONS]" if options else ""])
    rows = [(f"`{param.name.upper()}`", _help(param), "required" if param.required else "")
            for param in arguments]
    rows += [(" ".join(f"`{opt}`" for opt in param.opts + param.secondary_opts), _help(param), _default(param))
             for param in options]
    text = f"## `{name}`\n\n{(command.help or '').strip()}\n\n```text\n{usage.strip()}\n```\n\n"
    return text + (table(("Argument or option", "What it does", "Default"), rows) if rows else "") + "\n"


def _help(param) -> str:
    return cell(getattr(param, "help", None) or "")


def _default(param) -> str:
    if param.is_flag or param.default in (None, ()):
        return ""
    return f"`{param.default}`"
