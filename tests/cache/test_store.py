"""Cache entries written straight into their file (Cache.write_with, issue 46): a model run's attention is
stored without a copy of it in memory, in the same format as before (a sha256 line, then the payload), and a
write that fails leaves neither a temp file nor an entry."""

from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np
import pytest

from reportgen.cache.store import Cache
from reportgen.config import ExampleSpec
from reportgen.runs import ExampleRun

KEY = "0123456789abcdef0123456789abcdef"


def long_run(tokens: int = 1024) -> ExampleRun:
    rng = np.random.default_rng(0)
    attention = rng.random((4, 4, tokens, tokens)).astype(np.float32)
    words = np.arange(tokens)
    return ExampleRun(ExampleSpec(text="x"), [f"t{i}" for i in words], words, np.zeros(tokens, dtype=np.int64),
                      np.zeros(tokens, dtype=bool), attention, False,
                      value_norms=rng.random((4, 4, tokens)).astype(np.float32))


def test_a_streamed_entry_is_its_payload_after_the_payloads_sha256(tmp_path):
    cache = Cache(tmp_path)
    written = tmp_path / "entry.bin"
    cache.write_with(written, lambda handle: (handle.write(b"first "), handle.write(b"second")))
    digest, payload = written.read_bytes().split(b"\n", 1)
    assert payload == b"first second" and digest == hashlib.sha256(payload).hexdigest().encode()
    assert cache.read_bytes(written) == b"first second"
    cache.write_bytes(tmp_path / "same.bin", b"first second")
    assert (tmp_path / "same.bin").read_bytes() == written.read_bytes()


@pytest.mark.slow  # 64 MB written, read back and loaded: about a second
def test_a_run_is_stored_without_a_copy_of_its_attention_and_reads_back_equal(tmp_path):
    cache, run = Cache(tmp_path), long_run()
    tracemalloc.start()
    cache.put_run(KEY, run)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # numpy writes an array into a zip member in chunks of 16 MiB; the attention is 64 MB, and the write before
    # this held three copies of it (the .npz in a BytesIO, its getvalue, the digest line joined to it)
    assert peak < 20e6 < run.attention.nbytes / 3, peak
    back = cache.get_run(KEY, run.spec)
    assert np.array_equal(back.attention, run.attention) and np.array_equal(back.value_norms, run.value_norms)
    assert back.tokens == run.tokens


def test_a_write_that_fails_leaves_no_entry_and_no_temp_file(tmp_path):
    cache = Cache(tmp_path)

    def half_then_fail(handle):
        handle.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception, match="No space left on device"):
        cache.write_with(tmp_path / "runs" / "entry.npz", half_then_fail)
    assert [path.name for path in tmp_path.rglob("*") if path.is_file()] == []
