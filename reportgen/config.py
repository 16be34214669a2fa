"""The build configuration: one YAML file, validated against a schema.

Defaults live in `defaults.yaml` beside this module (data, not code); the user's
file is merged over them and validated, so unknown keys and wrong types are
refused with a message that names the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reportgen.errors import ConfigError

PACKAGE_DIR = Path(__file__).parent
DEFAULT_CONFIG_NAME = "reportgen.yaml"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExampleSpec(Strict):
    """One text to visualise: a single sentence, or a pair when `pair` is set."""

    text: str = Field(min_length=1, description="The sentence (or sentence A of a pair).")
    pair: str | None = Field(None, min_length=1, description="Sentence B of a pair.")
    name: str | None = Field(None, description="A short label shown in the site.")


class Config(Strict):
    title: str = Field(description="Site title.")
    site_url: str | None = Field(description="Public URL of the site (GitHub Pages), or null.")
    model: str = Field(min_length=1, description='"default", a Hugging Face Hub id or a local directory.')
    device: Literal["auto", "cpu", "cuda"]
    output: Path = Field(description="Directory the site is written to.")
    cache_dir: Path = Field(description="Directory for cached model outputs.")
    max_length: int = Field(ge=8, le=8192, description="Tokens per example; longer ones are truncated.")
    examples: list[ExampleSpec] = Field(
        description='Examples to visualise: a list of {text, pair, name}; the word "builtin" (alone or as an item) stands for the built-in examples.')

    @field_validator("examples", mode="before")
    @classmethod
    def _expand_builtin(cls, value):
        if value == "builtin":
            value = ["builtin"]
        if isinstance(value, list):
            return [item for v in value for item in (_builtin_items() if v == "builtin" else [v])]
        return value

    # Where the config came from, for messages and for resolving relative paths.
    source: str = Field(default="(defaults)", exclude=True)


def defaults() -> dict[str, Any]:
    return yaml.safe_load((PACKAGE_DIR / "defaults.yaml").read_text(encoding="utf-8"))


def _builtin_items() -> list[dict]:
    return yaml.safe_load((PACKAGE_DIR / "examples.yaml").read_text(encoding="utf-8"))


def builtin_examples() -> list[ExampleSpec]:
    return [ExampleSpec(**item) for item in _builtin_items()]


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _describe(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(top level)"
    if first["type"] == "extra_forbidden":
        text = f"{source}: unknown key '{field}'"
    else:
        text = f"{source}: field '{field}': {first['msg']}"
    more = err.error_count() - 1
    return text + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def load_config(path: str | Path | None = None) -> Config:
    """Read `path` (or ./reportgen.yaml when present, else the defaults) into a Config.

    Relative paths in the file are taken relative to the file's directory, as MkDocs does.
    """
    user: dict[str, Any] = {}
    base_dir = Path.cwd()
    source = "(defaults)"
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = DEFAULT_CONFIG_NAME
    if path is not None:
        path = Path(path)
        source = str(path)
        if not path.is_file():
            raise ConfigError(f"{source}: config file not found")
        try:
            user = yaml.safe_load(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise ConfigError(f"{source}: not a UTF-8 text file") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or "cannot be parsed"
            raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
        if user is None:
            raise ConfigError(f"{source}: the file is empty; write at least one key, e.g. 'title: My report'")
        if not isinstance(user, dict):
            raise ConfigError(f"{source}: expected a mapping of keys to values at the top level")
        base_dir = path.resolve().parent
    try:
        config = Config.model_validate({**_merge(defaults(), user), "source": source})
    except ValidationError as err:
        raise ConfigError(_describe(err, source)) from None
    config.output = base_dir / config.output
    config.cache_dir = base_dir / config.cache_dir
    # A model that names an existing path, or looks like one, is a local directory relative
    # to the config file; anything else ("org/name") is a Hub id.
    local = base_dir / Path(config.model).expanduser()
    if config.model != "default" and (config.model.startswith((".", "/", "~")) or local.exists()):
        config.model = str(local.resolve())
    return config


def json_schema() -> str:
    """JSON Schema of reportgen.yaml, with the shipped defaults, for editors."""
    schema = Config.model_json_schema()
    schema["properties"].pop("source", None)
    for key, value in defaults().items():
        schema["properties"][key]["default"] = value
    schema["title"] = "reportgen.yaml"
    schema["required"] = []
    return json.dumps(schema, indent=2, default=str)
