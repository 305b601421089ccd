// No import circle among the modules of js/: each module stands above all that it imports
// (design.md: data flows one way). Reads the import statements as text, so it needs no bundler.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const JS = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Every .js / .mjs file under `dir`. */
function modules(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return modules(path);
    return /\.m?js$/.test(e.name) ? [path] : [];
  });
}

// `import … from "x"`, `export … from "x"` (one or several lines), `import "x"` and `import("x")`.
const STATIC = /^(?:import|export)\s+(?:[\w$*,{}\s]|\bas\b)*?\bfrom\s*["']([^"']+)["']/gm;
const BARE = /^import\s*["']([^"']+)["']/gm;
const DYNAMIC = /\bimport\(\s*["']([^"']+)["']\s*\)/g;

/** The relative specifiers that `source` imports. */
export function importsOf(source) {
  const found = [];
  for (const re of [STATIC, BARE, DYNAMIC]) for (const m of source.matchAll(re)) found.push(m[1]);
  return found.filter((s) => s.startsWith("./") || s.startsWith("../"));
}

/** One import circle of `graph` (Map: module -> modules it imports) as [a, b, …, a], or null. */
export function findCycle(graph) {
  const state = new Map(); // module -> "open" while on the path, "done" once all below it are seen
  const path = [];
  const visit = (m) => {
    if (state.get(m) === "done") return null;
    if (state.get(m) === "open") return [...path.slice(path.indexOf(m)), m];
    state.set(m, "open");
    path.push(m);
    for (const next of graph.get(m) || []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(m, "done");
    return null;
  };
  for (const m of graph.keys()) {
    const cycle = visit(m);
    if (cycle) return cycle;
  }
  return null;
}

test("findCycle finds a circle and passes a tree", () => {
  const circle = new Map([
    ["a", ["b"]],
    ["b", ["c"]],
    ["c", ["a"]],
  ]);
  assert.deepEqual(findCycle(circle), ["a", "b", "c", "a"]);
  const tree = new Map([
    ["a", ["b", "c"]],
    ["b", ["c"]],
    ["c", []],
  ]);
  assert.equal(findCycle(tree), null);
});

test("importsOf reads every form of import, on one line or several", () => {
  const source = [
    'import { a } from "./a.js";',
    "import {",
    "  b,",
    "  c as d,",
    '} from "../lib/b.js";',
    'export { e } from "./e.js";',
    'import "./side.js";',
    'const f = await import("./f.js");',
    'import assert from "node:assert/strict";',
    'export function g() { return "from ./nothing.js"; }',
  ].join("\n");
  assert.deepEqual(importsOf(source).sort(), ["../lib/b.js", "./a.js", "./e.js", "./f.js", "./side.js"]);
});

test("no import circle among the modules of js/", () => {
  const graph = new Map();
  for (const file of modules(JS)) {
    const targets = importsOf(readFileSync(file, "utf8")).map((s) => resolve(dirname(file), s));
    graph.set(file, targets);
  }
  const attention = graph.get(join(JS, "views", "attention.js"));
  assert.ok(attention?.includes(join(JS, "lib", "view.js")), "the import reader sees the views' imports");
  const cycle = findCycle(graph);
  assert.equal(cycle, null, `import circle: ${cycle?.map((f) => relative(JS, f)).join(" -> ")}`);
});
