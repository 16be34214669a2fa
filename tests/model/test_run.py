import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.model import loading
from reportgen.model.run import run_example

PAIR = ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries.")


@pytest.fixture(scope="module")
def embedded(embedded_model_path):
    return loading.load(embedded_model_path, "cpu")


@pytest.mark.slow
def test_embedded_model_shapes_rows_and_word_ids(embedded):
    run = run_example(*embedded, PAIR, 512)
    assert run.tokens[:3] == ["[CLS]", "i", "went"] and run.n_tokens == 19  # REFERENCE.md: 19 tokens
    assert run.attention.shape == (6, 12, 19, 19) and run.attention.dtype == np.float32
    assert np.abs(run.attention.sum(-1) - 1).max() < 1e-5
    assert run.segment_ids.tolist() == [-1] + [0] * 6 + [-1] + [1] * 10 + [-1]
    straw, berries = run.tokens.index("straw"), run.tokens.index("##berries")
    assert run.word_ids[straw] == run.word_ids[berries] != -1
    words = run.word_ids[run.word_ids >= 0]
    assert len(set(words.tolist())) == 15  # 6 words in A, 9 in B, unique across the pair
    assert run.special.tolist() == [t in ("[CLS]", "[SEP]") for t in run.tokens]


@pytest.mark.slow
def test_known_positional_heads_of_the_embedded_model(embedded):
    # REFERENCE.md: layer 0 head 2 ~0.99 on the previous token, layer 1 head 8 ~0.65 on the next.
    att = run_example(*embedded, PAIR, 512).attention
    length = att.shape[-1]
    previous = att[0, 2][np.arange(1, length), np.arange(length - 1)].sum() / length
    following = att[1, 8][np.arange(length - 1), np.arange(1, length)].sum() / length
    assert previous > 0.9 and following > 0.5


def test_tiny_model_and_truncation(tiny_model):
    net, tokenizer = loading.load(tiny_model, "cpu")
    run = run_example(net, tokenizer, ExampleSpec(text="the cat sat on the mat . " * 4), 8)
    assert run.truncated and run.n_tokens == 8
    assert run.attention.shape == (2, 4, 8, 8)
    assert np.abs(run.attention.sum(-1) - 1).max() < 1e-5


def test_model_errors_are_one_line(tmp_path):
    with pytest.raises(loading.ModelError, match="does not exist"):
        loading.resolve(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(loading.ModelError, match="no config.json"):
        loading.resolve(str(tmp_path / "empty"))


def test_hub_id_offline_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(loading.ModelError, match="offline"):
        loading.resolve("someone/some-model-that-is-not-cached")


def test_clip_keeps_every_token_a_text_can_keep():
    """`clip` cuts a text before the tokenizer sees it; it keeps max_length + 1 words (so a cut text is still
    seen as truncated) and at most 100 characters per token."""
    from reportgen.model.run import CHARS_PER_TOKEN, clip

    assert clip("a b c", 2) == ("a b c", False)
    assert clip("a b c d e", 2) == ("a b c", True)
    text, cut = clip("word " * 50_000, 128)
    assert cut and len(text.split()) == 129
    text, cut = clip("x" * 10**6, 8)  # one long "word" (a CJK run, a URL): cut by characters
    assert cut and len(text) == CHARS_PER_TOKEN * 9
    assert clip("日本語のテキスト", 128) == ("日本語のテキスト", False)


def test_a_clipped_example_is_tokenized_as_the_whole_one(tiny_model):
    """What the model sees is the same whether the text was cut first or not, and both are truncated."""
    from reportgen.model.run import encode

    model, tokenizer = loading.load(tiny_model, "cpu")
    long_text = " ".join(["the cat sat on the mat"] * 40)
    spec = ExampleSpec(text=long_text, pair=long_text)
    inputs, tokens, *_, truncated = encode(tokenizer, spec, 32)
    whole = tokenizer(long_text, long_text, truncation=True, max_length=32)["input_ids"]
    assert inputs["input_ids"][0].tolist() == whole and len(tokens) == 32 and truncated


# The build's own peak memory. A child's ru_maxrss starts from its parent's high-water mark when it execs (Linux
# keeps the larger of the old and new address space's), so a build started by a pytest worker that already
# holds 2 GB reports 2 GB. This small launcher starts the build and reads its peak with wait4.
_PEAK = ("import os, subprocess, sys\n"
         "build = subprocess.Popen(sys.argv[2:])\n"
         "_, status, usage = os.wait4(build.pid, 0)\n"
         "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
         "sys.exit(os.waitstatus_to_exitcode(status))\n")


@pytest.mark.slow
def test_a_pair_of_20000_words_each_builds_in_bounded_memory(tmp_path, tiny_model):
    """Issue 27: such a pair ran for minutes and took 19.8 GB before it was killed (the tokenizer's pair
    truncation keeps every overflowing window). Now the build ends with a truncation warning, and the
    process's peak memory stays under 2 GB. The timeout only stops a hang; the time is not the test."""
    import os
    import signal
    import subprocess
    import sys

    words = " ".join(["the cat sat on the mat and the dog"] * 2_000)  # 20,000 words
    (tmp_path / "reportgen.yaml").write_text(
        f"model: {tiny_model}\ndevice: cpu\nexamples:\n  - text: {words}\n    pair: {words}\n"
        "ablation: {enabled: false}\npatterns: {similarity: false}\n", encoding="utf-8")
    with open(tmp_path / "stderr.txt", "w", encoding="utf-8") as stderr:
        build = subprocess.Popen([sys.executable, "-c", _PEAK, str(tmp_path / "peak.txt"), sys.executable, "-m",
                                  "reportgen", "build"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr,
                                 start_new_session=True)
        try:
            build.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(build.pid, signal.SIGKILL)
            raise
    peak = int((tmp_path / "peak.txt").read_text()) * 1024  # bytes (Linux reports KiB)
    errors = (tmp_path / "stderr.txt").read_text(encoding="utf-8")
    assert build.returncode == 0, errors[-2000:]
    assert "warning: example 1 was truncated to 128 tokens (config field 'max_length')" in errors
    assert peak < 2 * 1024**3, f"peak {peak / 1024**3:.2f} GB"
