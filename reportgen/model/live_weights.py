"""A BERT-family encoder's weights, exported compactly for the in-browser forward pass (views.live).

`export_weights(model)` maps BERT (and the BERT inside its task heads), ELECTRA (with its embedding
projection when embedding_size != hidden_size) and DistilBERT to one canonical post-LayerNorm layout, so
site_src/assets/javascripts/live-model.js has one forward pass; `check_supported(model)` refuses anything
else (RoBERTa's offset positions and byte-level BPE, ALBERT's shared layers, DeBERTa's relative attention,
decoders, pre-LayerNorm variants) with a `ModelError` before anything runs.

Canonical tensors (torch Linear layout: weight [out, in]; E = embedding size, D = hidden size, F = intermediate):

    embeddings.word [V, E]   embeddings.position [P, E]   embeddings.token_type [TV, E] (absent when TV = 0)
    embeddings.norm.weight / .bias [E]
    embeddings.project.weight [D, E] / .bias [D]           (ELECTRA with embedding_size != hidden_size only)
    layers.{i}.query / key / value / output .weight [D, D] / .bias [D]
    layers.{i}.attention_norm.weight / .bias [D]           (LayerNorm(attention output + input))
    layers.{i}.intermediate.weight [F, D] / .bias [F]      (then the activation)
    layers.{i}.ffn_output.weight [D, F] / .bias [D]
    layers.{i}.output_norm.weight / .bias [D]              (LayerNorm(ffn output + attention_norm output))

DistilBERT's sinusoidal positions, when configured, are stored as the position table like learned ones.

Encodings (`LiveWeights.spec["tensors"][k]["encoding"]`), all little-endian, each tensor starting at a byte
offset that is a multiple of 4:

* ``f32``: float32 values, row-major. 1-D tensors (biases, LayerNorm parameters) and small 2-D tensors
  (under SMALL elements, e.g. the token-type table) are always f32.
* ``q<b>`` for b in 2..8 (``q6`` by default, ``q8``, ``q4``): per-row symmetric quantization of a 2-D tensor
  [R, C] after dividing each column by a column scale g_c = sqrt(max_r |w[r, c]|) (1 for a zero column), which
  keeps one outlier column from coarsening every row it crosses. With u = w / g, m = 2^(b-1) - 1 and, for row r,
  s_r = max_c |u[r, c]| / m (s_r = 0 for an all-zero row):

      q[r, c] = clamp(round(u[r, c] / s_r), -m, m),   code = q + m in [0, 2m],   w'[r, c] = (code - m) * s_r * g_c.

  Bytes: the C column scales g_c as float32 (the entry says ``"column_scales": true``), the R row scales s_r as
  float32, then the codes of all rows (row-major, element i = r * C + c) as one bit stream of b bits per code:
  code i occupies stream bits [i*b, i*b + b), where stream bit k is bit (k mod 8) (least significant first) of
  byte floor(k / 8); the last byte is zero-padded. For b = 6 this is 4 codes in 3 bytes: c0 | c1 << 6 |
  c2 << 12 | c3 << 18 as a 24-bit little-endian integer; for b = 8 one code per byte. Error bound:
  |w - w'| <= s_r * g_c / 2 per element (without column scales: max|w[r]| / (2m), 1/62 of the row's largest
  magnitude for q6, 1/254 for q8). byte_length = 4C + 4R + ceil(R * C * b / 8).

The default export: layer matrices and the word table q6, the position table q8, the rest float32.

Measured on the embedded all-MiniLM-L6-v2 (22.7M parameters), the largest difference of any head's attention
probability from the torch model's own (eager), over the seed pair and 50 inputs of 3 to 512 tokens:

    encoding (layers / word table / positions)       raw bytes    base64 bytes   max |attention error|
    q6 / q6 / q8, column scales (the default)         17,368,616   23,158,156     0.28  (tests/live/)
    q6 / q6 / q6, no column scales                    17,233,448   22,977,932     0.36  (another 52 inputs)
    q5 / q6 / q6, no column scales                    15,906,344   21,208,460     0.41
    q8 / q5 / q5, no column scales                    18,398,024   24,530,700     0.50
    q8 / q6 / q6, no column scales                    19,887,656   26,516,876     0.30  (over the budget)
    q8 everywhere, no column scales                   22,866,920   30,489,228     0.09  (over the budget)
    q8 everywhere, column scales                      ~22.9 MB     ~30.5 MB       0.08  (over the budget)

MiniLM's attention is sharp: rounding any one group of matrices alone to 8 bits moves some head by 0.015 to
0.085 (the FFN output and word embeddings most), so plain round-to-nearest at the 25 MB budget (about 6.6 bits a
weight) does not reach views.live's 0.02 target; error-compensating quantization (GPTQ, Frantar et al. 2022)
or entropy-coded 8-bit codes are the next steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ModelError

SUPPORTED = ("bert", "electra", "distilbert")
# hidden_act / activation -> the name the JavaScript implements exactly
ACTIVATIONS = {"gelu": "gelu", "gelu_python": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
SMALL = 4096  # 2-D tensors with fewer elements stay float32 (the token-type table)
SPEC_VERSION = 2
FLOATS = {"f32": 32, "f16": 16}  # encodings that store the values themselves (IEEE 754, little-endian)
CODE_LIMIT = 32767  # codes are int16
TABLES = ("embeddings.word", "embeddings.position")  # looked up by row: `table_step` applies
# config `views.live_weights` -> export_weights' arguments: compact (the default, MiniLM within 25 MB) or float16
FORMATS = {"compact": {"encoding": "rice", "step": 0.0175, "table_step": 0.0175}, "float16": {"encoding": "f16"}}


@dataclass
class LiveWeights:
    """The exported weights: `spec` (JSON-able architecture and tensor table) and `data` (all tensors)."""

    spec: dict
    data: bytes


def _refuse(model_type: str, why: str = "") -> ModelError:
    tail = f" ({why})" if why else ""
    return ModelError("views.live supports BERT-family encoders (BERT, MiniLM, ELECTRA, DistilBERT); "
                      f"this model is {model_type}{tail}")


def _activation_name(config) -> str:
    act = getattr(config, "activation", None) if config.model_type == "distilbert" else getattr(config,
                                                                                                 "hidden_act", None)
    if not isinstance(act, str):
        return ""
    return act


def check_model_type(model_type: str | None) -> None:
    """The first check, from the model directory's config.json alone (a build refuses before any work);
    `check_supported` checks the loaded model's settings too."""
    if model_type not in SUPPORTED:
        raise _refuse(model_type or "of no known type")


