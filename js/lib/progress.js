// The progress of a long computation in the kernel (a long prompt's first picture): a bar, what is
// being done ("layer 5 of 12, block 40 of 256") and a Cancel button, which stops the run within one
// block. Shown only while the widget's `progress` trait says the run is going.

import { h } from "./controls.js";

/** The progress row of view `v`, following its `progress` trait ({running, text, fraction}); `el` to place. */
export function progressRow(v) {
  const fill = h("div", { class: "cw-progress-fill" });
  const bar = h("div", { class: "cw-progress-bar", attrs: { role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100 } }, [fill]);
  const text = h("span", { class: "cw-progress-text" });
  const cancel = h("button", {
    class: "cw-button cw-progress-cancel",
    text: "Cancel",
    attrs: { type: "button", title: "stop this computation" },
  });
  cancel.addEventListener("click", () => {
    cancel.disabled = true;
    v.set({ cancel: (v.model.get("cancel") || 0) + 1 });
  });
  const el = h("div", { class: "cw-toolbar-row cw-progress", attrs: { "aria-live": "polite" } }, [bar, text, cancel]);
  const show = () => {
    const p = v.model.get("progress") || {};
    el.hidden = !p.running || v.standalone;
    const percent = Math.round(100 * Math.min(1, Math.max(0, p.fraction || 0)));
    fill.style.width = `${percent}%`;
    bar.setAttribute("aria-valuenow", String(percent));
    text.textContent = p.text ? `computing ${p.text}` : "computing…";
    if (!p.running) cancel.disabled = false;
  };
  v.on("change:progress", show);
  show();
  return { el };
}
