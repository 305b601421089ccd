"""Tensors to compact binary payloads for the browser, and back (for tests and export).

An encoding is a pair: raw little-endian ``bytes`` and a small JSON-able ``meta`` dict that says how
to read them. A *payload* is the two in one dict, ``{"data": bytes, **meta, **extra}``, sent as one
synced ``traitlets.Dict`` trait: ipywidgets sends the nested bytes as a binary buffer (it reaches
JavaScript as a ``DataView``, no JSON), and the view can never see the bytes of one update with the
shape of another, whatever order a frontend delivers changed traits in (marimo: one at a time).
Two encodings cover every widget:

- ``"uint8"``: values quantised linearly onto codes ``0..254`` between ``lo`` and ``hi``
  (``value = lo + code * (hi - lo) / 254``); code ``255`` marks NaN / masked cells, so a masked score
  is never drawn as a real value. Attention weights use ``lo=0, hi=1``; signed matrices use a range
  symmetric about 0, which keeps 0 exact at code 127. For drawing only.
- ``"float32"``: exact values, for the few numbers a read-out shows (the selected row or cell).

Causal attention patterns are zero above the diagonal, so ``layout="tril"`` sends only the lower
triangle of each trailing ``[n, n]`` matrix, row by row: row ``q`` of a matrix starts at
``q * (q + 1) / 2`` and holds ``q + 1`` codes. This halves the bytes of long prompts.

A uint8 payload may travel deflated (``compress=True`` in `uint8_payload`): when its codes are at
least `DEFLATE_MIN_BYTES` long and zlib shrinks them to at most `DEFLATE_PAYS` of their size, the
payload holds the zlib stream and says ``"encoding": "deflate"``; `decode` (and the browser, through
``DecompressionStream("deflate")``) inflates it. Long-prompt attention overviews are mostly zero
codes and shrink many times over.

Example:
    >>> import torch
    >>> from circuitwidgets import transport
    >>> data, meta = transport.encode_uint8(torch.tensor([[1.0, 0.0], [0.25, 0.75]]), layout="tril")
    >>> len(data), meta["layout"]
    (3, 'tril')
    >>> transport.decode(data, meta)
    tensor([[1.0000, 0.0000],
            [0.2520, 0.7480]])
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import torch

from . import in_trace

CODE_MAX = 254  # highest code holding a value; codes 0..254 span [lo, hi]
NAN_CODE = 255  # code of NaN / masked cells
LAYOUTS = ("full", "tril")
#: Deflate a uint8 payload (``compress=True``) only from this many bytes ...
DEFLATE_MIN_BYTES = 1 << 16
#: ... and only when the stream is at most this fraction of the raw codes.
DEFLATE_PAYS = 0.9
#: Colour scales (`color_scale`): log starts at this share of uniform attention, power is weight ** gamma,
#: relative tops out at this many times uniform.
LOG_FLOOR_SHARE = 0.01
POWER_GAMMA = 0.5
RELATIVE_MAX = 4.0
DEFLATE_LEVEL = 1  # fast: 0.4 MB in ~3 ms (level 6: ~27 ms) for streams that are mostly zero codes anyway


#: The largest finite float32: a value beyond it would reach the browser as Inf.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _as_numpy(tensor: Any, name: str) -> np.ndarray:
    """`tensor` as float32; ValueError for a finite value beyond float32's range (it would be drawn as Inf)."""
    if isinstance(tensor, torch.Tensor):
        wide = tensor.detach().cpu()
    elif isinstance(tensor, np.ndarray):
        wide = torch.from_numpy(np.asarray(tensor, dtype=np.float64) if tensor.dtype.kind not in "fc" else tensor)
    else:
        raise TypeError(f"{name} must be a torch.Tensor or numpy array; got {type(tensor).__name__}")
    if wide.is_complex():
        raise TypeError(f"{name} must be real; got a complex tensor")
    if wide.is_floating_point() and wide.dtype not in (torch.float16, torch.bfloat16, torch.float32) and wide.numel():
        finite = wide[torch.isfinite(wide)]
        if finite.numel() and float(finite.abs().max()) > FLOAT32_MAX:
            raise ValueError(
                f"{name} holds {float(finite.abs().max()):.3g}, beyond float32's range ({FLOAT32_MAX:.3g}): it would be "
                "sent as Inf; scale it first"
            )
    return wide.to(torch.float32).numpy()


