"""Long inputs on real-sized random models: what one long example costs a build, a site and a reader.

Why: users' prompts run to hundreds and thousands of tokens, and the cost of an example grows with
layers x heads x tokens^2 (issue 46). Each case builds a random checkpoint of a real model's shape from its
config (nothing downloaded; a byte-level BPE tokenizer trained here), writes one example of that many
tokens, and runs a cold `reportgen build` (ablation off) in a fresh project:

- build: wall seconds and peak RSS of the build process (os.wait4's rusage, the largest of it and what it ran);
- site: the bytes the example adds (its page, its query/key page and its data files) and the whole site's;
- reader: the example page opened in Chromium from file:// as the site writes it: the bytes its first view
  loads (the page and the data files it requested before the view was drawn), when that view was drawn
  (the views' data-first-render-at, ms from navigation start: the median of DRAW_LOADS cold browsers, with the
  slowest beside it, as drawn_ms and drawn_max_ms; one load on this noisy machine varies by 30%), and the JS heap
  once the model view had drawn every thumbnail in sight (`thumbnails_drawn` of them)
  (Chromium's performance.memory, with
  --enable-precise-memory-info), after a garbage collection (what the page holds) and before it (heap_before_gc_mb);
- query/key page: the bytes it adds (qk_page_mb), or, where the config's views.query_key_mb (--query-key-mb) left it
  out, what it would have added (qk_left_out_mb); opened at its last query, the bytes loaded, the draw time and the
  JS heap (qk_first_view_mb, qk_drawn_ms, qk_heap_mb);
- view: the size of `reportgen view`'s single file of the same text (the project's config: its model, max_length);
- beside them, the same example in bertviz's payload format (JSON of every weight, ~22 bytes a value).

Cases: gpt2-small (12 layers x 12 heads, hidden 768) at 128, 512 and 1,024 tokens; llama (8 layers x 8 query
heads sharing 2 key/value heads, RoPE, hidden 512) at 4,096 tokens.
Usage: python benchmarks/long_inputs.py [--cases gpt2-small-128 ...] [--work DIR] [--no-browser] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
BERTVIZ_BYTES_PER_VALUE = 22  # "0.0123456789, " in bertviz's JSON: about 22 characters a weight
WORDS = ("the cat dog sat on mat in garden store was closed monday bought fresh strawberries at a of and to it "
         "model head token layer attention weight query key value sentence text long short read write page "
         "site view first last next previous river mountain city train station ticket window door house").split()
SHAPES = {  # name -> (transformers config class, model class, config fields, tokens per case)
    "gpt2-small": ("GPT2Config", "GPT2Model", dict(n_layer=12, n_head=12, n_embd=768, n_positions=1024),
                   (128, 512, 1024)),
    "llama": ("LlamaConfig", "LlamaModel", dict(num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
                                                hidden_size=512, intermediate_size=1024,
                                                max_position_embeddings=4096), (4096,)),
}
DRAW_LOADS = 5  # cold loads of the example page behind drawn_ms (their median)
# The view drawn with nothing still loading (as benchmarks/views_render.py waits for it).
DRAWN = ".rgv[data-first-render-at][data-rgv-state]:not([data-rgv-loading])"
# The model view's thumbnails in sight all drawn, none waiting for its head.
THUMBS_DRAWN = """() => !document.querySelector('[data-rgv-thumbs-pending]')
  && [...document.querySelectorAll('.rgv-thumb')]
  .filter(c => { const box = c.getBoundingClientRect(); return box.bottom > 0 && box.top < innerHeight; })
  .every(c => c.hasAttribute('data-drawn'))"""


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", help="e.g. gpt2-small-1024 llama-4096 (default: all)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/long-inputs"), help="models and projects")
    parser.add_argument("--no-browser", action="store_true", help="skip the reader's figures")
    parser.add_argument("--query-key-mb", type=float, default=None,
                        help="the config's views.query_key_mb (default: reportgen's), e.g. 50 for a 1,024-token "
                             "example's query/key page")
    parser.add_argument("--code", type=Path, default=REPO,
                        help="the reportgen to build with (a checkout or `git archive` of another commit)")
    return parser.parse_args()


def make_model(shape: str, target: Path) -> Path:
    """A random checkpoint of `shape` with a byte-level BPE tokenizer trained on WORDS (made once)."""
    if (target / "config.json").exists():
        return target
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator([" ".join(WORDS)] * 4, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.model_input_names = ["input_ids", "attention_mask"]
    fast.save_pretrained(target)
    config_class, model_class, fields, _ = SHAPES[shape]
    config = getattr(transformers, config_class)(vocab_size=len(fast), bos_token_id=0, eos_token_id=0, **fields)
    torch.manual_seed(0)
    getattr(transformers, model_class)(config).save_pretrained(target)
    return target


def long_text(tokens: int, seed: int = 0) -> str:
    """Words drawn at random (a fixed seed), more of them than `tokens` tokens: max_length cuts the rest."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(tokens + 16))


