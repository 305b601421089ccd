"""Logit attribution of a model whose weights stay where it runs (issue 22): reduced in the trace of the prompt.

The remote side is nnsight's ``remote="local"`` (the request serialised as for NDIF, run here); the
view is told its weights are not on this machine (``weights_local = False``, as a meta-device nnsight
model reports), so `logit_attribution_by_position` and `LogitAttribution` compute the terms inside one
trace (`circuitwidgets.logit_terms`) and download one float per term and position. Compared
with the local attribution on the same model (a TransformerLens bridge of it, run here), to 1e-5 of
the largest term; the weights are redrawn away from their initial scale (norm weights off 1, biases
off 0) so that the folding and every bias term count.
"""

from __future__ import annotations

import pytest
import torch
from test_remote_weights import remote_pair

import circuitwidgets as cw
from circuitwidgets import logit_terms, transport
from circuitwidgets.analysis import logit_attribution, logit_attribution_by_position

PROMPT = "abcdabcdab"


@pytest.fixture(scope="module", params=["llama", "gpt2", "neox"])
def pair(request):
    return remote_pair(request.param)


def close(remote: torch.Tensor, local: torch.Tensor) -> None:
    assert remote.shape == local.shape
    assert torch.equal(remote.isnan(), local.isnan())
    scale = max(1.0, float(local.nan_to_num().abs().max()))
    assert float((remote - local).nan_to_num().abs().max()) <= 1e-5 * scale


def same(theirs, ours) -> None:
    close(theirs.heads, ours.heads)
    assert list(theirs.others) == list(ours.others) and theirs.names() == ours.names()
    for name in ours.others:
        close(theirs.others[name], ours.others[name])
    close(theirs.logits, ours.logits)
    close(theirs.total(), ours.total())
    assert theirs.targets == ours.targets and theirs.baseline == ours.baseline and theirs.norm == ours.norm
    assert (theirs.scale is None) == (ours.scale is None)
    if ours.scale is not None:
        close(theirs.scale, ours.scale)


@pytest.mark.parametrize("target, baseline", [(None, None), ("a", None), (5, "b")])
def test_every_term_at_every_position_equals_the_local_attribution_in_one_trace(pair, target, baseline):
    local, remote, _ = pair
    assert not remote.supports("weights_here") and remote.supports("weight_views") and local.supports("weights_here")
    traces, received = remote.backend.traces, remote.backend.bytes_received
    theirs = logit_attribution_by_position(remote, PROMPT, target, baseline)
    assert remote.backend.traces == traces + 1
    ours = logit_attribution_by_position(local, PROMPT, target, baseline)
    same(theirs, ours)
    assert float(ours.heads.nan_to_num().abs().max()) > 0.1  # the terms are not negligible: the tolerance means something
    # what came back: one float32 per head, other term, logit and scale at each position, nothing else
    seq, layers, heads = theirs.heads.shape
    floats = seq * (layers * heads + len(theirs.others) + 1 + (theirs.scale is not None))
    assert remote.backend.bytes_received - received == 4 * floats


def test_the_terms_sum_to_the_models_own_logits(pair):
    local, remote, model = pair
    ids = remote.tokens_of(PROMPT)
    theirs = logit_attribution_by_position(remote, ids)
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    want = logits[torch.arange(ids.shape[1] - 1), ids[0, 1:]]
    assert float((theirs.total()[:-1] - want).abs().max()) <= 1e-4 * max(1.0, float(want.abs().max()))
    assert theirs.targets[-1] is None and bool(theirs.heads[-1].isnan().all())


def test_one_position_as_a_mapping(pair):
    local, remote, _ = pair
    theirs = logit_attribution(remote, PROMPT, position=-1, target="c", baseline_token="d")
    ours = logit_attribution(local, PROMPT, position=-1, target="c", baseline_token="d")
    assert list(theirs) == list(ours)
    assert max(abs(theirs[name] - ours[name]) for name in ours) <= 1e-5 * max(1.0, max(abs(v) for v in ours.values()))
    assert theirs.position == ours.position and theirs.target == ours.target


def test_the_widget_draws_what_the_local_one_draws_and_reuses_its_traces(pair):
    local, remote, _ = pair
    before = remote.backend.traces
    theirs = cw.LogitAttribution(remote, prompt=PROMPT)
    ours = cw.LogitAttribution(local, prompt=PROMPT)
    assert theirs.error == "" and ours.error == ""
    assert remote.backend.traces == before + 1
    for key in ("names", "targets", "norm", "shape"):
        assert theirs.attribution[key] == ours.attribution[key]
    close(transport.decode(theirs.attribution), transport.decode(ours.attribution))
    theirs.target = ours.target = 7  # a new target: one more trace; going back to one seen: none
    assert remote.backend.traces == before + 2
    close(transport.decode(theirs.attribution), transport.decode(ours.attribution))
    theirs.target = None
    assert remote.backend.traces == before + 2 and theirs.error == ""


def test_a_residual_writer_the_trace_does_not_read_is_refused_not_drawn(pair):
    """A module that adds to the residual stream outside the terms read (here a hook on a layer's output) leaves the
    terms short of the logit: the analysis says so instead of returning a plausible wrong split."""
    _, remote, model = pair
    layer = [m for name, m in model.named_modules() if name.endswith(("layers.0", "h.0"))][0]
    shift = torch.randn(model.config.hidden_size, generator=torch.Generator().manual_seed(0))

    def add(module, inputs, output):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden = hidden + shift
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = layer.register_forward_hook(add)
    try:
        with pytest.raises(ValueError, match="do not sum to its logit"):
            logit_attribution_by_position(remote, PROMPT)
    finally:
        handle.remove()
    logit_attribution_by_position(remote, PROMPT)  # the hook gone, it sums again


def test_a_nan_in_the_run_is_an_error_not_a_picture(pair):
    _, remote, model = pair
    mlp = [m for name, m in model.named_modules() if name.endswith(("layers.1.mlp", "h.1.mlp"))][0]
    handle = mlp.register_forward_hook(lambda module, inputs, output: output * float("nan"))
    try:
        with pytest.raises(ValueError, match="NaN/Inf"):
            logit_attribution_by_position(remote, PROMPT)
        w = cw.LogitAttribution(remote, prompt=PROMPT)
        assert "NaN/Inf" in w.error
    finally:
        handle.remove()


def test_final_scale_matches_the_norm_modules():
    resid = torch.randn(5, 16)
    ln = torch.nn.LayerNorm(16, eps=1e-5, elementwise_affine=False)
    scale = logit_terms.final_scale({"norm": "LN", "eps": 1e-5}, resid)
    assert torch.allclose(ln(resid), (resid - resid.mean(-1, keepdim=True)) / scale[:, None], atol=1e-6)
    rms = torch.nn.RMSNorm(16, eps=1e-6, elementwise_affine=False)
    scale = logit_terms.final_scale({"norm": "RMS", "eps": 1e-6}, resid)
    assert torch.allclose(rms(resid), resid / scale[:, None], atol=1e-6)
    assert logit_terms.final_scale({"norm": None}, resid) is None
