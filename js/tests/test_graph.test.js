// node --test: pure helpers of the composition graph and score grids (js/lib/graph.js).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  edgePath,
  edgeWidth,
  flatHeads,
  graphLayout,
  pairIndex,
  rawDomain,
  scoreRange,
  shiftThreshold,
  sliderStep,
  visibleEdges,
} from "../lib/graph.js";

/** Scores [K, L, H, L, H] with NaN where l1 >= l2, value given by fn(k, l1, h1, l2, h2). */
function scores(K, L, H, fn) {
  const out = new Float32Array(K * L * H * L * H).fill(NaN);
  for (let k = 0; k < K; k++)
    for (let l1 = 0; l1 < L; l1++)
      for (let h1 = 0; h1 < H; h1++)
        for (let l2 = l1 + 1; l2 < L; l2++) for (let h2 = 0; h2 < H; h2++) out[pairIndex(k, l1, h1, l2, h2, L, H)] = fn(k, l1, h1, l2, h2);
  return out;
}

test("pairIndex is the row-major offset of [K, L, H, L, H]", () => {
  const L = 3,
    H = 2;
  assert.equal(pairIndex(0, 0, 0, 0, 0, L, H), 0);
  assert.equal(pairIndex(0, 0, 0, 0, 1, L, H), 1);
  assert.equal(pairIndex(0, 0, 0, 1, 0, L, H), H);
  assert.equal(pairIndex(0, 0, 1, 0, 0, L, H), L * H);
  assert.equal(pairIndex(1, 0, 0, 0, 0, L, H), L * H * L * H);
});

test("visibleEdges keeps pairs at or above the threshold, weakest first, and skips NaN", () => {
  const L = 3,
    H = 2;
  const values = scores(2, L, H, (k, l1, h1, l2, h2) => (k === 1 ? 0.9 : 0.1 * (l1 + h1 + l2 + h2)));
  const all = visibleEdges(values, 0, L, H, -1).edges;
  assert.equal(all.length, 2 * 2 * 2 + 2 * 2); // (0 -> 1), (0 -> 2), (1 -> 2) pairs of heads
  const { edges, passing } = visibleEdges(values, 0, L, H, 0.35);
  assert.ok(edges.every((e) => e.value >= 0.35));
  assert.equal(passing, edges.length);
  for (let i = 1; i < edges.length; i++) assert.ok(edges[i].value >= edges[i - 1].value);
  assert.ok(edges.every((e) => e.l1 < e.l2));
  // the kind selects its block
  assert.ok(visibleEdges(values, 1, L, H, 0.5).edges.every((e) => Math.abs(e.raw - 0.9) < 1e-6));
});

test("visibleEdges subtracts the offset before thresholding and keeps the strongest under a limit", () => {
  const L = 2,
    H = 3;
  const values = scores(1, L, H, (_k, _l1, h1, _l2, h2) => 0.1 + 0.01 * (h1 * H + h2));
  const shifted = visibleEdges(values, 0, L, H, 0.0, 0.15);
  assert.ok(shifted.edges.every((e) => Math.abs(e.value - (e.raw - 0.15)) < 1e-6 && e.value >= 0));
  const limited = visibleEdges(values, 0, L, H, -1, 0, 2);
  assert.equal(limited.passing, 9);
  assert.equal(limited.edges.length, 2);
  assert.ok(Math.abs(limited.edges[1].raw - 0.18) < 1e-6);
});

test("scoreRange ignores NaN and returns null when nothing is finite", () => {
  const values = scores(1, 2, 2, (_k, _l1, h1, _l2, h2) => h1 + h2 / 10);
  assert.deepEqual(
    scoreRange(values, 0, 2, 2).map((v) => +v.toFixed(3)),
    [0, 1.1],
  );
  assert.equal(scoreRange(new Float32Array(16).fill(NaN), 0, 2, 2), null);
});

test("rawDomain starts at 0 and covers the top score and 1.5x the baseline", () => {
  assert.deepEqual(rawDomain([0.05, 0.2], 0.1), [0, 0.2 * 1.05]);
  const [lo, hi] = rawDomain([0.05, 0.1], 0.1);
  assert.equal(lo, 0);
  assert.ok(hi >= 0.15);
  assert.ok(rawDomain(null, 0)[1] > 0);
  assert.ok(rawDomain([0, 0.99], 0.1)[1] <= 1);
});

test("edgeWidth grows from 1 px at the threshold to max at the top", () => {
  assert.equal(edgeWidth(0.1, 0.1, 0.5), 1);
  assert.equal(edgeWidth(0.5, 0.1, 0.5, 7), 7);
  assert.ok(edgeWidth(0.3, 0.1, 0.5) > 1 && edgeWidth(0.3, 0.1, 0.5) < 7);
  assert.equal(edgeWidth(0.9, 0.1, 0.5, 7), 7);
});

test("shiftThreshold keeps the same edges when switching units", () => {
  const raw = 0.2;
  const corrected = shiftThreshold(raw, 0.088, true);
  assert.ok(Math.abs(corrected - 0.112) < 1e-9);
  assert.ok(Math.abs(shiftThreshold(corrected, 0.088, false) - raw) < 1e-9);
  assert.equal(shiftThreshold(-0.99, 0.1, true), -1);
});

