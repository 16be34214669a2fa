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

The last layer stops at its output matrix: the page shows attention weights and contributions ||alpha f(x)||
(Kobayashi et al. 2020), and in the last layer nothing comes after them but its feed-forward block
(AFTER_LAST_ATTENTION), which changes neither, so it is not shipped (1.3 MB of MiniLM's compact export).

DistilBERT's sinusoidal positions, when configured, are stored as the position table like learned ones.

Encodings (`LiveWeights.spec["tensors"][k]["encoding"]`), all little-endian, each tensor starting at a byte
offset that is a multiple of 4:

* ``f32``: float32 values, row-major. 1-D tensors (biases, LayerNorm parameters) and small 2-D tensors
  (under SMALL elements, e.g. the token-type table) are always f32.
* ``f16``: IEEE 754 half precision, row-major.
* ``rice``: a [R, C] matrix on a uniform grid per row, w' = q * s_r with the integer code q and the step
  s_r = step * rms(w[r]) (`quantize_rows`): R float32 steps, then the codes of every row whose step is not 0,
  Golomb-Rice coded with parameter 2^k, k = the entry's ``rice_bits`` (`rice_rows`: each row starts on a byte
  boundary). |w - w'| <= s_r / 2 with plain rounding; a calibrated export picks the codes by error-compensating
  rounding (`gptq_codes`) on the same grid.

