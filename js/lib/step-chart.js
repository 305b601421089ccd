// A chart of values along training steps: x is the step (linear, or log(1 + step) so that step 0 is drawn), one
// line per series, a shaded window (the phase change) and a cursor at the selected step. A pure scene (node --test
// reads it) plus hit-testing of lines and steps; the Training view puts it on canvases.

import { formatValue, niceTicks } from "./scales.js";

const FONT_PX = 11;

/** Colours of layers (lines of one layer share one), light and dark: Tableau 10, readable on both. */
export const LAYER_COLOURS = {
  light: ["#4e79a7", "#59a14f", "#b07aa1", "#9c755f", "#76b7b2", "#edc948", "#e15759", "#f28e2b", "#ff9da7", "#bab0ac"],
  dark: ["#7eaedb", "#8cd17d", "#d4a6c8", "#c9a58a", "#a0d6d2", "#f1ce63", "#ff8b8c", "#ffbe7d", "#fabfd2", "#d7cfca"],
};

/** The colour of layer row `row` (a row of the scan, not a block index). */
export function layerColour(row, dark) {
  const list = LAYER_COLOURS[dark ? "dark" : "light"];
  return list[((row % list.length) + list.length) % list.length];
}

/** Where `step` lies on the axis: `log10(1 + step)` on a log axis, the step itself on a linear one. */
export function stepPosition(step, scale) {
  return scale === "log" ? Math.log10(1 + Math.max(0, step)) : step;
}

/** Tick steps of an axis over [first, last]: 0 and the powers of ten within it (log), else round values. */
export function stepTicks(first, last, scale) {
  if (scale !== "log") return niceTicks(first, last, 6).filter((t) => t >= first && t <= last);
  const ticks = first <= 0 ? [0] : [];
  for (let p = 1; p <= last; p *= 10) if (p >= first) ticks.push(p);
  return ticks;
}

/** "6 000" (a narrow space between thousands), "1.2M" above a million. */
export function stepText(step) {
  if (step >= 1e6) return `${+(step / 1e6).toPrecision(3)}M`;
  return String(step).replace(/\B(?=(\d{3})+(?!\d))/g, "\u202f");
}

/** [lo, hi] covering every finite value of `series` (and 0), on round tick values. */
export function seriesDomain(series) {
  let lo = 0;
  let hi = 0;
  for (const s of series)
    for (const v of s.values)
      if (Number.isFinite(v)) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
  if (!(hi > lo)) hi = lo + 1;
  const ticks = niceTicks(lo, hi, 5);
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : hi - lo;
  const round = (x) => +x.toPrecision(12);
  return [round(Math.floor(lo / step + 1e-9) * step), round(Math.ceil(hi / step - 1e-9) * step)];
}

/**
 * The chart's scene. spec: {steps, series: [{name, values, color, width, alpha, dash}], scale ("log" | "linear"),
 * window: [startStep, endStep] | null, windowLabel, cursor (a step) | null, title, yTitle, xTitle, legend: [{name,
 * color, dash}], domain ([lo, hi], default from the values), theme, width, height}. Every series has one value per
 * step (NaN: no point). Returns {width, height, ops, layout: {left, top, plotW, plotH, xs, domain}, lines: [[x, y]
 * per step, or null]} with `xs` the x of each step in CSS px.
 */
