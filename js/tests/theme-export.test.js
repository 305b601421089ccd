// Theme detection (JupyterLab, VS Code, Colab, page, preference), the PNG scale, and the SVG rule
// for heatmap cells (vector rects up to 128 x 128, one 2x PNG image above).
import assert from "node:assert/strict";
import { test } from "node:test";
import { heatmapScene } from "../lib/heatmap-scene.js";
import { makeScale } from "../lib/scales.js";
import { SVG_CELLS_RULE, SVG_RASTER_SCALE, SVG_VECTOR_CELLS, sceneToSVG } from "../lib/scene.js";
import { DEFAULT_BG, detectTheme, parseColor } from "../lib/theme.js";
import { theme } from "./fixtures.js";

const WHITE = [255, 255, 255];
const DARK_PAGE = [17, 19, 24];

test("colours parse from hex and rgb() forms", () => {
  assert.deepEqual(parseColor("#1e1e1e"), { rgb: [30, 30, 30], alpha: 1 });
  assert.deepEqual(parseColor(" #fff "), { rgb: WHITE, alpha: 1 });
  assert.deepEqual(parseColor("#00000080").rgb, [0, 0, 0]);
  assert.ok(Math.abs(parseColor("#00000080").alpha - 0.5) < 0.01);
  assert.deepEqual(parseColor("rgba(1, 2, 3, 0)"), { rgb: [1, 2, 3], alpha: 0 });
  assert.deepEqual(parseColor("rgb(1 2 3 / 50%)"), { rgb: [1, 2, 3], alpha: 0.5 });
  assert.equal(parseColor("var(--x)"), null);
  assert.equal(parseColor(""), null);
});

test("JupyterLab comes first: its body flag beats VS Code, Colab and the preference", () => {
  const t = detectTheme({
    jpLight: "false",
    jpBackground: "#111111",
    bodyClasses: "vscode-light",
    colabTheme: "light",
    pageBackground: WHITE,
  });
  assert.deepEqual(t, { source: "jupyterlab", dark: true, bg: [17, 17, 17] });
  // the page's own background wins when it agrees (what the widget sits on)
  assert.deepEqual(detectTheme({ jpLight: "true", jpBackground: "#fafafa", pageBackground: WHITE }), {
    source: "jupyterlab",
    dark: false,
    bg: WHITE,
  });
  // variables alone (no flag): their luminance decides
  assert.equal(detectTheme({ jpBackground: "#222", prefersDark: false }).dark, true);
});

test("VS Code: body classes and --vscode-editor-background", () => {
  const dark = detectTheme({
    vscodeBackground: "#1e1e1e",
    bodyClasses: ["vscode-body", "vscode-dark"],
    pageBackground: WHITE,
    prefersDark: false,
  });
  assert.deepEqual(dark, { source: "vscode", dark: true, bg: [30, 30, 30] });
  const light = detectTheme({ vscodeBackground: "#ffffff", bodyClasses: "vscode-light", pageBackground: null, prefersDark: true });
  assert.deepEqual(light, { source: "vscode", dark: false, bg: WHITE });
  assert.equal(detectTheme({ bodyClasses: "vscode-high-contrast" }).dark, true);
  assert.equal(detectTheme({ bodyClasses: "vscode-high-contrast vscode-high-contrast-light", prefersDark: true }).dark, false);
  // the variable alone is enough; the class alone too (default background for it)
  assert.deepEqual(detectTheme({ vscodeBackground: "#252526", prefersDark: false }), { source: "vscode", dark: true, bg: [37, 37, 38] });
  assert.deepEqual(detectTheme({ bodyClasses: "vscode-dark", pageBackground: WHITE }), {
    source: "vscode",
    dark: true,
    bg: DEFAULT_BG.dark,
  });
});

test("Colab: html[theme] beats the page and the preference", () => {
  assert.deepEqual(detectTheme({ colabTheme: "dark", pageBackground: WHITE, prefersDark: false }), {
    source: "colab",
    dark: true,
    bg: DEFAULT_BG.dark,
  });
  assert.deepEqual(detectTheme({ colabTheme: "light", pageBackground: DARK_PAGE, prefersDark: true }), {
    source: "colab",
    dark: false,
    bg: WHITE,
  });
  assert.deepEqual(detectTheme({ colabTheme: "dark", pageBackground: [56, 56, 56] }).bg, [56, 56, 56]);
  assert.equal(detectTheme({ colabTheme: "unknown", pageBackground: WHITE, prefersDark: true }).source, "page");
});

test("fallbacks last: the page's background, then prefers-color-scheme", () => {
  assert.deepEqual(detectTheme({ pageBackground: DARK_PAGE, prefersDark: false }), { source: "page", dark: true, bg: DARK_PAGE });
  assert.deepEqual(detectTheme({ prefersDark: true }), { source: "preference", dark: true, bg: DEFAULT_BG.dark });
  assert.deepEqual(detectTheme({}), { source: "preference", dark: false, bg: WHITE });
});

// ----- SVG heatmap cells --------------------------------------------------------------------

/** A canvas-like source of rows x cols cells, colour of cell (r, c) from `colour(r, c)`. */
function cellSource(rows, cols, colour) {
  const data = new Uint8ClampedArray(rows * cols * 4);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) data.set(colour(r, c), (r * cols + c) * 4);
  return {
    width: cols,
    height: rows,
    getContext: () => ({ getImageData: () => ({ data }) }),
    toDataURL: () => "data:image/png;base64,NATIVE",
  };
}