def build(project: Path, model: Path, tokens: int, code: Path = REPO, query_key_mb: float | None = None) -> dict:
    """A cold `reportgen build` of one example of `tokens` tokens: seconds and peak RSS (MB)."""
    project.mkdir(parents=True, exist_ok=True)
    config = {"model": str(model), "device": "cpu", "max_length": tokens, "examples": [{"text": long_text(tokens)}],
              "ablation": {"enabled": False}}
    if query_key_mb is not None:
        config["views"] = {"query_key_mb": query_key_mb}
    (project / "reportgen.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "reportgen", "build"], cwd=project, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{project}: the build failed:\n{child.stderr.read().decode()[-3000:]}")
    return {"seconds": seconds, "peak_mb": usage.ru_maxrss / 1024}


def view_file(project: Path, tokens: int, code: Path = REPO) -> dict:
    """`reportgen view` of the same text with the project's config (its model and max_length): the file's MB."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-m", "reportgen", "view", long_text(tokens), "--out", "view.html"],
                          cwd=project, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{project}: reportgen view failed:\n{done.stderr[-3000:]}")
    return {"view_mb": (project / "view.html").stat().st_size / 1e6}


def site_bytes(site: Path) -> dict:
    """Bytes the example adds to the site (its pages and data files) and the whole site's; of them its query/key
    page's (the page and its qk-l<L> files: q and k), or what that page would have added had the config's
    views.query_key_mb allowed it (`qk_left_out_mb`, from report.json)."""
    mine = [site / "example-1.html", site / "example-1-qk.html", *sorted((site / "example-1-data").glob("*"))]
    qk = [site / "example-1-qk.html", *sorted((site / "example-1-data").glob("qk-l*"))]
    example = json.loads((site / "report.json").read_text(encoding="utf-8"))["examples"][0]
    return {"example_mb": sum(p.stat().st_size for p in mine if p.is_file()) / 1e6,
            "site_mb": sum(p.stat().st_size for p in site.rglob("*") if p.is_file()) / 1e6,
            "qk_page_mb": sum(p.stat().st_size for p in qk if p.is_file()) / 1e6,
            "qk_left_out_mb": example.get("qk_mb") or 0.0}


def _new_page(playwright):
    """A Chromium page at 1366 x 768 that reports its JS heap precisely (and its browser, to close)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                         "--enable-precise-memory-info"])
    return browser, browser.new_page(viewport={"width": 1366, "height": 768})


def _first_view(page, site: Path, page_file: Path, address: str) -> tuple[float, int]:
    """Opens `address` and waits for its view: (when it was drawn, ms from navigation start; the bytes of the page
    and of the data files it asked for meanwhile)."""
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(address)
    page.wait_for_selector(DRAWN, timeout=600_000)
    names = {url.rsplit("/", 1)[1] for url in requested if "/example-1-data/" in url}
    loaded = page_file.stat().st_size + sum((site / "example-1-data" / name).stat().st_size for name in names)
    return float(page.get_attribute(".rgv", "data-first-render-at")), loaded