def _tril_flat(array: np.ndarray) -> np.ndarray:
    """Lower triangles (diagonal included) of the trailing square matrices, row-major, flattened."""
    if array.ndim < 2 or array.shape[-1] != array.shape[-2]:
        raise ValueError(f"layout='tril' needs square trailing matrices; got shape {tuple(array.shape)}")
    rows, cols = np.tril_indices(array.shape[-1])
    return array[..., rows, cols].reshape(-1)


def is_causal(tensor: Any) -> bool:
    """True when every trailing square matrix of `tensor` is exactly zero above its diagonal.

    Example:
        >>> import torch
        >>> is_causal(torch.tril(torch.ones(3, 3))), is_causal(torch.ones(3, 3))
        (True, False)
    """
    array = _as_numpy(tensor, "tensor")
    if array.ndim < 2 or array.shape[-1] != array.shape[-2]:
        return False
    n = array.shape[-1]
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    return not np.any(array[..., upper])


def encode_uint8(
    tensor: Any, *, lo: float = 0.0, hi: float = 1.0, layout: str = "full"
) -> tuple[bytes, dict[str, Any]]:
    """Quantise `tensor` (any shape) to uint8 codes between `lo` and `hi` for drawing.

    Values outside ``[lo, hi]`` are clipped; NaN becomes code 255. With ``layout="tril"`` only the
    lower triangle of each trailing ``[n, n]`` matrix is sent. Returns ``(bytes, meta)`` with
    ``meta = {"dtype": "uint8", "shape", "lo", "hi", "layout", "nan_code"}``.

    Example:
        >>> import torch
        >>> data, meta = encode_uint8(torch.tensor([-1.0, 0.0, 1.0]), lo=-1.0, hi=1.0)
        >>> list(data), meta["shape"]
        ([0, 127, 254], [3])
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise ValueError(f"need finite lo < hi; got lo={lo}, hi={hi}")
    array = _as_numpy(tensor, "tensor")
    flat = _tril_flat(array) if layout == "tril" else array.reshape(-1)
    nan = np.isnan(flat)
    scaled = np.clip((np.nan_to_num(flat, nan=lo) - lo) * (CODE_MAX / (hi - lo)), 0, CODE_MAX)
    codes = np.rint(scaled).astype(np.uint8)
    codes[nan] = NAN_CODE
    meta = {"dtype": "uint8", "shape": list(array.shape), "lo": lo, "hi": hi, "layout": layout, "nan_code": NAN_CODE}
    return codes.tobytes(), meta


def encode_float32(tensor: Any) -> tuple[bytes, dict[str, Any]]:
    """Exact little-endian float32 bytes of `tensor` (any shape), with ``{"dtype", "shape"}`` meta.

    Example:
        >>> import torch
        >>> data, meta = encode_float32(torch.tensor([0.5, 0.25]))
        >>> len(data), meta
        (8, {'dtype': 'float32', 'shape': [2], 'layout': 'full'})
    """
    array = _as_numpy(tensor, "tensor")
    data = np.ascontiguousarray(array, dtype="<f4").tobytes()
    return data, {"dtype": "float32", "shape": list(array.shape), "layout": "full"}


def symmetric_range(tensor: Any) -> tuple[float, float]:
    """A range ``(-m, m)`` covering every finite value of `tensor`, for signed matrices.

    Example:
        >>> import torch
        >>> symmetric_range(torch.tensor([-0.5, 2.0, float("nan")]))
        (-2.0, 2.0)
    """
    array = _as_numpy(tensor, "tensor")
    finite = array[np.isfinite(array)]
    m = float(np.abs(finite).max()) if finite.size else 0.0
    m = m if m > 0 else 1.0
    return -m, m


def encode_heads(blocks: Any) -> tuple[bytes, dict[str, Any]]:
    """uint8 codes of signed ``[H, n, n]`` blocks, each head on its own symmetric range.

    The bytes are the heads one after another; ``meta["ranges"][h]`` is head h's ``[lo, hi]``
    (`symmetric_range` of that head), so a faint head is not drawn flat beside a strong one.

    Example:
        >>> import torch
        >>> data, meta = encode_heads(torch.tensor([[[1.0, -1.0]], [[0.0, 4.0]]]))
        >>> list(data), meta["ranges"]
        ([254, 0, 127, 254], [[-1.0, 1.0], [-4.0, 4.0]])
    """
    parts, ranges = [], []
    for block in blocks:
        lo, hi = symmetric_range(block)
        parts.append(encode_uint8(block, lo=lo, hi=hi)[0])
        ranges.append([lo, hi])
    meta = {"dtype": "uint8", "shape": list(blocks.shape), "layout": "full", "nan_code": NAN_CODE, "ranges": ranges}
    return b"".join(parts), meta


def payload(data: bytes, meta: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One trait's value: ``{"data": data, **meta, **extra}`` (extra: layer, revision, labels...).

    Example:
        >>> import torch
        >>> p = payload(*encode_float32(torch.zeros(2)), layer=1)
        >>> sorted(p), len(p["data"])
        (['data', 'dtype', 'layer', 'layout', 'shape'], 8)
    """
    return {"data": data, **meta, **extra}