const measure = (text) => 6 * String(text).length;
const scene = (n, cells) => heatmapScene({ rows: n, cols: n, cells, scale: makeScale("sequential"), theme, title: "t" }, measure);

test(`SVG: up to ${SVG_VECTOR_CELLS} cells the heatmap is vector rects, equal neighbours merged`, () => {
  assert.equal(SVG_VECTOR_CELLS, 128 * 128);
  assert.match(SVG_CELLS_RULE, /128 × 128 = 16 384 cells.*PNG image at 2×/);
  // 3 x 3: a causal mask (upper triangle transparent), distinct colours below
  const s3 = scene(
    3,
    cellSource(3, 3, (r, c) => (c > r ? [0, 0, 0, 0] : [10 * r, 20 * c, 200, c === 0 ? 128 : 255])),
  );
  const svg3 = sceneToSVG(s3, "white");
  assert.ok(svg3.includes('data-cells="3x3"') && svg3.includes('shape-rendering="crispEdges"'));
  assert.ok(!svg3.includes("<image"), "no raster below the rule");
  const group = /<g class="cw-cells"[^>]*>([\s\S]*?)<\/g>/.exec(svg3)[1];
  const rects = [...group.matchAll(/<rect ([^>]*)\/>/g)].map((m) => m[1]);
  assert.equal(rects.length, 6, "transparent cells are left out");
  assert.ok(
    rects.some((r) => r.includes('fill="#1428c8"')),
    "cell (1, 1) keeps its exact colour",
  );
  assert.ok(
    rects.some((r) => r.includes('fill-opacity="0.5"')),
    "alpha becomes fill-opacity",
  );
  const { left, top, cell } = s3.layout;
  assert.ok(rects[0].startsWith(`x="${+left.toFixed(2)}" y="${+top.toFixed(2)}" width="${+cell.toFixed(2)}"`));
  // exactly at the rule: 128 x 128, rows of one colour merge into one rect per row
  const s128 = scene(
    128,
    cellSource(128, 128, (r) => [r, 0, 0, 255]),
  );
  const svg128 = sceneToSVG(s128, "white");
  assert.ok(svg128.includes('data-cells="128x128"') && !svg128.includes("<image"));
  assert.equal((/<g class="cw-cells"[^>]*>([\s\S]*?)<\/g>/.exec(svg128)[1].match(/<rect /g) || []).length, 128);
  const checker = sceneToSVG(
    scene(
      128,
      cellSource(128, 128, (r, c) => [(r + c) % 2 ? 255 : 0, 0, 0, 255]),
    ),
    "white",
  );
  assert.equal((/<g class="cw-cells"[^>]*>([\s\S]*?)<\/g>/.exec(checker)[1].match(/<rect /g) || []).length, 128 * 128);
});

test("SVG: above the rule the heatmap is one PNG image drawn at 2x the plot's size", () => {
  const made = [];
  globalThis.document = {
    createElement: (tag) => {
      const canvas = {
        tag,
        width: 0,
        height: 0,
        drawn: [],
        getContext: () => ({ drawImage: (...args) => canvas.drawn.push(args) }),
        toDataURL: () => `data:image/png;base64,AT${canvas.width}x${canvas.height}`,
      };
      made.push(canvas);
      return canvas;
    },
  };
  try {
    for (const [rows, cols] of [
      [129, 128],
      [1024, 1024],
    ]) {
      const s = heatmapScene(
        { rows, cols, cells: cellSource(rows, cols, () => [1, 2, 3, 255]), scale: makeScale("sequential"), theme },
        measure,
      );
      const svg = sceneToSVG(s, "white");
      const { plotW, plotH, left, top } = s.layout;
      const w = Math.round(plotW * SVG_RASTER_SCALE);
      const h = Math.round(plotH * SVG_RASTER_SCALE);
      assert.ok(!svg.includes('class="cw-cells"'), `${rows}x${cols}: no vector cells`);
      assert.ok(svg.includes(`href="data:image/png;base64,AT${w}x${h}"`), `${rows}x${cols}: one image at 2x`);
      assert.ok(
        svg.includes(`<image x="${+left.toFixed(2)}" y="${+top.toFixed(2)}" width="${+plotW.toFixed(2)}" height="${+plotH.toFixed(2)}"`),
      );
      assert.ok(svg.includes(`data-cells="${rows}x${cols}"`));
      assert.equal((svg.match(/<image /g) || []).length, 1);
      const canvas = made.at(-1);
      assert.deepEqual(canvas.drawn[0].slice(1), [0, 0, w, h]);
    }
  } finally {
    delete globalThis.document;
  }
});

test("an image that is not heatmap cells is embedded as it is", () => {
  const svg = sceneToSVG({
    width: 10,
    height: 10,
    ops: [{ type: "image", x: 0, y: 0, w: 10, h: 10, source: cellSource(2, 2, () => [0, 0, 0, 255]) }],
  });
  assert.ok(svg.includes("NATIVE"));
});

test("a PNG is saved at the screen's pixel ratio, at least 2x", async () => {
  globalThis.document ??= { createElement: () => ({}) };
  const { pngScale } = await import("../lib/save.js");
  assert.equal(pngScale(1), 2);
  assert.equal(pngScale(undefined), 2);
  assert.equal(pngScale(1.5), 2);
  assert.equal(pngScale(3), 3);
  assert.equal(pngScale(2.625), 2.625);
});
