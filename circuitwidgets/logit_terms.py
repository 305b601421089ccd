"""Direct logit attribution: one implementation of its reduction, run here or where the model runs (a trace).

A position's logit (minus a baseline's) is read off the residual stream entering the final norm along
one direction, the folded unembedding column of that position's target: each term of the stream
(the embeddings, every head's ``z_h W_O[h]``, every MLP's output, the output biases) read along it,
centred with LayerNorm, divided by the final norm's scale frozen at that position, plus a constant
(the unembedding bias and the final norm's bias read through ``W_U``): `circuitwidgets.analysis.
logit_attribution_by_position` defines them. `read_along`, `head_reads` and `assemble` are that
reduction; `from_residual` runs it on a local run's terms (`ModelView.residual_terms`), `in_trace`
inside an nnsight trace of the prompt, where it reads, in the order the model computes them, the
token (and learned positional) embedding, each layer's input to its output projection and its MLP's
output, the residual entering the final norm and the logits: ``seq · (layers · heads + layers + 5)``
floats come back, no activation leaves the server.

Like `circuitwidgets.raw_weights` (whose `output_heads` it uses), this module imports only torch
and the shipped modules, and is shipped by value.

Example:
    >>> import torch
    >>> spec = {"layout": "linear", "n_heads": 2, "d_head": 2, "norm": "RMS", "eps": 1e-6}
    >>> resid = torch.randn(3, 4)
    >>> bool(torch.allclose(final_scale(spec, resid), resid.pow(2).mean(-1).add(1e-6).sqrt()))
    True
"""

import torch

from .raw_weights import _f32, output_heads

#: Cells of a ``[positions, heads, d_head]`` block of head reads built at once (4 MB in float32).
CHUNK_CELLS = 1 << 20


def _first(value):
    """A module's activation ``[seq, d_model]`` of the one sequence: its output may be a tuple (hidden state first)."""
    value = value[0] if isinstance(value, (tuple, list)) else value
    return _f32(value[0]).float()


def final_scale(spec, resid):
    """The final norm's scale ``[seq]`` at each position of the residual `resid` ``[seq, d_model]``: LayerNorm
    ``sqrt(var + eps)`` (population variance), RMSNorm ``sqrt(mean(x²) + eps)``; None without a final norm."""
    if spec.get("norm") == "LN":
        return (resid.var(-1, unbiased=False) + spec["eps"]).sqrt()
    if spec.get("norm") == "RMS":
        return (resid.pow(2).mean(-1) + spec["eps"]).sqrt()
    return None


def read_along(x, read):
    """``[seq]``: each position's ``x`` ``[seq, d_model]`` read along that position's `read`."""
    return (x.float() * read.to(x.device)).sum(-1).to(read.device)


