// A Dashboard's ablation controls: ablate or restore the selected head, clear all, the method, and
// what is ablated. The kernel checks every change (a bad one shows in the banner and is undone) and
// switches the Dashboard's children to the ablated model; each child says so in its own note.

import { button, h } from "../lib/controls.js";
import { defineView } from "../lib/view.js";

const METHODS = ["zero", "mean", "resample"];
const name = ([layer, head]) => `L${layer}H${head}`;

defineView("ablationtoggle", (v) => {
  const { model, standalone } = v;
  const heads = () => model.get("ablated") || [];
  const selected = () => [model.get("layer"), model.get("head")];
  const same = (a) => (b) => a[0] === b[0] && a[1] === b[1];

  const toggle = button("ablate", "ablate the selected head (again: restore it)", () => {
    const head = selected();
    const list = heads();
    v.set({ ablated: list.some(same(head)) ? list.filter((x) => !same(head)(x)) : [...list, head] });
  });
  toggle.classList.add("cw-abl-toggle");
  toggle.dataset.control = "ablated";
  const clear = button("clear all", "restore every ablated head", () => v.set({ ablated: [] }));
  clear.classList.add("cw-abl-clear");
  clear.dataset.control = "ablated";
  const method = h("select", {
    class: "cw-select cw-abl-method",
    attrs: { "aria-label": "ablation method", "data-control": "ablation_method" },
  });
  method.replaceChildren(...METHODS.map((m) => h("option", { value: m, text: m })));
  v.listen(method, "change", () => v.set({ ablation_method: method.value }));
  const methodField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Method" }), method]);
  const status = h("span", { class: "cw-abl-status", attrs: { "aria-live": "polite" } });
  const title = h("span", { class: "cw-abl-title", text: "Ablation" });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [title, toggle, clear, methodField, status, v.busyMark]);
  v.root.append(toolbar, v.banner);

  function draw() {
    const head = selected();
    const list = heads();
    const on = list.some(same(head));
    toggle.textContent = `${on ? "restore" : "ablate"} ${name(head)}`;
    toggle.setAttribute("aria-pressed", String(on));
    toggle.title = on ? `restore ${name(head)} (stop ablating it)` : `ablate ${name(head)}, the selected head`;
    toggle.disabled = standalone || Boolean(model.get("unsupported")?.ablated);
    clear.disabled = standalone || list.length === 0 || Boolean(model.get("unsupported")?.ablated);
    method.value = model.get("ablation_method") || "zero";
    method.disabled = standalone;
    const label = model.get("status")?.label;
    status.textContent = list.length
      ? `${label || list.map(name).join(", ")}: the views that run the model show it ablated`
      : "no head ablated: select a head, then ablate it";
    v.drawn("all");
  }

  v.on("change:ablated change:ablation_method change:layer change:head change:status", draw);
  return {
    draw,
    marks: () => ({ ablated: heads().map(name).join(","), method: model.get("ablation_method") }),
  };
});
