// OVCircuit view: the full OV circuit of a head on a token subset (source token x output logit),
// diagonal outlined, beside its eigenvalue spectrum on the complex plane, copying score and
// top-k accuracy. Every head of the layer arrives at once, so switching head needs no kernel.
// Also exports what the QK view shares with it (head stacks, the toolbar, diagonal marks).

import { CodeStack, float32Of } from "../lib/decode.js";
import { button, errorBanner, h, selectControl } from "../lib/controls.js";
import { Heatmap } from "../lib/heatmap.js";
import { displayToken, truncate } from "../lib/layout.js";
import { composeCanvases, composeSVG, drawPlane, nearestDot, planeScene, planeToSVG } from "../lib/plane.js";
import { safeName, savePNG, saveSVG } from "../lib/save.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { readTheme, watchTheme } from "../lib/theme.js";

export const quote = (s) => `“${truncate(displayToken(s), 24)}”`;

/** Head `h` of a per-head-range uint8 payload (ov.py encode_heads) as a one-matrix CodeStack. */
export function headStack(data, meta, h) {
  if (!meta || !Array.isArray(meta.shape) || meta.shape.length !== 3) return null;
  const [nHeads, rows, cols] = meta.shape;
  if (h < 0 || h >= nHeads || !rows || !cols) return null;
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const size = rows * cols;
  const [lo, hi] = meta.ranges[h];
  return new CodeStack(bytes.subarray(h * size, (h + 1) * size), { dtype: "uint8", shape: [rows, cols], lo, hi, layout: "full", nan_code: meta.nan_code });
}

/** Exact float32 value (m, r, c) of a [H, rows, cols] payload, or null when missing. */
export function exactValue(data, meta, m, r, c) {
  if (!meta || !Array.isArray(meta.shape) || !data || !data.byteLength) return null;
  const [, rows, cols] = meta.shape;
  const values = float32Of(data);
  const i = (m * rows + r) * cols + c;
  return i < values.length ? values[i] : null;
}

/** Layer / head selects, a progress note and PNG / SVG buttons, wired to `model`. */
export function headToolbar({ model, standalone, onHead, onPNG, onSVG, kind }) {
  const layerSelect = selectControl("Layer", (layer) => {
    model.set("layer", layer);
    model.save_changes();
  });
  const headSelect = selectControl("Head", (head) => onHead(head));
  layerSelect.disable(standalone);
  const busy = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  const png = button("PNG", `save the ${kind} view as PNG`, onPNG);
  const svg = button("SVG", `save the ${kind} view as SVG`, onSVG);
  const el = h("div", { class: "cw-toolbar" }, [
    h("div", { class: "cw-toolbar-row" }, [layerSelect.el, headSelect.el, busy, h("span", { class: "cw-spacer" }), png, svg]),
  ]);
  const shownLayer = (metaName) => (model.get(metaName) || {}).layer ?? model.get("layer");
  return {
    el,
    sync(metaName) {
      const info = model.get("info") || {};
      const layers = info.attn_layers || [model.get("layer")];
      const layer = shownLayer(metaName);
      layerSelect.set(standalone ? [{ value: layer, label: String(layer) }] : layers.map((l) => ({ value: l, label: String(l) })), standalone ? layer : model.get("layer"));
      headSelect.set(Array.from({ length: info.n_heads || 1 }, (_, i) => ({ value: i, label: String(i) })), model.get("head"));
    },
    setHead(head) {
      headSelect.select.value = String(head);
    },
    busy(text) {
      busy.textContent = text || "";
      busy.hidden = !text;
    },
  };
}

/** Set `model`'s head (clamped to the layer's heads); returns true when it changed. */
export function setHeadOn(model, head) {
  const n = (model.get("info") || {}).n_heads || 1;
  const next = Math.max(0, Math.min(n - 1, head));
  if (next === model.get("head")) return false;
  model.set("head", next);
  model.save_changes();
  return true;
}

