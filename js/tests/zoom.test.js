// The zoom of a long attention pattern (lib/zoom.js), the token view that follows it
// (lib/token-view.js) and the exact row of the selection (lib/exact-row.js): tile requests asked,
// skipped and coalesced, pointer geometry, captions, weights read from the overview.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CodeStack } from "../lib/decode.js";
import { fullWindow } from "../lib/lod.js";
import { FakeElement, installFakeDom } from "./fixtures.js";

installFakeDom();
globalThis.window = new FakeElement("window");
const { colWeights, dragWindow, overviewValue, rowWeights, tileCovers, tileWanted, tokenAtPoint, windowCaption, Zoom } = await import(
  "../lib/zoom.js"
);
const { stripSpan } = await import("../lib/token-view.js");
const { ExactRow, selectionKey } = await import("../lib/exact-row.js");

const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A [1, m, m] tril overview stack whose block (I, J) holds code c(I, J). */
function overview(m, c) {
  const codes = [];
  for (let i = 0; i < m; i++) for (let j = 0; j <= i; j++) codes.push(c(i, j));
  return new CodeStack({ data: new Uint8Array(codes), dtype: "uint8", shape: [1, m, m], lo: 0, hi: 254, layout: "tril", nan_code: 255 });
}

/** A stand-in for the view scaffold: model traits, what the view sets, listeners by type. */
function fakeView(traits = {}, standalone = false) {
  const state = { ...traits };
  const sent = [];
  const listeners = [];
  const v = {
    standalone,
    model: { get: (name) => state[name] },
    set(values) {
      sent.push(values);
      Object.assign(state, values);
    },
    listen: (target, type, fn) => listeners.push({ target, type, fn }),
    own: (thing) => thing,
    error: (message) => assert.fail(message),
  };
  return { v, state, sent, listeners };
}

const LOD = { n: 1024, factor: 16, pool: "max" };
const PATTERNS = { layer: 2, revision: 7, lod: LOD };

/** A Zoom over a fake heatmap (cells of 1 px at (40, 20)) showing PATTERNS. */
function shownZoom({ standalone = false } = {}) {
  const fake = fakeView({}, standalone);
  const draws = [];
  const heatmap = {
    overlay: new FakeElement("canvas"),
    scene: { layout: { left: 40, top: 20, cell: 1 } },
    update: (spec) => draws.push(spec),
  };
  const zoom = new Zoom(fake.v, { heatmap, head: () => 1, patterns: () => PATTERNS, redraw: () => draws.push("redraw") });
  zoom.show(
    PATTERNS,
    overview(64, () => 0),
  );
  return { zoom, draws, ...fake };
}

test("a tile covers a request of its head and step that lies inside it", () => {
  const tile = { head: 1, step: 2, row0: 100, col0: 50, rows: 32, cols: 32 }; // tokens 100..163 x 50..113
  const want = { row0: 100, col0: 50, rows: 64, cols: 64, step: 2 };
  assert.ok(tileCovers(tile, want, 1));
  assert.ok(!tileCovers(tile, want, 0)); // another head
  assert.ok(!tileCovers(tile, { ...want, step: 1 }, 1)); // finer cells
  assert.ok(!tileCovers(tile, { ...want, rows: 66 }, 1)); // one row past its end
  assert.ok(!tileCovers(tile, { ...want, col0: 48 }, 1)); // starts left of it
});

test("tileWanted: nothing while the overview is as fine as the grid or a kept tile holds the window", () => {
  assert.equal(tileWanted(fullWindow(8192), 16, 0, []), null); // 16 tokens a cell: the overview itself
  const win = { r0: 512, c0: 256, size: 256 };
  const want = tileWanted(win, 16, 0, []);
  assert.deepEqual(want, { row0: 512, col0: 256, rows: 256, cols: 256, step: 1 });
  assert.equal(tileWanted(win, 16, 0, [{ ...want, head: 0 }]), null);
  assert.deepEqual(tileWanted(win, 16, 0, [{ ...want, head: 1 }]), want);
});

test("the wheel's anchor is the token under the pointer; a drag moves the pattern with it", () => {
  const win = { r0: 1024, c0: 512, size: 2048 }; // 4 tokens a cell
  const layout = { left: 40, top: 20, cell: 2 };
  assert.deepEqual(tokenAtPoint(win, layout, 40, 20), { r: 1024, c: 512 });
  assert.deepEqual(tokenAtPoint(win, layout, 50, 24), { r: 1032, c: 532 });
  // 10 px right and 4 px down on 2 px cells of 4 tokens: the window moves 20 tokens left, 8 up
  assert.deepEqual(dragWindow(win, 8192, 10, 4, 2), { r0: 1016, c0: 492, size: 2048 });
  assert.deepEqual(dragWindow(win, 8192, -1e6, -1e6, 2), { r0: 8192 - 2048, c0: 8192 - 2048, size: 2048 });
});

