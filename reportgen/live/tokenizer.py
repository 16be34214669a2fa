"""A fast BERT tokenizer's settings as plain JSON data, for the in-browser tokenizer of views.live.

The live view lets a reader type a sentence on a static page (opened from file://, no server) and runs the
model in the browser, so the browser must tokenize exactly as Hugging Face's fast tokenizer does. The JavaScript
side (site_src/assets/javascripts/live-tokenizer.js) reimplements one pipeline only, BERT's: BertNormalizer,
BertPreTokenizer, WordPiece (Devlin et al. 2019, "BERT"; the `tokenizers` library's components of those names)
and the `[CLS] A [SEP] (B [SEP])` template. `tokenizer_spec` reads the settings of those components from the
backend's own JSON (`tokenizer.backend_tokenizer.to_str()`), which is what the Rust code runs on, rather than from
the Python wrapper's attributes, which may disagree with it; anything the JavaScript does not reproduce is refused
with a `ModelError` here, at build time, instead of tokenizing differently in the reader's browser.
"""

from __future__ import annotations

import json
from typing import Any

from reportgen.errors import ModelError

SUPPORTED = "views.live supports BERT-family models with a WordPiece tokenizer (BERT, MiniLM, ELECTRA, DistilBERT)"
SPEC_VERSION = 1  # bump when the JSON's fields change; live-tokenizer.js checks it
# transformers sets model_max_length to int(1e30) when a tokenizer declares none; such a number is not a length
# JavaScript can hold exactly, so the spec says null (no limit of the tokenizer's own) instead.
NO_LIMIT_ABOVE = 1_000_000
NORMALIZER_FIELDS = ("clean_text", "handle_chinese_chars", "strip_accents", "lowercase")
ADDED_TOKEN_FIELDS = ("content", "id", "special", "normalized", "lstrip", "rstrip", "single_word")


def _refuse(what: str) -> ModelError:
    """The one-line error for a tokenizer the browser cannot reproduce; `what` says what the tokenizer is."""
    return ModelError(f"{SUPPORTED}; this model's tokenizer is {what}")


def _backend_json(tokenizer: Any) -> dict:
    """The Rust tokenizer's own description; a slow (pure Python) tokenizer has none and is refused."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise _refuse(f"a slow tokenizer ({type(tokenizer).__name__}) without a `tokenizers` backend")
    return json.loads(backend.to_str())


def _kind(part: dict | None) -> str:
    """A component's type name as tokenizer.json spells it ('none' for an absent one)."""
    return "none" if part is None else str(part.get("type", "unknown"))


def _normalizer(data: dict) -> dict:
    """BertNormalizer's four settings; a Sequence holding only a BertNormalizer counts as one (same output)."""
    part = data.get("normalizer")
    if part is not None and part.get("type") == "Sequence":
        inner = part.get("normalizers") or []
        if len(inner) == 1:
            part = inner[0]
        else:
            names = ", ".join(_kind(p) for p in inner) or "nothing"
            raise _refuse(f"one with a Sequence normalizer ({names}), not BERT's BertNormalizer alone")
    if part is None or part.get("type") != "BertNormalizer":
        raise _refuse(f"one with a {_kind(part)} normalizer, not BertNormalizer")
    # strip_accents null means "follow lowercase" (the Rust code: strip_accents.unwrap_or(lowercase)); the
    # null is kept so the spec reads as the tokenizer's own settings, and the JavaScript resolves it the same way.
    return {name: part[name] for name in NORMALIZER_FIELDS}


def _is_bert_pre_tokenizer(part: dict | None) -> bool:
    """BertPreTokenizer, or a Sequence that splits the same way.

    BertPreTokenizer splits on whitespace (dropping it) and isolates every punctuation character; a Sequence of
    WhitespaceSplit then Punctuation(behavior="isolated") does the same (both use the same punctuation test), and
    a Sequence of just a BertPreTokenizer is one trivially."""
    if part is None:
        return False
    if part.get("type") == "BertPreTokenizer":
        return True
    if part.get("type") != "Sequence":
        return False
    inner = part.get("pretokenizers") or []
    if len(inner) == 1:
        return _is_bert_pre_tokenizer(inner[0])
    return (len(inner) == 2 and inner[0].get("type") == "WhitespaceSplit"
            and inner[1].get("type") == "Punctuation" and inner[1].get("behavior", "Isolated") == "Isolated")


def _vocabulary(model: dict) -> list[str]:
    """WordPiece's vocabulary as a list in id order; the ids must be 0..n-1 so that a list index is the id."""
    vocab: dict[str, int] = model["vocab"]
    tokens = [""] * len(vocab)
    for token, index in vocab.items():
        if not 0 <= index < len(tokens) or tokens[index]:
            raise _refuse("a WordPiece tokenizer whose vocabulary ids are not 0..n-1 without gaps")
        tokens[index] = token
    return tokens


