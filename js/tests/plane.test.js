// Complex-plane scene (eigenvalue spectra) and hit-testing of its dots.
import assert from "node:assert/strict";
import { test } from "node:test";
import { maxModulus, planeScene } from "../lib/plane.js";
import { nearestDot, sceneToSVG } from "../lib/scene.js";
import { theme } from "./fixtures.js";

test("maxModulus ignores non-finite points", () => {
  assert.equal(
    maxModulus([
      [3, 4],
      [NaN, 1],
      [1, 0],
    ]),
    5,
  );
  assert.equal(maxModulus([]), 0);
});

test("planeScene: points scaled by the largest modulus, unit circle and axes drawn", () => {
  const scene = planeScene({
    points: [
      [2, 0],
      [0, -1],
      [-1, 1],
    ],
    size: 240,
    theme,
    title: "t",
  });
  assert.equal(scene.scale, 2);
  const circle = scene.ops.find((op) => op.type === "circle" && op.dash);
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

test("planeScene rings the hovered dot only", () => {
  const rings = (ring) =>
    planeScene({
      points: [
        [1, 0],
        [0, 1],
      ],
      theme,
      ring,
    }).ops.filter((op) => op.type === "circle" && op.r === 6);
  assert.equal(rings(null).length, 0);
  assert.equal(rings(1).length, 1);
});

test("planeScene of an all-zero spectrum does not divide by zero", () => {
  const scene = planeScene({
    points: [
      [0, 0],
      [0, 0],
    ],
    theme,
  });
  assert.equal(scene.scale, 1);
  assert.ok(scene.dots.every((d) => Number.isFinite(d.x) && Number.isFinite(d.y)));
});

test("the plane's SVG has its dots and escapes the title", () => {
  const scene = planeScene({
    points: [
      [1, 0],
      [-1, 0],
    ],
    theme,
    title: "<b>&",
  });
  const svg = sceneToSVG(scene, theme.bgCss);
  assert.ok(svg.includes("&lt;b&gt;&amp;") && !svg.includes("<b>"));
  assert.equal((svg.match(/<circle /g) || []).length, 3); // unit circle + 2 dots
  assert.ok(svg.includes('stroke-dasharray="4 3"'));
});