/** Outline the diagonal cells of a square heatmap on canvas `marks` (same size as heatmap.canvas). */
export function drawDiagonal(marks, heatmap, theme) {
  const scene = heatmap.scene;
  if (!scene) return [];
  const dpr = globalThis.devicePixelRatio || 1;
  marks.width = heatmap.canvas.width;
  marks.height = heatmap.canvas.height;
  marks.style.width = heatmap.canvas.style.width;
  marks.style.height = heatmap.canvas.style.height;
  const ctx = marks.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, marks.width, marks.height);
  const { left, top, cell } = scene.layout;
  const n = Math.min(heatmap.spec.rows, heatmap.spec.cols);
  const rects = [];
  for (let i = 0; i < n; i++) rects.push([left + i * cell, top + i * cell, cell, cell]);
  ctx.strokeStyle = theme.fg;
  ctx.globalAlpha = cell >= 5 ? 0.85 : 0.45;
  ctx.lineWidth = cell >= 5 ? 1 : 0.6;
  for (const [x, y, w, hh] of rects) ctx.strokeRect(x + 0.5, y + 0.5, Math.max(0.5, w - 1), Math.max(0.5, hh - 1));
  return rects;
}

/** The SVG of `heatmap` with the diagonal outlines added. */
export function heatmapSVGWithDiagonal(heatmap, rects, theme) {
  const marks = rects
    .map(([x, y, w, hh]) => `<rect x="${+(x + 0.5).toFixed(2)}" y="${+(y + 0.5).toFixed(2)}" width="${+Math.max(0.5, w - 1).toFixed(2)}" height="${+Math.max(0.5, hh - 1).toFixed(2)}" fill="none" stroke="${theme.fg}" stroke-opacity="0.85"/>`)
    .join("");
  return heatmap.toSVG().replace(/<\/svg>\s*$/, `${marks}</svg>`);
}

const percent = (v) => (v == null ? null : `${(100 * v).toFixed(1)} %`);

