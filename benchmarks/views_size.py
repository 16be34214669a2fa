"""Bytes of the views: bertviz 1.4.1 vs reportgen's page data, and what a built site weighs.

Acceptance (issue 3): reportgen's data for head view + model view (the payload in the
page, not the shared views-*.js/views.css every page caches) is at most 5% of bertviz's
head view HTML for the same input.

With `--site DIR` (issue 13) it also prints, for a built site: its total bytes and files, the
largest page, the seed pair's example and query/key pages (each with what its first view loads:
the page plus the data files it draws first), and a 512-token example made here by running the
embedded model on a long text: its page with all data inline (as before issue 13) and what its
first view loads now (page + the data file of layer 0 head 0). `--no-bertviz` skips the comparison.

Issue 14 adds the contributions (the views' weights | contributions switch): the site figures say how
many bytes they take, inline in the example pages and in their own data files, and the 512-token
example what switching to contributions loads (one contribution file). The bertviz comparison is of
the attention, as issue 3 set it, and also prints the page data with the contributions.

bertviz runs in its own virtual environment (default /tmp/bertviz-venv, or
$BERTVIZ_VENV), created on first use:

    python -m venv /tmp/bertviz-venv
    /tmp/bertviz-venv/bin/pip install --no-deps bertviz==1.4.1 && /tmp/bertviz-venv/bin/pip install ipython

bertviz's own requirements would pull a CUDA build of torch from PyPI (gigabytes), so
that venv gets --no-deps plus IPython, and a .pth file that lets it import the torch
of the interpreter running this script (bertviz only uses torch to stack tensors).

Run: .venv/bin/python benchmarks/views_size.py [--site site/] [--no-bertviz]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reportgen.config import ExampleSpec  # noqa: E402
from reportgen.site.views import VIEW_SCRIPTS, example_payload, views_html  # noqa: E402

PAIR = ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries.")
BERTVIZ = "bertviz==1.4.1"
LIMIT = 0.05
ASSETS = REPO / "site_src" / "assets"

# Runs inside the bertviz venv: attention from an .npz, tokens from JSON, HTML length to stdout.
BERTVIZ_SCRIPT = """
import json, sys
import numpy as np, torch
from bertviz import head_view
data = np.load(sys.argv[1])
meta = json.load(open(sys.argv[2]))
attention = tuple(torch.from_numpy(a)[None] for a in data["attention"])  # per layer [1, H, T, T]
html = head_view(attention, meta["tokens"], sentence_b_start=meta["sentence_b_start"], html_action="return")
sys.stdout.write(str(len(html.data.encode("utf-8"))))
"""


def bertviz_python() -> Path:
    """The bertviz venv's interpreter, creating the venv if needed."""
    venv = Path(os.environ.get("BERTVIZ_VENV", "/tmp/bertviz-venv"))
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import bertviz, IPython, torch"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run(pip + ["--no-deps", BERTVIZ], check=True)
    subprocess.run(pip + ["ipython"], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # Appended after the venv's own packages: only what the venv lacks (torch) comes from here.
    Path(site, "zz_reportgen_torch.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(probe, check=True)
    return python


def embedded_model():
    from reportgen.model.loading import load, resolve

    _, path = resolve("default")
    return load(path, "cpu")


def run_pair():
    from reportgen.model.run import run_example

    model, tokenizer = embedded_model()
    return run_example(model, tokenizer, PAIR, 512)


def bertviz_bytes(run) -> int:
    sentence_b_start = int(np.argmax(run.segment_ids == 1))
    with tempfile.TemporaryDirectory() as tmp:
        npz, meta = Path(tmp, "attention.npz"), Path(tmp, "meta.json")
        np.savez(npz, attention=run.attention)
        meta.write_text(json.dumps({"tokens": run.tokens, "sentence_b_start": sentence_b_start}))
        out = subprocess.run([str(bertviz_python()), "-c", BERTVIZ_SCRIPT, str(npz), str(meta)],
                             capture_output=True, text=True, check=True)
    return int(out.stdout)


def payload_of(html: str) -> tuple[dict, int]:
    """(the views' payload, the length of its data element's text) of a page."""
    match = re.search(r'<script type="application/json" class="rgv-data">(.*?)</script>', html, re.S)
    return json.loads(match.group(1)), len(match.group(1).encode("utf-8"))


def first_files(payload: dict) -> list[str]:
    """The data files a page's first view loads (its default state): layer 0 of the query/key page;
    layer 0's heads of an example page, only head 0 past 64 tokens (views-core.js LONG_INPUT), none of
    them where the page carries them inline (a short example: reportgen.site.view_files.split_views)."""
    if payload["kind"] == "qk":
        files = payload.get("files")
        return [files["urls"]["qk-l0"]] if files else []
    attention = payload["attention"]
    files, inline = attention.get("files"), attention.get("inline", {})
    if not files:
        return []
    _, heads, n, _ = attention["shape"]
    chunks = [f"l0h{head}" for head in (range(heads) if n <= 64 else [0]) if f"l0h{head}" not in inline]
    names = dict.fromkeys(re.sub(r"h\d+$", "", chunk) if files.get("per") == "layer" else chunk for chunk in chunks)
    return [files["urls"][name] for name in names]


def first_view(page: Path) -> tuple[int, int]:
    """(page bytes, bytes its first view loads: the page and its first data files)."""
    payload, _ = payload_of(page.read_text(encoding="utf-8"))
    size = page.stat().st_size
    return size, size + sum((page.parent / url).stat().st_size for url in first_files(payload))


def seed_pair_id(site: Path) -> int:
    report = json.loads((site / "report.json").read_text(encoding="utf-8"))
    for example in report["examples"]:
        if example["text"] == PAIR.text and example["pair"] == PAIR.pair:
            return example["id"]
    return 1


def long_example(shell: int) -> tuple[int, int, int, int]:
    """A 512-token example's page (the seed pair's page around it, `shell` bytes): (bytes with all data
    inline, bytes its first view loads with the data files of reportgen.site.view_files, number of files,
    bytes one contribution file adds when the view switches to contributions)."""
    from reportgen.model.run import run_example
    from reportgen.site import view_files
    from reportgen.site.views import example_payload, views_html

    model, tokenizer = embedded_model()
    # as tests/site/browser/test_site_builds_browser.py
    text = " ".join(f"word{i % 50} and the next one" for i in range(200))
    run = run_example(model, tokenizer, ExampleSpec(text=text), 512)
    payload = example_payload(run)
    inline = shell + len(views_html(payload).encode("utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp, "example-1.html")
        page.write_text(view_files.example_html(Path(tmp), 1, payload), encoding="utf-8")
        _, loaded = first_view(page)  # the snippet and its first data files
        files = len(list(Path(tmp, "example-1-data").glob("*.js")))
        switched = Path(tmp, "example-1-data", "c-l0h0.js")
        contribution = switched.stat().st_size if switched.exists() else 0
    return inline, shell + loaded, files, contribution


def contribution_bytes(site: Path) -> tuple[int, int, int, int]:
    """(bytes of contributions inline in the example pages' data, pages with them, bytes of contribution
    data files, how many files): what the weights | contributions switch adds to a site."""
    inline = pages = 0
    for page in site.glob("example-*.html"):
        if page.stem.endswith("-qk"):
            continue
        payload, _ = payload_of(page.read_text(encoding="utf-8"))
        if payload.get("contributions"):
            inline += len(json.dumps(payload["contributions"], separators=(",", ":")))
            pages += 1
    files = list(site.glob("example-*-data/c-*.js"))
    return inline, pages, sum(path.stat().st_size for path in files), len(files)


def site_figures(site: Path) -> None:
    files = [path for path in site.rglob("*") if path.is_file()]
    pages = [path for path in files if path.suffix == ".html"]
    largest = max(pages, key=lambda path: path.stat().st_size)
    pair = seed_pair_id(site)
    example, example_first = first_view(site / f"example-{pair}.html")
    qk, qk_first = first_view(site / f"example-{pair}-qk.html")
    _, data_len = payload_of((site / f"example-{pair}.html").read_text(encoding="utf-8"))
    inline, loaded, chunks, contribution = long_example(example - data_len)
    added, with_contributions, file_bytes, file_count = contribution_bytes(site)
    print(f"site {site}: {sum(path.stat().st_size for path in files):,} bytes in {len(files)} files")
    print(f"largest page: {largest.relative_to(site)} {largest.stat().st_size:,} bytes")
    print(f"seed pair example-{pair}.html: {example:,} bytes; first view loads {example_first:,}")
    print(f"seed pair example-{pair}-qk.html: {qk:,} bytes; first view loads {qk_first:,}")
    print(f"512-token example: {inline:,} bytes with all data inline; first view loads {loaded:,} "
          f"(page and one of {chunks} data files); contributions shown: + {contribution:,} (one file)")
    print(f"contributions: {added:,} bytes inline in {with_contributions} example pages, "
          f"{file_bytes:,} bytes in {file_count} data files")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, help="a built site: print its sizes")
    parser.add_argument("--no-bertviz", action="store_true", help="skip the bertviz comparison")
    args = parser.parse_args()
    if args.site:
        site_figures(args.site)
    return 0 if args.no_bertviz else bertviz_comparison()


def bertviz_comparison() -> int:
    run = run_pair()
    payload = example_payload(run)
    with_contributions = len(views_html(payload).encode("utf-8"))
    payload.pop("contributions", None)  # issue 3's figure: the attention the views draw
    ours = len(views_html(payload).encode("utf-8"))
    theirs = bertviz_bytes(run)
    files = [ASSETS / "javascripts" / name for name in VIEW_SCRIPTS] + [ASSETS / "stylesheets" / "views.css"]
    shared = {path.name: path.stat().st_size for path in files}
    layers, heads, n, _ = run.attention.shape
    print(f"input: {n} tokens, {layers} layers x {heads} heads = {run.attention.size:,} weights")
    print(f"bertviz {BERTVIZ} head view HTML:             {theirs:>10,} bytes")
    print(f"reportgen head + model view page data:    {ours:>10,} bytes ({ours / run.attention.size:.2f} bytes/weight)")
    print(f"ratio reportgen / bertviz:                {ours / theirs:>10.2%} (limit {LIMIT:.0%})")
    share = with_contributions / theirs
    print(f"with the contributions (issue 14):        {with_contributions:>10,} bytes ({share:.2%} of bertviz's)")
    print("shared, cached once per site: " + ", ".join(f"{k} {v:,} bytes" for k, v in shared.items())
          + f" (total {sum(shared.values()):,})")
    return 0 if ours <= LIMIT * theirs else 1


if __name__ == "__main__":
    raise SystemExit(main())
