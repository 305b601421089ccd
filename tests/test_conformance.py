"""Conformance: every backend gives the same answers, to the same tolerances.

A backend is one entry of `BACKENDS` (built by `make`): what a user passes as ``model``, the widget
options it needs (``remote=``), and the torch modules underneath, from which every reference here
is computed by hand: patterns from Hugging Face's eager ``output_attentions`` (or, for a
TransformerLens bridge, its own ``run_with_cache``), circuits from the module weights with the
norms applied by hand. Only the public API is used. Every model is tiny (2 layers, 4 heads of 16,
d_model 64) and its norm weights are random, so that norm folding matters.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import io
import math
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import traitlets

nnsight = pytest.importorskip("nnsight")
pytestmark = pytest.mark.filterwarnings("ignore:LanguageModel is deprecated")  # what most nnsight users still write

import transformers  # noqa: E402
from transformers.pytorch_utils import Conv1D  # noqa: E402

import circuitwidgets as cw  # noqa: E402
from circuitwidgets import transport  # noqa: E402
from circuitwidgets.demo import tiny_hf_model  # noqa: E402
from circuitwidgets.model import view_for  # noqa: E402

PROMPT = "the cat sat on the mat. the cat sat"
LAYERS, HEADS, D_HEAD, D_MODEL = 2, 4, 16, 64
PATTERN_ATOL = 1e-5  # float32 patterns against the reference
CIRCUIT_RTOL = 1e-4  # float32 circuits, relative to the largest entry
SINK_LOGIT = -3.5  # an extra key every query may attend to: ~3 % of the weight of a first query

BACKENDS = ["tl-demo", "tl-bridge-gpt2", "hf-gpt2", "hf-llama", "nnsight-llama", "nnsight-remote-llama", "hfview-gpt2"]
HF_BACKENDS = [name for name in BACKENDS if not name.startswith("tl-")]  # patterns rebuilt inside a trace
WRAPPERS = ["tl-bridge", "hf", "nnsight", "nnsight-remote", "hfview"]  # what wraps a Hugging Face model


# ----- backends ----------------------------------------------------------------------------------
@dataclass
class Backend:
    name: str
    model: Any  # what the user passes to widgets and analysis
    opts: dict = field(default_factory=dict)  # widget options (remote=...)
    hf: Any = None  # the Hugging Face model underneath, where there is one
    bridge: Any = None  # the TransformerLens bridge, where there is one
    twin: Any = None  # an un-bridged copy of `hf` (eager reference of a bridge, before edits)

    def target(self) -> Any:
        """What analysis functions take: the model, or the shared view its widget options make."""
        return view_for(self.model, **self.opts) if self.opts else self.model

    def view(self) -> Any:
        return cw.as_view(self.target())

    def widget(self, cls: type, **kwargs: Any) -> Any:
        return cls(self.model, **self.opts, **kwargs)


def randomise_norms(model: torch.nn.Module, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if "norm" in type(module).__name__.lower() and isinstance(getattr(module, "weight", None), torch.Tensor):
                module.weight.copy_(1 + 0.3 * torch.randn(module.weight.shape, generator=g))
                if isinstance(getattr(module, "bias", None), torch.Tensor):
                    module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=g))


def hf_model(kind: str, *, dtype: torch.dtype | None = None, device: str | None = None, **config: Any) -> tuple[Any, Any]:
    """A tiny random Hugging Face model ("gpt2", "llama", "helium") with random norm weights, and its tokenizer."""
    model, tokenizer = tiny_hf_model("gpt2" if kind == "helium" else kind)
    if kind == "helium" or config or device:
        cfg = model.config
        if kind == "helium":  # llama-like, but not among the architectures TransformerLens 4 bridges
            cfg = transformers.HeliumConfig(
                hidden_size=D_MODEL, intermediate_size=2 * D_MODEL, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                num_key_value_heads=2, head_dim=D_HEAD, max_position_embeddings=256, vocab_size=len(tokenizer),
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            )
        for name, value in config.items():
            setattr(cfg, name, value)
        torch.manual_seed(0)
        with torch.device(device or "cpu"):
            model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    if device != "meta":
        randomise_norms(model)
    if dtype is not None:
        model.to(dtype)
    return model, tokenizer


def boot_bridge(hf: Any, tokenizer: Any) -> Any:
    from transformer_lens.model_bridge import TransformerBridge

    with contextlib.redirect_stdout(io.StringIO()):
        return TransformerBridge.boot_transformers(type(hf).__name__, hf_model=hf, tokenizer=tokenizer).eval()


def wrap(how: str, hf: Any, tokenizer: Any) -> Backend:
    """`hf` as the user of backend kind `how` holds it."""
    name = f"{how}-{type(hf).__name__}"
    if how == "tl-bridge":
        twin = copy.deepcopy(hf)
        bridge = boot_bridge(hf, tokenizer)
        return Backend(name, bridge, hf=hf, bridge=bridge, twin=twin)
    if how == "hf":
        hf.tokenizer = tokenizer
        return Backend(name, hf, hf=hf)
    if how in ("nnsight", "nnsight-remote"):
        opts = {"remote": "local"} if how == "nnsight-remote" else {}
        return Backend(name, nnsight.LanguageModel(hf, tokenizer=tokenizer), opts, hf=hf)
    if how == "hfview":
        return Backend(name, cw.HFView(hf, tokenizer=tokenizer), hf=hf)
    raise ValueError(how)


def make(name: str, **options: Any) -> Backend:
    """Backend `name` of `BACKENDS` ("how-kind"), its Hugging Face model built with `options` (see `hf_model`)."""
    if name == "tl-demo":
        model = cw.demo_model()
        return Backend(name, model, bridge=model)
    how, kind = name.rsplit("-", 1)
    backend = wrap(how, *hf_model(kind, **options))
    backend.name = name
    return backend


@pytest.fixture(params=BACKENDS)
def backend(request: Any) -> Backend:
    return make(request.param)


@contextlib.contextmanager
def kernel_message(name: str | None):
    """Inside, widgets see one kernel message `name`, as a notebook cell or a browser event is
    (as benchmarks/_models.py simulates it: the view is checked once per message)."""
    import importlib

    patched = []
    for module_name in ("circuitwidgets.model", "circuitwidgets.widgets._views"):
        module = importlib.import_module(module_name)
        if callable(getattr(module, "_message_id", None)):
            patched.append((module, module._message_id))
            module._message_id = lambda: name
    assert patched, "found no _message_id to simulate kernel messages with"
    try:
        yield
    finally:
        for module, original in patched:
            module._message_id = original


# ----- references, computed by hand --------------------------------------------------------------
def eager_patterns(hf: Any, tokens: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``[batch, layers, heads, q, k]`` from Hugging Face's eager attention."""
    implementation = hf.config._attn_implementation
    hf.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = hf(tokens, attention_mask=attention_mask, output_attentions=True)
    finally:
        hf.set_attn_implementation(implementation)
    return torch.stack(out.attentions, dim=1).float()


