"""ModelView: weights, layers, tokens and patterns resolved once, with clear errors."""

import pytest
import torch
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

from circuitwidgets.model import ModelView, as_view


def boot(**overrides):
    cfg = dict(d_model=32, d_head=8, n_heads=4, n_layers=2, n_ctx=16, d_vocab=40,
               attn_only=True, normalization_type=None, seed=0)
    cfg.update(overrides)
    return TransformerBridge.boot_native(TransformerBridgeConfig(**cfg))


@pytest.fixture(scope="module")
def model():
    return boot()


def test_weights_have_transformer_lens_shapes(model):
    view = ModelView(model)
    assert view.W_Q.shape == (2, 4, 32, 8)
    assert view.W_O.shape == (2, 4, 8, 32)
    assert view.W_E.shape == (40, 32) and view.W_U.shape == (32, 40)
    assert view.W_pos.shape == (16, 32)
    assert view.attn_layers == [0, 1]
    assert torch.equal(view.W_V, model.W_V.detach())


def test_grouped_kv_heads_are_expanded_per_query_head():
    model = boot(n_key_value_heads=2)
    view = ModelView(model)
    assert model.W_K.shape[1] == 2
    assert view.W_K.shape == (2, 4, 32, 8)
    # query heads 0 and 1 share K/V head 0; heads 2 and 3 share head 1
    assert torch.equal(view.W_K[:, 0], model.W_K[:, 0]) and torch.equal(view.W_K[:, 1], model.W_K[:, 0])
    assert torch.equal(view.W_V[:, 3], model.W_V[:, 1])


def test_rotary_model_has_no_learned_positions():
    view = ModelView(boot(positional_embedding_type="rotary"))
    assert view.W_pos is None and not view.has_learned_positions


def test_patterns_cache_only_requested_layers_and_rows_sum_to_one(model):
    view = ModelView(model)
    tokens = torch.randint(0, 40, (3, 9))
    patterns = view.patterns(tokens, layers=[1])
    assert patterns.shape == (3, 1, 4, 9, 9)
    assert torch.allclose(patterns.sum(-1), torch.ones(3, 1, 4, 9), atol=1e-5)
    assert torch.all(patterns.triu(1) == 0), "causal: no attention to later keys"


def test_as_view_is_cached_until_weights_change(model):
    view = as_view(model)
    assert as_view(model) is view
    with torch.no_grad():
        next(model.parameters()).mul_(1.0)
    fresh = as_view(model)
    assert fresh is not view


def test_as_view_sees_parameters_replaced_or_moved():
    model = boot()
    view = as_view(model)
    state = {k: v.clone() + 1 for k, v in model.state_dict().items()}
    model.load_state_dict(state, assign=True)  # new Parameter objects, old ones untouched
    replaced = as_view(model)
    assert replaced is not view and torch.equal(replaced.W_E, state["embed.weight"])
    boot()  # building another model registers parameters elsewhere: this view stays valid
    assert as_view(model) is replaced
    model.to(torch.float64)  # storage moved in place
    moved = as_view(model)
    assert moved is not replaced and moved.dtype == torch.float64


def test_refuses_non_transformerlens_objects_naming_what_it_got():
    with pytest.raises(TypeError, match="torch.nn.modules.linear.Linear.*lacks"):
        ModelView(torch.nn.Linear(2, 2))


def test_refuses_nan_weights():
    model = boot()
    with torch.no_grad():
        model.W_E  # the bridge reads its embedding weight
        dict(model.named_parameters())["tok_embed._original_component.weight"][3, 0] = float("nan")
    with pytest.raises(ValueError, match="W_E contains 1 NaN/Inf"):
        ModelView(model)


@pytest.mark.parametrize(
    "layer, error, message",
    [(2, ValueError, r"layer=2 is out of range: this model has layers 0..1"),
     (-1, ValueError, "out of range"),
     (1.0, TypeError, "layer must be an int"),
     (True, TypeError, "layer must be an int")],
)
def test_layer_out_of_range(model, layer, error, message):
    with pytest.raises(error, match=message):
        ModelView(model).layer_index(layer)


def test_head_out_of_range(model):
    with pytest.raises(ValueError, match=r"head=4 is out of range: this model has heads 0..3"):
        ModelView(model).check_head(4)


def test_tokens_outside_vocabulary(model):
    with pytest.raises(ValueError, match=r"id 40, outside the vocabulary 0..39"):
        ModelView(model).check_tokens(torch.tensor([1, 2, 40]))
    with pytest.raises(ValueError, match=r"id -1"):
        ModelView(model).check_tokens([[1, -1]])


def test_tokens_longer_than_context(model):
    view = ModelView(model)
    with pytest.raises(ValueError, match=r"17 positions, longer than the model's n_ctx=16"):
        view.check_tokens(torch.zeros(17, dtype=torch.long))
    assert view.check_tokens(torch.zeros(17, dtype=torch.long), truncate=True).shape == (1, 16)


def test_empty_and_float_tokens(model):
    view = ModelView(model)
    with pytest.raises(ValueError, match="empty"):
        view.check_tokens(torch.zeros(0, dtype=torch.long))
    with pytest.raises(TypeError, match="integer ids"):
        view.check_tokens(torch.zeros(3))


def test_prompt_needs_a_tokenizer(model):
    view = ModelView(model)
    with pytest.raises(TypeError, match="no tokenizer: pass token ids"):
        view.to_tokens("hello")
    with pytest.raises(ValueError, match="prompt is empty"):
        view.to_tokens("")
    assert view.to_str_tokens(torch.tensor([5, 7])) == ["5", "7"]
