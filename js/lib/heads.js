// Controls shared by the views of one head: the layer / head selects, arrow keys over heads.

import { h, indexOptions, numberOptions, selectControl } from "./controls.js";
import { saveButtons } from "./save.js";

/**
 * Layer and head selects for view `v` (an exported page shows only `layer()`, the layer drawn),
 * the busy mark, and PNG / SVG buttons saving `save.picture()` as `save.name()` (see saveButtons).
 * With `criterion`, a line naming the token subset (the model's token_criterion) comes with it.
 * Returns {el, criterion, sync(), layerSelect, headSelect}; sync() shows the model's values.
 */
export function headToolbar(v, { layer, save, criterion = false, onHead = (head) => setHead(v, head) }) {
  const { model, standalone } = v;
  const layerSelect = selectControl("Layer", (value) => v.set({ layer: value }));
  const headSelect = selectControl("Head", onHead);
  layerSelect.disable(standalone);
  if (standalone) layerSelect.el.title = "exported page: it holds the layer shown; other layers need the kernel";
  const buttons = saveButtons({ ...save, background: () => v.theme.bgCss });
  const row = h("div", { class: "cw-toolbar-row" }, [
    layerSelect.el,
    headSelect.el,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons,
  ]);
  const line = criterion ? h("div", { class: "cw-hint cw-criterion" }) : null;
  return {
    el: h("div", { class: "cw-toolbar" }, [row]),
    criterion: line,
    layerSelect,
    headSelect,
    sync() {
      const info = model.get("info") || {};
      const shown = layer();
      const layers = standalone ? [shown] : info.attn_layers || [model.get("layer")];
      layerSelect.set(numberOptions(layers), standalone ? shown : model.get("layer"));
      headSelect.set(indexOptions(info.n_heads || 1), model.get("head"));
      if (line) line.textContent = `Tokens: ${model.get("token_criterion") || ""}`;
    },
  };
}

/** Set the model's head (clamped to the heads of a layer); returns true when it changed. */
export function setHead(v, head) {
  const n = v.model.get("info")?.n_heads || 1;
  const next = Math.max(0, Math.min(n - 1, head));
  if (next === v.model.get("head")) return false;
  v.set({ head: next });
  return true;
}

/**
 * Keys: left / right move the head through `onHead` (default setHead); with `layers`, up / down
 * move the layer (not on an exported page, which holds one layer).
 */
export function headKeys(v, { layers = false, onHead = (head) => setHead(v, head) } = {}) {
  const keys = {
    ArrowRight: () => onHead(v.model.get("head") + 1),
    ArrowLeft: () => onHead(v.model.get("head") - 1),
  };
  if (layers && !v.standalone) {
    const step = (d) => () => {
      const layers = v.model.get("info")?.attn_layers || [];
      const i = layers.indexOf(v.model.get("layer")) + d;
      if (i >= 0 && i < layers.length) v.set({ layer: layers[i] });
    };
    keys.ArrowDown = step(1);
    keys.ArrowUp = step(-1);
  }
  return keys;
}
