"""The model side of decoders (issue 31, in progress): GPT-2 and the Llama family (Llama, Qwen2, Mistral,
Gemma; grouped-query attention and rotary positions) on tiny random models.

reportgen does not accept decoders yet (the up-front model check refuses them with exit 3 until the
patterns, tasks and pages for them exist); these tests pin what is built so far, against references
that do not use reportgen's hooks:
- the captured queries and keys (rotary applied, shared key/value heads repeated) with the captured
  mask (causal; Mistral's sliding window) reproduce the model's own attention weights;
- masking a head equals zeroing its columns of the output projection (GPT-2's Conv1D stores them
  as rows); uniform masking equals zeroing the head's query weights, so every visible key scores 0
  and the head spreads 1/(i+1) over keys 0..i (Kovaleva et al. 2019's uniform head, made causal);
- value norms ||f(x_j)|| equal the value vectors (each query head reading its key/value head)
  times the head's slice of the output projection, computed here by hand.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from reportgen.model.head_sites import locate, projection_weight  # noqa: E402
from reportgen.model.masking import masked  # noqa: E402
from reportgen.model.qk import attention_from_qk, capture_qk  # noqa: E402
from reportgen.model.value_norms import value_norms  # noqa: E402

pytestmark = pytest.mark.slow

SHAPE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
             initializer_range=0.3, max_position_embeddings=64)


def _gpt2():
    from transformers import GPT2Config, GPT2Model

    return GPT2Model(GPT2Config(vocab_size=99, n_embd=32, n_layer=3, n_head=4, n_positions=64, initializer_range=0.3))


def _llama_family(name: str, **extra):
    import transformers

    config = getattr(transformers, f"{name}Config")(**SHAPE, **extra)
    return getattr(transformers, f"{name}Model")(config)


DECODERS = {
    "gpt2": _gpt2,
    "llama": lambda: _llama_family("Llama", num_key_value_heads=2),
    "qwen2": lambda: _llama_family("Qwen2", num_key_value_heads=2),
    "mistral": lambda: _llama_family("Mistral", num_key_value_heads=1, sliding_window=5),
    "gemma": lambda: _llama_family("Gemma", num_key_value_heads=2, head_dim=8),
}
LAYER, HEAD = 1, 2


def _model(name: str):
    torch.manual_seed(0)
    model = DECODERS[name]().eval()
    model.set_attn_implementation("eager")
    return model


def _padded_batch():
    ids = torch.randint(5, 99, (3, 9), generator=torch.Generator().manual_seed(0))
    keep = torch.ones(3, 9, dtype=torch.long)
    keep[1, 6:] = 0
    keep[2, 4:] = 0
    return ids, keep


def _hidden(model, ids, keep, mask=None, method="zero"):
    with torch.no_grad():
        if mask is None:
            return model(input_ids=ids, attention_mask=keep).last_hidden_state
        with masked(model, mask, method):
            return model(input_ids=ids, attention_mask=keep).last_hidden_state


def _one_head_mask():
    mask = torch.ones(3, 4)
    mask[LAYER, HEAD] = 0
    return mask


@pytest.mark.parametrize("name", DECODERS)
def test_captured_queries_keys_and_mask_reproduce_the_attention(name):
    model = _model(name)
    ids = torch.randint(5, 99, (1, 13), generator=torch.Generator().manual_seed(1))
    with capture_qk(model) as capture, torch.inference_mode():
        out = model(input_ids=ids, output_attentions=True)
    attention = torch.stack(out.attentions)[:, 0].numpy()
    extras = capture.extras()
    visible = extras["qk_visible"]
    assert capture.queries.shape == capture.keys.shape == (3, 4, 13, 8)
    causal = np.tril(np.ones((13, 13), dtype=bool))
    window = causal & ~np.tril(causal, -5) if name == "mistral" else causal  # keys i-4..i
    assert (visible == window).all()
    rebuilt = attention_from_qk(capture.queries, capture.keys, capture.scaling, None, visible)
    assert np.abs(rebuilt - attention).max() < 1e-5
    # without the mask the same vectors do not give the model's weights: the test can fail
    assert np.abs(attention_from_qk(capture.queries, capture.keys, capture.scaling) - attention).max() > 0.05


@pytest.mark.parametrize("name", DECODERS)
def test_masking_a_head_equals_zeroing_its_output_columns(name):
    model = _model(name)
    ids, keep = _padded_batch()
    reference = copy.deepcopy(model)
    sites = locate(reference)
    columns = slice(HEAD * sites.head_dim, (HEAD + 1) * sites.head_dim)
    with torch.no_grad():
        projection = sites.out_proj[LAYER]
        if isinstance(projection, torch.nn.Linear):
            projection.weight[:, columns] = 0
        else:  # GPT-2's Conv1D: weight [in, out]
            projection.weight[columns, :] = 0
    rows = keep.bool()
    masked_out, expected = _hidden(model, ids, keep, _one_head_mask()), _hidden(reference, ids, keep)
    assert (masked_out[rows] - expected[rows]).abs().max() < 1e-5
    assert (_hidden(model, ids, keep)[rows] - expected[rows]).abs().max() > 1e-3  # the head mattered


@pytest.mark.parametrize("name", ["gpt2", "llama", "gemma"])
def test_uniform_masking_spreads_a_head_over_the_keys_it_can_see(name):
    model = _model(name)
    ids, keep = _padded_batch()
    reference = copy.deepcopy(model)
    sites = locate(reference)
    assert sites.causal
    dim = sites.head_dim
    with torch.no_grad():
        if name == "gpt2":  # c_attn is Conv1D [in, 3 * hidden]: the query columns of the head
            reference.h[LAYER].attn.c_attn.weight[:, HEAD * dim:(HEAD + 1) * dim] = 0
            reference.h[LAYER].attn.c_attn.bias[HEAD * dim:(HEAD + 1) * dim] = 0
        else:
            reference.layers[LAYER].self_attn.q_proj.weight[HEAD * dim:(HEAD + 1) * dim] = 0
    rows = keep.bool()
    uniform, expected = _hidden(model, ids, keep, _one_head_mask(), "uniform"), _hidden(reference, ids, keep)
    assert (uniform[rows] - expected[rows]).abs().max() < 1e-5


@pytest.mark.parametrize("name", ["llama", "mistral", "gpt2"])
def test_value_norms_follow_each_query_heads_shared_value_head(name):
    model = _model(name)
    ids = torch.randint(5, 99, (1, 11), generator=torch.Generator().manual_seed(2))
    inputs = {}

    def keep_input(_module, args, kwargs):
        inputs["x"] = (args[0] if args else kwargs["hidden_states"])[0].detach()

    sites = locate(model)
    attention = sites.layers[LAYER].attn if name == "gpt2" else sites.layers[LAYER].self_attn
    handle = attention.register_forward_pre_hook(keep_input, with_kwargs=True)
    with value_norms(model) as capture, torch.no_grad():
        model(input_ids=ids)
    handle.remove()
    x, dim, heads = inputs["x"], sites.head_dim, sites.heads
    with torch.no_grad():
        if name == "gpt2":
            values = attention.c_attn(x)[:, 2 * 32:]  # [T, heads * dim]
            per_query_head = values.view(-1, heads, dim)
        else:
            values = attention.v_proj(x).view(x.shape[0], -1, dim)  # [T, kv heads, dim]
            per_query_head = values[:, torch.arange(heads) // (heads // values.shape[1])]
        weight = projection_weight(sites.out_proj[LAYER])  # [hidden, heads * dim]
        by_hand = torch.stack([(per_query_head[:, h] @ weight[:, h * dim:(h + 1) * dim].T).norm(dim=-1)
                               for h in range(heads)])
    assert np.allclose(capture.norms[LAYER], by_hand.numpy(), rtol=1e-5, atol=1e-6)


def test_the_induction_run_repeats_random_tokens_after_the_begin_token():
    from reportgen.model.induction import induction_length, run_induction
    from reportgen.patterns.decoder import induction

    class Tokenizer:  # what run_induction reads of a tokenizer
        bos_token_id, eos_token_id, all_special_ids = None, 0, [0, 1]

        def __len__(self):
            return 99

    model = _model("llama")
    n = induction_length(64)
    assert n == 31 and induction_length(None) == 50
    run = run_induction(model, Tokenizer(), n=n, batch=2, seed=3)
    assert run.ids.shape == (2, 2 * n + 1) and (run.ids[:, 0] == 0).all()
    assert (run.ids[:, 1:n + 1] == run.ids[:, n + 1:]).all() and not np.isin(run.ids[:, 1:], [0, 1]).any()
    assert run.attention.shape == (2, 3, 4, 2 * n + 1, 2 * n + 1)
    score = induction(run.attention, n)  # a random model: no head attends by induction
    assert score.shape == (3, 4) and score.max() < 0.5
    again = run_induction(model, Tokenizer(), n=n, batch=2, seed=3)
    assert (again.ids == run.ids).all() and np.allclose(again.attention, run.attention)
    with pytest.raises(ValueError, match="too few for the induction test"):
        induction_length(6)
