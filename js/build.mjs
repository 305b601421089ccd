// Bundle js/ into circuitwidgets/widgets/static/ (widgets.js + widgets.css) with esbuild.
//   node js/build.mjs              write the committed bundle
//   node js/build.mjs --out DIR    write elsewhere (tests/test_bundle.py compares the two)
// Each output starts with a SHA-256 of the sources, so a stale bundle is caught even without Node.
// Every js/views/*.js (a view registers itself) and js/views/*.css goes in: no list to keep.

import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const outArg = process.argv.indexOf("--out");
const outDir = outArg > 0 ? process.argv[outArg + 1] : join(root, "circuitwidgets", "widgets", "static");

/** js/ files that go into the bundle (tests excluded), sorted by path relative to js/. */
function sources(dir = here) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "tests" && entry.name !== "node_modules") out.push(...sources(path));
    } else if (/\.(m?js|css)$/.test(entry.name)) {
      out.push(path);
    }
  }
  return out.sort((a, b) => (relative(here, a) < relative(here, b) ? -1 : 1));
}

export function sourceHash() {
  const hash = createHash("sha256");
  for (const path of sources()) {
    hash.update(relative(here, path).split("\\").join("/"));
    hash.update("\0");
    hash.update(readFileSync(path));
    hash.update("\0");
  }
  return hash.digest("hex");
}

/** The entry modules, generated: index.js and style.css, then every view and its styles, by name. */
function entries() {
  const views = readdirSync(join(here, "views")).sort();
  const pick = (ext) => views.filter((name) => name.endsWith(ext)).map((name) => `./views/${name}`);
  const js = [
    ...pick(".js").map((path) => `import ${JSON.stringify(path)};`),
    'export * from "./index.js";',
    'export { default } from "./index.js";',
  ];
  const css = ["./style.css", ...pick(".css")].map((path) => `@import ${JSON.stringify(path)};`);
  return { js: js.join("\n"), css: css.join("\n") };
}

const banner = (kind) => {
  const [open, close] = kind === "js" ? ["//", ""] : ["/*", " */"];
  const built = `built by js/build.mjs with esbuild ${esbuild.version}; do not edit`;
  return `${open} circuitwidgets ${kind} bundle, ${built}. sources-sha256: ${sourceHash()}${close}`;
};

mkdirSync(outDir, { recursive: true });
const common = { absWorkingDir: root, bundle: true, write: false, legalComments: "none", logLevel: "error", charset: "utf8" };
const entry = entries();
const js = await esbuild.build({
  ...common,
  stdin: { contents: entry.js, resolveDir: here, sourcefile: "entry.js", loader: "js" },
  format: "esm",
  target: ["es2020"],
  minify: true, // every widget sends the bundle to the page: its size weighs on each first picture
  banner: { js: banner("js") },
});
const css = await esbuild.build({
  ...common,
  stdin: { contents: entry.css, resolveDir: here, sourcefile: "entry.css", loader: "css" },
  banner: { css: banner("css") },
});
writeFileSync(join(outDir, "widgets.js"), js.outputFiles[0].contents);
writeFileSync(join(outDir, "widgets.css"), css.outputFiles[0].contents);
console.log(`wrote ${relative(process.cwd(), join(outDir, "widgets.js"))} (${js.outputFiles[0].contents.length} bytes) and widgets.css`);
