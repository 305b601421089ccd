// The caption under the composition scores: the kernel's words per kind (rotary positions left
// out for Q and K, the folded norms), shown as sent and only where there is a picture.
import assert from "node:assert/strict";
import { test } from "node:test";
import { noteText, scoresCaption } from "../lib/composition-text.js";

const rotary = (kind) =>
  "Rotary: the rotation of queries and keys by position is left out : it depends on their relative position, " +
  `so ${kind}-composition scores are of the unrotated W_Q and W_K (V-composition is unaffected).`;
const norm = "LayerNorm weights folded into W_Q, W_K, W_V and W_U (as fold_ln); its per-position scale is left out.";
const scores = { kinds: ["Q", "K", "V"], captions: { Q: `${rotary("Q")} ${norm}`, K: `${rotary("K")} ${norm}`, V: norm } };

test("the caption of each kind is the kernel's: rotary for Q and K, the norm note for all three", () => {
  for (const kind of ["Q", "K"]) {
    const caption = scoresCaption(scores, kind);
    assert.match(
      caption,
      new RegExp(`^Rotary: .* ${kind}-composition scores are of the unrotated W_Q and W_K \\(V-composition is unaffected\\)\\. LayerNorm`),
    );
    assert.ok(caption.endsWith(norm), caption);
  }
  assert.equal(scoresCaption(scores, "V"), norm);
  assert.doesNotMatch(scoresCaption(scores, "V"), /Rotary/);
});

test("no caption without one sent, for an unknown kind, or with nothing to draw", () => {
  assert.equal(scoresCaption({ kinds: ["Q", "K", "V"] }, "K"), "");
  assert.equal(scoresCaption({ captions: { K: "" } }, "K"), "");
  assert.equal(scoresCaption(null, "K"), "");
  assert.equal(scoresCaption(scores, "X"), "");
  assert.equal(scoresCaption({ captions: { K: 3 } }, "K"), "");
  assert.equal(scoresCaption(scores, "K", 1), ""); // one attention layer: the note says there is nothing to draw
});

test("the note itself is unchanged by the caption", () => {
  const note = noteText({ corrected: false, base: 0.1, dModel: 64, graph: true, shown: 1, passing: 1 });
  assert.doesNotMatch(note, /Rotary|LayerNorm/);
});
