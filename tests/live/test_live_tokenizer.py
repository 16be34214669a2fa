"""The in-browser WordPiece tokenizer (site_src/assets/javascripts/live-tokenizer.js) against Hugging Face's.

views.live tokenizes a reader's sentence in the browser, so its ids must be the fast tokenizer's ids exactly.
Each tokenizer below is compared on over a thousand generated strings (every script, emoji, control and
zero-width characters, long words, truncated pairs) in one Node process; a second test classifies every Unicode
code point both ways, since the Rust code's character tables (Unicode 8) are older than any JavaScript engine's.
`reportgen.live.tokenizer.tokenizer_spec` is what carries a tokenizer's settings to the JavaScript, and
what refuses the tokenizers it cannot reproduce.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from reportgen.errors import ModelError
from reportgen.live.tokenizer import tokenizer_spec, unreachable_ids
from tests.helpers import ROOT, embedded_model_dir

SCRIPT = ROOT / "site_src" / "assets" / "javascripts" / "live-tokenizer.js"
STRINGS = 1200  # per tokenizer

# What the Node side runs: the payload's spec and cases in, one result (or the error's message) per case out.
RUNNER = """
const api = require(process.argv[2]);
const payload = JSON.parse(require('fs').readFileSync(process.argv[3], 'utf8'));
const tokenizer = api.createTokenizer(payload.spec);
const results = payload.cases.map(([text, pair, maxLength]) => {
  try { return tokenizer.encode(text, pair, maxLength); } catch (err) { return { error: err.message }; }
});
process.stdout.write(JSON.stringify(results));
"""


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` (Node.js 20 or later) is not on PATH; it runs the live view's tokenizer "
                    "(apt-get install nodejs)")
    return node


def _run_js(tmp_path: Path, spec: dict, cases: list[tuple[str, str | None, int | None]]) -> list[dict]:
    """Encode every case in one Node process (the spec travels once, in a JSON file, not on the command line)."""
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"spec": spec, "cases": cases}), encoding="utf-8")
    runner = tmp_path / "runner.js"
    runner.write_text(RUNNER, encoding="utf-8")
    result = subprocess.run([_node(), str(runner), str(SCRIPT), str(payload)], capture_output=True, text=True,
                            encoding="utf-8", timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout)


# -- the generated strings --------------------------------------------------------------------------------------
WORDS = ("the cat sat on a mat while strawberries were fresh and the dog was happy tokenizer attention head "
         "unbelievable internationalization transformers running jumped quickly hello world I am you're don't "
         "Paris London McDonald's e-mail o'clock").split()
ACCENTED = ["café", "naïve", "Ångström", "ÉCOLE", "résumé", "São", "Zürich", "façade", "jalapeño", "Øre", "Łódź",
            "İstanbul", "ẞ", "straße", "Ǆemal", "ǅ", "ﬁne", "x\u0301", "e\u0301\u0300", "\u0301", "Ω", "Å"]
GREEK = ["ΟΔΟΣ", "οδός", "Σίσυφος", "ΣΑΣ", "λόγος", "Ελληνικά", "ς", "Σ"]
CYRILLIC = ["Привет", "мир", "ЁЛКА", "Москва", "ЩИ", "їжак"]
CJK = ["中文字符", "日本語のテキスト", "漢字", "汉字和假名", "カタカナ", "ひらがな", "㐀", "𠀀", "豈", "丽"]
KOREAN = ["한국어", "안녕하세요", "ᄀᄁ"]
ARABIC = ["مرحبا", "العربية", "שָׁלוֹם", "हिन्दी", "ภาษาไทย"]
EMOJI = ["🙂", "👍🏽", "👨‍👩‍👧", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "🇫🇷", "❤️", "𝟙𝟚𝟛", "😀😃😄"]
PUNCTUATION = list("¿¡«»—…“”„‘’‚‹›·•†‡§¶‰′″、。，！？：；（）【】「」『』〜-–_()[]{}.,;:!?'\"/\\@#%&*")
SYMBOLS = list("$+<=>^`|~©®™€£¥°±×÷√∞≠≤≥→←↑↓♥★☆✓") + ["^^", "$$$", "<=>"]
INVISIBLE = ["\u200b", "\u200d", "\ufeff", "\u00ad", "\u200e", "\u2060", "\x00", "\x07", "\x1b", "\x7f", "\x85",
             "\ufffd", "\ue000", "\u0378", "\U000e0001", "\u180e", "\x0b", "\x0c"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2002", "\u2009", "\u202f", "\u2028", "\u1680", ""]
SPECIAL = ["[MASK]", "[SEP]", "[CLS]", "[UNK]", "[PAD]", "[mask]", "[MASK]s", "x[SEP]y", "[ MASK ]"]


def _random_char(rng: random.Random) -> str:
    """Any code point but a surrogate, weighted towards the lower planes where the scripts are."""
    while True:
        cp = rng.choice([rng.randrange(0x80, 0x3000), rng.randrange(0x3000, 0x10000), rng.randrange(0x10000, 0x110000)])
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _piece(rng: random.Random, words: list[str]) -> str:
    kind = rng.random()
    if kind < 0.30:
        return rng.choice(words)
    if kind < 0.38:
        return rng.choice(ACCENTED)
    if kind < 0.43:
        return rng.choice(GREEK + CYRILLIC)
    if kind < 0.50:
        return rng.choice(CJK + KOREAN)
    if kind < 0.54:
        return rng.choice(ARABIC)
    if kind < 0.59:
        return rng.choice(EMOJI)
    if kind < 0.68:
        return rng.choice(PUNCTUATION)
    if kind < 0.72:
        return rng.choice(SYMBOLS)
    if kind < 0.76:
        return rng.choice(words) + rng.choice(INVISIBLE) + rng.choice(words)
    if kind < 0.80:
        return str(rng.choice([7, 42, 2024, 3.14159, -15, 1_000_000, "1,234.5", "10%", "½", "²", "٣"]))
    if kind < 0.83:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzqxz") for _ in range(rng.randrange(3, 12)))  # unknown
    if kind < 0.85:  # longer than max_input_chars_per_word (100), or just under it
        return "".join(rng.choice("abcdefghij") for _ in range(rng.choice([99, 100, 101, 130])))
    if kind < 0.87:
        return "🙂" * rng.choice([50, 99, 101])  # 2 UTF-16 units each: Rust counts chars, not units
    if kind < 0.90:
        return rng.choice(SPECIAL)
    if kind < 0.95:
        return "".join(_random_char(rng) for _ in range(rng.randrange(1, 5)))
    return rng.choice(words) + rng.choice(PUNCTUATION + SYMBOLS) + rng.choice(words)


def _text(rng: random.Random, words: list[str], long: bool = False) -> str:
    count = rng.randrange(40, 160) if long else rng.randrange(1, 14)
    parts = []
    for _ in range(count):
        parts.append(_piece(rng, words))
        parts.append(rng.choice(SPACES) if rng.random() < 0.4 else " ")
    text = "".join(parts[:-1])
    case = rng.random()
    if case < 0.1:
        text = text.upper()
    elif case < 0.15:
        text = text.title()
    if rng.random() < 0.05:
        text = rng.choice(SPACES) + text + rng.choice(SPACES + INVISIBLE)
    return text


def _cases(seed: int, extra: tuple[str, ...] = ()) -> list[tuple[str, str | None, int | None]]:
    """(text, pair or None, max_length or None) triples; some texts are only whitespace or invisible characters."""
    rng = random.Random(seed)
    words = WORDS + list(extra)
    cases: list[tuple[str, str | None, int | None]] = []
    for _ in range(STRINGS):
        long = rng.random() < 0.15
        text = _text(rng, words, long)
        if rng.random() < 0.02:
            text = rng.choice([" ", "\t\n", "\u3000", "\u200b", "\u00a0 \ufeff"])
        pair = _text(rng, words, long and rng.random() < 0.5) if rng.random() < 0.4 else None
        max_length = rng.choice([None, None, 16, 9, 32, 64]) if long or rng.random() < 0.3 else None
        cases.append((text, pair, max_length))
    return cases


def _expected(tokenizer, cases: list[tuple[str, str | None, int | None]]) -> list[dict]:
    """Hugging Face's answer per case: ids, tokens, token types and whether truncation cut anything; `empty`
    when a text has no tokens at all (where the JavaScript must refuse it instead of encoding [CLS] [SEP])."""
    out = []
    for text, pair, max_length in cases:
        full = tokenizer(text, pair)
        cut = tokenizer(text, pair, truncation=True, max_length=max_length)
        ids = cut["input_ids"]
        segments = cut.get("token_type_ids")
        empty = not tokenizer.tokenize(text) or (pair is not None and not tokenizer.tokenize(pair))
        out.append({"ids": ids, "tokens": tokenizer.convert_ids_to_tokens(ids), "segments": segments,
                    "truncated": len(full["input_ids"]) > len(ids), "empty": empty})
    return out


def _compare(tokenizer, tmp_path: Path, seed: int, extra: tuple[str, ...] = ()) -> int:
    """Compare JS with Python on the generated cases; fail naming the first mismatches. Returns the case count."""
    spec = tokenizer_spec(tokenizer)
    cases = _cases(seed, extra)
    expected = _expected(tokenizer, cases)
    actual = _run_js(tmp_path, spec, cases)
    mismatches = []
    for case, want, got in zip(cases, expected, actual, strict=True):
        if want["empty"]:
            if "Type a sentence" not in got.get("error", ""):
                mismatches.append(f"{case!r}: expected the empty-text error, got {got}")
            continue
        if "error" in got:
            mismatches.append(f"{case!r}: JS threw {got['error']!r}; Python gives {want['tokens']}")
            continue
        if got["tokens"] != want["tokens"] or got["ids"] != want["ids"]:
            diverge = next((i for i, (a, b) in enumerate(zip(got["ids"], want["ids"], strict=False)) if a != b),
                           min(len(got["ids"]), len(want["ids"])))
            mismatches.append(f"{case!r}: at token {diverge} JS {got['tokens'][diverge:diverge + 6]} "
                              f"vs Python {want['tokens'][diverge:diverge + 6]} ({len(got['ids'])} vs "
                              f"{len(want['ids'])} tokens)")
        elif want["segments"] is not None and got["segments"] != want["segments"]:
            mismatches.append(f"{case!r}: token types JS {got['segments']} vs Python {want['segments']}")
        elif got["truncated"] != want["truncated"]:
            mismatches.append(f"{case!r}: truncated JS {got['truncated']} vs Python {want['truncated']}")
    assert not mismatches, f"{len(mismatches)} of {len(cases)} cases differ; the first:\n" + "\n".join(mismatches[:8])
    assert sum(not want["empty"] for want in expected) > len(cases) * 0.9  # the comparison compared something
    assert any(want["truncated"] for want in expected) and any(case[1] for case in cases)
    return len(cases)


# -- tokenizers ---------------------------------------------------------------------------------------------
def _minilm():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_model_dir())


def _bert_from_vocab(**options):
    """A BERT tokenizer over the embedded model's vocabulary with other normalizer settings (nothing downloaded)."""
    from transformers import BertTokenizer

    lines = (embedded_model_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    tokenizer = BertTokenizer(vocab={token: index for index, token in enumerate(lines)}, **options)
    assert len(tokenizer) == 30522  # (transformers 5 ignores a vocab_file argument: an empty vocabulary)
    return tokenizer


def _tiny(family: str):
    from tests.architectures import FAMILIES, family_tokenizer

    return family_tokenizer(FAMILIES[family])


@pytest.mark.slow  # a thousand strings through the fast tokenizer and Node
def test_minilm_uncased_matches_python(tmp_path):
    tokenizer = _minilm()
    assert tokenizer_spec(tokenizer)["normalizer"]["lowercase"] is True
    assert _compare(tokenizer, tmp_path, seed=1) >= 1000


@pytest.mark.slow
def test_cased_bert_matches_python(tmp_path):
    tokenizer = _bert_from_vocab(do_lower_case=False)
    normalizer = tokenizer_spec(tokenizer)["normalizer"]
    assert normalizer["lowercase"] is False and normalizer["strip_accents"] is None  # accents kept, as cased
    assert _compare(tokenizer, tmp_path, seed=2) >= 1000


@pytest.mark.slow
def test_lowercase_without_accent_stripping_matches_python(tmp_path):
    tokenizer = _bert_from_vocab(do_lower_case=True, strip_accents=False)
    normalizer = tokenizer_spec(tokenizer)["normalizer"]
    assert normalizer["lowercase"] is True and normalizer["strip_accents"] is False
    assert _compare(tokenizer, tmp_path, seed=3) >= 1000


@pytest.mark.slow
def test_distilbert_matches_python_and_takes_no_token_types(tmp_path):
    tokenizer = _tiny("distilbert")
    spec = tokenizer_spec(tokenizer)
    assert spec["token_type_ids"] is False and spec["model_max_length"] == 128
    assert _compare(tokenizer, tmp_path, seed=4) >= 1000


@pytest.mark.slow
def test_no_chinese_splitting_and_added_tokens_match_python(tmp_path):
    """handle_chinese_chars off, and added tokens the way a user adds them: stripping the spaces around them,
    whole words only, or matched in the normalized (lowercased) text."""
    from tokenizers import AddedToken

    tokenizer = _bert_from_vocab(do_lower_case=True, tokenize_chinese_chars=False)
    tokenizer.add_tokens([AddedToken("<ent>", lstrip=True, rstrip=True, normalized=False),
                          AddedToken("dog", single_word=True, normalized=False),
                          AddedToken("Straw", normalized=True), AddedToken("字符", normalized=False)])
    spec = tokenizer_spec(tokenizer)
    assert spec["normalizer"]["handle_chinese_chars"] is False and len(spec["added_tokens"]) == 9
    extra = ("<ent>", " <ent> ", "a<ent>b", "dog", "dogs", "hotdog", "dog's", "STRAW", "straw", "strawberries",
             "字符串")
    assert _compare(tokenizer, tmp_path, seed=5, extra=extra) >= 1000


@pytest.mark.slow  # classifies all 1.1 million code points in Python and in Node (about 15 seconds)
def test_every_code_point_is_classified_as_rust_does(tmp_path):
    """Control characters, whitespace, punctuation, CJK, accent stripping and lowercasing, one code point at a
    time. The Rust tables are Unicode 8; the JavaScript lists the code points where they differ from the engine's,
    and a new engine's Unicode would show up here as code points to add to those lists."""
    from tokenizers import normalizers, pre_tokenizers

    points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and cp != ord("0")]
    joined = "0" + "0".join(map(chr, points)) + "0"  # '0' survives every step, so it separates the results

    def each(**settings) -> list[str]:
        options = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
        results = normalizers.BertNormalizer(**{**options, **settings}).normalize_str(joined).split("0")[1:-1]
        assert len(results) == len(points)
        return results

    words = pre_tokenizers.BertPreTokenizer().pre_tokenize_str(joined)
    rust = {"points": points, "clean": each(clean_text=True), "chinese": each(handle_chinese_chars=True),
            "strip": each(strip_accents=True), "lower": each(lowercase=True),
            "punctuation": sorted(ord(word) for word, (start, end) in words if end - start == 1 and word != "0")}
    (tmp_path / "rust.json").write_text(json.dumps(rust), encoding="utf-8")
    checker = tmp_path / "check.js"
    checker.write_text("""
const api = require(process.argv[2]);
const rust = JSON.parse(require('fs').readFileSync(process.argv[3], 'utf8'));
const punctuation = new Set(rust.punctuation);
const only = (extra) => Object.assign({ clean_text: false, handle_chinese_chars: false, strip_accents: false,
  lowercase: false }, extra);
const differ = [];
rust.points.forEach((cp, i) => {
  const ch = String.fromCodePoint(cp);
  const hex = 'U+' + cp.toString(16).toUpperCase();
  const check = (what, js, want) => { if (js !== want) differ.push(`${hex} ${what}: JS ${JSON.stringify(js)}, ` +
    `Rust ${JSON.stringify(want)}`); };
  check('clean_text', api.normalize(ch, only({ clean_text: true })), rust.clean[i]);
  check('handle_chinese_chars', api.normalize(ch, only({ handle_chinese_chars: true })), rust.chinese[i]);
  check('strip_accents', api.normalize(ch, only({ strip_accents: true })), rust.strip[i]);
  check('lowercase', api.normalize(ch, only({ lowercase: true })), rust.lower[i]);
  check('punctuation', !api.isWhitespace(ch) && api.isPunctuation(ch, cp), punctuation.has(cp));
});
process.stdout.write(JSON.stringify(differ));
""", encoding="utf-8")
    result = subprocess.run([_node(), str(checker), str(SCRIPT), str(tmp_path / "rust.json")], capture_output=True,
                            text=True, encoding="utf-8", timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    differ = json.loads(result.stdout)
    assert not differ, f"{len(differ)} code points differ (live-tokenizer.js's lists need them):\n" + "\n".join(
        differ[:20])


# -- the spec, refusals, empty input ------------------------------------------------------------------------------
def test_spec_is_plain_json_with_the_tokenizers_settings():
    tokenizer = _minilm()
    spec = tokenizer_spec(tokenizer)
    assert json.loads(json.dumps(spec)) == spec
    assert len(spec["vocab"]) == 30522 and spec["vocab"][101] == "[CLS]" and spec["vocab"][7592] == "hello"
    assert spec["normalizer"] == {"clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
                                  "lowercase": True}
    assert spec["wordpiece"] == {"unk_token": "[UNK]", "continuing_subword_prefix": "##",
                                 "max_input_chars_per_word": 100}
    assert spec["special_tokens"]["cls"] == {"token": "[CLS]", "id": 101}
    assert spec["special_tokens"]["sep"] == {"token": "[SEP]", "id": 102}
    assert spec["special_tokens"]["unk"]["id"] == 100 and spec["special_tokens"]["pad"]["id"] == 0
    assert spec["model_max_length"] == 512 and spec["token_type_ids"] is True
    assert spec["pre_tokenizer"] == "BertPreTokenizer"
    assert _bert_from_vocab()  # a tokenizer that declares no length: the spec says null, not 10**30
    assert tokenizer_spec(_bert_from_vocab())["model_max_length"] is None


@pytest.mark.parametrize("family", ["roberta", "xlm-roberta", "mpnet"])
def test_other_tokenizers_are_refused_with_one_line(family):
    """Byte-level BPE, SentencePiece Unigram, and MPNet's WordPiece with RoBERTa's pair template."""
    with pytest.raises(ModelError) as caught:
        tokenizer_spec(_tiny(family))
    message = str(caught.value)
    assert message.startswith("views.live supports BERT-family models with a WordPiece tokenizer (BERT, MiniLM, "
                              "ELECTRA, DistilBERT); this model's tokenizer is ")
    assert "\n" not in message


def test_other_normalizers_and_slow_tokenizers_are_refused():
    from tokenizers import normalizers

    tokenizer = _bert_from_vocab()
    tokenizer.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.BertNormalizer()])
    with pytest.raises(ModelError, match="Sequence normalizer"):
        tokenizer_spec(tokenizer)
    tokenizer.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.BertNormalizer(lowercase=False)])
    assert tokenizer_spec(tokenizer)["normalizer"]["lowercase"] is False  # a Sequence of one BertNormalizer is one

    class Slow:  # what a pure Python tokenizer looks like from here: no backend_tokenizer
        model_input_names = ["input_ids"]

    with pytest.raises(ModelError, match="slow tokenizer"):
        tokenizer_spec(Slow())


