"""Direct logit attribution: how much each head, embedding, MLP and bias adds to one logit.

Heads are independent and additive: the residual stream that reaches the unembedding is a sum of
terms (token and positional embeddings, each head's output ``z_h W_O^h``, each layer's ``b_O``,
each MLP's output), so a logit is a sum of one contribution per term. With a final LayerNorm
the sum is made linear by *freezing* the norm's scale at the position read (the standard
practice): each term is centred (its mean over ``d_model`` subtracted: LayerNorm only, not
RMSNorm, which does not centre), divided by that scale, multiplied by the norm's weight and read
along the unembedding column ``W_U[:, target]``. The terms then sum exactly to the model's logit.

Terms (keys of `Attribution`, in this order):

- ``"embed"``: the token embedding; ``"pos_embed"``: the learned positional embedding (absent
  for rotary and other models whose positions do not enter the residual stream);
- ``"L{l}H{h}"``: head h of layer l, ``z_h W_O^h`` (its output without ``b_O``);
- ``"mlp{l}"``: the MLP of block l, its biases included (models with MLPs only);
- ``"bias"``: the attention output biases ``b_O``, counted once per layer and summed over layers;
- ``"b_U"``: the unembedding bias of the target, plus the final LayerNorm's bias read through
  ``W_U`` (``b_U + b_ln W_U``, the folded bias of TransformerLens' ``fold_ln``): the part that
  does not depend on the residual stream.

With ``baseline_token`` every contribution is to ``logit[target] - logit[baseline]``: each term
read along ``W_U[:, target] - W_U[:, baseline]``.

Example:
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> attr = cw.analysis.logit_attribution(model, "abcdabc", position=-2)   # target: the next token, "c"
    >>> list(attr)[:3], attr.heads.shape
    (['embed', 'pos_embed', 'L0H0'], torch.Size([2, 4]))
    >>> abs(sum(attr.values()) - attr.logit) < 1e-4
    True
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..model import ModelView, as_view


@dataclass(frozen=True, eq=False)
class Attribution(Mapping):
    """The direct contribution of every term to one logit (or logit difference): a mapping name -> float.

    Attributes:
        terms: ``{name: contribution}`` in the order of the module docstring (the mapping itself).
        heads: ``[n_attn_layers, n_heads]`` float32, the head terms as a grid (TransformerLens order).
        layers: block index of each row of `heads`.
        position: the position read (non-negative). target, baseline: token ids (baseline None
            for a plain logit).
        logit: the model's own logit of `target` at `position` (minus the baseline's), from the same run.
        norm: "LN" (terms centred, scale frozen), "RMS" (scale frozen, not centred) or None.
        scale: the frozen final-norm scale at `position`, None without a final norm.
    """

    terms: dict[str, float]
    heads: torch.Tensor
    layers: list[int]
    position: int
    target: int
    baseline: int | None
    logit: float
    norm: str | None
    scale: float | None

    def __getitem__(self, name: str) -> float:
        return self.terms[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    def total(self) -> float:
        """Sum of every term: the model's `logit` (up to float32 rounding)."""
        return float(sum(self.terms.values()))


@dataclass(frozen=True, eq=False)
class PositionAttribution:
    """Direct contributions at every position of a sequence (see `logit_attribution_by_position`).

    Attributes:
        heads: ``[seq, n_attn_layers, n_heads]`` float32 head terms (NaN at a position without a target).
        others: ``{name: [seq]}`` the other terms ("embed", "pos_embed", "mlp{l}", "bias", "b_U").
        targets: the target id at each position (None where there is none: the last position
            when targets are the next tokens). baseline: the baseline id or None.
        logits: ``[seq]`` the model's logit (or difference) at each position, NaN without a target.
        layers, norm: as in `Attribution`. scale: ``[seq]`` the frozen final-norm scale, or None.
    """

    heads: torch.Tensor
    others: dict[str, torch.Tensor]
    targets: list[int | None]
    baseline: int | None
    logits: torch.Tensor
    layers: list[int]
    norm: str | None
    scale: torch.Tensor | None

    def names(self) -> list[str]:
        """Every term's name, in the order of the module docstring."""
        return list(_ordered(self.layers, self.heads.shape[-1], self.others, lambda row, h: None))

    def total(self) -> torch.Tensor:
        """``[seq]`` sum of every term at each position: `logits` up to float32 rounding."""
        return self.heads.sum((1, 2)) + sum(self.others.values(), torch.zeros_like(self.logits))

    def at(self, position: int) -> Attribution:
        """The `Attribution` at one position (negative counts from the end)."""
        seq = self.heads.shape[0]
        position = _position(position, seq)
        target = self.targets[position]
        if target is None:
            raise ValueError(f"position {position} has no target (no next token after it): pass target=")
        others = {name: float(value[position]) for name, value in self.others.items()}
        grid = self.heads[position]
        return Attribution(
            terms=_ordered(self.layers, grid.shape[-1], others, lambda row, h: float(grid[row, h])),
            heads=self.heads[position].clone(),
            layers=list(self.layers),
            position=position,
            target=target,
            baseline=self.baseline,
            logit=float(self.logits[position]),
            norm=self.norm,
            scale=None if self.scale is None else float(self.scale[position]),
        )


