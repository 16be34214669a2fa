"""What one model run over one example gives: plain numpy data, no torch.

For each example we keep the tokens, which word and which segment each token belongs to, and
attention as [layers, heads, tokens, tokens] (A[l, h, q, k] = weight that query q puts on key k;
rows sum to 1), with the value norms that turn attention into contributions. The model stage
(`reportgen.model.run`) makes these records, the cache stores them, and the analyses and the
views' payloads read them; the arithmetic from weights to contributions lives here, beside the
data it needs (Kobayashi, Kuribayashi, Yokoi and Inui 2020: ||A[i, j] f(x_j)|| = A[i, j] ||f(x_j)||).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from reportgen.config import ExampleSpec

# -- attention kept in a file ------------------------------------------------------------------------------------
# A model run's attention [layers, heads, T, T] kept in a file and read a layer (or a head) at a time.
#
# Why: at 4,096 tokens a Llama-shaped model's attention is 8 x 8 x 4,096^2 float32, 4.3 GB, and a build with a
# few examples of 1,024 tokens on GPT-2-small's 12 x 12 heads held 600 MB for each (issue 46). The model stage
# writes each layer to a file as the model computes it (reportgen.model.attention_capture) and the cache keeps the
# run's entry (reportgen.cache.store), so a run need not hold its attention at all: `StoredAttention` reads it
# from that file when an analysis asks for a layer, and the analyses take it a layer at a time. Memory is then
# bounded by one layer, not by the model or the number of examples.
#
# It answers what the analyses ask of a [L, H, T, T] array: `shape`, `ndim`, `dtype`, `len`, iteration over
# layers, and indexing whose first index is a layer (`a[3]`, `a[3, 5]`, `a[3, 5, 10:20]`) or any index applied
# to every layer (`a[..., q, k]`, `a[:, :, 0]`), which reads one layer at a time. `np.asarray` reads it whole,
# for small inputs and tests.
SPOOL_BYTES = 64 << 20  # attention larger than this is kept in a file (GPT-2-small's 12 x 12 heads past 340 tokens)
ATTENTION_DTYPE = np.dtype("<f4")


def kept_in_file(nbytes: int) -> bool:
    """Whether attention of `nbytes` is kept in a file (StoredAttention) rather than in memory."""
    return nbytes > SPOOL_BYTES


class StoredAttention:
    """float32 [L, H, T, T] (or [L, H, T, S]) stored C-contiguous at `offset` bytes into the open file `handle`: an
    unnamed temp file (gone when it is closed) or a cache entry (the file that was checked, whatever replaces it
    under its name meanwhile)."""

    def __init__(self, shape: tuple[int, ...], handle: BinaryIO, offset: int = 0) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.handle, self.offset = handle, int(offset)

    dtype = ATTENTION_DTYPE
    ndim = property(lambda self: len(self.shape))

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"StoredAttention({self.shape}, {getattr(self.handle, 'name', 'a temp file')})"

    def layer(self, index: int) -> np.ndarray:
        """Layer `index` [H, T, T], read from the file."""
        return self._read(index * int(np.prod(self.shape[1:])), self.shape[1:])

    def head(self, layer: int, head: int) -> np.ndarray:
        """One head [T, T] of one layer, read from the file."""
        return self._read((layer * self.shape[1] + head) * int(np.prod(self.shape[2:])), self.shape[2:])

    def maps(self, start: int, stop: int) -> np.ndarray:
        """Heads start..stop-1 of all the model's, counted layer after layer, as [stop - start, T, T]: what
        `reshape(L * H, T, T)[start:stop]` gives an array."""
        return self._read(start * int(np.prod(self.shape[2:])), (max(0, stop - start), *self.shape[2:]))

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1 of all the model's, counted head after head, as [stop - start, T]: what
        `reshape(-1, T)[start:stop]` gives an array."""
        return self._read(start * self.shape[-1], (max(0, stop - start), self.shape[-1]))

    def _read(self, element: int, shape: tuple[int, ...]) -> np.ndarray:
        """The weights from the `element`-th on (counted through the whole [L, H, T, T]), as `shape`."""
        out = np.empty(shape, dtype=ATTENTION_DTYPE)
        self._read_bytes(memoryview(out.reshape(-1)).cast("B"), self.offset + element * ATTENTION_DTYPE.itemsize)
        return out

    def _read_bytes(self, view: memoryview, start: int) -> None:
        done = 0
        while done < len(view):
            got = os.preadv(self.handle.fileno(), [view[done:]], start + done)
            if got <= 0:
                raise OSError(f"attention file ends {len(view) - done} bytes early")
            done += got

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self.layer(index) for index in range(len(self)))

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        first, rest = key[0], key[1:]
        if isinstance(first, (int, np.integer)):
            index = int(first) + (len(self) if first < 0 else 0)
            if not 0 <= index < len(self):
                raise IndexError(f"layer {first} of {len(self)}")
            if rest and isinstance(rest[0], (int, np.integer)) and 0 <= rest[0] < self.shape[1]:
                return self.head(index, int(rest[0]))[rest[1:]]
            return self.layer(index)[rest]
        if first is Ellipsis:  # the rest indexes the last axes of every layer
            return np.stack([layer[key] for layer in self])
        if isinstance(first, slice):
            return np.stack([self.layer(index)[rest] for index in range(*first.indices(len(self)))])
        raise TypeError(f"StoredAttention takes a layer, a slice of layers or ... first, not {first!r}")

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self._read(0, self.shape)
        return whole if dtype is None else whole.astype(dtype)

    def astype(self, dtype) -> np.ndarray:
        return np.asarray(self, dtype=dtype)

    def close(self) -> None:
        """Closes the file this reads from (a temp file's space is then freed)."""
        self.handle.close()

    __del__ = close  # the file is closed with the last reference to it, without a ResourceWarning


