"""The backend of an `circuitwidgets.ablation.Ablated` model: its base backend's runs under the ablation's hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..ablation import Ablated, ablation_hooks, check_heads
from . import features
from .hooked import HookedRuns, terms_here
from .protocol import Backend, Missing, Support, check_feature
from .reduce import reduce_in_run


class AblatedBackend:
    """`base` run under an `Ablated`'s hooks: patterns, logits and hook-point runs see the ablation;
    weights, facts, tokens and change are `base`'s. Patterns come from hook-point runs (reduced here)."""

    reduces_in_trace = False
    ORDER = 0
    DEFAULT_OPTIONS: tuple = ()

    @classmethod
    def accepts(cls, model: Any) -> bool:
        return isinstance(model, Ablated)

    @classmethod
    def build(cls, model: Any, *, weak: bool, options: tuple, dispatch: Any) -> AblatedBackend:
        return cls(dispatch(model.model, weak, model.options), model)  # (the model under it, with its own options)

    def __init__(self, base: Backend, ablated: Ablated):
        self.base = base
        self.facts, self.tokens, self.lock = base.facts, base.tokens, base.lock
        self.weights_local, self.options = base.weights_local, base.options
        runs = base.hooked("running the model with heads ablated")
        if not isinstance(runs, Missing):
            reference = None if ablated.reference is None else ablated.reference.to(self.tokens.device)
            runs = runs.with_hooks(ablation_hooks(runs, check_heads(ablated.heads, self.facts), ablated.method, reference))
        self._runs: HookedRuns | Missing = runs

    @property
    def model(self) -> Callable[[], Any]:
        return self.base.model

    def weights(self) -> Any:
        return self.base.weights()

    def hooked(self, what: str) -> HookedRuns | Missing:
        return self._runs

    def _runner(self) -> HookedRuns:
        if isinstance(self._runs, Missing):
            raise self._runs.error()
        return self._runs

    def supports(self, feature: str) -> Support:
        """The base's, but what runs the model runs under the ablation's hooks (none where the base has no hooks)."""
        check_feature(feature)
        if feature in ("patterns", "hooks", "logit_attribution", "resume", "gradients", "feature_attention") and isinstance(
            self._runs, Missing
        ):
            return Support(self._runs.reason)
        return self.base.supports(feature)

    def weight_views(self, requests: list[dict[str, Any]], report: Any = None) -> list[dict[str, Any]]:
        return self.base.weight_views(requests, report)  # (an ablation changes runs, not weights)

    def logit_terms(self, tokens: torch.Tensor, request: dict[str, Any], residual: Any = None) -> dict[str, Any]:
        return terms_here(self._runs, self.base.weights(), tokens, request, residual)

    def feature_terms(self, tokens: torch.Tensor, request: dict[str, Any]) -> dict[str, Any]:
        return features.answer_here(self._runs, self.base.weights(), tokens, request)  # (under the ablation's hooks)

    def changed(self) -> bool:
        return self.base.changed()

    def weights_digest(self) -> str:
        return self.base.weights_digest()

    def hook_state(self) -> tuple:
        return self.base.hook_state()

    def patterns(self, tokens: torch.Tensor, layers: list[int]) -> torch.Tensor:
        return self._runner().patterns_with(tokens, layers, [])[0]

    def reduced(self, tokens: torch.Tensor, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        return reduce_in_run(self._runner(), tokens, requests)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._runner().logits(tokens)


BACKEND = AblatedBackend
