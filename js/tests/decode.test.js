// Payload decoding: byteOffset honoured, tril layout, NaN code, float32 alignment, pooling,
// per-head ranges, exact reads, and the saved state of an exported page.
import assert from "node:assert/strict";
import { test } from "node:test";
import { NAN_CODE } from "../lib/codes.js";
import { bytesOf, CodeStack, exactValue, float32Of, floatValues, hasData, headStack } from "../lib/decode.js";
import { decodeState, fromBase64, StaticModel } from "../lib/host.js";

/** A uint8 payload (one trait's value) over `data`. */
const payload = (data, shape, layout = "full", lo = 0, hi = 1) => ({ data, dtype: "uint8", shape, lo, hi, layout, nan_code: 255 });

/** `bytes` inside a larger buffer, starting at `offset`: what a comm message with several buffers gives. */
function shifted(bytes, offset) {
  const buf = new Uint8Array(offset + bytes.length + 3).fill(99);
  buf.set(bytes, offset);
  return new DataView(buf.buffer, offset, bytes.length);
}

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
  const stack = new CodeStack(payload(new DataView(codes.buffer), [2, 3, 3], "tril"));
  assert.equal(stack.count, 2);
  assert.equal(stack.value(0, 0, 0), 1);
  assert.equal(stack.value(0, 0, 2), 0);
  assert.ok(Math.abs(stack.value(0, 1, 0) - 0.5) < 0.003);
  assert.equal(stack.code(1, 2, 1), 50);
  assert.deepEqual(
    [...stack.rowValues(0, 2)].map((v) => Math.round(v * 254)),
    [0, 0, 254],
  );
  assert.deepEqual(
    [...stack.colValues(1, 0)].map((v) => Math.round(v * 254)),
    [10, 20, 40],
  );
});

test("a stack refuses a payload of the wrong length or dtype", () => {
  assert.throws(() => new CodeStack(payload(new Uint8Array(5), [1, 3, 3], "tril")), RangeError);
  assert.throws(() => new CodeStack({ ...payload(new Uint8Array(9), [1, 3, 3]), dtype: "float32" }), TypeError);
  assert.throws(() => new CodeStack(undefined), TypeError);
});

test("NaN code decodes to NaN; a signed range keeps 0 at code 127", () => {
  const stack = new CodeStack(payload(new Uint8Array([NAN_CODE, 127, 0, 254]), [1, 2, 2], "full", -2, 2));
  assert.ok(Number.isNaN(stack.value(0, 0, 0)));
  assert.equal(stack.zeroCode, 127);
  assert.ok(Math.abs(stack.value(0, 0, 1)) < 1e-9);
  assert.equal(stack.value(0, 1, 0), -2);
});

test("colMaxCodes: each column's largest stored code, NaN codes left out", () => {
  // a tril 3x3 matrix: rows [7], [NaN, 9], [3, 2, 5]
  const stack = new CodeStack(payload(new Uint8Array([7, NAN_CODE, 9, 3, 2, 5]), [1, 3, 3], "tril"));
  assert.deepEqual([...stack.colMaxCodes(0)], [7, 9, 5]);
});

test("paint maps codes through the lookup table and fills the empty triangle", () => {
  const stack = new CodeStack(payload(new Uint8Array([1, 2, 3]), [1, 2, 2], "tril"));
  const lut = new Uint32Array(256).map((_, i) => i * 10);
  const px = new Uint32Array(4);
  stack.paint(0, lut, px, 7);
  assert.deepEqual([...px], [10, 7, 20, 30]);
});

test("pool keeps a one-cell stripe visible when shrinking", () => {
  const n = 8;
  const codes = new Uint8Array(n * n);
  for (let r = 1; r < n; r++) codes[r * n + r - 1] = 254; // previous-token stripe
  const pooled = new CodeStack(payload(codes, [1, n, n])).pool(0, 2, 2);
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

test("a payload read from the middle of a buffer sees only its own bytes", () => {
  const stack = new CodeStack(payload(shifted(new Uint8Array([254, 0, 127, 254]), 5), [1, 2, 2]));
  assert.equal(stack.value(0, 0, 0), 1);
  assert.equal(stack.value(0, 1, 1), 1);
  assert.ok(Math.abs(stack.value(0, 1, 0) - 0.5) < 0.003);
});

test("hasData: a payload without data (nothing to draw) is told apart", () => {
  assert.equal(hasData({ revision: 3, pair: [], reason: "no pair" }), false);
  assert.equal(hasData({}), false);
  assert.equal(hasData(null), false);
  assert.equal(hasData(payload(new Uint8Array(4), [1, 2, 2])), true);
});

test("headStack reads head h on its own range, from an offset buffer too", () => {
  // two heads of 2x2: head 0 on range [-1, 1], head 1 on [-4, 4]
  const codes = new Uint8Array([0, 127, 254, 127, 254, 0, 127, 127]);
  const p = {
    data: shifted(codes, 3),
    dtype: "uint8",
    shape: [2, 2, 2],
    layout: "full",
    nan_code: 255,
    ranges: [
      [-1, 1],
      [-4, 4],
    ],
  };
  const h0 = headStack(p, 0);
  const h1 = headStack(p, 1);
  assert.equal(h0.value(0, 0, 0), -1);
  assert.equal(h0.value(0, 1, 0), 1);
  assert.equal(h1.value(0, 0, 0), 4);
  assert.equal(h1.value(0, 0, 1), -4);
  assert.equal(headStack(p, 2), null);
  assert.equal(headStack({ revision: 1 }, 0), null);
  assert.throws(() => headStack({ ...p, data: new Uint8Array(7) }, 0), RangeError);
});

test("exactValue indexes a float32 payload in place, aligned or not", () => {
  const values = new Float32Array([0, 1, 2, 3, 4, 5, 6, 7.5]);
  const bytes = new Uint8Array(values.buffer);
  for (const offset of [0, 1, 4]) {
    const p = { data: shifted(bytes, offset), dtype: "float32", shape: [2, 2, 2], layout: "full" };
    assert.equal(exactValue(p, 1, 1, 1), 7.5);
    assert.equal(exactValue(p, 0, 1, 0), 2);
    assert.equal(exactValue(p, 2, 0, 0), null);
    assert.equal(exactValue(p, 0, 0), null);
    assert.deepEqual([...floatValues(p)], [...values]);
  }
  assert.equal(exactValue({ revision: 2 }, 0), null);
  assert.throws(() => floatValues({ data: new Uint8Array(12), dtype: "float32", shape: [2, 2] }), RangeError);
});

test("a saved payload decodes to the same object with a DataView inside", () => {
  const saved = {
    patterns: {
      data: { $bytes: Buffer.from([0, 254, 254]).toString("base64") },
      dtype: "uint8",
      shape: [1, 2, 2],
      layout: "tril",
      lo: 0,
      hi: 1,
      nan_code: 255,
      revision: 4,
      labels: ["a", "b"],
    },
  };
  const { patterns } = decodeState(saved);
  assert.ok(patterns.data instanceof DataView);
  assert.equal(patterns.revision, 4);
  assert.deepEqual(patterns.labels, ["a", "b"]);
  assert.equal(new CodeStack(patterns).value(0, 1, 1), 1);
});
