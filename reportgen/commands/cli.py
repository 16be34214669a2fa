"""The command line: build, serve, schema, --version.

A user's mistake (ReportgenError) ends with one line on stderr and the error's exit
code, and so does an operating-system error (a full disk, a read-only folder: errors.os_error,
exit 5); only bugs in reportgen show a traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from reportgen import __version__
from reportgen.commands.terminal import print_error
from reportgen.errors import ReportgenError, os_error

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Build a static website of findings about a BERT-family model's attention heads.")

ConfigOption = typer.Option(None, "--config", "-c", help="Config file (default: ./reportgen.yaml if present).")


# Since issue 32 a build swaps in a complete site as a long ablation starts: Ctrl+C keeps the last one swapped in.
INTERRUPTED = ("interrupted; the site is the last complete one this build wrote, marked as stopped (the previous site "
               "if it wrote none), and a new build resumes from the cache")


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
          reproducible: bool = typer.Option(False, "--reproducible",
                                            help="No dates: identical inputs, identical site."),
          ray: Optional[str] = typer.Option(None, "--ray", metavar="ADDRESS",
                                            help='Evaluate the ablation masks on Ray: "local", "auto" or '
                                                 '"ray://host:port" (overrides ablation.ray).')) -> None:
    """Run the model over the examples, analyse the heads and write the site."""
    from reportgen.commands.terminal import build_with_progress
    from reportgen.config import check_ray_address, load_config
    from reportgen.errors import ConfigError
    from reportgen.site.previews import NEEDS_SITE_URL

    cfg = load_config(config)
    if ray is not None:
        try:
            cfg.ablation.ray = check_ray_address(ray)
        except ValueError as err:
            raise ConfigError(f"--ray {ray}: {err}") from None
    try:
        built = build_with_progress(cfg, out, reproducible)
    except KeyboardInterrupt:  # Ctrl+C: a site is swapped in only when complete, and finished work is cached
        print_error(INTERRUPTED)
        raise typer.Exit(130) from None
    target = out or cfg.output
    typer.echo(f"Built {target / 'index.html'} ({len(built.report.examples)} examples; "
               f"model ran on {built.computed}, {built.cached} from cache)")
    if not cfg.site_url:
        # Said once per build, on stdout beside "Built ...": it is about publishing, not a problem of
        # the model or data, so it is neither a warning (stderr, report.warnings, the home page) nor repeated.
        typer.echo(NEEDS_SITE_URL)


@app.command()
def view(text: str = typer.Argument(..., help="The sentence (sentence A of a pair)."),
         pair: Optional[str] = typer.Option(None, "--pair", "-p", help="Sentence B of a pair."),
         target: Optional[str] = typer.Option(None, "--target", "-t",
                                              help="What the decoder reads (encoder-decoders only: BART, T5, "
                                                   "Marian); the text is then the source."),
         model: Optional[str] = typer.Option(None, "--model", "-m",
                                             help="Model directory or Hub name (default: the config's, "
                                                  "else the embedded all-MiniLM-L6-v2)."),
         config: Optional[Path] = ConfigOption,
         out: Path = typer.Option(Path("view.html"), "--out", "-o", help="The HTML file to write."),
         open_file: bool = typer.Option(False, "--open", help="Open the file in the default browser.")) -> None:
    """Show one sentence's attention at once: one self-contained HTML file with its head, model and
    query/key views (no build, no network); for an encoder-decoder, a source and its --target, with a
    switch between encoder, decoder and cross-attention."""
    import warnings

    from reportgen.quickview import run_text, write_view
    from reportgen.quickview.page import check_target

    check_target(out)  # before the model is loaded: a wrong --out costs nothing
    with warnings.catch_warnings():  # the notes are said below, once each
        warnings.simplefilter("ignore")
        quick = run_text(text, pair, model, config, target=target)
    for note in quick.notes:
        typer.echo(f"warning: {note}", err=True)
    size = write_view(quick, out)
    tokens = f"{quick.run.n_tokens} tokens"
    if quick.pair_run is not None:
        tokens = f"{quick.run.n_tokens} source and {len(quick.pair_run.target_tokens)} decoder tokens"
    typer.echo(f"Wrote {out} ({size:,} bytes; {tokens}, {quick.model})")
    if open_file:
        import webbrowser

        webbrowser.open(out.resolve().as_uri())


@app.command()
def serve(config: Optional[Path] = ConfigOption,
          port: int = typer.Option(8000, help="Port on 127.0.0.1."),
          watch: bool = typer.Option(False, "--watch", "-w",
                                     help="Rebuild when the config, a data file or a template changes, "
                                          "and reload the open pages.")) -> None:
    """Preview the built site on http://127.0.0.1:PORT (run `reportgen build` first, or use --watch)."""
    from reportgen.commands.preview_server import open_server
    from reportgen.config import load_config
    from reportgen.errors import ConfigError, OutputError
    from reportgen.site.output import is_site

    if not 1 <= port <= 65535:
        raise ConfigError(f"--port {port}: out of range; give a port from 1 to 65535")
    if watch:
        from reportgen.commands.watch import serve_watch

        serve_watch(config, port)
        return
    site = load_config(config).output
    if not (site / "index.html").is_file() or not is_site(site):
        raise OutputError(f"no reportgen site at {site}; run `reportgen build` first")
    with open_server(port, site=site) as server:
        typer.echo(f"Serving {site} on http://127.0.0.1:{port}/ (Ctrl+C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


@app.command()
def publish(config: Optional[Path] = ConfigOption,
            remote: str = typer.Option("origin", help="Remote to push to."),
            branch: str = typer.Option("gh-pages", help="Branch that receives the site."),
            message: str = typer.Option("Publish reportgen site", "--message", "-m", help="Commit message."),
            partial: bool = typer.Option(False, "--partial", help="Publish a site whose build has not finished "
                                                                   "(still running, or stopped).")) -> None:
    """Push the built site to the gh-pages branch of the current git repository (GitHub Pages)."""
    from reportgen.commands.publish import publish as run_publish
    from reportgen.config import load_config

    site = load_config(config).output
    commit = run_publish(site, Path.cwd(), remote, branch, message, partial)
    typer.echo(f"Published {site} as {branch} {commit[:12]} and pushed it to {remote}")


@app.command()
def init(github_actions: bool = typer.Option(False, "--github-actions",
                                             help="Write .github/workflows/reportgen.yml (build + deploy to Pages)."),
         force: bool = typer.Option(False, "--force", help="Overwrite an existing file.")) -> None:
    """Start a project: write a reportgen.yaml, and with --github-actions a Pages workflow."""

    files = {Path("reportgen.yaml"): "# reportgen config; `reportgen schema` lists every key.\n"
                                     "title: Attention report\nmodel: default\nexamples: builtin\n"}
    if github_actions:
        files[Path(".github/workflows/reportgen.yml")] = (Path(__file__).parent / "github_workflow.yml").read_text()
    for path in files:  # everything is checked before anything is written
        _check_writable_file(path, force)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {path}")


def _check_writable_file(path: Path, force: bool) -> None:
    from reportgen.errors import OutputError

    for parent in reversed(path.parents):
        if parent.is_symlink() and not parent.exists():  # mkdir would fail on it, after the other files were written
            raise OutputError(f"{path}: {parent} is a symlink to {os.readlink(parent)}, which does not exist; "
                              "nothing was written")
        if parent.exists() and not parent.is_dir():
            raise OutputError(f"{path}: {parent} is a file, not a directory; nothing was written")
    if path.is_symlink():  # dangling or not, writing through it would write a file somewhere else
        raise OutputError(f"{path} is a symlink (to {os.readlink(path)}); init writes only files of its own: "
                          "remove the link (nothing was written)")
    if path.is_dir() or (path.exists() and not path.is_file()):
        raise OutputError(f"{path} exists and is not a regular file; nothing was written")
    if path.exists() and not force:
        raise OutputError(f"{path} exists already; use --force to overwrite it (nothing was written)")


@app.command()
def schema(report: bool = typer.Option(False, "--report", help="The schema of report.json instead.")) -> None:
    """Print the JSON Schema of reportgen.yaml (for editor completion), or with --report of report.json."""
    if report:
        import json

        from reportgen.report import report_schema

        typer.echo(json.dumps(report_schema(), indent=2))
        return
    from reportgen.config import json_schema

    typer.echo(json_schema())


cache_app = typer.Typer(no_args_is_help=True, help="The cache of model outputs and results: its size, and pruning it.")
app.add_typer(cache_app, name="cache")


@cache_app.command("info")
def cache_info(config: Optional[Path] = ConfigOption) -> None:
    """Show the config's cache: its size per model and per kind of entry, and the builds that use it."""
    from reportgen.cache.info import describe
    from reportgen.config import load_config

    typer.echo(describe(load_config(config).cache_dir))


@cache_app.command("prune")
def cache_prune(config: Optional[Path] = ConfigOption,
                dry_run: bool = typer.Option(False, "--dry-run", help="List what would be removed; remove nothing.")
                ) -> None:
    """Remove the cache entries that the latest build of no current config used (see `cache info`)."""
    from reportgen.cache.info import human
    from reportgen.cache.prune import plan_prune, prune
    from reportgen.config import load_config

    cfg = load_config(config)
    plan = plan_prune(cfg)
    if plan is None:
        typer.echo(f"No cache at {cfg.cache_dir}; nothing to prune.")
        return
    for entry in plan.remove if dry_run else ():
        typer.echo(f"would remove {entry.relative} ({human(entry.size)})")
    removed = plan.remove if dry_run else prune(plan)
    verb = "Would remove" if dry_run else "Removed"
    users = ", ".join(record.label() for record in plan.current)
    typer.echo(f"{verb} {len(removed)} entries ({human(sum(e.size for e in removed))}) from {plan.root}; "
               f"kept {len(plan.keep)} entries ({human(sum(e.size for e in plan.keep))}) used by {users}")
    if plan.left_alone:
        typer.echo(f"Left alone {len(plan.left_alone)} files or links that are not reportgen's entries.")


def main() -> None:
    try:
        app()
    except ReportgenError as err:
        print_error(str(err), err.detail)
        sys.exit(err.exit_code)
    except OSError as err:  # one place for every command: a full disk, a read-only folder, a failing device
        failure = os_error(err)
        print_error(str(failure))
        sys.exit(failure.exit_code)
