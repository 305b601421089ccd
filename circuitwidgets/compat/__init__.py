"""Drop-in modules for code written against other visualisation libraries, drawing circuitwidgets widgets.

- `circuitwidgets.compat.circuitsvis`: CircuitsVis's attention and token calls
  (``import circuitwidgets.compat.circuitsvis as cv`` in place of ``import circuitsvis as cv``).
"""