def check_supported(model) -> None:
    """Raise `ModelError` (one line naming views.live) unless `model` is an encoder the live forward pass runs
    exactly: BERT, ELECTRA or DistilBERT, absolute positions, post-LayerNorm layers, GELU activation."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None) or type(model).__name__
    if model_type not in SUPPORTED:
        raise _refuse(model_type)
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        raise _refuse(model_type, "configured as a decoder")
    position_type = getattr(config, "position_embedding_type", "absolute") or "absolute"
    if position_type != "absolute":
        raise _refuse(model_type, f"position_embedding_type {position_type}")
    act = _activation_name(config)
    if act not in ACTIVATIONS:
        raise _refuse(model_type, f"activation {act or 'unknown'}; only GELU is implemented")
    _base(model)  # the layout is there


def _base(model):
    base = getattr(model, "base_model", model)
    embeddings = getattr(base, "embeddings", None)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None:
        layers = getattr(getattr(base, "transformer", None), "layer", None)
    if embeddings is None or layers is None:
        raise _refuse(model.config.model_type, "its embeddings or layers were not found")
    return base, embeddings, layers


def _array(tensor) -> np.ndarray:
    return tensor.detach().to("cpu").float().numpy()


def _canonical(model) -> tuple[dict, list[tuple[str, np.ndarray]]]:
    """(architecture fields, [(canonical name, float32 array)]) of a supported model."""
    config = model.config
    base, embeddings, layers = _base(model)
    distil = config.model_type == "distilbert"
    tensors: list[tuple[str, np.ndarray]] = [
        ("embeddings.word", _array(embeddings.word_embeddings.weight)),
        ("embeddings.position", _array(embeddings.position_embeddings.weight)),
    ]
    token_types = getattr(embeddings, "token_type_embeddings", None)
    if token_types is not None:
        tensors.append(("embeddings.token_type", _array(token_types.weight)))
    tensors += [("embeddings.norm.weight", _array(embeddings.LayerNorm.weight)),
                ("embeddings.norm.bias", _array(embeddings.LayerNorm.bias))]
    project = getattr(base, "embeddings_project", None)
    if project is not None:
        tensors += [("embeddings.project.weight", _array(project.weight)),
                    ("embeddings.project.bias", _array(project.bias))]
    eps_values = {float(embeddings.LayerNorm.eps)}
    for index, layer in enumerate(layers):
        if distil:
            attention = layer.attention
            parts = {"query": attention.q_lin, "key": attention.k_lin, "value": attention.v_lin,
                     "output": attention.out_lin, "attention_norm": layer.sa_layer_norm,
                     "intermediate": layer.ffn.lin1, "ffn_output": layer.ffn.lin2,
                     "output_norm": layer.output_layer_norm}
        else:
            attention = layer.attention
            parts = {"query": attention.self.query, "key": attention.self.key, "value": attention.self.value,
                     "output": attention.output.dense, "attention_norm": attention.output.LayerNorm,
                     "intermediate": layer.intermediate.dense, "ffn_output": layer.output.dense,
                     "output_norm": layer.output.LayerNorm}
        for name, module in parts.items():
            tensors.append((f"layers.{index}.{name}.weight", _array(module.weight)))
            tensors.append((f"layers.{index}.{name}.bias", _array(module.bias)))
            if name.endswith("norm"):
                eps_values.add(float(module.eps))
    if len(eps_values) != 1:
        raise _refuse(config.model_type, "its LayerNorms differ in eps")
    word = tensors[0][1]
    hidden = tensors[[name for name, _ in tensors].index("layers.0.query.weight")][1].shape[0]
    heads = config.n_heads if distil else config.num_attention_heads
    arch = {
        "model_type": config.model_type,
        "layers": len(layers),
        "heads": int(heads),
        "hidden": int(hidden),
        "intermediate": int(tensors[[name for name, _ in tensors].index("layers.0.intermediate.weight")][1].shape[0]),
        "embedding": int(word.shape[1]),
        "vocab": int(word.shape[0]),
        "max_positions": int(tensors[1][1].shape[0]),
        "type_vocab": int(token_types.weight.shape[0]) if token_types is not None else 0,
        "layer_norm_eps": eps_values.pop(),
        "activation": ACTIVATIONS[_activation_name(config)],
        "embedding_projection": project is not None,
    }
    return arch, tensors


def quantize_rows(weight: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """(steps float32 [R], codes int16 [R, C]): w ~ code * steps[r] on a uniform grid whose step is `step` times
    the row's root mean square, so every row keeps the same relative precision. The step is raised where a
    row's largest |w| would need a code beyond int16 (never for step >= sqrt(C) / 32767); an all-zero row
    gets step 0 and stores no codes."""
    weight = np.asarray(weight, dtype=np.float32)
    rms = np.sqrt(np.mean(np.square(weight, dtype=np.float64), axis=1))
    steps = np.maximum(rms * step, np.abs(weight).max(axis=1) / CODE_LIMIT).astype(np.float32)
    safe = np.where(steps > 0, steps, np.float32(1))
    codes = np.where(steps[:, None] > 0, np.rint(weight / safe[:, None]), 0)
    return steps, codes.astype(np.int16)


def dequantize_rows(steps: np.ndarray, codes: np.ndarray) -> np.ndarray:
    return (codes.astype(np.float32) * steps[:, None]).astype(np.float32)


def rice_parameter(codes: np.ndarray) -> int:
    """The k in 0..14 that codes `codes` in the fewest bits (see `rice_rows`)."""
    folded = _zigzag(codes).reshape(-1)
    costs = [int((folded >> k).sum()) + folded.size * (1 + k) for k in range(15)]
    return int(np.argmin(costs))


def _zigzag(codes: np.ndarray) -> np.ndarray:
    codes = codes.astype(np.int64)
    return np.where(codes >= 0, 2 * codes, -2 * codes - 1)


def rice_rows(codes: np.ndarray, k: int, block: int = 4096) -> bytes:
    """Codes [R, C] as Golomb-Rice codes with parameter 2^k (Golomb 1966; Rice 1979), row after row, each row
    starting on a byte boundary. A code q is folded to u = 2q (q >= 0) or -2q - 1 (q < 0) and written as u >> k
    one-bits, a zero-bit, then the k low bits of u, least significant first; stream bit j is bit j % 8 of byte
    j // 8 (least significant first). Near the codes' entropy for the bell-shaped weights of a layer."""
    out = []
    for first in range(0, codes.shape[0], block):
        folded = _zigzag(codes[first:first + block])
        high, low = folded >> k, folded & ((1 << k) - 1)
        lengths = high + 1 + k
        row_bits = lengths.sum(axis=1)
        row_starts = np.concatenate([[0], np.cumsum((row_bits + 7) // 8 * 8)])
        starts = (np.cumsum(lengths, axis=1) - lengths + row_starts[:-1, None]).reshape(-1)
        high, low = high.reshape(-1), low.reshape(-1)
        bits = np.zeros(int(row_starts[-1]), dtype=np.uint8)
        ones = int(high.sum())
        before = np.cumsum(high) - high  # ones of earlier codes
        bits[np.repeat(starts - before, high) + np.arange(ones)] = 1
        for bit in range(k):
            bits[starts + high + 1 + bit] = (low >> bit) & 1
        out.append(np.packbits(bits, bitorder="little").tobytes())
    return b"".join(out)


def _encode(array: np.ndarray, encoding: str, step: float) -> tuple[dict, bytes]:
    if array.ndim != 2 or array.size < SMALL or encoding == "f32":
        return {"encoding": "f32"}, array.astype("<f4").tobytes()
    if encoding == "f16":
        return {"encoding": "f16"}, array.astype("<f2").tobytes()
    steps, codes = quantize_rows(array, step)
    k = rice_parameter(codes[steps > 0])
    return {"encoding": "rice", "rice_bits": k}, steps.astype("<f4").tobytes() + rice_rows(codes[steps > 0], k)


def export_weights(model, encoding: str = "rice", step: float = 0.0125, table_step: float | None = None) -> LiveWeights:
    """The model's weights in the canonical layout. `encoding`:

    * "rice" (the default): every 2-D tensor of SMALL elements or more on a grid of `step` times its row's root
      mean square (`table_step`, default `step`, for the word and position tables), Rice-coded;
    * "f16": those tensors in float16;
    * "f32": every tensor exact (for small models, and to check the JavaScript's arithmetic apart from rounding).

    1-D tensors (biases, LayerNorms) and small tables are float32 in every encoding.
    """
    check_supported(model)
    if encoding not in ("rice", *FLOATS):
        raise ValueError(f"unknown encoding {encoding!r}: rice, f16 or f32")
    table_step = step if table_step is None else table_step
    arch, tensors = _canonical(model)
    table: list[dict] = []
    chunks: list[bytes] = []
    offset = 0
    for name, array in tensors:
        fields, blob = _encode(array, encoding, table_step if name in TABLES else step)
        table.append({"name": name, "shape": list(array.shape), **fields, "offset": offset, "length": len(blob)})
        pad = (-len(blob)) % 4
        chunks.append(blob + b"\0" * pad)
        offset += len(blob) + pad
    spec = {"version": SPEC_VERSION, **arch, "tensors": table}
    return LiveWeights(spec=spec, data=b"".join(chunks))
