"""Backends: one implementation of `protocol.Backend` per model path, built from shared parts.

| module | owns |
|---|---|
| `protocol` | the `Backend` protocol, `Facts`, `Missing` (a part a backend cannot give, and why) |
| `numerics` | the working dtype, exact power-of-two scaling |
| `change` | parameter fingerprints (`ParameterWatch`), hook state, one lock per model |
| `tokens` | `TokenAdapter`: tokenisation and token validation over TransformerLens and HF tokenizers |
| `weights` | `Weights`: stacked weights in TransformerLens shapes, norms folded |
| `hooked` | `HookedRuns`: runs through TransformerLens hook points; TransformerLens facts |
| `reduce` | `in_trace`'s request vocabulary answered from whole patterns |
| `transformer_lens` | `TransformerLensBackend` (4 bridge, 2.x HookedTransformer) |
| `hugging_face` | `HuggingFaceBackend` (plain transformers, nnsight local and remote) |

`circuitwidgets.model` chooses among them; backends never import each other or it.
"""
