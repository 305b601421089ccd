"""Live binding: every change to a model shows at the next call; hooks, memory, threads, eval mode."""

import gc
import threading
import weakref

import pytest
import torch
from factories import narrow_bridge, small_bridge

from circuitwidgets.analysis import attention_patterns, copying_scores, head_scores
from circuitwidgets.model import ModelView, as_view


def v_linear(model, layer=1):
    """The torch Linear behind a bridge's value projection of block `layer`."""
    return model.blocks[layer].attn.v._original_component


def negate_data(model):
    v_linear(model).weight.data.mul_(-1)  # .data: no version bump


def negate_data_slice(model):
    v_linear(model).weight.data[:8].mul_(-1)  # one head's columns of W_V, through .data


def negate_no_grad(model):
    with torch.no_grad():
        v_linear(model).weight.mul_(-1)


def negate_numpy(model):
    v_linear(model).weight.detach().numpy()[:] *= -1  # numpy shares the storage, bumps nothing


def load_copy(model):
    state = {k: (-v if k == "blocks.1.attn.v.weight" else v.clone()) for k, v in model.state_dict().items()}
    model.load_state_dict(state)


def load_assign(model):
    state = {k: (-v if k == "blocks.1.attn.v.weight" else v.clone()) for k, v in model.state_dict().items()}
    model.load_state_dict(state, assign=True)


def reassign_parameter(model):
    linear = v_linear(model)
    linear.weight = torch.nn.Parameter(-linear.weight.detach().clone())


def reassign_module(model):
    old = v_linear(model)
    new = torch.nn.Linear(old.in_features, old.out_features)
    with torch.no_grad():
        new.weight.copy_(-old.weight)
        new.bias.copy_(old.bias)
    model.blocks[1].attn.v._original_component = new


def replace_data(model):
    linear = v_linear(model)
    linear.weight.data = -linear.weight.data.clone()


EDITS = [negate_data, negate_data_slice, negate_no_grad, negate_numpy, load_copy, load_assign, reassign_parameter,
         reassign_module, replace_data]


@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__ for e in EDITS])
def test_every_kind_of_weight_edit_shows_at_the_next_call(edit):
    model = narrow_bridge(seed=3)
    before = copying_scores(model)
    view = as_view(model)
    edit(model)
    after = copying_scores(model)
    assert as_view(model) is not view
    torch.testing.assert_close(after, copying_scores(ModelView(model)))  # a view built from scratch
    assert not torch.allclose(after[1], before[1])
    torch.testing.assert_close(after[0], before[0])  # layer 0 untouched


def test_dtype_and_device_moves_show_at_the_next_call():
    model = narrow_bridge(seed=3)
    view = as_view(model)
    model.to(torch.float64)
    moved = as_view(model)
    assert moved is not view and moved.dtype == torch.float64 and moved.W_Q.dtype == torch.float64
    model.to("cpu")  # no move at all: the view stays
    assert as_view(model) is moved


def test_an_unchanged_model_keeps_its_view():
    model = narrow_bridge(seed=3)
    view = as_view(model)
    copying_scores(model)
    attention_patterns(model, [[1, 2, 3]])
    narrow_bridge(seed=4)  # building another model registers parameters elsewhere
    assert as_view(model) is view and not view.is_stale()


# ----- hooks ---------------------------------------------------------------------------------
def identity_hook(x, hook):
    return x


def test_hook_state_is_empty_without_hooks_even_after_runs():
    model = narrow_bridge(normalization_type="LN", attn_only=False, d_mlp=64, act_fn="gelu")
    view = as_view(model)
    assert view.hook_state() == ()
    view.patterns([[1, 2, 3]])  # the bridge wires its own capture hooks on the first forward pass
    model(torch.tensor([[1, 2, 3]]))
    head_scores(model, "induction")
    assert view.hook_state() == ()


