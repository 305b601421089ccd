// The drawing vocabulary: a scene rendered to SVG text (what export saves) and to a 2D context.
import assert from "node:assert/strict";
import { test } from "node:test";
import { barY, cellBox, cellValueOps, colourBar, diagonalOps, heatmapScene } from "../lib/heatmap-scene.js";
import { makeScale } from "../lib/scales.js";
import { composeScenes, drawScene, sceneToSVG, svgText, svgTree } from "../lib/scene.js";
import { theme } from "./fixtures.js";

const size = (svg) => {
  const m = /^<svg[^>]*\swidth="([\d.]+)"[^>]*\sheight="([\d.]+)"/.exec(svg);
  return m && { width: +m[1], height: +m[2] };
};

test("every op becomes its SVG element, geometry rounded to 2 decimals", () => {
  const scene = {
    width: 100,
    height: 50,
    ops: [
      {
        type: "text",
        x: 1.23456,
        y: 2,
        text: "hi",
        font: "600 12px Segoe UI",
        color: "#111",
        align: "right",
        baseline: "middle",
        rotate: -Math.PI / 2,
      },
      { type: "line", x1: 0, y1: 0, x2: 10, y2: 10, stroke: "#222", width: 1.5, dash: [3, 2] },
      { type: "rect", x: 1, y: 1, w: 5, h: 5, fill: "#333", alpha: 0.5 },
      { type: "circle", x: 5, y: 5, r: 2, stroke: "#444" },
      { type: "path", d: "M 0 0 l 1 1", fill: "#555", attrs: { class: "cw-mark", "data-x": 1 } },
      { type: "image", x: 0, y: 0, w: 10, h: 10, source: { toDataURL: () => "data:image/png;base64,AAAA" }, smooth: false },
    ],
  };
  const svg = sceneToSVG(scene, "white");
  assert.deepEqual(size(svg), { width: 100, height: 50 });
  assert.ok(svg.includes('<rect width="100%" height="100%" fill="white"/>'));
  assert.ok(svg.includes('x="1.23"') && svg.includes('font-weight="600"') && svg.includes('font-family="Segoe UI"'));
  assert.ok(svg.includes('text-anchor="end"') && svg.includes('dominant-baseline="central"') && svg.includes("rotate(-90 1.23 2)"));
  assert.ok(svg.includes('stroke-width="1.5"') && svg.includes('stroke-dasharray="3 2"'));
  assert.ok(svg.includes('fill="#333"') && svg.includes('opacity="0.5"'));
  assert.ok(svg.includes('<circle cx="5" cy="5" r="2" fill="none" stroke="#444"/>'));
  assert.ok(svg.includes('class="cw-mark" data-x="1"'));
  assert.ok(svg.includes('href="data:image/png;base64,AAAA"') && svg.includes("image-rendering:pixelated"));
});

test("text and attributes are escaped: token strings never become markup", () => {
  const evil = '<img src=x onerror="alert(1)">';
  const svg = sceneToSVG(
    { width: 10, height: 10, ops: [{ type: "text", x: 0, y: 0, text: evil, font: "11px a", color: '"><script>' }] },
    "#fff",
  );
  assert.ok(!svg.includes("<img") && !svg.includes("<script"));
  assert.ok(svg.includes("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"));
});

test("colour bars get unique gradient ids in <defs>", () => {
  const scale = makeScale("sequential");
  const bar = (x) => colourBar(scale, { x, y: 0, h: 100 }, theme);
  const svg = sceneToSVG({ width: 100, height: 100, ops: [...bar(0), ...bar(50)] });
  const ids = [...svg.matchAll(/linearGradient id="([^"]+)"/g)].map((m) => m[1]);
  assert.equal(ids.length, 2);
  assert.notEqual(ids[0], ids[1]);
  assert.ok(svg.indexOf("<defs>") < svg.indexOf(`url(#${ids[0]})`));
  assert.equal(barY([0, 1], { y: 10, h: 100 }, 1), 10);
  assert.equal(barY([0, 1], { y: 10, h: 100 }, -5), 110); // clamped to the bar
});

test("composeScenes puts scenes side by side as groups", () => {
  const a = { width: 30, height: 20, ops: [{ type: "rect", x: 0, y: 0, w: 1, h: 1, fill: "red" }] };
  const b = { width: 40, height: 50, ops: [] };
  const both = composeScenes([a, b], 10);
  assert.deepEqual([both.width, both.height], [80, 50]);
  const svg = sceneToSVG(both, "#fff");
  assert.ok(svg.includes('<g transform="translate(40 0)"'));
  assert.equal((svg.match(/xmlns=/g) || []).length, 1);
});

test("svgTree takes root attributes; svgText closes empty elements", () => {
  const tree = svgTree({ width: 5, height: 5, ops: [] }, { attrs: { class: "cw-comp-graph", role: "img" } });
  assert.equal(
    svgText(tree),
    '<svg xmlns="http://www.w3.org/2000/svg" width="5" height="5" viewBox="0 0 5 5" class="cw-comp-graph" role="img"/>',
  );
});

test("heatmap marks are ops of the scene, so PNG and SVG keep them", () => {
  const scene = heatmapScene(
    { rows: 3, cols: 3, scale: makeScale("diverging", { domain: [-1, 1] }), theme, marks: (layout) => diagonalOps(layout, 3, theme) },
    () => 10,
  );
  const diag = scene.ops.filter((op) => op.type === "rect" && op.alpha != null);
  assert.equal(diag.length, 3);
  const { left, top, cell } = scene.layout;
  assert.equal(diag[2].x, left + 2 * cell + 0.5);
  assert.ok(scene.layout.bar && scene.layout.bar.h >= 120);
  const box = cellBox(scene.layout, 1, 2, { color: "red", inset: 1 });
  assert.deepEqual([box.x, box.y, box.w], [left + 2 * cell + 1, top + cell + 1, cell - 2]);
});

test("cellValueOps writes each finite value at its cell's centre, readable on its colour", () => {
  const layout = { left: 10, top: 20, cell: 30 };
  const values = [
    [0.5, NaN],
    [-1, 1],
  ];
  const scale = makeScale("diverging", { domain: [-1, 1] });
  const ops = cellValueOps(layout, 2, 2, { value: (r, c) => values[r][c], text: (x) => x.toFixed(1), scale, theme });
  assert.deepEqual(
    ops.map((op) => [op.x, op.y, op.text]),
    [
      [25, 35, "0.5"],
      [25, 65, "-1.0"],
      [55, 65, "1.0"],
    ],
  );
  assert.ok(ops.every((op) => op.type === "text" && op.align === "center" && /^#|^rgb/.test(op.color)));
});

test("drawScene walks groups with their translation", () => {
  const calls = [];
  const ctx = new Proxy(
    {},
    {
      get: (target, name) => (name in target ? target[name] : (...args) => calls.push([name, ...args])),
      set: (target, name, value) => {
        target[name] = value;
        return true;
      },
    },
  );
  drawScene(ctx, {
    width: 10,
    height: 10,
    ops: [{ type: "group", x: 3, y: 4, ops: [{ type: "text", x: 1, y: 2, text: "a", font: "11px a", color: "#000" }] }],
  });
  const names = calls.map((c) => c[0]);
  assert.deepEqual(
    calls.filter((c) => c[0] === "translate"),
    [
      ["translate", 3, 4],
      ["translate", 1, 2],
    ],
  );
  assert.ok(names.includes("fillText"));
  assert.equal(names.filter((n) => n === "save").length, names.filter((n) => n === "restore").length);
});
