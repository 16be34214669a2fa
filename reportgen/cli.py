"""The command line: build, serve, schema, --version.

A user's mistake (ReportgenError) ends with one line on stderr and the error's exit
code; only bugs in reportgen show a traceback.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Optional

import typer

from reportgen import __version__
from reportgen.errors import ReportgenError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Build a static website of findings about a BERT-family model's attention heads.")

ConfigOption = typer.Option(None, "--config", "-c", help="Config file (default: ./reportgen.yaml if present).")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"reportgen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass


@app.command()
def build(config: Optional[Path] = ConfigOption,
          out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output directory (overrides the config)."),
          reproducible: bool = typer.Option(False, "--reproducible", help="No dates: identical inputs, identical site.")) -> None:
    """Run the model over the examples, analyse the heads and write the site."""
    from reportgen.build import build as run_build
    from reportgen.config import load_config
    from reportgen.progress import RichProgress

    cfg = load_config(config)
    with RichProgress() as progress, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = run_build(cfg, out, reproducible, progress)
    for w in caught:
        if w.category is UserWarning and "reportgen" in (w.filename or "") :
            typer.echo(f"warning: {w.message}", err=True)
    target = out or cfg.output
    stage = report["model_stage"]
    typer.echo(f"Built {target / 'index.html'} ({len(report['examples'])} examples; "
               f"model ran on {stage['computed']}, {stage['cached']} from cache)")


@app.command()
def serve(config: Optional[Path] = ConfigOption,
          port: int = typer.Option(8000, help="Port on 127.0.0.1.")) -> None:
    """Preview the built site on http://127.0.0.1:PORT (run `reportgen build` first)."""
    import functools
    import http.server

    from reportgen.config import load_config
    from reportgen.errors import OutputError

    site = load_config(config).output
    if not (site / "index.html").is_file():
        raise OutputError(f"no site at {site}; run `reportgen build` first")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        typer.echo(f"Serving {site} on http://127.0.0.1:{port}/ (Ctrl+C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


@app.command()
def schema() -> None:
    """Print the JSON Schema of reportgen.yaml (for editor completion)."""
    from reportgen.config import json_schema

    typer.echo(json_schema())


def main() -> None:
    try:
        app()
    except ReportgenError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
