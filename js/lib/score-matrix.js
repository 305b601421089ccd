// The composition scores as a matrix: writer heads (every layer but the last) as rows, reader
// heads (every layer but the first) as columns. Pairs below the threshold fade into the background.

import { flatHeads, pairIndex } from "./graph.js";
import { thresholdMarks } from "./graph-scene.js";
import { Heatmap } from "./heatmap.js";
import { cellBox } from "./heatmap-scene.js";
import { packRGBA } from "./scales.js";

/** Rows and columns of the matrix for layers labelled `layerLabels`, H heads each. */
export function matrixAxes(layerLabels, H) {
  const L = layerLabels.length;
  return { rows: flatHeads(layerLabels, H, 0, L - 1), cols: flatHeads(layerLabels, H, 1, L) };
}

/** The pair {l1, h1, l2, h2} at matrix cell (row, col). */
export function matrixPair(row, col, H) {
  return { type: "edge", l1: Math.floor(row / H), h1: row % H, l2: 1 + Math.floor(col / H), h2: col % H };
}

/** The matrix cell {row, col} of pair p. */
export function matrixCell(p, H) {
  return { row: p.l1 * H + p.h1, col: (p.l2 - 1) * H + p.h2 };
}

/**
 * Paint kind k's matrix into `pixels` (Uint32 RGBA); returns how many pairs pass the threshold.
 * spec: {values, k, L, H, axes, offset, threshold, scale, background: [r, g, b]}.
 */
export function paintMatrix(pixels, { values, k, L, H, axes, offset, threshold, scale, background }) {
  const { rows, cols } = axes;
  const nanPx = packRGBA(...scale.nan);
  const fade = (c, i) => Math.round(background[i] * 0.8 + c * 0.2);
  let shown = 0;
  for (let r = 0; r < rows.length; r++) {
    for (let c = 0; c < cols.length; c++) {
      const raw = values[pairIndex(k, rows[r].l, rows[r].h, cols[c].l, cols[c].h, L, H)];
      let px = nanPx;
      if (Number.isFinite(raw)) {
        const v = raw - offset;
        const rgb = scale.rgb(v);
        if (v >= threshold) shown++;
        px = v >= threshold ? packRGBA(...rgb) : packRGBA(...rgb.map(fade));
      }
      pixels[r * cols.length + c] = px;
    }
  }
  return shown;
}

/**
 * The matrix on a Heatmap: hover and click report pairs; update(spec) draws graphScene's spec
 * (plus maxPlot) with the baseline and threshold on the colour bar, mark(spec) the hover and the
 * selected pair. `shown` counts the pairs above the threshold.
 */
export class ScoreMatrix {
  constructor({ onHover, onClick }) {
    this.H = 1;
    this.shown = 0;
    this.heatmap = new Heatmap({
      label: "composition scores",
      onHover: (hit) => onHover(hit ? matrixPair(hit.row, hit.col, this.H) : null),
      onClick: (hit) => onClick(matrixPair(hit.row, hit.col, this.H)),
    });
    this.el = this.heatmap.el;
  }

  get scene() {
    return this.heatmap.scene;
  }

  update(spec) {
    const { layerLabels, H, scale, theme, threshold } = spec;
    this.H = H;
    const axes = matrixAxes(layerLabels, H);
    this.heatmap.update({
      rows: axes.rows.length,
      cols: axes.cols.length,
      paint: (pixels) => {
        this.shown = paintMatrix(pixels, { ...spec, axes, background: theme.bg });
      },
      rowLabels: axes.rows.map((x) => x.label),
      colLabels: axes.cols.map((x) => x.label),
      title: spec.title ?? `${spec.kind}-composition${spec.corrected ? " (minus baseline)" : ""}`,
      yTitle: "writer ↓",
      xTitle: "reader →",
      scale,
      theme,
      maxPlot: spec.maxPlot,
      marks: (layout) => thresholdMarks(scale, layout.bar, { baseline: spec.baseline, threshold, theme }),
    });
    this.mark(spec);
  }

  mark({ hover, pair, theme }) {
    const cell = hover?.type === "edge" ? matrixCell(hover, this.H) : {};
    const at = pair && pair.l1 >= 0 && pair.l2 >= 1 ? matrixCell(pair, this.H) : null;
    const marks = (layout) => (at ? [cellBox(layout, at.row, at.col, { color: theme.accent, inset: -1 })] : []);
    this.heatmap.setHighlight({ row: cell.row, col: cell.col, marks });
  }

  destroy() {
    this.heatmap.destroy();
  }
}
