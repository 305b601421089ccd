// Controls this model's backend cannot serve, greyed out with the backend's reason: the `unsupported` trait,
// {control: reason} (e.g. {"ablated": "running the model with hooks … needs the weights here"}). A view marks each
// control with data-control="<name>" (the trait it sets, or "kind:<name>" for one of several); "*" stands for the
// whole view. A greyed control is disabled, says why in its tooltip, and the reasons are written under the banner.

import { h } from "./controls.js";

/** The controls of `root` named in `unsupported`, greyed out (and any greyed before, not named now, restored). */
export function greyOut(root, unsupported) {
  const reasons = unsupported || {};
  const names = Object.keys(reasons).sort().join(",");
  if (!names && !root.dataset.cwUnsupported) return; // nothing greyed, nothing to grey
  for (const node of root.querySelectorAll("[data-control]")) {
    const reason = reasons[node.dataset.control] ?? reasons["*"];
    if (reason) {
      if (!node.classList.contains("cw-unsupported")) node.dataset.cwTitle = node.title || "";
      node.disabled = true;
      node.setAttribute("aria-disabled", "true");
      node.classList.add("cw-unsupported");
      node.title = reason;
    } else if (node.classList.contains("cw-unsupported")) {
      node.disabled = false;
      node.removeAttribute("aria-disabled");
      node.classList.remove("cw-unsupported");
      node.title = node.dataset.cwTitle || "";
    }
  }
  root.dataset.cwUnsupported = names;
}

/** The reasons as one line each ("<control>: <reason>"), in the order given. */
export function reasonLines(unsupported) {
  return Object.entries(unsupported || {}).map(([control, reason]) => (control === "*" ? reason : `${control}: ${reason}`));
}

/** Follow `unsupported` in view `v`: grey its controls after every draw and write the reasons under `banner`. */
export function unsupportedNote(v, banner) {
  const el = h("div", { class: "cw-hint cw-unsupported-note", attrs: { "aria-live": "polite" } });
  el.hidden = true;
  const show = () => {
    const unsupported = v.model.get("unsupported") || {};
    greyOut(v.root, unsupported);
    const lines = reasonLines(unsupported);
    if (!lines.length && !el.parentElement) return;
    if (!el.parentElement) {
      if (banner.parentElement) banner.after(el);
      else v.root.prepend(el);
    }
    el.textContent = lines.join("\n");
    el.hidden = !lines.length;
  };
  show();
  v.on("change:unsupported", show);
  v.root.addEventListener("cw-drawn", show); // (a redraw may make its controls anew)
  return show;
}
