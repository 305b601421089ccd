// Colour scales of attention pictures: payload `scale` meta read back (positions, weights, legend).
import assert from "node:assert/strict";
import { test } from "node:test";
import { colorScaleOf, COLOR_SCALES, timesUniform } from "../lib/color-scale.js";
import { CodeStack } from "../lib/decode.js";
import { colourBar } from "../lib/heatmap-scene.js";
import { makeScale } from "../lib/scales.js";

// As circuitwidgets.transport.color_scale makes them (n = 2000 tokens: log floor 1e-6).
const spec = (kind, extra = {}) => ({
  kind,
  floor: 1e-6,
  gamma: 0.5,
  relative_max: 4,
  his: [0.002, 0.5],
  row0: 0,
  step: 1,
  n: 2000,
  causal: true,
  ...extra,
});

test("every scale's position and value are inverse inside its range, and positions stay in [0, 1]", () => {
  for (const kind of COLOR_SCALES) {
    const c = colorScaleOf(spec(kind));
    for (const w of [1e-5, 5e-4, 0.0015, 0.002]) {
      const t = c.position(w, 999); // row 999 sees 1 000 sources
      assert.ok(t >= 0 && t <= 1, `${kind}: ${t}`);
      if (t > 0 && t < 1) assert.ok(Math.abs(c.value(t, 999) - w) <= 1e-9 + 1e-6 * w, `${kind} at ${w}`);
    }
    assert.equal(c.position(Number.NaN, 0), 0);
  }
});

test("a diffuse weight is far from the background on log, relative and auto, not on linear", () => {
  const w = 1 / 2000;
  assert.ok(colorScaleOf(spec("linear")).position(w, 1999) < 0.001);
  assert.ok(colorScaleOf(spec("log")).position(w, 1999) > 0.4);
  assert.equal(colorScaleOf(spec("relative")).position(w, 1999), 0.25); // 1x uniform of a 4x top
  assert.equal(colorScaleOf(spec("auto"), 0).position(w, 1999), 0.25); // head 0's top 0.002
  assert.equal(colorScaleOf(spec("auto"), 1).position(w, 1999), 0.001); // head 1's top 0.5
});

test("the legend names the scale and its ticks rise from 0 to 1", () => {
  const captions = {};
  for (const kind of COLOR_SCALES) {
    const c = colorScaleOf(spec(kind));
    captions[kind] = c.caption;
    const ts = c.ticks.map(([t]) => t);
    assert.ok(
      ts.every((t, i) => t >= 0 && t <= 1 + 1e-12 && (i === 0 || Math.abs(t - ts[i - 1]) > 1e-9)),
      `${kind}: ${ts}`,
    );
  }
  assert.deepEqual(captions, { linear: "", auto: "auto", log: "log", power: "power 0.5", relative: "× uniform" });
  assert.deepEqual(
    colorScaleOf(spec("log")).ticks.map(([, label]) => label),
    ["1", "0.1", "0.01", "0.001", "1e-4", "1e-5", "1e-6"],
  );
  assert.deepEqual(
    colorScaleOf(spec("log", { floor: 1e-8 })).ticks.map(([, label]) => label),
    ["1", "0.01", "1e-4", "1e-6", "1e-8"],
  );
  assert.deepEqual(colorScaleOf(spec("relative")).ticks.at(-1), [1, "4×"]);
  const c = colorScaleOf(spec("log"));
  const ops = colourBar(
    makeScale("sequential", { ticks: c.ticks, caption: c.caption }),
    { x: 0, y: 20, h: 100 },
    { border: "#000", muted: "#666", font: "sans" },
  );
  const texts = ops.filter((op) => op.type === "text").map((op) => op.text);
  assert.deepEqual(texts, ["1", "0.1", "0.01", "0.001", "1e-4", "1e-5", "1e-6", "log"]);
});

test("codes of positions read back as weights, pooled rows by their last row", () => {
  // one 2 x 2 matrix pooled over 2 x 2 from row 4: each cell row stands for rows 5 and 7 (6 and 8 sources)
  const s = spec("relative", { row0: 4, step: 2, n: 8 });
  const stack = new CodeStack({
    dtype: "uint8",
    data: new Uint8Array([127, 0, 254, 254]),
    shape: [1, 2, 2],
    lo: 0,
    hi: 1,
    layout: "full",
    scale: s,
  });
  assert.ok(Math.abs(stack.value(0, 0, 0) - (0.5 * 4) / 6) < 1e-3);
  assert.ok(Math.abs(stack.value(0, 1, 1) - 4 / 8) < 1e-9);
  assert.deepEqual(Array.from(stack.rowValues(0, 1)), [0.5, 0.5]);
  assert.equal(timesUniform(s, 0.25, 7), 2);
  const linear = new CodeStack({ dtype: "uint8", data: new Uint8Array([127]), shape: [1, 1, 1], lo: 0, hi: 1, scale: { kind: "linear" } });
  assert.equal(linear.value(0, 0, 0), 0.5);
});
