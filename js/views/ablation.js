// Ablation view: a layer x head grid of the effect of ablating each head alone (diverging colours
// centred on 0; hover: effect, 95 % interval, p-value), click heads to ablate them together (the
// combined effect beside the sum of the single ones), and the metric at every position of one
// prompt, clean and with the set ablated.
//
// The kernel sends effects float32 [4, L, H] (effect, low, high, p), the set's per-prompt effect
// float32 [batch] with its summary, and the strip float32 [2, batch, positions] for every prompt, so
// a prompt switch draws here without the kernel (on an exported page too).

import { button, h, indexOptions, selectControl } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { Heatmap } from "../lib/heatmap.js";
import { cellBox, cellValueOps } from "../lib/heatmap-scene.js";
import { quote } from "../lib/layout.js";
import { LineChart } from "../lib/line-chart.js";
import { saveButtons } from "../lib/save.js";
import { formatValue, makeScale, packRGBA } from "../lib/scales.js";
import { defineView } from "../lib/view.js";

const signed = (x, digits = 4) => (Number.isFinite(x) && x > 0 ? `+${formatValue(x, digits)}` : formatValue(x, digits));
const headName = ([l, hd]) => `L${l}H${hd}`;
const sameHeads = (a, b) => JSON.stringify(a || []) === JSON.stringify(b || []);

/** `heads` ([[layer, head], ...], sorted) with `pair` added or taken out, sorted. */
function toggled(heads, pair) {
  const key = (p) => p[0] * 1e6 + p[1];
  const rest = heads.filter((p) => key(p) !== key(pair));
  if (rest.length === heads.length) rest.push(pair);
  return rest.sort((a, b) => key(a) - key(b));
}

