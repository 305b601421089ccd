// Canvas heatmap with axis labels, colour bar, hover and click. Shared by every matrix view.
//
// The cells are one ImageData (a 1 024 x 1 024 pattern is one putImageData) drawn scaled onto the
// visible canvas. Labels, title and colour bar form a "scene" (a list of drawing operations) built
// by a pure function, so the same picture renders to the canvas, to PNG and to SVG. Hover and the
// selection are drawn on a second canvas on top, so moving the mouse never repaints the cells.

import { h } from "./controls.js";
import { cellAt, displayToken, heatmapLayout, labelPositions, labelStride, truncate } from "./layout.js";
import { formatValue, niceTicks } from "./scales.js";

const FONT_PX = 11;
const LABEL_CHARS = 14;

/**
 * Drawing operations for a heatmap. `measure(text, font)` returns a text width in px.
 * spec: {rows, cols, rowLabels, colLabels, title, xTitle, yTitle, scale, theme, maxPlot}
 */
export function buildScene(spec, measure) {
  const { rows, cols, rowLabels = [], colLabels = [], title = "", xTitle = "", yTitle = "", scale, theme, maxPlot = 560 } = spec;
  const mono = `${FONT_PX}px ${theme.mono}`;
  const sans = `${FONT_PX}px ${theme.font}`;
  const probe = heatmapLayout({ rows, cols, maxPlot });
  const gap = FONT_PX + 2;
  const rowStride = labelStride(probe.cell, gap);
  const colStride = labelStride(probe.cell, gap);
  const rowShown = labelPositions(rows, rowStride).map((i) => [i, truncate(displayToken(rowLabels[i] ?? i), LABEL_CHARS)]);
  const colShown = labelPositions(cols, colStride).map((i) => [i, truncate(displayToken(colLabels[i] ?? i), LABEL_CHARS)]);
  const widest = (items) => items.reduce((m, [, t]) => Math.max(m, measure(t, mono)), 0);
  const titleW = Math.max(measure(yTitle, sans), measure(xTitle, sans));
  const rowLabelPx = Math.min(120, Math.max(28, widest(rowShown), titleW) + 8);
  const colLabelPx = Math.min(120, Math.max(28, widest(colShown)) + 8);
  const layout = heatmapLayout({ rows, cols, maxPlot, rowLabelPx, colLabelPx });
  const { left, top, plotW, plotH, cell } = layout;
  const ops = [];
  ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  ops.push({ type: "cells", x: left, y: top, w: plotW, h: plotH });
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  for (const [i, text] of rowShown) {
    ops.push({ type: "text", x: left - 4, y: top + (i + 0.5) * cell, text, font: mono, color: theme.fg, align: "right", baseline: "middle" });
  }
  for (const [j, text] of colShown) {
    ops.push({ type: "text", x: left + (j + 0.5) * cell, y: top + plotH + 4, text, font: mono, color: theme.fg, align: "right", baseline: "middle", rotate: -Math.PI / 2 });
  }
  if (yTitle) ops.push({ type: "text", x: left - 4, y: top - 8, text: yTitle, font: sans, color: theme.muted, align: "right" });
  if (xTitle) ops.push({ type: "text", x: left - 4, y: top + plotH + 16, text: xTitle, font: sans, color: theme.muted, align: "right" });
  if (scale) {
    const barH = Math.max(120, plotH);
    const [d0, d1] = scale.domain;
    const stops = [];
    for (let k = 0; k <= 16; k++) stops.push([k / 16, scale.css(d1 - ((d1 - d0) * k) / 16)]);
    ops.push({ type: "bar", x: layout.barX, y: top, w: 12, h: barH, stops, stroke: theme.border });
    for (const t of niceTicks(d0, d1, 5)) {
      const y = top + ((d1 - t) / (d1 - d0)) * barH;
      ops.push({ type: "line", x1: layout.barX + 12, y1: y, x2: layout.barX + 16, y2: y, stroke: theme.muted });
      ops.push({ type: "text", x: layout.barX + 18, y, text: formatValue(t, 3), font: sans, color: theme.muted, align: "left", baseline: "middle" });
    }
    layout.height = Math.max(layout.height, Math.ceil(top + barH + 8));
  }
  return { layout, ops, rowStride, colStride, font: mono };
}

