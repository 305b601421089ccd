// The step chart (Training view): steps on a log axis (log(1 + step)) or a linear one, lines per series, the
// phase-change window shaded, the cursor at the selected step, hit-testing of lines and steps; the view's series
// of heads (coloured by layer, the selected head on top in the accent colour).
import assert from "node:assert/strict";
import { test } from "node:test";
import { sceneToSVG } from "../lib/scene.js";
import { layerColour, nearestLine, seriesDomain, stepAt, stepChartScene, stepPosition, stepText, stepTicks } from "../lib/step-chart.js";
import { headSeries, windowText } from "../views/training.js";
import { theme } from "./fixtures.js";

const measure = (text) => 6 * String(text).length;
const steps = [0, 10, 100, 1000, 6000];
const spec = (over = {}) => ({
  steps,
  series: [
    { name: "L1H0", values: [0.0, 0.01, 0.05, 0.6, 0.5], color: "#123456" },
    { name: "L1H1", values: [0.0, NaN, 0.02, 0.1, 0.2], color: "#654321" },
  ],
  scale: "log",
  window: [100, 1000],
  windowLabel: "phase change: steps 100–1 000",
  cursor: 1000,
  title: "induction",
  theme,
  width: 600,
  height: 260,
  ...over,
});

test("steps sit at log10(1 + step) on a log axis, so step 0 is drawn at the left edge", () => {
  assert.equal(stepPosition(0, "log"), 0);
  assert.equal(stepPosition(9, "log"), 1);
  assert.equal(stepPosition(1000, "linear"), 1000);
  const scene = stepChartScene(spec(), measure);
  const { left, plotW, xs } = scene.layout;
  assert.equal(xs[0], left);
  assert.ok(Math.abs(xs[4] - (left + plotW)) < 1e-9);
  // equal ratios, nearly equal gaps: 10 -> 100 and 100 -> 1000
  assert.ok(Math.abs(xs[2] - xs[1] - (xs[3] - xs[2])) < 0.05 * (xs[3] - xs[2]));
  const linear = stepChartScene(spec({ scale: "linear" }), measure);
  assert.ok(linear.layout.xs[3] - linear.layout.xs[0] < 0.2 * linear.layout.plotW); // 1 000 of 6 000: the left sixth
});

test("ticks: 0 and the powers of ten on a log axis; round values on a linear one", () => {
  assert.deepEqual(stepTicks(0, 6000, "log"), [0, 1, 10, 100, 1000]);
  assert.deepEqual(stepTicks(512, 143000, "log"), [1000, 10000, 100000]);
  assert.deepEqual(stepTicks(0, 6000, "linear"), [0, 2000, 4000, 6000]);
  assert.equal(stepText(6000), "6\u202f000");
  assert.equal(stepText(143000000), "143M");
  const texts = stepChartScene(spec(), measure)
    .ops.filter((op) => op.type === "text")
    .map((op) => op.text);
  for (const t of ["0", "10", "1\u202f000", "induction", "phase change: steps 100–1 000", "step (log scale) →"])
    assert.ok(texts.includes(t), t);
});

test("the window is shaded between its steps, the cursor drawn at the selected step, a NaN breaks a line", () => {
  const scene = stepChartScene(spec(), measure);
  const { xs, top, plotH } = scene.layout;
  const band = scene.ops.find((op) => op.type === "rect" && op.fill === theme.accent);
  assert.ok(Math.abs(band.x - xs[2]) < 1e-9 && Math.abs(band.x + band.w - xs[3]) < 1e-9 && band.h === plotH);
  const cursor = scene.ops.find((op) => op.type === "line" && op.stroke === theme.fg && op.y1 === top);
  assert.ok(Math.abs(cursor.x1 - xs[3]) < 1e-9);
  const paths = scene.ops.filter((op) => op.type === "path");
  assert.equal(paths.length, 2);
  assert.equal((paths[1].d.match(/M/g) || []).length, 2); // L1H1 has no value at step 10: two pieces
  assert.equal(scene.lines[1][1], null);
  assert.equal(
    stepChartScene(spec({ window: null }), measure).ops.filter((op) => op.type === "rect" && op.fill === theme.accent).length,
    0,
  );
  assert.match(sceneToSVG(scene, "#fff"), /<path/);
  // a label wider than the window stays inside the plot, near its end
  const late = stepChartScene(spec({ window: [1000, 6000], windowLabel: "x".repeat(40) }), measure);
  const label = late.ops.find((op) => op.type === "text" && op.text === "x".repeat(40));
  assert.ok(label.x + 120 <= late.layout.left + late.layout.plotW && label.x > late.layout.xs[3] - 120);
});

test("values are drawn up, on a domain that covers them and 0", () => {
  assert.deepEqual(seriesDomain([{ values: [0.05, 0.61] }]), [0, 0.8]);
  assert.deepEqual(seriesDomain([{ values: [-3.7, 0.1] }]), [-4, 1]);
  assert.deepEqual(seriesDomain([{ values: [NaN] }]), [0, 1]);
  const scene = stepChartScene(spec(), measure);
  const [first, , , peak] = scene.lines[0];
  assert.ok(peak[1] < first[1]); // 0.6 above 0
});

test("hit-testing: the line nearest the pointer, the step nearest in x", () => {
  const scene = stepChartScene(spec(), measure);
  const [x, y] = scene.lines[0][3];
  assert.equal(nearestLine(scene, x + 2, y + 2), 0);
  const [x2, y2] = scene.lines[1][4];
  assert.equal(nearestLine(scene, x2, y2 - 1), 1);
  assert.equal(nearestLine(scene, 1, 1), null);
  const { xs, top } = scene.layout;
  assert.equal(stepAt(scene, xs[2] + 3, top + 10), 2);
  assert.equal(stepAt(scene, xs[4], top - 5), null); // above the plot
});

test("head series: one line a head with values, coloured by layer, the selected one last in the accent colour", () => {
  // [n_steps 2, L 2, H 2]: head (1, 1) has no value at all (a composition into a first-layer head, say)
  const values = Float32Array.from([0.1, 0.2, 0.3, NaN, 0.4, 0.5, 0.6, NaN]);
  const series = headSeries(values, [2, 2, 2], { layers: [0, 1], selected: { row: 0, head: 1 }, theme });
  assert.deepEqual(
    series.map((s) => s.name),
    ["L0H0", "L1H0", "L0H1"],
  );
  assert.deepEqual(series[0].values, [0.1, 0.4].map(Math.fround));
  assert.equal(series[2].color, theme.accent);
  assert.ok(series[2].width > series[0].width);
  assert.equal(series[0].color, layerColour(0, false));
  assert.notEqual(series[1].color, series[0].color);
  assert.equal(layerColour(10, true), layerColour(0, true));
  assert.equal(windowText([1753, 2868]), "phase change: steps 1\u202f753–2\u202f868");
  assert.equal(windowText(null), "");
});
