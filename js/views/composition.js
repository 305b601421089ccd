// CompositionDiagram view: Q/K/V composition between heads as a node-link graph (SVG) or as a
// (layer, head) x (layer, head) heatmap (canvas), a threshold slider, raw or baseline-corrected
// scores, hover read-out, click to select a head or a pair, and the selected pair's patterns.
//
// The kernel sends raw float32 scores [3, L, H, L, H] (NaN where undefined or not computed);
// threshold, baseline correction and the view switch are drawn here without the kernel.

import { CodeStack, float32Of } from "../lib/decode.js";
import { button, errorBanner, h, throttle } from "../lib/controls.js";
import {
  edgePath, edgeWidth, flatHeads, graphLayout, pairIndex, rawDomain, scoreRange, shiftThreshold, sliderStep, svg, visibleEdges,
} from "../lib/graph.js";
import { Heatmap } from "../lib/heatmap.js";
import { displayToken, truncate } from "../lib/layout.js";
import { download, safeName, savePNG, saveSVG } from "../lib/save.js";
import { formatValue, makeScale, niceTicks, packRGBA, readableText } from "../lib/scales.js";
import { readTheme, watchTheme } from "../lib/theme.js";

const KINDS = ["Q", "K", "V"];
const KIND_TEXT = { Q: "Q-composition: the later head's queries read the earlier head's output", K: "K-composition: the later head's keys read it", V: "V-composition: its values read it (a virtual head)" };
const MAX_EDGES = 600; // the graph draws at most this many edges (the strongest)
/** [r, g, b] of a CSS colour given as #rgb, #rrggbb or rgb(...); mid-grey when unreadable. */
function hexOrRgb(css) {
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(String(css).trim());
  if (hex) {
    const v = hex[1].length === 3 ? hex[1].split("").map((c) => c + c).join("") : hex[1];
    return [0, 2, 4].map((i) => parseInt(v.slice(i, i + 2), 16));
  }
  const m = /rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)/.exec(String(css));
  return m ? [+m[1], +m[2], +m[3]] : [128, 128, 128];
}
const quote = (s) => `“${truncate(displayToken(s), 20)}”`;

