"""Pure-torch circuit analysis: no widget imports, usable as a plain library.

Every function takes a TransformerLens model (or a `circuitwidgets.ModelView`) and returns
tensors in TransformerLens layer/head order. Layers are block indices.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> submodule that defines it (imported on first use)
_EXPORTS = {
    "attention_patterns": "patterns",
    "Factored": "factored",
    "qk_circuit": "circuits",
    "ov_circuit": "circuits",
    "full_qk_circuit": "circuits",
    "full_ov_circuit": "circuits",
    "positional_qk": "circuits",
    "full_ov_block": "circuits",
    "full_qk_block": "circuits",
    "copying_scores": "copying",
    "ov_eigenvalues": "copying",
    "copying_score_of": "copying",
    "ov_top_k_accuracy": "copying",
    "composition_scores": "composition",
    "composition_baseline": "composition",
    "head_scores": "detectors",
    "repeated_random_tokens": "detectors",
    "HEAD_SCORE_KINDS": "detectors",
    "HEAD_METRICS": "detectors",
    "direct_copying_scores": "detectors",
    "virtual_head_pattern": "paths",
    "path_expansion": "paths",
    "composition_term": "composition",
    "composition_term_positivity": "composition",
    "composition_term_view": "composition",
    "skip_trigrams": "trigrams",
    "skip_trigram_sources": "trigrams",
    "SourceTrigrams": "trigrams",
    "TrigramSources": "trigrams",
    "logit_attribution": "attribution",
    "logit_attribution_by_position": "attribution",
    "ablated": "interventions",
    "run_with_ablation": "interventions",
    "ablation_effects": "interventions",
    "joint_ablation_effect": "interventions",
    "AblationEffects": "interventions",
    "next_token_loss": "interventions",
    "patching": "activation_patching",
    "PatchingResult": "activation_patching",
    "path_patching": "causal_paths",
    "PathPatchingResult": "causal_paths",
    "composition_paths": "causal_paths",
    "attribution_patching": "gradient_patching",
    "AttributionResult": "gradient_patching",
    "Verification": "gradient_patching",
    "scan_heads": "head_scan",
    "HeadScan": "head_scan",
    "SCAN_METRICS": "head_scan",
    "pattern_scores": "detectors",
    **dict.fromkeys(
        ("Checkpoints", "CheckpointScan", "scan_checkpoints", "checkpoint_values", "phase_change_window"), "checkpoints"
    ),
    **dict.fromkeys(
        ("feature_qk", "feature_ov", "feature_heads", "FeatureQK", "FeatureQKRow", "FeatureOV", "FeatureHeads"), "features"
    ),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'circuitwidgets.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