def reference_patterns(b: Backend, tokens: torch.Tensor) -> torch.Tensor:
    """``[batch, layers, heads, q, k]`` of the model as it is now: the bridge's own run, else HF eager."""
    if b.bridge is not None:
        with torch.no_grad():
            _, cache = b.bridge.run_with_cache(tokens, names_filter=lambda name: name.endswith("attn.hook_pattern"))
        return torch.stack([cache[f"blocks.{layer}.attn.hook_pattern"] for layer in range(LAYERS)], dim=1).float()
    return eager_patterns(b.hf, tokens)


def _matrix(module: Any) -> torch.Tensor:
    """``M`` with ``module(x) = x @ M (+ bias)``: Linear ``weight.T``, Conv1D ``weight``."""
    module = getattr(module, "_original_component", module)
    weight = module.weight.detach().float()
    return weight if isinstance(module, Conv1D) else weight.T


def _heads(matrix: torch.Tensor) -> torch.Tensor:
    """``[d_model, heads * d_head]`` -> ``[heads, d_model, d_head]``."""
    return matrix.reshape(matrix.shape[0], -1, D_HEAD).permute(1, 0, 2)


def _norm(module: Any, centred: bool) -> torch.Tensor:
    """The norm as a ``[d, d]`` matrix acting on row vectors (its per-position scale left out)."""
    weight = getattr(module, "weight", None) if module is not None else None
    if not isinstance(weight, torch.Tensor):
        return torch.eye(D_MODEL)
    scale = torch.diag(weight.detach().float())
    return (torch.eye(D_MODEL) - 1 / D_MODEL) @ scale if centred else scale