@pytest.mark.slow  # one Node process
def test_empty_text_is_refused_in_a_sentence_for_the_reader(tmp_path):
    spec = tokenizer_spec(_minilm())
    results = _run_js(tmp_path, spec, [("", None, None), ("   ", None, None), ("\t\n\u3000", None, None),
                                       ("\u200b\ufeff", None, None), ("hello", " ", None), ("hello", "", None)])
    assert [r.get("error") for r in results[:3]] == ["Type a sentence: the text is empty."] * 3
    assert results[3]["error"].startswith("Type a sentence: the text has only invisible characters")
    assert results[4]["error"] == "Type a sentence: the second sentence is empty."
    assert results[5]["tokens"] == ["[CLS]", "hello", "[SEP]"]  # an empty pair means one sentence


# -- ids the weights may leave out ---------------------------------------------------------------------------------
HAND_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused1]", "hello", "Hello", "cafe", "café", "...",
              ".", "##", "##s", "##.", "中", "##中", "a.b", "a", "b", "HELLO"]


@pytest.mark.parametrize("lowercase", [True, False])
def test_unreachable_ids_are_what_normalization_changes_or_pre_tokenization_splits(lowercase):
    from transformers import BertTokenizer

    tokenizer = BertTokenizer(vocab={token: index for index, token in enumerate(HAND_VOCAB)}, do_lower_case=lowercase)
    unreachable = {HAND_VOCAB[index] for index in unreachable_ids(tokenizer)}
    changed_by_lowercasing = {"Hello", "café", "HELLO"}  # lower-casing; accents stripped with it
    assert unreachable == {"[unused1]", "...", "##", "a.b"} | (changed_by_lowercasing if lowercase else set())


@pytest.mark.slow  # seconds: every entry of the embedded vocabulary encoded as text; not in the fast tier
def test_the_embedded_tokenizer_never_emits_an_unreachable_id():
    """Over a thousand generated texts and every vocabulary entry typed as text, with spaces and run together
    (so continuation pieces come out), no id of `unreachable_ids` comes out of the tokenizer."""
    tokenizer = _minilm()
    unreachable = set(unreachable_ids(tokenizer))
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    assert len(unreachable) == 995 and {vocab[index] for index in unreachable} >= {"[unused0]", "[unused993]", "..."}
    texts = [text for text, _, _ in _cases(seed=5)]
    for first in range(0, len(vocab), 40):
        entries = [entry.removeprefix("##") for entry in vocab[first:first + 40]]
        texts += [" ".join(entries), "".join(entries), "x".join(entries)]
    emitted = {index for text in texts for index in tokenizer(text)["input_ids"]}
    assert len(emitted) > 25_000  # most of the vocabulary came out
    assert not emitted & unreachable
