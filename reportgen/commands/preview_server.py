"""The preview server of `reportgen serve`: the built site on 127.0.0.1, with live reload under --watch.

With live reload, every HTML page is served with a small script added before `</body>`
(`<script src="/__reportgen__/live-reload.js">`, live_reload.js, carrying the id of the build it came
from: a file, since the pages' Content-Security-Policy runs no inline script it does not know the hash
of), and `/__reportgen__/events` is an
event stream (Server-Sent Events) that tells the open pages about each rebuild: the id of the
current site and the one-line error of the last failed rebuild, if any. The site's files are never
changed: the script exists only in what this server sends, so the published site stays free of it.
"""

from __future__ import annotations

import functools
import http.server
import json
import secrets
import threading
import urllib.parse
from pathlib import Path

from reportgen.errors import OutputError

EVENTS_PATH = "/__reportgen__/events"
SCRIPT_PATH = "/__reportgen__/live-reload.js"
HEARTBEAT_SECONDS = 15.0  # a comment line this often, so a closed tab's connection is noticed and ended
RETRY_MS = 1000  # how soon a page reconnects after the stream drops (the server restarting)
_SCRIPT = (Path(__file__).parent / "live_reload.js").read_bytes()


class LiveState:
    """What the open pages are told: which site is current and why the last rebuild failed, if it did.

    Written by the watch loop, read by one server thread per open page, which waits on the condition.
    The build id starts with a random session part, so pages opened before a restart of the server
    reload once when they reconnect rather than show a site they do not hold."""

    def __init__(self, site: Path):
        self.site = site
        self._session = secrets.token_hex(4)
        self._builds = 0
        self._error: str | None = None
        self._closed = False
        self._changed = threading.Condition()

    @property
    def build_id(self) -> str:
        return f"{self._session}-{self._builds}"

    def message(self) -> str:
        """The state as one event's data: JSON on one line (json.dumps escapes any newline)."""
        with self._changed:
            return json.dumps({"build": self.build_id, "error": self._error})

    def built(self, site: Path) -> None:
        """A rebuild succeeded: the pages reload, and the last error is gone."""
        with self._changed:
            self.site, self._builds, self._error = site, self._builds + 1, None
            self._changed.notify_all()

    def failed(self, error: str) -> None:
        """A rebuild failed: the site stays as it was, and the pages show `error`."""
        with self._changed:
            self._error = error
            self._changed.notify_all()

    def close(self) -> None:
        """The server is stopping: every event stream ends."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def next_message(self, last: str | None, timeout: float) -> str | None:
        """The state once it differs from `last` (at once if it does already), `last` again after
        `timeout`, or None when the server is stopping."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or self.message() != last, timeout)
            return None if self._closed else self.message()


def inject(page: bytes, build_id: str) -> bytes:
    """`page` with the live-reload script before its last `</body>` (at the end when it has none).

    `build_id` is made here of hex digits and a count, never of user text."""
    tag = f'<script src="{SCRIPT_PATH}" data-build="{build_id}"></script>\n'.encode()
    end = page.lower().rfind(b"</body>")
    return page + tag if end < 0 else page[:end] + tag + page[end:]


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the files of a site, and answers a request no file can match with a status, not a traceback."""

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if "\x00" in urllib.parse.unquote(self.path):  # os.stat and open raise ValueError on it
            self.send_error(400, "the path holds a NUL character")
            return False
        return True


class LiveHandler(SiteHandler):
    """Serves the current site (LiveState.site, read per request: a changed `output` is followed),
    HTML with the script added, the event stream, and every response marked for revalidation so a
    reload never shows a cached file of an older build."""

    def __init__(self, *args, live: LiveState, **kwargs):
        self.live = live  # before the base class's __init__, which handles the request
        super().__init__(*args, directory=str(live.site), **kwargs)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == EVENTS_PATH:
            self._stream_events()
            return
        if path == SCRIPT_PATH:
            self._send(_SCRIPT, "text/javascript; charset=utf-8")
            return
        page = self._html_file()
        if page is None:
            super().do_GET()
            return
        try:
            body = inject(page.read_bytes(), self.live.build_id)
        except OSError:  # swapped away between the check and the read: the base class answers 404
            super().do_GET()
            return
        self._send(body, "text/html; charset=utf-8")

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _html_file(self) -> Path | None:
        """The HTML file a GET names (a directory's index.html when the path ends with /), else None."""
        path = Path(self.translate_path(self.path))
        try:
            if path.is_dir() and self.path.split("?", 1)[0].endswith("/"):
                path = path / "index.html"
            return path if path.suffix == ".html" and path.is_file() else None
        except OSError:  # a name too long for the file system: no page, the base class answers 404
            return None

    def _stream_events(self) -> None:
        """One open page's event stream: the state now, then each change, until the page or the server goes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        sent = None
        try:
            self.wfile.write(f"retry: {RETRY_MS}\n\n".encode())
            while (message := self.live.next_message(sent, HEARTBEAT_SECONDS)) is not None:
                self.wfile.write(b": still here\n\n" if message == sent else f"data: {message}\n\n".encode())
                self.wfile.flush()
                sent = message
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page was closed or reloaded

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:
        """Quiet: the terminal is for rebuilds and their errors, not one line per file."""


class PreviewServer(http.server.ThreadingHTTPServer):
    """Closing does not wait for the request threads: an open page's event stream never ends by itself."""

    block_on_close = False


def open_server(port: int, live: LiveState | None = None, site: Path | None = None) -> http.server.HTTPServer:
    """A server bound to 127.0.0.1:`port`: with `live`, the live-reload one; else the plain one for `site`.

    A port in use (or not allowed) is the user's to fix: one line, exit 5."""
    if live is not None:
        handler = functools.partial(LiveHandler, live=live)
    else:
        handler = functools.partial(SiteHandler, directory=str(site))
    try:
        return PreviewServer(("127.0.0.1", port), handler)
    except OSError as err:
        raise OutputError(f"cannot serve on 127.0.0.1:{port}: {err.strerror}; "
                          "is another server using it? pass --port with another") from None
