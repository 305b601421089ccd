"""The JS bundle and its CSS, read once from ``static/`` (built from ``js/`` by esbuild, committed)."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"
# Read once, as text: anywidget watches a Path for changes with a callback that holds every
# instance, so a closed widget (and its model) could never be freed.
BUNDLE_JS = (STATIC / "widgets.js").read_text(encoding="utf-8")
BUNDLE_CSS = (STATIC / "widgets.css").read_text(encoding="utf-8")
