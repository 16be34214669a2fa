"""Contributions (Kobayashi et al. 2020): ||A[i, j] f(x_j)|| from the model's own value and output projections."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reportgen.model.head_sites import locate
from reportgen.model.value_norms import head_outputs, value_norms
from reportgen.runs import shares
from tests.helpers import BUILDERS


def _eager(family: str):
    torch.manual_seed(0)
    model = BUILDERS[family]()
    model.set_attn_implementation("eager")
    return model.eval()


@pytest.mark.parametrize("family", sorted(BUILDERS))
@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_head_outputs_rebuild_the_attention_output(family):
    """sum over heads and keys of A[h, i, j] f_h(x_j), plus the output bias, is what the output
    projection returns: so f is the right per-head vector and ||A f|| is what the head passes on."""
    model = _eager(family)
    sites = locate(model)
    values, outputs = [], []
    hooks = [module.register_forward_hook(lambda _m, _a, out: values.append(out[0].detach().numpy()))
             for module in {id(m): m for m in sites.value_proj}.values()]
    hooks += [module.register_forward_hook(lambda _m, _a, out: outputs.append(out[0].detach().numpy()))
              for module in {id(m): m for m in sites.out_proj}.values()]
    ids = torch.randint(5, 99, (1, 7), generator=torch.Generator().manual_seed(1))
    with value_norms(model) as capture, torch.no_grad():
        attention = model(input_ids=ids, output_attentions=True).attentions
    for hook in hooks:
        hook.remove()
    assert capture.norms.shape == (sites.n_layers, sites.heads, 7)
    for depth in range(sites.n_layers):
        weight = sites.out_proj[depth].weight.detach().numpy()
        per_head = head_outputs(values[depth], weight, sites.heads)  # [H, T, hidden]
        weights = attention[depth][0].numpy()  # [H, T, T]
        rebuilt = np.einsum("hij,hjo->io", weights, per_head) + sites.out_proj[depth].bias.detach().numpy()
        np.testing.assert_allclose(rebuilt, outputs[depth], atol=2e-5)
        np.testing.assert_allclose(capture.norms[depth], np.linalg.norm(per_head, axis=-1), rtol=1e-5)


def test_shares_are_distributions_and_weigh_by_norm():
    rng = np.random.default_rng(0)
    attention = rng.dirichlet(np.ones(5), size=(2, 3, 5)).astype(np.float32)
    norms = rng.uniform(0.1, 3, size=(2, 3, 5)).astype(np.float32)
    norms[0, 0, 0] = 0.0  # a key whose value vanishes passes nothing on
    out, totals = shares(attention, norms)
    np.testing.assert_allclose(out.sum(-1), 1, atol=1e-6)
    assert (out[0, 0, :, 0] == 0).all()
    np.testing.assert_allclose(totals, (attention * norms[..., None, :]).sum(-1), rtol=1e-6)
    # a key with twice the norm gets twice the share for the same weight
    ratio = out[1, 2, :, 1] / out[1, 2, :, 3]
    np.testing.assert_allclose(ratio, attention[1, 2, :, 1] * norms[1, 2, 1] / (attention[1, 2, :, 3] * norms[1, 2, 3]),
                               rtol=1e-5)


def test_a_row_with_no_contribution_keeps_its_weights():
    attention = np.array([[[[0.5, 0.5], [0.2, 0.8]]]], dtype=np.float32)
    out, totals = shares(attention, np.zeros((1, 1, 2), dtype=np.float32))
    np.testing.assert_array_equal(out, attention)
    np.testing.assert_array_equal(totals, 0)
