// Complex-plane scene (eigenvalue spectra), hit-testing, SVG composition, and the OV/QK head payload.
import assert from "node:assert/strict";
import { test } from "node:test";
import { composeSVG, maxModulus, nearestDot, planeScene, planeToSVG, svgSize } from "../lib/plane.js";
import { exactValue, headStack } from "../views/ov.js";

const theme = { fg: "#000", muted: "#555", border: "#ccc", accent: "#f00", bgCss: "rgb(255, 255, 255)", font: "sans-serif", mono: "monospace", dark: false };

test("maxModulus ignores non-finite points", () => {
  assert.equal(maxModulus([[3, 4], [NaN, 1], [1, 0]]), 5);
  assert.equal(maxModulus([]), 0);
});

test("planeScene: points scaled by the largest modulus, unit circle and axes drawn", () => {
  const scene = planeScene({ points: [[2, 0], [0, -1], [-1, 1]], size: 240, theme, title: "t" });
  assert.equal(scene.scale, 2);
  const circle = scene.ops.find((op) => op.type === "circle");
  assert.ok(circle && circle.r === scene.unit);
  assert.equal(scene.ops.filter((op) => op.type === "line").length, 2);
  // the largest eigenvalue sits on the unit circle, on the positive real axis
  const [x, y] = scene.toPx(2, 0);
  assert.ok(Math.abs(x - (scene.cx + scene.unit)) < 1e-9 && Math.abs(y - scene.cy) < 1e-9);
  // imaginary part up is screen y down
  assert.ok(scene.toPx(0, -1)[1] > scene.cy);
  assert.equal(scene.dots.length, 3);
  assert.equal(nearestDot(scene, x + 2, y - 2).i, 0);
  assert.equal(nearestDot(scene, 0, 0), null);
  // every point inside the drawn area
  for (const d of scene.dots) assert.ok(d.x >= 0 && d.x <= scene.width && d.y >= 0 && d.y <= scene.height);
});

test("planeScene of an all-zero spectrum does not divide by zero", () => {
  const scene = planeScene({ points: [[0, 0], [0, 0]], theme });
  assert.equal(scene.scale, 1);
  assert.ok(scene.dots.every((d) => Number.isFinite(d.x) && Number.isFinite(d.y)));
});

test("planeToSVG and composeSVG produce one document, text escaped", () => {
  const scene = planeScene({ points: [[1, 0]], theme, title: "<b>&" });
  const svg = planeToSVG(scene, theme);
  assert.ok(svg.includes("&lt;b&gt;&amp;") && !svg.includes("<b>"));
  assert.deepEqual(svgSize(svg), { width: scene.width, height: scene.height });
  const both = composeSVG([svg, svg], "white", 10);
  assert.deepEqual(svgSize(both), { width: 2 * scene.width + 10, height: scene.height });
  assert.equal((both.match(/xmlns=/g) || []).length, 1);
  assert.ok(both.includes(`<svg x="${scene.width + 10}" y="0"`));
});

test("headStack reads one head of a per-head-range payload; exactValue indexes float32", () => {
  // two heads of 2x2: head 0 on range [-1, 1], head 1 on [-4, 4]
  const codes = new Uint8Array([0, 127, 254, 127, 254, 0, 127, 127]);
  const meta = { dtype: "uint8", shape: [2, 2, 2], layout: "full", nan_code: 255, ranges: [[-1, 1], [-4, 4]] };
  const dv = new DataView(codes.buffer);
  const h0 = headStack(dv, meta, 0);
  const h1 = headStack(dv, meta, 1);
  assert.equal(h0.value(0, 0, 0), -1);
  assert.equal(h0.value(0, 1, 0), 1);
  assert.equal(h1.value(0, 0, 0), 4);
  assert.equal(h1.value(0, 0, 1), -4);
  assert.equal(headStack(dv, meta, 2), null);
  const values = new Float32Array([0, 1, 2, 3, 4, 5, 6, 7.5]);
  const vmeta = { dtype: "float32", shape: [2, 2, 2] };
  assert.equal(exactValue(new DataView(values.buffer), vmeta, 1, 1, 1), 7.5);
  assert.equal(exactValue(new DataView(values.buffer), vmeta, 0, 1, 0), 2);
});
