"""Names kept for notebooks written before the backend protocol: `HFView` and friends now live in
`circuitwidgets.model` (views, dispatch) and `circuitwidgets.backends.hugging_face` (the backend).
Nothing inside the package imports this module."""

from .demo.hf_models import tiny_hf_model
from .model import NO_WEIGHTS, HFView, has_local_weights, is_hugging_face_model, view_for, with_trace_options

is_hf_backend_model = is_hugging_face_model

__all__ = ["NO_WEIGHTS", "HFView", "has_local_weights", "is_hf_backend_model", "tiny_hf_model", "view_for", "with_trace_options"]