def reference_weights(b: Backend) -> dict[str, Any]:
    """``E [vocab, d]``, ``P [n_ctx, d]`` or None, ``F [d, d]`` (final norm), ``U [d, vocab]`` and per layer
    ``R`` (its input norm), ``Q, K, V [heads, d, d_head]`` (K/V groups expanded), ``O [heads, d_head, d]``,
    ``C`` (the centring of what it writes, where the norms centre) and ``scale``: read from the modules."""
    hf_config = getattr(b.hf, "config", None)
    inverse_layer = bool(getattr(hf_config, "scale_attn_by_inverse_layer_idx", False))
    layers = []
    if b.bridge is not None:  # TransformerLens: the bridge's own projections (split from c_attn for GPT-2)
        m = b.bridge
        centred = str(m.cfg.normalization_type or "").upper().startswith("LN")
        E, U = m.embed._original_component.weight.detach().float(), _matrix(m.unembed)
        P = m.pos_embed._original_component.weight.detach().float() if hasattr(m, "pos_embed") else None
        F = _norm(getattr(m, "ln_final", None), centred)
        for block in m.blocks:
            a = block.attn
            Q, K, V = (_heads(_matrix(getattr(a, n))) for n in "qkv")
            out = _matrix(a.o).reshape(HEADS, D_HEAD, D_MODEL)
            layers.append(dict(R=_norm(getattr(block, "ln1", None), centred), Q=Q, K=K, V=V, O=out))
    elif hasattr(b.hf, "transformer"):  # GPT-2: joint c_attn, LayerNorm
        centred, t = True, b.hf.transformer
        E, P, U, F = t.wte.weight.detach().float(), t.wpe.weight.detach().float(), _matrix(b.hf.lm_head), _norm(t.ln_f, True)
        for block in t.h:
            Q, K, V = (_heads(part) for part in _matrix(block.attn.c_attn).split(D_MODEL, dim=1))
            out = _matrix(block.attn.c_proj).reshape(HEADS, D_HEAD, D_MODEL)
            layers.append(dict(R=_norm(block.ln_1, True), Q=Q, K=K, V=V, O=out))
    else:  # Llama-like: grouped K/V, RMSNorm, rotary
        centred, body = False, b.hf.model
        E, P, U, F = body.embed_tokens.weight.detach().float(), None, _matrix(b.hf.lm_head), _norm(body.norm, False)
        for block in body.layers:
            a = block.self_attn
            Q, K, V = _heads(_matrix(a.q_proj)), _heads(_matrix(a.k_proj)), _heads(_matrix(a.v_proj))
            K, V = (x.repeat_interleave(HEADS // x.shape[0], dim=0) for x in (K, V))
            out = _matrix(a.o_proj).reshape(HEADS, D_HEAD, D_MODEL)
            layers.append(dict(R=_norm(block.input_layernorm, False), Q=Q, K=K, V=V, O=out))
    for index, layer in enumerate(layers):
        layer["C"] = torch.eye(D_MODEL) - 1 / D_MODEL if centred else torch.eye(D_MODEL)
        layer["scale"] = math.sqrt(D_HEAD) * (index + 1 if inverse_layer else 1)
    return dict(E=E, P=P, F=F, U=U, layers=layers)


def reference_blocks(b: Backend, layer: int, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Full OV ``[heads, source, out]`` and scaled full QK ``[heads, query, key]`` blocks on tokens `ids`."""
    W = reference_weights(b)
    L = W["layers"][layer]
    x = W["E"][ids] @ L["R"]
    ov = torch.stack([x @ L["V"][h] @ L["O"][h] @ W["F"] @ W["U"][:, ids] for h in range(HEADS)])
    qk = torch.stack([(x @ L["Q"][h]) @ (x @ L["K"][h]).T for h in range(HEADS)]) / L["scale"]
    return ov, qk


def assert_positional(target: Any, W: dict[str, Any], layer: int, n: int = 24) -> None:
    """`positional_qk` scores (before the softmax, which is near uniform at these weights) against
    ``W_pos W_QK W_posᵀ / scale`` of the layer, masked causally."""
    L = W["layers"][layer]
    x = W["P"][:n] @ L["R"]
    scores = torch.stack([(x @ L["Q"][h]) @ (x @ L["K"][h]).T for h in range(HEADS)]) / L["scale"]
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    got = cw.analysis.positional_qk(target, layer, positions=n, softmax=False)
    assert bool(got[:, future].isnan().all())
    assert_relative(got.masked_fill(future, 0), scores.masked_fill(future, 0), f"positional_qk scores of layer {layer}")
    expected = scores.masked_fill(future, -math.inf).softmax(-1)
    assert_patterns(cw.analysis.positional_qk(target, layer, positions=n), expected, f"positional_qk of layer {layer}")


def assert_relative(got: Any, expected: torch.Tensor, what: str = "", rtol: float = CIRCUIT_RTOL) -> None:
    got = torch.as_tensor(got).float().cpu()
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    error, size = float((got - expected).abs().max()), float(expected.abs().max())
    assert error <= rtol * size, f"{what}: max error {error:.3g} where the largest entry is {size:.3g}"


def assert_patterns(got: Any, expected: torch.Tensor, what: str = "", atol: float = PATTERN_ATOL) -> None:
    got = torch.as_tensor(got).float().cpu()
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    error = float((got - expected).abs().max())
    assert error <= atol, f"{what}: max error {error:.3g} > {atol:.3g}"


def message_of(build: Any) -> str:
    """The error a widget shows, or the one its constructor raised."""
    try:
        return build().error
    except (ValueError, TypeError) as exc:
        return str(exc)


# ----- 1. patterns ----------------------------------------------------------------------------------
def test_patterns_equal_the_reference(backend):
    b = backend
    view = b.view()
    tokens = view.to_tokens(PROMPT)
    expected = reference_patterns(b, tokens)
    assert_patterns(view.patterns(tokens), expected, "as_view(model).patterns")
    assert_patterns(cw.analysis.attention_patterns(b.target(), tokens), expected[0], "attention_patterns")
    one_layer = cw.analysis.attention_patterns(b.target(), tokens, layers=[1])
    assert_patterns(one_layer, expected[0, 1:], "attention_patterns(layers=[1])")
    if b.twin is not None:  # a bridge of a Hugging Face model: its eager attention too
        assert_patterns(view.patterns(tokens), eager_patterns(b.twin, tokens), "patterns against eager")


# ----- 2. circuits ----------------------------------------------------------------------------------
def test_circuits_equal_dense_products_of_the_module_weights(backend):
    b = backend
    W, target, ids = reference_weights(backend), backend.target(), list(range(3, 40))
    for layer in range(LAYERS):
        L = W["layers"][layer]
        ov, qk = reference_blocks(b, layer, ids)
        assert_relative(cw.analysis.full_ov_block(target, layer, ids), ov, f"full_ov_block of layer {layer}")
        assert_relative(cw.analysis.full_qk_block(target, layer, ids), qk, f"full_qk_block of layer {layer}")
        qk_residual = torch.stack([L["R"] @ L["Q"][h] @ L["K"][h].T @ L["R"].T for h in range(HEADS)])
        ov_residual = torch.stack([L["R"] @ L["V"][h] @ L["O"][h] @ L["C"] for h in range(HEADS)])
        assert_relative(cw.analysis.qk_circuit(target, layer).dense(), qk_residual, f"qk_circuit of layer {layer}")
        assert_relative(cw.analysis.ov_circuit(target, layer).dense(), ov_residual, f"ov_circuit of layer {layer}")
        scaled = cw.analysis.qk_circuit(target, layer, scaled=True).dense()
        assert_relative(scaled, qk_residual / L["scale"], f"scaled qk_circuit of layer {layer}")
        if W["P"] is not None:
            assert_positional(target, W, layer)


# ----- 3. per-layer attention scale -------------------------------------------------------------------
@pytest.mark.parametrize("how", WRAPPERS)
def test_a_per_layer_attention_scale_is_used_layer_by_layer(how):
    b = wrap(how, *hf_model("gpt2", scale_attn_by_inverse_layer_idx=True))
    view, target = b.view(), b.target()
    tokens = view.to_tokens(PROMPT)
    expected = eager_patterns(b.twin or b.hf, tokens)
    assert_patterns(view.patterns(tokens), expected, "as_view(model).patterns")
    assert_patterns(cw.analysis.attention_patterns(target, tokens), expected[0], "attention_patterns")
    scales = [math.sqrt(D_HEAD) * (layer + 1) for layer in range(LAYERS)]
    if hasattr(view, "attn_scales"):
        assert list(view.attn_scales) == pytest.approx(scales)
    W = reference_weights(b)
    for layer in range(LAYERS):
        L = W["layers"][layer]
        assert L["scale"] == scales[layer]
        assert_positional(target, W, layer)
        ids = list(range(3, 30))
        expected_qk = reference_blocks(b, layer, ids)[1]
        assert_relative(cw.analysis.full_qk_block(target, layer, ids), expected_qk, f"full_qk_block of layer {layer}")
        qk = b.widget(cw.QKCircuit, layer=layer, tokens=ids, positions=24)
        assert_relative(transport.decode(qk.values), expected_qk, f"QKCircuit.values of layer {layer}")


# ----- 4. live binding ----------------------------------------------------------------------------
def attention_of(b: Backend, layer: int) -> Any:
    if b.bridge is not None:
        return b.bridge.blocks[layer].attn
    return b.hf.transformer.h[layer].attn if hasattr(b.hf, "transformer") else b.hf.model.layers[layer].self_attn


def _projections(b: Backend, a: Any) -> list[tuple[Any, str, float | None]]:
    """(owner, attribute, factor) of the projections a user swaps: query x2, value x-1 (None: GPT-2's joint c_attn)."""
    if b.bridge is not None:  # a bridge runs its own split projections (a swapped c_attn would be ignored)
        return [(a.q, "_original_component", 2.0), (a.v, "_original_component", -1.0)]
    if hasattr(a, "c_attn"):
        return [(a, "c_attn", None)]
    return [(a, "q_proj", 2.0), (a, "v_proj", -1.0)]


def edit_in_place(b: Backend, layer: int = 0, factor: float = -1.0) -> None:
    """(i) Query and value weights scaled through ``.data`` (no version bump)."""
    a = attention_of(b, layer)
    with torch.no_grad():
        if hasattr(a, "c_attn"):  # GPT-2, bridged or not: the joint projection
            a.c_attn.weight.data[:, :D_MODEL] *= factor
            a.c_attn.weight.data[:, 2 * D_MODEL :] *= factor
        elif hasattr(a, "q_proj"):
            a.q_proj.weight.data.mul_(factor)
            a.v_proj.weight.data.mul_(factor)
        else:
            a.q._original_component.weight.data.mul_(factor)
            a.v._original_component.weight.data.mul_(factor)


def swap_modules(b: Backend, layer: int = 0) -> None:
    """(ii) The query and value projections replaced by copies holding other weights."""
    for owner, name, factor in _projections(b, attention_of(b, layer)):
        old = getattr(owner, name)
        new = copy.deepcopy(getattr(old, "_original_component", old))
        with torch.no_grad():
            if factor is None:  # GPT-2's c_attn: [q | k | v] columns
                new.weight[:, :D_MODEL] *= 2
                new.weight[:, 2 * D_MODEL :] *= -1
            else:
                new.weight.mul_(factor)
        setattr(owner, name, new)


def hook_attention_input(b: Backend, layer: int = 0) -> Any:
    """(iii) A torch forward pre-hook that triples the attention module's input; returns its handle."""

    def triple(module: Any, args: tuple, kwargs: dict) -> tuple:
        if args:
            return (args[0] * 3, *args[1:]), kwargs
        key = next(k for k in ("hidden_states", "query_input", "x") if k in kwargs)
        return args, {**kwargs, key: kwargs[key] * 3}

    return attention_of(b, layer).register_forward_pre_hook(triple, with_kwargs=True)


def weights_widgets(b: Backend) -> list[Any]:
    return [
        b.widget(cw.AttentionPattern, prompt=PROMPT, layer=0),
        b.widget(cw.OVCircuit, layer=0, tokens=list(range(3, 30)), accuracy=False),
        b.widget(cw.QKCircuit, layer=0, tokens=list(range(3, 30)), positions=16),
    ]


def assert_shows_the_model(b: Backend, widgets: list[Any], weights_changed: bool = True) -> None:
    """Each widget's decoded payload equals a fresh computation on the model as it is now."""
    attention = widgets[0]
    assert attention.error == "", attention.error
    expected = reference_patterns(b, torch.tensor([attention.tokens]))[0, attention.layer]
    step = transport.quantisation_step(attention.patterns)
    assert_patterns(transport.decode(attention.patterns), expected, "AttentionPattern.patterns", atol=step + 1e-6)
    for w in widgets[1:] if weights_changed else []:
        assert w.error == "", w.error
        ov, qk = reference_blocks(b, w.layer, list(w.tokens))
        assert_relative(transport.decode(w.values), ov if isinstance(w, cw.OVCircuit) else qk, f"{type(w).__name__}.values")


def user_action(widgets: list[Any]) -> None:
    """Another layer and back, as a user clicks."""
    for w in widgets:
        w.layer = 1
        w.layer = 0


def switch_layer(widgets: list[Any]) -> None:
    for w in widgets:
        w.layer = 1 - w.layer


def test_every_widget_follows_edits_swaps_and_hooks(backend):
    b = backend
    by_refresh, by_action = weights_widgets(b), weights_widgets(b)
    tokens = torch.tensor([by_refresh[0].tokens])
    shown = reference_patterns(b, tokens)[0, 0]
    handle = None
    for step, change in enumerate(("in place", "module swap", "hook", "hook removed")):
        with kernel_message(f"cell-{step}"):
            if change == "in place":
                edit_in_place(b)
            elif change == "module swap":
                swap_modules(b)
            elif change == "hook":
                handle = hook_attention_input(b)
            else:
                handle.remove()
        now = reference_patterns(b, tokens)[0, 0]
        assert float((now - shown).abs().max()) > 0.01, f"{change} did not change the model (test set-up)"
        shown = now
        weights = change in ("in place", "module swap")
        with kernel_message(f"refresh-{step}"):
            for w in by_refresh:
                w.refresh()
        assert_shows_the_model(b, by_refresh, weights)
        with kernel_message(f"action-{step}"):
            user_action(by_action)
        assert_shows_the_model(b, by_action, weights)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_held_hfview_sees_an_edit(kind):
    hf, tokenizer = hf_model(kind)
    view = cw.HFView(hf, tokenizer=tokenizer)
    b = Backend("held", view, hf=hf)
    before = cw.analysis.copying_scores(view)
    a = attention_of(b, 1)
    with torch.no_grad():
        (a.c_attn.weight.data[:, 2 * D_MODEL :] if kind == "gpt2" else a.v_proj.weight.data).mul_(-1)  # W_V *= -1
    after = cw.analysis.copying_scores(view)
    assert torch.allclose(after[1], -before[1], atol=1e-5) and torch.allclose(after[0], before[0], atol=1e-6)
    ids = list(range(3, 30))
    assert_relative(cw.analysis.full_ov_block(view, 1, ids), reference_blocks(b, 1, ids)[0], "full_ov_block")


def test_a_remote_dashboard_sees_an_edit():
    b = make("nnsight-remote-llama")
    dash = cw.Dashboard(b.model, prompt=PROMPT, layer=0, remote="local")
    assert [w.error for w in dash.widgets] == [""] * len(dash.widgets)
    with kernel_message("edit"):
        edit_in_place(b)
    with kernel_message("refresh"):
        for w in dash.widgets:
            w.refresh()
    assert_shows_the_model(b, [dash.attention, dash.ov, dash.qk])
    with kernel_message("swap"):
        swap_modules(b)
    with kernel_message("action"):
        dash.attention.layer = 1
        dash.attention.layer = 0  # linked: every child follows
    assert_shows_the_model(b, [dash.attention, dash.ov, dash.qk])
    dash.close()


# ----- 5. memory --------------------------------------------------------------------------------
def close_all(widgets: list[Any]) -> None:
    for widget in widgets:
        widget.close()


def _alive(refs: list[Any]) -> list[str]:
    gc.collect()
    return [name for name, ref in refs if ref() is not None]


@pytest.mark.parametrize("name", BACKENDS)
def test_the_model_is_freed_after_its_widgets_close(name):
    b = make(name)
    widgets = weights_widgets(b)
    cw.analysis.copying_scores(b.target())
    held = {"model": b.model, "hf": b.hf, "bridge": b.bridge, "view": b.view()}
    refs = [(what, weakref.ref(x)) for what, x in held.items() if x is not None]
    del held
    close_all(widgets)
    del widgets, b
    alive = _alive(refs)
    assert not alive, f"still alive: {alive}"


@pytest.mark.parametrize("name", BACKENDS)
def test_edits_under_kernel_messages_leave_no_view_alive(name):
    b = make(name)
    widgets = weights_widgets(b)
    refs = [("model", weakref.ref(b.model)), *([("hf", weakref.ref(b.hf))] if b.hf is not None else [])]
    for i in range(6):
        with kernel_message(f"edit-{i}"):
            edit_in_place(b, factor=1.1)
        with kernel_message(f"action-{i}"):
            switch_layer(widgets)
            refs += [(f"view of action {i}", weakref.ref(cw.as_view(b.target())))]
            refs += [(f"{type(w).__name__}.mv of action {i}", weakref.ref(w.mv)) for w in widgets]
    close_all(widgets)
    del widgets, b
    alive = _alive(refs)
    assert not alive, f"still alive: {alive}"


# ----- 6. threads ---------------------------------------------------------------------------------
def test_two_threads_get_the_serial_results(backend):
    target, view = backend.target(), backend.view()
    prompts = [view.to_tokens("the cat sat on the mat"), view.to_tokens("a dog ran to the park and back")]
    ids = list(range(3, 30))

    def work(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return cw.analysis.attention_patterns(target, prompts[i]), cw.analysis.full_ov_block(target, i, ids)

    serial = [work(0), work(1)]
    results: list[tuple[int, Any]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(i: int) -> None:
        try:
            barrier.wait()
            for _ in range(4):
                results.append((i, work(i)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 8
    for i, (patterns, ov) in results:
        assert torch.allclose(patterns, serial[i][0], atol=1e-6) and torch.allclose(ov, serial[i][1], atol=1e-6)


# ----- 7. bad input -------------------------------------------------------------------------------
def test_bad_input_is_refused_naming_the_argument(backend):
    b = backend
    view, target = b.view(), b.target()
    tokens = view.to_tokens(PROMPT)
    w = b.widget(cw.AttentionPattern, prompt=PROMPT)
    vocabulary = r"1000000.*vocabulary|vocabulary.*1000000"
    cases = [  # (what, call, exception, message pattern, whether the widget's error trait must show it)
        ("view.patterns([])", lambda: view.patterns([]), ValueError, "empty", False),
        ("attention_patterns(model, [])", lambda: cw.analysis.attention_patterns(target, []), ValueError, "empty", False),
        ("an id outside the vocabulary", lambda: view.patterns([[1, 2, 1_000_000]]), ValueError, vocabulary, False),
        ("to_tokens(123)", lambda: view.to_tokens(123), TypeError, "prompt", False),
        ("AttentionPattern(prompt=123)", lambda: b.widget(cw.AttentionPattern, prompt=123), TypeError, "prompt", False),
        ("patterns(layers=[7])", lambda: view.patterns(tokens, layers=[7]), ValueError, r"layer\W{0,3}7", False),
        ("ov_circuit(layer=5)", lambda: cw.analysis.ov_circuit(target, 5, 0), ValueError, r"layer\W{0,3}5", False),
        ("ov_circuit(head=9)", lambda: cw.analysis.ov_circuit(target, 0, 9), ValueError, r"head\W{0,3}9", False),
        ("widget.tokens = []", lambda: setattr(w, "tokens", []), traitlets.TraitError, "empty", True),
        ("widget.tokens = [1, 1000000]", lambda: setattr(w, "tokens", [1, 1_000_000]), traitlets.TraitError, vocabulary, True),
        ("widget.layer = 7", lambda: setattr(w, "layer", 7), traitlets.TraitError, r"layer\W{0,3}7", True),
        ("widget.head = 9", lambda: setattr(w, "head", 9), traitlets.TraitError, r"head\W{0,3}9", True),
        ("browser sets tokens []", lambda: w.set_state({"tokens": []}), None, "empty", True),  # shown, not raised
    ]
    problems = []
    for what, call, expected, pattern, shown in cases:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - every case is reported below
            if expected is None or not isinstance(exc, expected) or not re.search(pattern, str(exc)):
                problems.append(f"{what}: {type(exc).__name__}: {exc}")
        else:
            if expected is not None:
                problems.append(f"{what}: nothing raised")
        if shown and not re.search(pattern, w.error):
            problems.append(f"{what}: the widget shows {w.error!r}")
    assert not problems, "\n".join(problems)


# ----- 8. architectures TransformerLens cannot bridge; tokenizers built in memory ---------------------------------
@pytest.mark.parametrize("how", [w for w in WRAPPERS if w != "tl-bridge"])
def test_an_architecture_transformerlens_cannot_bridge_draws_patterns_and_says_why_not_weights(how):
    hf, tokenizer = hf_model("helium")
    with pytest.raises(Exception):  # noqa: B017, PT011 - the premise: TransformerLens 4 really cannot bridge it
        boot_bridge(copy.deepcopy(hf), tokenizer)
    b = wrap(how, hf, tokenizer)
    tokens = b.view().to_tokens(PROMPT)
    expected = eager_patterns(hf, tokens)
    assert_patterns(cw.analysis.attention_patterns(b.target(), tokens), expected[0], "attention_patterns")
    w = b.widget(cw.AttentionPattern, prompt=PROMPT, layer=1)
    assert w.error == ""
    step = transport.quantisation_step(w.patterns)
    assert_patterns(transport.decode(w.patterns), expected[0, 1], "AttentionPattern.patterns", atol=step + 1e-6)
    previous = expected[0, :, :, torch.arange(1, tokens.shape[1]), torch.arange(tokens.shape[1] - 1)].mean(-1)
    assert_patterns(cw.analysis.head_scores(b.target(), "previous_token", tokens), previous, "previous-token scores")
    assert b.widget(cw.HeadScores, kinds=["previous_token", "induction"]).error == ""
    message = message_of(lambda: b.widget(cw.OVCircuit, layer=0, accuracy=False))
    assert "weight" in message.lower() and ("Helium" in message or "TransformerLens" in message), message
    assert len(message) < 400 and "Available architectures" not in message, message
    with pytest.raises(ValueError, match="(?i)weight"):
        cw.analysis.copying_scores(b.target())


def in_memory(tokenizer: Any) -> Any:
    """The same tokenizer built in memory (never saved, so it has no name_or_path)."""
    from tokenizers import Tokenizer

    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(tokenizer.backend_tokenizer.to_str()),
        bos_token=tokenizer.bos_token, eos_token=tokenizer.eos_token, unk_token=tokenizer.unk_token,
        pad_token=tokenizer.pad_token,
    )


@pytest.mark.parametrize("name", HF_BACKENDS)
def test_a_tokenizer_built_in_memory_works_for_every_widget(name):
    how, kind = name.rsplit("-", 1)
    hf, saved = hf_model(kind)
    b = wrap(how, hf, in_memory(saved))
    widgets = [
        b.widget(cw.AttentionPattern, prompt=PROMPT),
        b.widget(cw.HeadScores),
        b.widget(cw.OVCircuit, prompt=PROMPT, accuracy=False),
        b.widget(cw.QKCircuit, prompt=PROMPT, positions=16),
        b.widget(cw.LogitAttribution, prompt=PROMPT),
        b.widget(cw.CompositionDiagram),
    ]
    assert [(type(w).__name__, w.error) for w in widgets] == [(type(w).__name__, "") for w in widgets]
    assert widgets[0].tokens == saved(PROMPT)["input_ids"]


# ----- 9. precision-aware refusal --------------------------------------------------------------------
def _with_a_sink(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention plus one extra key of logit `SINK_LOGIT` (as gpt-oss has): rows no longer sum to 1."""
    q, k, v = query.float(), key.float(), value.float()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) * (scaling if scaling is not None else q.shape[-1] ** -0.5)
    n = scores.shape[-1]
    scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=q.device).tril(), -math.inf)
    weights = torch.cat([scores, torch.full_like(scores[..., :1], SINK_LOGIT)], dim=-1).softmax(-1)[..., :-1]
    return (weights @ v).to(value.dtype).transpose(1, 2).contiguous(), None


transformers.AttentionInterface.register("cw_conformance_sink", _with_a_sink)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", HF_BACKENDS)
def test_low_precision_refuses_an_unknown_attention_term_and_only_that(name, dtype):
    b = make(name, dtype=dtype)
    tokens = b.view().to_tokens(PROMPT)
    got = cw.analysis.attention_patterns(b.target(), tokens)  # the model's own attention: drawn
    assert_patterns(got, eager_patterns(b.hf, tokens)[0], "patterns", atol=2e-2)
    b.hf.set_attn_implementation("cw_conformance_sink")
    with pytest.raises(ValueError, match="do not reproduce"):
        cw.analysis.attention_patterns(b.target(), tokens)
    assert "do not reproduce" in b.widget(cw.AttentionPattern, prompt=PROMPT).error


# ----- 10. padding, weights elsewhere -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tl-bridge-gpt2", *HF_BACKENDS])
def test_left_padding_gives_the_real_tokens_patterns_or_says_so(name):
    b = make(name)
    view = b.view()
    long, short = view.to_tokens("the cat sat on the mat")[0], view.to_tokens("a cat sat")[0]
    pad = len(long) - len(short)
    ids = torch.stack([long, torch.cat([torch.zeros(pad, dtype=long.dtype), short])])
    mask = torch.ones_like(ids)
    mask[1, :pad] = 0
    batch = transformers.BatchEncoding({"input_ids": ids, "attention_mask": mask})
    expected = eager_patterns(b.twin or b.hf, ids, attention_mask=mask)
    try:
        got = view.patterns(batch)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        assert "sink" not in message.lower() and "alibi" not in message.lower(), message
        assert "padding" in message or "attention_mask" in message, message
        return
    real = mask.bool()
    for i in range(2):
        r = real[i]
        assert_patterns(got[i][..., r, :][..., r], expected[i][..., r, :][..., r], f"patterns of sequence {i}")


def nnsight_from_folder(folder: Any, kind: str = "llama") -> tuple[Any, Any]:
    """``(nnsight model, the Hugging Face model it was saved from)``: ``LanguageModel(folder)``, whose weights
    stay on meta until dispatched (how a model for NDIF is made)."""
    hf, tokenizer = hf_model(kind)
    hf.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return nnsight.LanguageModel(str(folder), tokenizer=tokenizer), hf


@pytest.mark.parametrize("name", ["tl-demo", *HF_BACKENDS])
def test_weight_views_of_a_model_on_meta_say_the_weights_are_not_here(name, tmp_path):
    how, kind = name.rsplit("-", 1)
    if name == "tl-demo":
        model = cw.demo_model().to("meta")
        b = Backend(name, model, bridge=model)
    elif how == "nnsight-remote":  # weights on the server: the weight views are computed there (the simulated
        model, hf = nnsight_from_folder(tmp_path, kind)  # server loads them from the folder, as NDIF does)
        b = Backend(name, model, {"remote": "local"}, hf=hf)
        expected = reference_blocks(b, 0, [3, 4])[0]
        assert_relative(cw.analysis.full_ov_block(b.target(), 0, [3, 4]), expected, "full_ov_block, computed remotely")
        ov = b.widget(cw.OVCircuit, layer=0, tokens=[3, 4], accuracy=False)
        assert ov.error == "" and assert_relative(transport.decode(ov.values), expected, "OVCircuit.values") is None
        return
    elif how.startswith("nnsight"):  # nnsight cannot wrap a torch model on meta; it makes one from a folder
        b = Backend(name, nnsight_from_folder(tmp_path, kind)[0])
    else:
        try:
            b = wrap(how, *hf_model(kind, device="meta"))
        except ValueError as exc:  # a view that can neither run nor read the model may refuse to be built, saying why
            assert "not on this machine" in str(exc), str(exc)
            return
    for call in (lambda: cw.analysis.copying_scores(b.target()), lambda: cw.analysis.full_ov_block(b.target(), 0, [3, 4])):
        with pytest.raises(ValueError, match="not on this machine"):
            call()
    message = message_of(lambda: b.widget(cw.OVCircuit, layer=0, accuracy=False))
    assert "not on this machine" in message and "NotImplementedError" not in message, message


@pytest.mark.parametrize("remote", [False, "local"], ids=["nnsight", "nnsight-remote"])
def test_an_nnsight_model_dispatched_after_wrapping_has_its_weights(tmp_path, remote):
    model, hf = nnsight_from_folder(tmp_path)  # dispatch=False: weights on meta
    b = Backend("dispatched", model, {"remote": remote} if remote else {}, hf=hf)
    ov = b.widget(cw.OVCircuit, layer=1, tokens=list(range(3, 30)), accuracy=False)
    if not remote:  # (remote: computed where the weights are, tested above)
        with pytest.raises(ValueError, match="not on this machine"):
            cw.analysis.copying_scores(b.target())
        assert "not on this machine" in ov.error
    model.dispatch()  # the weights load into the wrapped model
    expected = reference_blocks(b, 1, list(range(3, 30)))[0]
    assert_relative(cw.analysis.full_ov_block(b.target(), 1, list(range(3, 30))), expected, "full_ov_block")
    ov.refresh()
    assert ov.error == ""
    assert_relative(transport.decode(ov.values), expected, "OVCircuit.values")
