"""A BERT encoder's forward pass in a few lines of torch, for `reportgen view` and notebooks.

Why: importing transformers' model code takes ~5 s on a 2-core machine (it pulls in torch.distributed,
torch._dynamo and scipy), most of what one quick view of one sentence would cost; reading the weights
with safetensors and the tokenizer with `tokenizers` and running the layers here takes ~0.3 s.

It covers exactly the checkpoints `supports` accepts: model_type "bert" with absolute positions and
exact GELU, weights in model.safetensors and a tokenizer.json (the embedded all-MiniLM-L6-v2 is one);
every other model goes through transformers as in a build. It gives what
`reportgen.model.run.run_example(..., keep_qk=True)` gives: the tokens with their words and segments,
the attention, the query/key vectors and the value norms ||f(x_j)|| (Kobayashi et al. 2020), which
tests/model/test_light_bert.py checks against transformers' BertModel on the embedded model and on
a random BERT. The layer itself (Devlin et al. 2019; Vaswani et al. 2017): per head
A = softmax(q k^T / sqrt(d)), then the output projection, residual and LayerNorm, and the GELU
feed-forward with its residual and LayerNorm.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reportgen.config import ExampleSpec
from reportgen.model.special_tokens import special_flags, special_ids_of
from reportgen.runs import ExampleRun

WEIGHTS, TOKENIZER = "model.safetensors", "tokenizer.json"


def supports(path: Path) -> bool:
    """Whether `path` holds a checkpoint this forward pass reproduces (else use transformers)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(config, dict) and config.get("model_type") == "bert"
            and config.get("position_embedding_type", "absolute") == "absolute"
            and config.get("hidden_act") == "gelu" and not config.get("is_decoder", False)
            and (path / WEIGHTS).is_file() and (path / TOKENIZER).is_file())


def expected_weights(config: dict) -> list[str]:
    """The weights the forward pass reads (the pooler is never used)."""
    names = [f"embeddings.{part}.weight" for part in ("word_embeddings", "position_embeddings",
                                                       "token_type_embeddings", "LayerNorm")]
    names.append("embeddings.LayerNorm.bias")
    for layer in range(config.get("num_hidden_layers", 0)):
        for part in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                     "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"):
            names += [f"encoder.layer.{layer}.{part}.weight", f"encoder.layer.{layer}.{part}.bias"]
    return names


@dataclass
class LightBert:
    """A BERT's weights (float32 tensors, names without a "bert." prefix) and its tokenizer."""

    config: dict
    weights: dict
    tokenizer: object  # tokenizers.Tokenizer

    @classmethod
    def load(cls, path: Path) -> "LightBert":
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        weights = {name.removeprefix("bert."): tensor.float() for name, tensor in load_file(path / WEIGHTS).items()}
        missing = sorted(set(expected_weights(config)) - set(weights))
        if missing:  # transformers would initialise them at random and say so: that path says it
            raise ValueError(f"{path / WEIGHTS} lacks {len(missing)} weights, e.g. {missing[0]}")
        tokenizer = Tokenizer.from_file(str(path / TOKENIZER))
        tokenizer.no_padding()
        return cls(config, weights, tokenizer)

    def encode(self, spec: ExampleSpec, max_length: int):
        """(ids, type ids, tokens, word ids, segment ids, special mask, truncated), as run.encode gives them."""
        from reportgen.model.run import clip

        parts = [clip(text, max_length) for text in (spec.text, spec.pair) if text is not None]
        texts = [text for text, _ in parts]
        self.tokenizer.no_truncation()
        full = len(self.tokenizer.encode(*texts).ids)
        self.tokenizer.enable_truncation(max_length, strategy="longest_first")
        encoding = self.tokenizer.encode(*texts)
        self.tokenizer.no_truncation()
        special = special_flags(encoding.ids, special_ids_of(self.tokenizer))  # <unk> is content
        segments = np.array([-1 if s is None else s for s in encoding.sequence_ids], dtype=np.int64)
        words = np.array([-1 if w is None else w for w in encoding.word_ids], dtype=np.int64)
        if (segments == 1).any():  # word ids restart in sentence B: unique across the pair, as run.encode
            words = np.where(segments == 1, words + words[segments == 0].max(initial=-1) + 1, words)
        truncated = any(cut for _, cut in parts) or full > max_length
        return (encoding.ids, encoding.type_ids, list(encoding.tokens), np.where(special, -1, words),
                np.where(special, -1, segments), special, truncated)

    def _linear(self, x, name: str):
        return x @ self.weights[f"{name}.weight"].T + self.weights[f"{name}.bias"]

    def _norm(self, x, name: str):
        import torch

        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weights[f"{name}.weight"],
                                              self.weights[f"{name}.bias"], self.config.get("layer_norm_eps", 1e-12))

    def run(self, spec: ExampleSpec, max_length: int) -> ExampleRun:
        """One forward pass: the run with attention [L, H, T, T], queries/keys [L, H, T, D] and value norms."""
        import torch

        ids, type_ids, tokens, words, segments, special, truncated = self.encode(spec, max_length)
        weights, heads = self.weights, self.config["num_attention_heads"]
        n = len(ids)
        with torch.no_grad():
            x = (weights["embeddings.word_embeddings.weight"][ids]
                 + weights["embeddings.position_embeddings.weight"][:n]
                 + weights["embeddings.token_type_embeddings.weight"][type_ids])
            x = self._norm(x, "embeddings.LayerNorm")
            attention, queries, keys, norms = [], [], [], []
            for layer in range(self.config["num_hidden_layers"]):
                name = f"encoder.layer.{layer}"
                q, k, v = (self._linear(x, f"{name}.attention.self.{part}").view(n, heads, -1).transpose(0, 1)
                           for part in ("query", "key", "value"))  # [H, T, D]
                weights_ = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
                out = weights[f"{name}.attention.output.dense.weight"]  # [hidden, H * D]
                # ||f(x_j)|| = ||v_j W_O(head)||: each head's value through its slice of the output projection
                norms.append(torch.linalg.vector_norm(v @ out.view(out.shape[0], heads, -1).permute(1, 2, 0), dim=-1))
                context = (weights_ @ v).transpose(0, 1).reshape(n, -1)
                x = self._norm(self._linear(context, f"{name}.attention.output.dense") + x,
                               f"{name}.attention.output.LayerNorm")
                inner = torch.nn.functional.gelu(self._linear(x, f"{name}.intermediate.dense"))
                x = self._norm(self._linear(inner, f"{name}.output.dense") + x, f"{name}.output.LayerNorm")
                attention.append(weights_), queries.append(q), keys.append(k)
        stack = lambda parts: torch.stack(parts).numpy().astype(np.float32)  # noqa: E731
        extras = {"queries": stack(queries), "keys": stack(keys),
                  "scaling": np.array(1 / math.sqrt(queries[0].shape[-1]), dtype=np.float64)}
        return ExampleRun(spec, tokens, words, segments, special, stack(attention), truncated, extras, stack(norms))
