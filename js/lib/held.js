// What an exported page holds. A view drawn from one layer's payload (attention patterns, OV, QK)
// that a link asks for another layer (a Dashboard's head scores, composition or attribution hold
// every layer) cannot compute it without a kernel: it hides its picture and says so in its place,
// so that the page never shows one layer's picture under another layer's selection.

import { h } from "./controls.js";

/** The held-layer check of view `v`: `held()` the layer its payload holds, `parts()` the elements of its picture. */
export function heldLayer(v, { held, parts, what }) {
  const note = h("div", { class: "cw-hint cw-held-note", attrs: { role: "status" } });
  note.hidden = true;
  const state = { stale: false };
  return {
    el: note,
    /** True when the page holds another layer than the one selected (the picture then hidden, the note shown). */
    get stale() {
      return state.stale;
    },
    check() {
      const wanted = v.model.get("layer");
      const layer = held();
      state.stale = v.standalone && layer != null && wanted != null && wanted !== layer;
      const only = `this page holds the ${what} of layer ${layer} only (select a head of layer ${layer}, or run the notebook)`;
      note.textContent = state.stale ? `Layer ${wanted} needs the kernel: ${only}` : "";
      note.hidden = !state.stale;
      for (const part of parts()) if (part) part.style.display = state.stale ? "none" : ""; // (their own `hidden` kept)
      const seen = `${wanted}:${state.stale}`;
      if (v.standalone && state.seen != null && state.seen !== seen) v.drawn("held"); // the marks (data-cw-layer, -held) follow
      state.seen = seen;
      return state.stale;
    },
  };
}
