// HeadAtlas view: every head of the model on two dataset-wide metrics (a scatter, or a layer x head
// grid), coloured by a third, with the scan's progress; below, the selected head's examples, one
// text per decile of a metric, as token strips coloured by the head's attention from the text's
// strongest destination (hover a token: its own row). Click a point to select a head, an example
// to open it (the kernel then sets `example_tokens`, which a linked AttentionPattern shows).
//
// The scan arrives as exact float32 per-head means [metrics, layers, heads]; the examples as uint8
// patterns [examples, n, n] (lower triangle, maybe deflated) of the selected head.

import { button, h, indexOptions, numberOptions, selectControl } from "../lib/controls.js";
import { colorScaleOf, scaleSelect } from "../lib/color-scale.js";
import { CodeStack, floatValues, hasData } from "../lib/decode.js";
import { Heatmap } from "../lib/heatmap.js";
import { cellBox, cellValueOps, colourBar } from "../lib/heatmap-scene.js";
import { newestInflated } from "../lib/inflate.js";
import { saveButtons } from "../lib/save.js";
import { formatValue, makeScale, niceTicks, packRGBA } from "../lib/scales.js";
import { nearestDot, paintCanvas } from "../lib/scene.js";
import { TokenStrip } from "../lib/tokens.js";
import { defineView } from "../lib/view.js";

const FONT_PX = 11;

/** "90–100 %" for decile 9. */
export function decileLabel(decile) {
  return `${10 * decile}–${10 * decile + 10} %`;
}

/** `n` with its thousands apart by a narrow space: "1 000". */
export function count(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, "\u202f");
}

/** "L1H2". */
export const headName = (layer, head) => `L${layer}H${head}`;

/** Colour scale of a metric's range: diverging when it spans 0 (a signed metric), else sequential. */
export function metricScale([lo, hi], dark) {
  const signed = lo < 0 && hi > 0;
  const m = Math.max(Math.abs(lo), Math.abs(hi));
  return makeScale(signed ? "diverging" : "sequential", { dark, domain: signed ? [-m, m] : [lo, hi > lo ? hi : lo + 1] });
}

/**
 * The scene of a scatter of heads: spec {points: [{x, y, c, label}], xLabel, yLabel, cLabel, xDomain,
 * yDomain, scale (colours c), theme, width, height, title, selected (index into points)}. Points with
 * a non-finite x or y are left out. `measure(text, font)` gives a text width in px.
 * Returns {width, height, ops, layout: {left, top, plotW, plotH}, dots: [{x, y, i}], radius}.
 */
export function scatterScene(spec, measure) {
  const { points, scale, theme, width = 560, height = 400, selected = null } = spec;
  const frame = scatterFrame(spec, measure);
  const { left, top, plotW, plotH, px, py } = frame;
  const ops = frame.ops;
  const n = points.length;
  const radius = n > 400 ? 3 : n > 120 ? 4 : 5.5;
  const dots = [];
  points.forEach((p, i) => {
    if (!Number.isFinite(p.x) || !Number.isFinite(p.y)) return;
    const x = Math.max(left, Math.min(left + plotW, px(p.x)));
    const y = Math.max(top, Math.min(top + plotH, py(p.y)));
    dots.push({ x, y, i });
    ops.push({ type: "circle", x, y, r: radius, fill: scale.css(p.c), stroke: theme.fg, width: 0.75, alpha: 0.9 });
  });
  const ringed = dots.find((d) => d.i === selected);
  if (ringed) ops.push(...ringOps(ringed, points[selected].label || "", { radius, frame, theme, measure }));
  return { width, height, ops, layout: { left, top, plotW, plotH }, dots, radius };
}

