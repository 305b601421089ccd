// Canvas heatmap element: the scene of heatmap-scene.js on one canvas, hover and selection marks
// on a second canvas on top (moving the mouse never repaints the cells), hover and click by cell.
//
// The cells are one ImageData (a 1 024 x 1 024 pattern is one putImageData) drawn scaled.

import { h } from "./controls.js";
import { heatmapScene, LABEL_CHARS } from "./heatmap-scene.js";
import { cellAt, displayToken, truncate } from "./layout.js";
import { paintCanvas } from "./scene.js";

export class Heatmap {
  constructor({ onHover, onClick, label = "heatmap" } = {}) {
    this.canvas = h("canvas", { class: "cw-heatmap-canvas", attrs: { role: "img", "aria-label": label } });
    this.overlay = h("canvas", { class: "cw-heatmap-overlay" });
    this.el = h("div", { class: "cw-heatmap" }, [this.canvas, this.overlay]);
    this.cells = document.createElement("canvas");
    this.spec = null;
    this.scene = null;
    this.highlight = {};
    const hit = (e) => {
      if (!this.scene) return null;
      const box = this.overlay.getBoundingClientRect();
      return cellAt(this.scene.layout, this.spec.rows, this.spec.cols, e.clientX - box.left, e.clientY - box.top);
    };
    this.listeners = {
      mousemove: (e) => onHover?.(hit(e)),
      mouseleave: () => onHover?.(null),
      click: (e) => {
        const cell = hit(e);
        if (cell) onClick?.(cell);
      },
    };
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.addEventListener(type, fn);
  }

  /** Redraw. spec: {rows, cols, paint(pixels), ...heatmapScene's spec}. */
  update(spec) {
    const { rows, cols, paint } = spec;
    if (this.cells.width !== cols || this.cells.height !== rows || !this.image) {
      this.cells.width = cols;
      this.cells.height = rows;
      this.image = this.cells.getContext("2d").createImageData(cols, rows);
      this.pixels = new Uint32Array(this.image.data.buffer);
    }
    paint(this.pixels);
    this.cells.getContext("2d").putImageData(this.image, 0, 0);
    this.spec = spec;
    const ctx = this.canvas.getContext("2d");
    const maxWidth = spec.maxWidth ?? this.room();
    this.scene = heatmapScene({ ...spec, maxWidth, cells: this.cells }, (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    });
    this.canvas.cwScene = this.scene; // what was drawn (labels, layout), for tests and tools
    paintCanvas(this.canvas, this.scene);
    this.el.style.width = `${this.scene.width}px`;
    this.el.style.height = `${this.scene.height}px`;
    this.drawOverlay();
  }

  /**
   * The width left to the picture in its widget's box (the root's width right of where the heatmap
   * starts), so that it never spills into a neighbouring column; Infinity before it is on the page.
   */
  room() {
    const root = this.el.closest?.(".cw-root");
    if (!root || !this.el.isConnected || !(root.clientWidth > 0)) return Number.POSITIVE_INFINITY;
    const offset = this.el.getBoundingClientRect().left - root.getBoundingClientRect().left;
    return root.clientWidth - Math.max(0, offset);
  }

  /** Hover/selection marks: {row, col, lockedRow, lockedCol, marks(layout) -> ops}, any may be absent. */
  setHighlight(highlight) {
    this.highlight = highlight || {};
    this.drawOverlay();
  }

  drawOverlay() {
    if (!this.scene) return;
    const ctx = this.overlay.getContext("2d");
    const measure = (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    };
    const ops = this.overlayOps(measure);
    this.overlay.cwScene = { ops }; // the marks and chips drawn, for tests and tools
    paintCanvas(this.overlay, { width: this.scene.width, height: this.scene.height, ops });
  }

  /** Bands on the hovered and locked row/column, and chips with their own labels (thinned out). */
  overlayOps(measure) {
    const { layout, font } = this.scene;
    const { left, top, cell, plotW, plotH } = layout;
    const { theme, rows, cols, rowLabels = [], colLabels = [] } = this.spec;
    const { row, col, lockedRow, lockedCol, marks } = this.highlight;
    const ops = [];
    const band = (r, c, color, dash) => {
      const side = Math.max(cell, 1) + 1;
      if (r != null && r >= 0 && r < rows)
        ops.push({ type: "rect", x: left - 0.5, y: top + r * cell - 0.5, w: plotW + 1, h: side, stroke: color, width: 1.5, dash });
      if (c != null && c >= 0 && c < cols)
        ops.push({ type: "rect", x: left + c * cell - 0.5, y: top - 0.5, w: side, h: plotH + 1, stroke: color, width: 1.5, dash });
    };
    band(lockedRow, lockedCol, theme.accent, null);
    band(row, col, theme.fg, [3, 2]);
    const chip = (text, x, y, rotate) => {
      const w = measure(text, font) + 6;
      const box = { type: "rect", x: -w, y: -8, w, h: 16, fill: theme.bgCss, stroke: theme.accent };
      const label = { type: "text", x: -3, y: 0, text, font, color: theme.fg, align: "right", baseline: "middle" };
      ops.push({ type: "group", x, y, rotate, ops: [box, label] });
    };
    const label = (labels, i) => truncate(displayToken(labels[i] ?? i), LABEL_CHARS);
    // the hovered row and column, and the locked ones (a clicked selection keeps its tokens named)
    const chipRows = [...new Set([row, lockedRow])].filter((r) => r != null && r >= 0 && r < rows);
    const chipCols = [...new Set([col, lockedCol])].filter((c) => c != null && c >= 0 && c < cols);
    for (const r of chipRows) chip(label(rowLabels, r), left - 2, top + (r + 0.5) * cell);
    for (const c of chipCols) chip(label(colLabels, c), left + (c + 0.5) * cell, top + plotH + 2, -Math.PI / 2);
    if (marks) ops.push(...marks(layout));
    return ops;
  }

  destroy() {
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.removeEventListener(type, fn);
    this.el.remove();
  }
}

/**
 * The height of the part of the page `el` is seen through: the outermost scrolling ancestor's (a
 * notebook's panel), else the window's, at most the screen's. Scrollers that only wrap their content
 * (an output area) are passed over, and so is the window of a frame (Colab's outputs): they grow
 * with the picture, and counting them would shrink it at each redraw.
 */
export function visibleHeight(el) {
  const screen = window.screen?.availHeight > 0 ? window.screen.availHeight : Number.POSITIVE_INFINITY;
  let scroller = null;
  for (let p = el.parentElement; p; p = p.parentElement) {
    const overflow = getComputedStyle(p).overflowY;
    const wraps = p.scrollHeight <= p.clientHeight + 1 && p.clientHeight <= el.offsetHeight + 40;
    if ((overflow === "auto" || overflow === "scroll") && p.clientHeight > 0 && !wraps) scroller = p;
  }
  if (scroller) return Math.min(scroller.clientHeight, screen);
  return window.self !== window.top ? screen : Math.min(window.innerHeight, screen);
}
