// A notebook as one static page (`python -m circuitwidgets page`): every widget output of the
// notebook mounted where the notebook showed it, over one set of saved models, so that a widget
// shown twice is one model and ipywidgets' jslink / jsdlink links work across cells.

import { decodeState, StaticModel } from "./host.js";

/**
 * Mount the widget outputs of a notebook page. Every element under `root` with
 * `data-cw-output="k"` receives `payload.outputs[k]`, a tree of {widget: i},
 * {box: "vbox" | "hbox", children: [...]}, {box: "grid", columns: "<CSS grid-template-columns>", children},
 * {box: "details", title, open, children} (folded) and {text: "..."} nodes (text only, never markup);
 * a box may name its own `class` ("cw-..." only). An exported page (save_html) is one such output.
 * payload: {widgets: [state, ...], outputs: [...], links?: [[[i, name], [j, name]], ...] (both
 * ways), dlinks?: [...] (first to second only)}. Returns {models, cleanup}.
 */
export function mountPage(root, payload, render) {
  const models = payload.widgets.map((state) => new StaticModel(decodeState(state)));
  const cleanups = [];
  const build = (node, parent) => {
    if (node && typeof node.widget === "number") {
      if (node.widget < 0 || node.widget >= models.length) return;
      const item = document.createElement("div");
      item.className = "cw-export-item";
      parent.append(item);
      const cleanup = render({ model: models[node.widget], el: item });
      if (typeof cleanup === "function") cleanups.push(cleanup);
    } else if (node && typeof node.text === "string") {
      const p = document.createElement("div");
      p.className = "cw-export-text";
      p.textContent = node.text;
      parent.append(p);
    } else if (node && node.box === "details" && Array.isArray(node.children)) {
      // a folded row (an Accordion's child): its views draw when it is opened (they follow their width)
      const box = document.createElement("details");
      box.className = "cw-export-details";
      box.open = node.open === true;
      const summary = document.createElement("summary");
      summary.textContent = String(node.title ?? "");
      const inner = document.createElement("div");
      inner.className = "cw-export-vbox";
      box.append(summary, inner);
      parent.append(box);
      for (const child of node.children) build(child, inner);
    } else if (node && Array.isArray(node.children)) {
      const box = document.createElement("div");
      box.className = { hbox: "cw-export-hbox", grid: "cw-export-grid" }[node.box] ?? "cw-export-vbox";
      // a GridBox's columns (a CSS value set through the style object: never markup, never a URL)
      if (node.box === "grid" && typeof node.columns === "string" && !/url|["'\\]/i.test(node.columns)) {
        box.style.gridTemplateColumns = node.columns;
      }
      if (typeof node.class === "string") box.classList.add(...node.class.split(/\s+/).filter((c) => /^cw-[\w-]+$/.test(c)));
      parent.append(box);
      for (const child of node.children) build(child, box);
    }
  };
  for (const el of root.querySelectorAll("[data-cw-output]")) {
    build(payload.outputs[Number(el.dataset.cwOutput)], el);
  }
  const follow = ([i, a], [j, b]) => {
    if (models[i] && models[j]) models[i].on(`change:${a}`, () => models[j].set(b, models[i].get(a)));
  };
  for (const [one, two] of payload.links || []) {
    follow(one, two);
    follow(two, one);
  }
  for (const [source, target] of payload.dlinks || []) follow(source, target);
  return {
    models,
    cleanup: () => {
      for (const fn of cleanups) fn();
    },
  };
}
