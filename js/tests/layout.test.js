// Label thinning, heatmap geometry, hit-testing, token display, the scene and its SVG.
import assert from "node:assert/strict";
import { test } from "node:test";
import { heatmapScene, MIN_FIT_PX } from "../lib/heatmap-scene.js";
import { cellAt, displayToken, heatmapLayout, inlineToken, labelPositions, labelStride, quote, truncate } from "../lib/layout.js";
import { makeScale } from "../lib/scales.js";
import { sceneToSVG } from "../lib/scene.js";
import { theme } from "./fixtures.js";

const measure = (text) => 6.5 * Array.from(String(text)).length;

test("labelStride: every label when cells are tall enough, else 1-2-5 steps", () => {
  assert.equal(labelStride(20, 13), 1);
  assert.equal(labelStride(13, 13), 1);
  assert.equal(labelStride(8, 13), 2);
  assert.equal(labelStride(3, 13), 5);
  assert.equal(labelStride(0.55, 13), 50);
  assert.throws(() => labelStride(0, 13), RangeError);
  for (const cell of [0.3, 0.9, 2.2, 5, 12.9]) assert.ok(labelStride(cell, 13) * cell >= 13);
});

test("labelPositions", () => {
  assert.deepEqual(labelPositions(11, 5), [0, 5, 10]);
  assert.deepEqual(labelPositions(3, 1), [0, 1, 2]);
});

test("heatmapLayout keeps cells square, at most 28 px unless the plot would be under 160 px", () => {
  for (const n of [1, 4, 7, 64, 256, 1024]) {
    const l = heatmapLayout({ rows: n, cols: n });
    assert.equal(l.plotW, l.plotH);
    assert.ok(l.plotW <= 560 + 1e-9 && l.plotW >= 160 - 1e-9, `n=${n}: plot ${l.plotW}`);
    assert.ok(l.cell <= Math.max(28, 160 / n) + 1e-9, `n=${n}: cell ${l.cell}`);
  }
  assert.equal(heatmapLayout({ rows: 4, cols: 4 }).cell, 40);
  assert.equal(heatmapLayout({ rows: 1024, cols: 1024 }).cell, 560 / 1024);
  assert.throws(() => heatmapLayout({ rows: 0, cols: 3 }), RangeError);
});

test("heatmapScene fits maxWidth and maxHeight by smaller cells (labels and colour bar kept), never below MIN_FIT_PX", () => {
  const scale = makeScale("sequential", [0, 1]);
  const tokens = (n) => Array.from({ length: n }, (_, i) => `tok${i}`);
  const spec = (n, extra) => ({
    rows: n,
    cols: n,
    rowLabels: tokens(n),
    colLabels: tokens(n),
    scale,
    theme,
    yTitle: "destination (query) ↓",
    ...extra,
  });
  for (const n of [2, 4, 12, 48, 300]) {
    const free = heatmapScene(spec(n), measure);
    assert.deepEqual(heatmapScene(spec(n, { maxWidth: free.width, maxHeight: free.height }), measure).layout, free.layout);
    for (const [maxWidth, maxHeight] of [
      [free.width - 60, Infinity],
      [Infinity, free.height - 90],
      [390, 420],
      [240, 300],
    ]) {
      const fit = heatmapScene(spec(n, { maxWidth, maxHeight }), measure);
      const floor = Math.max(fit.layout.plotW, fit.layout.plotH) <= MIN_FIT_PX + 1e-9;
      assert.ok(
        floor || (fit.width <= maxWidth && fit.height <= maxHeight),
        `n=${n} in ${maxWidth}x${maxHeight}: ${fit.width}x${fit.height}`,
      );
      assert.ok(fit.layout.cell <= free.layout.cell + 1e-9);
      assert.equal(fit.layout.plotW, fit.layout.plotH); // square cells still
      assert.ok(fit.ops.some((op) => op.type === "bar")); // the colour bar is still drawn
    }
  }
  // a box too small for any readable picture: the floor, not a picture of a few pixels
  const tiny = heatmapScene(spec(48, { maxWidth: 50, maxHeight: 50 }), measure);
  assert.equal(Math.round(tiny.layout.plotW), MIN_FIT_PX);
});

test("cellAt inverts the layout and is null outside", () => {
  const l = heatmapLayout({ rows: 10, cols: 10 });
  assert.deepEqual(cellAt(l, 10, 10, l.left + 2.5 * l.cell, l.top + 7.5 * l.cell), { row: 7, col: 2 });
  assert.equal(cellAt(l, 10, 10, l.left - 1, l.top + 1), null);
  assert.equal(cellAt(l, 10, 10, l.left + 1, l.top + l.plotH + 1), null);
});

test("tokens are shown with visible whitespace and escaped control characters", () => {
  assert.equal(displayToken(" the"), "\u2423the");
  assert.equal(displayToken("a\nb"), "a\u21b5b");
  assert.equal(displayToken("\u0007"), "\\x07");
  assert.equal(displayToken(""), "\u2205");
  assert.equal(inlineToken(" the"), " the");
  assert.equal(truncate("abcdef", 4), "abc\u2026");
  assert.equal(truncate("😀😀😀", 3), "😀😀😀");
  assert.equal(quote(" the"), "“\u2423the”");
  assert.equal(quote("abcdefghij", 4), "“abc\u2026”");
});

function labelOps(scene, rotated) {
  return scene.ops.filter(
    (op) => op.type === "text" && !!op.rotate === rotated && op.baseline === "middle" && op.font.includes("monospace"),
  );
}

test("scene: all labels when they fit; picked, non-overlapping labels for long prompts", () => {
  const scale = makeScale("sequential");
  const short = heatmapScene(
    { rows: 12, cols: 12, rowLabels: [...Array(12).keys()].map((i) => `t${i}`), colLabels: [], scale, theme },
    measure,
  );
  assert.equal(labelOps(short, false).length, 12);
  for (const n of [64, 300, 1024]) {
    const labels = Array.from({ length: n }, (_, i) => `tok${i}`);
    const scene = heatmapScene({ rows: n, cols: n, rowLabels: labels, colLabels: labels, scale, theme }, measure);
    const rows = labelOps(scene, false);
    const cols = labelOps(scene, true);
    assert.ok(rows.length >= 20 && rows.length < n, `n=${n}: ${rows.length} row labels`);
    assert.equal(cols.length, rows.length);
    const ys = rows.map((op) => op.y);
    for (let i = 1; i < ys.length; i++) assert.ok(ys[i] - ys[i - 1] >= 13 - 1e-9, `labels overlap at n=${n}`);
    assert.equal(rows[0].text, "tok0");
    assert.equal(rows.at(-1).text, `tok${n - 1}`); // first and last, evenly spaced between
    assert.equal(scene.rowStride, Math.min(...scene.rowShown.slice(1).map((i, k) => i - scene.rowShown[k])));
  }
});

test("scene labels are cut to 14 characters; the SVG escapes token text", () => {
  const evil = "<img src=x onerror=alert(1)>";
  const scene = heatmapScene(
    { rows: 2, cols: 2, rowLabels: [evil, "a"], colLabels: [evil, "a"], title: "t & <b>", scale: makeScale("sequential"), theme },
    measure,
  );
  const label = labelOps(scene, false)[0].text;
  assert.equal(Array.from(label).length, 14);
  const svg = sceneToSVG(scene, theme.bgCss);
  assert.ok(svg.startsWith("<svg"));
  assert.ok(!svg.includes("<img") && !svg.includes("<b>"));
  assert.ok(svg.includes("&lt;img") && svg.includes("t &amp; &lt;b&gt;"));
});
