"""A batch of patched or attributed rows holds at most heads.BATCH_BYTES of attention and logits, however long the
prompt (heads.rows_within): a fixed 32 rows held 10.5 GB for 8 pairs of 1,024 tokens on GPT-2-small's shape."""

from __future__ import annotations

import pytest
from torch import nn

from reportgen.model.head_sites import HeadSites
from reportgen.patching.heads import BATCH_BYTES, CELL_BYTES, rows_within
from reportgen.patching.pairs import PromptPair

GPT2_VOCAB = 50_257


def _sites(layers: int = 12, heads: int = 12) -> HeadSites:
    module = nn.Identity()
    return HeadSites(layers=[nn.Identity() for _ in range(layers)], out_proj=[module] * layers,
                     value_proj=[module] * layers, encoder=module, heads=heads, head_dim=64)


def _pair(tokens: int, decoder: int | None = None, last: bool = True) -> PromptPair:
    ids = tuple(range(tokens))
    target = tuple(range(decoder)) if decoder else None
    position = (len(target or ids) - 1) if last else 1
    return PromptPair(ids, ids, 1, 2, position, target)


def test_short_prompts_fill_the_batch_and_long_ones_take_fewer_rows():
    sites = _sites()
    assert rows_within(sites, _pair(20), GPT2_VOCAB, 32) == 32
    assert rows_within(sites, _pair(20), GPT2_VOCAB, 32, backward=True) == 32
    assert rows_within(sites, _pair(1024), GPT2_VOCAB, 32, backward=True) == 1  # all 144 heads' attention kept
    forward = rows_within(sites, _pair(1024), GPT2_VOCAB, 32)
    assert 1 < forward < 32  # one layer's attention at a time


@pytest.mark.parametrize("tokens", [16, 64, 256, 512, 1024, 4096])
@pytest.mark.parametrize("backward", [False, True])
def test_a_batch_stays_within_its_bytes_unless_one_row_is_more(tokens, backward):
    sites = _sites()
    rows = rows_within(sites, _pair(tokens, last=False), 30_522, 32, backward)
    layers = sites.n_layers if backward else 1
    per_row = CELL_BYTES * layers * sites.heads * tokens ** 2 + 4 * 30_522 * tokens * (2 if backward else 1)
    assert rows == 1 or rows * per_row <= BATCH_BYTES
    assert rows == 32 or (rows + 1) * per_row > BATCH_BYTES  # no smaller than it needs to be


def test_an_encoder_decoders_rows_count_its_longer_stream():
    sites = _sites(layers=6, heads=8)
    assert rows_within(sites, _pair(8, decoder=900), 1000, 32) == rows_within(sites, _pair(900), 1000, 32)
