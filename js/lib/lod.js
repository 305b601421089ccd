// Level of detail for long attention patterns: a square window of the n x n pattern drawn as a grid
// of at most GRID cells a side, each cell `step` x `step` tokens. Cells come from exact tiles the
// kernel sent for this window's step when they cover them, else from the overview (each head pooled
// over `factor` x `factor` tokens). Pure functions: node --test checks them.

export const GRID = 512; // most cells a side of the drawn grid
export const MIN_WINDOW = 16; // fewest tokens a side when zoomed in all the way
export const TILE_KEEP = 8; // tiles kept for panning back

/** The whole pattern. */
export function fullWindow(n) {
  return { r0: 0, c0: 0, size: n };
}

/** Tokens a side of one grid cell for a window of `size` tokens. */
export function stepFor(size) {
  return Math.max(1, Math.ceil(size / GRID));
}

/** The window moved back inside 0..n and its origin put on its step's grid (so tiles line up). */
export function clampWindow({ r0, c0, size }, n) {
  const s = Math.max(Math.min(MIN_WINDOW, n), Math.min(n, Math.round(size)));
  const step = stepFor(s);
  const fit = (x) => Math.max(0, Math.min(n - s, Math.round(x)));
  const snap = (x) => Math.floor(fit(x) / step) * step;
  return { r0: snap(r0), c0: snap(c0), size: s };
}

/** Zoom by `by` (> 1 zooms in) keeping token (r, c) at the same place in the window (default: the centre). */
export function zoomWindow(win, n, by, at = null) {
  const r = at ? at.r : win.r0 + win.size / 2;
  const c = at ? at.c : win.c0 + win.size / 2;
  const size = Math.max(Math.min(MIN_WINDOW, n), Math.min(n, win.size / by));
  const k = size / win.size;
  return clampWindow({ r0: r - (r - win.r0) * k, c0: c - (c - win.c0) * k, size }, n);
}

/** Move the window by (dr, dc) tokens. */
export function panWindow(win, n, dr, dc) {
  return clampWindow({ r0: win.r0 + dr, c0: win.c0 + dc, size: win.size }, n);
}

/** Cells a side of the window's grid. */
export function gridSize(win) {
  return Math.ceil(win.size / stepFor(win.size));
}

/** The tile request (without id/head/layer) a window needs, or null when the overview is as fine. */
export function tileFor(win, factor) {
  const step = stepFor(win.size);
  if (step >= factor) return null;
  return { row0: win.r0, col0: win.c0, rows: win.size, cols: win.size, step };
}

/** True when the window shows every token as one cell (exact values can be hovered). */
export function isExact(win) {
  return stepFor(win.size) === 1;
}

/** Token (query, key) at the top-left of grid cell (row, col) of the window. */
export function tokenAt(win, row, col) {
  const step = stepFor(win.size);
  return { query: win.r0 + row * step, key: win.c0 + col * step };
}

/** Grid cell (row or col) of token `t` along an axis starting at `t0`, or null outside the window. */
export function cellOf(win, t, t0) {
  if (t == null) return null;
  const step = stepFor(win.size);
  const i = Math.floor((t - t0) / step);
  return i >= 0 && i < gridSize(win) ? i : null;
}

/**
 * A decoded tile {codes: Uint8Array, rows, cols (cells), row0, col0, step, head, layer, revision, pool}
 * from the kernel's `tile` payload (already inflated).
 */
export function tileOf(p, bytes) {
  const [rows, cols] = p.shape;
  if (bytes.length !== rows * cols)
    throw new RangeError(`tile holds ${bytes.length} bytes; shape ${JSON.stringify(p.shape)} needs ${rows * cols}`);
  return {
    codes: bytes,
    rows,
    cols,
    row0: p.row0,
    col0: p.col0,
    step: p.step,
    head: p.head,
    layer: p.layer,
    revision: p.revision,
    pool: p.pool,
    id: p.id,
  };
}

/** The code of token cell (r, c) at `step` in `tile`, or -1 when the tile does not hold it. */
export function tileCode(tile, r, c, step) {
  if (tile.step !== step) return -1;
  const dr = r - tile.row0;
  const dc = c - tile.col0;
  if (dr < 0 || dc < 0 || dr % step || dc % step) return -1;
  const i = dr / step;
  const j = dc / step;
  if (i >= tile.rows || j >= tile.cols) return -1;
  return tile.codes[i * tile.cols + j];
}

/** The code of the `tile` cell holding token cell (r, c) whatever its step (nearest block), or -1. */
export function coarseCode(tile, r, c) {
  const i = Math.floor((r - tile.row0) / tile.step);
  const j = Math.floor((c - tile.col0) / tile.step);
  if (i < 0 || j < 0 || i >= tile.rows || j >= tile.cols) return -1;
  return tile.codes[i * tile.cols + j];
}

/**
 * Paint the window into `pixels` (Uint32Array, grid x grid) for head `head`: tiles at the window's
 * step first (newest first), else the finest coarser tile holding the cell (an exported page's
 * levels), else the overview `stack` (a CodeStack [heads, m, m], m = ceil(n / factor)); cells above
 * the diagonal (unless `causal` is false) and NaN codes get `emptyPixel`. Returns the share of the
 * cells holding weights (on or below the diagonal when causal) that came from tiles (1 when none do).
 */
export function paintWindow({ win, n, stack, factor, head, tiles = [], lut, pixels, emptyPixel = 0, nanCode = 255, causal = true }) {
  const step = stepFor(win.size);
  const g = gridSize(win);
  if (pixels.length < g * g) throw new RangeError("pixel buffer too small");
  let fromTiles = 0;
  let cells = 0;
  const same = tiles.filter((t) => t.step === step);
  const coarser = tiles.filter((t) => t.step > step && t.step < factor).sort((a, b) => a.step - b.step);
  for (let y = 0; y < g; y++) {
    const r = win.r0 + y * step;
    const br = Math.min(stack.rows - 1, Math.floor(r / factor));
    for (let x = 0; x < g; x++) {
      const c = win.c0 + x * step;
      let code = -1;
      if (r < n && c < n && (!causal || c <= r + step - 1)) {
        cells++;
        for (const tile of same) {
          code = tileCode(tile, r, c, step);
          if (code >= 0) {
            fromTiles++;
            break;
          }
        }
        for (let k = 0; code < 0 && k < coarser.length; k++) code = coarseCode(coarser[k], r, c);
        if (code < 0) code = stack.code(head, br, Math.min(stack.cols - 1, Math.floor(c / factor)));
      }
      pixels[y * g + x] = code < 0 || code === nanCode ? emptyPixel : lut[code];
    }
  }
  return cells ? fromTiles / cells : 1;
}
