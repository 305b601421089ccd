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
export function heatmapLayout({ rows, cols, maxPlot = 560, minPlot = 160, maxCell = 28, rowLabelPx = 80, colLabelPx = 80, titlePx = 36, barPx = 56, pad = 6 }) {
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
