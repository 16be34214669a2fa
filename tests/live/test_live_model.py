"""views.live's model: reportgen/live/weights.py's export run through site_src/assets/javascripts/live-model.js
in Node, against the torch model's own attention (eager) and reportgen.model.value_norms' norms.

Each model runs in ONE Node process for all its inputs: the spec, the base64 data and the token ids go in a JSON
file; the script writes every input's attention [L, H, T, T] then norms [L, H, T] as float32 to one binary file.
Float32 exports check the JavaScript's arithmetic (to ~1e-5); the quantized default export of the embedded MiniLM
checks the encoding against the accuracy bound of views.live. The MiniLM work is made once per test run and read by
every pytest-xdist worker (helpers.shared): the compact export with the embedding Hessian it computed, and the
comparison of both formats with torch.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from reportgen.errors import ModelError
from reportgen.live import calibration as live_calibration
from reportgen.live import tokenizer as live_tokenizer
from reportgen.live import weights as live_weights
from reportgen.runs import LiveModel
from reportgen.site import live_page
from tests.helpers import BUILDERS, GRADED_PAIRS, ROOT, TINY_WORDS, shared

SCRIPT = ROOT / "site_src" / "assets" / "javascripts" / "live-model.js"
SEED_PAIR = ("how to reset a forgotten email password", "Steps to recover your email account password")

RUNNER = r"""
const fs = require('fs');
const live = require(process.argv[1]);
const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const model = live.decodeWeights(job.spec, new Uint8Array(Buffer.from(job.data, 'base64')));
const fd = fs.openSync(process.argv[3], 'w');
function put(array) {  // written as each input ends: MiniLM's 57 outputs are 330 MB
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  for (let at = 0; at < bytes.length;) at += fs.writeSync(fd, bytes, at);
}
const ms = [];
for (const item of job.inputs) {
  const start = process.hrtime.bigint();
  const out = live.forward(model, item.ids, item.segments);
  ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  put(out.attention);
  put(out.norms);
}
fs.closeSync(fd);
console.log(JSON.stringify({ms}));
"""


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` (Node.js 20 or later) is not on PATH; it runs views.live's model (apt-get install nodejs)")
    return node


class NodeRun:
    """live-model.js on `inputs` in a Node process of its own, started at once: the caller computes meanwhile (the
    torch reference, another export) and reads `result()` when it needs it."""

    def __init__(self, weights: live_weights.LiveWeights, inputs: list[tuple[list[int], list[int]]], folder):
        folder.mkdir(parents=True, exist_ok=True)
        self.job, self.out, self.spec, self.inputs = folder / "job.json", folder / "out.bin", weights.spec, inputs
        self.job.write_text(json.dumps({"spec": weights.spec, "data": base64.b64encode(weights.data).decode("ascii"),
                                        "inputs": [{"ids": ids, "segments": segments} for ids, segments in inputs]}))
        self.process = subprocess.Popen([_node(), "-e", RUNNER, str(SCRIPT), str(self.job), str(self.out)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop(self) -> None:
        """Ends the process if it still runs (the caller failed before reading it)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()

    def result(self):
        """[(attention [L, H, T, T], norms [L, H, T])] of each input, and its ms; the files go (MiniLM's: 400 MB)."""
        try:
            # a guard against a hang, not a budget: MiniLM's 57 inputs took over 600 s beside other runs on 2 cores
            stdout, stderr = self.process.communicate(timeout=1800)
        finally:
            self.stop()
        assert self.process.returncode == 0, stderr[-3000:]
        flat = np.fromfile(self.out, dtype="<f4")
        self.out.unlink()
        self.job.unlink()
        return split_outputs(flat, self.spec, self.inputs), json.loads(stdout)["ms"]


def split_outputs(flat: np.ndarray, spec: dict, inputs) -> list[tuple[np.ndarray, np.ndarray]]:
    """RUNNER's file, cut into each input's (attention [L, H, T, T], norms [L, H, T])."""
    layers, heads = spec["layers"], spec["heads"]
    found, at = [], 0
    for ids, _ in inputs:
        tokens = len(ids)
        size = layers * heads * tokens * tokens
        attention = flat[at:at + size].reshape(layers, heads, tokens, tokens)
        at += size
        norms = flat[at:at + layers * heads * tokens].reshape(layers, heads, tokens)
        at += layers * heads * tokens
        found.append((attention, norms))
    assert at == flat.size
    return found


