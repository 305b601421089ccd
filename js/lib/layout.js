// Pure layout helpers: token display text, label thinning, heatmap geometry. No DOM here.

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/g;

/** A token as an axis label: whitespace made visible, control characters escaped. */
export function displayToken(s) {
  const text = String(s)
    .replace(/ /g, "\u2423") // open box
    .replace(/\n/g, "\u21b5") // return arrow
    .replace(/\t/g, "\u21e5")
    .replace(CONTROL, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return text === "" ? "\u2205" : text; // empty set sign for an empty token
}

/** A token inside running text: spaces kept, newlines and control characters visible. */
export function inlineToken(s) {
  const text = String(s)
    .replace(/\n/g, "\u21b5")
    .replace(/\t/g, "\u21e5")
    .replace(CONTROL, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return text === "" ? "\u2205" : text;
}

/** `s` cut to at most `max` characters (code points), with an ellipsis when cut. */
export function truncate(s, max) {
  const chars = Array.from(String(s));
  if (chars.length <= max) return chars.join("");
  return `${chars.slice(0, Math.max(1, max - 1)).join("")}\u2026`;
}

const NICE = [1, 2, 5];

/** Smallest stride in 1, 2, 5, 10, 20, 50, ... such that labels `stride` cells apart are >= minGapPx apart. */
export function labelStride(cellPx, minGapPx) {
  if (!(cellPx > 0)) throw new RangeError(`cellPx must be > 0; got ${cellPx}`);
  if (cellPx >= minGapPx) return 1;
  for (let mag = 1; ; mag *= 10) {
    for (const m of NICE) if (m * mag * cellPx >= minGapPx) return m * mag;
  }
}

/** Smallest a label font may get so that every label fits (px); below it, labels are picked instead. */
export const MIN_LABEL_PX = 8;

/**
 * The label font and the least distance between two labels' centres on cells of `cellPx`:
 * cells of at least fontPx + 2 take full-size labels; cells of 9 to fontPx + 2 px take every label
 * in a font one px smaller than the cell (down to MIN_LABEL_PX); smaller cells take full-size
 * labels at fontPx + 2 apart, picked by pickLabels.
 *
 *     labelFit(11.7, 11) // {fontPx: 10, gapPx: 11, all: true}
 */
export function labelFit(cellPx, fontPx) {
  if (cellPx >= fontPx + 2) return { fontPx, gapPx: fontPx + 2, all: true };
  const small = Math.min(fontPx, Math.floor(cellPx) - 1);
  if (small >= MIN_LABEL_PX) return { fontPx: small, gapPx: small + 1, all: true };
  return { fontPx, gapPx: fontPx + 2, all: false };
}

/**
 * Which of n labels, `cellPx` apart, to draw so that no two are closer than `gapPx`: all of them
 * when they fit; else the `keep` indices (the selected row or column) first, then the highest
 * `priority` (higher = more informative, e.g. a column's largest weight; NaN or absent = none),
 * then evenly spaced ones (the first and the last among them) in the gaps left. Never a fixed
 * every-k-th stride when informative labels are known. Returns sorted indices.
 *
 *     pickLabels(5, 20, 13)                          // [0, 1, 2, 3, 4]
 *     pickLabels(10, 5, 13)                          // [0, 3, 6, 9]
 *     pickLabels(10, 5, 13, { keep: [4] })           // [0, 4, 9]
 */
export function pickLabels(n, cellPx, gapPx, { priority = null, keep = [] } = {}) {
  if (!(n > 0)) return [];
  if (!(cellPx > 0)) throw new RangeError(`cellPx must be > 0; got ${cellPx}`);
  if (cellPx >= gapPx) return Array.from({ length: n }, (_, i) => i);
  const apart = Math.ceil(gapPx / cellPx - 1e-9); // least index distance between two labels
  const order = keep.filter((i) => Number.isInteger(i) && i >= 0 && i < n);
  if (priority) {
    const strong = [];
    for (let i = 0; i < n; i++) if (Number.isFinite(priority[i])) strong.push(i);
    strong.sort((a, b) => priority[b] - priority[a] || a - b);
    order.push(...strong);
  }
  const k = Math.floor((n - 1) / apart) + 1; // evenly spaced: gaps of at least `apart` cells
  for (let t = 0; t < k; t++) order.push(k === 1 ? 0 : Math.round((t * (n - 1)) / (k - 1)));
  const taken = []; // sorted
  for (const i of order) {
    let lo = 0;
    let hi = taken.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (taken[mid] < i) lo = mid + 1;
      else hi = mid;
    }
    if ((lo > 0 && i - taken[lo - 1] < apart) || (lo < taken.length && taken[lo] - i < apart)) continue;
    taken.splice(lo, 0, i);
  }
  return taken;
}

/**
 * The strength of each row and column of a rows x cols matrix, for pickLabels: the largest |value|
 * in it (`valueAt(r, c)`; NaN skipped). Returns {rowPriority, colPriority} (Float32Array, NaN where
 * a row or column holds no number).
 *
 *     axisPriority(2, 2, (r, c) => [[0, -3], [1, 2]][r][c]) // rows [3, 2], columns [1, 3]
 */
export function axisPriority(rows, cols, valueAt) {
  const rowPriority = new Float32Array(rows).fill(Number.NaN);
  const colPriority = new Float32Array(cols).fill(Number.NaN);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const x = Math.abs(valueAt(r, c));
      if (!Number.isFinite(x)) continue;
      if (!(rowPriority[r] >= x)) rowPriority[r] = x;
      if (!(colPriority[c] >= x)) colPriority[c] = x;
    }
  }
  return { rowPriority, colPriority };
}

/** Indices 0, stride, 2*stride, ... below n. */
export function labelPositions(n, stride) {
  const out = [];
  for (let i = 0; i < n; i += stride) out.push(i);
  return out;
}

/**
 * Geometry of a heatmap: square cells, at most `maxCell` px, the plot at most `maxPlot` px on its
 * long side (and at least `minPlot` when there is room), labels on the left and bottom, a title
 * above and a colour bar on the right. Returns CSS-pixel positions.
 */
export function heatmapLayout({
  rows,
  cols,
  maxPlot = 560,
  minPlot = 160,
  maxCell = 28,
  rowLabelPx = 80,
  colLabelPx = 80,
  titlePx = 36,
  barPx = 56,
  pad = 6,
}) {
  if (!(rows > 0 && cols > 0)) throw new RangeError(`heatmap needs rows, cols > 0; got ${rows} x ${cols}`);
  const long = Math.max(rows, cols);
  let cell = Math.min(maxCell, maxPlot / long);
  if (cell * long < minPlot) cell = Math.min(minPlot, maxPlot) / long;
  const plotW = cell * cols;
  const plotH = cell * rows;
  const left = pad + rowLabelPx;
  const top = pad + titlePx;
  return {
    cell,
    left,
    top,
    plotW,
    plotH,
    barX: left + plotW + 14,
    width: Math.ceil(left + plotW + 14 + barPx + pad),
    height: Math.ceil(top + plotH + colLabelPx + pad),
  };
}

/** The cell under CSS-pixel point (x, y), or null outside the plot. */
export function cellAt(layout, rows, cols, x, y) {
  const c = Math.floor((x - layout.left) / layout.cell);
  const r = Math.floor((y - layout.top) / layout.cell);
  if (r < 0 || c < 0 || r >= rows || c >= cols) return null;
  return { row: r, col: c };
}

/** A token in a read-out: quoted, whitespace visible, cut to `max` characters. */
export function quote(s, max = 24) {
  return `“${truncate(displayToken(s), max)}”`;
}