/** The frame of a scatter (scatterScene's spec): title, grid and ticks, axis names, colour bar; its geometry and px(x), py(y). */
function scatterFrame(spec, measure) {
  const { xLabel = "", yLabel = "", cLabel = "", xDomain, yDomain, scale, theme, width = 560, height = 400, title = "" } = spec;
  const sans = `${FONT_PX}px ${theme.font}`;
  const ticksOf = ([lo, hi]) => niceTicks(lo, hi, 5).filter((t) => t >= lo - 1e-9 && t <= hi + 1e-9);
  const xTicks = ticksOf(xDomain);
  const yTicks = ticksOf(yDomain);
  const cTicks = niceTicks(scale.domain[0], scale.domain[1], 5);
  const widest = (ticks) => Math.max(10, ...ticks.map((t) => measure(formatValue(t, 3), sans)));
  const top = title ? 30 : 10;
  const left = 8 + FONT_PX + 8 + widest(yTicks) + 6;
  const right = 16 + 12 + 6 + widest(cTicks) + 10 + FONT_PX + 6;
  const bottom = 6 + FONT_PX + 10 + FONT_PX + 6;
  const plotW = Math.max(120, width - left - right);
  const plotH = Math.max(120, height - top - bottom);
  const widen = ([lo, hi]) => {
    const pad = 0.04 * (hi - lo || 1);
    return [lo - pad, hi + pad];
  };
  const [x0, x1] = widen(xDomain);
  const [y0, y1] = widen(yDomain);
  const px = (x) => left + ((x - x0) / (x1 - x0)) * plotW;
  const py = (y) => top + plotH - ((y - y0) / (y1 - y0)) * plotH;
  const text = (x, y, value, more) => ({ type: "text", x, y, text: value, font: sans, color: theme.muted, baseline: "middle", ...more });
  const ops = [];
  if (title) ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  for (const t of xTicks) {
    ops.push({ type: "line", x1: px(t), y1: top, x2: px(t), y2: top + plotH, stroke: theme.border, width: 0.6 });
    ops.push(text(px(t), top + plotH + 6 + FONT_PX / 2, formatValue(t, 3), { align: "center" }));
  }
  for (const t of yTicks) {
    ops.push({ type: "line", x1: left, y1: py(t), x2: left + plotW, y2: py(t), stroke: theme.border, width: 0.6 });
    ops.push(text(left - 6, py(t), formatValue(t, 3), { align: "right" }));
  }
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  const name = { color: theme.fg, align: "center" };
  const upright = { ...name, rotate: -Math.PI / 2 };
  ops.push(text(left + plotW / 2, top + plotH + 6 + FONT_PX + 10 + FONT_PX / 2, `${xLabel} →`, name));
  ops.push(text(8 + FONT_PX / 2, top + plotH / 2, `${yLabel} →`, upright));
  const barX = left + plotW + 16;
  ops.push(...colourBar(scale, { x: barX, y: top, h: plotH }, theme));
  ops.push(text(barX + 12 + 6 + widest(cTicks) + 10 + FONT_PX / 2, top + plotH / 2, `colour: ${cLabel}`, upright));
  return { ops, left, top, plotW, plotH, px, py };
}

/** The ring around the selected dot and its label on a backing (left of the dot near the right edge). */
function ringOps(ringed, label, { radius, frame, theme, measure }) {
  const { left, top, plotW } = frame;
  const bold = `600 ${FONT_PX}px ${theme.font}`;
  const onLeft = ringed.x > left + plotW - 48;
  const lx = ringed.x + (onLeft ? -1 : 1) * (radius + 8);
  const ly = Math.max(top + 8, ringed.y - radius - 6);
  const w = measure(label, bold) + 6;
  return [
    { type: "circle", x: ringed.x, y: ringed.y, r: radius + 4, stroke: theme.accent, width: 2.5 },
    { type: "rect", x: onLeft ? lx - w + 3 : lx - 3, y: ly - 8, w, h: 16, fill: theme.bgCss, alpha: 0.85 },
    { type: "text", x: lx, y: ly, text: label, font: bold, color: theme.fg, align: onLeft ? "right" : "left", baseline: "middle" },
  ];
}