export function render({ model, el }) {
  const standalone = model.standalone === true;
  const state = { hover: null, lock: null, eigHover: null, draws: 0, localError: "", rects: [] };
  const root = h("div", { class: "cw-root cw-ov", attrs: { tabindex: 0, "data-cw-kind": "ov" } });
  el.append(root);
  let theme = readTheme(root);
  let maxPlot = 460;
  const head = () => model.get("head");
  const layer = () => (model.get("ov_meta") || {}).layer ?? model.get("layer");
  const fileBase = () => safeName(`ov_L${layer()}H${head()}`);

  // ----- pieces ----------------------------------------------------------------------------
  const toolbar = headToolbar({
    model,
    standalone,
    kind: "OV",
    onHead: (hd) => setHeadOn(model, hd) || draw(),
    onPNG: () => savePNG(picture(), `${fileBase()}.png`),
    onSVG: () => saveSVG(pictureSVG(), `${fileBase()}.svg`),
  });
  const banner = errorBanner();
  const criterion = h("div", { class: "cw-hint cw-criterion" });
  const heatmap = new Heatmap({
    label: "full OV circuit",
    onHover: (hit) => {
      state.hover = hit;
      selectionChanged();
    },
    onClick: (hit) => {
      const same = state.lock && state.lock.row === hit.row && state.lock.col === hit.col;
      state.lock = same ? null : hit;
      selectionChanged();
    },
  });
  const marks = h("canvas", { class: "cw-diag-marks" });
  heatmap.el.insertBefore(marks, heatmap.overlay);
  const planeCanvas = h("canvas", { class: "cw-plane", attrs: { role: "img", "aria-label": "eigenvalues on the complex plane" } });
  const stat = (label, title) => {
    const value = h("span", { class: "cw-stat-value" });
    const row = h("div", { class: "cw-stat", attrs: { title } }, [h("span", { class: "cw-stat-label", text: label }), value]);
    return { row, value };
  };
  const copying = stat("copying score", "Σλ / Σ|λ| over the eigenvalues of W_E W_V W_O W_U: 1 means the head copies the token it attends to");
  const top1 = stat("top-1 accuracy", "share of all tokens whose own logit is the largest of their row of the full OV circuit");
  const top5 = stat("top-5 accuracy", "share of all tokens whose own logit is among the 5 largest of their row");
  const eigNote = h("div", { class: "cw-hint cw-eig-note" });
  const side = h("div", { class: "cw-ov-side" }, [planeCanvas, eigNote, h("div", { class: "cw-stats" }, [copying.row, top1.row, top5.row])]);
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  root.append(toolbar.el, banner.el, criterion, h("div", { class: "cw-ov-main" }, [heatmap.el, side]), readout);

  // ----- helpers ---------------------------------------------------------------------------
  let stack = null;
  let scene = null;
  const selection = () => state.lock || state.hover;

  function showError() {
    banner.show(model.get("error") || state.localError);
  }

  function showBusy() {
    if (standalone) return toolbar.busy("");
    toolbar.busy(model.get("progress") || (model.get("busy") ? "computing…" : ""));
  }

  function mark(t0) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwHead = String(head());
    root.dataset.cwLayer = String(layer());
    root.dataset.cwTokens = String(stack ? stack.rows : 0);
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what: "ov", ms: performance.now() - t0 } }));
  }

  function eigenPoints() {
    const meta = model.get("eigenvalues_meta") || {};
    const data = model.get("eigenvalues");
    if (!meta.shape || !data || !data.byteLength) return [];
    const [nHeads, d] = meta.shape;
    if (head() >= nHeads) return [];
    const values = float32Of(data);
    const out = [];
    for (let i = 0; i < d; i++) out.push([values[(head() * d + i) * 2], values[(head() * d + i) * 2 + 1]]);
    return out;
  }

  // ----- drawing ---------------------------------------------------------------------------
  function draw() {
    const t0 = performance.now();
    toolbar.setHead(head());
    try {
      stack = headStack(model.get("ov"), model.get("ov_meta"), head());
    } catch (err) {
      stack = null;
      state.localError = `could not read the OV payload: ${err.message}`;
    }
    showError();
    if (!stack) return;
    const tokens = model.get("str_tokens") || [];
    const scale = makeScale("diverging", { dark: theme.dark, domain: [stack.lo, stack.hi] });
    const lut = scale.lut(stack);
    heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(0, lut, pixels, 0),
      rowLabels: tokens,
      colLabels: tokens,
      title: `Full OV circuit, layer ${layer()} head ${head()}`,
      yTitle: "source ↓",
      xTitle: "logit →",
      scale,
      theme,
      maxPlot,
    });
    state.rects = drawDiagonal(marks, heatmap, theme);
    drawPlaneAndStats();
    drawSelection();
    mark(t0);
  }

  function drawPlaneAndStats() {
    const points = eigenPoints();
    scene = planeScene({ points, size: 250, theme, title: "Eigenvalues of W_E W_OV W_U" });
    const dpr = globalThis.devicePixelRatio || 1;
    planeCanvas.width = Math.round(scene.width * dpr);
    planeCanvas.height = Math.round(scene.height * dpr);
    planeCanvas.style.width = `${scene.width}px`;
    planeCanvas.style.height = `${scene.height}px`;
    const ctx = planeCanvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, scene.width, scene.height);
    drawPlane(ctx, scene);
    if (state.eigHover) {
      const d = scene.dots.find((dot) => dot.i === state.eigHover.i);
      if (d) {
        ctx.strokeStyle = theme.fg;
        ctx.lineWidth = 1.5;
        ctx.beginPath();
        ctx.arc(d.x, d.y, 6, 0, 2 * Math.PI);
        ctx.stroke();
      }
    }
    const n = points.filter(([re, im]) => Number.isFinite(re) && Number.isFinite(im)).length;
    eigNote.textContent = n ? `${n} eigenvalues (d_head × d_head form), shown as λ / max|λ|, max|λ| = ${formatValue(scene.scale)}` : "no eigenvalues";
    const stats = (model.get("stats") || [])[head()] || {};
    copying.value.textContent = stats.copying == null ? "n/a" : formatValue(stats.copying, 4);
    copying.value.dataset.value = stats.copying == null ? "" : String(stats.copying);
    const pending = standalone ? "not computed when saved" : model.get("progress") ? "computing…" : "n/a";
    for (const [item, key] of [[top1, "top1"], [top5, "top5"]]) {
      item.value.textContent = percent(stats[key]) ?? pending;
      item.value.dataset.value = stats[key] == null ? "" : String(stats[key]);
    }
  }

  function drawSelection() {
    const sel = selection();
    heatmap.setHighlight({ row: state.hover?.row ?? null, col: state.hover?.col ?? null, lockedRow: state.lock?.row ?? null, lockedCol: state.lock?.col ?? null });
    const tokens = model.get("str_tokens") || [];
    const ids = model.get("tokens") || [];
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (state.eigHover) {
      const [re, im] = state.eigHover.point;
      parts.push(`λ${state.eigHover.i + 1} = ${formatValue(re)} ${im < 0 ? "−" : "+"} ${formatValue(Math.abs(im))}i`, `|λ| = ${formatValue(Math.hypot(re, im))}`);
    } else if (stack && sel && sel.row < stack.rows && sel.col < stack.cols) {
      const exact = exactValue(model.get("values"), model.get("values_meta"), head(), sel.row, sel.col);
      const value = exact == null ? `≈${formatValue(stack.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      const tag = sel.row === sel.col ? " (diagonal: copying)" : "";
      parts.push(`source ${quote(tokens[sel.row] ?? sel.row)} (id ${ids[sel.row]}) → logit of ${quote(tokens[sel.col] ?? sel.col)} (id ${ids[sel.col]})`, `${value}${tag}`);
      if (exact != null) readout.dataset.value = String(exact);
      readout.dataset.row = String(sel.row);
      readout.dataset.col = String(sel.col);
    } else {
      parts.push(stack ? `${stack.rows} tokens · hover a cell (click to lock) or an eigenvalue` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }

  function selectionChanged() {
    drawSelection();
  }

  function picture() {
    const hm = heatmap.toCanvas();
    hm.getContext("2d").drawImage(marks, 0, 0);
    return composeCanvases([hm, planeCanvas], theme.bgCss);
  }

  function pictureSVG() {
    return composeSVG([heatmapSVGWithDiagonal(heatmap, state.rects, theme), planeToSVG(scene, theme)], theme.bgCss);
  }

  // ----- events ----------------------------------------------------------------------------
  const onPlaneMove = (e) => {
    if (!scene) return;
    const box = planeCanvas.getBoundingClientRect();
    const dot = nearestDot(scene, e.clientX - box.left, e.clientY - box.top);
    const next = dot ? { i: dot.i, point: eigenPoints()[dot.i] } : null;
    if ((next && next.i) !== (state.eigHover && state.eigHover.i)) {
      state.eigHover = next;
      drawPlaneAndStats();
      drawSelection();
    }
  };
  const onPlaneLeave = () => {
    state.eigHover = null;
    drawPlaneAndStats();
    drawSelection();
  };
  planeCanvas.addEventListener("mousemove", onPlaneMove);
  planeCanvas.addEventListener("mouseleave", onPlaneLeave);

  const onPayload = () => {
    const n = (model.get("ov_meta") || {}).shape?.[1] ?? 0;
    if (state.lock && (state.lock.row >= n || state.lock.col >= n)) state.lock = null;
    state.hover = null;
    criterion.textContent = `Tokens: ${model.get("token_criterion") || ""}`;
    toolbar.sync("ov_meta");
    draw();
  };
  const handlers = {
    "change:ov_meta": onPayload,
    "change:head": () => draw(),
    "change:stats": () => drawPlaneAndStats(),
    "change:error": showError,
    "change:busy": showBusy,
    "change:progress": () => {
      showBusy();
      drawPlaneAndStats();
    },
    "change:layer": () => toolbar.sync("ov_meta"),
    "change:info": () => toolbar.sync("ov_meta"),
    "change:token_criterion": onPayload,
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);

  const onKey = (e) => {
    if (e.target.closest && e.target.closest("textarea, input, select")) return;
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      setHeadOn(model, head() + (e.key === "ArrowRight" ? 1 : -1));
    } else if (e.key === "Escape") {
      state.lock = null;
      selectionChanged();
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    draw();
  });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    const next = Math.max(200, Math.min(460, width - 420));
    if (width > 0 && Math.abs(next - maxPlot) > 8) {
      maxPlot = next;
      draw();
    }
  }) : null;
  if (resize) resize.observe(root);

  showBusy();
  onPayload();

  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    root.removeEventListener("keydown", onKey);
    planeCanvas.removeEventListener("mousemove", onPlaneMove);
    planeCanvas.removeEventListener("mouseleave", onPlaneLeave);
    stopTheme();
    if (resize) resize.disconnect();
    heatmap.destroy();
    root.remove();
  };
}