def run_node(weights: live_weights.LiveWeights, inputs: list[tuple[list[int], list[int]]], tmp_path):
    """[(attention [L, H, T, T], norms [L, H, T])] of each (ids, segments) from the JavaScript, and its ms."""
    return NodeRun(weights, inputs, tmp_path).result()


def run_torch(model, inputs):
    """[(attention [L, H, T, T], norms [L, H, T])] of each (ids, segments) from torch and value_norms."""
    import torch

    from reportgen.model.value_norms import value_norms

    found = []
    types = model.config.model_type != "distilbert"
    with torch.no_grad():
        for ids, segments in inputs:
            extra = {"token_type_ids": torch.tensor([segments])} if types else {}
            with value_norms(model) as capture:
                out = model(input_ids=torch.tensor([ids]), output_attentions=True, **extra)
            found.append((torch.stack(out.attentions)[:, 0].numpy(), capture.norms))
    return found


def compare(js, reference) -> tuple[float, float]:
    """(max |attention difference|, max norm difference relative to the head's largest norm) over all inputs."""
    attention = max(float(np.abs(a - b).max()) for (a, _), (b, _) in zip(js, reference, strict=True))
    norms = max(float((np.abs(a - b) / np.maximum(np.abs(b).max(axis=-1, keepdims=True), 1e-6)).max())
                for (_, a), (_, b) in zip(js, reference, strict=True))
    return attention, norms


def tiny_inputs(vocab: int, seed: int = 0, count: int = 6) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    inputs = []
    for index in range(count):
        tokens = 2 + 7 * index
        ids = rng.integers(0, vocab, tokens).tolist()
        split = tokens // 2
        inputs.append((ids, [0] * split + [1] * (tokens - split)))
    return inputs


# -- refusals (fast) ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["roberta", "xlm-roberta", "albert", "deberta-v2"])
def test_other_families_are_refused_naming_views_live(family):
    import torch

    torch.manual_seed(0)
    model = BUILDERS[family]()
    with pytest.raises(ModelError, match=r"^views\.live supports BERT-family encoders .*; this model is "):
        live_weights.check_supported(model)
    with pytest.raises(ModelError, match="views.live"):
        live_weights.export_weights(model)


def test_a_decoder_and_other_activations_are_refused():
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    with pytest.raises(ModelError, match="this model is gpt2"):
        live_weights.check_supported(GPT2Model(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50,
                                                          n_positions=16)))
    small = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    with pytest.raises(ModelError, match="activation relu"):
        live_weights.check_supported(BertModel(BertConfig(**small, hidden_act="relu")))
    with pytest.raises(ModelError, match="decoder"):
        live_weights.check_supported(BertModel(BertConfig(**small, is_decoder=True)))
    live_weights.check_supported(BertModel(BertConfig(**small, hidden_act="gelu_new")))  # the tanh form is exact


