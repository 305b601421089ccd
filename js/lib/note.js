// The model note of every view: a caption about the model shown (e.g. "L1H0, L1H2 zero-ablated", a
// Dashboard's ablation), from the `model_note` trait, and "drawn under hooks: …" when the kernel drew
// the picture with hooks on the model (`hooks_note`), placed under the error banner. Text only
// (textContent). A view whose notes were never set gets no element at all.

import { h } from "./controls.js";

/** Show `model_note` and `hooks_note` in `v.root` (after `banner` when the view placed it), following their changes. */
export function modelNote(v, banner) {
  const el = h("div", { class: "cw-hint cw-model-note", attrs: { "aria-live": "polite" }, style: { margin: "2px 0 4px" } });
  const show = () => {
    const text = [v.model.get("model_note"), v.model.get("hooks_note")].filter(Boolean).join(" · ");
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
  v.on("change:model_note change:hooks_note", show);
  return el;
}