def test_hook_state_sees_every_kind_of_hook():
    model = narrow_bridge()
    view = as_view(model)
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", identity_hook)]):
        inside = view.hook_state()
        assert inside and inside[0][0] == "blocks.0.attn.hook_pattern"
        hash(inside)
    assert view.hook_state() == ()

    model.add_hook("blocks.1.attn.hook_z", identity_hook)
    added = view.hook_state()
    assert added and added != inside
    model.reset_hooks()
    assert view.hook_state() == ()

    seen = []

    def look(x, hook):
        seen.append(view.hook_state())
        return x

    model.run_with_hooks(torch.tensor([[1, 2, 3]]), fwd_hooks=[("blocks.1.attn.hook_pattern", look)])
    assert seen and seen[0] != () and view.hook_state() == ()

    handle = model.blocks[0].attn.register_forward_pre_hook(lambda module, args: None)
    assert view.hook_state() != ()
    handle.remove()
    assert view.hook_state() == ()

    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, out: None)
    try:
        assert view.hook_state() != ()
    finally:
        handle.remove()
    assert view.hook_state() == ()


def test_hook_state_changes_when_hooks_are_added_again():
    model = narrow_bridge()
    view = as_view(model)
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", identity_hook)]):
        first = view.hook_state()
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", identity_hook)]):
        second = view.hook_state()
    assert first != second  # a cache keyed on it never serves the first context's results to the second


# ----- memory ----------------------------------------------------------------------------------
def test_an_analysed_model_is_freed_when_deleted():
    model = small_bridge(seed=7)
    copying_scores(model)
    head_scores(model, "previous_token")
    view = as_view(model)
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None
    with pytest.raises(ReferenceError, match="was deleted"):
        view.patterns([[1, 2]])


def test_view_model_is_the_model():
    model = narrow_bridge()
    assert as_view(model).model is model and ModelView(model).model is model


# ----- threads ---------------------------------------------------------------------------------
def test_two_threads_on_one_model_get_their_own_patterns():
    model = narrow_bridge(seed=5)
    prompts = [torch.randint(0, 50, (2, 30), generator=torch.Generator().manual_seed(s)) for s in (1, 2)]
    expected = [attention_patterns(model, p[:1]) for p in prompts]
    wrong, errors, barrier = [], [], threading.Barrier(2)

    def work(i):
        try:
            barrier.wait()
            for _ in range(40):
                if not torch.equal(attention_patterns(model, prompts[i][:1]), expected[i]):
                    wrong.append(i)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and not wrong


def test_threads_building_views_of_one_model_share_one_view():
    model = narrow_bridge(seed=6)
    views, barrier = [], threading.Barrier(4)

    def work():
        barrier.wait()
        views.append(as_view(model))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(views) == 4 and all(v is views[0] for v in views)


# ----- eval mode -------------------------------------------------------------------------------
def with_dropout(model, p=0.5):
    """Dropout on the embedding output (a registered submodule, applied by a forward hook)."""
    model.drop = torch.nn.Dropout(p)
    model.hook_embed.register_forward_hook(lambda module, args, out: model.drop(out))
    return model


def test_runs_happen_in_eval_mode_and_restore_the_users_mode():
    model = with_dropout(narrow_bridge(seed=2))
    tokens = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(0))
    evaluated = attention_patterns(model.eval(), tokens)
    model.train()
    model.blocks[0].eval()  # a mixed mode is restored as it was
    first, second = attention_patterns(model, tokens), attention_patterns(model, tokens)
    assert torch.equal(first, second) and torch.equal(first, evaluated)
    assert model.training and model.drop.training and not model.blocks[0].training
    assert model.blocks[1].training
    torch.testing.assert_close(first.sum(-1), torch.ones_like(first.sum(-1)))


def test_a_small_edit_of_one_entry_through_data_is_seen():
    model = narrow_bridge(seed=3)
    view = as_view(model)
    v_linear(model).weight.data[3, 5] += 1e-3  # weights are about 0.02: a 5 % change of one entry
    assert view.is_stale() and as_view(model) is not view
