"""`Dictionary`: a sparse autoencoder or transcoder, the basis in which feature-level views explain a head.

A dictionary reads an activation ``x_in`` at one site and reconstructs an activation ``x`` at another (the same
site for a sparse autoencoder, another for a transcoder)::

    a = act(x_in W_enc + b_enc)      "relu"; "jumprelu": relu(pre)·[pre > threshold]; "topk": the k largest pre, relu'd
    x = a W_dec + b_dec + error

Sites are named as users write them, in TransformerLens naming (``blocks.1.hook_resid_pre``,
``blocks.0.attn.hook_z``, ...), and read once, here, into the protocol's sites (`circuitwidgets.sites`), which
each backend maps to its own hook points. A SAELens ``SAE`` is taken wherever a dictionary is
(`as_dictionary`, `Dictionary.from_sae_lens`), without importing SAELens. Labels (a mapping feature -> text, or a
Neuronpedia export read offline, `read_labels`) name features in the widgets.

Example:
    >>> import torch
    >>> d = Dictionary(torch.eye(2), torch.zeros(2), torch.eye(2), torch.zeros(2), "blocks.1.hook_resid_pre")
    >>> d.site, d.n_features, d.encode(torch.tensor([[1.0, -1.0]])).tolist()
    (('resid_pre', 1), 2, [[1.0, 0.0]])
"""

from __future__ import annotations

import gzip
import json
import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from . import feature_terms
from .sites import Site, from_hook_name, transformer_lens_name

ACTIVATIONS = ("relu", "jumprelu", "topk")
#: SAELens architectures taken, and the activation each is.
SAE_LENS_ARCHITECTURES = {
    "standard": "relu", "jumprelu": "jumprelu", "topk": "topk", "transcoder": "relu", "jumprelu_transcoder": "jumprelu",
}
_FINGERPRINT_ROW = 4096


