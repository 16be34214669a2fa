"""Cache entries written straight into their file (Cache.write_with, issue 46): a model run's attention is
stored without a copy of it in memory, in the same format as before (a sha256 line, then the payload), and a
write that fails leaves neither a temp file nor an entry."""

from __future__ import annotations

import hashlib
import io
import tracemalloc
import zipfile

import numpy as np
import pytest

from reportgen.cache.store import TAG, Cache, claim
from reportgen.config import ExampleSpec
from reportgen.errors import OutputError
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


def test_a_cache_dir_holding_what_reportgen_did_not_write_is_refused_and_left_as_it_was(tmp_path):
    """Issue 48: `cache_dir: "~"` wrote entries among the home folder's files, and sweeping or pruning there walked
    every one of them. Such a folder is refused in one line, and nothing is written into it."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("export A=1\n")
    (home / "Documents").mkdir()
    with pytest.raises(OutputError, match=r"cache_dir .*/home holds files reportgen did not write \(\.bashrc, "
                                          r"Documents\); give the cache a folder of its own") as refused:
        claim(home)
    assert refused.value.exit_code == 5
    assert sorted(path.name for path in home.iterdir()) == [".bashrc", "Documents"]
    with pytest.raises(OutputError, match="holds files reportgen did not write"):
        claim(home, tag_it=False)  # what `cache prune` asks: refused too, and still nothing written


def test_reportgens_own_folder_is_tagged_as_its_cache_and_stays_so(tmp_path):
    cache = tmp_path / "cache"
    (cache / "runs").mkdir(parents=True)  # a cache made before the tag: only reportgen's own folders
    claim(cache)
    assert (cache / TAG).read_text(encoding="utf-8").startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    (cache / "notes.txt").write_text("mine")  # put there later: the folder is still the cache the tag says it is
    claim(cache)
    claim(tmp_path / "not-yet")  # nothing there yet: the cache's first write makes it
    assert not (tmp_path / "not-yet").exists()


def test_another_tools_cache_tag_does_not_make_a_folder_reportgens(tmp_path):
    other = tmp_path / "other"
    (other / "runs").mkdir(parents=True)
    (other / TAG).write_text("Signature: 8a477f597d28d172789f06886806bc55\n# made by another tool\n", encoding="utf-8")
    with pytest.raises(OutputError, match=r"did not write \(CACHEDIR.TAG\)"):
        claim(other)


def _npy(shape: tuple[int, ...], data: bytes) -> bytes:
    """An .npy file whose header claims `shape` (float32) over `data`, whatever its length."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buffer.getvalue() + data


def test_an_array_entry_whose_header_claims_more_than_it_holds_is_damaged_not_allocated(tmp_path):
    """Issue 48: sizes read back from a file are checked before anything is made from them. An entry's sha256 is
    right (anyone can write one); its header claims 4 TB: refused from the header, with the usual warning."""
    cache, path = Cache(tmp_path), tmp_path / "ablation" / "mask-0123.npy"
    cache.write_bytes(path, _npy((10**12,), np.ones(3, dtype="<f4").tobytes()))
    with pytest.warns(UserWarning, match="not a numpy array"):
        assert cache.get_array(path) is None
    cache.put_array(path, np.arange(3, dtype=np.float32))  # what reportgen writes reads back
    assert cache.get_array(path).tolist() == [0, 1, 2]


def _rewritten(entry: bytes, member: str | None = None, header: tuple[int, ...] | None = None,
               deflate: bool = False) -> bytes:
    """A stored run's payload with every member deflated, or `member`'s header claiming `header`."""
    source, target = zipfile.ZipFile(io.BytesIO(entry)), io.BytesIO()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == member:
                start = io.BytesIO(data)
                np.lib.format.read_magic(start)
                np.lib.format.read_array_header_1_0(start)
                data = _npy(header, data[start.tell():])
            out.writestr(info.filename, data)
    return target.getvalue()


@pytest.mark.parametrize("change", [{"deflate": True}, {"member": "attention.npy", "header": (4, 4, 10**6, 10**6)},
                                    {"member": "word_ids.npy", "header": (10**13,)}],
                         ids=["deflated", "attention-claims-4e12", "word-ids-claims-1e13"])
def test_a_run_entry_claiming_more_than_it_holds_is_damaged_and_run_again(tmp_path, change):
    cache, run = Cache(tmp_path), long_run(tokens=8)
    cache.put_run(KEY, run)
    path = next((tmp_path / "runs").rglob("*.npz"))
    cache.write_bytes(path, _rewritten(cache.read_bytes(path), **change))
    with pytest.warns(UserWarning, match="not a stored run: member"):
        assert cache.get_run(KEY, run.spec) is None
