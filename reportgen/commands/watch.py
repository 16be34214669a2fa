"""`reportgen serve --watch`: rebuild when a source changes, and reload the open pages.

Watched: the config file (also before it exists: creating ./reportgen.yaml is a change), the data
files it names (corpus files, the ablation data), and the site sources (templates, overrides,
assets, the base mkdocs.yml: `reportgen.site.sources.site_sources()`). Not watched: model directories, which are
large, change by whole checkpoints and are hashed in full by each build; restart the preview after
changing a model. File modification times are polled (no extra dependency; a few dozen stat calls
every half second), and a burst of changes (an editor's save, a `git checkout`) is one rebuild.

The rebuild runs in this process, with `reportgen.pipeline.build`, not in a `reportgen build`
subprocess: importing torch, transformers and MkDocs takes several seconds, which a subprocess
would pay on every save, while a warm rebuild reads everything else from the cache. A failed
rebuild changes nothing on disk (the build stages the site and swaps it in only at the end), so
the last good site stays served; its one-line error goes to the terminal and to the open pages.
"""

from __future__ import annotations

import signal
import threading
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

import typer

from reportgen.commands.preview_server import LiveState, open_server
from reportgen.commands.terminal import build_with_progress, print_error
from reportgen.config import DEFAULT_CONFIG_NAME, Config, load_config
from reportgen.errors import ReportgenError
from reportgen.site.output import is_site

POLL_SECONDS = 0.5
QUIET_SECONDS = 0.3  # a change is built once nothing has changed for this long

Signature = tuple[int, int, int] | None  # (mtime_ns, size, inode) of a file; None: absent


def snapshot(roots: Iterable[Path]) -> dict[Path, Signature]:
    """The signature of every file under `roots` (a file, a directory walked whole, or a missing path).

    The inode is part of it because editors often save by writing a new file and renaming it over the old."""
    found: dict[Path, Signature] = {}
    for root in roots:
        files = [path for path in sorted(root.rglob("*")) if path.is_file()] if root.is_dir() else [root]
        for path in files:
            try:
                info = path.stat()
            except OSError:
                found[path] = None
            else:
                found[path] = (info.st_mtime_ns, info.st_size, info.st_ino)
    return found


