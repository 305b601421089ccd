// Labels that fit: every label when the cells allow, else the informative ones, never overlapping.
import assert from "node:assert/strict";
import { test } from "node:test";
import { FONT_PX, heatmapScene } from "../lib/heatmap-scene.js";
import { axisPriority, labelFit, MIN_LABEL_PX, pickLabels } from "../lib/layout.js";
import { makeScale } from "../lib/scales.js";
import { theme } from "./fixtures.js";

const measure = (text, font) => 0.6 * Number.parseFloat(font) * Array.from(String(text)).length;
const tokens = (n) => Array.from({ length: n }, (_, i) => `tok${i}`);
const scene = (n, extra = {}) =>
  heatmapScene({ rows: n, cols: n, rowLabels: tokens(n), colLabels: tokens(n), scale: makeScale("sequential"), theme, ...extra }, measure);
const axis = (s, rotated) =>
  s.ops.filter((op) => op.type === "text" && !!op.rotate === rotated && op.baseline === "middle" && op.font.includes("monospace"));
const gaps = (xs) => xs.slice(1).map((x, k) => x - xs[k]);

test("labelFit: full size from 13 px cells, smaller fonts down to 8 px keep every label, then picked", () => {
  assert.deepEqual(labelFit(28, 11), { fontPx: 11, gapPx: 13, all: true });
  assert.deepEqual(labelFit(12.5, 11), { fontPx: 11, gapPx: 12, all: true });
  assert.deepEqual(labelFit(560 / 48, 11), { fontPx: 10, gapPx: 11, all: true });
  assert.deepEqual(labelFit(9, 11), { fontPx: MIN_LABEL_PX, gapPx: 9, all: true });
  assert.deepEqual(labelFit(8.75, 11), { fontPx: 11, gapPx: 13, all: false });
  for (const cell of [9, 9.5, 10, 11.7, 12, 12.99, 13, 30]) {
    const { fontPx, gapPx } = labelFit(cell, 11);
    assert.ok(gapPx <= cell && fontPx < gapPx && fontPx >= MIN_LABEL_PX, `cell ${cell}`);
  }
});

test("pickLabels: all when they fit; else first, last and evenly spaced, never closer than the gap", () => {
  assert.deepEqual(pickLabels(8, 13, 13), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(pickLabels(0, 5, 13), []);
  assert.deepEqual(pickLabels(1, 1, 13), [0]);
  assert.deepEqual(pickLabels(7, 2, 13), [0]); // 12 px from first to last: room for one
  assert.deepEqual(pickLabels(10, 5, 13), [0, 3, 6, 9]);
  assert.throws(() => pickLabels(3, 0, 13), RangeError);
  for (const [n, cell] of [
    [64, 8.75],
    [300, 560 / 300],
    [1024, 560 / 1024],
    [8, 2],
  ]) {
    const shown = pickLabels(n, cell, 13);
    assert.equal(shown[0], 0);
    assert.equal(shown.at(-1), n - 1, `n=${n}`);
    for (const g of gaps(shown)) assert.ok(g * cell >= 13 - 1e-9, `n=${n}: labels ${g} cells apart overlap`);
    // as many labels as whole-cell gaps allow
    assert.equal(shown.length, Math.floor((n - 1) / Math.ceil(13 / cell)) + 1, `n=${n}: ${shown.length} labels`);
  }
});

test("pickLabels: the kept (selected) index first, then the strongest, then evenly spaced in the gaps", () => {
  const n = 300;
  const cell = 2;
  const priority = new Float32Array(n).fill(Number.NaN);
  priority[150] = 0.9;
  priority[152] = 0.8; // too close to 150: dropped
  priority[40] = 0.5;
  const shown = pickLabels(n, cell, 13, { priority, keep: [201] });
  for (const i of [201, 150, 40]) assert.ok(shown.includes(i), `${i} in ${shown}`);
  assert.ok(!shown.includes(152));
  for (const g of gaps(shown)) assert.ok(g * cell >= 13);
  // every priority given: the strongest win, whatever their places
  const all = Array.from({ length: n }, (_, i) => (i % 37 === 5 ? 10 + i : 0));
  const strong = pickLabels(n, cell, 13, { priority: all });
  for (let i = 5; i < n; i += 37) assert.ok(strong.includes(i), `${i}`);
  // a keep out of range is ignored
  assert.deepEqual(pickLabels(10, 5, 13, { keep: [-1, 99, 4] }), [0, 4, 9]);
});

test("scene: every label at 48 tokens (a smaller font), never every other", () => {
  const s = scene(48);
  assert.equal(axis(s, false).length, 48);
  assert.equal(axis(s, true).length, 48);
  assert.equal(s.rowStride, 1);
  assert.equal(s.colStride, 1);
  assert.ok(s.font.startsWith("10px"), s.font);
  // an 8-head grid and a strip of 8 heads over 30 positions: every head
  const strip = heatmapScene(
    { rows: 8, cols: 30, rowLabels: tokens(8), colLabels: tokens(30), scale: makeScale("sequential"), theme, maxPlot: 280 },
    measure,
  );
  assert.equal(axis(strip, false).length, 8);
  // full-size labels where they fit
  assert.ok(scene(12).font.startsWith(`${FONT_PX}px`));
});

test("scene: a long prompt labels the selected row and column and the strongest, without overlap", () => {
  const n = 300;
  const colPriority = Array.from({ length: n }, (_, i) => (i === 77 ? 1 : 0.1));
  const s = scene(n, { keepRows: 123, keepCols: [250], colPriority });
  const rows = axis(s, false);
  const cols = axis(s, true);
  assert.ok(rows.some((op) => op.text === "tok123"));
  assert.ok(cols.some((op) => op.text === "tok250") && cols.some((op) => op.text === "tok77"));
  assert.deepEqual(
    s.rowShown,
    rows.map((op) => Number(op.text.slice(3))),
  );
  for (const g of gaps(rows.map((op) => op.y))) assert.ok(g >= FONT_PX + 2 - 1e-9);
  for (const g of gaps(cols.map((op) => op.x))) assert.ok(g >= FONT_PX + 2 - 1e-9);
  assert.ok(rows.length >= 30, `${rows.length} row labels`);
});

test("axisPriority: the largest |value| of each row and column, NaN skipped", () => {
  const m = [
    [0, -3, Number.NaN],
    [1, 2, Number.NaN],
  ];
  const { rowPriority, colPriority } = axisPriority(2, 3, (r, c) => m[r][c]);
  assert.deepEqual([...rowPriority], [3, 2]);
  assert.deepEqual([...colPriority].slice(0, 2), [1, 3]);
  assert.ok(Number.isNaN(colPriority[2]));
});
