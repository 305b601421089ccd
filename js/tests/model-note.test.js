// The model note every view shows (lib/note.js, mounted by the view scaffold): a caption from the
// `model_note` trait under the error banner, text only, following the trait; absent when never set.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StaticModel } from "../lib/host.js";
import { FakeElement, installFakeDom } from "./fixtures.js";

installFakeDom();
const { defineView } = await import("../lib/view.js");

const view = defineView("noteprobe", (v) => {
  v.root.append(h("toolbar"), v.banner, h("picture"));
  return { draw: () => v.drawn("all") };
});
function h(tag) {
  return new FakeElement(tag);
}
const mount = (state) => {
  const model = new StaticModel({ error: "", busy: false, ...state });
  const el = new FakeElement("div");
  const cleanup = view.render({ model, el });
  return { model, root: el.children[0], cleanup };
};
const tags = (root) => root.children.map((c) => (c.className.includes("cw-model-note") ? "note" : c.tag));

test("a view whose model_note was never set has no note element", () => {
  const { model, root, cleanup } = mount({});
  assert.deepEqual(tags(root), ["toolbar", "div", "picture"]); // toolbar, banner, picture
  model.set("model_note", "");
  assert.deepEqual(tags(root), ["toolbar", "div", "picture"]);
  cleanup();
});

test("the note shows under the banner, follows the trait, and hides when cleared", () => {
  const { model, root, cleanup } = mount({ model_note: "L1H0, L1H2 zero-ablated" });
  assert.deepEqual(tags(root), ["toolbar", "div", "note", "picture"]);
  const note = root.children[2];
  assert.equal(note.textContent, "L1H0, L1H2 zero-ablated");
  assert.equal(note.hidden, false);
  assert.equal(root.dataset.cwModelNote, "L1H0, L1H2 zero-ablated");
  model.set("model_note", "<b>not markup</b>"); // text only: set as textContent
  assert.equal(note.textContent, "<b>not markup</b>");
  model.set("model_note", "");
  assert.equal(note.hidden, true);
  assert.equal(root.dataset.cwModelNote, "");
  assert.equal(root.children.filter((c) => c === note).length, 1); // one element, reused
  cleanup();
  assert.equal(
    [...model.handlers.values()].reduce((n, set) => n + set.size, 0),
    0,
  );
});

test("a picture drawn under hooks says so beside the model note, and the note goes when the hooks do", () => {
  const { model, root, cleanup } = mount({});
  model.set("hooks_note", "drawn under hooks: blocks.0.attn.hook_pattern");
  assert.deepEqual(tags(root), ["toolbar", "div", "note", "picture"]);
  const note = root.children[2];
  assert.equal(note.textContent, "drawn under hooks: blocks.0.attn.hook_pattern");
  model.set("model_note", "L1H0 zero-ablated");
  assert.equal(note.textContent, "L1H0 zero-ablated · drawn under hooks: blocks.0.attn.hook_pattern");
  model.set("hooks_note", "");
  assert.equal(note.textContent, "L1H0 zero-ablated");
  assert.equal(root.dataset.cwModelNote, "L1H0 zero-ablated");
  model.set("model_note", "");
  assert.equal(note.hidden, true);
  cleanup();
  assert.equal(
    [...model.handlers.values()].reduce((n, set) => n + set.size, 0),
    0,
  );
});
