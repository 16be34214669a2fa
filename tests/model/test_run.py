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
