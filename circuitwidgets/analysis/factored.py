"""A low-rank matrix ``left @ right`` kept as its two thin factors, optionally batched.

Vocabulary-sized circuits (``W_E W_V W_O W_U`` is 50 257 x 50 257 for GPT-2: 10 GB in float32)
are only ever touched through their factors: rows, columns and sub-blocks on token subsets are
small dense products, and norms, traces and eigenvalues come from ``r x r`` inner products,
``r`` being the inner (rank) dimension.

Like TransformerLens' ``FactoredMatrix``, the factors may carry leading batch dimensions
(``left [..., m, r]``, ``right [..., r, n]``, broadcast against each other): one `Factored`
then holds, say, every head of a layer, and every method answers for all of them at once,
its result carrying the leading dimensions. Index the batch with ``f[head]``.

Example:
    >>> import torch
    >>> from circuitwidgets.analysis import Factored
    >>> m = Factored(torch.randn(1000, 8), torch.randn(8, 1000))
    >>> m.shape, m.rank_bound
    ((1000, 1000), 8)
    >>> m.rows([0, 5]).shape
    torch.Size([2, 1000])
    >>> bool(torch.isclose(m.trace().double(), m.eigenvalues().sum().real, rtol=1e-3))
    True
    >>> heads = Factored(torch.randn(4, 1000, 8), torch.randn(4, 8, 1000))   # 4 heads
    >>> heads.shape, heads.norm().shape, heads.eigenvalues().shape
    ((4, 1000, 1000), torch.Size([4]), torch.Size([4, 8]))
    >>> bool(torch.allclose(heads[2].block([1, 2], [3]), heads.block([1, 2], [3])[2]))
    True
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

DENSE_LIMIT = 50_000_000  # entries: 200 MB in float32; a GPT-2 vocab square is 2.5 billion
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _check_factor(name: str, tensor: Any) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(tensor).__name__}")
    if tensor.ndim < 2:
        raise ValueError(f"{name} must be 2-D (or [..., rows, cols] with batch dimensions); got shape {tuple(tensor.shape)}")
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise TypeError(f"{name} must be a floating-point tensor; got dtype {tensor.dtype}")
    if not torch.isfinite(tensor).all():
        # one O(size) pass, cheap next to any product with the factor
        raise ValueError(f"{name} contains NaN/Inf values")
    return tensor


def _grow(tensor: torch.Tensor, batch: tuple[int, ...]) -> torch.Tensor:
    """`tensor` broadcast to the batch dimensions `batch` (a view, no copy)."""
    if tuple(tensor.shape[:-2]) == batch:
        return tensor
    return tensor.expand(*batch, *tensor.shape[-2:])


def _batch_of(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast of two batch shapes, or None when they do not broadcast."""
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


