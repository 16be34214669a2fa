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

import math
from dataclasses import dataclass

import numpy as np

from reportgen.errors import ModelError

SUPPORTED = ("bert", "electra", "distilbert")
# hidden_act / activation -> the name the JavaScript implements exactly
ACTIVATIONS = {"gelu": "gelu", "gelu_python": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
SMALL = 4096  # 2-D tensors with fewer elements stay float32 (the token-type table)
DEFAULT_ENCODING = "q6"
SPEC_VERSION = 1
FLOATS = {"f32": 32, "f16": 16}  # encodings that store the values themselves (IEEE 754, little-endian)
# config `views.live_weights` -> the matrices' encoding: compact (the default, MiniLM within 25 MB) or float16
FORMATS = {"compact": "q6", "float16": "f16"}


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


def _bits(encoding: str) -> int:
    if encoding in FLOATS:
        return FLOATS[encoding]
    if encoding.startswith("q") and encoding[1:].isdigit() and 2 <= int(encoding[1:]) <= 8:
        return int(encoding[1:])
    raise ValueError(f"unknown encoding {encoding!r}: f32, f16 or q2..q8")


def quantize_rows(weight: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(scales float32 [R], codes uint8 [R, C] in [0, 2m]) of a 2-D array, m = 2^(bits-1) - 1."""
    weight = np.asarray(weight, dtype=np.float32)
    top = (1 << (bits - 1)) - 1
    scales = (np.abs(weight).max(axis=1) / np.float32(top)).astype(np.float32)
    safe = np.where(scales > 0, scales, np.float32(1))
    codes = np.clip(np.rint(weight / safe[:, None]), -top, top) + top
    return scales, codes.astype(np.uint8)


def dequantize_rows(scales: np.ndarray, codes: np.ndarray, bits: int) -> np.ndarray:
    top = (1 << (bits - 1)) - 1
    return ((codes.astype(np.float32) - np.float32(top)) * scales[:, None]).astype(np.float32)


def pack_codes(codes: np.ndarray, bits: int) -> bytes:
    """Codes (< 2^bits) as a little-endian bit stream of `bits` bits each (see the module docstring)."""
    flat = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    if bits == 8:
        return flat.tobytes()
    planes = (flat[:, None] >> np.arange(bits, dtype=np.uint8)) & 1  # [n, bits], least significant first
    return np.packbits(planes.reshape(-1), bitorder="little").tobytes()


def unpack_codes(data: bytes, count: int, bits: int) -> np.ndarray:
    """The inverse of `pack_codes`: `count` codes as uint8."""
    if bits == 8:
        return np.frombuffer(data, dtype=np.uint8, count=count).copy()
    stream = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")[:count * bits]
    planes = stream.reshape(count, bits).astype(np.uint8)
    return (planes << np.arange(bits, dtype=np.uint8)).sum(axis=1).astype(np.uint8)


def column_scales(weight: np.ndarray) -> np.ndarray:
    """g_c = sqrt(max_r |w[r, c]|) (1 for an all-zero column): dividing the columns by it before the per-row
    quantization keeps one outlier column (MiniLM's hidden dimension 99, an FFN unit of weight 7.9) from
    coarsening every row it crosses, while a plain column max would over-flatten the rest."""
    top = np.sqrt(np.abs(weight).max(axis=0))
    return np.where(top > 0, top, 1).astype(np.float32)


def _encode(array: np.ndarray, encoding: str) -> tuple[str, bytes, bool]:
    if array.ndim != 2 or array.size < SMALL or encoding == "f32":
        return "f32", array.astype("<f4").tobytes(), False
    if encoding == "f16":
        return "f16", array.astype("<f2").tobytes(), False
    bits = _bits(encoding)
    columns = column_scales(array)
    scales, codes = quantize_rows(array / columns, bits)
    return encoding, columns.astype("<f4").tobytes() + scales.astype("<f4").tobytes() + pack_codes(codes, bits), True


def export_weights(model, encoding: str = DEFAULT_ENCODING, embedding_encoding: str | None = None,
                   position_encoding: str = "q8") -> LiveWeights:
    """The model's weights in the canonical layout: 2-D layer matrices in `encoding`, the word table in
    `embedding_encoding` (default: `encoding`), the position table in `position_encoding` (q8: it is small and
    its outlier dimension makes it sensitive), everything small in float32.

    `encoding` is "q6" (the default: the embedded MiniLM within the site's 25 MB budget), "q2".."q8", "f16"
    (every matrix in float16, whatever the other two say: MiniLM's attention within 0.002, at 45 MB) or "f32"
    (every tensor exact; for small models and for checking the JavaScript's arithmetic apart from quantization).
    """
    check_supported(model)
    embedding_encoding = embedding_encoding or encoding
    if encoding in FLOATS:
        embedding_encoding = position_encoding = encoding
    for name in (encoding, embedding_encoding, position_encoding):
        _bits(name)
    arch, tensors = _canonical(model)
    table: list[dict] = []
    chunks: list[bytes] = []
    offset = 0
    for name, array in tensors:
        wanted = {"embeddings.word": embedding_encoding, "embeddings.position": position_encoding}.get(name, encoding)
        chosen, blob, columns = _encode(array, wanted)
        entry = {"name": name, "shape": list(array.shape), "encoding": chosen, "offset": offset, "length": len(blob)}
        if columns:
            entry["column_scales"] = True
        table.append(entry)
        pad = (-len(blob)) % 4
        chunks.append(blob + b"\0" * pad)
        offset += len(blob) + pad
    spec = {"version": SPEC_VERSION, **arch, "tensors": table}
    return LiveWeights(spec=spec, data=b"".join(chunks))


def decode_tensor(spec_entry: dict, data: bytes) -> np.ndarray:
    """One tensor of an export back as float32 (what the JavaScript computes with): for tests and checks."""
    blob = data[spec_entry["offset"]:spec_entry["offset"] + spec_entry["length"]]
    shape = tuple(spec_entry["shape"])
    if spec_entry["encoding"] in FLOATS:
        dtype = "<f4" if spec_entry["encoding"] == "f32" else "<f2"
        return np.frombuffer(blob, dtype=dtype).reshape(shape).astype(np.float32)
    bits = _bits(spec_entry["encoding"])
    rows, cols = shape
    columns = np.ones(cols, dtype=np.float32)
    if spec_entry.get("column_scales"):
        columns = np.frombuffer(blob[:4 * cols], dtype="<f4")
        blob = blob[4 * cols:]
    scales = np.frombuffer(blob[:4 * rows], dtype="<f4")
    codes = unpack_codes(blob[4 * rows:], rows * cols, bits).reshape(rows, cols)
    return dequantize_rows(scales, codes, bits) * columns


def base64_size(weights: LiveWeights) -> int:
    """Bytes the data takes once base64-encoded (what it adds to a site)."""
    return 4 * math.ceil(len(weights.data) / 3)

