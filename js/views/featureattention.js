// FeatureAttention view: a head's pattern (as AttentionPattern draws it: level of detail, tiles, exact hover rows),
// and beside it the split of the clicked cell over a dictionary's features: the ranked feature pairs, the error
// and bias terms as bars of their own, their sum beside the model's score. Hovering a feature shows its card:
// label, activation, top activating positions in this prompt, the tokens its decoder direction raises and lowers.
//
// A click on a cell sets `cell` ({query, key}); "whole row" splits every source of that destination at once
// (key null). The kernel answers in `split` (float32 bar values; the bars, features and cards beside them).
// Token and feature text is untrusted: written with textContent only.

import { colorScaleOf, scaleSelect } from "../lib/color-scale.js";
import { h } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { ExactRow } from "../lib/exact-row.js";
import { headKeys, headToolbar, setHead } from "../lib/heads.js";
import { Heatmap } from "../lib/heatmap.js";
import { patternReader } from "../lib/inflate.js";
import { quote } from "../lib/layout.js";
import { progressRow } from "../lib/progress.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { sequenceBox } from "../lib/sequence-box.js";
import { barText, extent, featureName } from "../lib/feature-text.js";
import { defineView } from "../lib/view.js";
import { overviewValue, Zoom } from "../lib/zoom.js";

const AXIS_TITLES = { yTitle: "destination (query) ↓", xTitle: "source (key) →" };
const PANELS = [
  ["qk", "QK: why it attends", "the cell's score split over feature pairs"],
  ["ov", "OV: what it moves", "what the head writes at the destination, split over its source features"],
];

