"""Direct logit attribution computed where the model runs: inside an nnsight trace, locally or on NDIF.

Like `circuitwidgets.in_trace_weights` (whose `output_heads` it uses), this module imports nothing
but ``torch`` and is shipped by value with each request. During one run of the prompt it reads, in
the order the model computes them, the token (and learned positional) embedding, each layer's input
to its output projection (every head's ``z``) and its MLP's output, the residual entering the final
norm and the logits, and reduces them at once to one number per term and position, as
`circuitwidgets.analysis.logit_attribution_by_position` defines them: each term read along the
folded unembedding direction of that position's target (minus the baseline's), centred with
LayerNorm, divided by the final norm's scale frozen at that position. What comes back is
``seq · (layers · heads + layers + 5)`` floats; no activation leaves the server.

Example:
    >>> import torch
    >>> spec = {"layout": "linear", "n_heads": 2, "d_head": 2, "norm": "RMS", "eps": 1e-6}
    >>> resid = torch.randn(3, 4)
    >>> bool(torch.allclose(final_scale(spec, resid), resid.pow(2).mean(-1).add(1e-6).sqrt()))
    True
"""

import torch

from .in_trace_weights import output_heads

#: Cells of a ``[positions, heads, d_head]`` block of head reads built at once (4 MB in float32).
CHUNK_CELLS = 1 << 20


def _f32(tensor):
    return tensor.detach().to(torch.float32)


def _first(value):
    """A module's activation ``[seq, d_model]`` of the one sequence: its output may be a tuple (hidden state first)."""
    value = value[0] if isinstance(value, (tuple, list)) else value
    return _f32(value[0])


def final_scale(spec, resid):
    """The final norm's scale ``[seq]`` at each position of the residual `resid` ``[seq, d_model]``: LayerNorm
    ``sqrt(var + eps)`` (population variance), RMSNorm ``sqrt(mean(x²) + eps)``; None without a final norm."""
    if spec.get("norm") == "LN":
        return (resid.var(-1, unbiased=False) + spec["eps"]).sqrt()
    if spec.get("norm") == "RMS":
        return (resid.pow(2).mean(-1) + spec["eps"]).sqrt()
    return None


def read_directions(spec, parts, targets, baseline):
    """``(read [seq, d_model], constant [seq])``: each position's residual is read along `read` (not yet divided by
    the scale) and its logit gets `constant` (the unembedding bias and the final norm's bias read through ``W_U``)."""
    lm_head = parts["unembed"]
    device = lm_head.weight.device
    chosen = torch.tensor(targets, dtype=torch.long, device=device)
    read = _f32(lm_head.weight[chosen])
    bias = getattr(lm_head, "bias", None)
    constant = torch.zeros(len(targets), device=device) if bias is None else _f32(bias[chosen])
    if baseline is not None:
        read = read - _f32(lm_head.weight[baseline])[None]
        if bias is not None:
            constant = constant - _f32(bias[baseline])
    norm = parts.get("final")
    if norm is not None and getattr(norm, "bias", None) is not None:
        constant = constant + read @ _f32(norm.bias).to(device)
    if norm is not None and getattr(norm, "weight", None) is not None:
        read = read * _f32(norm.weight).to(device)
    if spec.get("norm") == "LN":  # centring each term == reading along the centred direction
        read = read - read.mean(-1, keepdim=True)
    return read, constant


def head_reads(spec, z, W_O, read):
    """``[seq, heads]``: head h's output ``z_h W_O[h]`` at each position, read along that position's `read`;
    a block of positions at a time (never ``[seq, heads, d_model]``)."""
    n, d_head = spec["n_heads"], spec["d_head"]
    z = z.reshape(z.shape[0], n, d_head)
    out = torch.empty(z.shape[0], n, device=z.device)
    step = max(1, CHUNK_CELLS // (n * d_head))
    for start in range(0, z.shape[0], step):
        stop = min(z.shape[0], start + step)
        through = torch.einsum("hdm,sm->shd", W_O, read[start:stop])
        out[start:stop] = (z[start:stop] * through).sum(-1)
    return out


def logit_attribution(spec, parts, request):
    """The terms of one run's logit attribution, from the envoys `parts` (inside the trace of the prompt).

    `request`: ``targets`` (a token id per position, any id where there is none), ``baseline`` (an id or None).
    `parts`: ``embed``, ``pos`` (or None), ``layers`` (each ``{"o": output projection, "mlp": MLP}``), ``final``
    (the final norm, or None), ``unembed``. Returns ``{"heads": [seq, layers, heads], "others": {name: [seq]},
    "logits": [seq], "scale": [seq] or None}`` float32 on the CPU (names as in `PositionAttribution`).
    """
    targets, baseline = request["targets"], request.get("baseline")
    with torch.no_grad():
        read, constant = read_directions(spec, parts, targets, baseline)
        others, heads, bias = {}, [], None
        embed = _first(parts["embed"].output)
        others["embed"] = (embed * read.to(embed.device)).sum(-1)
        if parts.get("pos") is not None:
            pos = _first(parts["pos"].output)
            others["pos_embed"] = (pos * read.to(pos.device)).sum(-1)
        for index, layer in enumerate(parts["layers"]):
            z = _first(layer["o"].input)
            here = read.to(z.device)
            heads.append(head_reads(spec, z, output_heads(spec, layer["o"].weight).to(z.device), here).to(read.device))
            if getattr(layer["o"], "bias", None) is not None:
                b_O = _f32(layer["o"].bias).to(read.device)
                bias = b_O if bias is None else bias + b_O
            out = _first(layer["mlp"].output)
            others[f"mlp{index}"] = (out * read.to(out.device)).sum(-1).to(read.device)
        others["bias"] = torch.zeros_like(constant) if bias is None else read @ bias
        resid = _first(parts["final"].input) if parts.get("final") is not None else None
        logits = _first(parts["unembed"].output)
        chosen = torch.tensor(targets, dtype=torch.long, device=logits.device)
        logit = logits.gather(1, chosen[:, None])[:, 0]
        if baseline is not None:
            logit = logit - logits[:, baseline]
        scale = None if resid is None else final_scale(spec, resid).to(read.device)
        stacked = torch.stack(heads, dim=1)
        if scale is not None:
            stacked = stacked / scale[:, None, None]
            others = {name: value.to(read.device) / scale for name, value in others.items()}
        others["b_U"] = constant
        return {
            "heads": stacked.cpu(),
            "others": {name: value.cpu() for name, value in others.items()},
            "logits": logit.cpu(),
            "scale": None if scale is None else scale.cpu(),
        }
