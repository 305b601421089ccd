// The line chart over positions (Ablation's strip): runs of marked slots, the value domain, the
// scene's lines, bands and labels, and which slot a point falls in.
import assert from "node:assert/strict";
import { test } from "node:test";
import { lineChartScene, runsOf, slotAt, valueDomain } from "../lib/line-chart.js";

const theme = { fg: "#111", muted: "#666", border: "#ccc", accent: "#d9480f", bgCss: "#fff", font: "sans-serif", mono: "monospace" };
const measure = (text) => 6 * String(text).length;

test("runsOf merges consecutive slots and ignores repeats and order", () => {
  assert.deepEqual(runsOf([5, 3, 4, 9, 9, 1]), [
    [1, 1],
    [3, 5],
    [9, 9],
  ]);
  assert.deepEqual(runsOf([]), []);
});

test("valueDomain covers 0 and every finite value, on round ticks", () => {
  assert.deepEqual(valueDomain([{ values: [0.3, 3.9, NaN] }, { values: [1.2] }]), [0, 4]);
  assert.deepEqual(valueDomain([{ values: [-2.5, 1] }]), [-3, 1]);
  assert.deepEqual(valueDomain([{ values: [NaN] }]), [0, 1]); // nothing to show: still a scale
});

test("the scene draws one line per series, a band per run of marked slots and a legend", () => {
  const series = [
    { name: "clean", values: [4, 4, 0.3, 0.2], color: "#666", dash: [4, 2] },
    { name: "L1H0 ablated", values: [4, 4, 3, NaN], color: "#d9480f" },
  ];
  const scene = lineChartScene(
    { series, labels: ["a", "b", "c", "d"], marked: [2, 3], title: "Loss", theme, width: 400, height: 220 },
    measure,
  );
  const paths = scene.ops.filter((op) => op.type === "path");
  assert.equal(paths.length, 2);
  assert.equal((paths[0].d.match(/[ML]/g) || []).length, 4);
  assert.equal((paths[1].d.match(/[ML]/g) || []).length, 3); // NaN: no point there
  const { left, top, step, plotH, n, domain } = scene.layout;
  assert.equal(n, 4);
  assert.deepEqual(domain, [0, 4]);
  const band = scene.ops.find((op) => op.type === "rect" && op.fill === theme.muted);
  assert.deepEqual([band.x, band.w, band.y, band.h], [left + 2 * step, 2 * step, top, plotH]);
  const texts = scene.ops.filter((op) => op.type === "text").map((op) => op.text);
  for (const t of ["Loss", "clean", "L1H0 ablated", "a", "d", "4", "0"]) assert.ok(texts.includes(t), t);
  // the first point of the clean series sits at slot 0's centre and at the value 4 (the top)
  assert.match(paths[0].d, new RegExp(`^M${(left + step / 2).toFixed(2)} ${top.toFixed(2)}`));
});

test("labels thin out when slots are narrow", () => {
  const values = Array.from({ length: 200 }, (_, i) => i % 7);
  const labels = values.map((_, i) => `t${i}`);
  const scene = lineChartScene({ series: [{ name: "x", values, color: "#000" }], labels, theme, width: 500 }, measure);
  const shown = scene.ops.filter((op) => op.type === "text" && /^t\d+$/.test(op.text));
  assert.ok(shown.length < 60 && shown.length > 5, `${shown.length} labels`);
  assert.ok(!scene.ops.some((op) => op.type === "circle"), "no dots on slots narrower than 5 px");
});

test("slotAt finds the slot under a point inside the plot, null outside", () => {
  const layout = { left: 40, top: 44, plotW: 400, plotH: 100, step: 10, n: 40 };
  assert.equal(slotAt(layout, 40, 50), 0);
  assert.equal(slotAt(layout, 95, 50), 5);
  assert.equal(slotAt(layout, 439.9, 144), 39);
  assert.equal(slotAt(layout, 39, 50), null);
  assert.equal(slotAt(layout, 100, 200), null);
});