defineView("featureattention", (v) => {
  const { model } = v;
  const state = { stack: null, labels: [], hover: null, card: null };
  const info = () => model.get("info") || {};
  const patterns = () => v.payloads("patterns")?.patterns;
  const split = () => model.get("split") || {};
  const head = () => model.get("head");
  const shownLayer = () => patterns()?.layer ?? model.get("layer");
  const colors = () => colorScaleOf(patterns()?.scale, head());
  const scale = () => {
    const c = colors();
    return makeScale("sequential", { dark: v.theme.dark, ticks: c.ticks, caption: c.caption });
  };

  // ----- controls ------------------------------------------------------------------------
  const prompt = v.own(sequenceBox(v, () => info().has_tokenizer));
  const toolbar = headToolbar(v, {
    layer: shownLayer,
    save: { what: "heatmap", picture: () => heatmap.scene, name: () => `feature_attention_L${shownLayer()}H${head()}` },
  });
  toolbar.el.prepend(prompt.el);
  const scales = scaleSelect(v);
  toolbar.headSelect.el.after(scales.el);
  const panelButtons = PANELS.map(([value, text, title]) => {
    const b = h("button", { class: "cw-button cw-fa-panel", type: "button", text, title });
    b.dataset.control = "panel";
    b.dataset.panel = value;
    v.listen(b, "click", () => v.set({ panel: value }));
    return b;
  });
  const kInput = h("input", { class: "cw-input cw-fa-k", type: "number", attrs: { min: 1, max: 200, "aria-label": "pairs ranked" } });
  kInput.dataset.control = "k";
  v.listen(kInput, "change", () => {
    const k = Number.parseInt(kInput.value, 10);
    if (Number.isFinite(k)) v.set({ k });
  });
  const rowButton = h("button", {
    class: "cw-button cw-fa-row-button",
    type: "button",
    text: "whole row",
    title: "split every source of the clicked destination at once (the top pairs over the row)",
  });
  rowButton.dataset.control = "cell";
  v.listen(rowButton, "click", () => {
    const cell = model.get("cell") || {};
    if (cell.query != null) v.set({ cell: { query: cell.query, key: cell.key == null ? cell.query : null } });
  });
  const controls = h("div", { class: "cw-toolbar-row cw-fa-controls" }, [
    ...panelButtons,
    rowButton,
    h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "pairs" }), kInput]),
  ]);
  toolbar.el.append(controls);
  const dictionaryNote = h("div", { class: "cw-hint cw-fa-dictionary" });
  const progress = progressRow(v);

  // ----- the pattern ----------------------------------------------------------------------
  const cellTokens = (hit) => (zoom.lod ? zoom.tokensOf(hit) : { query: hit.row, key: hit.col });
  const heatmap = v.own(
    new Heatmap({
      label: "attention pattern (click a cell to split its score)",
      onHover: (hit) => {
        if (zoom.drag) return;
        state.hover = hit ? cellTokens(hit) : null;
        drawSelection();
        exact.send();
      },
      onClick: (hit) => {
        if (zoom.dragged || !hit) return;
        const at = cellTokens(hit);
        if (at.query == null) return;
        v.set({ cell: { query: at.query, key: at.key != null && at.key <= at.query ? at.key : null } });
      },
    }),
  );
  const zoom = new Zoom(v, { heatmap, head, patterns, redraw: drawMain });
  const exact = new ExactRow(v, { current: () => ({ sel: state.hover, locked: false }), patterns, head });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });

  // ----- the split ------------------------------------------------------------------------
  const header = h("div", { class: "cw-fa-header", attrs: { "aria-live": "polite" } });
  const sum = h("div", { class: "cw-fa-sum" });
  const bars = h("div", { class: "cw-fa-bars", attrs: { role: "list", "aria-label": "the split's bars" } });
  const lists = h("div", { class: "cw-fa-lists" });
  const card = h("div", { class: "cw-fa-card", attrs: { role: "note" } });
  card.hidden = true;
  const side = h("div", { class: "cw-fa-side" }, [header, sum, bars, lists, card]);
  const main = h("div", { class: "cw-fa-main" }, [h("div", { class: "cw-fa-picture" }, [zoom.el, heatmap.el, readout]), side]);
  v.root.append(toolbar.el, progress.el, v.banner, dictionaryNote, main);

  // ----- drawing -------------------------------------------------------------------------
  function drawMain() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const sc = scale();
    const lut = sc.lut(stack);
    const title = `Layer ${shownLayer()}, head ${head()}`;
    const axes = { title, ...AXIS_TITLES, scale: sc, theme: v.theme, maxPlot: v.size };
    if (zoom.lod) zoom.draw(stack, head(), lut, state.labels, axes);
    else
      heatmap.update({
        ...axes,
        rows: stack.rows,
        cols: stack.cols,
        paint: (pixels) => stack.paint(head(), lut, pixels, 0),
        rowLabels: state.labels,
        colLabels: state.labels,
      });
    drawSelection();
    v.drawn("main", t0);
  }

  function drawSelection() {
    const cell = model.get("cell") || {};
    const hover = state.hover;
    const marks = { row: hover?.query, col: hover?.key, lockedRow: cell.query ?? undefined, lockedCol: cell.key ?? undefined };
    heatmap.setHighlight(zoom.lod ? zoom.highlight(hover, cell.query != null ? cell : null) : marks);
    const name = (i) => `${i} ${quote(state.labels[i] ?? i)}`;
    const parts = [`L${shownLayer()} H${head()}`];
    if (state.stack && hover?.query != null && hover.key != null) {
      const row = exact.values(hover.query);
      const lod = zoom.lod;
      const weight = row
        ? formatValue(row[hover.key])
        : `≈${formatValue(lod ? overviewValue(state.stack, lod, head(), hover.query, hover.key) : state.stack.value(head(), hover.query, hover.key), 3)}`;
      parts.push(`destination ${name(hover.query)} → source ${name(hover.key)}`, `weight ${weight}`);
    } else parts.push("click a cell to split its score over the dictionary's features");
    readout.textContent = parts.join(" · ");
  }

  function showCard(feature) {
    state.card = feature;
    card.replaceChildren();
    if (!feature) {
      card.hidden = true;
      return;
    }
    const line = (label, text) =>
      h("div", { class: "cw-fa-card-line" }, [h("span", { class: "cw-field-label", text: label }), h("span", { text })]);
    card.append(h("div", { class: "cw-fa-card-title", text: featureName(feature) }));
    const facts = [];
    if (feature.side) facts.push(`${feature.side} side`);
    if (feature.activation != null) facts.push(`activation ${formatValue(feature.activation, 3)}`);
    if (feature.marginal != null) facts.push(`marginal ${formatValue(feature.marginal, 3)}`);
    if (feature.weight != null) facts.push(`pattern-weighted activation ${formatValue(feature.weight, 3)}`);
    if (facts.length) card.append(line("", facts.join(" · ")));
    if (feature.positions?.length)
      card.append(line("top positions", feature.positions.map(([p, t, val]) => `${p} ${quote(t)} ${formatValue(val, 3)}`).join(", ")));
    if (feature.up?.length) card.append(line("raises", feature.up.map(([t, val]) => `${quote(t)} ${formatValue(val, 2)}`).join(", ")));
    if (feature.down?.length) card.append(line("lowers", feature.down.map(([t, val]) => `${quote(t)} ${formatValue(val, 2)}`).join(", ")));
    card.hidden = false;
  }

  function barRow(text, value, m, { kind = "term", features = [], error = false, bias = false } = {}) {
    const dark = v.theme.dark;
    const pos = dark ? "#6fa8dc" : "#2b6cb0";
    const neg = dark ? "#e8877a" : "#c0392b";
    const width = (Math.abs(value) / m) * 50;
    const bar = h("div", { class: "cw-fa-bar" });
    bar.style.left = value >= 0 ? "50%" : `${50 - width}%`;
    bar.style.width = `${width}%`;
    bar.style.background = value >= 0 ? pos : neg;
    const row = h("div", { class: `cw-fa-row cw-fa-${kind}`, attrs: { role: "listitem" } }, [
      h("span", { class: "cw-fa-name", text, title: text }),
      h("span", { class: "cw-fa-track" }, [h("span", { class: "cw-fa-zero" }), bar]),
      h("span", { class: "cw-fa-value", text: formatValue(value, 4) }),
    ]);
    if (error) row.classList.add("cw-fa-error");
    if (bias) row.classList.add("cw-fa-bias");
    row.dataset.cwValue = String(value);
    if (features.length) {
      const feats = split().features || {};
      features.forEach((name, i) => {
        row.dataset[`cwFeature${i}`] = String(feats[name]?.id ?? "");
      });
      v.listen(row, "mousemove", (e) => {
        const half = features.length > 1 && e.offsetX > row.clientWidth / 2 ? 1 : 0;
        showCard(feats[features[Math.min(half, features.length - 1)]]);
      });
    }
    return row;
  }

  function drawSplit() {
    const p = split();
    bars.replaceChildren();
    lists.replaceChildren();
    const cell = p.cell;
    const feats = p.features || {};
    const panel = model.get("panel");
    for (const b of panelButtons) b.classList.toggle("cw-active", b.dataset.panel === panel);
    rowButton.textContent = model.get("cell")?.key == null && model.get("cell")?.query != null ? "one cell" : "whole row";
    rowButton.disabled = v.standalone || model.get("cell")?.query == null || panel === "ov";
    kInput.value = String(model.get("k"));
    header.classList.toggle("cw-fa-failed", !!p.failed);
    if (!hasData(p) || !cell) {
      header.textContent = p.note || "click a cell of the pattern to split its score";
      sum.textContent = "";
      showCard(null);
      return;
    }
    const values = floatValues(p);
    const name = (i) => `${i} ${quote(state.labels[i] ?? i)}`;
    const where = p.row ? `row of destination ${name(cell.query)}` : `destination ${name(cell.query)} → source ${name(cell.key)}`;
    const what = p.panel === "ov" ? "what it moves" : "score split";
    header.textContent = `L${p.layer}H${p.head} ${what}: ${where}${p.caption ? ` (${p.caption})` : ""}`;
    const model_ = p.panel === "ov" ? "the head's read-out" : p.row ? "pattern-weighted score" : "model's score";
    sum.textContent =
      p.score == null
        ? ""
        : `sum of bars ${formatValue(p.total, 5)} · ${model_} ${formatValue(p.score, 5)} · error terms carry ${formatValue(100 * p.error_share, 3)}%`;
    sum.dataset.cwScore = String(p.score);
    sum.dataset.cwTotal = String(p.total);
    const m = extent(values);
    p.bars.forEach((bar, i) => {
      bars.append(
        barRow(barText(bar, feats), values[i], m, { kind: bar.kind, features: bar.features || [], error: bar.error, bias: bar.bias }),
      );
    });
    for (const [sideName, names] of Object.entries(p.marginals || {})) {
      if (!names.length) continue;
      const list = h("div", { class: "cw-fa-list" }, [h("div", { class: "cw-field-label", text: `${sideName} features` })]);
      const ms = names.map((n) => feats[n]?.marginal ?? feats[n]?.size ?? 0);
      const mm = extent(ms);
      names.forEach((n, i) => {
        list.append(barRow(featureName(feats[n]), ms[i], mm, { kind: "feature", features: [n] }));
      });
      lists.append(list);
    }
    if (p.outputs?.length) {
      const list = h("div", { class: "cw-fa-list" }, [h("div", { class: "cw-field-label", text: "outputs" })]);
      const mm = extent(p.outputs.map((o) => o[1]));
      for (const [text, value] of p.outputs) list.append(barRow(text, value, mm, { kind: "output" }));
      lists.append(list);
    }
    if (state.card) showCard(feats[`${state.card.side}:${state.card.id}`] || null);
  }

  function drawInfo() {
    const d = model.get("dictionary_info") || {};
    const parts = Object.entries(d).map(
      ([role, x]) =>
        `${role.replace("_", " ")}: ${x.name} (${x.features} features, ${x.activation}, ${x.hook_name}${x.labels ? `, ${x.labels} labelled` : ""})`,
    );
    dictionaryNote.textContent = parts.join(" · ");
  }

  function syncControls() {
    toolbar.sync();
    prompt.show(info().has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
    drawInfo();
  }

  const start = patternReader(v, patterns, show);

  /** Draw payload `p` (its codes read into `stack`). */
  function show(p, stack) {
    state.stack = stack;
    zoom.show(p, state.stack);
    scales.show(p?.scale?.kind);
    state.labels = p?.labels || [];
    const t0 = performance.now();
    syncControls();
    drawMain();
    drawSplit();
    if (state.stack || !model.get("busy")) v.drawn("all", t0);
    if (zoom.lod) zoom.request();
  }

  v.onPayloads("patterns", start);
  v.on("change:split", () => {
    drawSplit();
    drawSelection();
    v.drawn("split");
  });
  v.on("change:head", () => {
    toolbar.headSelect.select.value = String(head());
    drawMain();
    zoom.request();
  });
  v.on("change:tile", () => {
    zoom.takeTile().catch((err) => v.error(`could not read a tile: ${err.message}`, "decode"));
  });
  v.on("change:row", drawSelection);
  v.on("change:cell", drawSelection);
  v.on("change:panel change:k", drawSplit);
  v.on("change:prompt change:tokens change:layer change:info change:dictionary_info", syncControls);

  return {
    start,
    draw: () => {
      drawMain();
      drawSplit();
    },
    size: (width) => Math.max(v.compact ? 160 : 200, Math.min(460, (width - 40) / 2)),
    busy: () => (model.get("busy") ? "running…" : ""),
    keys: {
      ...zoom.keys(headKeys(v, { layers: true, onHead: (hd) => setHead(v, hd) })),
      Escape: () => v.set({ cell: { query: null, key: null } }),
    },
    marks: () => ({
      head: head(),
      layer: shownLayer(),
      tokens: state.labels.length,
      revision: patterns()?.revision ?? "",
      cell: JSON.stringify(model.get("cell") || {}),
      bars: split().bars?.length ?? 0,
      panel: model.get("panel"),
    }),
  };
});