def _tensor(value: Any, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
    else:
        try:
            tensor = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a tensor (or array); got {type(value).__name__}") from None
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must hold floats; got {tensor.dtype}")
    return tensor


class Dictionary:
    """A sparse dictionary at a site of a model: an SAE (reads and reconstructs one site) or a transcoder.

    Args:
        W_enc: ``[d_in, n_features]``; b_enc: ``[n_features]``.
        W_dec: ``[n_features, d_out]``; b_dec: ``[d_out]``.
        hook_name: where it reads, in TransformerLens naming (``"blocks.1.hook_resid_pre"``) or a site
            ``("resid_pre", 1)``.
        activation: "relu", "jumprelu" (needs `threshold`) or "topk" (needs `k`); default "relu", or the one
            `threshold` / `k` implies.
        threshold: JumpReLU thresholds ``[n_features]`` (or one number).
        k: how many features top-k keeps at each position.
        hook_name_out: where it writes (a transcoder); default `hook_name`.
        apply_b_dec_to_input: the encoder reads ``x_in - b_dec`` (SAELens' default); folded into ``b_enc`` here.
        labels: a mapping feature -> text, or a path of a Neuronpedia export (jsonl or jsonl.gz), read offline.
        name: what widgets call it (default: ``"<n_features> features at <hook_name>"``).
        neuronpedia_id: e.g. ``"gpt2-small/0-res-jb"``: a Neuronpedia export's records of other sources are ignored.

    The tensors are kept as given (detached); an in-place edit shows in the next computation (`fingerprint`).

    Example:
        >>> import torch
        >>> W = torch.randn(8, 32)
        >>> d = Dictionary(W, torch.zeros(32), W.T, torch.zeros(8), "blocks.0.hook_resid_pre", k=4)
        >>> d.activation, int((d.encode(torch.randn(3, 8)) > 0).sum(-1).max()) <= 4
        ('topk', True)
    """

    def __init__(
        self, W_enc: Any, b_enc: Any, W_dec: Any, b_dec: Any, hook_name: Any, activation: str | None = None,
        threshold: Any = None, k: Any = None, *, hook_name_out: Any = None, apply_b_dec_to_input: bool = False,
        labels: Any = None, name: str | None = None, neuronpedia_id: str | None = None,
    ) -> None:
        W_enc, b_enc = _tensor(W_enc, "W_enc"), _tensor(b_enc, "b_enc")
        W_dec, b_dec = _tensor(W_dec, "W_dec"), _tensor(b_dec, "b_dec")
        if W_enc.ndim != 2 or W_dec.ndim != 2:
            raise ValueError(f"W_enc and W_dec must be matrices: [d_in, n_features] and [n_features, d_out]; got shapes "
                             f"{tuple(W_enc.shape)} and {tuple(W_dec.shape)}")
        n = W_enc.shape[1]
        if W_dec.shape[0] != n:
            raise ValueError(f"W_dec must be [n_features, d_out] with n_features={n} (W_enc's columns); got {tuple(W_dec.shape)}")
        if tuple(b_enc.shape) != (n,):
            raise ValueError(f"b_enc must be [n_features] = [{n}]; got {tuple(b_enc.shape)}")
        if tuple(b_dec.shape) != (W_dec.shape[1],):
            raise ValueError(f"b_dec must be [d_out] = [{W_dec.shape[1]}]; got {tuple(b_dec.shape)}")
        if not isinstance(apply_b_dec_to_input, bool):
            raise TypeError(f"apply_b_dec_to_input must be a bool; got {apply_b_dec_to_input!r}")
        if apply_b_dec_to_input:
            if W_enc.shape[0] != W_dec.shape[1]:
                raise ValueError("apply_b_dec_to_input needs d_in == d_out (the encoder reads x_in - b_dec)")
            b_enc = b_enc - b_dec.to(W_enc.dtype) @ W_enc
        activation = self._activation(activation, threshold, k)
        if activation == "jumprelu":
            threshold = _tensor(threshold, "threshold")
            threshold = threshold.expand(n).clone() if threshold.ndim == 0 else threshold
            if tuple(threshold.shape) != (n,):
                raise ValueError(f"threshold must be one number or [n_features] = [{n}]; got {tuple(threshold.shape)}")
        elif threshold is not None:
            raise ValueError(f"threshold is for activation='jumprelu'; got activation={activation!r}")
        if activation == "topk":
            if isinstance(k, bool) or not isinstance(k, int):
                raise TypeError(f"k must be an int; got {k!r}")
            if not 1 <= k <= n:
                raise ValueError(f"k={k} is out of range: 1..{n} (n_features)")
        elif k is not None:
            raise ValueError(f"k is for activation='topk'; got activation={activation!r}")
        for tensor, label in ((W_enc, "W_enc"), (b_enc, "b_enc"), (W_dec, "W_dec"), (b_dec, "b_dec")):
            if not bool(torch.isfinite(tensor).all()):
                raise ValueError(f"dictionary weight {label} contains NaN/Inf values")
        self.W_enc, self.b_enc, self.W_dec, self.b_dec = W_enc, b_enc, W_dec, b_dec
        self.activation: str = activation
        self.threshold: torch.Tensor | None = threshold
        self.k: int | None = k
        self.hook_name = hook_name
        self.site: Site = from_hook_name(hook_name)
        self.hook_name_out = hook_name if hook_name_out is None else hook_name_out
        self.site_out: Site = from_hook_name(self.hook_name_out)
        if self.site == self.site_out and W_enc.shape[0] != W_dec.shape[1]:
            raise ValueError(f"an autoencoder reads and writes one site: W_enc's d_in={W_enc.shape[0]} != W_dec's "
                             f"d_out={W_dec.shape[1]}; a transcoder names its output site (hook_name_out=)")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str; got {name!r}")
        self.name = name or f"{n} features at {hook_name if isinstance(hook_name, str) else self.site}"
        self.neuronpedia_id = neuronpedia_id
        self.labels: dict[int, str] = {}
        if labels is not None:
            self.set_labels(labels)

    @staticmethod
    def _activation(activation: Any, threshold: Any, k: Any) -> str:
        if activation is None:
            return "jumprelu" if threshold is not None else "topk" if k is not None else "relu"
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got {activation!r}")
        if activation == "jumprelu" and threshold is None:
            raise ValueError("activation='jumprelu' needs threshold= (per feature, or one number)")
        if activation == "topk" and k is None:
            raise ValueError("activation='topk' needs k= (how many features each position keeps)")
        return str(activation)

    # ----- what it is ----------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return int(self.W_enc.shape[1])

    @property
    def d_in(self) -> int:
        return int(self.W_enc.shape[0])

    @property
    def d_out(self) -> int:
        return int(self.W_dec.shape[1])

    @property
    def reads(self) -> str:
        """Where it reads, in TransformerLens naming (for messages)."""
        return self.hook_name if isinstance(self.hook_name, str) else transformer_lens_name(self.site)

    @property
    def writes(self) -> str:
        """Where it writes, in TransformerLens naming (for messages)."""
        return self.hook_name_out if isinstance(self.hook_name_out, str) else transformer_lens_name(self.site_out)

    @property
    def is_transcoder(self) -> bool:
        """True when it writes another site than it reads."""
        return self.site != self.site_out

    def __repr__(self) -> str:
        extra = ", threshold" if self.activation == "jumprelu" else f", k={self.k}" if self.activation == "topk" else ""
        out = f" -> {self.hook_name_out!r}" if self.is_transcoder else ""
        return f"Dictionary({self.n_features} features, {self.activation}{extra}, {self.hook_name!r}{out})"

    def spec(self, device: Any = None) -> dict[str, Any]:
        """The dictionary as the maths takes it (`circuitwidgets.feature_terms`): tensors and the activation, on
        `device` (float32 kept as is; other dtypes as float32)."""
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            if t is None:
                return None
            t = t if t.dtype == torch.float32 else t.float()
            return t if device is None else t.to(device)

        return {"W_enc": move(self.W_enc), "b_enc": move(self.b_enc), "W_dec": move(self.W_dec), "b_dec": move(self.b_dec),
                "activation": self.activation, "threshold": move(self.threshold), "k": self.k}

    def encode(self, x: Any) -> torch.Tensor:
        """Feature activations ``[..., n_features]`` of `x` ``[..., d_in]``."""
        x = torch.as_tensor(x)
        shape = x.shape
        return feature_terms.encode(self.spec(x.device), x.reshape(-1, shape[-1])).reshape(*shape[:-1], -1)

    def decode(self, acts: Any) -> torch.Tensor:
        """``acts W_dec + b_dec`` ``[..., d_out]``."""
        acts = torch.as_tensor(acts).float()
        return acts @ self.W_dec.float().to(acts.device) + self.b_dec.float().to(acts.device)

    def reconstruct(self, x: Any) -> torch.Tensor:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def fingerprint(self) -> tuple:
        """What the dictionary's answers depend on, to key caches by: its tensors' contents (weighted sums, as the
        model's weights are watched), shapes and activation. An in-place edit (``d.W_dec.mul_(2)``) changes it.

        Example:
            >>> import torch
            >>> d = Dictionary(torch.eye(2), torch.zeros(2), torch.eye(2), torch.zeros(2), "blocks.0.hook_resid_pre")
            >>> before = d.fingerprint(); _ = d.W_dec.mul_(2); before == d.fingerprint()
            False
        """
        parts: list[Any] = [self.activation, self.k, self.site, self.site_out]
        for tensor in (self.W_enc, self.b_enc, self.W_dec, self.b_dec, self.threshold):
            if tensor is None:
                parts.append(None)
                continue
            flat = tensor.detach().reshape(-1).float()
            n = flat.numel()
            weights = torch.linspace(1.0, 2.0, _FINGERPRINT_ROW, device=flat.device)
            full = n - n % _FINGERPRINT_ROW
            total = 0.0
            if full:
                rows = flat[:full].view(-1, _FINGERPRINT_ROW) @ weights
                spread = torch.linspace(1.0, 3.0, rows.numel(), dtype=torch.float64, device=rows.device)
                total += float((rows.double() * spread).sum())
            if n > full:
                total += float(flat[full:] @ weights[: n - full])
            parts.append((tuple(tensor.shape), str(tensor.dtype), total))
        return tuple(parts)

    # ----- labels --------------------------------------------------------------------------------
    def set_labels(self, labels: Any) -> Dictionary:
        """Name features: a mapping feature -> text, or a Neuronpedia export file (jsonl / jsonl.gz); returns self."""
        if isinstance(labels, (str, Path)):
            labels = read_labels(labels, self.neuronpedia_id)
        if not isinstance(labels, Mapping):
            raise TypeError(
                f"labels must be a mapping feature -> text or a path of a Neuronpedia export; got {type(labels).__name__}"
            )
        found: dict[int, str] = {}
        for key, text in labels.items():
            try:
                index = operator.index(key) if not isinstance(key, str) else int(key)
            except (TypeError, ValueError):
                raise TypeError(f"labels: a feature is an int; got {key!r}") from None
            if not 0 <= index < self.n_features:
                raise ValueError(f"labels: feature {index} is out of range: 0..{self.n_features - 1}")
            found[index] = str(text)
        self.labels = found
        return self

    def label(self, feature: int) -> str:
        """Feature `feature`'s label, or "" when it has none."""
        return self.labels.get(int(feature), "")

    # ----- saving, and other libraries' dictionaries ----------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the dictionary to `path` (safetensors: its tensors; the rest in the file's metadata)."""
        from safetensors.torch import save_file

        tensors = {"W_enc": self.W_enc, "b_enc": self.b_enc, "W_dec": self.W_dec, "b_dec": self.b_dec}
        if self.threshold is not None:
            tensors["threshold"] = self.threshold
        meta = {"hook_name": self.hook_name, "hook_name_out": self.hook_name_out, "activation": self.activation,
                "k": self.k, "name": self.name, "neuronpedia_id": self.neuronpedia_id, "labels": self.labels}
        path = Path(path)
        save_file({n: t.contiguous().cpu() for n, t in tensors.items()}, str(path), metadata={"circuitwidgets": json.dumps(meta)})
        return path

    @classmethod
    def load(cls, path: str | Path) -> Dictionary:
        """A dictionary written by `save`."""
        from safetensors import safe_open
        from safetensors.torch import load_file

        with safe_open(str(path), framework="pt") as handle:
            meta = json.loads((handle.metadata() or {})["circuitwidgets"])
        tensors = load_file(str(path))
        hook_name = tuple(meta["hook_name"]) if isinstance(meta["hook_name"], list) else meta["hook_name"]
        out = tuple(meta["hook_name_out"]) if isinstance(meta["hook_name_out"], list) else meta["hook_name_out"]
        return cls(
            tensors["W_enc"], tensors["b_enc"], tensors["W_dec"], tensors["b_dec"], hook_name, meta["activation"],
            tensors.get("threshold"), meta["k"], hook_name_out=out, name=meta["name"], neuronpedia_id=meta["neuronpedia_id"],
            labels={int(i): text for i, text in meta["labels"].items()},
        )

    @classmethod
    def from_sae_lens(cls, sae: Any, labels: Any = None) -> Dictionary:
        """The dictionary of a SAELens ``SAE`` (6.x: what ``SAE.from_pretrained`` returns; an older tuple
        ``(sae, cfg_dict, sparsity)`` is taken too), its weights copied as they are.

        Reads ``cfg.metadata.hook_name`` (older: ``cfg.hook_name``), ``hook_head_index``, ``hook_name_out``
        (transcoders), ``neuronpedia_id``; ``apply_b_dec_to_input`` is folded into ``b_enc``; a top-k SAE that
        rescales by its decoder norms has them folded (the same features fire, the same reconstruction). Its
        ``reshape_activations="hook_z"`` (every head's ``z`` flattened) is how this package reads ``hook_z`` too.
        Refused with the reason: architectures other than `SAE_LENS_ARCHITECTURES`, activation normalisation
        other than "none", an SAE of one head (``hook_head_index``), skip transcoders.
        """
        if isinstance(sae, tuple):
            sae = sae[0]
        cfg = getattr(sae, "cfg", None)
        if cfg is None or not hasattr(sae, "W_enc") or not hasattr(sae, "W_dec"):
            raise TypeError(f"expected a SAELens SAE (with cfg, W_enc, W_dec); got {type(sae).__name__}")
        meta = getattr(cfg, "metadata", None)

        def read(name: str) -> Any:
            value = getattr(meta, name, None) if meta is not None else None
            return value if value is not None else getattr(cfg, name, None)

        architecture = cfg.architecture() if callable(getattr(cfg, "architecture", None)) else getattr(cfg, "architecture", None)
        if architecture not in SAE_LENS_ARCHITECTURES:
            raise ValueError(f"SAELens architecture {architecture!r} is not one this package reads: "
                             f"{', '.join(SAE_LENS_ARCHITECTURES)}")
        norm = getattr(cfg, "normalize_activations", "none") or "none"
        if norm != "none":
            raise ValueError(f"this SAE normalises its inputs ({norm!r}): fold the scaling into its weights first "
                             "(SAELens: sae.fold_activation_norm_scaling_factor(factor))")
        if read("hook_head_index") is not None:
            raise ValueError(f"this SAE reads one head (hook_head_index={read('hook_head_index')}) of {read('hook_name')}: "
                             "feature-level views take dictionaries of a whole site")
        hook_name = read("hook_name")
        if hook_name is None:
            raise ValueError("this SAE names no hook_name (cfg.metadata.hook_name): give it, or build a Dictionary")
        W_enc, b_enc = sae.W_enc.detach().clone(), sae.b_enc.detach().clone()
        W_dec, b_dec = sae.W_dec.detach().clone(), sae.b_dec.detach().clone()
        activation = SAE_LENS_ARCHITECTURES[architecture]
        threshold = sae.threshold.detach().clone() if activation == "jumprelu" else None
        k = int(cfg.k) if activation == "topk" else None
        if activation == "topk" and getattr(cfg, "rescale_acts_by_decoder_norm", False):
            norms = W_dec.norm(dim=-1)
            W_enc, b_enc, W_dec = W_enc * norms, b_enc * norms, W_dec / norms[:, None]
        transcoder = "transcoder" in architecture
        apply = bool(getattr(cfg, "apply_b_dec_to_input", False)) and not transcoder
        out = read("hook_name_out") if transcoder else None
        if transcoder and out is None:
            raise ValueError("this transcoder names no output site (cfg.metadata.hook_name_out)")
        return cls(W_enc, b_enc, W_dec, b_dec, hook_name, activation, threshold, k, hook_name_out=out,
                   apply_b_dec_to_input=apply, labels=labels, neuronpedia_id=read("neuronpedia_id"),
                   name=f"{read('neuronpedia_id') or hook_name} (SAELens {architecture}, {W_enc.shape[1]} features)")

    @classmethod
    def identity(cls, d_model: int, hook_name: Any) -> Dictionary:
        """The residual basis as a dictionary: features ``+e_i`` (``2i``) and ``-e_i`` (``2i + 1``), ReLU, no
        error. A score's split over it is the residual-basis bilinear form, coordinate by coordinate.

        Example:
            >>> d = Dictionary.identity(3, "blocks.0.hook_resid_pre")
            >>> d.reconstruct(torch.tensor([1.0, -2.0, 0.5])).tolist()
            [1.0, -2.0, 0.5]
        """
        eye = torch.eye(d_model)
        W_dec = torch.stack([eye, -eye], dim=1).reshape(2 * d_model, d_model)
        return cls(W_dec.T.clone(), torch.zeros(2 * d_model), W_dec, torch.zeros(d_model), hook_name,
                   name=f"the residual basis (±e_i) at {hook_name}")


def as_dictionary(value: Any, what: str = "dictionary") -> Dictionary:
    """`value` as a `Dictionary`: itself, or a SAELens SAE (or the tuple older SAELens returned) converted.

    Example:
        >>> import torch
        >>> d = Dictionary(torch.eye(2), torch.zeros(2), torch.eye(2), torch.zeros(2), "blocks.1.hook_resid_pre")
        >>> as_dictionary(d) is d
        True
    """
    if isinstance(value, Dictionary):
        return value
    candidate = value[0] if isinstance(value, tuple) and value else value
    if hasattr(candidate, "cfg") and hasattr(candidate, "W_enc") and hasattr(candidate, "W_dec"):
        return Dictionary.from_sae_lens(candidate)
    raise TypeError(f"{what} must be a circuitwidgets Dictionary or a SAELens SAE; got {type(value).__name__}")


def read_labels(path: str | Path, neuronpedia_id: str | None = None) -> dict[int, str]:
    """Feature labels from a Neuronpedia export (a jsonl file, gzipped or not), read offline: one JSON record a line,
    with the feature's ``index`` and its ``description`` (or ``explanations: [{"description": ...}]``). Records
    naming another source (``modelId``/``layer`` other than `neuronpedia_id`'s ``model/source``) are skipped; the
    first description of a feature is kept.

    Example:
        >>> import json, pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "export.jsonl"
        >>> _ = path.write_text(json.dumps({"modelId": "m", "layer": "0-res", "index": "3", "description": "dogs"}))
        >>> read_labels(path, "m/0-res"), read_labels(path, "m/1-res")
        ({3: 'dogs'}, {})
    """
    model, _, source = (neuronpedia_id or "").partition("/")
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    labels: dict[int, str] = {}
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path.name} line {number} is not JSON: {exc.msg}") from None
            if not isinstance(record, dict) or "index" not in record:
                raise ValueError(f"{path.name} line {number} is not a Neuronpedia feature record (no 'index')")
            if model and record.get("modelId") not in (None, model):
                continue
            if source and record.get("layer") not in (None, source):
                continue
            text = record.get("description")
            if text is None and record.get("explanations"):
                text = record["explanations"][0].get("description")
            index = int(record["index"])
            if text is not None and index not in labels:
                labels[index] = str(text)
    return labels


def encoder_norms_by_head(dictionary: Dictionary, n_heads: int) -> torch.Tensor:
    """``[n_heads, n_features]``: the norm of each feature's encoder slice on each head, for a dictionary reading every
    head's ``z`` (``[n_heads · d_head]`` flattened, SAELens ``reshape_activations="hook_z"``).

    Example:
        >>> d = Dictionary(torch.eye(4), torch.zeros(4), torch.eye(4), torch.zeros(4), "blocks.0.attn.hook_z")
        >>> encoder_norms_by_head(d, 2).tolist()
        [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    """
    if dictionary.d_in % n_heads:
        raise ValueError(f"the dictionary reads {dictionary.d_in} numbers, not n_heads={n_heads} heads' z")
    return dictionary.W_enc.float().reshape(n_heads, dictionary.d_in // n_heads, -1).norm(dim=1)

