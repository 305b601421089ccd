"""Checks of arguments several analysis functions take alike: a pass's rows per block and its progress callback,
a list of metric names."""

from __future__ import annotations

from typing import Any


def check_pass(chunk_size: Any, progress: Any) -> None:
    """`chunk_size` (rows per block of a pass over the vocabulary) an int >= 1 or None; `progress` callable or None."""
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)):
        raise TypeError(f"chunk_size must be an int or None; got {chunk_size!r}")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be >= 1")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable or None; got {progress!r}")


def check_metric_names(metrics: Any, known: tuple[str, ...]) -> tuple[str, ...]:
    """`metrics` (one name or several) as a tuple: each one of `known`, at least one, none repeated."""
    if isinstance(metrics, str):
        metrics = [metrics]
    try:
        metrics = list(metrics)
    except TypeError:
        raise TypeError(f"metrics must be a list of metric names; got {type(metrics).__name__}") from None
    if not metrics:
        raise ValueError(f"metrics must name at least one of {known}")
    for metric in metrics:
        if metric not in known:
            raise ValueError(f"metrics holds {metric!r}; each metric must be one of {known}")
    if len(set(metrics)) != len(metrics):
        raise ValueError(f"metrics must not repeat a metric; got {metrics}")
    return tuple(metrics)
