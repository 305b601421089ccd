// The revision rule: a picture is drawn from payloads of one refresh only.
import assert from "node:assert/strict";
import { test } from "node:test";
import { agree, payloadReader, sameRevision } from "../lib/payloads.js";

test("agree: every payload present and on one revision", () => {
  assert.equal(agree([{ revision: 2 }, { revision: 2, data: 1 }]), true);
  assert.equal(agree([{ revision: 2 }, { revision: 3 }]), false);
  assert.equal(agree([{ revision: 2 }, undefined]), false);
  assert.equal(agree([{}]), true); // a widget's empty first state agrees with itself
  assert.equal(agree([]), false);
});

test("payloadReader keeps the last set that agreed while traits arrive one at a time", () => {
  const traits = { ov: { revision: 1, layer: 0 }, eigenvalues: { revision: 1, layer: 0 } };
  const read = payloadReader(["ov", "eigenvalues"], (name) => traits[name]);
  assert.equal(read().ov.layer, 0);
  traits.ov = { revision: 2, layer: 1 }; // marimo: the matrix of layer 1 arrives first ...
  const mid = read();
  assert.equal(mid.ov.layer, 0); // ... and the picture stays on layer 0, whole
  assert.equal(mid.eigenvalues.layer, 0);
  traits.eigenvalues = { revision: 2, layer: 1 }; // ... then its spectrum
  const after = read();
  assert.deepEqual([after.ov.layer, after.eigenvalues.layer], [1, 1]);
});

test("payloadReader gives null until a set agrees", () => {
  const traits = { a: { revision: 1 }, b: { revision: 2 } };
  assert.equal(payloadReader(["a", "b"], (n) => traits[n])(), null);
});

test("sameRevision: an optional payload is used only with the picture it belongs to", () => {
  assert.equal(sameRevision({ revision: 4, query: 1 }, { revision: 4 }), true);
  assert.equal(sameRevision({ revision: 3 }, { revision: 4 }), false);
  assert.equal(sameRevision(undefined, { revision: 4 }), false);
});

test("payloadReader hands back the same set until a payload changes", () => {
  const traits = { a: { revision: 1 }, b: { revision: 1 } };
  const read = payloadReader(["a", "b"], (n) => traits[n]);
  const first = read();
  assert.equal(read(), first);
  traits.a = { revision: 2 };
  assert.equal(read(), first); // half a refresh: nothing new to draw
  traits.b = { revision: 2 };
  assert.notEqual(read(), first);
});
