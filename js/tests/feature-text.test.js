// The feature attention view's words: a feature is named by its label (else its index), a pair bar by both
// features (with its source in a row split, its out in the OV panel), a term by its name.
import assert from "node:assert/strict";
import { test } from "node:test";
import { barText, extent, featureName } from "../lib/feature-text.js";

const features = {
  "query:3": { id: 3, label: "current token = 'c'" },
  "key:7": { id: 7, label: "" },
  "source:3": { id: 3, label: "current token = 'c'" },
};

test("a feature is its label after its index, or its index alone", () => {
  assert.equal(featureName(features["query:3"]), "#3 current token = 'c'");
  assert.equal(featureName(features["key:7"]), "#7");
  assert.equal(featureName(undefined), "?");
});

test("a pair bar names both features; in a row its source, in the OV panel its out; a term its name", () => {
  assert.equal(barText({ kind: "pair", features: ["query:3", "key:7"] }, features), "#3 current token = 'c' × #7");
  assert.equal(
    barText({ kind: "pair", features: ["query:3", "key:7"], source: 5, source_text: "a" }, features),
    "#3 current token = 'c' × #7 @ 5 “a”",
  );
  assert.equal(barText({ kind: "pair", features: ["source:3"], output: "logit 'a'" }, features), "#3 current token = 'c' → logit 'a'");
  assert.equal(barText({ kind: "term", label: "error × error" }, features), "error × error");
  assert.equal(barText({ kind: "rest" }, features), "rest");
});

test("a list's extent is its largest magnitude, never 0 (a bar's width divides by it)", () => {
  assert.equal(extent([1, -3, 2]), 3);
  assert.equal(extent([0, 0]), 1e-9);
  assert.equal(extent([Number.NaN, 2]), 2);
});
