// Payload decoding: byteOffset honoured, tril layout, NaN code, float32 alignment, pooling.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CodeStack, bytesOf, float32Of, NAN_CODE } from "../lib/decode.js";
import { decodeState, fromBase64, StaticModel } from "../lib/host.js";

const meta = (shape, layout = "full", lo = 0, hi = 1) => ({ dtype: "uint8", shape, lo, hi, layout, nan_code: 255 });

test("bytesOf honours the DataView's offset and length", () => {
  const buf = new Uint8Array([9, 9, 1, 2, 3, 9]).buffer;
  assert.deepEqual([...bytesOf(new DataView(buf, 2, 3))], [1, 2, 3]);
});

test("float32Of reads aligned and unaligned little-endian floats", () => {
  const src = new Float32Array([0.5, -2, 1e-7]);
  assert.deepEqual([...float32Of(new DataView(src.buffer))], [...src]);
  const shifted = new Uint8Array(13);
  shifted.set(new Uint8Array(src.buffer), 1);
  assert.deepEqual([...float32Of(new DataView(shifted.buffer, 1, 12))], [...src]);
  assert.throws(() => float32Of(new Uint8Array(5)), RangeError);
});

test("a tril stack stores row r from r(r+1)/2 and reads zeros above the diagonal", () => {
  // two 3x3 matrices, lower triangles: 6 codes each
  const codes = new Uint8Array([254, 127, 127, 0, 0, 254, 10, 20, 30, 40, 50, 60]);
  const stack = new CodeStack(new DataView(codes.buffer), meta([2, 3, 3], "tril"));
  assert.equal(stack.count, 2);
  assert.equal(stack.value(0, 0, 0), 1);
  assert.equal(stack.value(0, 0, 2), 0);
  assert.ok(Math.abs(stack.value(0, 1, 0) - 0.5) < 0.003);
  assert.equal(stack.code(1, 2, 1), 50);
  assert.deepEqual([...stack.rowValues(0, 2)].map((v) => Math.round(v * 254)), [0, 0, 254]);
  assert.deepEqual([...stack.colValues(1, 0)].map((v) => Math.round(v * 254)), [10, 20, 40]);
});

test("a stack refuses a payload of the wrong length or dtype", () => {
  assert.throws(() => new CodeStack(new Uint8Array(5), meta([1, 3, 3], "tril")), RangeError);
  assert.throws(() => new CodeStack(new Uint8Array(9), { ...meta([1, 3, 3]), dtype: "float32" }), TypeError);
});

test("NaN code decodes to NaN; a signed range keeps 0 at code 127", () => {
  const stack = new CodeStack(new Uint8Array([NAN_CODE, 127, 0, 254]), meta([1, 2, 2], "full", -2, 2));
  assert.ok(Number.isNaN(stack.value(0, 0, 0)));
  assert.equal(stack.zeroCode, 127);
  assert.ok(Math.abs(stack.value(0, 0, 1)) < 1e-9);
  assert.equal(stack.value(0, 1, 0), -2);
});

test("paint maps codes through the lookup table and fills the empty triangle", () => {
  const stack = new CodeStack(new Uint8Array([1, 2, 3]), meta([1, 2, 2], "tril"));
  const lut = new Uint32Array(256).map((_, i) => i * 10);
  const px = new Uint32Array(4);
  stack.paint(0, lut, px, 7);
  assert.deepEqual([...px], [10, 7, 20, 30]);
});

test("pool keeps a one-cell stripe visible when shrinking", () => {
  const n = 8;
  const codes = new Uint8Array(n * n);
  for (let r = 1; r < n; r++) codes[r * n + r - 1] = 254; // previous-token stripe
  const pooled = new CodeStack(codes, meta([1, n, n])).pool(0, 2, 2);
  assert.equal(pooled[0], 254); // top-left block holds (1, 0)
  assert.equal(pooled[3], 254);
});

test("saved state decodes {$bytes} to DataViews; StaticModel emits changes", () => {
  const state = decodeState({ a: { $bytes: Buffer.from([1, 2, 3]).toString("base64") }, b: [1, { c: 2 }] });
  assert.ok(state.a instanceof DataView);
  assert.deepEqual([...bytesOf(state.a)], [1, 2, 3]);
  assert.deepEqual(state.b, [1, { c: 2 }]);
  const model = new StaticModel({ head: 0 });
  const seen = [];
  const fn = (v) => seen.push(v);
  model.on("change:head", fn);
  model.set("head", 2);
  model.set("head", 2); // unchanged: no event
  model.off("change:head", fn);
  model.set("head", 3);
  assert.deepEqual(seen, [2]);
  assert.equal(model.standalone, true);
});

test("fromBase64 gives back every byte value", () => {
  const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 97) % 256);
  const b64 = Buffer.from(bytes).toString("base64");
  assert.deepEqual([...fromBase64(b64)], [...bytes]);
  assert.deepEqual([...fromBase64("")], []);
});