/** Draw a scene onto a 2D context; `cells` is the canvas holding the cell image. */
export function drawScene(ctx, scene, cells) {
  for (const op of scene.ops) {
    if (op.type === "cells") {
      if (!cells) continue;
      // Upscaling: crisp blocks. Downscaling: let the browser average, thin stripes stay visible.
      ctx.imageSmoothingEnabled = scene.layout.cell < 1;
      if (ctx.imageSmoothingEnabled) ctx.imageSmoothingQuality = "high";
      ctx.drawImage(cells, op.x, op.y, op.w, op.h);
    } else if (op.type === "rect") {
      ctx.strokeStyle = op.stroke;
      ctx.lineWidth = 1;
      ctx.strokeRect(op.x, op.y, op.w, op.h);
    } else if (op.type === "line") {
      ctx.strokeStyle = op.stroke;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(op.x1, op.y1);
      ctx.lineTo(op.x2, op.y2);
      ctx.stroke();
    } else if (op.type === "bar") {
      const grad = ctx.createLinearGradient(0, op.y, 0, op.y + op.h);
      for (const [t, css] of op.stops) grad.addColorStop(t, css);
      ctx.fillStyle = grad;
      ctx.fillRect(op.x, op.y, op.w, op.h);
      ctx.strokeStyle = op.stroke;
      ctx.strokeRect(op.x - 0.5, op.y - 0.5, op.w + 1, op.h + 1);
    } else if (op.type === "text") {
      ctx.save();
      ctx.font = op.font;
      ctx.fillStyle = op.color;
      ctx.textAlign = op.align || "left";
      ctx.textBaseline = op.baseline || "alphabetic";
      ctx.translate(op.x, op.y);
      if (op.rotate) ctx.rotate(op.rotate);
      ctx.fillText(op.text, 0, 0);
      ctx.restore();
    }
  }
}

const xml = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const num = (v) => +v.toFixed(2);

/** The scene as a standalone SVG document; `cellsHref` is a data: URL of the cell image. */
export function sceneToSVG(scene, cellsHref, theme) {
  const { width, height } = scene.layout;
  const anchor = { left: "start", right: "end", center: "middle" };
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  parts.push(`<rect width="100%" height="100%" fill="${xml(theme.bgCss)}"/>`);
  let gradients = 0;
  for (const op of scene.ops) {
    if (op.type === "cells" && cellsHref) {
      const rendering = scene.layout.cell >= 1 ? ' style="image-rendering:pixelated"' : "";
      parts.push(`<image x="${num(op.x)}" y="${num(op.y)}" width="${num(op.w)}" height="${num(op.h)}" preserveAspectRatio="none"${rendering} href="${cellsHref}"/>`);
    } else if (op.type === "rect") {
      parts.push(`<rect x="${num(op.x)}" y="${num(op.y)}" width="${num(op.w)}" height="${num(op.h)}" fill="none" stroke="${xml(op.stroke)}"/>`);
    } else if (op.type === "line") {
      parts.push(`<line x1="${num(op.x1)}" y1="${num(op.y1)}" x2="${num(op.x2)}" y2="${num(op.y2)}" stroke="${xml(op.stroke)}"/>`);
    } else if (op.type === "bar") {
      const id = `cwbar${gradients++}`;
      const stops = op.stops.map(([t, css]) => `<stop offset="${t}" stop-color="${xml(css)}"/>`).join("");
      parts.push(`<defs><linearGradient id="${id}" x1="0" y1="0" x2="0" y2="1">${stops}</linearGradient></defs>`);
      parts.push(`<rect x="${num(op.x)}" y="${num(op.y)}" width="${op.w}" height="${num(op.h)}" fill="url(#${id})" stroke="${xml(op.stroke)}"/>`);
    } else if (op.type === "text") {
      const [size, ...family] = op.font.replace(/^600 /, "").split(" ");
      const weight = op.font.startsWith("600 ") ? ' font-weight="600"' : "";
      const rot = op.rotate ? ` transform="rotate(${num((op.rotate * 180) / Math.PI)} ${num(op.x)} ${num(op.y)})"` : "";
      const base = op.baseline === "middle" ? ' dominant-baseline="central"' : "";
      parts.push(`<text x="${num(op.x)}" y="${num(op.y)}" font-size="${parseFloat(size)}" font-family="${xml(family.join(" "))}"${weight} fill="${xml(op.color)}" text-anchor="${anchor[op.align || "left"]}"${base}${rot}>${xml(op.text)}</text>`);
    }
  }
  parts.push("</svg>");
  return parts.join("\n");
}

/** A heatmap element: call update(spec) with a `paint(pixels)` callback, then setHighlight(...) on hover. */
export class Heatmap {
  constructor({ onHover, onClick, label = "heatmap" } = {}) {
    this.canvas = h("canvas", { class: "cw-heatmap-canvas", attrs: { role: "img", "aria-label": label } });
    this.overlay = h("canvas", { class: "cw-heatmap-overlay" });
    this.el = h("div", { class: "cw-heatmap" }, [this.canvas, this.overlay]);
    this.cells = document.createElement("canvas");
    this.spec = null;
    this.scene = null;
    this.highlight = {};
    this._onMove = (e) => {
      const hit = this.hit(e);
      if (onHover) onHover(hit);
    };
    this._onLeave = () => onHover && onHover(null);
    this._onClick = (e) => {
      const hit = this.hit(e);
      if (hit && onClick) onClick(hit);
    };
    this.overlay.addEventListener("mousemove", this._onMove);
    this.overlay.addEventListener("mouseleave", this._onLeave);
    this.overlay.addEventListener("click", this._onClick);
  }