defineView("headatlas", (v) => {
  const { model } = v;
  const state = { values: null, hover: null, examples: null, stack: null, rowHover: null };
  const scan = () => v.payloads("scan")?.scan || {};
  const metrics = () => scan().metrics || [];
  const layers = () => scan().layers || [];
  const nHeads = () => scan().n_heads || 1;
  const label = (m) => scan().labels?.[m] || m;
  const rangeOf = (m) => scan().metric_ranges?.[m] || [0, 1];
  const L = () => layers().length;
  const value = (m, row, hd) => {
    const k = metrics().indexOf(m);
    return state.values && k >= 0 ? state.values[(k * L() + row) * nHeads() + hd] : NaN;
  };
  const selectedRow = () => layers().indexOf(model.get("layer"));
  const colourScale = () => metricScale(rangeOf(model.get("color_metric")), v.theme.dark);
  /** Example i's strip colours: an exact weight of row `row` at its position on the examples' colour scale. */
  const tokenScale = (i, row) => {
    const sc = makeScale("sequential", { dark: v.theme.dark, domain: [0, 1] });
    const c = colorScaleOf(state.examples?.scale, i);
    return { ...sc, rgb: (w) => sc.rgb(c.position(w, row)) };
  };

  // ----- controls ------------------------------------------------------------------------
  /** A labelled select of metric names setting `trait` (selectControl's send numbers). */
  const metricSelect = (text, trait) => {
    const select = h("select", { class: "cw-select", attrs: { "aria-label": text } });
    v.listen(select, "change", () => v.set({ [trait]: select.value }));
    return {
      select,
      el: h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text }), select]),
      sync(list) {
        const key = list.join("|");
        if (select.dataset.options !== key) {
          select.replaceChildren(...list.map((m) => h("option", { value: m, text: label(m) })));
          select.dataset.options = key;
        }
        select.value = model.get(trait);
      },
    };
  };
  const xSelect = metricSelect("X", "x_metric");
  const ySelect = metricSelect("Y", "y_metric");
  const cSelect = metricSelect("Colour", "color_metric");
  const modeButtons = ["scatter", "grid"].map((m) =>
    h("button", {
      class: "cw-button cw-ha-mode",
      type: "button",
      text: m === "scatter" ? "Scatter" : "Grid",
      attrs: {
        "data-mode": m,
        title: m === "scatter" ? "every head on the x and y metrics" : "a layer × head grid coloured by the colour metric",
      },
      on: { click: () => v.set({ mode: m }) },
    }),
  );
  const modeGroup = h("span", { class: "cw-ha-modes", attrs: { role: "group", "aria-label": "view" } }, modeButtons);
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const buttons = saveButtons({
    what: "atlas",
    picture: () => (model.get("mode") === "grid" ? heatmap.scene : state.scene),
    name: () => `headatlas_${model.get("x_metric")}_${model.get("y_metric")}`,
    background: () => v.theme.bgCss,
  });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    xSelect.el,
    ySelect.el,
    cSelect.el,
    modeGroup,
    layerSelect.el,
    headSelect.el,
    v.busyMark,
  ]);

  const bar = h("div", { class: "cw-ha-bar-fill" });
  const progressBar = h("div", { class: "cw-ha-bar", attrs: { role: "progressbar", "aria-label": "texts scanned", "aria-valuemin": 0 } }, [
    bar,
  ]);
  const progressText = h("span", { class: "cw-ha-progress-text" });
  const stopButton = button("Stop", "stop the scan after the batch running (the texts scanned so far stay)", () => {
    v.set({ scan_state: model.get("scan_state") === "running" ? "stopped" : "running" });
  });
  stopButton.classList.add("cw-ha-stop");
  const progressRow = h("div", { class: "cw-toolbar-row cw-ha-progress" }, [
    progressBar,
    progressText,
    stopButton,
    h("span", { class: "cw-spacer" }),
    ...buttons,
  ]);

  // ----- the scatter (two canvases: the picture, and the hover ring on top) ------------------
  const canvas = h("canvas", { class: "cw-ha-canvas", attrs: { role: "img", "aria-label": "heads on two metrics" } });
  const overlay = h("canvas", { class: "cw-ha-overlay" });
  const scatter = h("div", { class: "cw-ha-scatter" }, [canvas, overlay]);
  const hitOf = (e) => {
    if (!state.scene) return null;
    const box = overlay.getBoundingClientRect();
    return nearestDot(state.scene, e.clientX - box.left, e.clientY - box.top, 9);
  };
  v.listen(overlay, "mousemove", (e) => {
    const dot = hitOf(e);
    const hover = dot ? headOf(dot.i) : null;
    overlay.style.cursor = dot ? "pointer" : "default";
    if (hover?.row !== state.hover?.row || hover?.head !== state.hover?.head) setHover(hover);
  });
  v.listen(overlay, "mouseleave", () => setHover(null));
  v.listen(overlay, "click", (e) => {
    const dot = hitOf(e);
    if (dot) selectHead(headOf(dot.i));
  });
  const heatmap = v.own(
    new Heatmap({
      label: "heads coloured by a metric",
      onHover: (hit) => setHover(hit ? { row: hit.row, head: hit.col } : null),
      onClick: (hit) => selectHead({ row: hit.row, head: hit.col }),
    }),
  );
  const readout = h("div", { class: "cw-readout cw-ha-readout", attrs: { "aria-live": "polite" } });
  const hint = h("div", { class: "cw-hint cw-ha-hint" });

  // ----- examples ------------------------------------------------------------------------
  const exampleMetric = metricSelect("Examples by", "example_metric");
  const examplesHead = h("div", { class: "cw-hint cw-ha-examples-head" });
  const examplesNote = h("div", { class: "cw-hint cw-ha-examples-note" });
  const rows = h("div", { class: "cw-ha-examples", attrs: { role: "list", "aria-label": "examples" } });
  const scales = scaleSelect(v);
  const examplesBar = h("div", { class: "cw-toolbar-row" }, [exampleMetric.el, scales.el, examplesHead]);
  const examplesBox = h("div", { class: "cw-ha-examples-box" }, [examplesBar, examplesNote, rows]);
  let strips = [];

  v.root.append(toolbar, progressRow, v.banner, scatter, heatmap.el, readout, hint, examplesBox);
  v.listen(rows, "click", (e) => {
    const row = e.target.closest?.(".cw-ha-example");
    const item = row && state.examples?.items?.[Number(row.dataset.index)];
    if (!item) return;
    const chosen = model.get("example") || [];
    if (chosen[0] !== item.text || chosen[1] !== item.dest) v.set({ example: [item.text, item.dest] });
  });
  v.listen(rows, "mouseleave", () => {
    state.rowHover = null;
  });

  const headOf = (i) => ({ row: Math.floor(i / nHeads()), head: i % nHeads() });
  function selectHead({ row, head }) {
    const layer = layers()[row];
    if (layer == null) return;
    if (layer === model.get("layer") && head === model.get("head")) return;
    v.set({ layer, head });
  }
  function setHover(hover) {
    state.hover = hover;
    drawHover();
    drawReadout();
  }

  // ----- drawing -------------------------------------------------------------------------
  function points() {
    const out = [];
    const [xm, ym, cm] = ["x_metric", "y_metric", "color_metric"].map((t) => model.get(t));
    for (let row = 0; row < L(); row++) {
      for (let hd = 0; hd < nHeads(); hd++)
        out.push({ x: value(xm, row, hd), y: value(ym, row, hd), c: value(cm, row, hd), label: headName(layers()[row], hd) });
    }
    return out;
  }

  function title() {
    const { done = 0, total = 0 } = scan();
    const over = done === total ? `${count(total)} texts` : `the ${count(done)} texts scanned of ${count(total)}`;
    return `every head: mean over ${over}`;
  }

  function drawScatter() {
    const ctx = canvas.getContext("2d");
    const width = Math.max(360, Math.min(680, v.size ?? 600));
    const row = selectedRow();
    state.scene = scatterScene(
      {
        points: points(),
        xLabel: label(model.get("x_metric")),
        yLabel: label(model.get("y_metric")),
        cLabel: label(model.get("color_metric")),
        xDomain: rangeOf(model.get("x_metric")),
        yDomain: rangeOf(model.get("y_metric")),
        scale: colourScale(),
        theme: v.theme,
        width,
        height: Math.round(Math.min(440, Math.max(300, width * 0.66))),
        title: title(),
        selected: row >= 0 ? row * nHeads() + model.get("head") : null,
      },
      (text, font) => {
        ctx.font = font;
        return ctx.measureText(text).width;
      },
    );
    canvas.cwScene = state.scene;
    paintCanvas(canvas, state.scene);
    scatter.style.width = `${state.scene.width}px`;
    scatter.style.height = `${state.scene.height}px`;
    drawHover();
  }

  function drawHover() {
    if (model.get("mode") === "grid") {
      const row = selectedRow();
      const marks = (layout) =>
        row >= 0 ? [cellBox(layout, row, model.get("head"), { color: v.theme.accent, width: 2.5, inset: 1 })] : [];
      heatmap.setHighlight({ row: state.hover?.row, col: state.hover?.head, marks });
      return;
    }
    if (!state.scene) return;
    const ops = [];
    const i = state.hover ? state.hover.row * nHeads() + state.hover.head : -1;
    const dot = state.scene.dots.find((d) => d.i === i);
    if (dot) ops.push({ type: "circle", x: dot.x, y: dot.y, r: state.scene.radius + 3, stroke: v.theme.fg, width: 1.5, dash: [3, 2] });
    paintCanvas(overlay, { width: state.scene.width, height: state.scene.height, ops });
  }

  function cellValues(layout) {
    if (layout.cell < 26) return [];
    const cm = model.get("color_metric");
    const sc = colourScale();
    const text = (x) => formatValue(x, 2);
    return cellValueOps(layout, L(), nHeads(), { value: (row, hd) => value(cm, row, hd), text, scale: sc, theme: v.theme });
  }

  function drawGrid() {
    const cm = model.get("color_metric");
    const sc = colourScale();
    heatmap.update({
      rows: L(),
      cols: nHeads(),
      paint: (pixels) => {
        for (let row = 0; row < L(); row++)
          for (let hd = 0; hd < nHeads(); hd++) pixels[row * nHeads() + hd] = packRGBA(...sc.rgb(value(cm, row, hd)));
      },
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: nHeads() }, (_, i) => String(i)),
      title: label(cm),
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: Math.max(160, Math.min(460, Math.max(L(), nHeads()) * 30)),
      marks: cellValues,
    });
    drawHover();
  }

  function drawReadout() {
    const shown = state.hover || (selectedRow() >= 0 ? { row: selectedRow(), head: model.get("head") } : null);
    if (!state.values || !shown) {
      readout.textContent = state.values ? "" : "no scan yet";
      return;
    }
    const wanted = [...new Set(["x_metric", "y_metric", "color_metric"].map((t) => model.get(t)))];
    const parts = wanted.map((m) => `${label(m)} ${formatValue(value(m, shown.row, shown.head), 3)}`);
    readout.textContent = `${state.hover ? "" : "selected "}${headName(layers()[shown.row], shown.head)} · ${parts.join(" · ")}`;
    readout.dataset.cwLayer = String(layers()[shown.row]);
    readout.dataset.cwHead = String(shown.head);
  }

  function drawHint() {
    const d = scan().descriptions || {};
    const traits = model.get("mode") === "grid" ? ["color_metric"] : ["x_metric", "y_metric", "color_metric"];
    const wanted = [...new Set(traits.map((t) => model.get(t)))];
    const missing = state.scene && model.get("mode") !== "grid" ? points().length - state.scene.dots.length : 0;
    const lines = wanted.map((m) => `${label(m)}: ${d[m] || m}`);
    if (missing > 0)
      lines.push(
        `${missing} head${missing > 1 ? "s" : ""} without a value of x or y (no text has a destination the metric is defined on) not drawn`,
      );
    hint.replaceChildren(...lines.map((text) => h("div", { text })));
  }

  function drawProgress() {
    const p = model.get("progress") || {};
    const st = model.get("scan_state");
    const total = p.total || scan().total || 0;
    const done = p.done ?? scan().done ?? 0;
    bar.style.width = `${total ? (100 * done) / total : 0}%`;
    progressBar.setAttribute("aria-valuemax", String(total));
    progressBar.setAttribute("aria-valuenow", String(done));
    const text = `texts ${count(done)} of ${count(total)}`;
    if (st === "done") progressText.textContent = `scanned ${count(total)} texts`;
    else if (v.standalone) progressText.textContent = `saved with ${text} scanned`;
    else progressText.textContent = st === "running" ? `scanning: ${text}` : `stopped at ${text}`;
    progressBar.hidden = st === "done";
    stopButton.hidden = v.standalone || st === "done";
    stopButton.textContent = st === "running" ? "Stop" : "Resume";
    stopButton.title =
      st === "running"
        ? "stop the scan after the batch running (the texts scanned so far stay)"
        : "continue the scan from where it stopped";
  }

  function syncControls() {
    const ms = metrics();
    xSelect.sync(ms);
    ySelect.sync(ms);
    cSelect.sync(ms);
    const patternMetrics = ms.filter((m) => (scan().pattern_metrics || ms).includes(m));
    exampleMetric.sync(patternMetrics);
    exampleMetric.el.hidden = !patternMetrics.length;
    const grid = model.get("mode") === "grid";
    for (const b of modeButtons) b.setAttribute("aria-pressed", String(b.dataset.mode === model.get("mode")));
    for (const s of [xSelect, ySelect]) {
      s.select.disabled = grid;
      s.select.title = grid ? "the grid shows the colour metric (switch to Scatter for x and y)" : "";
    }
    layerSelect.set(numberOptions(layers()), model.get("layer"));
    headSelect.set(indexOptions(nHeads()), model.get("head"));
  }

  function drawPlot() {
    const grid = model.get("mode") === "grid";
    scatter.hidden = grid || !state.values;
    heatmap.el.hidden = !grid || !state.values;
    if (!state.values) return;
    if (grid) drawGrid();
    else drawScatter();
  }

  // ----- examples ------------------------------------------------------------------------
  function drawExamples() {
    const p = state.examples;
    const want = headName(model.get("layer"), model.get("head"));
    const held = p ? headName(p.layer, p.head) : null;
    const metricLabel = label(p?.metric || model.get("example_metric"));
    const stale = p && (held !== want || p.metric !== model.get("example_metric"));
    let note = "";
    if (stale && v.standalone) {
      const by = p.metric !== model.get("example_metric") ? ` by ${label(model.get("example_metric"))}` : "";
      note = `examples of ${want}${by} need the kernel: this page holds ${held}'s by ${metricLabel}`;
    } else if (p && !hasData(p)) note = p.note ? `${held}: ${p.note}` : "";
    examplesNote.textContent = note;
    examplesNote.hidden = !note;
    const showRows = !!(state.stack && p && !(stale && v.standalone));
    rows.hidden = !showRows;
    if (!p) {
      examplesHead.textContent = "";
      return;
    }
    const { total = 0 } = scan();
    const over = p.scanned > 0 && p.scanned < total ? ` (from the ${count(p.scanned)} of ${count(total)} texts scanned then)` : "";
    const colour = "colour: attention from the outlined destination (hover a token for its own row)";
    examplesHead.textContent = `${held}: one text per decile of its per-text ${metricLabel}${over}; ${colour}; click a text to open it`;
    if (stale && !v.standalone) examplesHead.textContent = `${held}'s examples (computing ${want}'s…)`;
    if (!showRows) return;
    const chosen = model.get("example") || [];
    (p.items || []).forEach((item, i) => {
      const row = rows.children[i];
      row?.classList.toggle("cw-ha-example-selected", chosen.length === 2 && chosen[0] === item.text && chosen[1] === item.dest);
      colourStrip(i, state.rowHover?.example === i ? state.rowHover.token : null);
    });
  }

  /** Build the rows of the examples held (their token strips), once per payload. */
  function buildRows() {
    for (const s of strips) s.destroy();
    strips = [];
    const p = state.examples;
    if (!p || !state.stack) {
      rows.replaceChildren();
      return;
    }
    const items = p.items || [];
    rows.replaceChildren(
      ...items.map((item, i) => {
        const strip = new TokenStrip({
          onHover: (token) => {
            state.rowHover = token == null ? null : { example: i, token };
            colourStrip(i, token);
          },
        });
        strip.setTokens((p.tokens?.[i] || []).slice(0, item.length));
        strip.el.setAttribute("aria-label", `tokens of text ${item.text}`);
        strips.push(strip);
        const labelBox = h("div", { class: "cw-ha-example-label" }, [
          h("span", { class: "cw-ha-decile", text: decileLabel(item.decile) }),
          h("span", {
            class: "cw-ha-value",
            text: formatValue(item.value, 3),
            attrs: { title: `${label(p.metric)} of text ${item.text}` },
          }),
          h("span", { class: "cw-ha-text-index", text: `text ${item.text}` }),
        ]);
        return h(
          "div",
          {
            class: "cw-ha-example",
            attrs: { role: "listitem", "data-index": i, "data-text": item.text, "data-dest": item.dest, title: "click to open this text" },
          },
          [labelBox, strip.el],
        );
      }),
    );
    drawExamples();
    for (let i = 0; i < strips.length; i++) scrollToDest(i);
  }

  /** Colour example i's strip by the attention row of token `token` (default: the destination). */
  function colourStrip(i, token) {
    const strip = strips[i];
    const item = state.examples?.items?.[i];
    if (!strip || !item || !state.stack) return;
    const from = token ?? item.dest;
    const weights = state.stack.rowValues(i, from).subarray(0, item.length);
    strip.setWeights(weights, tokenScale(i, from), from, false);
    strip.spans.forEach((span, j) => {
      span.classList.toggle("cw-ha-dest", j === item.dest);
    });
  }

  function scrollToDest(i) {
    const strip = strips[i];
    const item = state.examples?.items?.[i];
    const span = strip?.spans[item?.dest];
    if (!span || strip.el.scrollHeight <= strip.el.clientHeight) return;
    strip.el.scrollTop = Math.max(0, span.offsetTop - strip.el.clientHeight / 2);
  }

  const inflate = newestInflated();
  function startExamples() {
    const p = model.get("examples");
    const show = (plain) => {
      try {
        state.stack = hasData(plain) ? new CodeStack(plain) : null;
        v.error("", "examples");
      } catch (err) {
        state.stack = null;
        v.error(`could not read the examples: ${err.message}`, "examples");
      }
      state.examples = p && typeof p === "object" && p.layer != null ? p : null;
      state.rowHover = null;
      buildRows();
      drawExamples();
      v.drawn("examples");
    };
    inflate(p, show, (err) => v.error(`could not inflate the examples: ${err.message}`, "examples"));
  }

  // ----- the whole picture ---------------------------------------------------------------
  function draw() {
    syncControls();
    drawProgress();
    drawPlot();
    drawReadout();
    drawHint();
    drawExamples();
    v.drawn("all");
  }

  function start() {
    const p = scan();
    if (!hasData(p)) {
      state.values = null;
    } else {
      try {
        const [M, nl, nh] = p.shape;
        if (M * nl * nh === 0) throw new RangeError(`scan has shape ${JSON.stringify(p.shape)}`);
        state.values = floatValues(p);
        v.error("", "decode");
      } catch (err) {
        state.values = null;
        v.error(`could not read the scan: ${err.message}`, "decode");
      }
    }
    draw();
  }

  v.onPayloads("scan", start);
  v.on("change:examples", startExamples);
  v.on("change:x_metric change:y_metric change:color_metric change:mode", () => {
    state.hover = null;
    draw();
  });
  v.on("change:layer change:head", () => {
    syncControls();
    drawPlot();
    drawReadout();
    drawExamples();
    v.drawn("select");
  });
  v.on("change:example_metric", () => {
    syncControls();
    drawExamples();
  });
  v.on("change:example", () => {
    drawExamples();
    v.drawn("example");
  });
  v.on("change:progress change:scan_state", () => {
    drawProgress();
    v.drawn("progress");
  });
  startExamples();

  const move = (dl, dh) => {
    const row = selectedRow() + dl;
    const hd = model.get("head") + dh;
    if (row >= 0 && row < L() && hd >= 0 && hd < nHeads()) selectHead({ row, head: hd });
  };
  return {
    start,
    draw,
    size: (width) => Math.max(360, Math.min(680, width - 20)),
    busy: () => (model.get("busy") ? `computing the examples of ${headName(model.get("layer"), model.get("head"))}…` : ""),
    keys: {
      ArrowRight: () => move(0, 1),
      ArrowLeft: () => move(0, -1),
      ArrowDown: () => move(1, 0),
      ArrowUp: () => move(-1, 0),
    },
    marks: () => ({
      layer: model.get("layer"),
      head: model.get("head"),
      mode: model.get("mode"),
      x: model.get("x_metric"),
      y: model.get("y_metric"),
      color: model.get("color_metric"),
      points: state.scene && model.get("mode") !== "grid" ? state.scene.dots.length : "",
      examples: rows.hidden ? 0 : (state.examples?.items || []).length,
      examplesHead: state.examples ? headName(state.examples.layer, state.examples.head) : "",
      example: (model.get("example") || []).join(","),
      scanState: model.get("scan_state"),
      done: scan().done ?? "",
      total: scan().total ?? "",
    }),
  };
});
