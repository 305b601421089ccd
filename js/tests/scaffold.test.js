// The view scaffold in a small stand-in DOM: root element and marks, keys, error banner, busy mark,
// payloads of one refresh, and a clean-up that leaves no listener behind.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StaticModel } from "../lib/host.js";
import { FakeElement, installFakeDom } from "./fixtures.js";

installFakeDom();
const { defineView } = await import("../lib/view.js");

const key = (key, target) => ({ type: "keydown", key, target, preventDefault() {}, stopPropagation() {} });
const listeners = (model) => [...model.handlers.values()].reduce((n, set) => n + set.size, 0);

test("a view gets a marked root, keys, errors, busy, payloads of one refresh, and a clean clean-up", () => {
  const seen = [];
  const view = defineView("probe", (v) => {
    v.root.append(v.banner, v.busyMark);
    v.onPayloads("a b", (set) => seen.push(set.a.revision));
    v.on("change:head", () => v.drawn("head"));
    return {
      draw: () => v.drawn("all"),
      keys: { ArrowRight: () => v.set({ head: v.model.get("head") + 1 }) },
      marks: () => ({ head: v.model.get("head"), compKind: "K" }),
    };
  });
  const model = new StaticModel({ head: 0, a: { revision: 1 }, b: { revision: 1 }, error: "", busy: true });
  model.standalone = false;
  const el = new FakeElement("div");
  const cleanup = view.render({ model, el });
  const root = el.children[0];
  assert.equal(root.className, "cw-root cw-probe");
  assert.equal(root.attrs["data-cw-kind"], "probe");
  assert.deepEqual([root.dataset.cwDraws, root.dataset.cwHead, root.dataset.cwCompKind], ["1", "0", "K"]);
  assert.equal(root.children[1].textContent, "computing…"); // the busy mark
  root.dispatchEvent(key("ArrowRight", root));
  assert.equal(model.get("head"), 1);
  assert.equal(root.dataset.cwDraws, "2");
  root.dispatchEvent(key("ArrowRight", new FakeElement("textarea"))); // typed in a text box: not ours
  assert.equal(model.get("head"), 1);
  model.set("a", { revision: 2 }); // half a refresh ...
  assert.deepEqual(seen, []);
  model.set("b", { revision: 2 }); // ... then all of it
  assert.deepEqual(seen, [2]);
  model.set("error", "bad layer");
  assert.equal(root.children[0].textContent, "bad layer");
  assert.equal(root.children[0].hidden, false);
  cleanup();
  assert.equal(listeners(model), 0);
  assert.equal(el.children.length, 0);
});

test("a handler that throws shows its error in the view; an exported page shows no busy mark", () => {
  const view = defineView("thrower", (v) => {
    v.root.append(v.banner, v.busyMark);
    v.on("change:head", () => {
      throw new Error("boom");
    });
  });
  const model = new StaticModel({ head: 0, busy: true });
  const el = new FakeElement("div");
  view.render({ model, el });
  const [banner, busy] = el.children[0].children;
  assert.equal(busy.hidden, true);
  const quiet = console.error;
  console.error = () => {};
  model.set("head", 1);
  console.error = quiet;
  assert.match(banner.textContent, /the thrower view failed: boom/);
});
