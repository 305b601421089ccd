// Toolbar of the composition diagram: kind (Q / K / V), raw or baseline-corrected units, the
// threshold slider and graph / matrix. The view owns the values; this only shows and reports them.

import { h } from "./controls.js";
import { sliderStep } from "./graph.js";
import { formatValue } from "./scales.js";

export const KINDS = ["Q", "K", "V"];
const KIND_TEXT = {
  Q: "Q-composition: the later head's queries read the earlier head's output",
  K: "K-composition: the later head's keys read it",
  V: "V-composition: its values read it (a virtual head)",
};

const EDGE_TEXT = {
  weights: "edges coloured by the weight-based composition score",
  causal: "edges coloured by their path-patching effect on the clean and corrupted prompts",
};

/**
 * The controls of view `v`; on: {kind(k), baseline(on), threshold(value), view(name), edges(name)} are called
 * on user input. `extras` go after a spacer. Returns {el, sync({kind, baseline, view, domain, threshold, edges,
 * causalReason})}: `causalReason` non-empty greys the causal button out with it.
 */
export function compositionControls(v, on, extras = []) {
  const kindButtons = KINDS.map((k) =>
    h("button", {
      class: "cw-button cw-seg",
      type: "button",
      text: k,
      title: KIND_TEXT[k],
      attrs: { "aria-pressed": "false", "data-kind": k },
      on: { click: () => on.kind(k) },
    }),
  );
  const kindGroup = h("span", { class: "cw-seg-group", attrs: { role: "group", "aria-label": "composition kind" } }, kindButtons);
  const edgeButtons = Object.keys(EDGE_TEXT).map((name) =>
    h("button", {
      class: "cw-button cw-seg",
      type: "button",
      text: name,
      title: EDGE_TEXT[name],
      attrs: { "aria-pressed": "false", "data-edges": name, ...(name === "causal" ? { "data-control": "edge_value" } : {}) },
      on: { click: () => on.edges?.(name) },
    }),
  );
  const edgeGroup = h("span", { class: "cw-seg-group", attrs: { role: "group", "aria-label": "edge values" } }, edgeButtons);
  const baselineBox = h("input", { type: "checkbox", attrs: { "aria-label": "baseline-corrected scores" } });
  v.listen(baselineBox, "change", () => on.baseline(baselineBox.checked));
  const baselineField = h("label", { class: "cw-field", title: "subtract what random matrices of these shapes already score" }, [
    baselineBox,
    h("span", { class: "cw-field-label", text: "minus baseline" }),
  ]);
  const slider = h("input", { type: "range", class: "cw-slider", attrs: { "aria-label": "threshold" } });
  const sliderText = h("span", { class: "cw-slider-value" });
  v.listen(slider, "input", () => {
    sliderText.textContent = formatValue(Number(slider.value), 3);
    on.threshold(Number(slider.value));
  });
  const thresholdField = h("label", { class: "cw-field", title: "hide pairs scoring below this" }, [
    h("span", { class: "cw-field-label", text: "threshold" }),
    slider,
    sliderText,
  ]);
  const viewSelect = h("select", { class: "cw-select", attrs: { "aria-label": "view" } }, [
    h("option", { value: "graph", text: "graph" }),
    h("option", { value: "matrix", text: "matrix" }),
  ]);
  v.listen(viewSelect, "change", () => on.view(viewSelect.value));
  const viewField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "view" }), viewSelect]);
  const el = h("div", { class: "cw-toolbar-row" }, [
    kindGroup,
    edgeGroup,
    baselineField,
    thresholdField,
    viewField,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...extras,
  ]);
  return {
    el,
    sync({ kind, baseline, view, domain: [s0, s1], threshold, edges = "weights", causalReason = "" }) {
      for (const b of kindButtons) {
        b.classList.toggle("cw-seg-on", b.dataset.kind === kind);
        b.setAttribute("aria-pressed", b.dataset.kind === kind ? "true" : "false");
      }
      for (const b of edgeButtons) {
        b.classList.toggle("cw-seg-on", b.dataset.edges === edges);
        b.setAttribute("aria-pressed", b.dataset.edges === edges ? "true" : "false");
        if (b.dataset.edges === "causal") {
          b.disabled = !!causalReason;
          b.title = causalReason || EDGE_TEXT.causal;
        }
      }
      baselineBox.checked = !!baseline;
      baselineBox.disabled = edges === "causal"; // path-patching effects have no random baseline
      viewSelect.value = view;
      // the slider always reaches the threshold, even when it lies outside the scores' range
      const lo = Math.min(s0, threshold);
      const hi = Math.max(s1, threshold);
      slider.min = String(lo);
      slider.max = String(hi);
      slider.step = String(sliderStep(lo, hi));
      slider.value = String(threshold);
      sliderText.textContent = formatValue(threshold, 3);
    },
  };
}
