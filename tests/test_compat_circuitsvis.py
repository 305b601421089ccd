"""Issue 19, part 2: `circuitwidgets.compat.circuitsvis`, CircuitsVis's calls drawing our widgets.

The calls run as tutorials write them (TransformerLens's ``run_with_cache`` and ``to_str_tokens``
on the demo model; ARENA's keyword calls; NumPy arrays), with only the import line changed. Their
signatures are CircuitsVis 1.43's (names, positional order, defaults); an argument with no
equivalent warns once per call, naming itself and what happens instead. `ColoredTokens`, the
widget behind ``colored_tokens``, is tested here too.
"""

from __future__ import annotations

import inspect
import warnings

import ipywidgets
import numpy as np
import pytest
import torch
import traitlets

import circuitwidgets as cw
import circuitwidgets.compat.circuitsvis as cv
from circuitwidgets import transport
from circuitwidgets.compat.circuitsvis.attention import attention_heads  # as ARENA imports it
from circuitwidgets.compat.circuitsvis.tokens import colored_tokens

P, REQUIRED = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty
#: CircuitsVis 1.43's documented signatures: (name, default) in positional order, all positional-or-keyword.
SIGNATURES = {
    cv.attention.attention_heads: [
        ("attention", REQUIRED),
        ("tokens", REQUIRED),
        ("attention_head_names", None),
        ("max_value", None),
        ("min_value", None),
        ("negative_color", None),
        ("positive_color", None),
        ("mask_upper_tri", None),
    ],
    cv.attention.attention_patterns: [("tokens", REQUIRED), ("attention", REQUIRED)],
    cv.attention.attention_pattern: [
        ("tokens", REQUIRED),
        ("attention", REQUIRED),
        ("max_value", None),
        ("min_value", None),
        ("negative_color", None),
        ("show_axis_labels", None),
        ("positive_color", None),
        ("mask_upper_tri", None),
    ],
    cv.tokens.colored_tokens: [
        ("tokens", REQUIRED),
        ("values", REQUIRED),
        ("min_value", None),
        ("max_value", None),
        ("negative_color", None),
        ("positive_color", None),
    ],
}


@pytest.mark.parametrize("function", SIGNATURES, ids=lambda f: f.__name__)
def test_signatures_are_circuitsvis_own(function):
    params = inspect.signature(function).parameters.values()
    assert [(p.name, p.default) for p in params] == SIGNATURES[function]
    assert {p.kind for p in params} == {P}


@pytest.fixture(scope="module")
def run():
    """TransformerLens style: ``logits, cache = model.run_with_cache(tokens)`` on the demo model."""
    model = cw.demo_model()
    text = "abcdefabcdef"
    tokens = model.to_tokens(text)
    logits, cache = model.run_with_cache(tokens)
    return model, tokens, model.to_str_tokens(text), cache


def drawn(w) -> torch.Tensor:
    return transport.decode(w.patterns)


def test_transformer_lens_style(run):
    model, tokens, str_tokens, cache = run
    w = cv.attention.attention_patterns(tokens=str_tokens, attention=cache["pattern", 0][0])
    assert isinstance(w, cw.AttentionPattern) and isinstance(w, ipywidgets.DOMWidget) and w.error == ""
    assert w.patterns["shape"] == [4, 13, 13] and w.str_tokens == str_tokens
    assert (drawn(w) - cache["pattern", 0][0]).abs().max() <= transport.quantisation_step(w.patterns)
    assert torch.equal(w.current_patterns(), cache["pattern", 0][0])
    heads = cv.attention.attention_heads(cache["pattern", 1][0], str_tokens)  # positional, as CircuitsVis orders them
    assert torch.equal(heads.current_patterns(), cache["pattern", 1][0]) and heads.info["head_names"] is None
    one = cv.attention.attention_pattern(str_tokens, cache["pattern", 1][0, 2])
    assert one.patterns["shape"] == [1, 13, 13] and torch.equal(one.current_patterns()[0], cache["pattern", 1][0, 2])
    # per-token loss, coloured
    loss = model(tokens, return_type="loss", loss_per_token=True)[0].detach()
    strip = cv.tokens.colored_tokens(str_tokens[1:], loss)
    assert isinstance(strip, cw.ColoredTokens) and strip.error == ""
    assert torch.equal(transport.decode(strip.values), loss) and strip.values["labels"] == str_tokens[1:]
    assert strip.values["range"] == [0.0, float(loss.max())] and strip.values["kind"] == "sequential"


