"""ModelView: weights, layers, tokens and patterns resolved once, with clear errors."""

import pytest
import torch
from factories import narrow_bridge

from circuitwidgets.model import ModelView, as_view


def boot(**overrides):
    return narrow_bridge(**{"n_ctx": 16, "d_vocab": 40, **overrides})


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
        _ = model.W_E  # the bridge reads its embedding weight
        dict(model.named_parameters())["tok_embed._original_component.weight"][3, 0] = float("nan")
    with pytest.raises(ValueError, match=r"parameter embed\.weight contains 1 NaN/Inf value"):
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


# ----- model facts ---------------------------------------------------------------------------
def test_attention_scale_and_positional_embedding_type(model):
    view = ModelView(model)
    assert view.attn_scale == pytest.approx(8**0.5)
    assert view.positional_embedding_type == "standard" and view.no_positions_note() == ""
    rotary = ModelView(boot(positional_embedding_type="rotary"))
    assert rotary.positional_embedding_type == "rotary" and rotary.has_rotary
    assert rotary.no_positions_note() == ""  # rotary models have a positional view of their own
    assert "rotary positions" in str(rotary.no_positions_error("positional_qk"))
    rotary.positional_embedding_type = "alibi"  # boot_native builds only standard and rotary models
    assert rotary.no_positions_note().startswith("No positional view: this model uses alibi positions, not a learned W_pos.")


# ----- token subsets -------------------------------------------------------------------------
def test_token_subset_of_a_prompt_ids_strings_and_tensors(demo):
    view = as_view(demo)
    assert view.token_subset(prompt="abca") == ([2, 3, 4], "the 3 distinct tokens of the prompt, in order of first appearance")
    assert view.token_subset(tokens=[9, 2, 9]) == ([9, 2], "tokens chosen by the caller")
    assert view.token_subset(tokens=["b", 2, "b"])[0] == [3, 2]
    assert view.token_subset(tokens=torch.tensor([5, 3, 5]))[0] == [5, 3]
    assert view.token_subset() == (list(range(64)), "the whole vocabulary (64 tokens)")
    assert view.token_id("a") == 2 and view.token_ids(["a", 5, "a"]) == [2, 5, 2]
    assert view.token_strings([2, 3]) == ["a", "b"]


def test_token_subset_of_a_large_vocabulary_is_a_fixed_random_draw():
    view = ModelView(boot(d_vocab=500))
    ids, criterion = view.token_subset()
    assert len(ids) == 40 and ids == sorted(ids) and len(set(ids)) == 40
    assert ModelView(boot(d_vocab=500)).token_subset()[0] == ids  # seed 0, every time
    assert criterion == (
        "40 tokens drawn uniformly at random (seed 0) from the 500-token vocabulary; pass tokens= or prompt= to choose"
    )
    with pytest.raises(ValueError, match="300 tokens is too many to draw: at most 256"):
        view.token_subset(tokens=list(range(300)))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [({"tokens": [1], "prompt": "a"}, ValueError, "pass either tokens or prompt, not both"),
     ({"prompt": 3}, TypeError, "prompt must be a str; got int"),
     ({"prompt": ""}, ValueError, "prompt is empty"),
     ({"tokens": "ab"}, TypeError, "for the tokens of a text use prompt="),
     ({"tokens": ["ab"]}, ValueError, "token string 'ab' is 2 tokens, not one"),
     ({"tokens": [64]}, ValueError, r"token id 64 is out of range: 0..63"),
     ({"tokens": [-1]}, ValueError, r"token id -1 is out of range"),
     ({"tokens": []}, ValueError, "tokens is empty: give at least one token"),
     ({"tokens": [True]}, TypeError, "tokens must hold ints or strings; got True"),
     ({"tokens": [1.0]}, TypeError, "tokens must hold ints or strings"),
     ({"tokens": 5}, TypeError, "tokens must be a list of token ids or strings; got int"),
     ({"tokens": torch.zeros(2, 2, dtype=torch.long)}, TypeError, "tokens must be a 1-D integer tensor"),
     ({"tokens": torch.zeros(2)}, TypeError, "tokens must be a 1-D integer tensor")],
)
def test_token_subset_refuses_bad_input(demo, kwargs, error, message):
    with pytest.raises(error, match=message):
        as_view(demo).token_subset(**kwargs)


