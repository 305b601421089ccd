// The scene of a heatmap: title, cells, axis labels that fit and colour bar (a pure function, so
// node --test can check geometry and labels). Marks a view adds (a diagonal, cell values, marks on
// the colour bar) are ops too, so they reach PNG and SVG like the rest.

import { displayToken, heatmapLayout, labelFit, pickLabels, truncate } from "./layout.js";
import { formatValue, niceTicks, readableText } from "./scales.js";

export const FONT_PX = 11;
export const LABEL_CHARS = 14;

/**
 * The scene of a heatmap. `measure(text, font)` returns a text width in px.
 * spec: {rows, cols, rowLabels, colLabels, title, xTitle, yTitle, scale, theme, maxPlot, cells, marks,
 * rowPriority, colPriority, keepRows, keepCols} with `cells` the canvas of the cell image and
 * `marks(layout)` extra ops drawn on top.
 * Labels (labelFit, pickLabels): every row and column label when the cells are at least 9 px (in a
 * font one px smaller than the cell below 13 px, never below 8 px); on smaller cells, full-size labels
 * 13 px apart: `keepRows`/`keepCols` (the selected row and column) first, then the highest
 * `rowPriority`/`colPriority` (one number per row/column, higher = more worth a label), then evenly
 * spaced ones, the first and last included.
 * `maxWidth`/`maxHeight` (px, optional): the box the picture must fit (a Dashboard's column, the
 * visible part of a notebook); the cells shrink to fit it, the labels and colour bar keep their size.
 * Returns {width, height, ops, layout, rowStride, colStride, rowShown, colShown, font}: the indices
 * labelled, and the least index distance between two labels (1 when every label is drawn).
 */
export function heatmapScene(spec, measure) {
  const scene = sceneAt(spec, measure);
  const { maxWidth = Infinity, maxHeight = Infinity } = spec;
  if (!(scene.width > maxWidth || scene.height > maxHeight)) return scene;
  // Smaller cells until the picture fits its box (labels and colour bar keep their size), down to
  // MIN_FIT_PX on the long side: a box narrower than that gets a picture that overflows rather
  // than one too small to read.
  const { rows, cols } = spec;
  const { cell, plotW, plotH } = scene.layout;
  const fitCell = Math.min(cell, (maxWidth - (scene.width - plotW)) / cols, (maxHeight - (scene.height - plotH)) / rows);
  const maxPlot = Math.max(MIN_FIT_PX, Math.floor(fitCell * Math.max(rows, cols)));
  const fitted = sceneAt({ ...spec, maxPlot }, measure);
  // labels chosen for the smaller cells may be narrower or wider: one more step settles it
  const over = Math.max(fitted.width - maxWidth, fitted.height - maxHeight);
  return over > 0 && maxPlot > MIN_FIT_PX
    ? sceneAt({ ...spec, maxPlot: Math.max(MIN_FIT_PX, maxPlot - Math.ceil(over)) }, measure)
    : fitted;
}

/** The least long side a picture is shrunk to so that it fits `maxWidth` and `maxHeight` (px). */
export const MIN_FIT_PX = 64;

function sceneAt(spec, measure) {
  const { rows, cols, rowLabels = [], colLabels = [], title = "", xTitle = "", yTitle = "", scale, theme, maxPlot = 560 } = spec;
  const sans = `${FONT_PX}px ${theme.font}`;
  const probe = heatmapLayout({ rows, cols, maxPlot });
  const fit = labelFit(probe.cell, FONT_PX);
  const mono = `${fit.fontPx}px ${theme.mono}`;
  const pick = (n, priority, keep) => pickLabels(n, probe.cell, fit.gapPx, { priority, keep: [keep ?? []].flat() });
  const stride = (shown) => (shown.length < 2 ? 1 : Math.min(...shown.slice(1).map((i, k) => i - shown[k])));
  const label = (labels, i) => truncate(displayToken(labels[i] ?? i), LABEL_CHARS);
  const rowIndices = pick(rows, spec.rowPriority, spec.keepRows);
  const colIndices = pick(cols, spec.colPriority, spec.keepCols);
  const rowStride = stride(rowIndices);
  const colStride = stride(colIndices);
  const rowShown = rowIndices.map((i) => [i, label(rowLabels, i)]);
  const colShown = colIndices.map((i) => [i, label(colLabels, i)]);
  const widest = (items) => items.reduce((m, [, t]) => Math.max(m, measure(t, mono)), 0);
  // The x title sits beside the column labels, in the row labels' margin, so it widens that margin;
  // the y title has a line of its own above the plot and may reach over it.
  const yTitleW = measure(yTitle, sans);
  const rowLabelPx = Math.min(120, Math.max(28, widest(rowShown), measure(xTitle, sans)) + 8);
  const colLabelPx = Math.min(120, Math.max(28, widest(colShown)) + 8);
  const layout = heatmapLayout({ rows, cols, maxPlot, rowLabelPx, colLabelPx });
  const { left, top, plotW, plotH, cell } = layout;
  const ops = [];
  ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  ops.push({ type: "image", x: left, y: top, w: plotW, h: plotH, source: spec.cells, smooth: cell < 1, cells: true });
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  for (const [i, text] of rowShown) {
    ops.push({
      type: "text",
      x: left - 4,
      y: top + (i + 0.5) * cell,
      text,
      font: mono,
      color: theme.fg,
      align: "right",
      baseline: "middle",
    });
  }
  for (const [j, text] of colShown) {
    ops.push({
      type: "text",
      x: left + (j + 0.5) * cell,
      y: top + plotH + 4,
      text,
      font: mono,
      color: theme.fg,
      align: "right",
      baseline: "middle",
      rotate: -Math.PI / 2,
    });
  }
  if (yTitle) {
    const fits = yTitleW <= left - 10;
    ops.push({
      type: "text",
      x: fits ? left - 4 : 6,
      y: top - 8,
      text: yTitle,
      font: sans,
      color: theme.muted,
      align: fits ? "right" : "left",
    });
  }
  if (xTitle) ops.push({ type: "text", x: left - 4, y: top + plotH + 16, text: xTitle, font: sans, color: theme.muted, align: "right" });
  if (scale) {
    const barH = Math.max(120, plotH);
    layout.bar = { x: layout.barX, y: top, h: barH };
    ops.push(...colourBar(scale, layout.bar, theme));
    layout.height = Math.max(layout.height, Math.ceil(top + barH + 8));
  }
  if (spec.marks) ops.push(...spec.marks(layout));
  return {
    width: layout.width,
    height: layout.height,
    ops,
    layout,
    rowStride,
    colStride,
    rowShown: rowIndices,
    colShown: colIndices,
    font: mono,
  };
}

