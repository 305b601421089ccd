// The one bundle every circuitwidgets widget loads. `render` draws the view named by the model's
// `_kind` trait; `mountStandalone` renders saved widgets on an exported HTML page (no kernel).
// A new widget view: add its module to VIEWS.

import * as attention from "./views/attention.js";
import * as composition from "./views/composition.js";
import * as headscores from "./views/headscores.js";
import * as ov from "./views/ov.js";
import * as qk from "./views/qk.js";
import { mountStandalone as mount } from "./lib/host.js";

export const VIEWS = { attention, composition, headscores, ov, qk };

function render({ model, el }) {
  const kind = model.get("_kind");
  const view = VIEWS[kind];
  if (!view) {
    el.textContent = `circuitwidgets: no view named ${JSON.stringify(kind)} in this bundle (reinstall the package?)`;
    return undefined;
  }
  try {
    return view.render({ model, el });
  } catch (err) {
    // Never leave a silent blank cell: say what broke.
    const box = document.createElement("pre");
    box.className = "cw-error";
    box.textContent = `circuitwidgets: the ${kind} view failed to draw: ${err && err.stack ? err.stack : err}`;
    el.append(box);
    return undefined;
  }
}

/** Render the widgets saved in an exported page into `container`. */
export function mountStandalone(container, payload) {
  return mount(container, payload, VIEWS);
}

export default { render };
