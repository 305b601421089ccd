// Zoom over a long attention pattern (a payload with `lod`): the window shown (wheel, buttons, drag,
// + - 0 and Shift+arrows), the exact tiles the kernel is asked for (`tile_request`, answered in
// `tile`) and an exported page's finer levels, and what a token cell weighs where no exact row came.
// The window geometry and painting are lod.js's; this module wires them to a heatmap and the model.
// The view draws: it hands the heatmap's title and scale to draw() and reads tokensOf / highlight.

import { h, throttle } from "./controls.js";
import { bytesOf, hasData } from "./decode.js";
import { inflated } from "./inflate.js";
import {
  cellOf,
  clampWindow,
  fullWindow,
  gridSize,
  isExact,
  paintWindow,
  panWindow,
  stepFor,
  TILE_KEEP,
  tileFor,
  tileOf,
  tokenAt,
  zoomWindow,
} from "./lod.js";

/** Pixels the pointer must move with the button down before a press becomes a drag (not a click). */
const DRAG_PX = 4;
/** Least time (ms) between two tile requests while the window moves. */
const REQUEST_MS = 60;

/** True when `tile` holds every cell of request `want` for `head` (same step). */
export function tileCovers(tile, want, head) {
  return (
    tile.head === head &&
    tile.step === want.step &&
    tile.row0 <= want.row0 &&
    tile.col0 <= want.col0 &&
    tile.row0 + tile.rows * tile.step >= want.row0 + want.rows &&
    tile.col0 + tile.cols * tile.step >= want.col0 + want.cols
  );
}

/** The tile `win` needs for `head` ({row0, col0, rows, cols, step}), or null: the overview is as fine, or a kept tile holds it. */
export function tileWanted(win, factor, head, tiles) {
  const want = tileFor(win, factor);
  return want && !tiles.some((t) => tileCovers(t, want, head)) ? want : null;
}

/** The token {r, c} (fractional) under point (x, y) of a heatmap `layout` drawing window `win`. */
export function tokenAtPoint(win, { left, top, cell }, x, y) {
  const step = stepFor(win.size);
  return { r: win.r0 + ((y - top) / cell) * step, c: win.c0 + ((x - left) / cell) * step };
}

/** Window `start` dragged by (dx, dy) px on cells of `cell` px: the pattern follows the pointer. */
export function dragWindow(start, n, dx, dy, cell) {
  const perPx = stepFor(start.size) / cell;
  return panWindow(start, n, -dy * perPx, -dx * perPx);
}

/** Axis labels of the window from token `from`: token strings where each cell is one legible token, positions otherwise. */
export function windowAxis(win, from, labels) {
  const step = stepFor(win.size);
  return Array.from({ length: gridSize(win) }, (_, i) => (win.size <= 64 ? (labels[from + i] ?? from + i) : String(from + i * step)));
}

/**
 * The line under the zoom buttons: the tokens shown and what one cell is. `share`: of the cells
 * drawn, the share from exact tiles; `finest`: the finest level an exported page holds for `head`.
 */
export function windowCaption({ lod, win, share, finest, head, standalone }) {
  const step = stepFor(win.size);
  const last = (t) => Math.min(lod.n, t + win.size) - 1;
  const whole = win.size >= lod.n;
  const exact = step === 1 ? "exact cells" : `each cell the ${lod.pool} of ${step} × ${step} exact cells`;
  const cells = share >= 1 ? exact : `each cell the ${lod.pool} of ${lod.factor} × ${lod.factor} tokens (overview)`;
  const stored = finest < lod.factor ? `holds blocks down to ${finest} × ${finest} tokens for head ${head}; ` : "";
  const deeper = standalone && !whole ? ` · exported page: ${stored}exact cells need the kernel` : "";
  const where = whole ? "whole prompt" : `destinations ${win.r0}–${last(win.r0)} × sources ${win.c0}–${last(win.c0)}`;
  return `${lod.n} tokens · ${where} · ${cells}${deeper}`;
}

/** Overview weight of token cell (q, k) for `head`: the pooled block holding it; 0 above the diagonal of a causal pattern. */
export function overviewValue(stack, lod, head, q, k) {
  if (k > q && lod.causal !== false) return 0;
  const row = Math.min(stack.rows - 1, Math.floor(q / lod.factor));
  return stack.value(head, row, Math.min(stack.cols - 1, Math.floor(k / lod.factor)));
}

/**
 * Weights that destination `q` pays to sources from..to-1, null where the pattern holds none: its
 * `exact` row when the kernel sent it, else the overview of a long prompt (`lod`), else the codes
 * of `stack` (without `lod`: the whole row).
 */
export function rowWeights(stack, lod, head, q, exact, from, to) {
  if (!lod) {
    const row = exact || stack.rowValues(head, q);
    return Array.from({ length: stack.cols }, (_, j) => (stack.stored(q, j) ? row[j] : null));
  }
  const causal = lod.causal !== false;
  return span(from, to, (j) => (j > q && causal ? null : exact ? exact[j] : overviewValue(stack, lod, head, q, j)));
}