/** A vertical colour bar of `scale` at {x, y, h} with round ticks to its right. */
export function colourBar(scale, { x, y, h }, theme, { size = FONT_PX } = {}) {
  const [d0, d1] = scale.domain;
  const stops = [];
  for (let k = 0; k <= 16; k++) stops.push([k / 16, scale.css(d1 - ((d1 - d0) * k) / 16)]);
  const ops = [{ type: "bar", x, y, w: 12, h, stops, stroke: theme.border }];
  const ticks = scale.ticks || niceTicks(d0, d1, 5).map((t) => [t, formatValue(t, 3)]);
  for (const [t, text] of ticks) {
    const ty = y + ((d1 - t) / (d1 - d0)) * h;
    ops.push({ type: "line", x1: x + 12, y1: ty, x2: x + 16, y2: ty, stroke: theme.muted });
    ops.push({
      type: "text",
      x: x + 18,
      y: ty,
      text,
      font: `${size}px ${theme.font}`,
      color: theme.muted,
      align: "left",
      baseline: "middle",
    });
  }
  if (scale.caption)
    ops.push({
      type: "text",
      x,
      y: y - 18,
      text: scale.caption,
      font: `${size}px ${theme.font}`,
      color: theme.muted,
      align: "left",
      baseline: "middle",
      legend: true,
    });
  return ops;
}

/** The y of value `v` on a colour bar {y, h} of `domain` (clamped to the bar). */
export function barY([d0, d1], { y, h }, v) {
  return y + ((d1 - Math.max(d0, Math.min(d1, v))) / (d1 - d0)) * h;
}

/** Outlines of the diagonal cells of a heatmap `layout` with n diagonal cells. */
export function diagonalOps(layout, n, theme) {
  const { left, top, cell } = layout;
  const thick = cell >= 5;
  const ops = [];
  for (let i = 0; i < n; i++) {
    const side = Math.max(0.5, cell - 1);
    ops.push({
      type: "rect",
      x: left + i * cell + 0.5,
      y: top + i * cell + 0.5,
      w: side,
      h: side,
      stroke: theme.fg,
      alpha: thick ? 0.85 : 0.45,
      width: thick ? 1 : 0.6,
    });
  }
  return ops;
}

/**
 * Each cell's value written in the cells of a heatmap `layout` of `rows` x `cols`: value(row, col)
 * as text(value), in a colour readable on its cell (scale.rgb); a non-finite value is left blank.
 */
export function cellValueOps(layout, rows, cols, { value, text, scale, theme }) {
  const ops = [];
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const x = value(r, c);
      if (!Number.isFinite(x)) continue;
      const at = { x: layout.left + (c + 0.5) * layout.cell, y: layout.top + (r + 0.5) * layout.cell };
      ops.push({
        type: "text",
        ...at,
        text: text(x),
        font: `10px ${theme.font}`,
        color: readableText(scale.rgb(x)),
        align: "center",
        baseline: "middle",
      });
    }
  }
  return ops;
}

/** Outline of cell (row, col) of a heatmap `layout`, `inset` px inside its edge (negative: outside). */
export function cellBox(layout, row, col, { color, width = 2, inset = 0 }) {
  const { left, top, cell } = layout;
  const side = Math.max(cell, 2) - 2 * inset;
  return { type: "rect", x: left + col * cell + inset, y: top + row * cell + inset, w: side, h: side, stroke: color, width };
}
