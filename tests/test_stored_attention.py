"""A long input's attention kept in a file (issue 46, reportgen.runs.StoredAttention): read a layer, a head or a
block of rows at a time, it gives what the array gives; the cache stores and returns it without reading it whole;
and every analysis that reads it (encoder and decoder statistics, the views' encodings) gives the same numbers,
byte for byte, as on the array."""

from __future__ import annotations

import tempfile
import warnings

import numpy as np
import pytest

from reportgen.cache.store import Cache
from reportgen.config import ExampleSpec
from reportgen.runs import ExampleRun, StoredAttention


def stored(array: np.ndarray) -> StoredAttention:
    handle = tempfile.TemporaryFile()
    handle.write(b"padding!" + np.ascontiguousarray(array, dtype="<f4").tobytes())
    handle.flush()
    return StoredAttention(array.shape, handle, offset=8)


def rows_summing_to_one(shape, seed=0, causal=False) -> np.ndarray:
    weights = np.random.default_rng(seed).random(shape).astype(np.float32)
    if causal:
        weights = np.tril(weights)
    return (weights / weights.sum(-1, keepdims=True)).astype(np.float32)


ARRAY = rows_summing_to_one((3, 4, 7, 7))


@pytest.mark.parametrize("key", [1, -1, (2, 3), (0, 1, 4), (1, 2, slice(2, 5)), (Ellipsis, [1, 2], [0, 1]),
                                 (slice(None), slice(None), 0), slice(1, 3), (2, slice(None), 3, 4)])
def test_indexing_reads_what_the_array_gives(key):
    assert np.array_equal(stored(ARRAY)[key], ARRAY[key])


def test_layers_heads_maps_rows_and_the_whole():
    attention = stored(ARRAY)
    assert attention.shape == ARRAY.shape and attention.ndim == 4 and len(attention) == 3
    assert all(np.array_equal(a, b) for a, b in zip(attention, ARRAY, strict=True))
    assert np.array_equal(attention.maps(5, 9), ARRAY.reshape(12, 7, 7)[5:9])
    assert np.array_equal(attention.rows(10, 30), ARRAY.reshape(-1, 7)[10:30])
    assert np.array_equal(np.asarray(attention), ARRAY) and np.asarray(attention, dtype=np.float64).dtype == np.float64
    with pytest.raises(IndexError):
        attention[3]


