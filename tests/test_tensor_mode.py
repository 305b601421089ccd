"""Issue 19, part 1: `AttentionPattern.from_tensors`, attention drawn from tensors computed anywhere, with no model.

The values drawn equal the tensors given: read back from the payloads (decoded here as the
browser decodes them) at 64 tokens (every cell shipped) and at 8 192 (level of detail: the
overview first, then exact tiles and rows cut from the tensor in the kernel). Inputs of every
kind (torch of any dtype, NumPy, nested lists, one head), refusals naming the problem, the note
on rows that do not sum to 1, the error contract, and export.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import long_patterns
from circuitwidgets.widgets import attention as attention_module
from circuitwidgets.widgets.attention import TENSOR_NOTE, AttentionFromTensors


def random_causal(n_heads: int, n: int, seed: int = 0) -> torch.Tensor:
    """Causal attention ``[n_heads, n, n]`` with random weights in every row (rows sum to 1)."""
    weights = torch.rand(n_heads, n, n, generator=torch.Generator().manual_seed(seed)).tril_()
    return weights.div_(weights.sum(-1, keepdim=True))


def labels(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


def tile(w, head, row0, col0, rows, cols, step=1) -> torch.Tensor:
    w.tile_request = {
        "id": 1,
        "layer": 0,
        "head": head,
        "row0": row0,
        "col0": col0,
        "rows": rows,
        "cols": cols,
        "step": step,
        "revision": w.patterns["revision"],
    }
    assert w.error == "" and w.tile["row0"] == row0 and w.tile["col0"] == col0
    return transport.decode(w.tile)


def hover(w, query, key=None) -> torch.Tensor:
    """The exact row the browser gets for a hover on destination `query` (every head)."""
    w.selection = {"query": query, "key": key, "locked": False}
    assert w.row["query"] == query and w.row["revision"] == w.patterns["revision"] and w.row["dtype"] == "float32"
    return transport.decode(w.row)


# ----- 64 tokens: every cell shipped ------------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


def test_64_tokens_from_a_transformer_lens_cache_are_the_model_widgets_picture(model):
    ids = torch.randint(1, 64, (1, 63), generator=torch.Generator().manual_seed(1))
    ids = torch.cat([torch.zeros(1, 1, dtype=torch.long), ids], dim=1)  # BOS first: 64 tokens
    logits, cache = model.run_with_cache(ids)
    str_tokens = model.to_str_tokens(ids)
    for layer in (0, 1):
        given = cache["pattern", layer][0]
        w = cw.AttentionPattern.from_tensors(str_tokens, given)
        assert isinstance(w, cw.AttentionPattern) and w.error == "" and w.model is None
        assert w.patterns["shape"] == [4, 64, 64] and "lod" not in w.patterns and w.patterns["layout"] == "tril"
        drawn = transport.decode(w.patterns)
        assert (drawn - given).abs().max() <= transport.quantisation_step(w.patterns)
        assert torch.equal(w.current_patterns(), given)
        assert torch.equal(hover(w, 40, 38), given[:, 40])  # the hover read-out's values: exact
        assert w.patterns["labels"] == str_tokens and w.str_tokens == str_tokens
        # the same picture as the model's own widget on these tokens: byte for byte
        own = cw.AttentionPattern(model, tokens=ids, layer=layer)
        assert own.patterns["data"] == w.patterns["data"] and own.patterns["shape"] == w.patterns["shape"]


def test_numpy_lists_bfloat16_and_one_head_are_drawn_as_given():
    given = random_causal(3, 64, seed=2)
    cases = {  # what is given -> the float32 values drawn
        "float32 NumPy": (given.numpy(), given),
        "float64 NumPy": (given.double().numpy(), given),
        "float16 NumPy": (given.numpy().astype(np.float16), given.half().float()),
        "nested lists": (given.tolist(), given),
        "bfloat16 torch": (given.to(torch.bfloat16), given.to(torch.bfloat16).float()),
        "a list of heads": (list(given), given),
    }
    for kind, (attention, drawn) in cases.items():
        w = cw.AttentionPattern.from_tensors(labels(64), attention)
        assert torch.equal(w.current_patterns(), drawn), kind
        assert torch.equal(hover(w, 50)[:, :51], drawn[:, 50, :51]), kind
        assert w.info["note"] == TENSOR_NOTE, (kind, w.info["note"])  # 16-bit rounding is no row-sum note
    one = cw.AttentionPattern.from_tensors(labels(64), given[1])
    assert one.patterns["shape"] == [1, 64, 64] and torch.equal(hover(one, 63)[0], given[1, 63])


def test_attention_saved_from_an_nnsight_trace():
    import nnsight

    from circuitwidgets.demo import tiny_hf_model

    hf, tokenizer = tiny_hf_model("gpt2")
    hf.set_attn_implementation("eager")  # (sdpa returns no attention weights)
    lm = nnsight.TransformersModel(hf, tokenizer=tokenizer, task="text-generation")
    text = "hello world hello world"
    with lm.trace(text, output_attentions=True):
        saved = lm.output.attentions[1].save()
    ids = tokenizer(text)["input_ids"]
    w = cw.AttentionPattern.from_tensors(tokenizer.convert_ids_to_tokens(ids), saved[0])
    assert w.error == "" and w.patterns["shape"] == [4, len(ids), len(ids)]
    assert torch.equal(w.current_patterns(), saved[0]) and torch.equal(hover(w, 5), saved[0, :, 5])
    expected = hf(torch.tensor([ids]), output_attentions=True).attentions[1][0]
    assert torch.allclose(w.current_patterns(), expected.detach())


def test_a_bidirectional_pattern_is_drawn_above_its_diagonal_too():
    scores = torch.randn(2, 10, 10, generator=torch.Generator().manual_seed(0))
    given = scores.softmax(-1)
    w = cw.AttentionPattern.from_tensors(labels(10), given)
    assert w.patterns["layout"] == "full"
    assert (transport.decode(w.patterns) - given).abs().max() <= transport.quantisation_step(w.patterns)


def test_head_names_and_layer_name_reach_the_view():
    w = cw.AttentionPattern.from_tensors(labels(5), random_causal(2, 5), head_names=["prev", "induction"], layer_name=1, head=1)
    assert w.info["head_names"] == ["prev", "induction"] and w.info["layer_name"] == "Layer 1" and w.head == 1
    assert w.info["tensors"] is True and w.info["attn_layers"] == [] and w.info["n_heads"] == 2
    assert (
        cw.AttentionPattern.from_tensors(labels(5), random_causal(2, 5), layer_name="blocks.3").info["layer_name"] == "blocks.3"
    )


# ----- 8 192 tokens: level of detail ----------------------------------------------------------------


@pytest.fixture(scope="module")
def long_given():
    n = 8192
    stripe = torch.zeros(n, n)
    stripe[torch.arange(1, n), torch.arange(n - 1)] = 1.0  # previous-token head: one cell per row
    stripe[0, 0] = 1.0
    given = torch.stack([stripe, random_causal(1, n, seed=3)[0]])
    return given, cw.AttentionPattern.from_tensors(labels(n), given, head_names=["previous", "random"])


def test_8192_tokens_send_the_overview_first(long_given):
    given, w = long_given
    assert w.error == "" and w.patterns["lod"] == {"n": 8192, "factor": 16, "pool": "max", "exact": False}
    assert w.patterns["shape"] == [2, 512, 512] and len(w.patterns["data"]) < 1_000_000  # deflated codes
    overview = transport.decode(w.patterns)
    step = transport.quantisation_step(w.patterns)
    assert (overview - long_patterns.pool(given, 16, "max")).abs().max() <= step
    assert float(overview[0].diagonal().min()) == 1.0  # max-pooling keeps the one-cell stripe
    assert w._answer.lod and w._answer.patterns.data_ptr() != given.data_ptr()  # a copy of its own (issue 33)


def test_8192_tokens_zoomed_tiles_and_hover_rows_are_the_tensor(long_given):
    given, w = long_given
    exact = tile(w, 1, 4088, 4088, 16, 16)  # zoomed all the way in: single cells
    block = given[1, 4088:4104, 4088:4104]
    assert (exact.nan_to_num(0) - block).abs().max() <= transport.quantisation_step(w.tile)
    assert torch.isnan(exact[0, 1]) and not torch.isnan(exact[1, 1])  # nothing above the diagonal
    pooled = tile(w, 0, 0, 0, 8192, 8192, step=8)  # a coarser zoom: pooled in the kernel
    assert pooled.shape == (1024, 1024) and float(pooled.nan_to_num(0).diagonal().min()) == 1.0
    row = hover(w, 4097, 4096)
    assert torch.equal(row, given[:, 4097]) and float(row[0, 4096]) == 1.0
    w.pool = "mean"
    assert (transport.decode(w.patterns) - long_patterns.pool(given, 16, "mean")).abs().max() <= transport.quantisation_step(
        w.patterns
    )
    w.pool = "max"


def test_8192_tokens_export_holds_finer_levels(long_given, tmp_path):
    given, w = long_given
    path = w.save_html(tmp_path / "long.html")
    assert path.stat().st_size < 30_000_000 and w.levels and w.levels[0]["step"] == 8
    level = transport.decode(w.levels[0])
    assert (level.nan_to_num(0) - long_patterns.pool(given[w.head], 8, "max")).abs().max() <= transport.quantisation_step(
        w.levels[0]
    )


def test_lod_off_and_a_long_bidirectional_pattern(monkeypatch):
    monkeypatch.setattr(attention_module, "LOD_BYTES", 100)
    given = torch.randn(2, 40, 40, generator=torch.Generator().manual_seed(4)).softmax(-1)
    w = cw.AttentionPattern.from_tensors(labels(40), given)
    assert w.patterns["lod"]["causal"] is False and w.patterns["lod"]["factor"] == 1
    cells = tile(w, 1, 0, 0, 40, 40)
    assert not torch.isnan(cells).any() and (cells - given[1]).abs().max() <= transport.quantisation_step(w.tile)
    w.lod = False
    assert "lod" not in w.patterns and w.patterns["shape"] == [2, 40, 40]


# ----- refusals, notes and the error contract ---------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, attention, error, match",
    [
        (labels(3), torch.ones(2, 3, 4) / 4, ValueError, r"square over its last two dims.*\(2, 3, 4\)"),
        (labels(3), torch.eye(4), ValueError, r"4 positions .* tokens has 3 strings"),
        (labels(3), torch.eye(3)[None, None], ValueError, r"pick one sequence, e.g. cache\['pattern', 0\]\[0\]"),
        (labels(3), torch.ones(3), ValueError, r"\[n_heads, destination, source\].*got shape \(3,\)"),
        (
            labels(2),
            torch.tensor([[1.0, 0.0], [float("nan"), 1.0]]),
            ValueError,
            r"finite; got nan at head 0, destination 1, source 0",
        ),
        (labels(2), torch.tensor([[1.0, 0.0], [float("inf"), 1.0]]), ValueError, r"finite; got inf at head 0, destination 1"),
        (
            labels(2),
            torch.tensor([[1.0, 0.0], [-0.5, 1.5]]),
            ValueError,
            r"in \[0, 1\]; got -0.5 at head 0, destination 1, source 0",
        ),
        (labels(2), torch.tensor([[2.0, 0.0], [0.5, 0.5]]), ValueError, r"in \[0, 1\]; got 2 at head 0, destination 0, source 0"),
        (labels(2), torch.eye(2, dtype=torch.complex64), TypeError, "real numbers"),
        (labels(2), "attention", TypeError, "a tensor or an array of numbers"),
        (labels(2), [["a", "b"], ["c", "d"]], TypeError, "must hold real numbers; got list of dtype <U1"),
        (labels(2), [[{}, 1.0], [0.5, 0.5]], TypeError, "attention must hold numbers"),
        (labels(2), [[1.0], [0.5, 0.5]], ValueError, "cannot be read as an array"),
        (labels(2), torch.empty(2, 2, device="meta"), ValueError, "cannot be read on this machine"),
        (["a", 2], torch.eye(2), TypeError, r"tokens\[1\] must be a str"),
        ("ab", torch.eye(2), TypeError, "list of token strings"),
        (torch.tensor([1, 2]), torch.eye(2), TypeError, "token ids.*to_str_tokens"),
        ([], torch.eye(2), ValueError, "tokens is empty"),
        (labels(0), torch.ones(0, 0, 0), ValueError, "tokens is empty"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(tokens, attention, error, match):
    with pytest.raises(error, match=match):
        cw.AttentionPattern.from_tensors(tokens, attention)


def test_head_names_and_layer_name_are_checked():
    given = random_causal(2, 3)
    with pytest.raises(ValueError, match="head_names has 3 names but attention has 2 heads"):
        cw.AttentionPattern.from_tensors(labels(3), given, head_names=["a", "b", "c"])
    with pytest.raises(TypeError, match=r"head_names\[1\] must be a str; got int 1"):
        cw.AttentionPattern.from_tensors(labels(3), given, head_names=["a", 1])
    with pytest.raises(TypeError, match="head_names must be a list of str"):
        cw.AttentionPattern.from_tensors(labels(3), given, head_names="ab")
    with pytest.raises(TypeError, match="layer_name must be a str, an int or None"):
        cw.AttentionPattern.from_tensors(labels(3), given, layer_name=1.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'haed'.*'head'"):
        cw.AttentionPattern.from_tensors(labels(3), given, haed=1)
    with pytest.raises(traitlets.TraitError, match="head=2 is out of range: the tensors given have heads 0..1"):
        cw.AttentionPattern.from_tensors(labels(3), given, head=2)


def test_rows_that_do_not_sum_to_one_are_drawn_with_a_note():
    given = random_causal(2, 6)
    given[1, 4] *= 0.5
    given[1, 5] = 0.0
    w = cw.AttentionPattern.from_tensors(labels(6), given)
    assert w.error == "" and torch.equal(w.current_patterns(), given)
    assert w.info["note"] == f"{TENSOR_NOTE}; 2 rows do not sum to 1 (head 1, destination 4: 0.5), drawn as given"
    one = given.clone()
    one[1, 5] = given[0, 5]
    assert "1 row does not sum to 1" in cw.AttentionPattern.from_tensors(labels(6), one).info["note"]
    assert cw.AttentionPattern.from_tensors(labels(6), random_causal(2, 6)).info["note"] == TENSOR_NOTE


def test_the_model_controls_are_refused_from_python_and_the_browser():
    given = random_causal(2, 5)
    w = cw.AttentionPattern.from_tensors(labels(5), given)
    picture = w.patterns
    for name, value in (("layer", 1), ("prompt", "abc"), ("tokens", [1, 2]), ("source", "tokens")):
        with pytest.raises(traitlets.TraitError, match=TENSOR_NOTE):
            setattr(w, name, value)
        assert w.error.startswith(f"{name}=") and TENSOR_NOTE in w.error and w.patterns is picture
        w.set_state({name: value})  # from the browser: shown, rolled back, never raised
        assert TENSOR_NOTE in w.error and w.layer == 0 and w.prompt == "" and w.patterns is picture
    w.set_state({"head": 7})
    assert w.error == "head=7 is out of range: the tensors given have heads 0..1" and w.head == 0
    w.set_state({"head": 1})
    assert w.error == "" and w.head == 1 and w.patterns is picture  # a head switch is drawn in the browser
    with pytest.raises(traitlets.TraitError, match="selection query=9 is out of range"):
        w.selection = {"query": 9, "key": None, "locked": False}
    assert torch.equal(hover(w, 4, 2), given[:, 4]) and w.error == ""  # a good one clears the message
    with pytest.raises(ValueError, match=TENSOR_NOTE):
        w.mv  # noqa: B018
    with pytest.raises(TypeError, match="has no model to change"):
        w.use_model(cw.demo_model())
    w.refresh()
    assert w.error == "" and w.refresh_count == 2 and torch.equal(w.current_patterns(), given)
    w.set_state({"tile_request": {"id": 1}})  # a request is answered with its message
    assert "tile_request needs integer fields" in w.error


def test_export_of_a_short_pattern_needs_no_model(tmp_path):
    w = cw.AttentionPattern.from_tensors(["<b>", "x"], torch.tensor([[1.0, 0.0], [0.25, 0.75]]), head_names=["h"])
    text = w.save_html(tmp_path / "t.html").read_text()
    assert '"tensors": true' in text and TENSOR_NOTE in text and "\\u003cb>" in text and "<b>" not in text.split("<body")[1]
    assert isinstance(w, AttentionFromTensors) and "AttentionFromTensors" not in cw.widgets.WIDGETS


#: Junk of every kind a browser or a user could send (see tests/test_error_contract.py).
JUNK = [None, 5, -1, 10**30, float("nan"), 1.5, True, "", "junk", [], [None], {}, {"a": [1, {"b": None}]}, {"query": -3}]


@pytest.mark.parametrize(
    "make",
    [
        lambda: cw.AttentionPattern.from_tensors(labels(4), random_causal(2, 4)),
        lambda: cw.ColoredTokens(labels(4), [0.5, -1.0, 2.0, 0.0]),
    ],
    ids=["AttentionFromTensors", "ColoredTokens"],
)
def test_junk_from_the_browser_never_escapes_and_never_changes_the_picture(make):
    w = make()
    picture = {n: getattr(w, n) for n in ("patterns", "values", "info") if n in w.keys}
    for name in sorted(n for n in w.keys if not n.startswith("_")):
        for junk in JUNK:
            w._set(error="")
            before = getattr(w, name)
            w.set_state({name: junk})  # never raises
            if w.error:  # refused: the message names the trait, the value is not applied (a request is kept)
                assert name in w.error, (name, junk, w.error)
                assert name in ("error", "tile_request") or getattr(w, name) is before or getattr(w, name) == before
        assert all(getattr(w, n) is v for n, v in picture.items()), name


def test_the_tensors_class_shares_the_drawing_and_runs_no_model_path(monkeypatch):
    """`AttentionFromTensors` draws with `AttentionPicture`, as the model's widget does, from the tensor itself: no
    request to any view, no long run."""
    from circuitwidgets.analysis import attention_request
    from circuitwidgets.widgets._attention_picture import AttentionPicture

    asked: list = []
    real = attention_request.ask
    monkeypatch.setattr(attention_request, "ask", lambda *args, **kwargs: asked.append(args) or real(*args, **kwargs))
    given = random_causal(2, 6)
    w = cw.AttentionPattern.from_tensors(labels(6), given)
    w.pool = "mean"
    w.refresh()
    assert asked == [] and isinstance(w, AttentionPicture) and isinstance(w._answer, attention_request.WholeLayer)
    assert torch.equal(w._answer.patterns, given) and w._job is None and w.progress == {} and w.memory_note == ""
    assert isinstance(cw.AttentionPattern(cw.demo_model(), prompt="ab"), AttentionPicture) and asked
