// Level of detail (lib/lod.js) and deflated payloads (lib/inflate.js): windows, tiles, painting.
import assert from "node:assert/strict";
import { deflateSync } from "node:zlib";
import { test } from "node:test";
import { CodeStack } from "../lib/decode.js";
import { inflated, isDeflated, newestInflated } from "../lib/inflate.js";
import {
  cellOf,
  clampWindow,
  fullWindow,
  GRID,
  gridSize,
  isExact,
  paintWindow,
  panWindow,
  stepFor,
  tileCode,
  tileFor,
  tileOf,
  tokenAt,
  zoomWindow,
} from "../lib/lod.js";

test("zooming by 2 from 8 192 tokens reaches single cells and stays on the step grid", () => {
  let win = fullWindow(8192);
  assert.equal(stepFor(win.size), 16);
  assert.equal(tileFor(win, 16), null); // the overview is as fine as the grid
  const sizes = [];
  for (let i = 0; i < 9; i++) {
    win = zoomWindow(win, 8192, 2);
    sizes.push(win.size);
    assert.equal(win.r0 % stepFor(win.size), 0);
    assert.ok(gridSize(win) <= GRID);
  }
  assert.deepEqual(sizes, [4096, 2048, 1024, 512, 256, 128, 64, 32, 16]);
  assert.deepEqual(win, { r0: 4088, c0: 4088, size: 16 });
  assert.ok(isExact(win));
  assert.deepEqual(tileFor(win, 16), { row0: 4088, col0: 4088, rows: 16, cols: 16, step: 1 });
  assert.deepEqual(zoomWindow(win, 8192, 2), win); // no deeper than MIN_WINDOW
  assert.deepEqual(zoomWindow(win, 8192, 1 / 1024), fullWindow(8192));
});

test("zoom keeps the anchor token in place; pan stays inside", () => {
  const win = zoomWindow(fullWindow(1000), 1000, 4, { r: 900, c: 100 });
  assert.equal(win.size, 250);
  assert.ok(Math.abs(win.r0 + (900 - 0) / 4 - 900) <= 1 && Math.abs(win.c0 + 100 / 4 - 100) <= 1, JSON.stringify(win));
  assert.deepEqual(panWindow(win, 1000, 5000, -5000), { r0: 750, c0: 0, size: 250 });
  assert.deepEqual(clampWindow({ r0: -3, c0: 2.4, size: 3 }, 40), { r0: 0, c0: 2, size: 16 });
  assert.deepEqual(clampWindow({ r0: 0, c0: 0, size: 50 }, 10), { r0: 0, c0: 0, size: 10 });
});

test("grid cells and tokens map both ways", () => {
  const win = { r0: 1024, c0: 512, size: 2048 }; // step 4
  assert.deepEqual(tokenAt(win, 3, 2), { query: 1036, key: 520 });
  assert.equal(cellOf(win, 1039, win.r0), 3);
  assert.equal(cellOf(win, 1000, win.r0), null);
  assert.equal(cellOf(win, null, win.r0), null);
});

/** A [1, m, m] tril overview stack of codes code(I, J). */
function overview(m, code) {
  const codes = [];
  for (let i = 0; i < m; i++) for (let j = 0; j <= i; j++) codes.push(code(i, j));
  return new CodeStack({ data: new Uint8Array(codes), dtype: "uint8", shape: [1, m, m], lo: 0, hi: 1, layout: "tril", nan_code: 255 });
}

