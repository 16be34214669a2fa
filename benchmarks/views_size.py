"""Bytes of the head view for the seed pair: bertviz 1.4.1 vs reportgen's per-example page data.

Acceptance (issue 3): reportgen's data for head view + model view (the payload in the
page, not the shared views-*.js/views.css every page caches) is at most 5% of bertviz's
head view HTML for the same input.

bertviz runs in its own virtual environment (default /tmp/bertviz-venv, or
$BERTVIZ_VENV), created on first use:

    python -m venv /tmp/bertviz-venv
    /tmp/bertviz-venv/bin/pip install --no-deps bertviz==1.4.1 && /tmp/bertviz-venv/bin/pip install ipython

bertviz's own requirements would pull a CUDA build of torch from PyPI (gigabytes), so
that venv gets --no-deps plus IPython, and a .pth file that lets it import the torch
of the interpreter running this script (bertviz only uses torch to stack tensors).

Run: .venv/bin/python benchmarks/views_size.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reportgen.config import ExampleSpec  # noqa: E402
from reportgen.views import VIEW_SCRIPTS, example_payload, views_html  # noqa: E402

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


def run_pair():
    from reportgen.attention import run_example
    from reportgen.model import load, resolve

    _, path = resolve("default")
    model, tokenizer = load(path, "cpu")
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


def main() -> int:
    run = run_pair()
    ours = len(views_html(example_payload(run)).encode("utf-8"))
    theirs = bertviz_bytes(run)
    files = [ASSETS / "javascripts" / name for name in VIEW_SCRIPTS] + [ASSETS / "stylesheets" / "views.css"]
    shared = {path.name: path.stat().st_size for path in files}
    layers, heads, n, _ = run.attention.shape
    print(f"input: {n} tokens, {layers} layers x {heads} heads = {run.attention.size:,} weights")
    print(f"bertviz {BERTVIZ} head view HTML:             {theirs:>10,} bytes")
    print(f"reportgen head + model view page data:    {ours:>10,} bytes ({ours / run.attention.size:.2f} bytes/weight)")
    print(f"ratio reportgen / bertviz:                {ours / theirs:>10.2%} (limit {LIMIT:.0%})")
    print("shared, cached once per site: " + ", ".join(f"{k} {v:,} bytes" for k, v in shared.items())
          + f" (total {sum(shared.values()):,})")
    return 0 if ours <= LIMIT * theirs else 1


if __name__ == "__main__":
    raise SystemExit(main())