The compact export (`FORMATS["compact"]`): a step per matrix kind (COMPACT_STEPS: 0.0025 x the row's RMS for the
query and key matrices up to 0.014 for the word table), the codes chosen by GPTQ calibrated on
reportgen/live/calibration.py: the layers' matrices against their inputs, the word and position tables
against the attention itself (`embedding_hessian`); the word-table rows the tokenizer never emits
(tokenizer.unreachable_ids: BERT's 994 [unusedN] and "...") are stored as zeros. The float16 export keeps every
matrix in f16.

Measured on the embedded all-MiniLM-L6-v2 (22.7M parameters) in Node against the torch model's own attention
(eager), over the seed pair and 56 other inputs of 3 to 512 tokens, repeated text among them
(tests/live/test_live_model.py), the largest difference of any head's attention probability:

    export                                               data bytes    site files (live/)   all inputs   median
    compact (steps per kind, tables against attention)   23,787,936    24,604,668           0.016        0.004
    compact before: GPTQ 0.0175, tables 0.0125 plain     23,584,296    24,397,543           0.036        0.011
    plain rounding, 0.0175 everywhere                    22,751,012    24,279,261 (*)       0.049
    6-bit codes, a scale per row and column              17,368,616    23,158,156 (*)       0.28
    float16                                              42,820,608    44,042,127           0.0016       0.0006

(*) in the earlier base64 or 15-bit files; the last layer's feed-forward block was still shipped then. MiniLM's
attention is sharp, and the largest errors are on long inputs with repeated text, where keys nearly tie. A step's
halving costs a bit a weight, so the bits go where the attention is most sensitive per byte. Rounded alone, the
word table moves some head by 0.035 at 0.0175 with plain rounding but by 0.011 at 0.02 against the attention
(`embedding_hessian`); the query and key matrices, a twentieth of the weights, by 0.004 at 0.0035.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reportgen.errors import ModelError
from reportgen.live.calibration import calibration_inputs
from reportgen.live.tokenizer import unreachable_ids

SUPPORTED = ("bert", "electra", "distilbert")
# hidden_act / activation -> the name the JavaScript implements exactly
ACTIVATIONS = {"gelu": "gelu", "gelu_python": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
AFTER_LAST_ATTENTION = ("attention_norm", "intermediate", "ffn_output", "output_norm")  # not exported (docstring)
SMALL = 4096  # 2-D tensors with fewer elements stay float32 (the token-type table)
SPEC_VERSION = 2
FLOATS = ("f32", "f16")  # encodings that store the values themselves (IEEE 754, little-endian)
CODE_LIMIT = 32767  # codes are int16
TABLES = ("embeddings.word", "embeddings.position")  # looked up by row, rounded by `embedding_hessian`
# The compact export's step per matrix (`part_of`), times each row's RMS. A step's halving costs a bit a weight, so
# the bits go where the attention is most sensitive per byte: the query and key matrices make the attention logits
# and are a twentieth of MiniLM's weights, so they get the finest grid; the word table is half of the weights and,
# rounded against the attention's own sensitivity, takes the coarsest. Chosen on MiniLM (module docstring).
COMPACT_STEPS = {"word": 0.014, "position": 0.0028, "project": 0.0042, "query": 0.0025, "key": 0.0025,
                 "value": 0.0042, "output": 0.0042, "intermediate": 0.006, "ffn_output": 0.00875}
# config `views.live_weights` -> export_weights' arguments: compact (the default, MiniLM within 25 MB) or float16
FORMATS = {"compact": {"encoding": "rice", "steps": COMPACT_STEPS}, "float16": {"encoding": "f16"}}
# GPTQ's damping (times the mean of diag H). On MiniLM the word table rounded with 0.01 moved the attention by
# 0.019 at most where 0.1 moved it by 0.024 (the layers at 0.0175 around it); the layers' matrices use 0.1.
TABLE_DAMP = 0.01
LAYER_DAMP = 0.1


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


def _layer_parts(layer, distil: bool, last: bool = False) -> dict:
    """Canonical part name -> the torch module of one layer (the last one without AFTER_LAST_ATTENTION)."""
    attention = layer.attention
    if distil:
        parts = {"query": attention.q_lin, "key": attention.k_lin, "value": attention.v_lin,
                 "output": attention.out_lin, "attention_norm": layer.sa_layer_norm,
                 "intermediate": layer.ffn.lin1, "ffn_output": layer.ffn.lin2, "output_norm": layer.output_layer_norm}
    else:
        parts = {"query": attention.self.query, "key": attention.self.key, "value": attention.self.value,
                 "output": attention.output.dense, "attention_norm": attention.output.LayerNorm,
                 "intermediate": layer.intermediate.dense, "ffn_output": layer.output.dense,
                 "output_norm": layer.output.LayerNorm}
    return {name: module for name, module in parts.items() if not (last and name in AFTER_LAST_ATTENTION)}


def _parts(model) -> list[tuple[str, object]]:
    """(canonical part prefix "layers.{i}.{name}", module) of every layer's exported parts, in order."""
    _, _, layers = _base(model)
    distil = model.config.model_type == "distilbert"
    return [(f"layers.{index}.{name}", module)
            for index, layer in enumerate(layers)
            for name, module in _layer_parts(layer, distil, index == len(layers) - 1).items()]


def _linears(model) -> dict:
    """Canonical weight name -> its Linear module (the layers' matrices and ELECTRA's embedding projection)."""
    base, _, _ = _base(model)
    found = {f"{prefix}.weight": module for prefix, module in _parts(model) if not prefix.endswith("norm")}
    if getattr(base, "embeddings_project", None) is not None:
        found["embeddings.project.weight"] = base.embeddings_project
    return found


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
    for prefix, module in _parts(model):
        tensors.append((f"{prefix}.weight", _array(module.weight)))
        tensors.append((f"{prefix}.bias", _array(module.bias)))
        if prefix.endswith("norm"):
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
        "intermediate": int(_layer_parts(layers[0], distil)["intermediate"].weight.shape[0]),
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


def input_hessians(model, inputs: list[dict]) -> dict[str, np.ndarray]:
    """Canonical weight name -> H = sum over the tokens of `inputs` of x x^T, x the matrix's input (float64): how
    much each input direction matters to the layer's output, for `gptq_codes`."""
    import torch

    hessians: dict[str, np.ndarray] = {}
    hooks = []
    for name, module in _linears(model).items():
        def collect(_module, args, _output, name=name):
            x = args[0].detach().reshape(-1, args[0].shape[-1]).to("cpu", torch.float64)
            hessians[name] = hessians.get(name, 0) + (x.T @ x).numpy()
        hooks.append(module.register_forward_hook(collect))
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            for batch in inputs:
                model(**{key: value.to(device) for key, value in batch.items()})
    finally:
        for hook in hooks:
            hook.remove()
    return hessians


def gptq_codes(weight: np.ndarray, hessian: np.ndarray, steps: np.ndarray, damp: float = 0.1,
               block: int = 128) -> np.ndarray:
    """Codes [R, C] on the grid of `quantize_rows` (w ~ code * steps[r]) chosen by error-compensating rounding
    (GPTQ: Frantar, Ashkboos, Hoefler and Alistarh 2022, Algorithm 1): columns are rounded one at a time, most
    active input first ("act-order"), and each one's rounding error is spread over the columns not yet rounded
    through the upper Cholesky factor of H^-1, so the layer's output on inputs like the calibration texts moves
    less than with plain rounding. `damp` * mean(diag H) is added to H's diagonal; dead inputs get weight 0.
    On MiniLM this lowers the mean attention error by about a fifth at the same size (codes' entropy unchanged)."""
    work = weight.astype(np.float64).copy()
    hessian = hessian.astype(np.float64).copy()
    step = np.where(steps > 0, steps, 1).astype(np.float64)[:, None]
    dead = np.diag(hessian) == 0
    hessian[dead, dead] = 1
    work[:, dead] = 0
    order = np.argsort(-np.diag(hessian), kind="stable")
    work, hessian = work[:, order], hessian[np.ix_(order, order)]
    hessian[np.diag_indices_from(hessian)] += damp * np.mean(np.diag(hessian))
    upper = np.linalg.cholesky(np.linalg.inv(hessian)).T
    codes = np.zeros(work.shape, dtype=np.int64)
    for first in range(0, work.shape[1], block):
        last = min(first + block, work.shape[1])
        part, factor = work[:, first:last].copy(), upper[first:last, first:last]
        errors = np.zeros_like(part)
        for i in range(last - first):
            rounded = np.rint(part[:, i] / step[:, 0])
            codes[:, first + i] = rounded
            error = (part[:, i] - rounded * step[:, 0]) / factor[i, i]
            part[:, i:] -= np.outer(error, factor[i, i:])
            errors[:, i] = error
        work[:, last:] -= errors @ upper[first:last, last:]
    out = np.empty_like(codes)
    out[:, order] = codes
    out[steps <= 0] = 0
    return np.clip(out, -CODE_LIMIT, CODE_LIMIT).astype(np.int16)


def embedding_hessian(model, inputs: list[dict], draws: int = 4, seed: int = 0) -> np.ndarray:
    """H [E, E] over the embedding vector (word + position + token type, before the first LayerNorm): the sum over
    the tokens of `inputs` and `draws` random directions r of g g^T, g the gradient with respect to a token's
    vector of r . (every head's attention). Its expectation is J^T J, J the Jacobian of all the attention
    probabilities, so e^T H e estimates how far an error e in a word or position row moves the attention (squared):
    `gptq_codes` with it rounds each table row where the attention notices least. On MiniLM this halves the
    largest attention error that rounding the word table causes, at the same size. `model` must return its
    attentions (eager attention)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    embed = model.get_input_embeddings()
    hessian = torch.zeros(embed.weight.shape[1], embed.weight.shape[1], dtype=torch.float64)
    with torch.enable_grad():
        for batch in inputs:
            batch = {key: value.to(embed.weight.device) for key, value in batch.items()}
            ids = batch.pop("input_ids")
            for _ in range(draws):
                vectors = embed(ids).detach().requires_grad_()
                attentions = model(inputs_embeds=vectors, output_attentions=True, **batch).attentions
                if not attentions or attentions[0] is None:
                    raise ValueError("embedding_hessian needs the attentions: load the model with eager attention")
                weighted = sum((torch.randn(a.shape, generator=generator).to(a) * a).sum() for a in attentions)
                (gradient,) = torch.autograd.grad(weighted, vectors)
                flat = gradient.reshape(-1, gradient.shape[-1]).to("cpu", torch.float64)
                hessian += flat.T @ flat
    return hessian.numpy()


def part_of(name: str) -> str:
    """The matrix kind of a canonical tensor name, the key of a `steps` dict: "layers.3.query.weight" -> "query",
    "embeddings.word" -> "word", "embeddings.project.weight" -> "project"."""
    return name.removesuffix(".weight").split(".")[-1]


def _encode(name: str, array: np.ndarray, encoding: str, steps: float | dict[str, float],
            hessian: np.ndarray | None) -> tuple[dict, bytes]:
    if array.ndim != 2 or array.size < SMALL or encoding == "f32":
        return {"encoding": "f32"}, array.astype("<f4").tobytes()
    if encoding == "f16":
        return {"encoding": "f16"}, array.astype("<f2").tobytes()
    row_steps, codes = quantize_rows(array, steps if isinstance(steps, float) else steps[part_of(name)])
    if hessian is not None:
        codes = gptq_codes(array, hessian, row_steps, TABLE_DAMP if name in TABLES else LAYER_DAMP)
    stored = codes[row_steps > 0]
    k = rice_parameter(stored)
    return {"encoding": "rice", "rice_bits": k}, row_steps.astype("<f4").tobytes() + rice_rows(stored, k)


def export_weights(model, encoding: str = "rice", steps: float | dict[str, float] = 0.0125,
                   calibration: list[dict] | None = None, unused_rows: list[int] | None = None) -> LiveWeights:
    """The model's weights in the canonical layout. `encoding`:

    * "rice" (the default): every 2-D tensor of SMALL elements or more on a grid of a step times its row's root
      mean square, Rice-coded; `steps` is that step, or a step per matrix kind (`part_of`, e.g. COMPACT_STEPS);
    * "f16": those tensors in float16;
    * "f32": every tensor exact (for small models, and to check the JavaScript's arithmetic apart from rounding).

    1-D tensors (biases, LayerNorms) and small tables are float32 in every encoding. With `calibration` (model
    inputs, reportgen/live/calibration.py; the model must return its attentions) the rice codes come from
    `gptq_codes` instead of plain rounding, on the same grid: the Linear layers' against their inputs
    (`input_hessians`), the word and position tables' against the attention (`embedding_hessian`).
    `unused_rows`: word-table rows stored as zeros (no codes), for ids the tokenizer never emits.
    """
    check_supported(model)
    if encoding not in ("rice", *FLOATS):
        raise ValueError(f"unknown encoding {encoding!r}: rice, f16 or f32")
    arch, tensors = _canonical(model)
    hessians: dict[str, np.ndarray] = {}
    if calibration and encoding == "rice":
        hessians = input_hessians(model, calibration)
        hessians.update(dict.fromkeys(TABLES, embedding_hessian(model, calibration)))
    table: list[dict] = []
    chunks: list[bytes] = []
    offset = 0
    for name, array in tensors:
        if name == "embeddings.word" and unused_rows:
            array = array.copy()
            array[unused_rows] = 0
        fields, blob = _encode(name, array, encoding, steps, hessians.get(name))
        table.append({"name": name, "shape": list(array.shape), **fields, "offset": offset, "length": len(blob)})
        pad = (-len(blob)) % 4
        chunks.append(blob + b"\0" * pad)
        offset += len(blob) + pad
    spec = {"version": SPEC_VERSION, **arch, "tensors": table}
    return LiveWeights(spec=spec, data=b"".join(chunks))


def export_format(model, tokenizer, weights_format: str, max_length: int) -> LiveWeights:
    """The export a site ships for config `views.live_weights` (a FORMATS key); the compact one's rounding is
    calibrated on reportgen's own texts (calibration.py), cut at `max_length` tokens as the page cuts inputs."""
    settings = FORMATS[weights_format]
    if settings["encoding"] != "rice":
        return export_weights(model, **settings)
    return export_weights(model, **settings, calibration=calibration_inputs(tokenizer, max_length),
                          unused_rows=unreachable_ids(tokenizer))
