// Causal read-outs: the exact values a Patching widget in attribution mode checked, and the words of the
// composition diagram's causal edges (what was computed, what the colour is, what is missing).
import assert from "node:assert/strict";
import { test } from "node:test";
import { causalNoteText, causalPairText } from "../lib/composition-text.js";
import { verifiedValue } from "../lib/verified.js";

const name = (l, h) => `L${l}H${h}`;

test("a verified head's exact value is read for its layer and head, by position at its position", () => {
  const whole = {
    heads: [
      [0, 1],
      [1, 2],
    ],
    values: [3.5, 2.25],
    normalised: [0.1, 0.75],
  };
  assert.deepEqual(verifiedValue(whole, 1, 2), { value: 2.25, normalised: 0.75 });
  assert.equal(verifiedValue(whole, 1, 1), null); // not checked
  assert.equal(verifiedValue(whole, 2, 1), null);
  const byPosition = { heads: [[1, 0]], values: [[4, 5, 6]], normalised: [[0, 0.5, null]] };
  assert.deepEqual(verifiedValue(byPosition, 1, 0, 1), { value: 5, normalised: 0.5 });
  assert.ok(Number.isNaN(verifiedValue(byPosition, 1, 0, 2).normalised)); // not normalisable: NaN, never 0
  assert.equal(verifiedValue(byPosition, 1, 0), null); // a row without a position has no one value
  assert.equal(verifiedValue({}, 0, 0), null);
  assert.equal(verifiedValue(null, 0, 0), null);
});

test("a causal edge reads its normalised effect, the metric's change and its weight score", () => {
  const text = causalPairText(
    { l1: 0, h1: 1, l2: 1, h2: 2 },
    { value: 0.4213, effect: -1.234, raw: 0.183, kind: "K", metric: "next-token loss", name },
  );
  assert.match(
    text,
    /^L0H1 → L1H2 · K path: carries 0\.421 of the clean − corrupted difference \(next-token loss -1\.234\) · K-composition 0\.183 \(weights\)$/,
  );
  const up = causalPairText(
    { l1: 0, h1: 0, l2: 1, h2: 0 },
    { value: 0.1, effect: 0.5, raw: Number.NaN, kind: "V", metric: "logit difference", name },
  );
  assert.match(up, /logit difference \+0\.5\)$/);
  const missing = causalPairText({ l1: 0, h1: 0, l2: 2, h2: 0 }, { value: Number.NaN, effect: Number.NaN, raw: 0.1, kind: "Q", name });
  assert.match(missing, /Q path not computed: select an edge of this layer pair · Q-composition 0\.1 \(weights\)/);
});

test("the causal note says what the colours are and which layer pairs were computed", () => {
  const note = causalNoteText({
    kind: "K",
    computed: { K: [[0, 1]], Q: [] },
    metric: "next-token loss",
    shown: 3,
    cleanValue: 0.5,
    corruptedValue: 4,
  });
  assert.match(note, /the corrupted run with each K edge's clean sender output reaching only the receiver's k input/);
  const noising = causalNoteText({
    kind: "V",
    computed: {},
    metric: "loss",
    shown: 1,
    cleanValue: 0,
    corruptedValue: 1,
    direction: "noising",
  });
  assert.match(noising, /the clean run with each V edge's corrupted sender output .*\(clean − patched\) \/ \(clean − corrupted\)/);
  assert.match(note, /\(patched − corrupted\) \/ \(clean − corrupted\) of the next-token loss \(clean 0\.5, corrupted 4\)/);
  assert.match(note, /layer pairs computed: 0→1 · 3 edges above the threshold$/);
  const none = causalNoteText({
    kind: "Q",
    computed: { K: [[0, 1]], Q: [] },
    metric: "loss",
    shown: 0,
    cleanValue: 1,
    corruptedValue: 1,
    reason: "the clean and corrupted prompts score the same",
  });
  assert.match(none, /no layer pair computed yet .* · the clean and corrupted prompts score the same$/);
});