def deflated(data: bytes, meta: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """``(data, meta)`` deflated (zlib) with ``meta["encoding"] = "deflate"`` where that pays, else as given.

    It pays from `DEFLATE_MIN_BYTES` bytes when the stream is at most `DEFLATE_PAYS` of them.

    Example:
        >>> data, meta = deflated(bytes(100_000), {"dtype": "uint8", "shape": [100_000]})
        >>> len(data) < 1_000, meta["encoding"], len(deflated(b"ab", {})[0])
        (True, 'deflate', 2)
    """
    if len(data) < DEFLATE_MIN_BYTES:
        return data, meta
    packed = zlib.compress(data, DEFLATE_LEVEL)
    if len(packed) > DEFLATE_PAYS * len(data):
        return data, meta
    return packed, {**meta, "encoding": "deflate", "raw_bytes": len(data)}


def color_scale(
    kind: str, n: int, *, row0: int = 0, step: int = 1, causal: bool = True, his: Any = None
) -> dict[str, Any]:
    """The ``scale`` meta of attention weights drawn on colour scale `kind` (`in_trace.COLOR_SCALES`).

    Self-contained, so that a view (or `decode`) reads positions back as weights: ``floor`` (log:
    a hundredth of uniform attention over `n` sources, rounded down to a power of ten), ``gamma``
    (power), ``relative_max`` (relative: this many times uniform is the top colour), ``his`` (auto:
    each matrix's top, `in_trace.auto_top`), and where the cells sit (``row0``, ``step``: pooled rows, ``n``,
    ``causal``), which relative needs to count the sources each row sees.

    Example:
        >>> color_scale("log", 2000)["floor"]
        1e-06
    """
    if kind not in in_trace.COLOR_SCALES:
        raise ValueError(f"color scale must be one of {in_trace.COLOR_SCALES}; got {kind!r}")
    floor = 10.0 ** math.floor(math.log10(LOG_FLOOR_SHARE / max(1, n)))
    his = None if his is None else [float(x) for x in torch.as_tensor(his).reshape(-1).tolist()]
    return {"kind": kind, "floor": floor, "gamma": POWER_GAMMA, "relative_max": RELATIVE_MAX, "his": his,
            "row0": int(row0), "step": int(step), "n": int(n), "causal": bool(causal)}


def scaled(tensor: Any, kind: str, n: int, **where: Any) -> tuple[torch.Tensor, dict[str, Any]]:
    """`tensor` (weights ``[..., rows, cols]``) as colour positions on scale `kind`, and the scale meta.

    Auto takes each leading matrix's `in_trace.auto_top` unless ``his=`` is given (a tile: its head's).

    Example:
        >>> import torch
        >>> positions, scale = scaled(torch.tensor([[0.5, 0.0], [0.25, 0.25]]), "relative", 2)
        >>> positions.tolist(), scale["relative_max"]
        ([[0.125, 0.0], [0.125, 0.125]], 4.0)
    """
    weights = torch.as_tensor(_as_numpy(tensor, "tensor"))
    his = where.pop("his", None)
    if kind == "auto" and his is None:
        finite = torch.nan_to_num(weights, nan=0.0)
        his = in_trace.auto_top(finite.reshape(-1, *finite.shape[-2:]))
    scale = color_scale(kind, n, his=his, **where)
    return in_trace.scale_positions(weights, scale), scale


def uint8_payload(
    tensor: Any, *, lo: float = 0.0, hi: float = 1.0, layout: str | None = None, compress: bool = False, **extra: Any
) -> dict[str, Any]:
    """`encode_uint8` as a payload; ``layout=None`` sends the lower triangle when `is_causal`.

    ``compress=True`` deflates the codes where that pays (`deflated`); `decode` reads both.

    Example:
        >>> import torch
        >>> uint8_payload(torch.tril(torch.ones(3, 3)))["layout"]
        'tril'
        >>> p = uint8_payload(torch.zeros(400, 400), compress=True)
        >>> p["encoding"], len(p["data"]) < 1_000, decode(p).shape
        ('deflate', True, torch.Size([400, 400]))
    """
    if layout is None:
        layout = "tril" if is_causal(tensor) else "full"
    data, meta = encode_uint8(tensor, lo=lo, hi=hi, layout=layout)
    if compress:
        data, meta = deflated(data, meta)
    return payload(data, meta, **extra)


def float32_payload(tensor: Any, **extra: Any) -> dict[str, Any]:
    """`encode_float32` as a payload.

    Example:
        >>> import torch
        >>> decode(float32_payload(torch.tensor([0.5]), revision=3))
        tensor([0.5000])
    """
    return payload(*encode_float32(tensor), **extra)


def heads_payload(blocks: Any, **extra: Any) -> dict[str, Any]:
    """`encode_heads` as a payload."""
    return payload(*encode_heads(blocks), **extra)


def decode(data: Any, meta: dict[str, Any] | None = None) -> torch.Tensor:
    """Inverse of the encoders (uint8 up to quantisation): a float32 tensor of ``meta["shape"]``.

    Takes ``(bytes, meta)`` or one payload dict. A ``"tril"`` payload comes back with zeros above
    the diagonal; per-head ``ranges`` (`encode_heads`) are honoured.

    Example:
        >>> import torch
        >>> decode(*encode_float32(torch.tensor([[1.5]])))
        tensor([[1.5000]])
    """
    if meta is None:
        if not isinstance(data, dict) or "data" not in data:
            raise ValueError("decode takes (bytes, meta) or a payload dict with 'data'; this payload has no data")
        data, meta = data["data"], data
    _check_meta(meta)
    encoding = meta.get("encoding")
    if encoding == "deflate":
        data = zlib.decompress(bytes(data))
    elif encoding is not None:
        raise ValueError(f"meta['encoding'] must be 'deflate' or absent; got {encoding!r}")
    shape = tuple(int(n) for n in meta["shape"])
    dtype = meta.get("dtype")
    if "ranges" in meta:
        size = math.prod(shape[1:])
        parts = [
            decode(data[h * size : (h + 1) * size], {"dtype": "uint8", "shape": shape[1:], "lo": lo, "hi": hi})
            for h, (lo, hi) in enumerate(meta["ranges"])
        ]
        return torch.stack(parts) if parts else torch.zeros(shape)
    _check_size(data, shape, dtype, meta.get("layout", "full"))
    if dtype == "float32":
        values = np.frombuffer(data, dtype="<f4").astype(np.float32)
    elif dtype == "uint8":
        codes = np.frombuffer(data, dtype=np.uint8)
        values = meta["lo"] + codes.astype(np.float32) * ((meta["hi"] - meta["lo"]) / CODE_MAX)
        values[codes == meta.get("nan_code", NAN_CODE)] = np.nan
    else:
        raise ValueError(f"meta['dtype'] must be 'uint8' or 'float32'; got {dtype!r}")
    if meta.get("layout", "full") == "tril":
        n = shape[-1]
        out = np.zeros(shape, dtype=np.float32)
        rows, cols = np.tril_indices(n)
        out[..., rows, cols] = values.reshape(*shape[:-2], -1)
        decoded = torch.from_numpy(out)
    else:
        decoded = torch.from_numpy(values.reshape(shape).copy())
    scale = meta.get("scale")  # codes of colour positions (`scaled`): back to weights
    # (a colour scale is a dict; LogitAttribution's "scale" is its list of frozen norm scales, not one)
    return in_trace.scale_values(decoded, scale) if isinstance(scale, dict) else decoded


def _check_meta(meta: Any) -> None:
    """ValueError naming what is wrong with a payload's metadata (a payload from a file or another tool)."""
    if not isinstance(meta, dict):
        raise ValueError(f"a payload's meta must be a dict; got {type(meta).__name__}")
    shape = meta.get("shape")
    if not isinstance(shape, (list, tuple)) or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in shape):
        raise ValueError(f"meta['shape'] must be a list of non-negative ints; got {shape!r}")
    if meta.get("layout", "full") not in LAYOUTS:
        raise ValueError(f"meta['layout'] must be one of {LAYOUTS}; got {meta.get('layout')!r}")
    if meta.get("layout") == "tril" and (len(shape) < 2 or shape[-1] != shape[-2]):
        raise ValueError(f"a 'tril' payload needs square trailing matrices; got shape {list(shape)}")
    if meta.get("dtype") == "uint8" and "ranges" not in meta:
        lo, hi = meta.get("lo"), meta.get("hi")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in (lo, hi)):
            raise ValueError(f"a uint8 payload needs finite numbers lo and hi; got lo={lo!r}, hi={hi!r}")
    if "ranges" in meta and (not isinstance(meta["ranges"], list) or len(meta["ranges"]) != (shape[0] if shape else 0)):
        raise ValueError(f"meta['ranges'] must hold one [lo, hi] per leading slice ({shape[0] if shape else 0})")


def _check_size(data: Any, shape: tuple[int, ...], dtype: Any, layout: str) -> None:
    cells = math.prod(shape[:-2]) * shape[-1] * (shape[-1] + 1) // 2 if layout == "tril" else math.prod(shape)
    size = cells * (4 if dtype == "float32" else 1)
    if len(data) != size:
        raise ValueError(f"the payload holds {len(data)} bytes; its meta (shape {list(shape)}, {dtype}, {layout}) needs {size}")


def quantisation_step(meta: dict[str, Any]) -> float:
    """Largest error of a uint8 payload's values: half a code step (0 for float32).

    Example:
        >>> round(quantisation_step({"dtype": "uint8", "lo": 0.0, "hi": 1.0}), 5)
        0.00197
    """
    if meta.get("dtype") == "float32":
        return 0.0
    spans = [hi - lo for lo, hi in meta["ranges"]] if "ranges" in meta else [meta["hi"] - meta["lo"]]
    return max(spans, default=0.0) / CODE_MAX / 2