def test_arena_style_keywords(run):
    model, tokens, str_tokens, cache = run
    names = [f"L1H{h}" for h in range(4)]
    w = attention_heads(attention=cache["pattern", 1][0], tokens=str_tokens, attention_head_names=names)
    assert w.info["head_names"] == names and w.error == ""
    w = cv.attention.attention_patterns(tokens=str_tokens, attention=cache["pattern", 1][0])
    assert torch.equal(w.current_patterns(), cache["pattern", 1][0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the defaults and True for show_axis_labels warn of nothing
        cv.attention.attention_pattern(tokens=str_tokens, attention=cache["pattern", 0][0, 1], show_axis_labels=True)
        colored_tokens(tokens=str_tokens, values=np.linspace(-1, 1, len(str_tokens)))


def test_numpy_arrays():
    rng = np.random.default_rng(0)
    weights = np.tril(rng.random((2, 6, 6)))
    weights /= weights.sum(-1, keepdims=True)
    w = cv.attention.attention_heads(weights, list("abcdef"), ["first", "second"])
    assert torch.equal(w.current_patterns(), torch.from_numpy(weights).float())
    w = cv.attention.attention_pattern(list("abcdef"), weights[1].tolist())
    assert torch.equal(w.current_patterns()[0], torch.from_numpy(weights[1]).float())
    strip = cv.tokens.colored_tokens(list("abc"), np.array([0.5, -0.25, 2.0]))
    assert transport.decode(strip.values).tolist() == [0.5, -0.25, 2.0]
    assert strip.values["range"] == [-0.25, 2.0] and strip.values["kind"] == "diverging"


@pytest.mark.parametrize(
    "call, argument, instead",
    [
        (lambda a, t: cv.attention.attention_heads(a, t, max_value=0.5), "max_value=0.5", "fixed 0 to 1 scale"),
        (lambda a, t: cv.attention.attention_heads(a, t, min_value=0.1), "min_value=0.1", "fixed 0 to 1 scale"),
        (lambda a, t: cv.attention.attention_heads(a, t, negative_color="red"), "negative_color='red'", "notebook's theme"),
        (lambda a, t: cv.attention.attention_heads(a, t, positive_color="#00f"), "positive_color='#00f'", "notebook's theme"),
        (lambda a, t: cv.attention.attention_pattern(t, a[0], max_value=1), "max_value=1", "fixed 0 to 1 scale"),
        (
            lambda a, t: cv.attention.attention_pattern(t, a[0], show_axis_labels=False),
            "show_axis_labels=False",
            "always labelled",
        ),
        (lambda a, t: cv.attention.attention_pattern(t, a[0], negative_color="red"), "negative_color='red'", "theme"),
        (lambda a, t: cv.tokens.colored_tokens(t, [0.0] * len(t), negative_color="red"), "negative_color='red'", "theme"),
        (lambda a, t: cv.tokens.colored_tokens(t, [0.0] * len(t), positive_color="blue"), "positive_color='blue'", "theme"),
    ],
)
def test_an_argument_with_no_equivalent_warns_once_naming_it(run, call, argument, instead):
    model, tokens, str_tokens, cache = run
    with pytest.warns(UserWarning) as caught:
        w = call(cache["pattern", 1][0], str_tokens)
    assert len(caught) == 1 and caught[0].filename == __file__  # pointing at the caller's line
    message = str(caught[0].message)
    assert f"({argument}): no equivalent in circuitwidgets, ignored" in message and instead in message
    assert w.error == ""  # drawn all the same


def test_mask_upper_tri_drops_the_weights_above_the_diagonal():
    bidirectional = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(0)).softmax(-1)
    kept = cv.attention.attention_heads(bidirectional, list("abcde"), mask_upper_tri=False)
    assert torch.equal(kept.current_patterns(), bidirectional) and kept.patterns["layout"] == "full"
    masked = cv.attention.attention_heads(bidirectional, list("abcde"), mask_upper_tri=True)
    assert torch.equal(masked.current_patterns(), bidirectional.tril()) and masked.patterns["layout"] == "tril"
    assert "do not sum to 1" in masked.info["note"]  # (what is left of each row)
    one = cv.attention.attention_pattern(list("abcde"), bidirectional[0], mask_upper_tri=True)
    assert torch.equal(one.current_patterns()[0], bidirectional[0].tril())
    causal = cv.attention.attention_heads(bidirectional.tril().to(torch.bfloat16), list("abcde"), mask_upper_tri=True)
    assert "do not sum" in causal.info["note"]  # (a causal pattern, masked: kept as given, bfloat16 tolerance)
    rows = torch.rand(2, 5, 5, generator=torch.Generator().manual_seed(1)).tril()
    rows = (rows / rows.sum(-1, keepdim=True)).to(torch.bfloat16)
    kept = cv.attention.attention_heads(rows, list("abcde"), mask_upper_tri=True)
    assert kept.info["note"] == cw.widgets.attention.TENSOR_NOTE and torch.equal(kept.current_patterns(), rows.float())
    with pytest.raises(TypeError, match="mask_upper_tri must be True, False or None"):
        cv.attention.attention_pattern(list("abcde"), bidirectional[0], mask_upper_tri="yes")


def test_bad_input_is_refused_as_from_tensors_refuses_it(run):
    model, tokens, str_tokens, cache = run
    with pytest.raises(ValueError, match=r"pick one sequence, e.g. cache\['pattern', 0\]\[0\]"):
        cv.attention.attention_patterns(str_tokens, cache["pattern", 0])  # the whole batch
    with pytest.raises(ValueError, match="13 positions .* tokens has 12 strings"):
        cv.attention.attention_heads(cache["pattern", 0][0], str_tokens[1:], mask_upper_tri=True)
    with pytest.raises(ValueError, match="head_names has 2 names but attention has 4 heads"):
        cv.attention.attention_heads(cache["pattern", 0][0], str_tokens, ["a", "b"])
    with pytest.raises(ValueError, match=r"values must be one number per token: shape \[13\]; got shape \[12\]"):
        cv.tokens.colored_tokens(str_tokens, torch.zeros(12))
    with pytest.raises(ValueError, match=r"values must be finite; got nan at token 2 \('b'\)"):
        cv.tokens.colored_tokens(str_tokens, [0.0, 1.0, float("nan")] + [0.0] * 10)
    with pytest.raises(ValueError, match="min_value=1 must be below max_value=0"):
        cv.tokens.colored_tokens(str_tokens, torch.zeros(13), min_value=1, max_value=0)
    with pytest.raises(TypeError, match="max_value must be a finite number or None; got str 'big'"):
        cv.tokens.colored_tokens(str_tokens, torch.zeros(13), max_value="big")


def test_circuitsvis_calls_with_no_equivalent_say_so():
    with pytest.raises(AttributeError, match="has no 'activations'.*attention.*tokens"):
        cv.activations  # noqa: B018
    with pytest.raises(AttributeError, match="tokens has no 'colored_tokens_multi': it has colored_tokens"):
        cv.tokens.colored_tokens_multi  # noqa: B018
    with pytest.raises(AttributeError, match="attention has no 'attention_heads_multi'"):
        cv.attention.attention_heads_multi  # noqa: B018


# ----- ColoredTokens ---------------------------------------------------------------------------------


def test_colored_tokens_ranges():
    values = torch.tensor([0.25, 3.0, 1.0])
    assert cw.ColoredTokens(list("abc"), values).values["range"] == [0.0, 3.0]
    assert cw.ColoredTokens(list("abc"), values, min_value=0.5, max_value=2.0).values["range"] == [0.5, 2.0]
    assert cw.ColoredTokens(list("abc"), -values).values["range"] == [-3.0, 0.0]
    assert cw.ColoredTokens(list("abc"), -values).values["kind"] == "diverging"
    assert cw.ColoredTokens(list("abc"), torch.zeros(3)).values["range"] == [0.0, 1.0]
    assert cw.ColoredTokens(list("abc"), values.to(torch.bfloat16)).values["dtype"] == "float32"


def test_colored_tokens_has_no_model_layer_or_head(tmp_path):
    w = cw.ColoredTokens(["<b>x</b>", " y"], [1.0, 2.0])
    assert w.model is None and "ColoredTokens" not in cw.widgets.WIDGETS and "ColoredTokens" in cw.__all__
    for name in ("layer", "head"):
        with pytest.raises(traitlets.TraitError, match="has no model, layer or head"):
            setattr(w, name, 1)
        w.set_state({name: 1})
        assert f"{name}=1" in w.error and getattr(w, name) == 0
    with pytest.raises(TypeError, match="unexpected keyword argument 'valus'.*'values'"):
        cw.ColoredTokens(["a"], [1.0], valus=1)
    text = w.save_html(tmp_path / "tokens.html").read_text()
    assert '"_cw_view": "tokens"' in text and "\\u003cb>x\\u003c/b>" in text
