"""`LogitAttribution`: the direct contribution of every head (and embedding, MLP, bias) to one logit."""

from __future__ import annotations

import math
from typing import Any

import torch
import traitlets

from .. import analysis, progress
from . import _cache
from .sequence import SequenceWidget


class LogitAttribution(SequenceWidget, view="attribution"):
    """Direct logit attribution on a prompt: a layer × head grid, bars for the other terms, and positions × heads.

    Every head adds its output to the residual stream, so the logit of the out token at a
    destination position is a sum of one term per head plus the embeddings, MLPs and biases
    (`circuitwidgets.analysis.logit_attribution`, whose docstring defines each term). With a final
    LayerNorm the norm's scale is frozen at the position read and each term centred (RMSNorm:
    frozen, not centred), as the widget's caption says; the terms sum to the model's logit.

    The kernel computes every position at once (one model run), so clicking a token (the
    position) or a head (the head traced over positions) redraws in the browser; a new prompt
    re-runs the model, a new target or baseline reuses that run's residual terms.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``, a Hugging Face or nnsight model
            (an nnsight model whose weights stay on NDIF: the terms are computed there, one request per
            prompt, target and baseline, and only they come back).
        prompt: text to run (tokenised with BOS); or tokens: token ids ``[seq]`` or ``[1, seq]``.
        position: the destination position read (negative counts from the end). Default: the
            second to last when the target is each position's next token (the last has none),
            else the last.
        target: the out token: None for each position's next token, or a token id or one-token string.
        baseline_token: explain ``logit[target] - logit[baseline]`` instead (None: the plain logit).
        layer, head: the head selected (its row in the positions × heads view is outlined).
        defer: inside a running event loop (a notebook kernel), show the widget at once with its
            progress note and run the model just after the cell returns (as a `Dashboard` does).

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.LogitAttribution(cw.demo_model(), prompt="abcdabcd")
        >>> w.position, w.attribution["shape"], w.attribution["targets"][-2]
        (-2, [9, 12], 5)
    """

    controls = ("position", "target", "baseline_token", "target_text", "baseline_text", "show_prompt")
    inputs = ("target", "baseline_token")  # a layer, head or position redraws in the browser: every one is sent

    position = traitlets.Int(
        -1, help="destination position read (negative counts from the end); clicking a token sets it"
    ).tag(sync=True)
    target = traitlets.Int(
        None, allow_none=True, help="id of the out token: None for each position's next token (the constructor also "
        "takes a one-token string)"
    ).tag(sync=True)
    baseline_token = traitlets.Int(
        None, allow_none=True, help="id of the token whose logit is subtracted (a logit difference), or None"
    ).tag(sync=True)
    target_text = traitlets.Unicode(
        "", help="the target as typed in the widget: a one-token string ('' for the next token), resolved into target"
    ).tag(sync=True)
    baseline_text = traitlets.Unicode(
        "", help="the baseline as typed in the widget ('' for none), resolved into baseline_token"
    ).tag(sync=True)
    attribution = traitlets.Dict(
        help="payload: float32 [seq, n_terms], every term at every position (NaN where a position has no target); "
        "terms in `names` (heads first, 'L{l}H{h}' in layer order), with targets, their strings, the model's logits, "
        "the norm and its frozen scales"
    ).tag(sync=True)
    show_prompt = traitlets.Bool(
        True, help="show the prompt box (a Dashboard hides it: its tokens follow the attention pattern's)"
    ).tag(sync=True)
    info = traitlets.Dict(help="model facts the controls need (layers, heads, tokenizer or not, final norm)").tag(sync=True)

    def __init__(
        self, model: Any, prompt: str | None = None, *, tokens: Any = None, position: int | None = None,
        target: Any = None, baseline_token: Any = None, layer: int | None = None, head: int = 0, defer: bool = False,
        **kwargs: Any,
    ) -> None:
        self._check_keywords(kwargs)  # a typo first: it may be the missing prompt
        if prompt is not None and tokens is not None:
            raise ValueError("pass either prompt or tokens, not both")
        if prompt is None and tokens is None:
            raise ValueError("pass prompt= (text) or tokens= (token ids) to attribute")
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        self._result: Any = None
        if layer is not None:
            kwargs["layer"] = layer
        super().__init__(model, head=head, **kwargs)
        mv = self.mv
        if layer is None:  # the first attention layer (from the view the constructor checked)
            self._set(layer=mv.attn_layers[0])
        self.info = {
            "n_layers": mv.n_layers,
            "n_heads": mv.n_heads,
            "attn_layers": list(mv.attn_layers),
            "has_tokenizer": mv.tokenizer is not None,
            "norm": mv.final_norm,
        }
        with self._quietly():
            if tokens is not None:
                self.tokens, self.source = self._sequence(mv.check_tokens(tokens)), "tokens"
            else:
                self.prompt, self.source = prompt or "", "prompt"
            self.target = self._resolve(target, "target")
            self.baseline_token = self._resolve(baseline_token, "baseline_token")
            self.target_text, self.baseline_text = self._text_of(self.target), self._text_of(self.baseline_token)
            self.tokens = self._ids()  # the sequence `position` is checked against
        seq = len(self.tokens)
        self.position = (-2 if target is None and seq > 1 else -1) if position is None else position
        self._start(defer)

    # ----- inputs --------------------------------------------------------------------------
    def _ids(self) -> list[int]:
        return self._sequence(self.tokens if self.source == "tokens" else self.prompt)

    def _resolve(self, value: Any, what: str) -> int | None:
        """A token id from an id, a one-token string or typed digits (no tokenizer); None for None or ''."""
        if value is None or value == "":
            return None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError(f"{what} must be None, a token id (int) or a one-token string; got {value!r}")
        mv = self.mv
        if isinstance(value, str) and mv.tokenizer is None:
            if not value.strip().isdigit():
                raise ValueError(f"{what}: this model has no tokenizer; type a token id, got {value!r}")
            value = int(value)
        try:
            return mv.token_ids([value])[0]
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{what}: {exc}") from None

    def _text_of(self, token: int | None) -> str:
        return "" if token is None else self.mv.token_strings([token])[0]

    # ----- checks (see CircuitWidget: run after the type check, raise to refuse) ---------------
    def _check_target(self, value: int) -> int | None:
        return self._resolve(value, "target")

    def _check_baseline_token(self, value: int) -> int | None:
        return self._resolve(value, "baseline_token")

    def _check_target_text(self, value: str) -> str:
        self._resolve(value, "target_text")
        return value

    def _check_baseline_text(self, value: str) -> str:
        self._resolve(value, "baseline_text")
        return value

    def _check_position(self, value: int) -> int:
        seq = len(self.tokens)
        if not -seq <= value < seq:
            raise ValueError(f"position={value} is out of range for {seq} tokens: use 0..{seq - 1} (or -{seq}..-1)")
        return value

    @traitlets.observe("target_text", "baseline_text")
    def _on_text(self, change: dict) -> None:
        if self._live:  # typed in the widget (and checked): resolved into the token it names
            name = "target" if change["name"] == "target_text" else "baseline_token"
            setattr(self, name, self._resolve(change["new"], name))

    # ----- computing -----------------------------------------------------------------------
    def _refresh(self) -> None:
        mv = self.mv
        ids = self._ids()
        target, baseline = self.target, self.baseline_token
        if not mv.supports("hooks"):  # reduced where the model runs: one trace per prompt, target and baseline
            result = _cache.cached(
                mv, ("remote_attribution", tuple(ids), target, baseline),
                lambda: analysis.logit_attribution_by_position(mv, [ids], target, baseline), runs_model=True,
            )
        else:  # one model run per prompt: another target or baseline reuses the residual terms
            long = mv.runs_layer_by_layer(len(ids))  # (a run of this length shows a tqdm bar, layer by layer)
            with progress.console(f"LogitAttribution: {len(ids)} tokens", enabled=long):
                residual = _cache.residual_terms(mv, tuple(ids))  # (its run keeps every layer's patterns for the others)
            result = analysis.logit_attribution_by_position(mv, [ids], target, baseline, residual=residual)
        names = result.names()
        heads = [n for n in names if n.startswith("L") and "H" in n]
        others = [n for n in names if n not in heads]
        seq = len(ids)
        columns = [result.heads.reshape(seq, -1)] + [result.others[n][:, None] for n in others]
        values = torch.cat(columns, dim=1)
        strings = mv.to_str_tokens([ids])
        targets = [-1 if t is None else t for t in result.targets]
        target_strings = mv.token_strings([max(t, 0) for t in targets])
        finite = [None if math.isnan(x) else x for x in result.logits.tolist()]
        scale = None if result.scale is None else result.scale.tolist()
        self._result = result
        self.target_text, self.baseline_text = self._text_of(target), self._text_of(baseline)
        self.tokens = ids
        self.str_tokens = strings
        if not -seq <= self.position < seq:
            self.position = -2 if target is None and seq > 1 else -1
        self.attribution = self.payload_float32(
            values,
            names=heads + others,
            layers=list(result.layers),
            n_heads=mv.n_heads,
            labels=strings,
            targets=targets,
            target_strings=[s if t >= 0 else "" for s, t in zip(target_strings, targets, strict=True)],
            fixed_target=target is not None,
            baseline=result.baseline,
            baseline_string=None if result.baseline is None else mv.token_strings([result.baseline])[0],
            logits=finite,
            norm=result.norm,
            scale=scale,
        )

    def current_attribution(self) -> Any:
        """The `circuitwidgets.analysis` result on screen: `PositionAttribution` over every position.

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.LogitAttribution(cw.demo_model(), prompt="abcabc")
            >>> w.current_attribution().at(w.position).target
            4
        """
        if self._result is None:
            raise ValueError(f"nothing drawn yet: {self.error or 'no input'}")
        return self._result