test("paintWindow takes tiles where they cover the window, the overview elsewhere, nothing above the diagonal", () => {
  const n = 64;
  const stack = overview(16, (i, j) => (i === j ? 200 : 10)); // factor 4
  const lut = Uint32Array.from({ length: 256 }, (_, c) => c + 1);
  const win = { r0: 16, c0: 16, size: 16 }; // step 1
  const codes = new Uint8Array(8 * 16).map((_, k) => (k % 16 <= Math.floor(k / 16) ? 100 : 255));
  const tile = tileOf({ shape: [8, 16], row0: 16, col0: 16, step: 1, head: 0, layer: 0, revision: 1, pool: "max" }, codes);
  assert.equal(tileCode(tile, 17, 16, 1), 100);
  assert.equal(tileCode(tile, 17, 16, 2), -1);
  assert.equal(tileCode(tile, 30, 16, 1), -1);
  const pixels = new Uint32Array(16 * 16);
  const share = paintWindow({ win, n, stack, factor: 4, head: 0, tiles: [tile], lut, pixels, emptyPixel: 0 });
  assert.equal(pixels[1 * 16 + 0], 101); // row 17, col 16: from the tile
  assert.equal(pixels[0 * 16 + 1], 0); // above the diagonal
  assert.equal(pixels[12 * 16 + 0], 11); // row 28, col 16: overview block (7, 4)
  assert.equal(pixels[12 * 16 + 12], 201); // row 28, col 28: overview diagonal block
  const stored = (16 * 17) / 2;
  const fromTile = (8 * 9) / 2;
  assert.equal(share, fromTile / stored);
  assert.throws(() => paintWindow({ win, n, stack, factor: 4, head: 0, lut, pixels: new Uint32Array(4) }), RangeError);
});

test("a deflated payload inflates to its codes; a plain one is returned as is", async () => {
  const raw = new Uint8Array(5000).map((_, i) => (i % 97 === 0 ? 254 : 0));
  const packed = deflateSync(raw);
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  const p = { data: view, dtype: "uint8", shape: [5000], lo: 0, hi: 1, layout: "full", encoding: "deflate", raw_bytes: 5000, revision: 3 };
  assert.ok(isDeflated(p));
  assert.throws(() => new CodeStack({ ...p, shape: [1, 5000] }), /inflate it first/);
  const plain = await inflated(p);
  assert.deepEqual([...plain.data], [...raw]);
  assert.equal(plain.encoding, undefined);
  assert.equal(plain.revision, 3);
  const same = { data: raw, dtype: "uint8", shape: [5000] };
  assert.equal(await inflated(same), same);
  await assert.rejects(inflated({ ...p, raw_bytes: 4 }), RangeError);
  await assert.rejects(inflated({ ...p, encoding: "gzip" }), TypeError);
});

test("newestInflated drops a payload still inflating when a newer one comes, and its error", async () => {
  const deflated = (bytes) => {
    const packed = deflateSync(bytes);
    return {
      data: new DataView(packed.buffer, packed.byteOffset, packed.byteLength),
      dtype: "uint8",
      shape: [bytes.length],
      encoding: "deflate",
    };
  };
  const read = newestInflated();
  const got = [];
  const failed = [];
  read(
    deflated(new Uint8Array([1, 2])),
    (p) => got.push([...p.data]),
    (err) => failed.push(err),
  );
  read(
    { ...deflated(new Uint8Array([3])), encoding: "gzip" },
    (p) => got.push([...p.data]),
    (err) => failed.push(err),
  );
  read(
    { data: new Uint8Array([4]) },
    (p) => got.push([...p.data]),
    (err) => failed.push(err),
  ); // plain: at once
  assert.deepEqual(got, [[4]]);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(got, [[4]]);
  assert.deepEqual(failed, []);
  read(
    deflated(new Uint8Array([5, 6])),
    (p) => got.push([...p.data]),
    (err) => failed.push(err),
  );
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(got, [[4], [5, 6]]);
});

test("an exported level coarser than the window fills cells the exact tiles do not hold", () => {
  const stack = overview(16, () => 10); // factor 4, n 64
  const lut = Uint32Array.from({ length: 256 }, (_, c) => c + 1);
  const level = tileOf({ shape: [32, 32], row0: 0, col0: 0, step: 2, head: 0 }, new Uint8Array(32 * 32).fill(77));
  const pixels = new Uint32Array(16 * 16);
  const win = { r0: 32, c0: 32, size: 16 }; // step 1: the level (step 2) is coarser, the overview (4) coarser still
  const share = paintWindow({ win, n: 64, stack, factor: 4, head: 0, tiles: [level], lut, pixels });
  assert.equal(pixels[5 * 16 + 2], 78); // from the level
  assert.equal(share, 0); // none exact
  const wide = { r0: 0, c0: 0, size: 64 };
  paintWindow({ win: wide, n: 64, stack, factor: 4, head: 0, tiles: [], lut, pixels: new Uint32Array(64 * 64) });
});
