"""`reportgen serve --watch` (issue 16): the file watcher, the preview server's live reload, and the
whole loop in Chromium: edit the config, the open pages reload; break it, they keep the last good
site and show the error; fix it, the error goes.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from reportgen.commands.preview_server import EVENTS_PATH, SCRIPT_PATH, LiveState, inject, open_server
from reportgen.commands.watch import Watcher, WatchSession, changed, serve_watch, snapshot, watched_paths
from reportgen.config import load_config
from reportgen.errors import OutputError
from reportgen.site import output
from reportgen.site.sources import site_sources
from tests.helpers import VIEW_DRAWN, wait_until, write_config

BANNER = "#reportgen-live-error"


# -- the watcher -----------------------------------------------------------------------------------------

def test_snapshot_sees_files_added_changed_and_removed(tmp_path):
    folder = tmp_path / "templates"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.j2").write_text("a")
    (folder / "nested" / "b.j2").write_text("b")
    config = tmp_path / "reportgen.yaml"  # not there yet: creating it is a change
    before = snapshot([folder, config])
    assert before[config] is None and set(before) == {config, folder / "a.j2", folder / "nested" / "b.j2"}
    (folder / "a.j2").write_text("a longer text")
    (folder / "nested" / "b.j2").unlink()
    (folder / "nested" / "c.j2").write_text("c")
    config.write_text("title: x\n")
    assert changed(before, snapshot([folder, config])) == sorted(
        [config, folder / "a.j2", folder / "nested" / "b.j2", folder / "nested" / "c.j2"])


def test_a_save_by_rename_is_a_change_even_with_the_same_size_and_time(tmp_path):
    path = tmp_path / "reportgen.yaml"
    path.write_text("title: one\n")
    before = snapshot([path])
    replacement = tmp_path / ".reportgen.yaml.swp"
    replacement.write_text("title: two\n")
    stat = path.stat()
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, path)  # as editors save: a new file renamed over the old one
    assert changed(before, snapshot([path])) == [path]


def _waiting(watcher: Watcher) -> tuple[threading.Thread, list]:
    found: list = []
    thread = threading.Thread(target=lambda: found.append(watcher.wait()), daemon=True)
    thread.start()
    return thread, found


@pytest.mark.slow  # a subprocess or real drawing/waiting: seconds, kept out of the edit-test loop
def test_a_burst_of_changes_is_one_rebuild_and_a_change_during_a_rebuild_is_not_lost(tmp_path):
    files = [tmp_path / f"page-{number}.j2" for number in range(4)]
    for path in files:
        path.write_text("old")
    watcher = Watcher([tmp_path], poll=0.05, quiet=0.6)
    thread, found = _waiting(watcher)
    thread.join(0.3)
    assert thread.is_alive(), "wait() returned with nothing changed"
    for path in files:  # one save of several files, as a `git checkout` makes
        path.write_text("new")
        time.sleep(0.02)
    thread.join(10)
    assert found == [files], "the burst was not reported once, whole"
    files[0].write_text("saved while the site was rebuilding")  # after wait() returned, before the next
    thread, found = _waiting(watcher)
    thread.join(10)
    assert found == [[files[0]]]


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
def test_new_roots_start_from_their_current_state(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence\n")
    config = tmp_path / "reportgen.yaml"
    config.write_text("title: x\n")
    watcher = Watcher([config], poll=0.05, quiet=0.1)
    watcher.set_roots([config, corpus])  # the config now names a corpus file: watched, but not "changed"
    thread, found = _waiting(watcher)
    thread.join(0.4)
    assert thread.is_alive()
    corpus.write_text("another sentence\n")
    thread.join(10)
    assert found == [[corpus]]


def test_watched_paths_are_the_config_its_data_files_and_the_site_sources(tmp_path, tiny_model):
    (tmp_path / "corpus.txt").write_text("the cat sat.\n")
    (tmp_path / "dev.tsv").write_text("text\tpair\tlabel\nthe cat\tthe mat\t1\n")
    config_file = write_config(tmp_path, f"model: {tiny_model}\npatterns:\n  corpus:\n    - path: corpus.txt\n"
                                         "ablation:\n  task: classification\n  data: dev.tsv\n")
    paths = watched_paths(config_file, load_config(config_file))
    site_src, base_mkdocs = site_sources()
    assert set(paths) == {config_file, tmp_path / "corpus.txt", tmp_path / "dev.tsv", site_src, base_mkdocs}
    assert not any(tiny_model == path or tiny_model in path.parents for path in paths), "model directories are big"


# -- the preview server ----------------------------------------------------------------------------------

def test_the_script_goes_before_the_last_body_end_tag():
    page = b"<html><body><p>a literal </body> in text</p></body></html>"
    injected = inject(page, "abc-1")
    tag = f'<script src="{SCRIPT_PATH}" data-build="abc-1"></script>\n'.encode()
    assert injected == b"<html><body><p>a literal </body> in text</p>" + tag + b"</body></html>"
    assert inject(b"<p>no body</p>", "abc-1").startswith(b"<p>no body</p><script")


@pytest.fixture
def live_server(tmp_path):
    """A live preview server in this process on a free port, over a small site: (base URL, state, site)."""
    site = tmp_path / "site"
    (site / "assets").mkdir(parents=True)
    (site / "index.html").write_text("<html><head><title>Old</title></head><body><p>hi</p></body></html>")
    (site / "assets" / "style.css").write_text("body { color: black; }")
    output.mark(site)
    live = LiveState(site)
    server = open_server(0, live)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", live, site
    live.close()
    server.shutdown()
    server.server_close()


def _events(response) -> dict:
    """The next message of an event stream (skipping the retry line and keep-alive comments)."""
    while True:
        line = response.readline()
        assert line, "the event stream ended"
        if line.startswith(b"data: "):
            return json.loads(line[len(b"data: "):])


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_pages_are_served_with_the_script_and_the_files_stay_as_built(live_server):
    base, live, site = live_server
    before = {path: path.read_bytes() for path in site.rglob("*") if path.is_file()}
    for address in ("/", "/index.html", "/index.html?x=1"):
        with urllib.request.urlopen(base + address, timeout=10) as response:
            page = response.read()
            assert response.headers["Cache-Control"] == "no-cache"
        assert f'<script src="{SCRIPT_PATH}" data-build="{live.build_id}">'.encode() in page, address
        assert b"<p>hi</p>" in page and page.count(b"<script") == 1, address
    with urllib.request.urlopen(base + SCRIPT_PATH, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/javascript")
        assert response.read().count(b"EventSource(") == 1
    with urllib.request.urlopen(base + "/assets/style.css", timeout=10) as response:
        assert response.read() == before[site / "assets" / "style.css"]
        assert response.headers["Cache-Control"] == "no-cache"  # a reload revalidates every asset
    assert {path: path.read_bytes() for path in site.rglob("*") if path.is_file()} == before


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_the_event_stream_says_each_rebuild_and_each_failure(live_server):
    base, live, site = live_server
    with urllib.request.urlopen(base + EVENTS_PATH, timeout=10) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        first = _events(response)
        assert first == {"build": live.build_id, "error": None}
        live.failed("reportgen.yaml: unknown key '<img src=x onerror=alert(1)>'")
        assert _events(response) == {"build": first["build"],
                                     "error": "reportgen.yaml: unknown key '<img src=x onerror=alert(1)>'"}
        live.built(site)
        rebuilt = _events(response)
        assert rebuilt["build"] != first["build"] and rebuilt["error"] is None
        live.close()
        assert response.read().strip() == b"", "the stream did not end when the server stopped"


def test_a_broken_config_keeps_the_site_and_says_why_in_one_line(tmp_path, tiny_model, capsys):
    config_file = write_config(tmp_path, f"title: Good\nmodel: {tiny_model}\n")
    live = LiveState(tmp_path / "site")
    session = WatchSession(config_file, load_config(config_file), live)
    config_file.write_text("title: Good\n'<b>bold</b>': 1\n")
    assert session.rebuild() is False
    line = f"{config_file}: unknown key '<b>bold</b>'"
    assert json.loads(live.message())["error"] == line
    assert capsys.readouterr().err.splitlines()[0] == f"error: {line}"
    assert not (tmp_path / "site").exists(), "a failed rebuild wrote something"


def test_a_deleted_config_is_an_error_not_a_switch_to_the_defaults(tmp_path, tiny_model, monkeypatch, capsys):
    write_config(tmp_path, f"model: {tiny_model}\n")
    monkeypatch.chdir(tmp_path)
    live = LiveState(tmp_path / "site")
    session = WatchSession(None, load_config(None), live)
    (tmp_path / "reportgen.yaml").unlink()
    assert session.rebuild() is False
    assert json.loads(live.message())["error"] == "reportgen.yaml: config file not found"
    assert capsys.readouterr().err.startswith("error: reportgen.yaml: config file not found\n")


def test_a_port_in_use_is_one_error_before_any_build(tmp_path, tiny_model, monkeypatch):
    write_config(tmp_path, f"model: {tiny_model}\n")
    monkeypatch.chdir(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(OutputError, match=f"cannot serve on 127.0.0.1:{port}: Address already in use"):
            serve_watch(None, port)
    assert not (tmp_path / "site").exists()


# -- the whole loop in a browser -------------------------------------------------------------------------

class Terminal:
    """A `reportgen serve --watch` subprocess and the lines it prints (stdout and stderr together)."""

    def __init__(self, project: Path, port: int):
        self.process = subprocess.Popen([sys.executable, "-m", "reportgen", "serve", "--watch", "--port", str(port)],
                                        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, start: str, timeout: float = 180) -> str:
        """The next line starting with `start`, printed within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if line.startswith(start):
                return line
        raise AssertionError(f"no line starting {start!r} in {timeout} s; printed:\n" + "\n".join(self.seen[-40:]))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _served_title(url: str) -> str:
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    return page.split("<title>", 1)[1].split("</title>", 1)[0]


