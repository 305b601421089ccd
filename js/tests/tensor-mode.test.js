// Pieces of the views drawn from data given (AttentionPattern.from_tensors, ColoredTokens): a long
// non-causal pattern painted above its diagonal too, and the colour scale of token values.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CodeStack } from "../lib/decode.js";
import { paintWindow } from "../lib/lod.js";
import { legendStops, tokenScale } from "../views/tokens.js";

test("a non-causal overview is painted above the diagonal; a causal one is not", () => {
  const m = 8; // n = 32 tokens, factor 4
  const codes = Uint8Array.from({ length: m * m }, (_, k) => 10 + k); // full layout: every block distinct
  const stack = new CodeStack({ data: codes, dtype: "uint8", shape: [1, m, m], lo: 0, hi: 1, layout: "full", nan_code: 255 });
  const lut = Uint32Array.from({ length: 256 }, (_, c) => c + 1);
  const win = { r0: 0, c0: 0, size: 32 }; // step 1: 32 x 32 cells
  const pixels = new Uint32Array(32 * 32);
  paintWindow({ win, n: 32, stack, factor: 4, head: 0, lut, pixels, causal: false });
  assert.equal(pixels[0 * 32 + 31], 10 + 7 + 1); // row 0, col 31: block (0, 7)
  assert.equal(pixels[31 * 32 + 0], 10 + 56 + 1); // row 31, col 0: block (7, 0)
  paintWindow({ win, n: 32, stack, factor: 4, head: 0, lut, pixels });
  assert.equal(pixels[0 * 32 + 31], 0); // causal (the default): nothing above the diagonal
  assert.equal(pixels[31 * 32 + 0], 10 + 56 + 1);
});

test("token values: sequential from lo when lo >= 0, diverging around 0 with each side on its own end", () => {
  const seq = tokenScale([0, 2]);
  assert.equal(seq.kind, "sequential");
  assert.deepEqual(seq.rgb(2), seq.rgb(5)); // clamped at hi
  assert.notDeepEqual(seq.rgb(0), seq.rgb(1));
  const div = tokenScale([-1, 4]);
  assert.equal(div.kind, "diverging");
  const ends = tokenScale([-1, 1]);
  assert.deepEqual(div.rgb(-1), ends.rgb(-1)); // the negative end colour at lo
  assert.deepEqual(div.rgb(4), ends.rgb(1)); // the positive end colour at hi
  assert.deepEqual(div.rgb(0), ends.rgb(0)); // neutral at 0
  assert.deepEqual(div.rgb(2), ends.rgb(0.5));
  assert.deepEqual(tokenScale([-3, 0]).rgb(1), ends.rgb(0)); // no positive side: positives stay neutral
  assert.ok(div.css(-0.5).startsWith("rgb("));
  assert.deepEqual(tokenScale([0, 1], true).rgb(0), tokenScale([0, 1], true).rgb(-1));
});

test("the legend's stops run from lo to hi and hold 0 when the range spans it", () => {
  assert.deepEqual(legendStops([0, 8], 5), [0, 2, 4, 6, 8]);
  const stops = legendStops([-1, 2], 3);
  assert.deepEqual(stops, [-1, 0, 0.5, 2]);
});