test("the zoom caption says the window and what one cell is", () => {
  const lod = { n: 8192, factor: 16, pool: "max" };
  const win = { r0: 0, c0: 0, size: 8192 };
  const base = { lod, win, share: 0, finest: 16, head: 0, standalone: false };
  assert.equal(windowCaption(base), "8192 tokens · whole prompt · each cell the max of 16 × 16 tokens (overview)");
  const zoomed = { ...base, win: { r0: 512, c0: 256, size: 1024 }, share: 1 };
  assert.equal(windowCaption(zoomed), "8192 tokens · destinations 512–1535 × sources 256–1279 · each cell the max of 2 × 2 exact cells");
  assert.equal(
    windowCaption({ ...zoomed, win: { r0: 0, c0: 0, size: 16 } }),
    "8192 tokens · destinations 0–15 × sources 0–15 · exact cells",
  );
  assert.equal(
    windowCaption({ ...zoomed, share: 0, finest: 4, head: 3, standalone: true }),
    "8192 tokens · destinations 512–1535 × sources 256–1279 · each cell the max of 16 × 16 tokens (overview)" +
      " · exported page: holds blocks down to 4 × 4 tokens for head 3; exact cells need the kernel",
  );
});

test("the token strip follows the window: its sources when paying, its destinations when receiving", () => {
  const lod = { n: 100 };
  const win = { r0: 40, c0: 10, size: 16 };
  assert.deepEqual(stripSpan(null, null, "pays", 7), { from: 0, to: 7, note: "" });
  assert.deepEqual(stripSpan(lod, win, "pays", 100), { from: 10, to: 26, note: "tokens 10–25 of 100 (the zoomed window)" });
  assert.deepEqual(stripSpan(lod, win, "receives", 100), { from: 40, to: 56, note: "tokens 40–55 of 100 (the zoomed window)" });
  assert.deepEqual(stripSpan(lod, fullWindow(100), "pays", 100), { from: 0, to: 100, note: "" });
});

test("weights of a long prompt come from the exact row when sent, else the overview block; none above the diagonal", () => {
  const stack = overview(4, (i, j) => 10 * i + j); // factor 4: 16 tokens
  const lod = { n: 16, factor: 4 };
  assert.equal(overviewValue(stack, lod, 0, 9, 5), 21); // block (2, 1)
  assert.equal(overviewValue(stack, lod, 0, 5, 9), 0); // above the diagonal
  assert.equal(overviewValue(stack, { ...lod, causal: false }, 0, 5, 9), stack.value(0, 1, 2));
  assert.deepEqual(rowWeights(stack, lod, 0, 9, null, 4, 12), [21, 21, 21, 21, 22, 22, null, null]); // blocks (2, 1), (2, 2)
  const exact = Float32Array.from({ length: 16 }, (_, j) => j / 100);
  assert.deepEqual(
    rowWeights(stack, lod, 0, 9, exact, 8, 12),
    [0.08, 0.09, null, null].map((w) => (w == null ? w : Math.fround(w))),
  );
  assert.deepEqual(colWeights(stack, lod, 0, 5, 4, 8), [null, 11, 11, 11]);
  // a whole pattern: the stack's row, exact where sent, nothing where a tril payload stores none
  assert.deepEqual(rowWeights(stack, null, 0, 1, null, 0, 4), [10, 11, null, null]);
  assert.deepEqual(colWeights(stack, null, 0, 2, 0, 4), [null, null, 22, 32]);
});

test("zooming asks for the window's tile once; a kept tile answers; moves coalesce to the latest window", async () => {
  const { zoom, sent, draws } = shownZoom();
  assert.deepEqual(zoom.win, fullWindow(1024));
  zoom.request(); // 2 tokens a cell: the overview (16) is coarser, so a tile
  assert.deepEqual(sent, [{ tile_request: { id: 1, layer: 2, head: 1, revision: 7, row0: 0, col0: 0, rows: 1024, cols: 1024, step: 2 } }]);
  zoom.zoom(2); // → 512 tokens, redraw and a request within 60 ms of the last: waits
  zoom.zoom(2); // → 256 tokens: the request that waits is for this window
  assert.equal(draws.filter((d) => d === "redraw").length, 2);
  assert.equal(sent.length, 1);
  await wait(80);
  assert.equal(sent.length, 2);
  assert.deepEqual(sent[1].tile_request, { id: 2, layer: 2, head: 1, revision: 7, row0: 384, col0: 384, rows: 256, cols: 256, step: 1 });
  // the answer comes: the same window asks nothing more
  const answer = tileAnswer(sent[1].tile_request);
  zoom.v.model.get = (name) => (name === "tile" ? answer : undefined);
  await zoom.takeTile();
  assert.equal(zoom.tiles.length, 1);
  await wait(80);
  zoom.request();
  assert.equal(sent.length, 2);
});

