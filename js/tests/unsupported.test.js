// Controls the backend cannot serve: greyed with the reason, restored when it can again.
import assert from "node:assert/strict";
import { test } from "node:test";

import { greyOut, reasonLines } from "../lib/unsupported.js";

function control(name, title = "") {
  const classes = new Set();
  const attrs = {};
  return {
    dataset: { control: name },
    title,
    disabled: false,
    classList: { add: (c) => classes.add(c), remove: (c) => classes.delete(c), contains: (c) => classes.has(c) },
    setAttribute: (k, v) => (attrs[k] = v),
    removeAttribute: (k) => delete attrs[k],
    attrs,
  };
}

function root(...controls) {
  return { dataset: {}, querySelectorAll: (selector) => (selector === "[data-control]" ? controls : []) };
}

test("a control named in unsupported is disabled with the reason, the others untouched", () => {
  const toggle = control("ablated", "ablate the selected head");
  const method = control("ablation_method");
  const other = control("layer");
  const r = root(toggle, method, other);
  greyOut(r, { ablated: "running the model with hooks needs the weights here", ablation_method: "no hooks" });
  assert.equal(toggle.disabled, true);
  assert.equal(toggle.title, "running the model with hooks needs the weights here");
  assert.equal(toggle.attrs["aria-disabled"], "true");
  assert.equal(method.title, "no hooks");
  assert.equal(other.disabled, false);
  assert.equal(r.dataset.cwUnsupported, "ablated,ablation_method");
  greyOut(r, {}); // the backend can again (another model): the control and its own tooltip come back
  assert.equal(toggle.disabled, false);
  assert.equal(toggle.title, "ablate the selected head");
  assert.equal(toggle.attrs["aria-disabled"], undefined);
});

test("'*' greys every control of the view; the reasons read one a line", () => {
  const a = control("kind:induction");
  const b = control("layer");
  greyOut(root(a, b), { "*": "this view needs the weights here" });
  assert.equal(a.disabled && b.disabled, true);
  assert.deepEqual(reasonLines({ "*": "all of it", ablated: "no hooks" }), ["all of it", "ablated: no hooks"]);
  assert.deepEqual(reasonLines(undefined), []);
});