def _heap_after_gc(page) -> float:
    """The JS heap the page holds (MB), after a garbage collection: not what decoding left for the collector."""
    page.context.new_cdp_session(page).send("HeapProfiler.collectGarbage")
    return page.evaluate("performance.memory.usedJSHeapSize") / 1e6


def qk_reader(site: Path, tokens: int) -> dict:
    """The query/key page opened at its last query (the longest row): the bytes it loaded, when it was drawn and
    the JS heap then, after a garbage collection."""
    from playwright.sync_api import sync_playwright

    page_file = site / "example-1-qk.html"
    if not page_file.exists():
        return {}
    with sync_playwright() as p:
        browser, page = _new_page(p)
        drawn_ms, loaded = _first_view(page, site, page_file,
                                       page_file.as_uri() + f"#view=qk&layer=0&head=0&token={tokens - 1}")
        heap = _heap_after_gc(page)
        browser.close()
    return {"qk_first_view_mb": loaded / 1e6, "qk_drawn_ms": drawn_ms, "qk_heap_mb": heap}


def reader(site: Path) -> dict:
    """The first view's bytes and draw time, and the JS heap once the model view drew every head."""
    from playwright.sync_api import sync_playwright

    page_file = site / "example-1.html"
    with sync_playwright() as p:
        draws = []
        for _ in range(DRAW_LOADS - 1):
            browser, page = _new_page(p)
            draws.append(_first_view(page, site, page_file, page_file.as_uri())[0])
            browser.close()
        browser, page = _new_page(p)
        drawn_ms, first = _first_view(page, site, page_file, page_file.as_uri())
        draws.append(drawn_ms)
        page.goto(page_file.as_uri() + "#view=model&layer=0")
        page.reload()
        page.wait_for_selector(DRAWN, timeout=600_000)
        # a long input's thumbnails load their heads one after another (views-model.js loadThumb): every one in sight
        page.wait_for_function(THUMBS_DRAWN, timeout=600_000)
        thumbs = page.evaluate("document.querySelectorAll('.rgv-thumb[data-drawn]').length")
        before = page.evaluate("performance.memory.usedJSHeapSize")
        heap = _heap_after_gc(page)
        browser.close()
    return {"first_view_mb": first / 1e6, "drawn_ms": statistics.median(draws), "drawn_max_ms": max(draws),
            "model_view_heap_mb": heap,
            "heap_before_gc_mb": before / 1e6, "thumbnails_drawn": thumbs}


def main() -> int:
    args = arguments()
    work = args.work.resolve()
    rows = []
    for shape, (_, _, fields, lengths) in SHAPES.items():
        for tokens in lengths:
            name = f"{shape}-{tokens}"
            if args.cases and name not in args.cases:
                continue
            model = make_model(shape, work / "models" / shape)
            project = work / "projects" / name
            subprocess.run(["rm", "-rf", str(project)], check=True)
            row = {"case": name, **build(project, model, tokens, args.code.resolve(), args.query_key_mb),
                   **site_bytes(project / "site"), **view_file(project, tokens, args.code.resolve())}
            if not args.no_browser:
                row.update(reader(project / "site"))
                row.update(qk_reader(project / "site", tokens))
            layers = fields.get("n_layer", fields.get("num_hidden_layers"))
            heads = fields.get("n_head", fields.get("num_attention_heads"))
            row["bertviz_mb"] = layers * heads * tokens * tokens * BERTVIZ_BYTES_PER_VALUE / 1e6
            rows.append(row)
            print(" ".join(f"{key}={value:.1f}" if isinstance(value, float) else f"{key}={value}"
                           for key, value in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
