// OVCircuit view: the full OV circuit of a head on a token subset (source token x out token logit),
// diagonal outlined, beside its eigenvalue spectrum on the complex plane, copying score and
// top-k accuracy. Every head of the layer arrives at once, so switching head needs no kernel.

import { h } from "../lib/controls.js";
import { exactValue, floatValues, hasData, headStack } from "../lib/decode.js";
import { Heatmap } from "../lib/heatmap.js";
import { diagonalOps } from "../lib/heatmap-scene.js";
import { headKeys, headToolbar, setHead } from "../lib/heads.js";
import { heldLayer } from "../lib/held.js";
import { quote } from "../lib/layout.js";
import { sameRevision } from "../lib/payloads.js";
import { planeScene } from "../lib/plane.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { CellSelection } from "../lib/selection.js";
import { composeScenes, nearestDot, paintCanvas } from "../lib/scene.js";
import { defineView } from "../lib/view.js";

const percent = (x) => (x == null ? null : `${(100 * x).toFixed(1)} %`);

defineView("ov", (v) => {
  const { model } = v;
  const state = { eigHover: null, stack: null, plane: null };
  const cells = new CellSelection(() => drawSelection());
  const head = () => model.get("head");
  const shown = () => v.payloads("ov", "eigenvalues"); // one refresh's matrix and spectrum
  const layer = () => shown()?.ov.layer ?? model.get("layer");
  // an exported page asked (through a link) for a layer it does not hold: says so instead of drawing
  const held = heldLayer(v, { held: () => shown()?.ov.layer, parts: () => [main, readout, toolbar.criterion], what: "OV circuit" });

  const toolbar = headToolbar(v, {
    layer: () => (held.stale ? model.get("layer") : layer()),
    onHead: (hd) => setHead(v, hd) || draw(),
    save: { what: "OV view", picture, name: () => `ov_L${layer()}H${head()}` },
    criterion: true,
  });
  const heatmap = v.own(new Heatmap({ label: "full OV circuit", ...cells.on("ov") }));
  const planeCanvas = h("canvas", { class: "cw-plane", attrs: { role: "img", "aria-label": "eigenvalues on the complex plane" } });
  const stat = (label, title) => {
    const value = h("span", { class: "cw-stat-value" });
    return { value, row: h("div", { class: "cw-stat", attrs: { title } }, [h("span", { class: "cw-stat-label", text: label }), value]) };
  };
  const copying = stat(
    "copying score",
    "Σλ / Σ|λ| over the eigenvalues of W_E W_V W_O W_U: 1 means the head copies the token it attends to",
  );
  const top1 = stat("top-1 accuracy", "share of all tokens whose own logit is the largest of their row of the full OV circuit");
  const top5 = stat("top-5 accuracy", "share of all tokens whose own logit is among the 5 largest of their row");
  const eigNote = h("div", { class: "cw-hint cw-eig-note" });
  const side = h("div", { class: "cw-ov-side" }, [
    planeCanvas,
    eigNote,
    h("div", { class: "cw-stats" }, [copying.row, top1.row, top5.row]),
  ]);
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const caption = h("div", { class: "cw-hint cw-ov-caption" });
  const main = h("div", { class: "cw-ov-main" }, [h("div", { class: "cw-ov-map" }, [heatmap.el, caption]), side]);
  v.root.append(toolbar.el, v.banner, toolbar.criterion, held.el, main, readout);

  /** Eigenvalues [[re, im], ...] of the head shown. */
  function eigenPoints() {
    const eig = shown()?.eigenvalues;
    if (!hasData(eig)) return [];
    const [nHeads, d] = eig.shape;
    if (head() >= nHeads) return [];
    const values = floatValues(eig);
    return Array.from({ length: d }, (_, i) => [values[(head() * d + i) * 2], values[(head() * d + i) * 2 + 1]]);
  }

  function draw() {
    const t0 = performance.now();
    toolbar.headSelect.select.value = String(head());
    try {
      state.stack = headStack(shown()?.ov, head());
      v.error("", "decode");
    } catch (err) {
      state.stack = null;
      v.error(`could not read the OV payload: ${err.message}`, "decode");
    }
    const stack = state.stack;
    if (!stack) return;
    const labels = shown().ov.labels || [];
    caption.textContent = shown().ov.caption || "";
    const scale = makeScale("diverging", { dark: v.theme.dark, domain: [stack.lo, stack.hi] });
    const lut = scale.lut(stack);
    heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(0, lut, pixels, 0),
      rowLabels: labels,
      colLabels: labels,
      title: `Full OV circuit, layer ${layer()} head ${head()}`,
      yTitle: "source ↓",
      xTitle: "out (logit) →",
      scale,
      theme: v.theme,
      maxPlot: v.size,
      marks: (layout) => diagonalOps(layout, Math.min(stack.rows, stack.cols), v.theme),
    });
    drawPlaneAndStats();
    drawSelection();
    v.drawn("ov", t0);
  }

  function drawPlaneAndStats() {
    const points = eigenPoints();
    state.plane = planeScene({ points, size: 250, theme: v.theme, title: "Eigenvalues of W_E W_OV W_U", ring: state.eigHover?.i });
    paintCanvas(planeCanvas, state.plane);
    const n = state.plane.dots.length;
    eigNote.textContent = n
      ? `${n} eigenvalues (d_head × d_head form), shown as λ / max|λ|, max|λ| = ${formatValue(state.plane.scale)}`
      : "no eigenvalues";
    // copying comes with the spectrum; top-k accuracy arrives later, and only counts for this layer
    const stats = (model.get("stats") || [])[head()] || {};
    const current = stats.layer === layer();
    const copy = shown()?.eigenvalues.copying?.[head()] ?? (current ? stats.copying : null);
    copying.value.textContent = copy == null ? "n/a" : formatValue(copy, 4);
    copying.value.dataset.value = copy == null ? "" : String(copy);
    const pending = v.standalone ? "not computed when saved" : model.get("progress") ? "computing…" : "n/a";
    for (const [item, key] of [
      [top1, "top1"],
      [top5, "top5"],
    ]) {
      const value = current ? stats[key] : null;
      item.value.textContent = percent(value) ?? pending;
      item.value.dataset.value = value == null ? "" : String(value);
    }
  }

  function drawSelection() {
    const stack = state.stack;
    const sel = cells.current;
    heatmap.setHighlight(cells.highlight("ov"));
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (state.eigHover) {
      const [re, im] = state.eigHover.point;
      parts.push(
        `λ${state.eigHover.i + 1} = ${formatValue(re)} ${im < 0 ? "−" : "+"} ${formatValue(Math.abs(im))}i`,
        `|λ| = ${formatValue(Math.hypot(re, im))}`,
      );
    } else if (stack && sel && sel.row < stack.rows && sel.col < stack.cols) {
      const { labels = [], ids = [] } = shown().ov;
      const values = model.get("values");
      const exact = sameRevision(values, shown().ov) ? exactValue(values, head(), sel.row, sel.col) : null;
      const value = exact == null ? `≈${formatValue(stack.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      const tag = sel.row === sel.col ? " (diagonal: copying)" : "";
      parts.push(
        `source ${quote(labels[sel.row] ?? sel.row)} (id ${ids[sel.row]}) → out ${quote(labels[sel.col] ?? sel.col)} (id ${ids[sel.col]})`,
        `logit ${value}${tag}`,
      );
      if (exact != null) readout.dataset.value = String(exact);
      readout.dataset.row = String(sel.row);
      readout.dataset.col = String(sel.col);
    } else {
      parts.push(stack ? `${stack.rows} tokens · hover a cell (click to lock) or an eigenvalue` : "no picture yet");
    }
    if (cells.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }

  function picture() {
    return heatmap.scene && state.plane ? composeScenes([heatmap.scene, state.plane]) : null;
  }

  const hoverEigen = (next) => {
    if (next?.i === state.eigHover?.i) return;
    state.eigHover = next;
    drawPlaneAndStats();
    drawSelection();
  };
  v.listen(planeCanvas, "mousemove", (e) => {
    if (!state.plane) return;
    const box = planeCanvas.getBoundingClientRect();
    const dot = nearestDot(state.plane, e.clientX - box.left, e.clientY - box.top);
    hoverEigen(dot ? { i: dot.i, point: eigenPoints()[dot.i] } : null);
  });
  v.listen(planeCanvas, "mouseleave", () => hoverEigen(null));

  function start() {
    const n = shown()?.ov.shape?.[1] ?? 0;
    cells.reset((lock) => lock.row < n && lock.col < n);
    held.check();
    toolbar.sync();
    draw();
  }

  v.onPayloads("ov eigenvalues", start);
  v.on("change:head", draw);
  v.on("change:values", drawSelection);
  v.on("change:stats", drawPlaneAndStats);
  v.on("change:progress", () => {
    v.refresh();
    drawPlaneAndStats();
  });
  v.on("change:layer change:info change:token_criterion", () => {
    held.check();
    toolbar.sync();
  });

  return {
    start,
    draw,
    size: (width) => Math.max(200, Math.min(460, width - 420)),
    busy: () => model.get("progress") || (model.get("busy") ? "computing…" : ""),
    keys: {
      ...headKeys(v),
      Escape: () => cells.release(),
    },
    marks: () => ({
      head: head(),
      layer: held.stale ? model.get("layer") : layer(),
      held: held.stale ? String(layer()) : "",
      tokens: state.stack?.rows ?? 0,
    }),
  };
});