@dataclass
class ExampleRun:
    """One example after the model run; everything an analysis or a page needs."""

    spec: ExampleSpec
    tokens: list[str]
    word_ids: np.ndarray  # [T] int, a word index unique across segments; -1 for special tokens
    segment_ids: np.ndarray  # [T] int, 0 = sentence A, 1 = sentence B, -1 = special token
    special: np.ndarray  # [T] bool, [CLS]/[SEP]/<s>/</s>...
    attention: np.ndarray | StoredAttention  # [L, H, T, T] float32, in memory or in a file (StoredAttention)
    truncated: bool = False
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # e.g. queries/keys for the q/k view
    # [L, H, T] float32: ||f(x_j)||, what each key token's value becomes through each head
    # (reportgen.model.value_norms); None for attention that did not come from a model run
    value_norms: np.ndarray | None = None
    # An encoder-decoder's whole (source, target) run; the fields above then hold its encoder's side (the
    # source's tokens and the encoder's self-attention), which the encoder atlas reads. None for other models.
    seq2seq: Seq2SeqRun | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


def shares(attention: np.ndarray, norms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per-row shares of the contribution, rows summing to 1; per-row totals sum_j ||A[i, j] f(x_j)||) for
    attention [..., T, T] and norms [..., T].

    A row whose contributions are all zero (no weight on any key with a nonzero f) keeps its
    attention weights as shares, so every row of `shares` is a distribution the pattern
    statistics can read. A whole model's [L, H, T, T] is taken a layer at a time: its float64
    temporaries are a layer's, not five copies of the model's attention (4.8 GB at 1,024 tokens on 12 x 12 heads)."""
    if attention.ndim == 4:
        out = np.empty(attention.shape, dtype=np.float32)
        totals = np.empty(attention.shape[:-1], dtype=np.float32)
        for layer in range(attention.shape[0]):
            out[layer], totals[layer] = shares(attention[layer], norms[layer])
        return out, totals
    return row_shares(attention, norms[..., None, :])


def row_shares(rows: np.ndarray, norms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`shares` of attention rows [..., K] whose keys' value norms are `norms` (broadcast to the rows): any
    rows at all, so that a caller can take a model's rows a block at a time. The contributions are
    ||A[i, j] f(x_j)|| (Kobayashi et al. 2020), in float32 as the views decode them."""
    amounts = (rows * norms).astype(np.float32).astype(np.float64)
    totals = amounts.sum(axis=-1)
    safe = np.where(totals > 0, totals, 1.0)[..., None]
    out = np.where(totals[..., None] > 0, amounts / safe, rows)
    return out.astype(np.float32), totals.astype(np.float32)


