// Colour scales: ends, monotone lightness, lookup tables, ticks, formatting.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CodeStack } from "../lib/decode.js";
import { colorAt, effectDomain, formatCell, formatValue, makeScale, NOISE, niceTicks, packRGBA, readableText } from "../lib/scales.js";
import { luminance } from "../lib/theme.js";

test("colorAt clamps and interpolates between stops", () => {
  const stops = [
    [0, 0, 0, 0],
    [1, 200, 100, 50],
  ];
  assert.deepEqual(colorAt(stops, -1), [0, 0, 0]);
  assert.deepEqual(colorAt(stops, 0.5), [100, 50, 25]);
  assert.deepEqual(colorAt(stops, 2), [200, 100, 50]);
});

test("the sequential scale darkens with weight on light pages and brightens on dark ones", () => {
  const light = makeScale("sequential");
  const dark = makeScale("sequential", { dark: true });
  const lum = (s, v) => luminance(s.rgb(v));
  for (let v = 0; v < 1; v += 0.1) {
    assert.ok(lum(light, v + 0.1) < lum(light, v) + 1e-9, `light not monotone at ${v}`);
    assert.ok(lum(dark, v + 0.1) > lum(dark, v) - 1e-9, `dark not monotone at ${v}`);
  }
  assert.ok(lum(light, 0) > 0.9, "zero weight should recede into a light page");
  assert.ok(lum(dark, 0) < 0.2, "zero weight should recede into a dark page");
});

test("diverging scale is neutral at 0; NaN has its own colour", () => {
  const s = makeScale("diverging", { domain: [-3, 3] });
  const [r, g, b] = s.rgb(0);
  assert.ok(Math.max(r, g, b) - Math.min(r, g, b) < 4);
  assert.deepEqual(s.rgb(NaN), s.nan);
  assert.throws(() => makeScale("rainbow"), RangeError);
  assert.throws(() => makeScale("sequential", { domain: [1, 1] }), RangeError);
});

test("lut maps code 0, 254 and the NaN code", () => {
  const s = makeScale("sequential");
  const stack = new CodeStack({ data: new Uint8Array(4), dtype: "uint8", shape: [1, 2, 2], lo: 0, hi: 1, layout: "full", nan_code: 255 });
  const lut = s.lut(stack);
  assert.equal(lut[0], packRGBA(...s.rgb(0)));
  assert.equal(lut[254], packRGBA(...s.rgb(1)));
  assert.equal(lut[255], packRGBA(...s.nan));
});

test("packRGBA is the little-endian pixel of ImageData", () => {
  const px = new Uint32Array([packRGBA(1, 2, 3, 4)]);
  assert.deepEqual([...new Uint8Array(px.buffer)], [1, 2, 3, 4]);
});

test("niceTicks are round and cover the domain", () => {
  assert.deepEqual(niceTicks(0, 1, 5), [0, 0.25, 0.5, 0.75, 1]);
  const t = niceTicks(-0.37, 0.37, 5);
  assert.ok(t.includes(0) && t[0] >= -0.37 && t.at(-1) <= 0.37);
});

test("formatValue and readableText", () => {
  assert.equal(formatValue(0.123456), "0.1235");
  assert.equal(formatValue(0), "0");
  assert.equal(formatValue(NaN), "n/a");
  assert.match(formatValue(1.5e-6), /e-6$/);
  assert.equal(readableText([255, 255, 255]), "#111");
  assert.equal(readableText([10, 20, 60]), "#fff");
});

test("numerical noise reads as zero, in read-outs and cell labels", () => {
  for (const noise of [7.82e-16, -7.82e-16, 3e-9, -9.99e-7, Number.MIN_VALUE]) assert.equal(formatValue(noise), "0");
  assert.equal(NOISE, 1e-6);
  assert.match(formatValue(1e-6), /^1\.000e-6$/); // from 1e-6 on, a value
  assert.equal(formatValue(-2.5e-4), "-2.500e-4");
  for (const [v, text] of [
    [-7.82e-16, "0.00"],
    [-0.004, "0.00"],
    [7.82e-16, "0.00"],
    [-0.006, "-0.01"],
    [0.5, "0.50"],
    [-1, "-1.00"],
  ]) {
    assert.equal(formatCell(v), text);
  }
  assert.equal(formatCell(NaN), "NaN");
});

test("an effect domain reaches the whole effect: a 1 % cell stays faint in raw and normalised grids alike", () => {
  // corrupted 2, clean 12: a head that moves the metric by 0.1 is 1 % of the effect
  const raw = effectDomain([2.1, 2.05, Number.NaN], 2, 12 - 2);
  assert.deepEqual(raw, [-8, 12]);
  const scale = makeScale("diverging", { domain: raw });
  const faint = scale.rgb(2.1);
  const full = scale.rgb(12);
  const centre = scale.rgb(2);
  const distance = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
  assert.ok(distance(faint, centre) < 0.05 * distance(full, centre), `${faint} vs ${full}`);
  // the same grid normalised: the floor is 1, and larger values widen it
  assert.deepEqual(effectDomain([0.01, -0.005], 0, 1), [-1, 1]);
  assert.deepEqual(effectDomain([0.01, -2.5], 0, 1), [-2.5, 2.5]);
  // a clean run equal to the corrupted one, and no finite value: a unit domain rather than an empty one
  assert.deepEqual(effectDomain([Number.NaN], 3, 0), [2, 4]);
  assert.deepEqual(effectDomain([3.5], 3, Number.NaN), [2.5, 3.5]);
});