def _ordered(layers: list[int], n_heads: int, others: dict[str, Any], head: Any) -> dict[str, Any]:
    """Terms in reading order: embeddings, then per block its heads and its MLP, then the biases."""
    out: dict[str, Any] = {name: others[name] for name in ("embed", "pos_embed") if name in others}
    for block in sorted({*layers, *(int(n[3:]) for n in others if n.startswith("mlp"))}):
        if block in layers:
            row = layers.index(block)
            out.update({f"L{block}H{h}": head(row, h) for h in range(n_heads)})
        if f"mlp{block}" in others:
            out[f"mlp{block}"] = others[f"mlp{block}"]
    out.update({name: others[name] for name in ("bias", "b_U")})
    return out


def _position(position: Any, seq: int) -> int:
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError(f"position must be an int; got {position!r}")
    if not -seq <= position < seq:
        raise ValueError(f"position={position} is out of range for {seq} tokens: use 0..{seq - 1} (or -{seq}..-1)")
    return position % seq


def _token(view: ModelView, value: Any, what: str) -> int:
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype.is_floating_point:
        value = int(value)
    if not isinstance(value, (int, str)) or isinstance(value, bool):
        raise TypeError(f"{what} must be a token id (int) or a one-token string; got {value!r}")
    try:
        return view.token_ids([value])[0]
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{what}: {exc}") from None


def _sequence(view: ModelView, tokens: Any) -> torch.Tensor:
    ids = view.tokens_of(tokens)
    if ids.shape[0] != 1:
        raise ValueError(f"tokens must be one sequence; got a batch of {ids.shape[0]}")
    return ids


def logit_attribution_by_position(
    model: Any, tokens: Any, target: Any = None, baseline_token: Any = None, *, residual: dict[str, Any] | None = None
) -> PositionAttribution:
    """Direct logit attribution at every position of `tokens`, from one run of the model.

    `target`: None reads at each position the logit of the token that follows it (the last
    position then has no target: NaN there); a token id or one-token string reads that token's
    logit at every position. `baseline_token`: read ``logit[target] - logit[baseline]`` instead.
    The final norm's scale is frozen at each position separately (see the module docstring).
    `residual`: the `ModelView.residual_terms` of these tokens when already at hand (a widget
    keeps them, so that another target costs no model run); by default the model runs once.
    The terms are reduced where the model runs (`ModelView.logit_terms`, `circuitwidgets.logit_terms`):
    a model whose weights stay there (``remote=``) computes them in one trace per call and ignores
    `residual` (its activations never come here), refusing terms that do not sum to its logit.

    Example:
        >>> import circuitwidgets as cw
        >>> by_pos = cw.analysis.logit_attribution_by_position(cw.demo_model(), "abcabc")
        >>> by_pos.heads.shape, by_pos.targets[-2:]
        (torch.Size([7, 2, 4]), [4, None])
        >>> bool((by_pos.total() - by_pos.logits)[:-1].abs().max() < 1e-4)
        True
    """
    view = as_view(model)
    ids = _sequence(view, tokens)
    seq = ids.shape[1]
    fixed = None if target is None else _token(view, target, "target")
    baseline = None if baseline_token is None else _token(view, baseline_token, "baseline_token")
    row = ids[0].tolist()
    targets: list[int | None] = [fixed] * seq if fixed is not None else [*row[1:], None]
    if residual is not None and residual["resid"].shape[0] != seq:
        raise ValueError(f"residual holds {residual['resid'].shape[0]} positions; tokens has {seq}")
    known = [t is not None for t in targets]
    request = {"targets": [0 if t is None else t for t in targets], "baseline": baseline, "known": known}
    found = view.logit_terms(ids, request, residual)  # (where the model runs: one float per term and position back)
    mask = torch.tensor(known)
    nan = torch.tensor(float("nan"))
    return PositionAttribution(
        heads=torch.where(mask[:, None, None], found["heads"].float(), nan),
        others={name: torch.where(mask, value.float(), nan) for name, value in found["others"].items()},
        targets=targets,
        baseline=baseline,
        logits=torch.where(mask, found["logits"].float(), nan),
        layers=list(view.attn_layers),
        norm=view.final_norm,
        scale=found["scale"],
    )


def logit_attribution(
    model: Any, tokens: Any, position: int = -1, target: Any = None, baseline_token: Any = None
) -> Attribution:
    """The direct contribution of every head, embedding, MLP and bias to one logit (see the module docstring).

    Args:
        model: a TransformerLens model or a `circuitwidgets.ModelView`.
        tokens: a prompt (tokenised with BOS) or one sequence of token ids.
        position: the position whose logits are read (negative counts from the end).
        target: the token whose logit is explained, an id or a one-token string. Default: the
            token that follows `position` in `tokens` (so the last position needs a `target`).
        baseline_token: explain ``logit[target] - logit[baseline_token]`` instead.

    Returns an `Attribution`: a mapping from term name to a float, with the head terms also
    as a ``[n_attn_layers, n_heads]`` tensor (``.heads``) and the model's own logit (``.logit``);
    the terms sum to it to float32 rounding.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> attr = cw.analysis.logit_attribution(model, "abcdabcd", position=-1, target="a", baseline_token="b")
        >>> attr.target, attr.baseline, round(attr.total() - attr.logit, 4) == 0
        (2, 3, True)
    """
    view = as_view(model)
    ids = _sequence(view, tokens)
    seq = ids.shape[1]
    where = _position(position, seq)
    if target is None and where == seq - 1:
        raise ValueError(
            f"position {where} is the last of the {seq} tokens: there is no next token to explain; pass target= "
            "(a token id or a one-token string)"
        )
    return logit_attribution_by_position(view, ids, target, baseline_token).at(where)
