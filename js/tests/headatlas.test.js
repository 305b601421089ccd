// HeadAtlas: the scatter scene of heads (axes, colour bar, points, the selected head ringed and named)
// and its hit-testing; decile labels, counts and metric colour scales.
import assert from "node:assert/strict";
import { test } from "node:test";
import { makeScale } from "../lib/scales.js";
import { nearestDot, sceneToSVG } from "../lib/scene.js";
import { count, decileLabel, metricScale, scatterScene } from "../views/headatlas.js";
import { theme } from "./fixtures.js";

const measure = (text) => 6 * String(text).length;

const spec = (over = {}) => ({
  points: [
    { x: 0, y: 0, c: 0.1, label: "L0H0" },
    { x: 1, y: 1, c: 0.9, label: "L0H1" },
    { x: 0.5, y: NaN, c: 0.5, label: "L1H0" },
    { x: 0.25, y: 0.75, c: NaN, label: "L1H1" },
  ],
  xLabel: "previous token",
  yLabel: "induction",
  cLabel: "first token (sink)",
  xDomain: [0, 1],
  yDomain: [0, 1],
  scale: makeScale("sequential", { domain: [0, 1] }),
  theme,
  width: 500,
  height: 360,
  title: "every head",
  ...over,
});

test("scatterScene: one dot per head with a value, inside the plot, x right and y up", () => {
  const scene = scatterScene(spec(), measure);
  const { left, top, plotW, plotH } = scene.layout;
  assert.deepEqual(
    scene.dots.map((d) => d.i),
    [0, 1, 3],
  ); // the head without a y value is left out
  for (const d of scene.dots) assert.ok(d.x >= left && d.x <= left + plotW && d.y >= top && d.y <= top + plotH);
  const [origin, corner] = scene.dots;
  assert.ok(corner.x > origin.x && corner.y < origin.y);
  assert.ok(left + plotW + 12 < scene.width, "the colour bar fits right of the plot");
  const texts = scene.ops.filter((op) => op.type === "text").map((op) => op.text);
  for (const t of ["previous token →", "induction →", "colour: first token (sink)", "every head", "0", "0.5", "1"])
    assert.ok(texts.includes(t), t);
  // a head whose colour is NaN is drawn in the scale's NaN colour
  const fills = scene.ops.filter((op) => op.type === "circle").map((op) => op.fill);
  assert.ok(fills.includes("rgb(205, 205, 205)"));
  assert.match(sceneToSVG(scene, "#fff"), /<circle/);
});

test("scatterScene rings and names the selected head only", () => {
  const ringOf = (scene) => scene.ops.filter((op) => op.type === "circle" && op.stroke === theme.accent);
  assert.equal(ringOf(scatterScene(spec(), measure)).length, 0);
  const scene = scatterScene(spec({ selected: 1 }), measure);
  assert.equal(ringOf(scene).length, 1);
  assert.ok(scene.ops.some((op) => op.type === "text" && op.text === "L0H1"));
  assert.equal(ringOf(scatterScene(spec({ selected: 2 }), measure)).length, 0); // no value, no point to ring
});

test("nearestDot finds the head under the pointer, or none", () => {
  const scene = scatterScene(spec(), measure);
  const d = scene.dots[1];
  assert.equal(nearestDot(scene, d.x + 3, d.y - 3, 9).i, 1);
  assert.equal(nearestDot(scene, 0, 0), null);
});

test("labels, counts and scales", () => {
  assert.equal(decileLabel(9), "90–100 %");
  assert.equal(decileLabel(0), "0–10 %");
  assert.equal(count(1000), "1\u202f000");
  assert.equal(count(340), "340");
  assert.equal(metricScale([-1, 1], false).kind, "diverging");
  assert.deepEqual(metricScale([0, 8.2], false).domain, [0, 8.2]);
  assert.deepEqual(metricScale([0, 0], true).domain, [0, 1]);
});