export function stepChartScene(spec, measure) {
  const { steps, series, scale = "log", window = null, windowLabel = "", cursor = null, title = "", yTitle = "" } = spec;
  const { xTitle = "step", legend = [], theme, width = 640, height = 260 } = spec;
  const sans = `${FONT_PX}px ${theme.font}`;
  const domain = spec.domain ?? seriesDomain(series);
  const [d0, d1] = domain;
  const yTicks = niceTicks(d0, d1, 5).filter((t) => t >= d0 - 1e-12 && t <= d1 + 1e-12);
  const yText = yTicks.map((t) => formatValue(t, 3));
  const left = 12 + Math.max(26, ...yText.map((t) => measure(t, sans)));
  const right = 14;
  const top = title ? 40 : 16;
  const bottom = 36;
  const plotW = Math.max(60, width - left - right);
  const plotH = Math.max(60, height - top - bottom);
  const first = steps.length ? steps[0] : 0;
  const last = steps.length ? steps[steps.length - 1] : 1;
  const p0 = stepPosition(first, scale);
  const p1 = Math.max(p0 + 1e-9, stepPosition(last, scale));
  const x = (step) => left + ((stepPosition(step, scale) - p0) / (p1 - p0)) * plotW;
  const y = (v) => top + ((d1 - v) / (d1 - d0 || 1)) * plotH;
  const xs = steps.map(x);
  const ops = [];
  if (title) ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  if (window && steps.length > 1) {
    const [a, b] = window.map((s) => Math.max(left, Math.min(left + plotW, x(s))));
    ops.push({ type: "rect", x: a, y: top, w: Math.max(2, b - a), h: plotH, fill: theme.accent, alpha: 0.12 });
    if (windowLabel) {
      const half = measure(windowLabel, sans) / 2 + 3; // centred on the window, kept inside the plot
      const mid = Math.max(left + half, Math.min(left + plotW - half, (a + b) / 2));
      ops.push({ type: "text", x: mid, y: top + 11, text: windowLabel, font: sans, color: theme.muted, align: "center" });
    }
  }
  yTicks.forEach((t, k) => {
    ops.push({ type: "line", x1: left, y1: y(t), x2: left + plotW, y2: y(t), stroke: theme.border, width: t === 0 ? 1.2 : 0.6 });
    ops.push({ type: "text", x: left - 4, y: y(t), text: yText[k], font: sans, color: theme.muted, align: "right", baseline: "middle" });
  });
  for (const t of stepTicks(first, last, scale)) {
    ops.push({ type: "line", x1: x(t), y1: top + plotH, x2: x(t), y2: top + plotH + 4, stroke: theme.border });
    ops.push({ type: "text", x: x(t), y: top + plotH + 14, text: stepText(t), font: sans, color: theme.muted, align: "center" });
  }
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  if (yTitle) ops.push({ type: "text", x: left, y: top - 6, text: yTitle, font: sans, color: theme.muted, align: "left" });
  const axisName = scale === "log" ? `${xTitle} (log scale) →` : `${xTitle} →`;
  ops.push({ type: "text", x: left + plotW, y: height - 4, text: axisName, font: sans, color: theme.muted, align: "right" });
  let lx = width - right;
  for (const item of [...legend].reverse()) {
    lx -= measure(item.name, sans);
    ops.push({ type: "text", x: lx, y: 28, text: item.name, font: sans, color: theme.fg, align: "left", baseline: "middle" });
    lx -= 20;
    ops.push({ type: "line", x1: lx, y1: 28, x2: lx + 14, y2: 28, stroke: item.color, width: 2.2, dash: item.dash });
    lx -= 12;
  }
  const lines = [];
  for (const s of series) {
    const pts = s.values.map((v, i) => (Number.isFinite(v) && i < xs.length ? [xs[i], y(v)] : null));
    lines.push(pts);
    let d = "";
    let pen = false;
    for (const p of pts) {
      if (!p) {
        pen = false;
        continue;
      }
      d += `${pen ? "L" : "M"}${p[0].toFixed(2)} ${p[1].toFixed(2)}`;
      pen = true;
    }
    if (d) ops.push({ type: "path", d, stroke: s.color, width: s.width ?? 1.4, alpha: s.alpha, dash: s.dash, cap: "round" });
  }
  if (cursor != null && steps.length) {
    const cx = x(cursor);
    ops.push({ type: "line", x1: cx, y1: top, x2: cx, y2: top + plotH, stroke: theme.fg, width: 1.2 });
  }
  return { width, height, ops, layout: { left, top, plotW, plotH, xs, domain }, lines };
}

/** Distance from point (px, py) to the segment a-b. */
function segmentDistance(px, py, [ax, ay], [bx, by]) {
  const dx = bx - ax;
  const dy = by - ay;
  const t = dx || dy ? Math.max(0, Math.min(1, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy))) : 0;
  return Math.hypot(px - (ax + t * dx), py - (ay + t * dy));
}

/** The index of the series whose line passes nearest (px, py), within `radius` px, or null. */
export function nearestLine(scene, px, py, radius = 6) {
  let best = null;
  let bestD = radius;
  scene.lines.forEach((pts, k) => {
    let prev = null;
    for (const p of pts) {
      if (p) {
        const d = prev ? segmentDistance(px, py, prev, p) : Math.hypot(px - p[0], py - p[1]);
        if (d <= bestD) {
          bestD = d;
          best = k;
        }
      }
      prev = p;
    }
  });
  return best;
}

/** The index of the step nearest CSS-px x inside the plot (any y in it), or null outside. */
export function stepAt(scene, px, py) {
  const { left, top, plotW, plotH, xs } = scene.layout;
  if (!xs.length || px < left - 6 || px > left + plotW + 6 || py < top || py > top + plotH) return null;
  let best = 0;
  xs.forEach((x, i) => {
    if (Math.abs(x - px) < Math.abs(xs[best] - px)) best = i;
  });
  return best;
}