test("graphLayout puts layers in columns and heads in rows inside the picture", () => {
  const lay = graphLayout({ layers: 3, heads: 4 });
  assert.equal(lay.nodes.length, 12);
  const n = (l, h) => lay.nodes[l * 4 + h];
  assert.equal(n(0, 0).x, n(0, 3).x);
  assert.ok(n(1, 0).x > n(0, 0).x);
  assert.ok(n(0, 1).y > n(0, 0).y);
  for (const node of lay.nodes) {
    assert.ok(node.x - lay.radius >= 0 && node.x + lay.radius <= lay.width);
    assert.ok(node.y - lay.radius >= 0 && node.y + lay.radius <= lay.height);
  }
  assert.throws(() => graphLayout({ layers: 0, heads: 4 }), RangeError);
  const big = graphLayout({ layers: 12, heads: 12 });
  assert.ok(big.radius >= 4 && big.rowH >= 12);
});

test("edgePath starts and ends at the given points", () => {
  const d = edgePath(10, 20, 110, 60);
  assert.match(d, /^M 10 20 C /);
  assert.match(d, / 110 60$/);
});

test("flatHeads labels heads by block index and head", () => {
  const heads = flatHeads([0, 2, 5], 2, 1, 3);
  assert.deepEqual(
    heads.map((x) => x.label),
    ["L2H0", "L2H1", "L5H0", "L5H1"],
  );
  assert.deepEqual(heads[2], { l: 2, h: 0, label: "L5H0" });
});

test("sliderStep gives about 400 round steps", () => {
  assert.equal(sliderStep(0, 0.2), 0.0005);
  assert.equal(sliderStep(0, 1), 0.005);
  assert.equal(sliderStep(0.3, 0.3), 0.001);
});

test("graphScene: one node per head, edges carrying the pair and its raw score, a threshold mark", async () => {
  const { graphScene } = await import("../lib/graph-scene.js");
  const { makeScale } = await import("../lib/scales.js");
  const { sceneToSVG } = await import("../lib/scene.js");
  const theme = { fg: "#000", muted: "#555", border: "#ccc", accent: "#f00", bgCss: "#fff", font: "sans-serif", dark: false };
  const L = 2,
    H = 2;
  const values = scores(1, L, H, (_k, _l1, h1, _l2, h2) => (h1 === 1 && h2 === 0 ? 0.4 : 0.05));
  const out = graphScene({
    values,
    k: 0,
    L,
    H,
    layerLabels: [0, 1],
    kind: "K",
    corrected: false,
    threshold: 0.2,
    offset: 0,
    baseline: 0.1,
    scale: makeScale("sequential", { domain: [0, 0.5] }),
    theme,
    selected: { l: 1, h: 0 },
    pair: null,
    hover: null,
    maxWidth: 600,
  });
  assert.deepEqual([out.shown, out.passing], [1, 1]);
  const svg = sceneToSVG(out.scene, "#fff");
  assert.equal((svg.match(/class="cw-node"/g) || []).length, L * H);
  const edge = /<path [^>]*class="cw-edge" data-edge="0,1,1,0" data-value="([^"]+)" data-raw="([^"]+)"/.exec(svg);
  assert.ok(edge && Math.abs(Number(edge[2]) - 0.4) < 1e-6, svg);
  assert.ok(svg.includes('class="cw-edge-hit" data-edge="0,1,1,0"'));
  assert.ok(svg.includes('class="cw-threshold-mark"') && svg.includes('class="cw-baseline-mark"'));
  assert.equal((svg.match(/<circle /g) || []).length, L * H); // the tests count nodes by their circles
});

test("composition text: a pair's score in the units shown, and the note's counts", async () => {
  const { noteText, pairText } = await import("../lib/composition-text.js");
  const name = (l, h) => `L${l}H${h}`;
  const p = { l1: 0, h1: 2, l2: 1, h2: 1 };
  assert.equal(pairText(p, 0.3, { kind: "K", corrected: false, base: 0.088, name }), "L0H2 → L1H1 · K-composition 0.3 (baseline 0.088)");
  assert.equal(
    pairText(p, 0.3, { kind: "V", corrected: true, base: 0.1, name }),
    "L0H2 → L1H1 · V-composition 0.2 (raw 0.3 − baseline 0.1)",
  );
  assert.match(pairText(p, NaN, { kind: "Q", corrected: false, base: 0.1, name }), /undefined/);
  assert.match(
    noteText({ corrected: true, base: 0.1, dModel: 64, graph: true, shown: 600, passing: 900 }),
    /^baseline-corrected .* 1\/√d_model = 0\.125\) · 600 of 900 pairs above the threshold drawn \(the strongest\)$/,
  );
  assert.match(noteText({ corrected: false, base: 0.1, dModel: 64, graph: false, shown: 1, passing: 1 }), /· 1 pair above the threshold$/);
  // one attention layer: no "0 of 0 pairs" but the reason
  assert.match(
    noteText({ corrected: false, base: 0.1, dModel: 64, graph: true, shown: 0, passing: 0, layers: 1 }),
    /^this model has one attention layer: .* nothing to draw$/,
  );
});
