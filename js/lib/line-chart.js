// A line chart over positions (one slot per position): a pure scene (node --test reads it) and a
// canvas element with a hover overlay, as heatmap.js does for matrices. Series are drawn as lines
// with a dot per slot; marked slots (e.g. the positions a metric averages) get a shaded band.

import { h } from "./controls.js";
import { displayToken, labelPositions, labelStride, truncate } from "./layout.js";
import { paintCanvas } from "./scene.js";
import { formatValue, niceTicks } from "./scales.js";

const FONT_PX = 11;
const LABEL_CHARS = 10;

/** Runs of consecutive indices in sorted `indices`: [[first, last], ...]. */
export function runsOf(indices) {
  const sorted = [...new Set(indices)].filter(Number.isInteger).sort((a, b) => a - b);
  const runs = [];
  for (const i of sorted) {
    const last = runs[runs.length - 1];
    if (last && i === last[1] + 1) last[1] = i;
    else runs.push([i, i]);
  }
  return runs;
}

/** [lo, hi] covering every finite value of `series` and 0, on round tick values (widened when flat). */
export function valueDomain(series) {
  let lo = 0;
  let hi = 0;
  for (const s of series) {
    for (const x of s.values) {
      if (!Number.isFinite(x)) continue;
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
    }
  }
  if (!(hi > lo)) hi = lo + 1;
  const ticks = niceTicks(lo, hi, 5);
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : hi - lo; // widened to the round ticks around it
  const round = (x) => +x.toPrecision(12);
  return [round(Math.floor(lo / step + 1e-9) * step), round(Math.ceil(hi / step - 1e-9) * step)];
}

/**
 * The chart's scene. spec: {series: [{name, values, color, dash}], labels, marked: [slot], title,
 * xTitle, yTitle, theme, width, height}; every series has one value per slot (NaN: no point).
 * Returns {width, height, ops, layout: {left, top, plotW, plotH, step, n, domain}}.
 */
