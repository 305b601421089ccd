"""Remote zoom without round trips (issue 22): a remote model's shown head is zoomed and hovered here.

With ``remote=`` (here ``"local"``: nnsight's remote path, serialised and run on this machine) the
first picture's trace also brings back the shown head's attention-call inputs (its queries and its
K/V group's keys, after the model's rotation, and the call's options). Tiles and hover rows of
that head are then rebuilt here, exactly as the trace rebuilds them, with no new trace; a head
switch costs one request. Counted with `HFView.traces`.
"""

from __future__ import annotations

import pytest
import torch

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.widgets import attention as attention_module

TOL = 2e-6


def view_of(kind: str, n_ctx: int = 2048) -> cw.HFView:
    model, tokenizer = cw.demo.tiny_hf_model(kind, n_ctx=n_ctx)
    return cw.HFView(model, tokenizer=tokenizer, remote="local")


def ids_of(n: int) -> torch.Tensor:
    ids = torch.randint(3, 60, (n,), generator=torch.Generator().manual_seed(0))
    return torch.cat([ids[: n // 2], ids[: n - n // 2]])  # repeated: structure for induction-like heads


def ask(w: cw.AttentionPattern, **request: int) -> torch.Tensor:
    w.tile_request = {"id": w.tile.get("id", 0) + 1, "layer": w.layer, "revision": w.patterns["revision"], **request}
    return transport.decode(w.tile)


@pytest.fixture(scope="module")
def llama_long():
    view = view_of("llama")
    w = cw.AttentionPattern(view, tokens=ids_of(1600), layer=1, head=1)
    return view, w


def test_the_first_picture_brings_the_shown_heads_inputs_and_says_their_size(llama_long):
    view, w = llama_long
    assert w.patterns["lod"]["factor"] == 4  # 1 600 tokens, 4 heads: the level-of-detail path
    q_k = 2 * 1600 * 16 * 4  # queries and keys of one head, float32
    assert f"({q_k / 1e6:.2f} MB, downloaded once)" in w.remote_note and w.remote_note.startswith("H1's")


def test_twenty_zoom_pan_and_hover_actions_run_no_trace_and_are_exact(llama_long):
    view, w = llama_long
    before = view.traces
    tiles, rows = [], []
    for i in range(10):  # zoom in and pan: tiles of the shown head
        step = (4, 2, 1)[i % 3]
        tiles.append((100 * i, 50 * i, step, ask(w, head=1, row0=100 * i, col0=50 * i, rows=256, cols=256, step=step)))
    for i in range(10):  # hover: the exact row of the destination under the pointer
        w.selection = {"query": 150 * i + 7, "key": 3, "locked": False}
        rows.append((150 * i + 7, w.row["heads"], transport.decode(w.row)))
    assert view.traces == before  # no request: 20 actions, 0 traces
    exact = w.current_patterns()  # (one trace, after counting: the whole layer, to compare)
    for row0, col0, step, tile in tiles:
        brute = torch.nn.functional.max_pool2d(exact[1, None, None, row0 : row0 + 256, col0 : col0 + 256], step)[0, 0]
        stored = ~torch.isnan(tile)
        assert (tile[stored] - brute[stored]).abs().max() <= transport.quantisation_step(w.tile) + 1e-6
        block = w._block(1, row0, row0 + 256, col0, col0 + 256)  # the float cells, before quantisation
        assert (block[0] - exact[1, row0 : row0 + 256, col0 : col0 + 256]).abs().max() < TOL
    for query, heads, row in rows:
        assert heads == [1] and row.shape[0] == 1  # only the shown head's row: another's is not here (the view shows ≈)
        assert (row[0] - exact[1, query]).abs().max() < TOL


def test_a_head_switch_costs_one_request(llama_long):
    view, w = llama_long
    before = view.traces
    w.head = 3
    ask(w, head=3, row0=0, col0=0, rows=1024, cols=1024, step=4)
    assert view.traces == before + 1 and w.remote_note.startswith("H3's")
    w.selection = {"query": 900, "key": 5, "locked": True}
    ask(w, head=3, row0=800, col0=700, rows=64, cols=64, step=1)
    assert view.traces == before + 1
    heads = w.row["heads"]
    assert 3 in heads and not torch.isnan(transport.decode(w.row)[heads.index(3)]).any()


@pytest.mark.parametrize("kind", ["gemma2", "gpt2"])
def test_the_call_options_travel_with_the_inputs(kind, monkeypatch):
    """Soft-capping and a sliding window (Gemma 2), learned positions (GPT-2): rows rebuilt here are the trace's."""
    monkeypatch.setattr(attention_module, "LOD_BYTES", 1)  # the level-of-detail path at a short length
    view = view_of(kind, n_ctx=256)
    w = cw.AttentionPattern(view, tokens=ids_of(96), layer=0, head=2)
    w.selection = {"query": 90, "key": 80, "locked": True}
    here = transport.decode(w.row)[w.row["heads"].index(2)]
    assert w._answer.inputs and view.traces == 1
    exact = w.current_patterns()[2, 90]
    assert (here - exact).abs().max() < TOL


def test_a_head_switch_request_rebuilds_only_that_heads_weights(monkeypatch):
    """The request behind a head switch (its inputs, nothing drawn) checks that head's rebuild against the call's
    output and builds no other head's weights: the server's work is one head's, not the layer's."""
    from circuitwidgets import in_trace

    model, tokenizer = cw.demo.tiny_hf_model("llama", n_ctx=512)
    view = cw.HFView(model, tokenizer=tokenizer)  # (a local trace runs this module's code: the calls can be seen)
    heads_built, original = [], in_trace.block_weights

    def spy(q, *args, **kwargs):
        heads_built.append(q.shape[1])
        return original(q, *args, **kwargs)

    monkeypatch.setattr(in_trace, "block_weights", spy)
    tokens = ids_of(300)[None]
    answer = view.reduced(tokens, {1: {"head_inputs": 2}})[1]
    assert answer["inputs"]["q"].shape[0] == 300 and heads_built and set(heads_built) == {1}
    heads_built.clear()
    view.reduced(tokens, {1: {"factor": 2}})  # the picture: every head
    assert sum(heads_built) >= 4 and max(heads_built) > 1
