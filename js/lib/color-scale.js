// Colour scales of attention pictures (the widget's `color_scale`): the kernel sends uint8 codes of
// colour *positions* in [0, 1] on the chosen scale (circuitwidgets.transport.color_scale), so the
// cell colours need no more than the usual code -> colour table. This module reads a payload's
// `scale` meta back: a weight's position (token strips coloured from exact weights), the weight a
// position stands for (read-outs from codes), and the ticks and caption of the legend.

import { h } from "./controls.js";
import { formatValue, niceTicks } from "./scales.js";

export const COLOR_SCALES = ["linear", "auto", "log", "power", "relative"];
/** What the scale select and the legend call each scale. */
export const SCALE_NAMES = {
  linear: "linear 0–1",
  auto: "auto (each head's typical peak)",
  log: "log",
  power: "power (√)",
  relative: "relative to uniform",
};

const LINEAR = { kind: "linear" };

/** A weight's label on a legend: plain, or 1e-k for small powers of ten. */
function weightLabel(v) {
  if (v > 0 && v < 1e-3) return `1e${Math.round(Math.log10(v))}`;
  return formatValue(v, 3);
}

/**
 * The colour scale of a payload's `scale` meta (absent: linear), for matrix `m` (auto: its range).
 * position(v, row): a weight of token row `row` -> [0, 1]; value(t, cellRow): a payload cell's
 * position -> the weight it stands for; ticks: [[position, label]]; caption: the legend's name.
 */
export function colorScaleOf(spec, m = 0) {
  const s = spec || LINEAR;
  const kind = s.kind || "linear";
  const n = s.n || 1;
  const seen = (row) => (s.causal === false ? n : Math.min(n, row + 1)); // sources a destination row sees
  const cellRow = (r) => (s.row0 || 0) + (r + 1) * (s.step || 1) - 1; // a pooled cell: its last row
  const clamp = (t) => Math.min(1, Math.max(0, t)) || 0; // (NaN: 0)
  if (kind === "auto") {
    const hi = s.his?.[m] > 0 ? s.his[m] : 1;
    return {
      kind,
      position: (v) => clamp(v / hi),
      value: (t) => t * hi,
      ticks: niceTicks(0, hi, 5)
        .filter((v) => v <= hi)
        .map((v) => [v / hi, formatValue(v, 3)]),
      caption: "auto",
    };
  }
  if (kind === "log") {
    const lo = Math.log10(s.floor);
    const decades = [];
    const every = -lo > 6 ? 2 : 1;
    for (let e = 0; e >= lo; e -= every) decades.push(e);
    return {
      kind,
      position: (v) => clamp((Math.log10(Math.max(v, s.floor)) - lo) / -lo),
      value: (t) => (t > 0 ? 10 ** (lo - lo * t) : 0),
      ticks: decades.map((e) => [(e - lo) / -lo, weightLabel(10 ** e)]),
      caption: "log",
    };
  }
  if (kind === "power") {
    const g = s.gamma;
    return {
      kind,
      position: (v) => clamp(Math.max(v, 0) ** g),
      value: (t) => t ** (1 / g),
      ticks: [0, 0.01, 0.1, 0.25, 0.5, 1].map((v) => [v ** g, formatValue(v, 3)]),
      caption: `power ${g}`,
    };
  }
  if (kind === "relative") {
    const top = s.relative_max;
    return {
      kind,
      position: (v, row) => clamp((v * seen(row)) / top),
      value: (t, r) => (t * top) / seen(cellRow(r)),
      ticks: niceTicks(0, top, 5).map((v) => [v / top, `${formatValue(v, 3)}×`]),
      caption: "× uniform",
    };
  }
  return {
    kind: "linear",
    position: (v) => clamp(v),
    value: (t) => t,
    ticks: niceTicks(0, 1, 5).map((v) => [v, formatValue(v, 3)]),
    caption: "",
  };
}

/** How many times uniform attention weight `v` of token row `row` is (what "relative" shows), or null. */
export function timesUniform(spec, v, row) {
  if (!spec || v == null || Number.isNaN(v)) return null;
  const n = spec.n || 1;
  return v * (spec.causal === false ? n : Math.min(n, row + 1));
}

/** The colour scale select of view `v` (its `color_scale` trait); `show(kind)` sets what it shows. */
export function scaleSelect(v) {
  const el = h(
    "select",
    { class: "cw-select cw-scale-select", attrs: { "aria-label": "colour scale" } },
    COLOR_SCALES.map((k) => h("option", { value: k, text: `colour: ${SCALE_NAMES[k]}` })),
  );
  v.listen(el, "change", () => v.set({ color_scale: el.value }));
  if (v.standalone) {
    el.disabled = true;
    el.title = "exported page: drawn on this scale; other scales need the kernel";
  }
  const show = (kind) => {
    el.value = kind || v.model.get("color_scale") || "linear";
  };
  v.on("change:color_scale", () => show(v.model.get("color_scale")));
  show();
  return { el, show };
}
