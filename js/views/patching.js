// Patching view: the metric of the corrupted run with each head's activation at one site patched in
// from the clean run, as a layer x head grid, or by position (heads x positions); values or
// normalised (a toggle drawn here); click a cell to select its head. Grouped K/V heads are said.
// Method "attribution": the grid holds attribution patching's estimates, and the selected head's exact
// value (patched in the kernel after the click) is shown beside its estimate; verified heads are ringed.
//
// The kernel sends float32 [2, L, H] or [2, L, H, seq]: the patched metric (0) and normalised (1)
// (or their estimates), and `verified`: the heads patched exactly in attribution mode.

import { h, indexOptions, numberOptions, selectControl } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { Heatmap } from "../lib/heatmap.js";
import { cellBox, cellValueOps } from "../lib/heatmap-scene.js";
import { quote } from "../lib/layout.js";
import { saveButtons } from "../lib/save.js";
import { effectDomain, formatCell, formatValue, makeScale, packRGBA } from "../lib/scales.js";
import { verifiedValue } from "../lib/verified.js";
import { defineView } from "../lib/view.js";

const SITES = ["out", "q", "k", "v", "pattern"];
const METHODS = { exact: "exact (a run per head)", attribution: "attribution (estimates)" };
const ESTIMATORS = { atp: "AtP", "atp*": "AtP*" };

