"""The TransformerLens backend: a TransformerLens 4 ``TransformerBridge`` or a 2.x ``HookedTransformer``.

Accepted by what they offer (duck typing: ``cfg``, ``blocks``, ``W_E``, ``W_U``, ``run_with_cache``).
Facts come from ``model.cfg``, weights from the model's stacked properties (`Weights`), runs through
its hook points (`HookedRuns`), tokens through ``model.to_tokens``.
"""

from __future__ import annotations

from typing import Any

import torch

from . import change, features
from .hooked import REQUIRED, HookedRuns, describe, facts_of, terms_here
from .protocol import FEATURES, Missing, Support, check_feature
from .reduce import reduce_in_run
from .tokens import TokenAdapter
from .weights import Weights, views_here


def _roots(model: Any) -> list[torch.nn.Module]:
    """The model's modules; a TransformerBridge's wrapped model sits outside its module tree."""
    roots = [model] if isinstance(model, torch.nn.Module) else []
    original = getattr(model, "original_model", None)
    return roots + ([original] if isinstance(original, torch.nn.Module) else [])


def parameter_name(model: Any, parameter: torch.Tensor) -> str:
    """The state-dict name of `parameter` (``blocks.0.ln1.weight`` on a bridge, ``blocks.0.ln1.w`` on TL 2.x)."""
    try:
        for name, tensor in model.state_dict(keep_vars=True).items():
            if tensor is parameter:
                return str(name)
    except Exception:  # noqa: BLE001 - a name is only for the message
        pass
    for name, tensor in model.named_parameters():
        if tensor is parameter:
            return name.replace("._original_component", "")
    return f"of shape {tuple(parameter.shape)}"


class TransformerLensBackend:
    """The backend of a TransformerLens model (held weakly with ``weak=True``, as cached views hold it)."""

    reduces_in_trace = False
    options: tuple = ()
    #: Tried last: it takes any model, and refuses one that lacks what TransformerLens models have, naming it.
    ORDER = 100
    DEFAULT_OPTIONS: tuple = ()

    @classmethod
    def accepts(cls, model: Any) -> bool:
        return True

    @classmethod
    def build(cls, model: Any, *, weak: bool, options: tuple, dispatch: Any) -> TransformerLensBackend:
        return cls(model, weak=weak)

    def __init__(self, model: Any, *, weak: bool = False):
        missing = [name for name in REQUIRED if not hasattr(model, name)]
        if missing:
            raise TypeError(
                "model must be a TransformerLens TransformerBridge or HookedTransformer, an nnsight model or a Hugging "
                f"Face causal LM; got {describe(model)}, which lacks {', '.join(missing)}"
            )
        get = self.model = change.ModelRef(model, weak)
        self.lock = change.model_lock(model)
        self.facts = facts_of(model)
        self._meta = self.facts.device.type == "meta"
        self.weights_local = not self._meta
        self._watch = change.ParameterWatch(lambda: list(get().parameters()), lambda p: parameter_name(get(), p))
        self.modules = change.ModuleList(lambda: _roots(get()))
        self.tokens = TokenAdapter(
            getattr(model, "tokenizer", None),
            d_vocab=self.facts.d_vocab,
            n_ctx=self.facts.n_ctx,
            device=torch.device("cpu") if self._meta else self.facts.device,
            encode=lambda text: get().to_tokens(text, prepend_bos=False, truncate=False)[0].tolist(),
            with_bos=lambda text: get().to_tokens(text, prepend_bos=True, truncate=False)[0].tolist(),
        )
        self._runs = HookedRuns(get, self.facts, self.lock, self.modules)
        self._weights: Weights | Missing | None = None

    # ----- parts -----------------------------------------------------------------------------
    def weights(self) -> Weights | Missing:
        if self._weights is None:
            if self._meta:
                self._weights = Missing(
                    "this model's weights are on the meta device (not on this machine): weight-based views need them; "
                    "load the weights (e.g. model.to_empty(device='cpu') and load_state_dict) first"
                )
            else:
                self._weights = Weights(self.model(), self.facts)
        return self._weights

    def hooked(self, what: str) -> HookedRuns | Missing:
        if self._meta:
            return Missing(f"{what} runs the model, whose weights are on the meta device (not on this machine)")
        return self._runs

    def supports(self, feature: str) -> Support:
        """Everything, where the weights are on this machine; nothing on the meta device (nothing can run)."""
        check_feature(feature)
        if self._meta:
            return Support(f"{FEATURES[feature]} needs this model's weights, which are on the meta device (not on this "
                           "machine): load them first")
        return Support()

    def weight_views(self, requests: list[dict[str, Any]], report: Any = None) -> list[dict[str, Any]]:
        return views_here(self.weights(), requests, report)

    def logit_terms(self, tokens: torch.Tensor, request: dict[str, Any], residual: Any = None) -> dict[str, Any]:
        return terms_here(self.hooked("logit attribution"), self.weights(), tokens, request, residual)

    def feature_terms(self, tokens: torch.Tensor, request: dict[str, Any]) -> dict[str, Any]:
        return features.answer_here(self.hooked("feature-level attention"), self.weights(), tokens, request)

    def changed(self) -> bool:
        with self.lock:
            return self._watch.changed()

    def weights_digest(self) -> str:
        return self._watch.digest()

    def hook_state(self) -> tuple:
        with self.lock:
            model = self.model()
            return change.hook_state_of(self.modules(), model.named_modules)

    # ----- runs ------------------------------------------------------------------------------
    def _runner(self) -> HookedRuns:
        runs = self.hooked("this")
        if isinstance(runs, Missing):
            raise runs.error()
        return runs

    def patterns(self, tokens: torch.Tensor, layers: list[int]) -> torch.Tensor:
        return self._runner().patterns_with(tokens, layers, [])[0]

    def reduced(self, tokens: torch.Tensor, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        return reduce_in_run(self._runner(), tokens, requests)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._runner().logits(tokens)


BACKEND = TransformerLensBackend