/** Weights paid to source `k` by destinations from..to-1 (without `lod`: the whole column), null where the pattern holds none. */
export function colWeights(stack, lod, head, k, from, to) {
  if (!lod) {
    const col = stack.colValues(head, k);
    return Array.from({ length: stack.rows }, (_, i) => (stack.stored(i, k) ? col[i] : null));
  }
  const causal = lod.causal !== false;
  return span(from, to, (i) => (k > i && causal ? null : overviewValue(stack, lod, head, i, k)));
}

const span = (from, to, fn) => Array.from({ length: to - from }, (_, k) => fn(from + k));

/**
 * The zoom of one attention view `v` over `heatmap`. head() and patterns() are the head and
 * payload shown; redraw() draws the view again when the window or its tiles change.
 */
export class Zoom {
  constructor(v, { heatmap, head, patterns, redraw }) {
    Object.assign(this, { v, heatmap, head, patterns, redraw });
    this.lod = null; // {n, factor, pool, causal} of the overview shown; null: not a long prompt
    this.win = null; // the window shown (tokens): {r0, c0, size}
    this.tiles = []; // exact tiles of this picture, newest first
    this.levels = []; // an exported page's finer overviews of one head (tiles of the whole pattern)
    this.share = 0; // of the cells drawn, the share from exact tiles
    this.requested = 0; // id of the latest tile request (the kernel answers the latest)
    this.drag = null; // {x, y, win} where the button went down
    this.dragged = false; // the last press moved the window: its click selects nothing
    this.label = h("span", { class: "cw-hint cw-zoom-label" });
    this.pool = h("select", { class: "cw-select", attrs: { "aria-label": "overview pooling" } }, [
      h("option", { value: "max", text: "overview: max of each block" }),
      h("option", { value: "mean", text: "overview: mean of each block" }),
    ]);
    v.listen(this.pool, "change", () => v.set({ pool: this.pool.value }));
    if (v.standalone) this.pool.disabled = true;
    this.el = h("div", { class: "cw-zoom" }, [
      this.button("−", "zoom out (-)", () => this.zoom(0.5)),
      this.button("+", "zoom in (+)", () => this.zoom(2)),
      this.button("whole", "the whole prompt (0)", () => this.whole()),
      this.pool,
      this.label,
    ]);
    this.el.hidden = true;
    this.request = v.own(throttle(() => this.sendRequest(), REQUEST_MS));
    this.listenPointer();
  }

  button(text, label, fn) {
    const b = h("button", { class: "cw-button cw-zoom-button", text, attrs: { type: "button", "aria-label": label, title: label } });
    this.v.listen(b, "click", fn);
    return b;
  }

  /** Wheel zooms about the token under the pointer; a drag pans. */
  listenPointer() {
    const { v, heatmap } = this;
    v.listen(heatmap.overlay, "wheel", (e) => {
      if (!this.lod || !heatmap.scene) return;
      e.preventDefault();
      const box = heatmap.overlay.getBoundingClientRect();
      this.zoom(e.deltaY < 0 ? 2 : 0.5, tokenAtPoint(this.win, heatmap.scene.layout, e.clientX - box.left, e.clientY - box.top));
    });
    v.listen(heatmap.overlay, "mousedown", (e) => {
      this.dragged = false;
      if (this.lod && e.button === 0) this.drag = { x: e.clientX, y: e.clientY, win: this.win };
    });
    v.listen(window, "mousemove", (e) => {
      if (!this.drag || !heatmap.scene) return;
      const dx = e.clientX - this.drag.x;
      const dy = e.clientY - this.drag.y;
      if (!this.dragged && Math.hypot(dx, dy) < DRAG_PX) return;
      this.dragged = true;
      this.setWindow(dragWindow(this.drag.win, this.lod.n, dx, dy, heatmap.scene.layout.cell));
    });
    v.listen(window, "mouseup", () => {
      this.drag = null;
    });
  }

  /** A new patterns payload `p` (its overview decoded as `stack`, null when it has none). */
  show(p, stack) {
    const before = this.lod;
    this.lod = stack && p.lod ? p.lod : null;
    this.tiles = [];
    this.levels = [];
    if (this.lod) {
      this.loadLevels(p);
      const same = before && before.n === this.lod.n && this.win; // the same prompt: keep the window
      this.win = same ? clampWindow(this.win, this.lod.n) : fullWindow(this.lod.n);
      this.pool.value = this.lod.pool;
    }
    this.el.hidden = !this.lod;
  }

  zoom(by, at = null) {
    if (this.lod) this.setWindow(zoomWindow(this.win, this.lod.n, by, at));
  }

  whole() {
    if (this.lod) this.setWindow(fullWindow(this.lod.n));
  }