def _run(attention, norms=None, text="a b c d e f g") -> ExampleRun:
    length = attention.shape[-1]
    special = np.zeros(length, dtype=bool)
    special[[0, -1]] = True
    words = np.where(special, -1, np.arange(length) // 2)
    return ExampleRun(ExampleSpec(text=text), [f"t{i}" for i in range(length)], words,
                      np.where(special, -1, 0), special, attention, False, {}, norms)


def test_the_cache_keeps_a_long_run_in_its_entry_and_reads_it_back_by_layer(tmp_path, monkeypatch):
    monkeypatch.setattr("reportgen.runs.SPOOL_BYTES", 0)
    cache, norms = Cache(tmp_path), np.random.default_rng(1).random((3, 4, 7)).astype(np.float32)
    cache.put_run("a" * 24, _run(stored(ARRAY), norms))
    back = cache.get_run("a" * 24, ExampleSpec(text="a b c d e f g"))
    assert isinstance(back.attention, StoredAttention) and back.attention.handle.name.endswith(".npz")
    assert np.array_equal(np.asarray(back.attention), ARRAY) and np.array_equal(back.value_norms, norms)
    monkeypatch.setattr("reportgen.runs.SPOOL_BYTES", 64 << 20)  # a short run is read in, as before
    small = cache.get_run("a" * 24, ExampleSpec(text="a b c d e f g"))
    assert isinstance(small.attention, np.ndarray) and np.array_equal(small.attention, ARRAY)


def test_a_damaged_long_entry_is_recomputed_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr("reportgen.runs.SPOOL_BYTES", 0)
    cache = Cache(tmp_path)
    cache.put_run("b" * 24, _run(stored(ARRAY)))
    entry = next((tmp_path / "runs").glob("*.npz"))
    data = bytearray(entry.read_bytes())
    data[-2000] ^= 0x40  # a weight deep in the attention
    entry.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get_run("b" * 24, ExampleSpec(text="x")) is None
    assert any("checksum mismatch" in str(w.message) for w in caught)


def test_encoder_statistics_and_similarity_are_the_same_on_a_stored_run():
    from reportgen.patterns.measures import ExampleWeights
    from reportgen.patterns.similarity import js_divergence_sums

    in_memory, in_file = _run(ARRAY), _run(stored(ARRAY))
    for word_level in (False, True):
        expected = ExampleWeights.of(in_memory, word_level).values(in_memory.attention)
        got = ExampleWeights.of(in_file, word_level).values(in_file.attention)
        assert np.array_equal(got, expected, equal_nan=True), word_level
    assert np.array_equal(js_divergence_sums(stored(ARRAY), max_block=100), js_divergence_sums(ARRAY, max_block=100))


def test_decoder_statistics_and_the_causal_check_are_the_same_on_a_stored_run(monkeypatch):
    from reportgen.patterns import decoder

    causal = rows_summing_to_one((3, 4, 9, 9), seed=2, causal=True)
    ids = [[5, 6, 7, 5, 6, 7, 8, 5, 6]]
    expected = decoder.decoder_head_statistics([causal], ids)
    monkeypatch.setattr(decoder, "ENTROPY_CELLS", 10)  # each head's entropy taken alone
    got = decoder.decoder_head_statistics([stored(causal)], ids)
    assert set(got) == set(expected) == {"previous_token", "sink", "duplicate_token", "causal_entropy"}
    assert all(np.allclose(got[name]["score"], expected[name]["score"], rtol=1e-12, atol=0) for name in got)
    broken = causal.copy()
    broken[2, 1, 3, 6] = 0.2
    for attention in (broken, stored(broken)):
        with pytest.raises(ValueError, match=r"on key 6 from query 3 \(layer 2, head 1\)"):
            decoder.check_causal(attention)


def test_the_views_encode_a_stored_run_byte_for_byte():
    from reportgen.site.attention_encoding import encode_attention, encode_contributions

    norms = np.random.default_rng(3).random((3, 4, 7)).astype(np.float32)
    assert encode_attention(stored(ARRAY)) == encode_attention(ARRAY)
    assert encode_contributions(stored(ARRAY), norms) == encode_contributions(ARRAY, norms)
    long_rows = rows_summing_to_one((1, 2, 300, 300), seed=4)  # coded coarsely and deflated
    assert encode_attention(stored(long_rows)) == encode_attention(long_rows)


def test_a_long_capture_goes_to_the_builds_folder_and_a_folder_it_cannot_use_is_one_line(tmp_path, monkeypatch):
    import os

    from reportgen.errors import OutputError
    from reportgen.model.attention_capture import LayerAttention, spooling_to

    monkeypatch.setattr("reportgen.runs.SPOOL_BYTES", 0)
    with spooling_to(tmp_path / "cache" / "runs"):
        capture = LayerAttention(2, 3, 5)
    assert isinstance(capture.attention, StoredAttention)
    opened = os.readlink(f"/proc/self/fd/{capture.attention.handle.fileno()}")
    assert opened.startswith(str(tmp_path / "cache" / "runs"))
    (tmp_path / "a-file").write_text("not a folder")
    with spooling_to(tmp_path / "a-file" / "runs"), pytest.raises(OutputError) as refused:
        LayerAttention(2, 3, 5)
    message = str(refused.value)
    assert message.startswith(f"a long input's attention cannot be written to {tmp_path / 'a-file' / 'runs'} (")
    assert "cache_dir" in message and "\n" not in message
    monkeypatch.setattr("reportgen.runs.SPOOL_BYTES", 64 << 20)
    assert isinstance(LayerAttention(2, 3, 5).attention, np.ndarray)  # a short input's stays in memory
