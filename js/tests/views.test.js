// Views register themselves: every js/views/*.js defines the view named like its file, and no
// view imports another. (Importing the views needs no DOM: they only draw when rendered.)
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { render, VIEWS } from "../lib/view.js";

const dir = join(dirname(fileURLToPath(import.meta.url)), "..", "views");
const files = readdirSync(dir).filter((f) => f.endsWith(".js"));

test("every view file registers the view of its name", async () => {
  for (const f of files) await import(join(dir, f));
  assert.deepEqual(Object.keys(VIEWS).sort(), files.map((f) => f.replace(/\.js$/, "")).sort());
  for (const [name, view] of Object.entries(VIEWS)) assert.equal(typeof view.render, "function", name);
});

test("no view imports another view", () => {
  for (const f of files) {
    const imports = [...readFileSync(join(dir, f), "utf8").matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]);
    assert.ok(
      imports.every((p) => p.startsWith("../lib/")),
      `${f} imports ${imports.filter((p) => !p.startsWith("../lib/"))}`,
    );
  }
});

test("render names a view the bundle does not have instead of leaving a blank cell", () => {
  const el = { textContent: "" };
  assert.equal(render({ model: { get: (name) => (name === "_cw_view" ? "nope" : undefined) }, el }), undefined);
  assert.match(el.textContent, /no view named "nope"/);
});