  setWindow(win) {
    const w = clampWindow(win, this.lod.n);
    const old = this.win;
    if (old && w.r0 === old.r0 && w.c0 === old.c0 && w.size === old.size) return;
    this.win = w;
    this.redraw();
    this.request();
  }

  /** Ask the kernel for the window's exact cells, unless the overview or a kept tile holds them. */
  sendRequest() {
    if (!this.lod || this.v.standalone) return;
    const head = this.head();
    const want = tileWanted(this.win, this.lod.factor, head, this.tiles);
    if (!want) return;
    this.requested += 1;
    const p = this.patterns();
    this.v.set({ tile_request: { id: this.requested, layer: p.layer, head, revision: p.revision, ...want } });
  }

  /** Keep the model's `tile` when it answers the picture shown (an earlier picture's is ignored), then redraw. */
  async takeTile() {
    const { model } = this.v;
    const t = model.get("tile");
    const p = this.patterns();
    if (!this.lod || !hasData(t) || !p || t.revision !== p.revision || t.layer !== p.layer || t.pool !== this.lod.pool) return;
    const plain = await inflated(t);
    if (model.get("tile") !== t || this.patterns() !== p) return; // a newer answer or picture came meanwhile
    this.tiles = [tileOf(plain, bytesOf(plain.data)), ...this.tiles].slice(0, TILE_KEEP);
    this.redraw();
  }

  /** The exported page's levels of payload `p` (inflated), then a redraw. */
  loadLevels(p) {
    const { v } = this;
    const levels = (v.model.get("levels") || []).filter((t) => hasData(t) && t.revision === p.revision && t.layer === p.layer);
    if (!levels.length) return;
    Promise.all(levels.map((t) => inflated(t).then((plain) => tileOf(plain, bytesOf(plain.data))))).then(
      (tiles) => {
        if (this.patterns() !== p) return;
        this.levels = tiles;
        this.redraw();
      },
      (err) => v.error(`could not read the exported levels: ${err.message}`, "decode"),
    );
  }

  /**
   * Draw the window of `head` from the overview `stack` (a lookup table `lut` of its codes): exact
   * tiles where the kernel sent them, the overview elsewhere. `spec`: the heatmap's title, scale….
   */
  draw(stack, head, lut, labels, spec) {
    const { lod, win } = this;
    const tiles = [...this.tiles, ...this.levels].filter((t) => t.head === head);
    const causal = lod.causal !== false; // tensors given may hold weights above the diagonal
    const g = gridSize(win);
    this.heatmap.update({
      ...spec,
      rows: g,
      cols: g,
      paint: (pixels) => {
        const { n, factor } = lod;
        this.share = paintWindow({ win, n, stack, factor, head, tiles, lut, pixels, emptyPixel: 0, nanCode: stack.nanCode, causal });
      },
      rowLabels: windowAxis(win, win.r0, labels),
      colLabels: windowAxis(win, win.c0, labels),
    });
    const finest = this.levels.filter((t) => t.head === head).reduce((m, t) => Math.min(m, t.step), lod.factor);
    this.label.textContent = windowCaption({ lod, win, share: this.share, finest, head, standalone: this.v.standalone });
  }

  /** The tokens {query, key} of grid cell `hit` ({row, col}) of the window. */
  tokensOf(hit) {
    return tokenAt(this.win, hit.row, hit.col);
  }

  /** The heatmap's marks of the tokens hovered and locked ({query, key}, either may be null). */
  highlight(hover, lock) {
    const w = this.win;
    return {
      row: cellOf(w, hover?.query, w.r0),
      col: cellOf(w, hover?.key, w.c0),
      lockedRow: cellOf(w, lock?.query, w.r0),
      lockedCol: cellOf(w, lock?.key, w.c0),
    };
  }

  /** True when each cell drawn is one token (a hovered cell has one exact weight). */
  get exact() {
    return isExact(this.win);
  }

  /** `keys` with zoom keys (+ - 0) and Shift+arrows to pan; plain arrows keep their jobs. */
  keys(keys) {
    const pan = (dr, dc, plain) => (e) => {
      if (this.lod && e?.shiftKey) this.setWindow(panWindow(this.win, this.lod.n, (dr * this.win.size) / 4, (dc * this.win.size) / 4));
      else plain?.(e);
    };
    return {
      ...keys,
      ArrowLeft: pan(0, -1, keys.ArrowLeft),
      ArrowRight: pan(0, 1, keys.ArrowRight),
      ArrowUp: pan(-1, 0, keys.ArrowUp),
      ArrowDown: pan(1, 0, keys.ArrowDown),
      "+": () => this.zoom(2),
      "=": () => this.zoom(2),
      "-": () => this.zoom(0.5),
      0: () => this.whole(),
    };
  }

  /** The view's data-cw-window and data-cw-tile-share marks ("" without a window). */
  marks() {
    const { lod, win } = this;
    return { window: lod ? `${win.r0},${win.c0},${win.size}` : "", tileShare: lod ? String(this.share ?? 0) : "" };
  }
}