@dataclass
class Seq2SeqRun:
    """One (source, target) pair through the model; arrays are numpy, heads H, layers per stack."""

    source: str
    target: str
    source_tokens: list[str]  # S tokens the encoder read
    target_tokens: list[str]  # T tokens the decoder read: the start token, then the target shifted right
    label_tokens: list[str]  # T tokens the decoder predicts, one per decoder position
    encoder_attention: np.ndarray  # [L_enc, H, S, S]
    decoder_attention: np.ndarray  # [L_dec, H, T, T], nothing above the diagonal
    cross_attention: np.ndarray  # [L_dec, H, T, S]
    value_norms: dict[str, np.ndarray] | None  # "encoder" [L_enc, H, S], "decoder" [L_dec, H, T], "cross" [L_dec, H, S]
    source_truncated: bool
    target_truncated: bool
    target_special: np.ndarray | None = None  # [T] bool: the decoder inputs that are special tokens


# -- the induction test's input (Olsson et al. 2022; scored by reportgen.patterns.decoder.induction) --------------
MIN_INDUCTION_N = 3  # n = 2 puts the induction key q - n + 1 on q - 1 (previous token), n = 1 on q itself

def induction_tokens(vocab_size: int, n: int, batch: int, seed: int, exclude: Iterable[int] = ()) -> np.ndarray:
    """[batch, n] int64: the random tokens r of the induction test, drawn with replacement.

    Uniform over range(vocab_size) minus the special ids in `exclude` (BOS, EOS, PAD...; ids outside
    the vocabulary are ignored), so a copy cannot contain a token the model treats specially. Uses
    numpy's Generator (PCG64) seeded with `seed`: the same seed gives the same tokens.
    """
    if vocab_size < 1 or batch < 1:
        raise ValueError(f"vocab_size and batch must be at least 1, not {vocab_size} and {batch}")
    if n < MIN_INDUCTION_N:
        raise ValueError(f"induction needs n >= {MIN_INDUCTION_N}, not n = {n}")
    allowed = np.setdiff1d(np.arange(vocab_size, dtype=np.int64), np.asarray(list(exclude), dtype=np.int64))
    if allowed.size == 0:
        raise ValueError(f"every id of the vocabulary of {vocab_size} is excluded: no token left to draw")
    rng = np.random.default_rng(seed)
    return allowed[rng.integers(0, allowed.size, size=(batch, n))]


def induction_input(r: np.ndarray, bos_id: int) -> np.ndarray:
    """[BOS] + r + r along the last axis: [batch, n] -> [batch, 2n + 1] ids ([n] -> [2n + 1]).

    BOS at position 0, the first copy at 1..n, the second at n+1..2n: the layout `induction` reads.
    """
    r = np.asarray(r)
    if r.ndim not in (1, 2) or r.shape[-1] < 1:
        raise ValueError(f"r must be [n] or [batch, n], not {r.shape}")
    bos = np.full(r.shape[:-1] + (1,), bos_id, dtype=r.dtype)
    return np.concatenate([bos, r, r], axis=-1)


@dataclass
class LiveModel:
    """The model as a reader's browser runs it on the "Your sentence" page (config `views.live`): plain data
    the live stage exports (reportgen.live.weights, reportgen.live.tokenizer) and the site writes
    beside the page as script files."""

    spec: dict  # the architecture and the table of tensors in `weights` (name, shape, encoding, offset, length)
    weights: bytes  # the tensors, quantised and concatenated, little-endian
    tokenizer: dict  # the WordPiece tokenizer's vocabulary and settings
    max_tokens: int  # the longest input the page runs: the build's max_length (clamped to the model's positions)
    weights_format: str = "compact"  # config `views.live_weights`: compact | float16
