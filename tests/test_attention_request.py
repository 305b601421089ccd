"""`analysis.attention_request`: one request for a layer's picture, tiles and rows, answered alike on every path.

Every answer is held to the model's own patterns (`ModelView.patterns`): the whole layer of a short
prompt, q/k/lse rebuilt for a long one, a pattern kept whole where rebuilding would not give it, a
trace reduced where the model runs, and a remote model's shown head rebuilt here from its queries
and keys. The dispatch asks the view what it can do, never which backend it holds.
"""

from __future__ import annotations

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets.analysis import attention_request as ar
from circuitwidgets.analysis import long_patterns as lp

IDS = tuple(torch.randint(1, 60, (40,), generator=torch.Generator().manual_seed(0)).tolist())


def exact(view, layer: int) -> torch.Tensor:
    return view.patterns(torch.tensor([IDS]), [layer])[0, 0].float().cpu()


def assert_answers_like(answer: ar.LayerAnswer, expected: torch.Tensor, view=None, head: int = 1) -> None:
    """Blocks (pooled or not), rows and the picture of `answer` are those of the patterns `expected` [H, n, n]."""
    n = expected.shape[-1]
    assert answer.n == n and answer.n_heads == expected.shape[0]
    assert torch.allclose(answer.block(head, 5, 30, 2, 40, view=view)[0], expected[head, 5:30, 2:40], atol=1e-5)
    pooled = answer.block(head, 0, n, 0, n, 4, "mean", view=view)[0]
    assert torch.allclose(pooled, lp.pool(expected[head], 4, "mean"), atol=1e-5)
    row = answer.rows(17, head, view=view)
    assert torch.allclose(row[head], expected[head, 17], atol=1e-5)
    picture = answer.picture()
    drawn = lp.pool(expected, answer.factor, answer.pool) if answer.lod else expected
    if picture.scale is None:  # weights, drawn by the caller
        assert torch.allclose(picture.values, drawn, atol=1e-5)
    else:  # codes drawn where the model ran, on the linear scale here
        assert (picture.values - drawn).abs().max() <= 0.5 / 254 + 1e-6


@pytest.fixture(scope="module")
def local():
    return cw.ModelView(small_bridge(n_ctx=64))


def test_a_short_prompt_is_the_layer_whole_and_a_long_one_rebuilt_from_q_and_k(local):
    whole = ar.ask(local, ar.LayerRequest(IDS, 1))
    assert type(whole) is ar.WholeLayer and not whole.lod and not whole.runs_model
    assert_answers_like(whole, exact(local, 1))
    long = ar.ask(local, ar.LayerRequest(IDS, 1, lod=True, factor=4, pool="max"))
    assert type(long) is ar.RebuiltLayer and long.lod and long.exact and long.picture().values.shape == (4, 10, 10)
    assert_answers_like(long, exact(local, 1))
    assert ar.memory_reason(local, ar.LayerRequest(IDS, 1, lod=True, factor=4)) == ""


def test_a_pattern_that_is_not_softmax_of_q_k_is_kept_whole():
    model = small_bridge(n_ctx=64)
    view = cw.ModelView(model)
    sharpen = lambda p, hook: p**2 / (p**2).sum(-1, keepdim=True)  # noqa: E731
    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", sharpen)]):
        answer = ar.ask(view, ar.LayerRequest(IDS, 1, lod=True, factor=4))
        expected = exact(view, 1)
        assert "hook" in ar.memory_reason(view, ar.LayerRequest(IDS, 1, lod=True, factor=4))
    assert type(answer) is ar.WholeLayer and answer.lod and not answer.exact
    assert_answers_like(answer, expected)


@pytest.mark.parametrize("remote", [False, "local"])
def test_a_model_reduced_in_its_trace_answers_as_its_patterns(remote):
    hf, tokenizer = cw.demo.tiny_hf_model("llama", n_ctx=64)
    view = cw.HFView(hf, tokenizer=tokenizer, remote=remote)
    scale = {"kind": "linear"}
    answer = ar.ask(view, ar.LayerRequest(IDS, 1, lod=True, factor=4, scale=scale, head=1))
    assert answer.runs_model and answer.exact and answer.picture().scale == scale
    expected = cw.HFView(hf, tokenizer=tokenizer).patterns(torch.tensor([IDS]), [1])[0, 0]
    before = view.traces
    assert_answers_like(answer, expected, view=view, head=1)
    if remote:  # the shown head's queries and keys came with the picture: its blocks and rows run here
        assert type(answer) is ar.RemoteLayer and list(answer.held) == [1] and view.traces == before
        assert torch.isnan(answer.rows(17, 1, view=view)[0]).all()  # another head's row is not here
        answer.block(3, 0, 8, 0, 8, view=view)  # another head: one request, then held
        assert view.traces == before + 1 and list(answer.held) == [1, 3]
    else:
        assert type(answer) is ar.TracedLayer and view.traces > before  # each block or row is a trace


def test_results_are_kept_by_the_keep_given_under_its_keys(local):
    store: dict = {}

    def keep(view, key, compute):
        if key not in store:
            store[key] = compute()
        return store[key]

    ar.ask(local, ar.LayerRequest(IDS, 1), keep)
    ar.ask(local, ar.LayerRequest(IDS, 1, lod=True, factor=4), keep)
    assert sorted(key[0] for key in store) == ["attention_parts", "layer_patterns"]
    assert ("layer_patterns", IDS, 1, (0, 1)) in store  # (the layer below, computed on the way, within the budget)
    again = ar.ask(local, ar.LayerRequest(IDS, 1, lod=True, factor=4, pool="mean"), keep)
    assert again.parts is store[("attention_parts", IDS, 1, 4)]  # served from what was kept: no run


def test_the_dispatch_asks_what_the_view_can_do_not_which_backend_it_holds(local):
    class Patterns:
        """Any object answering the protocol's questions: here, patterns of a run, reduced nowhere else."""

        reduces_in_trace, runs_remotely, attn_layers, n_heads, device = False, False, [0, 1], local.n_heads, local.device

        def patterns(self, tokens, layers):
            return local.patterns(tokens, layers)

    answer = ar.ask(Patterns(), ar.LayerRequest(IDS, 1))
    assert_answers_like(answer, exact(local, 1))
    assert not ar.runs_elsewhere(local) and not ar.runs_elsewhere(Patterns())