def test_token_strings_need_a_tokenizer(model):
    view = ModelView(model)
    assert view.token_strings([5, 7]) == ["5", "7"]
    with pytest.raises(TypeError, match="token 'a' is a string but this model has no tokenizer; pass token ids"):
        view.token_subset(tokens=["a"])
    with pytest.raises(TypeError, match=r"this model has no tokenizer: pass tokens=\[ids\] instead of a prompt"):
        view.token_subset(prompt="a")
    with pytest.raises(TypeError, match="token text must be a str"):
        view.token_id(5)


# ----- one run, only the activations asked for --------------------------------------------------
def test_patterns_and_values_equal_run_with_cache():
    model = boot(n_key_value_heads=2)  # grouped K/V: values come back one per query head
    tokens = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)
    patterns, values = ModelView(model).patterns_and_values(tokens)
    assert patterns.shape == (2, 2, 4, 9, 9) and values.shape == (2, 2, 9, 4, 8)
    for layer in range(2):
        torch.testing.assert_close(patterns[:, layer], cache[f"blocks.{layer}.attn.hook_pattern"])
        torch.testing.assert_close(values[:, layer], cache[f"blocks.{layer}.attn.hook_v"].repeat_interleave(2, dim=2))
    only, only_values = ModelView(model).patterns_and_values(tokens, layers=[1])
    torch.testing.assert_close(only[:, 0], patterns[:, 1])
    torch.testing.assert_close(only_values[:, 0], values[:, 1])


def test_embedding_and_patterns_equal_run_with_cache(model):
    tokens = torch.randint(0, 40, (1, 7), generator=torch.Generator().manual_seed(1))
    _, cache = model.run_with_cache(tokens)
    x0, patterns = ModelView(model).embedding_and_patterns(tokens)
    torch.testing.assert_close(x0, cache["blocks.0.hook_resid_pre"])
    torch.testing.assert_close(x0[0], model.W_E[tokens[0]] + model.W_pos[:7])
    torch.testing.assert_close(patterns[0, 1], cache["blocks.1.attn.hook_pattern"][0])
    assert ModelView(model).embedding_and_patterns(tokens, layers=[0])[1].shape == (1, 1, 4, 7, 7)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ModelView(model).embedding_and_patterns([[0, 40]])


# ----- the input contract: refused with a clear message before reaching torch or the tokenizer --------
def test_meta_device_tokens_are_refused_naming_the_models_device(model):
    view = ModelView(model)
    meta = torch.zeros(1, 3, dtype=torch.long, device="meta")
    for call in (lambda: view.check_tokens(meta), lambda: view.tokens_of(meta), lambda: view.patterns(meta),
                 lambda: view.token_ids(meta[0])):
        with pytest.raises(ValueError, match=r"tokens are on the meta device.*the model is on cpu"):
            call()


def test_zero_d_tokens_are_refused(model):
    view = ModelView(model)
    with pytest.raises(ValueError, match=r"tokens is a 0-d tensor \(one number\); pass \[5\]"):
        view.check_tokens(torch.tensor(5))


def test_lone_surrogates_are_refused_before_the_tokenizer(demo):
    view = as_view(demo)
    for call in (lambda: view.to_tokens("a\ud800b"), lambda: view.tokens_of("a\ud800b"),
                 lambda: view.token_subset(prompt="a\ud800b")):
        with pytest.raises(ValueError, match=r"prompt holds a lone surrogate '\\ud800' at index 1"):
            call()
    with pytest.raises(ValueError, match=r"token text holds a lone surrogate"):
        view.token_id("\udfff")


def test_over_long_prompt_says_shorten_it_and_where_truncate_exists(demo):
    view = as_view(demo)
    with pytest.raises(ValueError, match="prompt is 101 tokens long") as info:
        view.to_tokens("a" * 100)
    message = str(info.value)
    assert "shorten the prompt to at most 64 tokens" in message
    assert "or pass truncate=True" not in message
    assert "ModelView.to_tokens(prompt, truncate=True)" in message
    assert view.to_tokens("a" * 100, truncate=True).shape == (1, 64)


def test_ragged_and_overflowing_token_lists_say_why(model):
    view = ModelView(model)
    with pytest.raises(TypeError, match="rectangular"):
        view.check_tokens([[1, 2], [3]])
    with pytest.raises(ValueError, match=r"id 1180591620717411303424, outside the vocabulary"):
        view.check_tokens([2**70])