defineView("ablation", (v) => {
  const { model } = v;
  const state = { fx: null, L: 0, H: 0, strip: null, batch: 0, P: 0, hover: null, hoverPos: null };
  const info = () => model.get("info") || {};
  const effects = () => v.payloads("effects")?.effects || {};
  const pair = () => v.payloads("joint", "strip") || {};
  const joint = () => pair().joint || {};
  const strip = () => pair().strip || {};
  const layers = () => effects().layers || info().attn_layers || [];
  const ablated = () => model.get("ablated") || [];
  const isAblated = (l, hd) => ablated().some((p) => p[0] === l && p[1] === hd);
  const selectedRow = () => layers().indexOf(model.get("layer"));
  const fx = (k, row, hd) => state.fx[(k * state.L + row) * state.H + hd];
  const metricLabel = () => info().metric_labels?.[effects().metric || model.get("metric")] || model.get("metric");
  const prompt = () => Math.max(0, Math.min(state.batch - 1, model.get("prompt_index") || 0));
  const pending = () => !sameHeads(joint().heads, ablated());

  // ----- controls ------------------------------------------------------------------------
  const metricSelect = selectField("Metric", "metric", ["loss", "logit_diff"], (m) => info().metric_labels?.[m] || m);
  const methodSelect = selectField("Ablation", "method", ["zero", "mean", "resample"], (m) => m);
  const promptSelect = selectControl("Prompt", (i) => v.set({ prompt_index: i }));
  const clear = button("clear", "ablate no head (empty the set)", () => v.set({ ablated: [] }));
  const buttons = saveButtons({
    what: "grid",
    picture: () => grid.scene,
    name: () => `ablation_${model.get("metric")}_${model.get("method")}`,
    background: () => v.theme.bgCss,
  });
  if (v.standalone) metricSelect.select.disabled = methodSelect.select.disabled = clear.disabled = true;
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    metricSelect.el,
    methodSelect.el,
    promptSelect.el,
    clear,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons,
  ]);

  function selectField(label, trait, values, text) {
    const select = h("select", { class: "cw-select", attrs: { "aria-label": label.toLowerCase() } });
    v.listen(select, "change", () => v.set({ [trait]: select.value }));
    const el = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: label }), select]);
    return {
      el,
      select,
      sync() {
        const options = values.filter((x) => x !== "logit_diff" || info().has_target || model.get(trait) === x);
        if (select.dataset.options !== options.join("|")) {
          select.replaceChildren(...options.map((x) => h("option", { value: x, text: text(x) })));
          select.dataset.options = options.join("|");
        }
        select.value = model.get(trait);
      },
    };
  }

  const caption = h("div", { class: "cw-hint cw-ab-caption" });
  const grid = v.own(
    new Heatmap({
      label: "effect of ablating each head",
      onHover: (hit) => {
        state.hover = hit;
        drawMarks();
      },
      onClick: (hit) => toggleHead(hit.row, hit.col),
    }),
  );
  const panel = h("div", { class: "cw-ab-joint", attrs: { "aria-live": "polite" } });
  const readout = h("div", { class: "cw-readout cw-ab-readout", attrs: { "aria-live": "polite" } });
  const stripTitle = h("div", { class: "cw-hint cw-ab-strip-title" });
  const chart = v.own(
    new LineChart({
      label: "metric at each position",
      onHover: (i) => {
        state.hoverPos = i;
        chart.setHover(i);
        drawStripReadout();
      },
    }),
  );
  const stripReadout = h("div", { class: "cw-readout cw-ab-strip-readout", attrs: { "aria-live": "polite" } });
  v.root.append(
    toolbar,
    v.banner,
    caption,
    h("div", { class: "cw-ab-main" }, [grid.el, panel]),
    readout,
    stripTitle,
    chart.el,
    stripReadout,
  );

  function toggleHead(row, hd) {
    const l = layers()[row];
    if (l == null) return;
    if (v.standalone) {
      v.set({ layer: l, head: hd }); // a saved page: the set needs the kernel
      return;
    }
    v.set({ ablated: toggled(ablated(), [l, hd]), layer: l, head: hd });
  }

  // ----- drawing -------------------------------------------------------------------------
  function scale() {
    let m = 0;
    for (let i = 0; i < state.L * state.H; i++) if (Number.isFinite(state.fx[i])) m = Math.max(m, Math.abs(state.fx[i]));
    return makeScale("diverging", { dark: v.theme.dark, domain: [-(m || 1), m || 1] });
  }

  function gridMarks(layout, sc) {
    const text = (x) => signed(x, 2);
    const values = { value: (l, hd) => fx(0, l, hd), text, scale: sc, theme: v.theme };
    const ops = layout.cell >= 24 ? cellValueOps(layout, state.L, state.H, values) : [];
    for (const [l, hd] of ablated()) {
      const row = layers().indexOf(l);
      if (row >= 0) ops.push(cellBox(layout, row, hd, { color: v.theme.accent, width: 3, inset: 1.5 }));
    }
    return ops;
  }

  function drawGrid() {
    const { L, H } = state;
    const sc = scale();
    grid.update({
      rows: L,
      cols: H,
      paint: (pixels) => {
        for (let i = 0; i < L * H; i++) pixels[i] = packRGBA(...sc.rgb(state.fx[i]));
      },
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      title: `Δ ${metricLabel()} per head`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: Math.max(200, Math.min(420, Math.max(L, H) * 48)),
      marks: (layout) => gridMarks(layout, sc),
    });
    drawMarks();
  }

  function drawMarks() {
    const row = selectedRow();
    const selected = (layout) =>
      row >= 0 ? [{ ...cellBox(layout, row, model.get("head"), { color: v.theme.fg, width: 1.5, inset: -2 }), dash: [3, 2] }] : [];
    grid.setHighlight({ row: state.hover?.row, col: state.hover?.col, marks: selected });
    drawReadout();
  }

  function drawReadout() {
    if (!state.fx) {
      readout.textContent = "";
      return;
    }
    const hover = state.hover;
    const row = hover ? hover.row : selectedRow();
    const hd = hover ? hover.col : model.get("head");
    if (row < 0 || row >= state.L) {
      readout.textContent = "";
      return;
    }
    const e = effects();
    const [x, lo, hi, p] = [0, 1, 2, 3].map((k) => fx(k, row, hd));
    const l = layers()[row];
    const lead = `${hover ? "" : "selected "}L${l} H${hd}${isAblated(l, hd) ? " (in the ablated set)" : ""}`;
    const interval = `95 % interval [${signed(lo)}, ${signed(hi)}] (bootstrap, ${e.n_boot} resamples, seed ${e.seed})`;
    readout.textContent = Number.isFinite(x)
      ? `${lead} · effect ${signed(x)} · ${interval} · p = ${formatValue(p, 3)} (${e.p_method})`
      : `${lead} · not ablated alone`;
    Object.assign(readout.dataset, {
      layer: String(l),
      head: String(hd),
      effect: String(x),
      low: String(lo),
      high: String(hi),
      p: String(p),
    });
  }

  function drawCaption() {
    const e = effects();
    const i = info();
    const method = info().method_labels?.[e.method] || e.method;
    caption.textContent = [
      `Mean over ${i.batch} prompts of metric(ablated) − metric(clean) for the ${metricLabel()} (clean ${formatValue(e.clean)}),`,
      `each head ${method}; reference: ${i.reference}. Prompts: ${i.ran_on}.`,
      v.standalone
        ? "Saved page: changing the ablated set needs the kernel."
        : "Click heads to ablate them together (Enter toggles the selected head).",
    ].join(" ");
  }

  function drawPanel() {
    const j = joint();
    const heads = ablated();
    const rows = [h("div", { class: "cw-field-label", text: "Ablated together" })];
    if (!heads.length) {
      rows.push(h("div", { class: "cw-hint", text: "No head ablated: click cells of the grid to add heads to the set." }));
    } else if (pending()) {
      rows.push(
        h("div", { class: "cw-ab-heads", text: heads.map(headName).join(", ") }),
        h("div", { class: "cw-hint", text: "computing the combined effect…" }),
      );
    } else {
      const interaction = j.mean - j.sum_single;
      rows.push(
        h("div", { class: "cw-ab-heads", text: heads.map(headName).join(", ") }),
        h("div", { class: "cw-ab-combined", text: `combined effect ${signed(j.mean)}` }),
        h("div", { class: "cw-hint", text: `95 % interval [${signed(j.low)}, ${signed(j.high)}] · p = ${formatValue(j.p_value, 3)}` }),
        h("div", { class: "cw-ab-sum", text: `sum of single effects ${signed(j.sum_single)}` }),
        h("div", { class: "cw-hint", text: `interaction (combined − sum) ${signed(interaction)}` }),
      );
    }
    panel.replaceChildren(...rows);
    Object.assign(panel.dataset, {
      heads: heads.map(headName).join(","),
      pending: String(pending()),
      mean: String(j.mean ?? ""),
      sumSingle: String(j.sum_single ?? ""),
    });
  }

  function stripSeries() {
    const s = state.strip;
    const at = (k) => Array.from(s.subarray((k * state.batch + prompt()) * state.P, (k * state.batch + prompt() + 1) * state.P));
    const series = [{ name: "clean", values: at(0), color: v.theme.muted, dash: [4, 2] }];
    const heads = strip().heads || [];
    if (heads.length) series.push({ name: `${heads.map(headName).join(", ")} ablated`, values: at(1), color: v.theme.accent });
    return series;
  }

  /** Token strings of the prompt shown, one per slot: for the loss, the token each position predicts. */
  function slotLabels() {
    const labels = strip().labels?.[prompt()] || [];
    return strip().kind === "loss" ? labels.slice(1) : labels;
  }

  function drawStrip() {
    if (!state.strip) return;
    const kind = strip().kind;
    const what =
      kind === "loss" ? "next-token loss at each position (labelled by the token it predicts)" : "logit difference at each position";
    stripTitle.textContent = `Prompt ${prompt()}: ${what}; shaded: the positions the metric ${kind === "loss" ? "averages" : "reads"}`;
    chart.update({
      series: stripSeries(),
      labels: slotLabels(),
      marked: strip().positions || [],
      title: `${kind === "loss" ? "Loss" : "Logit difference"} on prompt ${prompt()}`,
      yTitle: kind === "loss" ? "loss (nats)" : "logit diff",
      xTitle: kind === "loss" ? "predicted token →" : "position →",
      theme: v.theme,
      width: v.size ?? 640,
      height: 250,
    });
    chart.el.dataset.prompt = String(prompt());
    chart.el.dataset.heads = (strip().heads || []).map(headName).join(",");
    drawStripReadout();
  }

  function drawStripReadout() {
    const i = state.hoverPos;
    if (!state.strip || i == null) {
      stripReadout.textContent = "hover the chart for the values at a position";
      return;
    }
    const series = stripSeries();
    const labels = strip().labels?.[prompt()] || [];
    const where =
      strip().kind === "loss"
        ? `position ${i} ${quote(labels[i] ?? "")} → ${quote(labels[i + 1] ?? "")}`
        : `position ${i} ${quote(labels[i] ?? "")}`;
    const values = series.map((s) => `${s.name} ${formatValue(s.values[i])}`);
    const delta = series.length > 1 ? ` (${signed(series[1].values[i] - series[0].values[i])})` : "";
    stripReadout.textContent = `${where} · ${values.join(" · ")}${delta}`;
  }

  function syncControls() {
    metricSelect.sync();
    methodSelect.sync();
    promptSelect.set(indexOptions(state.batch || info().batch || 1), model.get("prompt_index"));
  }

  function draw() {
    syncControls();
    if (!state.fx) return;
    const t0 = performance.now();
    drawCaption();
    drawGrid();
    drawPanel();
    drawStrip();
    v.drawn("all", t0);
  }

  function readEffects() {
    const p = effects();
    if (!hasData(p)) return;
    try {
      const [K, L, H] = p.shape;
      if (K !== 4 || !L || !H) throw new RangeError(`effects have shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { fx: floatValues(p), L, H });
      v.error("", "decode");
    } catch (err) {
      state.fx = null;
      v.error(`could not read the effects: ${err.message}`, "decode");
    }
  }

  function readStrip() {
    const p = strip();
    if (!hasData(p)) return;
    try {
      const [two, batch, P] = p.shape;
      if (two !== 2 || !batch || !P) throw new RangeError(`strip has shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { strip: floatValues(p), batch, P });
      v.error("", "decode-strip");
    } catch (err) {
      state.strip = null;
      v.error(`could not read the strip: ${err.message}`, "decode-strip");
    }
  }

  function start() {
    readEffects();
    readStrip();
    draw();
  }

  v.onPayloads("effects", () => {
    state.hover = null;
    readEffects();
    draw();
  });
  v.onPayloads("joint strip", () => {
    readStrip();
    draw();
  });
  v.on("change:ablated", () => {
    if (!state.fx) return;
    drawGrid();
    drawPanel();
    v.refresh();
    v.drawn("ablated");
  });
  v.on("change:prompt_index", () => {
    syncControls();
    state.hoverPos = null;
    drawStrip();
    v.drawn("prompt");
  });
  v.on("change:layer change:head", () => {
    if (!state.fx) return;
    drawMarks();
    v.drawn("select");
  });
  v.on("change:metric change:method", syncControls);
  v.on("change:progress", v.refresh);

  const move = (dl, dh) => () => {
    const row = selectedRow() + dl;
    const hd = model.get("head") + dh;
    if (row >= 0 && row < state.L && hd >= 0 && hd < state.H) v.set({ layer: layers()[row], head: hd });
  };
  const toggleSelected = () => {
    if (selectedRow() >= 0) toggleHead(selectedRow(), model.get("head"));
  };
  return {
    start,
    draw,
    size: (width) => Math.max(360, Math.min(900, width - 20)),
    busy: () =>
      model.get("progress") ||
      (model.get("busy")
        ? pending() && ablated().length
          ? `ablating ${ablated().map(headName).join(", ")} together…`
          : "computing…"
        : ""),
    keys: {
      ArrowRight: move(0, 1),
      ArrowLeft: move(0, -1),
      ArrowDown: move(1, 0),
      ArrowUp: move(-1, 0),
      Enter: toggleSelected,
      " ": toggleSelected,
    },
    marks: () => ({
      ablated: ablated().map(headName).join(","),
      jointHeads: (joint().heads || []).map(headName).join(","),
      prompt: prompt(),
      metric: model.get("metric"),
      method: model.get("method"),
      layer: model.get("layer"),
      head: model.get("head"),
      revision: strip().revision ?? "",
    }),
  };
});