export function render({ model, el }) {
  const standalone = model.standalone === true;
  const root = h("div", { class: "cw-root cw-composition", attrs: { tabindex: 0, "data-cw-kind": "composition" } });
  el.append(root);
  let theme = readTheme(root);
  const state = { values: null, L: 0, H: 0, hover: null, threshold: model.get("threshold"), draws: 0, localError: "", shown: 0, passing: 0 };

  // ----- controls ------------------------------------------------------------------------
  const kindButtons = KINDS.map((k) =>
    h("button", { class: "cw-button cw-seg", type: "button", text: k, title: KIND_TEXT[k], attrs: { "aria-pressed": "false", "data-kind": k }, on: { click: () => setTrait({ kind: k }) } }),
  );
  const kindGroup = h("span", { class: "cw-seg-group", attrs: { role: "group", "aria-label": "composition kind" } }, kindButtons);
  const baselineBox = h("input", { type: "checkbox", attrs: { "aria-label": "baseline-corrected scores" } });
  baselineBox.addEventListener("change", () => {
    const on = baselineBox.checked;
    const next = shiftThreshold(state.threshold, model.get("baseline_value") || 0, on);
    state.threshold = next;
    setTrait({ baseline: on, threshold: next });
  });
  const baselineField = h("label", { class: "cw-field", title: "subtract what random matrices of these shapes already score" }, [baselineBox, h("span", { class: "cw-field-label", text: "minus baseline" })]);
  const slider = h("input", { type: "range", class: "cw-slider", attrs: { "aria-label": "threshold" } });
  const sliderText = h("span", { class: "cw-slider-value" });
  const sendThreshold = throttle((v) => setTrait({ threshold: v }), 120);
  slider.addEventListener("input", () => {
    state.threshold = Number(slider.value);
    sliderText.textContent = formatValue(state.threshold, 3);
    draw();
    sendThreshold(state.threshold);
  });
  const thresholdField = h("label", { class: "cw-field", title: "hide pairs scoring below this" }, [h("span", { class: "cw-field-label", text: "threshold" }), slider, sliderText]);
  const viewSelect = h("select", { class: "cw-select", attrs: { "aria-label": "view" } }, [
    h("option", { value: "graph", text: "graph" }),
    h("option", { value: "matrix", text: "matrix" }),
  ]);
  viewSelect.addEventListener("change", () => setTrait({ view: viewSelect.value }));
  const busy = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  busy.hidden = true;
  const fileBase = () => safeName(`composition_${model.get("kind")}${model.get("baseline") ? "_corrected" : ""}`);
  const pngButton = button("PNG", "save the diagram as PNG", () => savePicturePNG());
  const svgButton = button("SVG", "save the diagram as SVG", () => saveSVG(pictureSVG(), `${fileBase()}.svg`));
  const banner = errorBanner();
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    kindGroup, baselineField, thresholdField, h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "view" }), viewSelect]),
    busy, h("span", { class: "cw-spacer" }), pngButton, svgButton,
  ]);
  const picture = h("div", { class: "cw-comp-picture" });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const note = h("div", { class: "cw-hint cw-comp-note" });
  const pairBox = h("div", { class: "cw-comp-pair" });
  root.append(toolbar, banner.el, picture, readout, note, pairBox);

  const heatmap = new Heatmap({
    label: "composition scores",
    onHover: (hit) => {
      state.hover = hit ? matrixPair(hit.row, hit.col) : null;
      drawMarks();
    },
    onClick: (hit) => {
      const pair = matrixPair(hit.row, hit.col);
      if (pair && Number.isFinite(pair.raw)) clickPair(pair);
    },
  });
  let graphSvg = null;

  // ----- helpers -------------------------------------------------------------------------
  function setTrait(values) {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  }
  const info = () => model.get("info") || {};
  const layerLabels = () => info().attn_layers || [];
  const kindIndex = () => Math.max(0, KINDS.indexOf(model.get("kind")));
  const offset = () => (model.get("baseline") ? model.get("baseline_value") || 0 : 0);
  const computed = () => (model.get("scores_meta") || {}).computed || [];
  const raw = (l1, h1, l2, h2) => state.values[pairIndex(kindIndex(), l1, h1, l2, h2, state.L, state.H)];
  const headName = (l, hd) => `L${layerLabels()[l]}H${hd}`;
  const selectedPos = () => ({ l: layerLabels().indexOf(model.get("layer")), h: model.get("head") });
  function selectedPairPos() {
    const pair = model.get("selected_pair") || [];
    if (pair.length !== 2) return null;
    const labels = layerLabels();
    return { l1: labels.indexOf(pair[0][0]), h1: pair[0][1], l2: labels.indexOf(pair[1][0]), h2: pair[1][1] };
  }
  function samePair(a, b) {
    return a && b && a.l1 === b.l1 && a.h1 === b.h1 && a.l2 === b.l2 && a.h2 === b.h2;
  }
  function domains() {
    const range = state.values ? scoreRange(state.values, kindIndex(), state.L, state.H) : null;
    const [d0, d1] = rawDomain(range, model.get("baseline_value") || 0);
    const off = offset();
    return { raw: [d0, d1], shown: [d0 - off, d1 - off] };
  }
  function scaleNow() {
    return makeScale("sequential", { dark: theme.dark, domain: domains().shown });
  }
  function matrixPair(row, col) {
    const H = state.H;
    const l1 = Math.floor(row / H);
    const l2 = 1 + Math.floor(col / H);
    const pair = { type: "edge", l1, h1: row % H, l2, h2: col % H };
    pair.raw = raw(pair.l1, pair.h1, pair.l2, pair.h2);
    return pair;
  }
  function clickNode(l, hd) {
    setTrait({ layer: layerLabels()[l], head: hd, selected_pair: [] });
  }
  function clickPair(p) {
    const labels = layerLabels();
    if (samePair(p, selectedPairPos())) {
      setTrait({ selected_pair: [] });
      return;
    }
    // The later (reading) head becomes the selected head, so linked widgets show it.
    setTrait({ selected_pair: [[labels[p.l1], p.h1], [labels[p.l2], p.h2]], layer: labels[p.l2], head: p.h2 });
  }
  function showError() {
    let message = model.get("error") || state.localError;
    const kind = model.get("kind");
    if (!message && standalone && state.values && !computed().includes(kind)) message = `${kind}-composition was not computed when this page was saved`;
    banner.show(message);
  }
  function mark(what) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwView = model.get("view");
    root.dataset.cwCompKind = model.get("kind");
    root.dataset.cwShown = String(state.shown);
    root.dataset.cwThreshold = String(state.threshold);
    root.dataset.cwComputed = computed().join(",");
    root.dataset.cwLayer = String(model.get("layer"));
    root.dataset.cwHead = String(model.get("head"));
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what } }));
  }

  // ----- read-outs -----------------------------------------------------------------------
  function pairText(p) {
    const kind = model.get("kind");
    const base = model.get("baseline_value") || 0;
    const r = raw(p.l1, p.h1, p.l2, p.h2);
    if (!Number.isFinite(r)) return `${headName(p.l1, p.h1)} → ${headName(p.l2, p.h2)} · undefined (the writer must be in an earlier layer)`;
    const shown = model.get("baseline") ? `${kind}-composition ${formatValue(r - base)} (raw ${formatValue(r)} − baseline ${formatValue(base, 3)})` : `${kind}-composition ${formatValue(r)} (baseline ${formatValue(base, 3)})`;
    return `${headName(p.l1, p.h1)} → ${headName(p.l2, p.h2)} · ${shown}`;
  }
  function drawReadout() {
    const hover = state.hover;
    const sel = selectedPairPos();
    let text;
    if (hover && hover.type === "edge") text = pairText(hover);
    else if (hover && hover.type === "node") text = `${headName(hover.l, hover.h)} · click to select this head`;
    else if (sel && sel.l1 >= 0 && sel.l2 >= 0 && state.values) text = `selected: ${pairText(sel)} · click it again to release`;
    else text = state.values ? `selected head ${headName(selectedPos().l, selectedPos().h)} · hover a pair for its score, click to select` : "no scores yet";
    readout.textContent = text;
  }
  function drawNote() {
    const base = model.get("baseline_value") || 0;
    const d = info().d_model;
    const units = model.get("baseline") ? "baseline-corrected (raw − baseline)" : "raw";
    const shownText = model.get("view") === "graph"
      ? `${state.shown} of ${state.passing} pair${state.passing === 1 ? "" : "s"} above the threshold drawn${state.passing > state.shown ? " (the strongest)" : ""}`
      : `${state.shown} pair${state.shown === 1 ? "" : "s"} above the threshold`;
    note.textContent = `${units} scores · baseline ${formatValue(base, 3)}: what random matrices of these shapes score (≈ 1/√d_model = ${formatValue(1 / Math.sqrt(d || 1), 3)}) · ${shownText}`;
  }

  // ----- graph view ----------------------------------------------------------------------
  function buildGraph() {
    const { L, H } = state;
    const lay = graphLayout({ layers: L, heads: H, maxWidth: Math.max(420, Math.min(900, root.clientWidth || 760)) });
    const scale = scaleNow();
    const off = offset();
    const { shown: [s0, s1] } = domains();
    const { edges, passing } = visibleEdges(state.values, kindIndex(), L, H, state.threshold, off, MAX_EDGES);
    state.shown = edges.length;
    state.passing = passing;
    const pos = (l, hd) => lay.nodes[l * H + hd];
    const sel = selectedPos();
    const selPair = selectedPairPos();
    const hover = state.hover;
    const root_ = svg("svg", { xmlns: "http://www.w3.org/2000/svg", width: lay.width, height: lay.height, viewBox: `0 0 ${lay.width} ${lay.height}`, role: "img", "aria-label": `${model.get("kind")}-composition graph`, class: "cw-comp-graph" });
    root_.append(svg("rect", { width: "100%", height: "100%", fill: theme.bgCss }));
    root_.append(svg("text", { x: 6, y: 15, "font-size": 12, "font-weight": 600, "font-family": theme.font, fill: theme.fg }, `${model.get("kind")}-composition${model.get("baseline") ? " (minus baseline)" : ""}`));
    layerLabels().forEach((lab, l) => {
      root_.append(svg("text", { x: lay.left + l * lay.colW, y: lay.top - 10, "text-anchor": "middle", "font-size": 11, "font-family": theme.font, fill: theme.muted }, `layer ${lab}`));
    });
    const edgeGroup = svg("g", { class: "cw-edges", fill: "none" });
    for (const e of edges) {
      const a = pos(e.l1, e.h1);
      const b = pos(e.l2, e.h2);
      const d = edgePath(a.x + lay.radius, a.y, b.x - lay.radius, b.y);
      const isSel = samePair(e, selPair);
      const isHover = hover && hover.type === "edge" && samePair(e, hover);
      const width = edgeWidth(e.value, state.threshold, s1);
      if (isSel || isHover) edgeGroup.append(svg("path", { d, stroke: theme.accent, "stroke-width": width + 4, "stroke-opacity": isSel ? 0.9 : 0.5, "pointer-events": "none" }));
      edgeGroup.append(svg("path", { d, stroke: scale.css(e.value), "stroke-width": width, "stroke-linecap": "round", "stroke-opacity": 0.9, class: "cw-edge", "data-edge": `${e.l1},${e.h1},${e.l2},${e.h2}`, "data-value": e.value, "data-raw": e.raw, "pointer-events": "none" }));
      // a wider invisible stroke to make thin edges easy to hover and click
      edgeGroup.append(svg("path", { d, stroke: "transparent", "stroke-width": Math.max(8, width + 4), class: "cw-edge-hit", "data-edge": `${e.l1},${e.h1},${e.l2},${e.h2}`, "pointer-events": "stroke" }));
    }
    root_.append(edgeGroup);
    const nodeGroup = svg("g", { class: "cw-nodes" });
    for (const n of lay.nodes) {
      const isSel = n.l === sel.l && n.h === sel.h;
      const inPair = selPair && ((n.l === selPair.l1 && n.h === selPair.h1) || (n.l === selPair.l2 && n.h === selPair.h2));
      const g = svg("g", { class: "cw-node", "data-node": `${n.l},${n.h}`, cursor: "pointer" });
      g.append(svg("circle", { cx: n.x, cy: n.y, r: lay.radius, fill: inPair ? theme.accent : theme.bgCss, stroke: isSel ? theme.accent : theme.muted, "stroke-width": isSel ? 3 : 1.2 }));
      if (lay.radius >= 7) g.append(svg("text", { x: n.x, y: n.y + 0.5, "text-anchor": "middle", "dominant-baseline": "central", "font-size": Math.round(lay.radius * 1.1), "font-family": theme.font, fill: inPair ? readableText(hexOrRgb(theme.accent)) : theme.fg, "pointer-events": "none" }, String(n.h)));
      nodeGroup.append(g);
    }
    root_.append(nodeGroup);
    root_.append(svg("text", { x: 6, y: lay.height - 6, "font-size": 10, "font-family": theme.font, fill: theme.muted }, "nodes: heads (number = head index) · edges: earlier head → later head"));
    appendColourBar(root_, { x: lay.plotRight + lay.radius + 64, y: lay.top, h: Math.min(220, Math.max(100, lay.height - lay.top - 30)), scale });
    return root_;
  }

  /** Vertical colour bar with ticks, the baseline and the threshold marked, as SVG. */
  function appendColourBar(parent, { x, y, h: barH, scale }) {
    const [d0, d1] = scale.domain;
    const id = `cwcomp${Math.random().toString(36).slice(2, 8)}`;
    const defs = svg("defs");
    const grad = svg("linearGradient", { id, x1: 0, y1: 0, x2: 0, y2: 1 });
    for (let k = 0; k <= 16; k++) grad.append(svg("stop", { offset: k / 16, "stop-color": scale.css(d1 - ((d1 - d0) * k) / 16) }));
    defs.append(grad);
    parent.append(defs);
    parent.append(svg("rect", { x, y, width: 12, height: barH, fill: `url(#${id})`, stroke: theme.border }));
    const yOf = (v) => y + ((d1 - v) / (d1 - d0)) * barH;
    for (const t of niceTicks(d0, d1, 5)) {
      parent.append(svg("line", { x1: x + 12, y1: yOf(t), x2: x + 16, y2: yOf(t), stroke: theme.muted }));
      parent.append(svg("text", { x: x + 18, y: yOf(t), "dominant-baseline": "central", "font-size": 10, "font-family": theme.font, fill: theme.muted }, formatValue(t, 3)));
    }
    const base = model.get("baseline") ? 0 : model.get("baseline_value") || 0;
    if (base >= d0 && base <= d1) {
      parent.append(svg("line", { x1: x - 4, y1: yOf(base), x2: x + 16, y2: yOf(base), stroke: theme.fg, "stroke-width": 1.5, "stroke-dasharray": "3 2", class: "cw-baseline-mark" }));
      parent.append(svg("text", { x: x - 6, y: yOf(base), "text-anchor": "end", "dominant-baseline": "central", "font-size": 10, "font-family": theme.font, fill: theme.fg }, "baseline"));
    }
    const thr = Math.max(d0, Math.min(d1, state.threshold));
    parent.append(svg("path", { d: `M ${x - 1} ${yOf(thr)} l -6 -4 l 0 8 z`, fill: theme.accent, class: "cw-threshold-mark" }));
  }

  // ----- matrix view ---------------------------------------------------------------------
  function drawMatrix() {
    const { L, H } = state;
    if (L < 2) {
      picture.replaceChildren(h("div", { class: "cw-hint", text: "one attention layer: no head reads another's output" }));
      state.shown = 0;
      return;
    }
    const labels = layerLabels();
    const rows = flatHeads(labels, H, 0, L - 1);
    const cols = flatHeads(labels, H, 1, L);
    const scale = scaleNow();
    const off = offset();
    const bg = theme.bg;
    const nanPx = packRGBA(...scale.nan);
    let shown = 0;
    heatmap.update({
      rows: rows.length,
      cols: cols.length,
      paint: (pixels) => {
        for (let r = 0; r < rows.length; r++) {
          for (let c = 0; c < cols.length; c++) {
            const v0 = raw(rows[r].l, rows[r].h, cols[c].l, cols[c].h);
            let px = nanPx;
            if (Number.isFinite(v0)) {
              const v = v0 - off;
              const [cr, cg, cb] = scale.rgb(v);
              if (v >= state.threshold) {
                shown++;
                px = packRGBA(cr, cg, cb);
              } else {
                // below the threshold: faded towards the background
                px = packRGBA(Math.round(bg[0] * 0.8 + cr * 0.2), Math.round(bg[1] * 0.8 + cg * 0.2), Math.round(bg[2] * 0.8 + cb * 0.2));
              }
            }
            pixels[r * cols.length + c] = px;
          }
        }
      },
      rowLabels: rows.map((x) => x.label),
      colLabels: cols.map((x) => x.label),
      title: `${model.get("kind")}-composition${model.get("baseline") ? " (minus baseline)" : ""}`,
      yTitle: "writer ↓",
      xTitle: "reader →",
      scale,
      theme,
      maxPlot: Math.max(240, Math.min(560, (root.clientWidth || 700) - 220)),
    });
    state.shown = shown;
    state.passing = shown;
    drawBarMarks();
    if (!picture.contains(heatmap.el)) picture.replaceChildren(heatmap.el);
  }

  function barGeometry() {
    const { layout } = heatmap.scene;
    const barH = Math.max(120, layout.plotH);
    return { x: layout.barX, y: layout.top, h: barH };
  }

  /** Baseline and threshold marks on the heatmap's colour bar (canvas), and as SVG text. */
  function barMarkOps() {
    const scale = scaleNow();
    const [d0, d1] = scale.domain;
    const { x, y, h: barH } = barGeometry();
    const yOf = (v) => y + ((d1 - v) / (d1 - d0)) * barH;
    const ops = [];
    const base = model.get("baseline") ? 0 : model.get("baseline_value") || 0;
    if (base >= d0 && base <= d1) ops.push({ kind: "baseline", y: yOf(base), x });
    ops.push({ kind: "threshold", y: yOf(Math.max(d0, Math.min(d1, state.threshold))), x });
    return ops;
  }
  function drawBarMarks() {
    const ctx = heatmap.canvas.getContext("2d");
    const dpr = globalThis.devicePixelRatio || 1;
    ctx.save();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    for (const op of barMarkOps()) {
      if (op.kind === "baseline") {
        ctx.strokeStyle = theme.fg;
        ctx.lineWidth = 1.5;
        ctx.setLineDash([3, 2]);
        ctx.beginPath();
        ctx.moveTo(op.x - 4, op.y);
        ctx.lineTo(op.x + 16, op.y);
        ctx.stroke();
        ctx.setLineDash([]);
      } else {
        ctx.fillStyle = theme.accent;
        ctx.beginPath();
        ctx.moveTo(op.x - 1, op.y);
        ctx.lineTo(op.x - 7, op.y - 4);
        ctx.lineTo(op.x - 7, op.y + 4);
        ctx.closePath();
        ctx.fill();
      }
    }
    ctx.restore();
  }
  function barMarksSVG() {
    return barMarkOps()
      .map((op) => (op.kind === "baseline"
        ? `<line x1="${op.x - 4}" y1="${op.y.toFixed(2)}" x2="${op.x + 16}" y2="${op.y.toFixed(2)}" stroke="${theme.fg}" stroke-width="1.5" stroke-dasharray="3 2"/>`
        : `<path d="M ${op.x - 1} ${op.y.toFixed(2)} l -6 -4 l 0 8 z" fill="${theme.accent}"/>`))
      .join("\n");
  }

  // ----- marks (hover / selection) on the matrix ------------------------------------------
  function drawMarks() {
    if (model.get("view") === "graph") {
      draw();
      return;
    }
    const H = state.H;
    const hover = state.hover;
    const sel = selectedPairPos();
    heatmap.setHighlight({
      row: hover ? hover.l1 * H + hover.h1 : null,
      col: hover ? (hover.l2 - 1) * H + hover.h2 : null,
    });
    if (sel && sel.l1 >= 0 && sel.l2 >= 1 && heatmap.scene) {
      const { left, top, cell } = heatmap.scene.layout;
      const ctx = heatmap.overlay.getContext("2d");
      ctx.save();
      ctx.strokeStyle = theme.accent;
      ctx.lineWidth = 2;
      ctx.strokeRect(left + ((sel.l2 - 1) * H + sel.h2) * cell - 1, top + (sel.l1 * H + sel.h1) * cell - 1, Math.max(cell, 2) + 2, Math.max(cell, 2) + 2);
      ctx.restore();
    }
    drawReadout();
  }

  // ----- pair panel ----------------------------------------------------------------------
  const pairMaps = [0, 1, 2].map((i) => new Heatmap({
    label: ["first head's pattern", "second head's pattern", "virtual head's pattern"][i],
    onHover: (hit) => pairHover(i, hit),
  }));
  const pairReadout = h("div", { class: "cw-readout" });
  let pairStack = null;
  function pairHover(i, hit) {
    pairMaps.forEach((m, j) => m.setHighlight(hit ? { row: hit.row, col: hit.col } : {}));
    if (!hit || !pairStack) {
      pairReadout.textContent = "hover a cell: query row, key column";
      return;
    }
    const toks = model.get("str_tokens") || [];
    const parts = pairTitles().map((t, j) => `${t} ${formatValue(pairStack.value(j, hit.row, hit.col), 3)}`);
    pairReadout.textContent = `query ${hit.row} ${quote(toks[hit.row] ?? hit.row)} → key ${hit.col} ${quote(toks[hit.col] ?? hit.col)} · ${parts.join(" · ")} (≈, uint8)`;
  }
  function pairTitles() {
    const pair = (model.get("pair_meta") || {}).pair || [];
    if (pair.length !== 2) return ["", "", ""];
    const a = `L${pair[0][0]}H${pair[0][1]}`;
    const b = `L${pair[1][0]}H${pair[1][1]}`;
    return [a, b, `virtual ${b}·${a}`];
  }
  function drawPair() {
    const meta = model.get("pair_meta") || {};
    const want = model.get("selected_pair") || [];
    pairStack = null;
    if (want.length !== 2) {
      pairBox.replaceChildren(h("div", { class: "cw-hint", text: "Click an edge to see both heads' attention patterns and their virtual head (the later pattern times the earlier one)." }));
      return;
    }
    if (meta.reason === "no tokens") {
      pairBox.replaceChildren(h("div", { class: "cw-hint", text: "Pass prompt= or tokens= to CompositionDiagram to see the selected pair's patterns and their virtual head." }));
      return;
    }
    if (JSON.stringify(meta.pair) !== JSON.stringify(want) || !meta.shape) {
      const why = standalone ? "this page holds only the pair selected when it was saved (no kernel to compute others)" : "computing the pair's patterns…";
      pairBox.replaceChildren(h("div", { class: "cw-hint", text: why }));
      return;
    }
    try {
      pairStack = new CodeStack(model.get("pair_patterns"), meta);
    } catch (err) {
      pairBox.replaceChildren(h("div", { class: "cw-error", text: `could not read the pair's patterns: ${err.message}` }));
      return;
    }
    const toks = model.get("str_tokens") || [];
    const scale = makeScale("sequential", { dark: theme.dark });
    const lut = scale.lut(pairStack);
    const titles = pairTitles();
    const size = Math.max(120, Math.min(240, ((root.clientWidth || 760) - 40) / 3 - 170));
    pairMaps.forEach((m, i) => {
      m.update({
        rows: pairStack.rows,
        cols: pairStack.cols,
        paint: (pixels) => pairStack.paint(i, lut, pixels, 0),
        rowLabels: toks,
        colLabels: toks,
        title: titles[i],
        yTitle: "query ↓",
        xTitle: "key →",
        scale: i === 2 ? scale : null,
        theme,
        maxPlot: size,
      });
    });
    pairReadout.textContent = "hover a cell: query row, key column";
    const row = h("div", { class: "cw-comp-pair-row" }, pairMaps.map((m) => m.el));
    pairBox.replaceChildren(h("div", { class: "cw-field-label", text: "Selected pair on the prompt: attention patterns and the virtual head" }), row, pairReadout);
  }

  // ----- drawing -------------------------------------------------------------------------
  function syncControls() {
    const kind = model.get("kind");
    kindButtons.forEach((b) => {
      const on = b.dataset.kind === kind;
      b.classList.toggle("cw-seg-on", on);
      b.setAttribute("aria-pressed", on ? "true" : "false");
    });
    baselineBox.checked = !!model.get("baseline");
    viewSelect.value = model.get("view");
    const { shown: [s0, s1] } = domains();
    const lo = Math.min(s0, state.threshold);
    const hi = Math.max(s1, state.threshold);
    slider.min = String(lo);
    slider.max = String(hi);
    slider.step = String(sliderStep(lo, hi));
    slider.value = String(state.threshold);
    sliderText.textContent = formatValue(state.threshold, 3);
  }

  function draw() {
    if (!state.values) return;
    if (model.get("view") === "graph") {
      graphSvg = buildGraph();
      picture.replaceChildren(graphSvg);
    } else {
      drawMatrix();
      drawMarks();
    }
    drawReadout();
    drawNote();
    mark("main");
  }

  function onScores() {
    const meta = model.get("scores_meta") || {};
    if (!meta.shape) {
      // nothing computed yet (a deferred first refresh): say so rather than draw an empty frame
      state.values = null;
      picture.replaceChildren(h("div", { class: "cw-hint cw-comp-wait", text: "computing composition scores…" }));
      syncControls();
      showError();
      return;
    }
    try {
      const [K, L, H] = meta.shape || [0, 0, 0];
      const values = float32Of(model.get("scores"));
      if (values.length !== K * L * H * L * H || !L) throw new RangeError(`scores hold ${values.length} values; shape ${JSON.stringify(meta.shape)}`);
      state.values = values;
      state.L = L;
      state.H = H;
      state.localError = "";
    } catch (err) {
      state.values = null;
      state.localError = `could not read the scores: ${err.message}`;
    }
    syncControls();
    showError();
    draw();
  }

  // ----- events on the graph ---------------------------------------------------------------
  const target = (e) => {
    const edge = e.target.closest && e.target.closest("[data-edge]");
    if (edge) {
      const [l1, h1, l2, h2] = edge.dataset.edge.split(",").map(Number);
      return { type: "edge", l1, h1, l2, h2 };
    }
    const node = e.target.closest && e.target.closest("[data-node]");
    if (node) {
      const [l, hd] = node.dataset.node.split(",").map(Number);
      return { type: "node", l, h: hd };
    }
    return null;
  };
  const sameHover = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const onOver = (e) => {
    if (model.get("view") !== "graph") return;
    const t = target(e);
    if (!sameHover(t, state.hover)) {
      state.hover = t;
      draw();
    }
  };
  const onLeave = () => {
    if (model.get("view") === "graph" && state.hover) {
      state.hover = null;
      draw();
    }
  };
  const onClick = (e) => {
    if (model.get("view") !== "graph") return;
    const t = target(e);
    if (!t) return;
    if (t.type === "node") clickNode(t.l, t.h);
    else clickPair(t);
  };
  picture.addEventListener("mouseover", onOver);
  picture.addEventListener("mouseleave", onLeave);
  picture.addEventListener("click", onClick);

  // ----- saving --------------------------------------------------------------------------
  function pictureSVG() {
    if (model.get("view") === "graph") return new XMLSerializer().serializeToString(buildGraph());
    return heatmap.toSVG().replace("</svg>", `${barMarksSVG()}\n</svg>`);
  }
  function savePicturePNG() {
    if (model.get("view") !== "graph") {
      savePNG(heatmap.toCanvas(), `${fileBase()}.png`);
      return;
    }
    const text = pictureSVG();
    const image = new Image();
    const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
    image.onload = () => {
      const dpr = Math.max(2, globalThis.devicePixelRatio || 1);
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(image.width * dpr);
      canvas.height = Math.round(image.height * dpr);
      const ctx = canvas.getContext("2d");
      ctx.scale(dpr, dpr);
      ctx.drawImage(image, 0, 0);
      URL.revokeObjectURL(url);
      savePNG(canvas, `${fileBase()}.png`);
    };
    image.onerror = () => {
      URL.revokeObjectURL(url);
      download(new Blob([text], { type: "image/svg+xml" }), `${fileBase()}.svg`);
    };
    image.src = url;
  }

  // ----- model -> view -------------------------------------------------------------------
  const onThreshold = () => {
    const v = model.get("threshold");
    if (v !== state.threshold) {
      state.threshold = v;
      syncControls();
      draw();
    }
  };
  const onControls = () => {
    state.threshold = model.get("threshold");
    state.hover = null;
    syncControls();
    showError();
    draw();
  };
  const onBusy = () => {
    busy.hidden = !model.get("busy");
    busy.textContent = `computing ${model.get("kind")}-composition…`;
  };
  const onSelection = () => {
    draw();
  };
  const handlers = {
    "change:scores_meta": onScores,
    "change:threshold": onThreshold,
    "change:kind": onControls,
    "change:baseline": onControls,
    "change:view": onControls,
    "change:layer": onSelection,
    "change:head": onSelection,
    "change:selected_pair": () => {
      draw();
      drawPair();
    },
    "change:pair_meta": drawPair,
    "change:error": showError,
    "change:busy": onBusy,
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);

  const onKey = (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    if (e.key === "Escape") setTrait({ selected_pair: [] });
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    draw();
    drawPair();
  });
  let lastWidth = 0;
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    if (width > 0 && Math.abs(width - lastWidth) > 40) {
      lastWidth = width;
      draw();
      drawPair();
    }
  }) : null;
  if (resize) resize.observe(root);

  onBusy();
  onScores();
  drawPair();

  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    picture.removeEventListener("mouseover", onOver);
    picture.removeEventListener("mouseleave", onLeave);
    picture.removeEventListener("click", onClick);
    root.removeEventListener("keydown", onKey);
    sendThreshold.cancel();
    stopTheme();
    if (resize) resize.disconnect();
    heatmap.destroy();
    pairMaps.forEach((m) => m.destroy());
    root.remove();
  };
}