/** The kernel's answer to tile request `r`: codes of `r`'s cells (uint8 payload). */
function tileAnswer(r) {
  const rows = r.rows / r.step;
  const cols = r.cols / r.step;
  return { ...r, pool: "max", shape: [rows, cols], dtype: "uint8", data: new Uint8Array(rows * cols) };
}

test("an answer to another picture or pooling is not kept", async () => {
  const { zoom, sent } = shownZoom();
  zoom.request();
  const answer = tileAnswer(sent[0].tile_request);
  for (const stale of [
    { ...answer, revision: 6 },
    { ...answer, layer: 3 },
    { ...answer, pool: "mean" },
  ]) {
    zoom.v.model.get = (name) => (name === "tile" ? stale : undefined);
    await zoom.takeTile();
  }
  assert.equal(zoom.tiles.length, 0);
});

test("an exported page asks nothing; the window and its marks still follow keys", () => {
  const { zoom, sent } = shownZoom({ standalone: true });
  const plain = [];
  const keys = zoom.keys({ ArrowRight: (e) => plain.push(e) });
  keys["+"]();
  assert.equal(zoom.win.size, 512);
  keys.ArrowRight({ shiftKey: true }); // pans a quarter of the window
  assert.deepEqual(zoom.win, { r0: 256, c0: 384, size: 512 });
  keys.ArrowRight({ shiftKey: false });
  assert.equal(plain.length, 1); // a plain arrow keeps its job (the next head)
  assert.deepEqual(zoom.marks(), { window: "256,384,512", tileShare: "0" });
  keys[0]();
  assert.deepEqual(zoom.win, fullWindow(1024));
  assert.equal(sent.length, 0);
});

test("a payload without lod hides the zoom; a new prompt of the same length keeps the window", () => {
  const { zoom } = shownZoom();
  zoom.zoom(4);
  const win = zoom.win;
  zoom.show(
    { ...PATTERNS, revision: 8 },
    overview(64, () => 0),
  );
  assert.deepEqual(zoom.win, win);
  assert.equal(zoom.el.hidden, false);
  zoom.show(
    { layer: 2, revision: 9 },
    overview(64, () => 0),
  );
  assert.equal(zoom.lod, null);
  assert.equal(zoom.el.hidden, true);
  assert.deepEqual(zoom.marks(), { window: "", tileShare: "" });
});

test("the exact row: the selection sent at most every 80 ms, its echo not taken back, the shown head's weights read", async () => {
  let current = { sel: { query: 3, key: 1 }, locked: false };
  const { v, state, sent } = fakeView();
  const patterns = { revision: 4 };
  let head = 1;
  const exact = new ExactRow(v, { current: () => current, patterns: () => patterns, head: () => head });
  exact.send();
  exact.send(); // the same selection: nothing new to say
  current = { sel: { query: 5, key: null }, locked: true };
  exact.send();
  assert.deepEqual(sent, [{ selection: { query: 3, key: 1, locked: false } }]);
  await wait(100);
  assert.deepEqual(sent[1], { selection: { query: 5, key: null, locked: true } });
  assert.equal(exact.received(), null); // the model holds what was sent
  state.selection = { query: 7, key: 2, locked: false }; // set from Python
  assert.deepEqual(exact.received(), { sel: { query: 7, key: 2 }, locked: false });
  assert.equal(selectionKey(null, false), '{"query":null,"key":null,"locked":false}');
  // the kernel's row: [heads, keys] float32, every head's
  const all = new Float32Array([0.5, 0.5, 0, 0.25, 0.5, 0.25]);
  state.row = { data: new DataView(all.buffer), dtype: "float32", shape: [2, 3], query: 5, revision: 4 };
  assert.deepEqual([...exact.values(5)], [0.25, 0.5, 0.25]);
  head = 0;
  assert.deepEqual([...exact.values(5)], [0.5, 0.5, 0]);
  head = 1;
  // a remote model's row holds only the heads it knows, named in `heads`
  const values = new Float32Array([0.25, 0.5, 0.25]);
  state.row = { data: new DataView(values.buffer), dtype: "float32", shape: [1, 3], heads: [1], query: 5, revision: 4 };
  assert.deepEqual([...exact.values(5)], [0.25, 0.5, 0.25]);
  assert.equal(exact.values(6), null); // another query's
  head = 0;
  assert.equal(exact.values(5), null);
  patterns.revision = 5;
  head = 1;
  assert.equal(exact.values(5), null); // an earlier picture's
});
