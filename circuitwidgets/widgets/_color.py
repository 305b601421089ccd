"""The ``color_scale`` trait of every view of attention weights, one definition for all of them."""

from __future__ import annotations

import traitlets

from ..in_trace import COLOR_SCALES


def color_scale_trait() -> traitlets.Enum:
    """``color_scale``: how attention weights are coloured (the codes sent are positions on it; see `transport.scaled`)."""
    return traitlets.Enum(
        COLOR_SCALES, "linear",
        help="colour scale of attention weights: 'linear' 0-1 (comparable across heads), 'auto' (each head over the "
        "median of its rows' largest weights), 'log', 'power' (square root) or 'relative' (weight x the sources its "
        "destination sees: 1 = uniform); the codes sent are positions on it (payload 'scale'), so a diffuse head of "
        "a long prompt is not drawn blank",
    ).tag(sync=True)