export function lineChartScene(spec, measure) {
  const { series, labels = [], marked = [], title = "", xTitle = "", yTitle = "", theme, width = 640, height = 240 } = spec;
  const n = Math.max(1, ...series.map((s) => s.values.length));
  const mono = `${FONT_PX}px ${theme.mono}`;
  const sans = `${FONT_PX}px ${theme.font}`;
  const domain = valueDomain(series);
  const [d0, d1] = domain;
  const ticks = niceTicks(d0, d1, 5).filter((t) => t >= d0 && t <= d1);
  const tickText = ticks.map((t) => formatValue(t, 3));
  const shownLabels = (stride) => labelPositions(n, stride).map((i) => [i, truncate(displayToken(labels[i] ?? i), LABEL_CHARS)]);
  const left = 10 + Math.max(28, ...tickText.map((t) => measure(t, sans)));
  const right = 12;
  const top = 44;
  const plotW = Math.max(40, width - left - right);
  const step = plotW / n;
  const xLabels = shownLabels(labelStride(step, FONT_PX + 2));
  const bottom = 12 + Math.min(80, Math.max(20, ...xLabels.map(([, t]) => measure(t, mono)))) + 16;
  const plotH = Math.max(60, height - top - bottom);
  const x = (i) => left + (i + 0.5) * step;
  const y = (v) => top + ((d1 - v) / (d1 - d0)) * plotH;
  const ops = [{ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" }];
  for (const [a, b] of runsOf(marked)) {
    if (a >= n) continue;
    ops.push({
      type: "rect",
      x: left + a * step,
      y: top,
      w: (Math.min(b, n - 1) - a + 1) * step,
      h: plotH,
      fill: theme.muted,
      alpha: 0.14,
    });
  }
  ticks.forEach((t, k) => {
    ops.push({ type: "line", x1: left, y1: y(t), x2: left + plotW, y2: y(t), stroke: theme.border, width: t === 0 ? 1.2 : 0.6 });
    ops.push({ type: "text", x: left - 4, y: y(t), text: tickText[k], font: sans, color: theme.muted, align: "right", baseline: "middle" });
  });
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  for (const [i, text] of xLabels) {
    ops.push({
      type: "text",
      x: x(i),
      y: top + plotH + 4,
      text,
      font: mono,
      color: theme.fg,
      align: "right",
      baseline: "middle",
      rotate: -Math.PI / 2,
    });
  }
  if (yTitle) ops.push({ type: "text", x: 6, y: top - 8, text: yTitle, font: sans, color: theme.muted, align: "left" });
  if (xTitle) ops.push({ type: "text", x: left + plotW, y: height - 4, text: xTitle, font: sans, color: theme.muted, align: "right" });
  // legend, top right
  let lx = width - right;
  for (const s of [...series].reverse()) {
    const w = measure(s.name, sans);
    lx -= w;
    ops.push({ type: "text", x: lx, y: 30, text: s.name, font: sans, color: theme.fg, align: "left", baseline: "middle" });
    lx -= 22;
    ops.push({ type: "line", x1: lx, y1: 30, x2: lx + 16, y2: 30, stroke: s.color, width: 2, dash: s.dash });
    lx -= 14;
  }
  const dots = step >= 5;
  for (const s of series) {
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (!Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${x(i).toFixed(2)} ${y(v).toFixed(2)}`;
      pen = true;
      if (dots) ops.push({ type: "circle", x: x(i), y: y(v), r: 2.2, fill: s.color });
    });
    if (d) ops.push({ type: "path", d, stroke: s.color, width: 1.6, dash: s.dash });
  }
  return { width, height, ops, layout: { left, top, plotW, plotH, step, n, domain } };
}

/** The slot under CSS-pixel x (any y inside the plot), or null. */
export function slotAt(layout, px, py) {
  const { left, top, plotW, plotH, step, n } = layout;
  if (px < left || px >= left + plotW || py < top || py > top + plotH) return null;
  return Math.min(n - 1, Math.floor((px - left) / step));
}

/** The chart on a canvas, with the hovered slot marked on an overlay canvas; onHover(slot | null). */
export class LineChart {
  constructor({ onHover, label = "chart" } = {}) {
    const layer = { position: "absolute", left: "0", top: "0" };
    this.canvas = h("canvas", { class: "cw-chart-canvas", attrs: { role: "img", "aria-label": label }, style: layer });
    this.overlay = h("canvas", { class: "cw-chart-overlay", style: { ...layer, cursor: "crosshair" } });
    this.el = h("div", { class: "cw-chart", style: { position: "relative" } }, [this.canvas, this.overlay]);
    this.scene = null;
    this.spec = null;
    this.hover = null;
    this.listeners = {
      mousemove: (e) => {
        if (!this.scene) return;
        const box = this.overlay.getBoundingClientRect();
        onHover?.(slotAt(this.scene.layout, e.clientX - box.left, e.clientY - box.top));
      },
      mouseleave: () => onHover?.(null),
    };
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.addEventListener(type, fn);
  }

  /** Redraw: spec as lineChartScene's. */
  update(spec) {
    const ctx = this.canvas.getContext("2d");
    this.spec = spec;
    this.scene = lineChartScene(spec, (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    });
    this.canvas.cwScene = this.scene;
    paintCanvas(this.canvas, this.scene);
    this.el.style.width = `${this.scene.width}px`;
    this.el.style.height = `${this.scene.height}px`;
    this.setHover(this.hover);
  }

  /** Mark slot `i` (null: none): a dashed line and each series' point there. */
  setHover(i) {
    this.hover = i;
    if (!this.scene) return;
    const { left, top, plotH, step, domain } = this.scene.layout;
    const ops = [];
    if (i != null && i >= 0) {
      const x = left + (i + 0.5) * step;
      const { theme, series } = this.spec;
      ops.push({ type: "line", x1: x, y1: top, x2: x, y2: top + plotH, stroke: theme.fg, dash: [3, 2] });
      for (const s of series) {
        const v = s.values[i];
        if (!Number.isFinite(v)) continue;
        const y = top + ((domain[1] - v) / (domain[1] - domain[0])) * plotH;
        ops.push({ type: "circle", x, y, r: 4, fill: s.color, stroke: theme.bgCss, width: 1.5 });
      }
    }
    paintCanvas(this.overlay, { width: this.scene.width, height: this.scene.height, ops });
  }

  destroy() {
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.removeEventListener(type, fn);
    this.el.remove();
  }
}
