// The one bundle every circuitwidgets widget loads. `render` draws the view named by the model's
// `_cw_view` trait; `mountStandalone` renders saved widgets on an exported HTML page (no kernel).
// build.mjs bundles this module with every view in js/views/ (each registers itself through
// defineView), so a new view is a new file there and nothing else.

import { mountStandalone as mount } from "./lib/host.js";
import { mountPage as mountNotebook } from "./lib/page.js";
import { render, VIEWS } from "./lib/view.js";

export { VIEWS };

/** Render the widgets saved in an exported page into `container`. */
export function mountStandalone(container, payload) {
  return mount(container, payload, render);
}

/** Render the widget outputs of a notebook page (`python -m circuitwidgets page`) in place. */
export function mountPage(root, payload) {
  return mountNotebook(root, payload, render);
}

export default { render };