def changed(before: dict[Path, Signature], after: dict[Path, Signature]) -> list[Path]:
    """The files added, removed or modified between two snapshots."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


class Watcher:
    """Polls a set of paths and reports a change once it has settled (debounced).

    The baseline is the snapshot taken when `wait` returns, before the rebuild starts: a file saved
    during a rebuild is seen by the next `wait`, so the site never lags behind its sources."""

    def __init__(self, roots: list[Path], poll: float = POLL_SECONDS, quiet: float = QUIET_SECONDS):
        self.poll, self.quiet = poll, quiet
        self.roots: list[Path] = []
        self._baseline: dict[Path, Signature] = {}
        self.set_roots(roots)

    def set_roots(self, roots: list[Path]) -> None:
        """Watch `roots` from now on; paths already watched keep their baseline."""
        new = [root for root in roots if root not in self.roots]
        kept = {path: sig for path, sig in self._baseline.items() if any(_under(path, root) for root in roots)}
        self.roots = list(roots)
        self._baseline = {**kept, **snapshot(new)}

    def wait(self) -> list[Path]:
        """Block until a watched file changes and the burst of changes is over; returns the changed files."""
        while (current := snapshot(self.roots)) == self._baseline:
            time.sleep(self.poll)
        while True:  # debounce: wait until two looks `quiet` seconds apart agree
            time.sleep(self.quiet)
            settled = snapshot(self.roots)
            if settled == current:
                break
            current = settled
        found, self._baseline = changed(self._baseline, current), current
        return found


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def watched_paths(config_file: Path, config: Config) -> list[Path]:
    """What a rebuild reads besides the model and the cache: the config, its data files, the site sources."""
    from reportgen.site.sources import site_sources

    site_src, base_mkdocs = site_sources()
    paths = [config_file, site_src, base_mkdocs, *(item.path for item in config.patterns.corpus)]
    if config.ablation.enabled and config.ablation.data != "builtin":
        paths.append(Path(config.ablation.data))
    return list(dict.fromkeys(path.absolute() for path in paths))


class WatchSession:
    """The watch loop: the config as given on the command line, the live state the server reads, the watcher."""

    def __init__(self, config_arg: Path | None, config: Config, live: LiveState):
        # Without --config, ./reportgen.yaml is the config once it exists (load_config's rule), so it is
        # watched; once it was the config, it stays so: deleting it is an error, not a switch to the defaults
        # (which would build the embedded model into the same output).
        self.config_arg = config.config_file if config_arg is None else config_arg
        self.config_file = Path(config_arg if config_arg is not None else DEFAULT_CONFIG_NAME).absolute()
        self.live = live
        self.watcher = Watcher(watched_paths(self.config_file, config))

    def rebuild(self) -> bool:
        """Reload the config and build; on failure keep the site, print the error and show it in the pages."""
        started = time.perf_counter()
        try:
            config = load_config(self.config_arg)
            self.watcher.set_roots(watched_paths(self.config_file, config))  # the data files may have changed
            build_with_progress(config, written=self.live.built)  # each site of the build, partial ones too
        except ReportgenError as err:
            return self._failed(str(err), err.detail)
        except Exception as err:  # a bug in reportgen: the traceback in the terminal, the preview goes on
            traceback.print_exc()
            return self._failed(" ".join(f"internal error in reportgen: {type(err).__name__}: {err}".split()))
        self.live.built(config.output)
        typer.echo(f"Rebuilt {config.output / 'index.html'} in {time.perf_counter() - started:.1f} s; "
                   "the open pages reload")
        return True

    def _failed(self, line: str, detail: str = "") -> bool:
        print_error(line, detail)
        typer.echo("(still serving the last good site; save a fix to rebuild)", err=True)
        self.live.failed(line)
        return False

    def run(self) -> None:
        """Forever: wait for a change, rebuild (Ctrl+C ends it with KeyboardInterrupt)."""
        while True:
            typer.echo(f"Changed: {_listed(self.watcher.wait())}; rebuilding")
            self.rebuild()


def _listed(files: list[Path]) -> str:
    """Changed files as the terminal names them: the first three, relative to the current directory
    where they are under it (a `git checkout` can change dozens)."""
    here = Path.cwd()
    names = [str(path.relative_to(here)) if here in path.parents else str(path) for path in files[:3]]
    return ", ".join(names) + (f" and {len(files) - 3} more" if len(files) > 3 else "")


def serve_watch(config_arg: Path | None, port: int) -> None:
    """Serve the site on 127.0.0.1:`port` and rebuild it whenever a source changes, until Ctrl+C (or SIGTERM).

    The port is bound first, so a port in use fails at once rather than after a build. With no site
    yet, the first build runs before serving, and its failure ends the command (there is nothing to
    serve). With a site, it is served at once while a first rebuild brings it up to date with the sources."""
    config = load_config(config_arg)
    live = LiveState(config.output)
    with open_server(port, live) as server:
        session = WatchSession(config_arg, config, live)
        existing = (config.output / "index.html").is_file() and is_site(config.output)
        if not existing:
            typer.echo(f"No site at {config.output} yet: building it first")
            build_with_progress(config)
        serving = threading.Thread(target=server.serve_forever, name="reportgen-preview", daemon=True)
        serving.start()
        typer.echo(f"Serving {config.output} on http://127.0.0.1:{port}/ with live reload; watching "
                   f"{len(session.watcher.roots)} paths (Ctrl+C to stop)")
        # Ctrl+C stops the preview even when started with SIGINT ignored (a background job, nohup);
        # SIGTERM does the same. Both handlers are put back on the way out.
        previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        previous_handler = signal.signal(signal.SIGTERM, _interrupt)
        try:
            if existing:
                session.rebuild()
            session.run()
        except KeyboardInterrupt:
            typer.echo("Stopped")
        finally:
            signal.signal(signal.SIGTERM, previous_handler)
            signal.signal(signal.SIGINT, previous_int)
            live.close()
            server.shutdown()


def _interrupt(_signum: int, _frame: object) -> None:
    """SIGTERM (`kill`, a process manager) stops the preview as Ctrl+C does: a build in progress
    cleans up its staging directory and lock on the way out."""
    raise KeyboardInterrupt
