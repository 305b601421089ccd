// The model note of every view: a caption about the model shown (e.g. "L1H0, L1H2 zero-ablated", a
// Dashboard's ablation), from the `model_note` trait, placed under the error banner. Text only
// (textContent). A view whose note was never set gets no element at all.

import { h } from "./controls.js";

/** Show `model_note` in `v.root` (after `banner` when the view placed it), following its changes. */
export function modelNote(v, banner) {
  const el = h("div", { class: "cw-hint cw-model-note", attrs: { "aria-live": "polite" }, style: { margin: "2px 0 4px" } });
  const show = () => {
    const text = v.model.get("model_note") || "";
    if (!text && !el.parentElement) return;
    if (!el.parentElement) {
      if (banner.parentElement) banner.after(el);
      else v.root.prepend(el);
    }
    el.textContent = text;
    el.hidden = !text;
    v.root.dataset.cwModelNote = text;
  };
  show();
  v.on("change:model_note", show);
  return el;
}