def _template(data: dict, cls_token: str, sep_token: str) -> None:
    """Refuse a post-processor that does not add BERT's `[CLS] A [SEP]` / `[CLS] A [SEP] B [SEP]`.

    MPNet, for one, pairs BERT's WordPiece with RoBERTa's `<s> A </s></s> B </s>`, which the browser does not
    build; checking the template here keeps such a model from being fed the wrong special tokens."""
    part = data.get("post_processor")
    kind = _kind(part)
    if kind == "BertProcessing":
        if part["cls"][0] == cls_token and part["sep"][0] == sep_token:
            return
    elif kind == "TemplateProcessing":
        def shape(pieces: list[dict]) -> list[tuple[str, int]]:
            return [(piece["SpecialToken"]["id"], piece["SpecialToken"]["type_id"]) if "SpecialToken" in piece
                    else ("$" + piece["Sequence"]["id"], piece["Sequence"]["type_id"]) for piece in pieces]

        single = [(cls_token, 0), ("$A", 0), (sep_token, 0)]
        pair = single + [("$B", 1), (sep_token, 1)]
        if shape(part["single"]) == single and shape(part["pair"]) == pair:
            return
    raise _refuse(f"a WordPiece tokenizer whose {kind} post-processor does not build "
                  f"{cls_token} A {sep_token} B {sep_token} (BERT's template)")


def tokenizer_spec(tokenizer: Any) -> dict[str, Any]:
    """The settings live-tokenizer.js needs to tokenize exactly as `tokenizer` (a transformers fast tokenizer) does.

    Returns JSON-able data: `version`, `vocab` (tokens in id order), `normalizer` (BertNormalizer's clean_text,
    handle_chinese_chars, strip_accents (null: follow lowercase), lowercase), `pre_tokenizer` ("BertPreTokenizer"),
    `wordpiece` (unk_token, continuing_subword_prefix, max_input_chars_per_word), `added_tokens` (content, id,
    special, normalized, lstrip, rstrip, single_word: matched in the raw text before anything else, as the backend
    does, so a reader who types [MASK] gets the mask token), `special_tokens` (cls, sep, pad, unk and, when the
    tokenizer has one, mask: each {token, id}), `model_max_length` (null when the tokenizer declares none) and
    `token_type_ids` (whether the model takes segment ids; DistilBERT does not).

    Raises ModelError, one line naming views.live and the supported models, for anything else: a slow tokenizer, a
    normalizer other than BertNormalizer, another pre-tokenizer, a BPE or Unigram model, another template.
    """
    data = _backend_json(tokenizer)
    model = data.get("model") or {}
    if model.get("type") != "WordPiece":
        raise _refuse(f"a {model.get('type', 'unknown')} model ({type(tokenizer).__name__}), not WordPiece")
    normalizer = _normalizer(data)
    if not _is_bert_pre_tokenizer(data.get("pre_tokenizer")):
        raise _refuse(f"a WordPiece tokenizer with a {_kind(data.get('pre_tokenizer'))} pre-tokenizer, "
                      "not BertPreTokenizer")
    vocab = _vocabulary(model)
    added = [{name: entry[name] for name in ADDED_TOKEN_FIELDS} for entry in data.get("added_tokens") or []]
    ids = {token: index for index, token in enumerate(vocab)}
    ids.update({entry["content"]: entry["id"] for entry in added})

    special: dict[str, dict[str, Any]] = {}
    for role in ("cls", "sep", "pad", "unk", "mask"):
        token = getattr(tokenizer, f"{role}_token", None)
        if token is None or str(token) not in ids:
            if role == "mask":
                continue  # the live view needs no mask token; a model without one still tokenizes
            raise _refuse(f"a WordPiece tokenizer without a {role} token in its vocabulary")
        special[role] = {"token": str(token), "id": ids[str(token)]}
    if special["unk"]["token"] != model["unk_token"]:
        raise _refuse(f"a WordPiece tokenizer whose unk_token {special['unk']['token']!r} is not its model's "
                      f"{model['unk_token']!r}")
    _template(data, special["cls"]["token"], special["sep"]["token"])

    max_length = getattr(tokenizer, "model_max_length", None)
    return {
        "version": SPEC_VERSION,
        "vocab": vocab,
        "normalizer": normalizer,
        "pre_tokenizer": "BertPreTokenizer",
        "wordpiece": {"unk_token": model["unk_token"],
                      "continuing_subword_prefix": model["continuing_subword_prefix"],
                      "max_input_chars_per_word": model["max_input_chars_per_word"]},
        "added_tokens": added,
        "special_tokens": special,
        "model_max_length": int(max_length) if max_length is not None and max_length <= NO_LIMIT_ABOVE else None,
        "token_type_ids": "token_type_ids" in tokenizer.model_input_names,
    }


def unreachable_ids(tokenizer: Any) -> list[int]:
    """Vocabulary ids that `tokenizer` (one `tokenizer_spec` accepts) never emits, so their embeddings need not ship.

    Every WordPiece piece, less its continuing-subword prefix, is a substring of one pre-token of normalized text,
    and such a substring is itself one pre-token that normalization leaves as it is. An entry that normalization
    changes or the pre-tokenizer splits can therefore never be emitted: BERT's [unused0].. (split at the brackets),
    capitalised entries of a lower-casing vocabulary, accented ones where accents are stripped, "##" itself. Added
    and special tokens are matched before normalization and always count as reachable.
    """
    data = _backend_json(tokenizer)
    model = data["model"]
    prefix = model["continuing_subword_prefix"]
    backend = tokenizer.backend_tokenizer
    added = {entry["id"] for entry in data.get("added_tokens") or []}
    unreachable = []
    for index, token in enumerate(_vocabulary(model)):
        word = token[len(prefix):] if token.startswith(prefix) and len(token) > len(prefix) else token
        normalized = backend.normalizer.normalize_str(word) if backend.normalizer is not None else word
        pieces = [piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
        if index not in added and pieces != [word]:
            unreachable.append(index)
    return unreachable
