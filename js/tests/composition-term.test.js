// The words of a composition term: titles, axes and read-out names per kind, in the framework's words.
import assert from "node:assert/strict";
import { test } from "node:test";
import { termWords } from "../lib/composition-term.js";

const pair = [
  [0, 2],
  [1, 1],
];

test("K term: destination (query) rows, the token h1 moved into the source (key) as columns", () => {
  const w = termWords("K", pair);
  assert.equal(w.title, "K term L0H2 → L1H1 (attention logits)");
  assert.equal(w.yTitle, "destination (query) ↓");
  assert.match(w.axes, /^rows: destination \(query\) token · columns: the token L0H2 moved into the source \(key\) position$/);
  assert.equal(w.row, "destination (query)");
  assert.equal(w.col, "L0H2 moved into the source (key)");
  assert.equal(w.units, "attention logit");
  assert.match(w.positivity, /Σλ\/Σ\|λ\|/);
});

test("Q term: h1's token on the destination (query) side, source (key) columns", () => {
  const w = termWords("Q", pair);
  assert.equal(w.row, "L0H2 moved into the destination (query)");
  assert.equal(w.col, "source (key)");
  assert.equal(w.xTitle, "source (key) →");
  assert.match(w.axes, /destination \(query\) position · columns: source \(key\) token$/);
});

test("V term: the virtual head's full OV circuit, source x out, in logits, scored as copying", () => {
  const w = termWords("V", pair);
  assert.equal(w.title, "V term: virtual head L1H1·L0H2, full OV circuit");
  assert.deepEqual([w.yTitle, w.xTitle, w.row, w.col, w.units], ["source ↓", "out →", "source", "out", "logit"]);
  assert.match(w.positivity, /copying score/);
});

test("axis titles are short enough for the heatmap's label margin", () => {
  // heatmapScene gives axis titles at most 120 px; at 11 px about 20 characters fit
  for (const kind of ["Q", "K", "V"]) {
    const w = termWords(kind, pair);
    for (const t of [w.yTitle, w.xTitle]) assert.ok(t.length <= 21, `${kind}: ${t}`);
  }
});

test("without a pair the heads are named h1 and h2", () => {
  assert.equal(termWords("K", []).col, "h1 moved into the source (key)");
});