  hit(e) {
    if (!this.scene) return null;
    const box = this.overlay.getBoundingClientRect();
    return cellAt(this.scene.layout, this.spec.rows, this.spec.cols, e.clientX - box.left, e.clientY - box.top);
  }

  /** Redraw. spec: {rows, cols, paint, rowLabels, colLabels, title, xTitle, yTitle, scale, theme, maxPlot}. */
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
    this.scene = buildScene(spec, (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    });
    this.canvas.cwScene = this.scene; // what was drawn (labels, layout), for tests and tools
    const { width, height } = this.scene.layout;
    const dpr = globalThis.devicePixelRatio || 1;
    for (const c of [this.canvas, this.overlay]) {
      if (c.width !== Math.round(width * dpr) || c.height !== Math.round(height * dpr)) {
        c.width = Math.round(width * dpr);
        c.height = Math.round(height * dpr);
        c.style.width = `${width}px`;
        c.style.height = `${height}px`;
      }
    }
    this.el.style.width = `${width}px`;
    this.el.style.height = `${height}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    drawScene(ctx, this.scene, this.cells);
    this.drawOverlay();
  }

  /** Hover/selection marks: {row, col, lockedRow, lockedCol}, any may be null. */
  setHighlight(highlight) {
    this.highlight = highlight || {};
    this.drawOverlay();
  }

  drawOverlay() {
    if (!this.scene) return;
    const ctx = this.overlay.getContext("2d");
    const dpr = globalThis.devicePixelRatio || 1;
    const { width, height, left, top, cell, plotW, plotH } = this.scene.layout;
    const { theme, rows, cols, rowLabels = [], colLabels = [] } = this.spec;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const { row, col, lockedRow, lockedCol } = this.highlight;
    const band = (r, c, color, dash) => {
      ctx.save();
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(dash);
      if (r != null && r >= 0 && r < rows) ctx.strokeRect(left - 0.5, top + r * cell - 0.5, plotW + 1, Math.max(cell, 1) + 1);
      if (c != null && c >= 0 && c < cols) ctx.strokeRect(left + c * cell - 0.5, top - 0.5, Math.max(cell, 1) + 1, plotH + 1);
      ctx.restore();
    };
    if (lockedRow != null || lockedCol != null) band(lockedRow, lockedCol, theme.accent, []);
    if (row != null || col != null) band(row, col, theme.fg, [3, 2]);
    // Thinned-out labels: show the hovered row's and column's own labels on a chip.
    const chip = (text, x, y, rotate) => {
      ctx.save();
      ctx.font = this.scene.font;
      const w = ctx.measureText(text).width + 6;
      ctx.translate(x, y);
      if (rotate) ctx.rotate(rotate);
      ctx.fillStyle = theme.bgCss;
      ctx.strokeStyle = theme.accent;
      ctx.fillRect(-w, -8, w, 16);
      ctx.strokeRect(-w, -8, w, 16);
      ctx.fillStyle = theme.fg;
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(text, -3, 0);
      ctx.restore();
    };
    if (row != null && row >= 0 && row < rows) chip(truncate(displayToken(rowLabels[row] ?? row), LABEL_CHARS), left - 2, top + (row + 0.5) * cell);
    if (col != null && col >= 0 && col < cols) chip(truncate(displayToken(colLabels[col] ?? col), LABEL_CHARS), left + (col + 0.5) * cell, top + plotH + 2, -Math.PI / 2);
  }

  /** The picture (no hover marks) on the page background, at device resolution. */
  toCanvas() {
    const out = document.createElement("canvas");
    out.width = this.canvas.width;
    out.height = this.canvas.height;
    const ctx = out.getContext("2d");
    ctx.fillStyle = this.spec.theme.bgCss;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(this.canvas, 0, 0);
    return out;
  }

  toSVG() {
    return sceneToSVG(this.scene, this.cells.toDataURL("image/png"), this.spec.theme);
  }

  destroy() {
    this.overlay.removeEventListener("mousemove", this._onMove);
    this.overlay.removeEventListener("mouseleave", this._onLeave);
    this.overlay.removeEventListener("click", this._onClick);
    this.el.remove();
  }
}

