// Colour scales: value -> colour, 256-entry lookup tables for uint8 payloads, ticks, formatting.
//
// Sequential scales (attention weights, scores in [0, 1]) start at a colour close to the page
// background so that near-zero cells recede; diverging scales (signed circuits) are centred on
// a neutral colour at 0. Each has a light and a dark variant picked by the theme.

import { CODE_MAX } from "./codes.js";

// [position, r, g, b]; positions increase from 0 to 1.
const STOPS = {
  sequential: {
    light: [
      [0, 247, 250, 255],
      [0.15, 208, 225, 242],
      [0.35, 140, 190, 225],
      [0.6, 66, 140, 200],
      [0.85, 25, 85, 160],
      [1, 12, 44, 110],
    ],
    dark: [
      [0, 26, 30, 40],
      [0.2, 32, 62, 104],
      [0.45, 42, 112, 172],
      [0.7, 92, 176, 216],
      [0.9, 182, 226, 240],
      [1, 242, 250, 255],
    ],
  },
  diverging: {
    light: [
      [0, 33, 90, 170],
      [0.25, 120, 170, 215],
      [0.5, 246, 246, 246],
      [0.75, 232, 140, 110],
      [1, 170, 30, 40],
    ],
    dark: [
      [0, 96, 164, 240],
      [0.25, 44, 84, 136],
      [0.5, 34, 36, 42],
      [0.75, 142, 62, 52],
      [1, 250, 122, 100],
    ],
  },
};
const NAN_RGB = { light: [205, 205, 205], dark: [78, 78, 78] };

export const SCALE_KINDS = Object.keys(STOPS);

/** Colour [r, g, b] at t in [0, 1] along `stops` (clamped; linear between stops). */
export function colorAt(stops, t) {
  if (!(t > 0)) t = 0; // also maps NaN to the low end; callers handle NaN before this
  if (t > 1) t = 1;
  let i = 1;
  while (i < stops.length - 1 && stops[i][0] < t) i++;
  const [p0, r0, g0, b0] = stops[i - 1];
  const [p1, r1, g1, b1] = stops[i];
  const f = p1 > p0 ? (t - p0) / (p1 - p0) : 0;
  return [Math.round(r0 + (r1 - r0) * f), Math.round(g0 + (g1 - g0) * f), Math.round(b0 + (b1 - b0) * f)];
}

/** One RGBA pixel as the little-endian uint32 an ImageData's Uint32Array view expects. */
export function packRGBA(r, g, b, a = 255) {
  return ((a << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

export function cssOf([r, g, b], a = 1) {
  return a === 1 ? `rgb(${r}, ${g}, ${b})` : `rgba(${r}, ${g}, ${b}, ${a})`;
}

/**
 * A colour scale. kind: "sequential" | "diverging"; domain: [lo, hi] values mapped to the ends
 * (for diverging scales choose a domain symmetric about 0); ticks and caption: the colour bar's,
 * when the values are positions on another scale (lib/color-scale.js).
 */
export function makeScale(kind = "sequential", { dark = false, domain = [0, 1], ticks = null, caption = "" } = {}) {
  if (!STOPS[kind]) throw new RangeError(`scale kind must be one of ${SCALE_KINDS.join(", ")}; got ${kind}`);
  const [d0, d1] = domain;
  if (!(Number.isFinite(d0) && Number.isFinite(d1) && d1 > d0)) throw new RangeError(`scale domain must be finite lo < hi; got ${domain}`);
  const stops = STOPS[kind][dark ? "dark" : "light"];
  const nan = NAN_RGB[dark ? "dark" : "light"];
  const rgb = (v) => (Number.isNaN(v) ? nan : colorAt(stops, (v - d0) / (d1 - d0)));
  return {
    kind,
    domain: [d0, d1],
    ticks, // [[value, label]] for the colour bar (a colour scale's own: lib/color-scale.js); null: round values
    caption, // the colour bar's name of the scale ("log", "× uniform"), "" for none
    dark,
    stops,
    nan,
    rgb,
    css: (v) => cssOf(rgb(v)),
    /** Lookup table code -> pixel for a CodeStack (codes map linearly onto [stack.lo, stack.hi]). */
    lut(stack) {
      const table = new Uint32Array(256);
      for (let code = 0; code <= CODE_MAX; code++) table[code] = packRGBA(...rgb(stack.lo + code * stack.step));
      table[stack.nanCode] = packRGBA(...nan);
      return table;
    },
  };
}

/**
 * A diverging domain centred on `centre` wide enough for every finite value and for at least `floor` on each side.
 * An effect scale passes the full effect as its floor (normalised: 1; raw: |clean − corrupted|), so a cell's colour
 * reads as its share of the whole effect: a head that restores 1 % is faint, not the darkest cell of the grid.
 */
export function effectDomain(values, centre, floor) {
  let m = Number.isFinite(floor) ? Math.abs(floor) : 0;
  for (const x of values) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x - centre));
  m = m || 1;
  return [centre - m, centre + m];
}

/** About `count` round tick values covering [lo, hi]. */
export function niceTicks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, count - 1);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : +v.toPrecision(12));
  return ticks;
}

/** Magnitudes below this read as 0: float32 noise (a score of 7.8e-16 is a zero computed by a sum), not a value. */
export const NOISE = 1e-6;

/** A value for a read-out: 4 significant digits, plain notation for moderate sizes, noise as 0. */
export function formatValue(v, digits = 4) {
  if (v == null || Number.isNaN(v)) return "n/a";
  const a = Math.abs(v);
  if (a < NOISE) return "0";
  if (a >= 1e-3 && a < 1e5) return String(+v.toPrecision(digits));
  return v.toExponential(digits - 1);
}

/** A cell's label with two decimals; noise never reads as -0.00. */
export function formatCell(v) {
  const text = v.toFixed(2);
  return text === "-0.00" ? "0.00" : text;
}

/** Black or white, whichever reads better on background [r, g, b]. */
export function readableText([r, g, b]) {
  const lum = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  return lum > 0.55 ? "#111" : "#fff";
}

/** [r, g, b] of a CSS colour given as #rgb, #rrggbb or rgb(...); mid-grey when unreadable. */
export function rgbOf(css) {
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(String(css).trim());
  if (hex) {
    const full = hex[1].length === 3 ? [...hex[1]].map((c) => c + c).join("") : hex[1];
    return [0, 2, 4].map((i) => parseInt(full.slice(i, i + 2), 16));
  }
  const m = /rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)/.exec(String(css));
  return m ? [+m[1], +m[2], +m[3]] : [128, 128, 128];
}
