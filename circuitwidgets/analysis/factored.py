"""A low-rank matrix ``left @ right`` kept as its two thin factors.

Vocabulary-sized circuits (``W_E W_V W_O W_U`` is 50 257 x 50 257 for GPT-2: 10 GB in float32)
are only ever touched through their factors: rows, columns and sub-blocks on token subsets are
small dense products, and norms, traces and eigenvalues come from ``r x r`` inner products,
``r`` being the inner (rank) dimension.

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
"""

from __future__ import annotations

import numbers
from typing import Any

import torch

DENSE_LIMIT = 50_000_000  # entries: 200 MB in float32; a GPT-2 vocab square is 2.5 billion
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _check_factor(name: str, tensor: Any) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(tensor).__name__}")
    if tensor.ndim != 2:
        raise ValueError(f"{name} must be 2-D; got shape {tuple(tensor.shape)}")
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise TypeError(f"{name} must be a floating-point tensor; got dtype {tensor.dtype}")
    if not torch.isfinite(tensor).all():
        # one O(size) pass, cheap next to any product with the factor
        raise ValueError(f"{name} contains NaN/Inf values")
    return tensor


class Factored:
    """The matrix ``left @ right`` (``[m, r] @ [r, n]``) without ever forming it.

    Indexing methods (`rows`, `columns`, `block`) return dense tensors and refuse results
    larger than ``max_entries`` (default `DENSE_LIMIT`); everything else stays ``r``-sized.
    """

    __slots__ = ("left", "right")

    def __init__(self, left: torch.Tensor, right: torch.Tensor):
        left, right = _check_factor("left", left), _check_factor("right", right)
        if left.shape[1] != right.shape[0]:
            raise ValueError(
                f"inner dimensions differ: left is {tuple(left.shape)}, right is {tuple(right.shape)}"
            )
        if left.device != right.device:
            raise ValueError(f"left is on {left.device} but right is on {right.device}")
        if left.dtype != right.dtype:
            common = torch.promote_types(left.dtype, right.dtype)
            left, right = left.to(common), right.to(common)
        self.left = left
        self.right = right

    # ----- basic facts ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.left.shape[0], self.right.shape[1])

    @property
    def rank_bound(self) -> int:
        """The inner dimension ``r``: the rank is at most this."""
        return self.left.shape[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.left.dtype

    @property
    def device(self) -> torch.device:
        return self.left.device

    def __repr__(self) -> str:
        m, n = self.shape
        return f"Factored({m}x{self.rank_bound} @ {self.rank_bound}x{n}, dtype={self.dtype}, device={self.device})"

    # ----- dense pieces --------------------------------------------------------------------
    def _guard(self, rows: int, cols: int, max_entries: int) -> None:
        if rows * cols > max_entries:
            raise ValueError(
                f"refusing to materialise a dense {rows} x {cols} matrix ({rows * cols:,} entries > "
                f"max_entries={max_entries:,}); select rows, columns or a block on a token subset instead"
            )

    def rows(self, idx: Any, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """Dense rows ``(left @ right)[idx]``: ``[n]`` for an int, ``[len(idx), n]`` otherwise."""
        picked = self.left[_index(idx, self.shape[0], "row")]
        self._guard(1 if picked.ndim == 1 else picked.shape[0], self.shape[1], max_entries)
        return picked @ self.right

    def columns(self, idx: Any, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """Dense columns ``(left @ right)[:, idx]``: ``[m]`` for an int, ``[m, len(idx)]`` otherwise."""
        picked = self.right[:, _index(idx, self.shape[1], "column")]
        n_cols = 1 if picked.ndim == 1 else picked.shape[1]
        self._guard(self.shape[0], n_cols, max_entries)
        return self.left @ picked

    def block(self, row_idx: Any, col_idx: Any, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """Dense sub-block ``(left @ right)[row_idx][:, col_idx]`` (ints drop that dimension)."""
        left = self.left[_index(row_idx, self.shape[0], "row")]
        right = self.right[:, _index(col_idx, self.shape[1], "column")]
        n_rows = 1 if left.ndim == 1 else left.shape[0]
        n_cols = 1 if right.ndim == 1 else right.shape[1]
        self._guard(n_rows, n_cols, max_entries)
        return left @ right

    def dense(self, *, max_entries: int = DENSE_LIMIT) -> torch.Tensor:
        """The whole ``[m, n]`` matrix, refused (ValueError) above ``max_entries`` entries."""
        self._guard(*self.shape, max_entries)
        return self.left @ self.right

    def top_k(
        self, k: int, *, row: Any = None, column: Any = None, largest: bool = True
    ) -> torch.return_types.topk:
        """``(values, indices)`` of the `k` largest (or smallest) entries of a row or a column.

        Give exactly one of `row` / `column`, an int (results ``[k]``) or a sequence of
        indices (results ``[len, k]``, one line per requested row or column).
        """
        if (row is None) == (column is None):
            raise ValueError("top_k needs exactly one of row=... or column=...")
        length = self.shape[1] if row is not None else self.shape[0]
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k must be an int; got {k!r}")
        if not 1 <= k <= length:
            raise ValueError(f"k={k} is out of range: 1..{length}")
        if row is not None:
            lines = self.rows(row)
        else:
            lines = self.columns(column)
            lines = lines.T if lines.ndim == 2 else lines
        return torch.topk(lines, k, dim=-1, largest=largest)

    # ----- small-side quantities -----------------------------------------------------------
    def _work(self) -> tuple[torch.Tensor, torch.Tensor]:
        # Half-precision Grams lose too much: do the r x r algebra in float32 at least.
        if self.dtype in _LOW_PRECISION:
            return self.left.float(), self.right.float()
        return self.left, self.right

    def norm(self) -> torch.Tensor:
        """Frobenius norm, from ``||AB||^2 = <A^T A, B B^T>`` (two ``r x r`` Gram matrices)."""
        left, right = self._work()
        gram_left = left.mH @ left
        gram_right = right @ right.mH
        squared = (gram_left * gram_right.conj()).sum().real
        return squared.clamp_min(0).sqrt()

    def _check_square(self, what: str) -> None:
        if self.shape[0] != self.shape[1]:
            raise ValueError(f"{what} needs a square matrix; this one is {self.shape[0]} x {self.shape[1]}")

    def trace(self) -> torch.Tensor:
        """``tr(AB) = sum_ij A_ij B_ji``, without forming AB."""
        self._check_square("trace")
        left, right = self._work()
        return (left * right.T).sum()

    def small_side(self) -> torch.Tensor:
        """The ``r x r`` matrix ``right @ left``, which has the non-zero eigenvalues of ``left @ right``."""
        self._check_square("small_side")
        left, right = self._work()
        return right @ left

    def eigenvalues(self) -> torch.Tensor:
        """Eigenvalues of ``right @ left`` (complex ``[r]``, largest magnitude first).

        These are all the non-zero eigenvalues of ``left @ right`` (``m x m``) with their
        multiplicities, padded with zeros when the rank is below ``r``. Computed in float64.
        """
        small = self.small_side().to(torch.complex128 if self.dtype.is_complex else torch.float64)
        values = torch.linalg.eigvals(small)
        return values[values.abs().argsort(descending=True)]

    # ----- algebra -------------------------------------------------------------------------
    @property
    def T(self) -> "Factored":
        return Factored(self.right.T, self.left.T)

    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, Factored):
            if self.shape[1] != other.shape[0]:
                raise ValueError(f"cannot multiply {self.shape} by {other.shape}")
            inner = self.right @ other.left  # [r1, r2]: keep whichever inner size is smaller
            if self.rank_bound <= other.rank_bound:
                return Factored(self.left, inner @ other.right)
            return Factored(self.left @ inner, other.right)
        if isinstance(other, torch.Tensor):
            if other.ndim == 1:
                return self.left @ (self.right @ other)
            return Factored(self.left, self.right @ other)
        return NotImplemented

    def __rmatmul__(self, other: Any) -> Any:
        if isinstance(other, torch.Tensor):
            if other.ndim == 1:
                return (other @ self.left) @ self.right
            return Factored(other @ self.left, self.right)
        return NotImplemented

    def __add__(self, other: Any) -> "Factored":
        """``A1 B1 + A2 B2 = [A1 A2] [B1; B2]``: sums of heads stay factored (ranks add)."""
        if not isinstance(other, Factored):
            return NotImplemented
        if self.shape != other.shape:
            raise ValueError(f"cannot add {self.shape} and {other.shape}")
        return Factored(torch.cat([self.left, other.left], dim=1), torch.cat([self.right, other.right], dim=0))

    def __mul__(self, scalar: Any) -> "Factored":
        if isinstance(scalar, bool) or not isinstance(scalar, numbers.Number):
            return NotImplemented
        return Factored(self.left * scalar, self.right)

    __rmul__ = __mul__

    def __truediv__(self, scalar: Any) -> "Factored":
        if isinstance(scalar, bool) or not isinstance(scalar, numbers.Number):
            return NotImplemented
        return Factored(self.left / scalar, self.right)

    def __neg__(self) -> "Factored":
        return Factored(-self.left, self.right)


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