def head_reads(z, W_O, read):
    """``[seq, heads]``: head h's output ``z_h W_O[h]`` (``z`` ``[seq, heads, d_head]``, ``W_O`` ``[heads, d_head,
    d_model]``) at each position, read along that position's `read`; a block of positions at a time (never
    ``[seq, heads, d_model]``)."""
    n, d_head = W_O.shape[0], W_O.shape[1]
    z = z.float().reshape(z.shape[0], n, d_head)
    W_O, read = W_O.float().to(z.device), read.to(z.device)
    out = torch.empty(z.shape[0], n, device=z.device)
    step = max(1, CHUNK_CELLS // (n * d_head))
    for start in range(0, z.shape[0], step):
        stop = min(z.shape[0], start + step)
        through = torch.einsum("hdm,sm->shd", W_O, read[start:stop])
        out[start:stop] = (z[start:stop] * through).sum(-1)
    return out


def centred(read, norm):
    """`read` minus its mean over ``d_model`` with LayerNorm (``norm`` "LN"): centring each term is reading it along
    the centred direction."""
    return read - read.mean(-1, keepdim=True) if norm == "LN" else read


def assemble(heads, others, b_O, constant, read, scale, logits):
    """The answer: ``{"heads": [seq, layers, heads], "others": {name: [seq]}, "logits": [seq], "scale": [seq] or
    None}`` float32 on the CPU, every term divided by the frozen `scale`, with ``"bias"`` (the summed output biases
    `b_O` read along `read`) and ``"b_U"`` (the `constant`) last among the others."""
    others = dict(others)
    others["bias"] = torch.zeros_like(constant) if b_O is None else read @ b_O.float().to(read.device)
    stacked = torch.stack([h.to(read.device) for h in heads], dim=1)
    if scale is not None:
        scale = scale.float().to(read.device)
        stacked = stacked / scale[:, None, None]
        others = {name: value / scale for name, value in others.items()}
    others["b_U"] = constant
    return {
        "heads": stacked.cpu(),
        "others": {name: value.cpu() for name, value in others.items()},
        "logits": logits.float().cpu(),
        "scale": None if scale is None else scale.cpu(),
    }


def target_logits(logits, targets, baseline):
    """``[seq]``: each position's logit of its target, minus the baseline's."""
    chosen = torch.tensor(targets, dtype=torch.long, device=logits.device)
    logit = logits.gather(1, chosen[:, None])[:, 0]
    return logit if baseline is None else logit - logits[:, baseline]


def from_residual(weights, residual, request, norm):
    """The terms from a local run's `residual` (`ModelView.residual_terms`) and the folded `weights`
    (`circuitwidgets.backends.weights.Weights`: the final norm is in ``W_U`` and ``b_U``); `request` as `in_trace`'s,
    `norm` the final norm ("LN", "RMS" or None)."""
    targets, baseline = request["targets"], request.get("baseline")
    with torch.no_grad():
        W_U, b_U = weights.W_U, weights.b_U
        chosen = torch.tensor(targets, dtype=torch.long, device=W_U.device)
        read, constant = W_U[:, chosen].T.float(), b_U[chosen].float()
        if baseline is not None:
            read, constant = read - W_U[:, baseline].float(), constant - b_U[baseline].float()
        read = centred(read, norm)
        others = {"embed": read_along(residual["embed"], read)}
        if residual["pos_embed"] is not None:
            others["pos_embed"] = read_along(residual["pos_embed"], read)
        for block, out in residual["mlp_out"].items():
            others[f"mlp{block}"] = read_along(out, read)
        heads = [head_reads(z, W_O, read) for z, W_O in zip(residual["z"], weights.W_O, strict=True)]
        logits = target_logits(residual["logits"], targets, baseline)
        return assemble(heads, others, weights.b_O.sum(0), constant, read, residual["scale"], logits)


def read_directions(spec, parts, targets, baseline):
    """``(read [seq, d_model], constant [seq])`` from a trace's raw unembedding and final norm: each position's
    residual is read along `read` (not yet divided by the scale) and its logit gets `constant` (the unembedding
    bias and the final norm's bias read through ``W_U``)."""
    lm_head = parts["unembed"]
    device = lm_head.weight.device
    chosen = torch.tensor(targets, dtype=torch.long, device=device)
    read = _f32(lm_head.weight[chosen]).float()
    bias = getattr(lm_head, "bias", None)
    constant = torch.zeros(len(targets), device=device) if bias is None else _f32(bias[chosen]).float()
    if baseline is not None:
        read = read - _f32(lm_head.weight[baseline]).float()[None]
        if bias is not None:
            constant = constant - _f32(bias[baseline]).float()
    norm = parts.get("final")
    if norm is not None and getattr(norm, "bias", None) is not None:
        constant = constant + read @ _f32(norm.bias).float().to(device)
    if norm is not None and getattr(norm, "weight", None) is not None:
        read = read * _f32(norm.weight).float().to(device)
    return centred(read, spec.get("norm")), constant


def in_trace(spec, parts, request):
    """The terms of one run's logit attribution, from the envoys `parts` (inside the trace of the prompt).

    `request`: ``targets`` (a token id per position, any id where there is none), ``baseline`` (an id or None).
    `parts`: ``embed``, ``pos`` (or None), ``layers`` (each ``{"o": output projection, "mlp": MLP}``), ``final``
    (the final norm, or None), ``unembed``. Returns `assemble`'s answer (names as in `PositionAttribution`).
    """
    targets, baseline = request["targets"], request.get("baseline")
    with torch.no_grad():
        read, constant = read_directions(spec, parts, targets, baseline)
        others, heads, bias = {}, [], None
        others["embed"] = read_along(_first(parts["embed"].output), read)
        if parts.get("pos") is not None:
            others["pos_embed"] = read_along(_first(parts["pos"].output), read)
        for index, layer in enumerate(parts["layers"]):
            z = _first(layer["o"].input)
            W_O = output_heads(spec, layer["o"].weight)
            heads.append(head_reads(z.reshape(z.shape[0], W_O.shape[0], -1), W_O, read).to(read.device))
            if getattr(layer["o"], "bias", None) is not None:
                b_O = _f32(layer["o"].bias).float().to(read.device)
                bias = b_O if bias is None else bias + b_O
            others[f"mlp{index}"] = read_along(_first(layer["mlp"].output), read)
        resid = _first(parts["final"].input) if parts.get("final") is not None else None
        logits = target_logits(_first(parts["unembed"].output), targets, baseline)
        scale = None if resid is None else final_scale(spec, resid)
        return assemble(heads, others, bias, constant, read, scale, logits)