def rice_decode(blob: bytes, rows: int, cols: int, k: int) -> np.ndarray:
    """A plain reading of rice_rows' format, code by code (the JavaScript's riceRows is tested against it)."""
    bits = np.unpackbits(np.frombuffer(blob, dtype=np.uint8), bitorder="little")
    out = np.zeros((rows, cols), dtype=np.int64)
    at = 0
    for r in range(rows):
        for c in range(cols):
            high = 0
            while bits[at]:
                high, at = high + 1, at + 1
            low = sum(int(bits[at + 1 + b]) << b for b in range(k))
            at += 1 + k
            u = (high << k) | low
            out[r, c] = -(u + 1) // 2 if u & 1 else u // 2
        at = -(-at // 8) * 8  # rows start on a byte boundary
    assert at == 8 * len(blob)
    return out


def test_rice_codes_round_trip_for_every_parameter():
    rng = np.random.default_rng(0)
    codes = rng.normal(scale=30, size=(9, 23)).round().astype(np.int16)
    codes[2] = 0
    codes[4, :3] = (32767, -32767, -1)  # the int16 extremes cost long unary runs but decode
    for k in (0, 1, 4, 7, 14):
        blob = live_weights.rice_rows(codes, k, block=4)  # blocks of 4 rows join seamlessly
        assert np.array_equal(rice_decode(blob, 9, 23, k), codes), k
    # by hand: codes 0, -1, 2 with k = 1 fold to 0, 1, 4: "0 0", "0 1", "11 0 0" -> bits 0,0,0,1,1,1,0,0
    assert live_weights.rice_rows(np.array([[0, -1, 2]], dtype=np.int16), 1) == bytes([0b00111000])
    # the parameter chosen is the cheapest: wide codes take a larger k
    assert live_weights.rice_parameter(codes) > live_weights.rice_parameter(codes // 16)


def test_error_compensating_rounding_moves_the_layer_output_less():
    """GPTQ's codes stay on plain rounding's grid, but the layer's output on inputs like the calibration inputs
    (correlated, of unequal scales, one input dead) moves less than with plain rounding."""
    rng = np.random.default_rng(3)
    weight = rng.normal(size=(48, 64)).astype(np.float32)
    weight[7] = 0
    mixing = rng.normal(size=(64, 64)) * rng.uniform(0.1, 3, size=64)
    inputs = rng.normal(size=(500, 64)) @ mixing
    inputs[:, 5] = 0
    steps, plain = live_weights.quantize_rows(weight, 0.3)
    codes = live_weights.gptq_codes(weight, inputs.T @ inputs, steps)
    assert codes.dtype == np.int16 and not codes[7].any()
    moved = {name: np.linalg.norm(inputs @ (weight - live_weights.dequantize_rows(steps, found)).T)
             for name, found in (("plain", plain), ("gptq", codes))}
    assert moved["gptq"] < 0.8 * moved["plain"], moved
    assert not codes[:, 5].any()  # a dead input's weights do not matter: 0
    assert np.abs(codes.astype(int) - plain)[:, np.arange(64) != 5].max() <= 3  # the same grid, nearby points


def test_weights_text_reads_back_in_node_for_every_length_and_digit():
    """live_page.pack_text (Python) -> textToBytes (live-model.js): the bytes come back for lengths around the
    47-bit groups, and the characters are only those of DIGIT_RANGES, every range used."""
    rng = np.random.default_rng(2)
    cases = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (1, 5, 6, 46, 47, 48, 94, 1000, 4099)]
    cases.append(b"\xff" * 47)  # every digit at its largest
    texts = [live_page.pack_text(data).decode("utf-16-le") for data in cases]
    codes = np.array([ord(char) for text in texts for char in text])
    ranges = live_page.DIGIT_RANGES
    assert all(any(start <= code < end for start, end in ranges) for code in set(codes.tolist()))
    assert all(((codes >= start) & (codes < end)).any() for start, end in ranges)
    assert sum(end - start for start, end in ranges) >= live_page.RADIX
    assert live_page.RADIX ** 3 >= 2 ** 47 > (live_page.RADIX - 1) ** 3
    assert len(texts[4]) == 8 * 3 and len(live_page.pack_text(b"x" * 47)) == 48  # 48 bytes on disk for 47
    script = ("const live = require(process.argv[1]);"
              "const job = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "console.log(JSON.stringify(job.map(([text, n]) => { const out = new Uint8Array(n);"
              " return [live.textToBytes(text, out, 0, n), Buffer.from(out).toString('hex')]; })));")
    result = subprocess.run([_node(), "-e", script, str(SCRIPT)], capture_output=True, text=True, check=True,
                            input=json.dumps([[text, len(data)] for text, data in zip(texts, cases, strict=True)]))
    assert json.loads(result.stdout) == [[len(data), data.hex()] for data in cases]


def test_rounding_is_within_half_a_step_of_the_rows_own_size():
    rng = np.random.default_rng(1)
    weight = rng.normal(size=(64, 96)).astype(np.float32) * rng.uniform(0.01, 3, size=(64, 1)).astype(np.float32)
    weight[3] = 0
    weight[5, 7] = 1e6  # an outlier raises its row's step to keep the codes in int16
    for step in (0.1, 0.0125):
        steps, codes = live_weights.quantize_rows(weight, step)
        back = live_weights.dequantize_rows(steps, codes)
        assert steps[3] == 0 and not codes[3].any()
        rms = np.sqrt((weight.astype(np.float64) ** 2).mean(axis=1))
        ordinary = np.arange(64) != 5
        assert np.allclose(steps[ordinary], step * rms[ordinary], rtol=1e-6)
        assert steps[5] >= 1e6 / 32767 and np.abs(codes).max() <= 32767
        assert (np.abs(back - weight) <= steps[:, None] / 2 * (1 + 1e-5)).all()


# -- the JavaScript's arithmetic at float32 (exact export) -----------------------------------------------------------
def _tiny(kind: str):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    if kind == "bert-classifier":  # the BERT inside a task head
        model = BertForSequenceClassification(BertConfig(vocab_size=len(TINY_WORDS), hidden_size=32,
                                                         num_hidden_layers=2, num_attention_heads=4,
                                                         intermediate_size=64, max_position_embeddings=128,
                                                         initializer_range=0.3, hidden_act="gelu_new"))
    elif kind == "distilbert-sinusoidal":
        model = DistilBertModel(DistilBertConfig(vocab_size=99, dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                                                 max_position_embeddings=64, sinusoidal_pos_embds=True,
                                                 initializer_range=0.3))
    else:
        model = BUILDERS[kind]()
    return model.eval()


@pytest.mark.slow  # a Node process per model
@pytest.mark.parametrize("kind", ["bert", "electra", "distilbert", "bert-classifier", "distilbert-sinusoidal"])
def test_float32_export_matches_torch(kind, tmp_path):
    model = _tiny(kind)
    model.set_attn_implementation("eager")
    weights = live_weights.export_weights(model, "f32")
    assert all(entry["encoding"] == "f32" for entry in weights.spec["tensors"])
    if kind == "electra":
        assert weights.spec["embedding_projection"] and weights.spec["embedding"] == 16
    inputs = tiny_inputs(weights.spec["vocab"])
    js, _ = run_node(weights, inputs, tmp_path)
    attention, norms = compare(js, run_torch(model, inputs))
    assert attention < 1e-5, attention
    assert norms < 1e-4, norms


@pytest.mark.slow
def test_rice_export_decodes_to_the_rounded_weights_exactly(tmp_path):
    """The JavaScript computes with exactly the rounded weights: its attention equals torch's on a copy of the
    model whose matrices were rounded the same way (within float32 arithmetic), and differs from the original's."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=128, max_position_embeddings=64, initializer_range=0.3),
                      add_pooling_layer=False).eval()
    model.set_attn_implementation("eager")
    steps = dict.fromkeys(live_weights.COMPACT_STEPS, 0.2) | {"word": 0.1, "position": 0.1}
    weights = live_weights.export_weights(model, "rice", steps)
    encodings = {entry["name"]: entry["encoding"] for entry in weights.spec["tensors"]}
    assert encodings["embeddings.word"] == encodings["layers.0.ffn_output.weight"] == "rice"
    assert "layers.1.output.weight" in encodings and "layers.1.intermediate.weight" not in encodings  # the last layer
    assert encodings["layers.0.query.bias"] == encodings["embeddings.token_type"] == "f32"
    rounded = BertModel(model.config, add_pooling_layer=False).eval()
    rounded.load_state_dict(model.state_dict())
    rounded.set_attn_implementation("eager")
    with torch.no_grad():
        for name, parameter in rounded.named_parameters():
            if parameter.dim() == 2 and parameter.numel() >= live_weights.SMALL:
                step = 0.1 if "word" in name or "position" in name else 0.2
                steps, codes = live_weights.quantize_rows(parameter.numpy(), step)
                parameter.copy_(torch.from_numpy(live_weights.dequantize_rows(steps, codes)))
    inputs = tiny_inputs(weights.spec["vocab"])
    js, _ = run_node(weights, inputs, tmp_path)
    attention, norms = compare(js, run_torch(rounded, inputs))
    assert attention < 1e-5 and norms < 1e-4, (attention, norms)
    assert compare(js, run_torch(model, inputs))[0] > 1e-3  # the rounding is there


@pytest.mark.slow  # seconds each: the calibrated export (GPTQ on calibration Hessians), kept out of the fast tier
@pytest.mark.parametrize("family", live_weights.SUPPORTED)
def test_a_calibrated_export_rounds_every_layer_matrix_by_its_inputs(family, tmp_path, monkeypatch):
    """The compact export of a tiny checkpoint of each family the page runs (its own tokenizer and calibration
    texts): every Linear layer's inputs are collected, and its codes differ from plain rounding's."""
    monkeypatch.setattr(live_weights, "SMALL", 0)  # the tiny matrices are coded as a real model's are
    from transformers import AutoModel, AutoTokenizer

    from tests.architectures import make_checkpoint

    directory = make_checkpoint(family, tmp_path / family)
    model = AutoModel.from_pretrained(directory, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    inputs = live_calibration.calibration_inputs(tokenizer, 64)
    assert len(inputs) == len(live_calibration.SENTENCES) + len(live_calibration.PAIRS) + 1
    assert max(batch["input_ids"].shape[1] for batch in inputs) == 64  # the paragraph, cut as the page cuts
    hessians = live_weights.input_hessians(model, inputs)
    layers = model.config.num_hidden_layers if family != "distilbert" else model.config.n_layers
    assert len(hessians) == 6 * layers - 2 + (family == "electra")  # no last feed-forward block; ELECTRA: projection
    calibrated = live_weights.export_weights(model, "rice", 0.05, calibration=inputs)
    plain = live_weights.export_weights(model, "rice", 0.05)
    by_name = {entry["name"]: entry for entry in plain.spec["tensors"]}
    changed = [entry["name"] for entry in calibrated.spec["tensors"] if entry["encoding"] == "rice"
               and calibrated.data[entry["offset"]:entry["offset"] + entry["length"]]
               != plain.data[by_name[entry["name"]]["offset"]:by_name[entry["name"]]["offset"] + entry["length"]]]
    assert {"layers.0.query.weight", "embeddings.word", "embeddings.position"} <= set(changed), changed


# -- the embedded MiniLM, quantized as a site ships it --------------------------------------------------------------
TOPICS = ["my laptop will not turn on after the update", "what is the capital of australia",
          "recipes for a quick vegetarian dinner", "the meeting was moved to thursday afternoon",
          "Why do cats purr when they are happy?", "Install Python 3.12 on Ubuntu 24.04 without sudo",
          "The river flooded the village twice in 1998.", "Can I return shoes without a receipt?",
          "photosynthesis converts light energy into chemical energy", "42", "hello", "ok ok ok ok",
          "Zoë's café serves crème brûlée — naïve façade!", "e-mail: someone@example.com, tel. +1 (555) 010-0199"]
LONG = ("Password managers store every login in an encrypted vault that opens with one strong master password. "
        "If you forget the email password, the provider usually sends a reset link to a recovery address or a "
        "code to your phone; without either, account recovery asks questions about when the account was made, "
        "which folders it has and whom you wrote to recently. Security teams recommend two-factor authentication, "
        "unique passwords for every site, and regular checks of the devices signed in to the account. ")


SHORT = 128  # tokens: a sentence or a query-title pair (printed apart)


# repeated text, up to 512 tokens: keys that nearly tie, where a small error in the logits moves the attention most
REPEATED = [("antidisestablishmentarianism xqzvw " * 40, None), ("buffalo " * 300, None),
            ("I went to the store. " * 60, "At the store, I bought fresh strawberries."),
            ("a b c d e f g h " * 50, None)]


def minilm_texts() -> list[tuple[str, str | None]]:
    """The seed pair and 56 others: graded pairs, single sentences, long inputs up to the 512-token limit and
    repeated text."""
    texts: list[tuple[str, str | None]] = [SEED_PAIR]
    texts += [(a, b) for a, b, _ in GRADED_PAIRS]
    texts += [(topic, None) for topic in TOPICS]
    texts += [(TOPICS[i], TOPICS[-1 - i]) for i in range(8)]
    texts += [(a, None) for a, _, _ in GRADED_PAIRS[::2]] + [(b, None) for _, b, _ in GRADED_PAIRS[1::2]]
    texts += [(LONG[:length], None) for length in (120, 300, 600)]
    texts += [(LONG * 2, SEED_PAIR[1]), (LONG * 4, None), (LONG * 6, None)]
    texts += REPEATED
    return texts


MAX_TOKENS = 512  # the page's limit, and the length the compact export is calibrated at


def load_minilm():
    """The embedded MiniLM (eager attention: it returns its attentions) and its tokenizer."""
    from transformers import AutoModel, AutoTokenizer

    from tests.helpers import embedded_model_dir

    directory = embedded_model_dir()
    return (AutoModel.from_pretrained(directory, attn_implementation="eager").eval(),
            AutoTokenizer.from_pretrained(directory))


def minilm_inputs(tokenizer) -> list[tuple[list[int], list[int]]]:
    """(ids, segments) of each of minilm_texts(), cut at MAX_TOKENS as the page cuts them."""
    inputs = []
    for first, second in minilm_texts():
        encoded = tokenizer(first, second, truncation=True, max_length=MAX_TOKENS)
        inputs.append((encoded["input_ids"], encoded["token_type_ids"]))
    return inputs


def minilm_export(factory) -> Path:
    """The folder of the compact export of the embedded MiniLM (_compact_export), made once per test run: the
    comparison with torch and the word-table test both read it, in whichever pytest-xdist worker."""
    return shared(factory, f"minilm-compact-{MAX_TOKENS}", _compact_export)


def _compact_export(folder: Path) -> Path:
    """The compact export as a site ships it (spec.json, data.bin) and the embedding Hessian its calibration
    computed (embedding_hessian.npy): the word-table test needs that very Hessian (embedding_hessian on the
    calibration texts cut at MAX_TOKENS, 13 s or more), so it is kept, not computed again."""
    model, tokenizer = load_minilm()
    calls = []
    compute = live_weights.embedding_hessian

    def kept(model, inputs, *args, **kwargs):
        calls.append((inputs, compute(model, inputs, *args, **kwargs)))
        return calls[-1][1]

    with pytest.MonkeyPatch.context() as patch:  # the same function, its result copied on the way out
        patch.setattr(live_weights, "embedding_hessian", kept)
        weights = live_weights.export_format(model, tokenizer, "compact", MAX_TOKENS)
    assert len(calls) == 1 and same_batches(calls[0][0], live_calibration.calibration_inputs(tokenizer, MAX_TOKENS))
    np.save(folder / "embedding_hessian.npy", calls[0][1])
    (folder / "spec.json").write_text(json.dumps(weights.spec), encoding="utf-8")
    (folder / "data.bin").write_bytes(weights.data)
    return folder


def same_batches(found: list[dict], expected: list[dict]) -> bool:
    """Whether two lists of model inputs (dicts of tensors) hold the same tensors."""
    import torch

    if len(found) != len(expected):
        return False
    return all(a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)
               for a, b in zip(found, expected, strict=True))


def read_export(folder: Path) -> live_weights.LiveWeights:
    """The export _compact_export wrote, as export_format returned it."""
    return live_weights.LiveWeights(json.loads((folder / "spec.json").read_text(encoding="utf-8")),
                                    (folder / "data.bin").read_bytes())


def _minilm_comparison(factory, folder: Path) -> Path:
    """results.json: each format's accuracy against torch on the 57 inputs (`_summary`). Both formats' Node runs
    go at once, the float16 one beside the compact export and both beside the torch reference, which the two
    formats share (the same model on the same inputs)."""
    model, tokenizer = load_minilm()
    inputs = minilm_inputs(tokenizer)
    runs: dict[str, tuple[live_weights.LiveWeights, NodeRun]] = {}
    try:
        float16 = live_weights.export_format(model, tokenizer, "float16", MAX_TOKENS)  # instant: its Node run first
        runs["float16"] = float16, NodeRun(float16, inputs, folder / "float16")
        compact = read_export(minilm_export(factory))  # made here, unless the word-table test made it
        runs["compact"] = compact, NodeRun(compact, inputs, folder / "compact")
        reference = run_torch(model, inputs)  # while both Node runs go
        summary = {name: _summary(name, weights, tokenizer, inputs, *run.result(), reference)
                   for name, (weights, run) in runs.items()}
    finally:
        for _, run in runs.values():
            run.stop()
    (folder / "results.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder / "results.json"


def _summary(name: str, weights, tokenizer, inputs, js, ms, reference) -> dict:
    """What the test and the printed line need of one format's run: no arrays (the whole comparison is 660 MB)."""
    attention, norms = compare(js, reference)
    each = [float(np.abs(a - b).max()) for (a, _), (b, _) in zip(js, reference, strict=True)]
    short = max(error for error, (ids, _) in zip(each, inputs, strict=True) if len(ids) <= SHORT)
    files = live_page.live_files(LiveModel(weights.spec, weights.data, live_tokenizer.tokenizer_spec(tokenizer),
                                           MAX_TOKENS, name))
    return {"bytes": len(weights.data), "site_bytes": sum(map(len, files.values())),  # what live/ adds to a site
            "inputs": inputs, "attention": attention, "short": short, "median": float(np.median(each)),
            "norms": norms, "ms": ms}


# Over 60 s once per test run (the first format to ask): the compact export (GPTQ on calibration Hessians), then the
# 57 inputs of up to 512 tokens through Node for both formats and through torch.
@pytest.fixture(scope="module", params=list(live_weights.FORMATS))
def minilm_results(request, tmp_path_factory):
    """The embedded MiniLM exported as a site ships it (each `views.live_weights`), through Node and through torch,
    on 57 inputs: both formats compared once per test run (_minilm_comparison), each test reading its own."""
    path = shared(tmp_path_factory, f"minilm-results-{MAX_TOKENS}",
                  functools.partial(_minilm_comparison, tmp_path_factory))
    found = json.loads(path.read_text(encoding="utf-8"))[request.param]
    print(f"\nMiniLM {request.param}: {found['bytes']} bytes ({found['site_bytes']} in the site's files), max "
          f"attention error {found['attention']:.4f} ({found['short']:.4f} up to {SHORT} tokens, median "
          f"{found['median']:.4f}), max relative norm error {found['norms']:.4f}, seed pair {found['ms'][0]:.0f} ms "
          f"({len(found['inputs'][0][0])} tokens)")
    return {"format": request.param, **found}


@pytest.mark.slow  # the embedded model through Node on 57 inputs
def test_minilm_export_stays_as_near_torch_as_the_page_says(minilm_results):
    assert len(minilm_results["inputs"]) == 57  # live_page.TESTED
    assert max(len(ids) for ids, _ in minilm_results["inputs"]) == 512
    if minilm_results["format"] == "compact":  # the default: within the site's budget
        assert minilm_results["site_bytes"] <= 25_000_000
    # what the page says of its numbers (issue 33: 0.02 for rounded weights, 0.002 for float16)
    assert minilm_results["attention"] <= live_page.TOLERANCE[minilm_results["format"]], minilm_results["attention"]
    # the contributions' norms within the same tolerance, relative to the head's largest norm
    assert minilm_results["norms"] <= live_page.TOLERANCE[minilm_results["format"]], minilm_results["norms"]


@pytest.mark.slow  # the embedded model, its word table rounded twice
def test_rounding_the_word_table_against_the_attention_moves_it_less(tmp_path_factory):
    """`embedding_hessian` lets `gptq_codes` round MiniLM's word table where the attention notices least: on the
    test texts (none of them calibration texts), the attention moves less than with plain rounding on the same
    grid, on average and at worst. The Hessian is the one the compact export computed on the calibration texts at
    512 tokens (_compact_export checks the call), shared with the comparison above."""
    import torch

    hessian = np.load(minilm_export(tmp_path_factory) / "embedding_hessian.npy")
    model, tokenizer = load_minilm()  # its own copy: the test rewrites the word table
    assert np.allclose(hessian, hessian.T) and np.linalg.eigvalsh(hessian).min() > -1e-6 * np.abs(hessian).max()
    table = model.get_input_embeddings().weight
    word = table.detach().numpy().copy()
    steps, plain = live_weights.quantize_rows(word, live_weights.COMPACT_STEPS["word"])
    compensated = live_weights.gptq_codes(word, hessian, steps, live_weights.TABLE_DAMP)
    inputs = [tokenizer(first, second, truncation=True, max_length=512, return_tensors="pt")
              for first, second in minilm_texts()[:40]]

    def attention() -> list:
        with torch.no_grad():
            return [torch.stack(model(**batch, output_attentions=True).attentions) for batch in inputs]

    reference = attention()
    moved = {}
    for name, codes in (("plain", plain), ("compensated", compensated)):
        with torch.no_grad():
            table.copy_(torch.from_numpy(live_weights.dequantize_rows(steps, codes)))
        moved[name] = [float((a - b).abs().max()) for a, b in zip(attention(), reference, strict=True)]
    print({name: (round(float(np.mean(errors)), 4), round(max(errors), 4)) for name, errors in moved.items()})
    assert np.mean(moved["compensated"]) < 0.9 * np.mean(moved["plain"])
    assert max(moved["compensated"]) < max(moved["plain"])


def test_no_calibration_sentence_is_a_test_sentence():
    """The accuracy the page states is measured on texts the rounding never saw."""
    def sentences(texts) -> set[str]:
        return {part.strip().lower() for text in texts if text for part in text.replace("?", ".").split(".")
                if part.strip()}

    from tests.live.test_live_site import SEED, TYPED

    tested = sentences(text for pair in [*minilm_texts(), *TYPED, SEED] for text in pair)
    calibration = sentences([*live_calibration.SENTENCES, *(text for pair in live_calibration.PAIRS for text in pair),
                             live_calibration.PARAGRAPH])
    assert len(calibration) > 50 and len(tested) > 50
    assert not tested & calibration, tested & calibration