class Factored:
    """The matrix ``left @ right`` (``[m, r] @ [r, n]``) without ever forming it.

    Factors may have leading batch dimensions (``[..., m, r] @ [..., r, n]``, broadcast):
    every result then carries them, ``f[i]`` picks one matrix of the batch.
    Indexing methods (`rows`, `columns`, `block`) return dense tensors and refuse results
    larger than ``max_entries`` (default `DENSE_LIMIT`, counted over the whole batch);
    everything else stays ``r``-sized.
    """

    __slots__ = ("left", "right")

    def __init__(self, left: torch.Tensor, right: torch.Tensor):
        left, right = _check_factor("left", left), _check_factor("right", right)
        if left.shape[-1] != right.shape[-2]:
            raise ValueError(
                f"inner dimensions differ: left is {tuple(left.shape)}, right is {tuple(right.shape)}"
            )
        batch = _batch_of(tuple(left.shape[:-2]), tuple(right.shape[:-2]))
        if batch is None:
            raise ValueError(
                f"batch dimensions do not broadcast: left is {tuple(left.shape)}, right is {tuple(right.shape)}"
            )
        if left.device != right.device:
            raise ValueError(f"left is on {left.device} but right is on {right.device}")
        if left.dtype != right.dtype:
            common = torch.promote_types(left.dtype, right.dtype)
            left, right = left.to(common), right.to(common)
        self.left = _grow(left, batch)
        self.right = _grow(right, batch)

    # ----- basic facts ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """``(*batch_shape, m, n)``; ``(m, n)`` without batch dimensions."""
        return (*self.left.shape[:-1], self.right.shape[-1])

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The leading dimensions, ``()`` for a single matrix."""
        return tuple(self.left.shape[:-2])

    @property
    def rank_bound(self) -> int:
        """The inner dimension ``r``: the rank is at most this."""
        return self.left.shape[-1]

    @property
    def dtype(self) -> torch.dtype:
        return self.left.dtype

    @property
    def device(self) -> torch.device:
        return self.left.device

    def __repr__(self) -> str:
        m, n = self.shape[-2:]
        batch = f"batch {list(self.batch_shape)} of " if self.batch_shape else ""
        return f"Factored({batch}{m}x{self.rank_bound} @ {self.rank_bound}x{n}, dtype={self.dtype}, device={self.device})"

    def __getitem__(self, idx: Any) -> Factored:
        """The matrices at `idx` of the batch dimensions (never indexes rows or columns)."""
        if not self.batch_shape:
            raise TypeError("this Factored is a single matrix: use rows(), columns() or block() to index it")
        parts = idx if isinstance(idx, tuple) else (idx,)
        if any(part is Ellipsis for part in parts):  # "..." would reach into the matrix dimensions
            raise IndexError("index the batch dimensions without '...'")
        if len(parts) > len(self.batch_shape):
            raise IndexError(f"{len(parts)} indices for {len(self.batch_shape)} batch dimensions {list(self.batch_shape)}")
        return Factored(self.left[idx], self.right[idx])

    # ----- dense pieces --------------------------------------------------------------------
    def _guard(self, rows: int, cols: int, max_entries: int) -> None:
        entries = rows * cols * math.prod(self.batch_shape)
        if entries > max_entries:
            dims = " x ".join(str(d) for d in (*self.batch_shape, rows, cols))
            what = "batch of matrices" if self.batch_shape else "matrix"
            raise ValueError(
                f"refusing to materialise a dense {dims} {what} ({entries:,} entries > "
                f"max_entries={max_entries:,}); select rows, columns or a block on a token subset instead"
            )

    def rows(self, idx: Any, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """Dense rows ``(left @ right)[..., idx, :]``: ``[..., n]`` for an int, ``[..., len(idx), n]`` otherwise."""
        index, single = _lines(idx, self.shape[-2], "row")
        picked = self.left[..., index, :]
        self._guard(picked.shape[-2], self.shape[-1], max_entries)
        out = picked @ self.right
        return out[..., 0, :] if single else out

    def columns(self, idx: Any, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """Dense columns ``(left @ right)[..., :, idx]``: ``[..., m]`` for an int, ``[..., m, len(idx)]`` otherwise."""
        index, single = _lines(idx, self.shape[-1], "column")
        picked = self.right[..., :, index]
        self._guard(self.shape[-2], picked.shape[-1], max_entries)
        out = self.left @ picked
        return out[..., 0] if single else out

    def block(self, row_idx: Any, col_idx: Any, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """Dense sub-block ``(left @ right)[..., row_idx, :][..., col_idx]`` (ints drop that dimension)."""
        rows, single_row = _lines(row_idx, self.shape[-2], "row")
        cols, single_col = _lines(col_idx, self.shape[-1], "column")
        left, right = self.left[..., rows, :], self.right[..., :, cols]
        self._guard(left.shape[-2], right.shape[-1], max_entries)
        out = left @ right
        out = out[..., 0, :] if single_row else out
        return out[..., 0] if single_col else out

    def dense(self, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """The whole ``[..., m, n]`` matrix, refused (ValueError) above ``max_entries`` entries."""
        self._guard(self.shape[-2], self.shape[-1], max_entries)
        return self.left @ self.right

    def top_k(
        self, k: int, *, row: Any = None, column: Any = None, largest: bool = True
    ) -> torch.return_types.topk:
        """``(values, indices)`` of the `k` largest (or smallest) entries of a row or a column.

        Give exactly one of `row` / `column`, an int (results ``[..., k]``) or a sequence of
        indices (results ``[..., len, k]``, one line per requested row or column).
        """
        if (row is None) == (column is None):
            raise ValueError("top_k needs exactly one of row=... or column=...")
        length = self.shape[-1] if row is not None else self.shape[-2]
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k must be an int; got {k!r}")
        if not 1 <= k <= length:
            raise ValueError(f"k={k} is out of range: 1..{length}")
        if row is not None:
            lines = self.rows(row)
        else:
            lines = self.columns(column)
            lines = lines if isinstance(column, int) else lines.mT
        return torch.topk(lines, k, dim=-1, largest=largest)

    # ----- small-side quantities -----------------------------------------------------------
    def _work(self) -> tuple[torch.Tensor, torch.Tensor]:
        # Half-precision Grams lose too much: do the r x r algebra in float32 at least.
        if self.dtype in _LOW_PRECISION:
            return self.left.float(), self.right.float()
        return self.left, self.right

    def norm(self) -> torch.Tensor:
        """Frobenius norm (``[...]``), from ``||AB||^2 = <A^T A, B B^T>`` (two ``r x r`` Gram matrices)."""
        left, right = self._work()
        gram_left = left.mH @ left
        gram_right = right @ right.mH
        squared = (gram_left * gram_right.conj()).sum((-2, -1)).real
        return squared.clamp_min(0).sqrt()

    def _check_square(self, what: str) -> None:
        m, n = self.shape[-2:]
        if m != n:
            raise ValueError(f"{what} needs a square matrix; this one is {m} x {n}")

    def trace(self) -> torch.Tensor:
        """``tr(AB) = sum_ij A_ij B_ji`` (``[...]``), without forming AB."""
        self._check_square("trace")
        left, right = self._work()
        return (left * right.mT).sum((-2, -1))

    def small_side(self) -> torch.Tensor:
        """The ``[..., r, r]`` matrix ``right @ left``, which has the non-zero eigenvalues of ``left @ right``."""
        self._check_square("small_side")
        left, right = self._work()
        return right @ left

    def eigenvalues(self) -> torch.Tensor:
        """Eigenvalues of ``right @ left`` (complex ``[..., r]``, largest magnitude first).

        These are all the non-zero eigenvalues of ``left @ right`` (``m x m``) with their
        multiplicities, padded with zeros when the rank is below ``r``. Computed in float64.
        """
        small = self.small_side().to(torch.complex128 if self.dtype.is_complex else torch.float64)
        values = torch.linalg.eigvals(small)
        return values.gather(-1, values.abs().argsort(dim=-1, descending=True))

    # ----- algebra -------------------------------------------------------------------------
    @property
    def T(self) -> Factored:
        return Factored(self.right.mT, self.left.mT)

    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, Factored):
            if self.shape[-1] != other.shape[-2] or _batch_of(self.batch_shape, other.batch_shape) is None:
                raise ValueError(f"cannot multiply {self.shape} by {other.shape}")
            inner = self.right @ other.left  # [..., r1, r2]: keep whichever inner size is smaller
            if self.rank_bound <= other.rank_bound:
                return Factored(self.left, inner @ other.right)
            return Factored(self.left @ inner, other.right)
        if isinstance(other, torch.Tensor):
            if other.ndim == 1:  # a column vector; batched matmul needs it 2-D
                return (self.left @ (self.right @ other[:, None]))[..., 0]
            return Factored(self.left, self.right @ other)
        return NotImplemented

    def __rmatmul__(self, other: Any) -> Any:
        if isinstance(other, torch.Tensor):
            if other.ndim == 1:  # a row vector
                return ((other[None] @ self.left) @ self.right)[..., 0, :]
            return Factored(other @ self.left, self.right)
        return NotImplemented

    def __add__(self, other: Any) -> Factored:
        """``A1 B1 + A2 B2 = [A1 A2] [B1; B2]``: sums of heads stay factored (ranks add)."""
        if not isinstance(other, Factored):
            return NotImplemented
        batch = _batch_of(self.batch_shape, other.batch_shape)
        if self.shape[-2:] != other.shape[-2:] or batch is None:
            raise ValueError(f"cannot add {self.shape} and {other.shape}")
        left = torch.cat([_grow(self.left, batch), _grow(other.left, batch)], dim=-1)
        return Factored(left, torch.cat([_grow(self.right, batch), _grow(other.right, batch)], dim=-2))

    def __mul__(self, scalar: Any) -> Factored:
        if not _is_scalar(scalar):
            return NotImplemented
        return Factored(self.left * scalar, self.right)

    __rmul__ = __mul__

    def __truediv__(self, scalar: Any) -> Factored:
        if not _is_scalar(scalar):
            return NotImplemented
        return Factored(self.left / scalar, self.right)

    def __neg__(self) -> Factored:
        return Factored(-self.left, self.right)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _lines(idx: Any, size: int, what: str) -> tuple[Any, bool]:
    """A validated index that keeps its dimension, and whether it was a single int (to drop it)."""
    index = _index(idx, size, what)
    return ([index], True) if isinstance(index, int) else (index, False)


def _index(idx: Any, size: int, what: str) -> Any:
    """Validate an int / slice / sequence / tensor index against `size` (no negative wrap)."""
    if isinstance(idx, bool):
        raise TypeError(f"{what} index must be an int, slice or sequence of ints; got {idx!r}")
    if isinstance(idx, int):
        if not 0 <= idx < size:
            raise ValueError(f"{what} index {idx} is out of range: 0..{size - 1}")
        return idx
    if isinstance(idx, slice):
        return idx
    try:
        tensor = torch.as_tensor(idx)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{what} index must be an int, slice or sequence of ints; got {type(idx).__name__}") from exc
    if tensor.dtype == torch.bool:
        if tensor.shape != (size,):
            raise ValueError(f"boolean {what} mask must have shape ({size},); got {tuple(tensor.shape)}")
        return tensor
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        raise TypeError(f"{what} index must hold integers; got dtype {tensor.dtype}")
    if tensor.ndim != 1:
        raise ValueError(f"{what} index must be 1-D; got shape {tuple(tensor.shape)}")
    if tensor.numel() and (int(tensor.min()) < 0 or int(tensor.max()) >= size):
        bad = int(tensor.min()) if int(tensor.min()) < 0 else int(tensor.max())
        raise ValueError(f"{what} index {bad} is out of range: 0..{size - 1}")
    return tensor.long()