# over 60 s on a loaded machine: `serve --watch` rebuilds twice while a browser holds the page
@pytest.mark.slow
def test_serve_watch_reloads_the_open_pages_and_shows_a_failed_rebuild(tmp_path, tiny_model, open_page):
    config = ("title: {title}\nmodel: " + str(tiny_model) + "\ndevice: cpu\nmax_length: 64\n"
              "examples:\n  - text: the cat sat on the mat.\n    pair: the dog sat on the mat.\n"
              "ablation: {{enabled: false}}\n")
    config_file = write_config(tmp_path, config.format(title="First title"))
    port = _free_port()
    terminal = Terminal(tmp_path, port)
    try:
        terminal.expect("No site at")  # none yet: built before serving
        terminal.expect("Serving ")
        pages = [open_page(f"http://127.0.0.1:{port}/example-1.html#view=head&layer=1&head=2", viewport,
                           wait_for=VIEW_DRAWN) for viewport in ("desktop", "phone")]
        hash_states = [page.page.evaluate("location.hash") for page in pages]
        for page in pages:
            assert "First title" in page.page.title() and "layer=1" in page.page.evaluate("location.hash")
            page.page.evaluate("window.notReloaded = true")

        config_file.write_text(config.format(title="Second title"))
        terminal.expect("Rebuilt ")
        for page, hash_state in zip(pages, hash_states, strict=True):
            wait_until(page.page, "() => document.title.includes('Second title')", timeout=20_000)
            page.page.wait_for_selector(VIEW_DRAWN)
            assert page.page.evaluate("location.hash") == hash_state  # the views' state survives the reload
            assert page.page.evaluate("window.notReloaded") is None

        broken = config.format(title="Second title") + "'<img src=x onerror=alert(1)>': 1\n"
        config_file.write_text(broken)
        error = terminal.expect("error: ")
        assert error == "error: reportgen.yaml: unknown key '<img src=x onerror=alert(1)>'"
        for page in pages:
            banner = page.page.wait_for_selector(BANNER, state="visible", timeout=20_000)
            assert error[len("error: "):] in banner.text_content()
            assert banner.query_selector("img") is None and page.dialogs == []  # shown as text, never as HTML
            box = banner.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= page.page.viewport_size["width"]
            assert "Second title" in page.page.title()
        assert "Second title" in _served_title(f"http://127.0.0.1:{port}/index.html")  # the last good site
        assert output.is_site(tmp_path / "site")

        config_file.write_text(config.format(title="Third title"))
        terminal.expect("Rebuilt ")
        for page in pages:
            wait_until(page.page, "() => document.title.includes('Third title')", timeout=20_000)
            assert page.page.query_selector(BANNER) is None
            assert page.errors == [] and page.remote_requests == []
        assert "<script data-build" not in (tmp_path / "site" / "example-1.html").read_text()

        terminal.process.send_signal(signal.SIGINT)  # Ctrl+C
        assert terminal.process.wait(30) == 0
        terminal.expect("Stopped", timeout=5)
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.process.wait(10)


MALFORMED = ["/index.html%00.txt", "/%00", "/assets/%00style.css", "/" + "a" * 5000, "/%ZZ", "/..%2f..%2fetc%2fpasswd",
             "/index.html%", "/assets/../../outside"]


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
@pytest.mark.parametrize("live", [True, False], ids=["serve --watch", "serve"])
def test_every_malformed_address_gets_an_http_status(tmp_path, live):
    """A NUL byte once ended the request with no answer and a traceback (issue 27): each address here
    gets a status line, 400 or 404, and nothing outside the site is served."""
    import http.client

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body><p>hi</p></body></html>")
    (tmp_path / "outside").write_text("secret")
    output.mark(site)
    state = LiveState(site) if live else None
    server = open_server(0, state) if live else open_server(0, site=site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for address in MALFORMED:
            connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
            connection.request("GET", address)
            response = connection.getresponse()
            assert response.status in (400, 404), (address, response.status)
            assert b"secret" not in response.read(), address
            connection.close()
    finally:
        if state is not None:
            state.close()
        server.shutdown()
        server.server_close()