defineView("patching", (v) => {
  const { model } = v;
  const state = { values: null, L: 0, H: 0, seq: 1, hover: null };
  const info = () => model.get("info") || {};
  const payload = () => v.payloads("patching")?.patching || {};
  const layers = () => payload().layers || info().attn_layers || [];
  const byPosition = () => !!payload().by_position;
  const shown = () => (model.get("normalised") ? 1 : 0);
  const estimating = () => payload().method === "attribution";
  const value = (k, l, hd, pos = 0) => state.values[((k * state.L + l) * state.H + hd) * state.seq + pos];
  const selectedRow = () => layers().indexOf(model.get("layer"));
  const cellOf = (r, c) => (byPosition() ? [Math.floor(r / state.H), r % state.H, c] : [r, c, 0]);

  // ----- controls ------------------------------------------------------------------------
  const select = (label, trait, options, title) => {
    const el = h(
      "select",
      { class: "cw-select", attrs: { "aria-label": label, "data-control": trait } },
      Object.entries(options).map(([value, text]) => h("option", { value, text })),
    );
    v.listen(el, "change", () => v.set({ [trait]: el.value }));
    const field = h("label", { class: "cw-field", title }, [h("span", { class: "cw-field-label", text: label }), el]);
    return { el, field };
  };
  const methodSelect = select("Method", "method", METHODS, "exact patching, or attribution patching's estimates from gradients");
  const estimatorSelect = select(
    "Estimator",
    "estimator",
    ESTIMATORS,
    "AtP: first order; AtP*: the softmax of patched queries and keys computed, GradDrop ranking",
  );
  const siteSelect = h(
    "select",
    { class: "cw-select", attrs: { "aria-label": "site", "data-control": "site" } },
    SITES.map((s) => h("option", { value: s, text: s })),
  );
  v.listen(siteSelect, "change", () => v.set({ site: siteSelect.value }));
  const siteField = h("label", { class: "cw-field", title: "the activation patched from the clean run" }, [
    h("span", { class: "cw-field-label", text: "Site" }),
    siteSelect,
  ]);
  const checkbox = (label, trait, title) => {
    const box = h("input", { type: "checkbox", attrs: { "aria-label": label } });
    v.listen(box, "change", () => v.set({ [trait]: box.checked }));
    return { box, el: h("label", { class: "cw-field", title }, [box, h("span", { class: "cw-field-label", text: label })]) };
  };
  const positionBox = checkbox("by position", "by_position", "patch one head at one position at a time");
  const normalBox = checkbox("normalised", "normalised", "(patched − corrupted) / (clean − corrupted): 1 = the clean metric restored");
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  if (v.standalone) siteSelect.disabled = positionBox.box.disabled = methodSelect.el.disabled = estimatorSelect.el.disabled = true;
  const buttons = saveButtons({
    what: "grid",
    picture: () => grid.scene,
    name: () => `patching_${payload().site || "out"}${byPosition() ? "_by_position" : ""}`,
    background: () => v.theme.bgCss,
  });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    methodSelect.field,
    estimatorSelect.field,
    siteField,
    positionBox.el,
    normalBox.el,
    layerSelect.el,
    headSelect.el,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons,
  ]);
  const caption = h("div", { class: "cw-hint cw-pt-caption" });
  const note = h("div", { class: "cw-pt-note", attrs: { role: "note" } });
  note.hidden = true;
  const grid = v.own(
    new Heatmap({
      label: "activation patching",
      onHover: (hit) => {
        state.hover = hit;
        drawMarks();
      },
      onClick: (hit) => {
        const [l, hd] = cellOf(hit.row, hit.col);
        if (layers()[l] != null) v.set({ layer: layers()[l], head: hd });
      },
    }),
  );
  const readout = h("div", { class: "cw-readout cw-pt-readout", attrs: { "aria-live": "polite" } });
  v.root.append(toolbar, v.banner, caption, note, grid.el, readout);

  // ----- drawing -------------------------------------------------------------------------
  function scale(all) {
    const p = payload();
    // the whole effect sets the colour's reach: normalised, 1; raw, the metric's distance from corrupted to clean
    const domain = shown() ? effectDomain(all, 0, 1) : effectDomain(all, p.corrupted_value, p.clean_value - p.corrupted_value);
    return makeScale("diverging", { dark: v.theme.dark, domain });
  }

  function drawGrid() {
    const p = payload();
    const { L, H, seq } = state;
    const k = shown();
    const rows = byPosition() ? L * H : L;
    const cols = byPosition() ? seq : H;
    const all = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) all[r * cols + c] = value(k, ...cellOf(r, c));
    const sc = scale(all);
    const what = k ? "normalised" : info().metric || "metric";
    grid.update({
      rows,
      cols,
      paint: (pixels) => {
        for (let i = 0; i < all.length; i++) pixels[i] = packRGBA(...sc.rgb(all[i]));
      },
      rowLabels: byPosition() ? Array.from({ length: rows }, (_, r) => `L${layers()[Math.floor(r / H)]}H${r % H}`) : layers().map(String),
      colLabels: byPosition() ? p.labels || [] : Array.from({ length: H }, (_, i) => String(i)),
      title: `${what} · ${p.site} patched${byPosition() ? " one position at a time" : ""}`,
      yTitle: byPosition() ? "head ↓" : "layer ↓",
      xTitle: byPosition() ? "position →" : "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: byPosition() ? v.size : Math.max(200, Math.min(420, Math.max(L, H) * 48)),
      marks: (layout) => {
        if (byPosition() || layout.cell < 24) return [];
        return cellValueOps(layout, L, H, { value: (l, hd) => value(k, l, hd), text: formatCell, scale: sc, theme: v.theme });
      },
    });
    grid.el.dataset.site = p.site;
    grid.el.dataset.domain = sc.domain.join(" "); // (the colour's reach, read by the browser tests)
    grid.el.dataset.byPosition = String(byPosition());
    drawMarks();
  }

  function drawMarks() {
    const row = selectedRow();
    const hd = model.get("head");
    if (byPosition()) {
      grid.setHighlight({ row: state.hover?.row, col: state.hover?.col, lockedRow: row >= 0 ? row * state.H + hd : null });
    } else {
      const checked = estimating() ? model.get("verified")?.heads || [] : [];
      const marks = (layout) => [
        ...checked
          .map(([vl, vh]) => [layers().indexOf(vl), vh])
          .filter(([l]) => l >= 0)
          .map(([l, vh]) => cellBox(layout, l, vh, { color: v.theme.fg, width: 1.5, inset: 4 })),
        ...(row >= 0 ? [cellBox(layout, row, hd, { color: v.theme.accent, width: 2.5, inset: 1 })] : []),
      ];
      grid.setHighlight({ row: state.hover?.row, col: state.hover?.col, marks });
    }
    drawReadout();
  }

  function drawReadout() {
    if (!state.values) {
      readout.textContent = "";
      return;
    }
    const p = payload();
    const hover = state.hover;
    let l;
    let hd;
    let pos = null;
    if (hover) [l, hd, pos] = cellOf(hover.row, hover.col);
    else [l, hd] = [selectedRow(), model.get("head")];
    if (l < 0 || l >= state.L) {
      readout.textContent = "";
      return;
    }
    const at =
      byPosition() && pos != null
        ? ` at position ${pos} ${quote(p.labels?.[pos] ?? pos)} (corrupted ${quote(p.corrupted_labels?.[pos] ?? "")})`
        : "";
    const raw = value(0, l, hd, pos ?? 0);
    const norm = value(1, l, hd, pos ?? 0);
    const lead = `${hover ? "" : "selected "}L${layers()[l]} H${hd}`;
    const word = estimating() ? `${ESTIMATORS[p.estimator] || p.estimator} estimate` : "patched";
    let values =
      byPosition() && pos == null ? "hover a position for its values" : `${word} ${formatValue(raw)} · normalised ${formatValue(norm, 3)}`;
    const exact = estimating() ? verifiedValue(model.get("verified"), layers()[l], hd, byPosition() ? pos : null) : null;
    if (exact) values += ` · exact ${formatValue(exact.value)} (normalised ${formatValue(exact.normalised, 3)})`;
    else if (estimating() && !(byPosition() && pos == null)) values += " · click the head for its exact value";
    const ends = `clean ${formatValue(p.clean_value)}, corrupted ${formatValue(p.corrupted_value)}`;
    readout.textContent = `${lead}${at} · ${p.site} · ${values} (${ends})`;
    Object.assign(readout.dataset, {
      layer: String(layers()[l]),
      head: String(hd),
      value: String(raw),
      normalised: String(norm),
      exact: exact ? String(exact.value) : "",
    });
  }

  function drawText() {
    const p = payload();
    const i = info();
    const estimate = estimating()
      ? [
          `Estimated by ${ESTIMATORS[p.estimator] || p.estimator} (attribution patching: one run with gradients, one without),`,
          "not run per head; click a head to patch it exactly and see both (checked heads are ringed).",
        ]
      : [];
    caption.textContent = [
      `Each head's ${i.site_labels?.[p.site] || p.site} taken from the clean run into the corrupted one;`,
      `the ${i.metric} of that run (clean ${formatValue(p.clean_value)}, corrupted ${formatValue(p.corrupted_value)}).`,
      ...estimate,
      "Normalised: (patched − corrupted) / (clean − corrupted), 1 = the head alone restores the clean metric.",
      `Colours centred on ${model.get("normalised") ? "0" : "the corrupted value"}. Prompts: ${i.ran_on}.`,
    ].join(" ");
    const grouped = p.grouped
      ? [
          `K/V heads are grouped (${i.n_kv_heads} K/V heads for ${i.n_heads} query heads):`,
          `patching ${p.site} of a head patches its whole group, so the heads of a group show one shared value.`,
          'Patch "pattern" for one head\'s own use.',
        ].join(" ")
      : "";
    const unnormal = model.get("normalised") && p.not_normalised ? `Not normalised: ${p.not_normalised}.` : "";
    note.textContent = [grouped, unnormal].filter(Boolean).join(" ");
    note.hidden = !note.textContent;
    note.dataset.grouped = String(!!p.grouped);
  }

  function syncControls() {
    methodSelect.el.value = model.get("method");
    estimatorSelect.el.value = model.get("estimator");
    estimatorSelect.field.hidden = model.get("method") !== "attribution";
    siteSelect.value = model.get("site");
    positionBox.box.checked = !!model.get("by_position");
    normalBox.box.checked = !!model.get("normalised");
    layerSelect.set(numberOptions(layers()), model.get("layer"));
    headSelect.set(indexOptions(info().n_heads || 1), model.get("head"));
  }

  function draw() {
    syncControls();
    if (!state.values) return;
    const t0 = performance.now();
    drawText();
    drawGrid();
    v.drawn("all", t0);
  }

  function start() {
    const p = payload();
    if (!hasData(p)) {
      syncControls();
      return;
    }
    try {
      const [two, L, H, seq = 1] = p.shape;
      if (two !== 2 || !L || !H) throw new RangeError(`patching has shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { values: floatValues(p), L, H, seq, hover: null });
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      v.error(`could not read the patching values: ${err.message}`, "decode");
    }
    draw();
  }

  v.onPayloads("patching", start);
  v.on("change:normalised", draw);
  v.on("change:site change:by_position change:method change:estimator", syncControls);
  v.on("change:verified", () => {
    if (!state.values) return;
    drawMarks();
    v.drawn("select");
  });
  v.on("change:layer change:head", () => {
    syncControls();
    if (!state.values) return;
    drawMarks();
    v.drawn("select");
  });
  v.on("change:progress", v.refresh);

  const move = (dl, dh) => () => {
    const row = selectedRow() + dl;
    const hd = model.get("head") + dh;
    if (row >= 0 && row < state.L && hd >= 0 && hd < state.H) v.set({ layer: layers()[row], head: hd });
  };
  return {
    start,
    draw,
    size: (width) => Math.max(200, Math.min(720, width - 150)),
    busy: () => model.get("progress") || (model.get("busy") ? "computing…" : ""),
    keys: { ArrowRight: move(0, 1), ArrowLeft: move(0, -1), ArrowDown: move(1, 0), ArrowUp: move(-1, 0) },
    marks: () => ({
      method: payload().method ?? "",
      verified: (model.get("verified")?.heads || []).length,
      site: payload().site ?? "",
      byPosition: byPosition(),
      normalised: !!model.get("normalised"),
      grouped: !!payload().grouped,
      layer: model.get("layer"),
      head: model.get("head"),
      revision: payload().revision ?? "",
    }),
  };
});
