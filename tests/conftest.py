"""Every shared fixture, for all of tests/ (the folders mirror reportgen/'s stages: model/, patterns/,
ablation/, findings/, site/ with site/browser/, cache/, commands/; the rest at the top): tiny random models,
the ablation tests' model and graded pairs, the embedded model, the default site, a real browser.

Helpers that test modules import by name (paths, model builders, hand-built runs, tiny site configs, the
browser page wrapper) live in tests/helpers.py: pytest discourages importing conftest.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import (
    CHARTS_DRAWN,
    CHROMIUM,
    CHROMIUM_ARGS,
    VIEWPORTS,
    BrowserPage,
    embedded_model_dir,
    make_ablation_bert,
    make_tiny_bert,
    next_frames,
    run_dir,
    shared,
    wait_until,
    write_graded_pairs,
)

pytest_plugins = ["tests.cpu_time"]  # CPU seconds per test and module, printed after --durations (read why there)

# One torch thread per test process, set before torch is first imported (subprocess builds inherit it).
# The tiny models gain nothing from a second thread, and on a busy 2-core machine OpenMP threads spin at
# every barrier: ablation/test_experiments, test_numbers and model/test_masking took 144 s with 2 threads, 19 s with 1
# (load ~3). Under `-n 3` the workers share the two cores while browser tests wait. OMP_NUM_THREADS set outside wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# With CI (or BUILD_NUMBER) set, pytest explains a failed `==` by a full difflib diff of both sides, untruncated: one
# failed comparison of two site trees (dicts of every file's bytes) ran for hours and held CI past its limit with
# nothing reported. The tests fail here as they do on a desk: a short explanation, in every xdist worker too.
for _name in ("CI", "BUILD_NUMBER"):
    os.environ.pop(_name, None)

# Every process the tests start runs tests/startup/sitecustomize.py first (read why there); this one too, from here.
STARTUP = Path(__file__).resolve().parent / "startup"
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(STARTUP), os.environ.get("PYTHONPATH")]))
sys.modules.setdefault("rfc3987_syntax", None)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny random BERT (helpers.make_tiny_bert), one for the whole run: every worker reads the same folder,
    so a site built from it has the same config text, and so the same shared build, in every worker."""
    return shared(tmp_path_factory, "tiny-bert", make_tiny_bert)


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """The real default model (all-MiniLM-L6-v2, shipped as a package): tests using it are marked slow."""
    return embedded_model_dir()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """The ablation tests' model (tests/ablation/): a random 3 x 4 BERT with the embedded model's tokenizer,
    built once per module."""
    return make_ablation_bert(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """The twelve graded pairs (helpers.GRADED_PAIRS) as a similarity TSV, written once per module."""
    return write_graded_pairs(tmp_path_factory.mktemp("data") / "pairs.tsv")


def _start_default_build(run_dir: Path) -> None:
    """Starts `reportgen build` of the embedded default in the background, once per run, so that the
    ~3 min build overlaps the tests that do not need it instead of holding up a worker that does.
    What it prints goes to build.log (stdout) and build.err (stderr), its exit status to build.rc, which every worker
    can wait for."""
    from filelock import FileLock

    work = run_dir / "default-build"
    with FileLock(str(run_dir / "default-build.lock")):
        if work.exists():
            return
        work.mkdir()
        command = ('"$0" -m reportgen build > build.log 2> build.err; '
                   'echo $? > build.rc.part && mv build.rc.part build.rc')
        subprocess.Popen(["sh", "-c", command, sys.executable], cwd=work, start_new_session=True)


# A test module whose every test is slow says so at its top, on a line of its own.
ALL_SLOW = re.compile(r"^pytestmark = pytest\.mark\.slow\b", re.MULTILINE)


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    """The fast tier (`-m "not slow"`) does not import a test module whose every test is slow: its tests would
    all be deselected, and importing it (torch, transformers, tiny models' code) cost the tier seconds."""
    if config.getoption("markexpr") != "not slow" or collection_path.suffix != ".py" \
            or not collection_path.name.startswith("test_"):
        return None
    return True if ALL_SLOW.search(collection_path.read_text(encoding="utf-8")) else None


# The modules that take longest, started first (pytest-xdist hands modules out in collection order): a long one
# left for the end would run alone while the other workers idle (the damaged-cache test, 80 s of one worker, once
# closed the run at half its cores). First the modules that build their own sites, by their total seconds in a full
# run (`--durations=0`, 3 workers on 2 cores), while the embedded model's build (started at collection) goes on;
# then, by the same seconds, every other module over 20 s of them or over 15 s of CPU (tests/cpu_time.py,
# 2026-12-06), the default site's readers among them; the short modules last, in collection order.
LONGEST_FIRST = (
    "tests/ablation/test_ray.py", "tests/model/test_architectures.py", "tests/site/test_hostile.py",
    "tests/live/test_live_model.py", "tests/commands/test_bad_inputs.py", "tests/recipes/test_induction_recipe.py",
    "tests/live/test_live_site.py", "tests/test_faults.py", "tests/test_encoder_decoder_build.py",
    "tests/test_build.py", "tests/site/browser/test_every_page_browser.py",
    "tests/site/browser/test_accessibility_browser.py", "tests/test_api.py", "tests/test_numbers.py",
    "tests/site/browser/test_encoder_decoder_site_browser.py", "tests/site/test_previews.py",
    "tests/site/browser/test_partial_site_browser.py", "tests/site/browser/test_example_pages_browser.py",
    "tests/site/browser/test_newcomer_pages_browser.py", "tests/site/browser/test_site_builds_browser.py",
    "tests/site/browser/test_site_browser.py", "tests/site/test_output_rules.py",
    "tests/site/browser/test_print_browser.py", "tests/patterns/test_char_model.py", "tests/commands/test_watch.py",
    "tests/site/browser/test_head_map_browser.py", "tests/live/test_live_tokenizer.py",
    "tests/test_progressive_build.py", "tests/cache/test_housekeeping.py", "tests/site/test_site_weight.py",
    "tests/test_decoder_build.py", "tests/site/browser/test_chart_links_browser.py", "tests/test_combinations.py",
    "tests/ablation/test_experiments.py", "tests/quickview/test_view_command.py",
    "tests/quickview/test_decoder_views.py", "tests/site/browser/test_chart_text_browser.py",
    "tests/site/browser/test_views_browser.py", "tests/site/test_export_cache.py",
    "tests/site/browser/test_contributions_browser.py", "tests/site/browser/test_model_view_browser.py",
    "tests/model/test_encoder_decoders.py", "tests/site/test_views_encoding.py",
    "tests/site/browser/test_qk_view_browser.py", "tests/site/browser/test_head_view_browser.py",
    "tests/site/browser/test_decoder_site_browser.py")


class _Scheduling:
    """One pytest-xdist group per module by default (as `--dist loadfile`: a module's fixtures are made once), and
    the longest modules first. A module whose tests take minutes each splits them by one of their parameters,
    `SPLIT_BY = "<name>"` at its top: the tests of each value form a group of their own, which another worker may
    run meanwhile (module fixtures are then made once per group that asks for them: keep the costly ones shared)."""

    @pytest.hookimpl(wrapper=True)  # around every other implementation: before pytest-xdist reads the groups
    def pytest_collection_modifyitems(self, items):
        for item in items:
            if not any(item.iter_markers("xdist_group")):
                item.add_marker(pytest.mark.xdist_group(_group(item)))
        rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
        return (yield)


def _group(item) -> str:
    module = item.nodeid.split("::")[0]
    split = getattr(getattr(item, "module", None), "SPLIT_BY", None)
    params = getattr(getattr(item, "callspec", None), "params", {})
    return f"{module}[{split}={params[split]}]" if split in params else module


def pytest_configure(config) -> None:
    config.pluginmanager.register(_Scheduling(), "reportgen-scheduling")


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: the fast tier starts no build
def pytest_collection_modifyitems(config, items) -> None:
    if config.option.collectonly:  # nothing runs: nothing to wait for
        return
    if any("default_site" in getattr(item, "fixturenames", ()) for item in items):
        _start_default_build(run_dir(config._tmp_path_factory))


@pytest.fixture(scope="session")
def default_site(tmp_path_factory) -> Path:
    """The embedded default, built once per test run as a user would: `reportgen build` with no config.

    A subprocess build of the embedded model (~3 min), started in the background when the collected
    tests need it (pytest_collection_modifyitems); every test using it is marked slow and waits for it
    here. The pytest-xdist workers share it. Tests must not change it.
    """
    work = run_dir(tmp_path_factory) / "default-build"
    _start_default_build(work.parent)  # a no-op when collection started it
    deadline = time.monotonic() + 1800
    while not (work / "build.rc").exists():
        assert time.monotonic() < deadline, "the default build did not finish in 30 min"
        time.sleep(1)
    status = (work / "build.rc").read_text().strip()
    assert status == "0", f"reportgen build exited {status}:\n" + (work / "build.err").read_text()[-3000:]
    return work / "site"


@pytest.fixture
def first_site_at_once(monkeypatch) -> None:
    """Every build in the test writes a partial site at its ablation's first tick (reportgen.ablation.watch's
    first-site thresholds at 0): a tiny model's experiments take a second, too short for one otherwise."""
    from reportgen.ablation import watch

    monkeypatch.setattr(watch, "FIRST_SITE_MASKS", 0)
    monkeypatch.setattr(watch, "FIRST_SITE_SECONDS", 0.0)


@pytest.fixture(scope="session")
def task_sites(tmp_path_factory) -> dict[str, Path]:
    """Tiny random-BERT sites of the two other tasks, each built once per run (helpers.shared) on first use:
    "classification" (a sequence classifier, graded pairs as labels) and "mlm" (a masked-LM head,
    the examples' texts), and "causal_lm", a tiny GPT-2's (a decoder's pages). Their pages name and explain
    other metrics than the default's Spearman."""
    return {task: shared(tmp_path_factory, f"{task}-site", make)
            for task, make in (("classification", _classification_site), ("mlm", _mlm_site),
                               ("causal_lm", _decoder_site))}


def _task_site(root: Path, task: str, cls_name: str, data: Path, **extra) -> Path:
    """A tiny random BERT with the head of `task` (`cls_name`), and its site with that task's ablation on `data`."""
    from tests.helpers import build_tiny_site, make_ablation_bert, tiny_config

    model = make_ablation_bert(root / "model", cls_name, **extra)
    ablation = {"task": task, "data": data, "seeds": [0], "fractions": [0.0, 0.5], "bootstrap_samples": 100,
                "permutations": 100}
    (root / "project").mkdir()
    return build_tiny_site(root / "project", tiny_config(model, title=f"A {task} model", ablation=ablation))


def _classification_site(root: Path) -> Path:
    from tests.helpers import write_labelled_pairs

    return _task_site(root, "classification", "BertForSequenceClassification", write_labelled_pairs(root / "pairs.tsv"),
                      num_labels=2)


def _mlm_site(root: Path) -> Path:
    from tests.helpers import write_sentences

    return _task_site(root, "mlm", "BertForMaskedLM", write_sentences(root / "sentences.jsonl"))


def _decoder_site(root: Path) -> Path:
    """A tiny random GPT-2's site with its causal-LM ablation on the examples' texts (a decoder's pages)."""
    from tests.decoder_checkpoints import make_decoder
    from tests.helpers import build_tiny_site, tiny_config

    model = make_decoder("gpt2", root / "model", causal_lm=True)
    (root / "texts.txt").write_text("the cat sat on the mat.\na dog was in the garden.\nthe store was closed.\n",
                                    encoding="utf-8")
    examples = [{"name": "a repeat", "text": "the cat sat on the mat. the cat sat on the mat."},
                {"text": "a dog was in the garden."}]
    ablation = {"task": "causal_lm", "data": "texts.txt", "seeds": [0], "fractions": [0.0, 0.5],
                "bootstrap_samples": 100, "permutations": 100}
    return build_tiny_site(root, tiny_config(model, title="A decoder", examples=examples, ablation=ablation))


@pytest.fixture(scope="session")
def seq2seq_site(tmp_path_factory) -> Path:
    """A tiny random BART's site with its sequence-to-sequence ablation (an encoder-decoder's pages), built
    once per run (helpers.shared) on first use."""
    return shared(tmp_path_factory, "seq2seq-site", _seq2seq_site)


def _seq2seq_site(root: Path) -> Path:
    from tests.helpers import build_tiny_site, tiny_config
    from tests.seq2seq_checkpoints import make_encoder_decoder, write_pairs

    model = make_encoder_decoder("bart", root / "model")
    write_pairs(root / "pairs.jsonl")
    examples = [{"name": "a cat", "text": "the cat sat on the mat.", "target": "le chat est assis sur le tapis."},
                {"text": "a dog was in the garden.", "target": "un chien était dans le jardin."}]
    ablation = {"task": "seq2seq", "data": "pairs.jsonl", "max_length": 64, "seeds": [0], "fractions": [0.0, 0.5],
                "bootstrap_samples": 100, "permutations": 100}
    return build_tiny_site(root, tiny_config(model, title="An encoder-decoder", examples=examples, max_length=64,
                                             ablation=ablation))


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian chromium is needed for the browser tests (apt-get install chromium)"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class _Tabs:
    """The browser contexts of one pytest-xdist worker, one per viewport, each holding a blank page for the whole
    run: a test's page is a new page (tab) in its viewport's context, closed after the test.

    Why: a new browser context starts a new renderer process, which compiles the site's scripts again; a new page in
    a context whose renderer is kept alive by its blank page reuses that process. Measured on the default site (one
    page load each, side by side): 1.5-1.7 s of CPU in a new context, 0.75 s in a new page of a kept context; with
    ~300 tests opening pages that was ~4 minutes of the suite's CPU. A page has its own window, history, session
    storage, focus and routes (helpers.BrowserPage routes each page); the site keeps nothing in local storage, and a
    test that needs a context of its own (an init script, other options) makes one."""

    def __init__(self, browser):
        self.browser, self.contexts = browser, {}

    def new(self, viewport: str | tuple[int, int]) -> BrowserPage:
        size = _size(viewport)
        key = (size["width"], size["height"])
        if key not in self.contexts:
            self.contexts[key] = self.browser.new_context(viewport=size)
            self.contexts[key].new_page()  # about:blank, open until the run ends: the renderer stays up
        return BrowserPage(self.contexts[key].new_page())

    def close(self) -> None:
        for context in self.contexts.values():
            context.close()


@pytest.fixture(scope="session")
def tabs_of_run(browser):
    """The worker's _Tabs: `.new(viewport)` -> a BrowserPage in a new page of that viewport's context."""
    pool = _Tabs(browser)
    yield pool
    pool.close()


@pytest.fixture
def new_tab(tabs_of_run):
    """new_tab(viewport="desktop") -> BrowserPage: a new tab at `viewport` (a key of VIEWPORTS or (width, height)) in
    the worker's context of that size (_Tabs), closed after the test."""
    opened: list[BrowserPage] = []

    def _new(viewport: str | tuple[int, int] = "desktop") -> BrowserPage:
        opened.append(tabs_of_run.new(viewport))
        return opened[-1]

    yield _new
    for view in opened:
        view.page.close()


@pytest.fixture
def open_page(new_tab):
    """open_page(url, viewport="desktop", wait_ms=0, wait_for=None, reuse=None) -> BrowserPage, loaded.

    `viewport`: a key of VIEWPORTS or (width, height); `wait_for`: a selector to wait for after the
    load and the charts (e.g. VIEW_DRAWN), then two more frames (helpers.next_frames), and `wait_ms` more
    only where a test checks that something does NOT happen. Each page is a new tab (_Tabs), closed after the test.

    `reuse`: a page this returned before, at the same viewport, to load `url` in afresh (its errors and requests
    forgotten), as a reader opens the next page of a site in the same tab: a test that tours many pages opens
    one tab, not a tab each."""

    def _open(url: str, viewport: str | tuple[int, int] = "desktop", wait_ms: int = 0,
              wait_for: str | None = None, reuse: BrowserPage | None = None) -> BrowserPage:
        if reuse is None:
            wrapped = new_tab(viewport)
        else:
            wrapped = reuse
            assert wrapped.page.viewport_size == _size(viewport), "reuse a page of this viewport"
            wrapped.forget()
            if wrapped.page.url.split("#")[0] == url.split("#")[0]:  # another fragment alone would not reload it
                wrapped.page.goto("about:blank")
        wrapped.page.goto(url)
        wrapped.page.wait_for_load_state("load")
        wait_until(wrapped.page, CHARTS_DRAWN)
        if wait_for:
            wrapped.page.wait_for_selector(wait_for, timeout=15_000)
        next_frames(wrapped.page)
        if wait_ms:
            wrapped.page.wait_for_timeout(wait_ms)
        return wrapped

    return _open


@pytest.fixture(scope="module")
def tab(tabs_of_run):
    """tab(viewport="desktop") -> one BrowserPage per viewport for the whole module, for open_page's `reuse`: a
    module of read-only checks (no click, key or pointer, whose focus and hover a next page would inherit) loads
    each test's page in it afresh instead of opening a tab per test."""
    tabs: dict[tuple[int, int], BrowserPage] = {}

    def _tab(viewport: str | tuple[int, int] = "desktop") -> BrowserPage:
        key = tuple(_size(viewport).values())
        if key not in tabs:
            tabs[key] = tabs_of_run.new(viewport)
        return tabs[key]

    yield _tab
    for view in tabs.values():
        view.page.close()


def _size(viewport: str | tuple[int, int]) -> dict[str, int]:
    """A key of VIEWPORTS or (width, height), as Playwright's viewport."""
    width, height = VIEWPORTS[viewport] if isinstance(viewport, str) else viewport
    return {"width": width, "height": height}


@pytest.fixture(scope="session")
def http_root():
    """serve(directory) -> base URL of a local HTTP server on 127.0.0.1 serving it."""
    servers = []

    def serve(directory: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Keeps the server's access log out of the test output, and names UTF-8 for pages and scripts as GitHub
    Pages does (views.live's UTF-16 weights files must still be read by their byte order mark)."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".html": "text/html; charset=utf-8", ".js": "application/javascript; charset=utf-8"}

    def log_message(self, *args):
        pass
