// HeadScores view: one layer x head grid per score kind as thumbnails, the selected kind drawn
// large with axes, colour bar and hover values; click a cell to select a head (arrow keys move it).
//
// Scores arrive exact as float32 [kinds, layers, heads] (NaN where not computed or undefined),
// all on one colour scale named by the kernel (scores_meta.scale / domain).

import { float32Of } from "../lib/decode.js";
import { button, errorBanner, h, selectControl } from "../lib/controls.js";
import { Heatmap } from "../lib/heatmap.js";
import { safeName, savePNG, saveSVG } from "../lib/save.js";
import { formatValue, makeScale, packRGBA, readableText } from "../lib/scales.js";
import { readTheme, watchTheme } from "../lib/theme.js";
import { ThumbGrid } from "../lib/thumbs.js";

export function render({ model, el }) {
  const standalone = model.standalone === true;
  const root = h("div", { class: "cw-root cw-headscores", attrs: { tabindex: 0, "data-cw-kind": "headscores" } });
  el.append(root);
  let theme = readTheme(root);
  const state = { values: null, K: 0, L: 0, H: 0, hover: null, draws: 0, localError: "" };

  // ----- controls ------------------------------------------------------------------------
  const info = () => model.get("info") || {};
  const meta = () => model.get("scores_meta") || {};
  const kinds = () => meta().kinds || model.get("kinds") || [];
  const label = (k) => (info().labels || {})[k] || k;
  const kindSelect = h("select", { class: "cw-select", attrs: { "aria-label": "score" } });
  kindSelect.addEventListener("change", () => setTrait({ kind: kindSelect.value }));
  const kindField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Score" }), kindSelect]);
  const layerSelect = selectControl("Layer", (layer) => setTrait({ layer }));
  const headSelect = selectControl("Head", (head) => setTrait({ head }));
  const busy = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  busy.hidden = true;
  const fileBase = () => safeName(`headscores_${model.get("kind")}`);
  const pngButton = button("PNG", "save the grid as PNG", () => savePNG(heatmap.toCanvas(), `${fileBase()}.png`));
  const svgButton = button("SVG", "save the grid as SVG", () => saveSVG(heatmap.toSVG().replace("</svg>", `${valuesSVG()}\n</svg>`), `${fileBase()}.svg`));
  const banner = errorBanner();
  const toolbar = h("div", { class: "cw-toolbar-row" }, [kindField, layerSelect.el, headSelect.el, busy, h("span", { class: "cw-spacer" }), pngButton, svgButton]);
  const thumbs = new ThumbGrid({
    label: "score kinds",
    size: 56,
    draw: drawThumb,
    onClick: (i) => {
      const k = kinds()[i];
      if (k) setTrait({ kind: k });
    },
  });
  const heatmap = new Heatmap({
    label: "head scores",
    onHover: (hit) => {
      state.hover = hit;
      drawMarks();
    },
    onClick: (hit) => {
      const layers = info().attn_layers || [];
      setTrait({ layer: layers[hit.row], head: hit.col });
    },
  });
  const readout = h("div", { class: "cw-readout cw-hs-readout", attrs: { "aria-live": "polite" } });
  const note = h("div", { class: "cw-hint" });
  root.append(toolbar, banner.el, thumbs.el, heatmap.el, readout, note);

  // ----- helpers -------------------------------------------------------------------------
  function setTrait(values) {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  }
  const kindIndex = () => Math.max(0, kinds().indexOf(model.get("kind")));
  const computed = (k) => (meta().computed || []).includes(k);
  const value = (k, l, hd) => state.values[(k * state.L + l) * state.H + hd];
  const selectedRow = () => (info().attn_layers || []).indexOf(model.get("layer"));
  const scaleNow = () => makeScale(meta().scale === "diverging" ? "diverging" : "sequential", { dark: theme.dark, domain: meta().domain || [0, 1] });
  const hatch = (r, c) => ((r + c) % 2 ? packRGBA(...(theme.dark ? [60, 60, 64] : [226, 226, 230])) : packRGBA(...(theme.dark ? [44, 44, 48] : [240, 240, 243])));

  function showError() {
    let message = model.get("error") || state.localError;
    const k = model.get("kind");
    if (!message && standalone && state.values && !computed(k)) message = `${label(k)} scores were not computed when this page was saved`;
    banner.show(message);
  }
  function mark(what) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwScore = model.get("kind");
    root.dataset.cwLayer = String(model.get("layer"));
    root.dataset.cwHead = String(model.get("head"));
    root.dataset.cwComputed = (meta().computed || []).join(",");
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what } }));
  }

  // ----- drawing -------------------------------------------------------------------------
  function paintKind(k, pixels, scale, cellPx = 1) {
    const { L, H } = state;
    const width = H * cellPx;
    const done = computed(kinds()[k]);
    for (let l = 0; l < L; l++) {
      for (let hd = 0; hd < H; hd++) {
        const px = done ? packRGBA(...scale.rgb(value(k, l, hd))) : hatch(l, hd);
        for (let dy = 0; dy < cellPx; dy++) for (let dx = 0; dx < cellPx; dx++) pixels[(l * cellPx + dy) * width + hd * cellPx + dx] = px;
      }
    }
  }

  const scratch = document.createElement("canvas");
  function drawThumb(i, ctx, px) {
    if (!state.values) return;
    const { L, H } = state;
    const scale = scaleNow();
    scratch.width = H;
    scratch.height = L;
    const sctx = scratch.getContext("2d");
    const image = sctx.createImageData(H, L);
    paintKind(i, new Uint32Array(image.data.buffer), scale);
    sctx.putImageData(image, 0, 0);
    const cell = px / Math.max(L, H);
    const w = cell * H;
    const hgt = cell * L;
    const x0 = (px - w) / 2;
    const y0 = (px - hgt) / 2;
    ctx.fillStyle = theme.bgCss;
    ctx.fillRect(0, 0, px, px);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(scratch, x0, y0, w, hgt);
    const row = selectedRow();
    if (row >= 0) {
      ctx.strokeStyle = theme.accent;
      ctx.lineWidth = Math.max(1, px / 40);
      ctx.strokeRect(x0 + model.get("head") * cell, y0 + row * cell, cell, cell);
    }
  }

  function drawThumbs() {
    const ks = kinds();
    thumbs.setItems(ks.map((k) => (computed(k) ? label(k) : `${label(k)} (click to compute)`)));
    thumbs.items.forEach(({ el: item }, i) => item.setAttribute("title", (info().descriptions || {})[ks[i]] || ks[i]));
    thumbs.mark(kindIndex(), null, false);
  }

  /** Values written in the cells when they are big enough: [{x, y, text, color}]. */
  function cellValues() {
    if (!heatmap.scene || !state.values) return [];
    const { left, top, cell } = heatmap.scene.layout;
    if (cell < 24) return [];
    const k = kindIndex();
    if (!computed(kinds()[k])) return [];
    const scale = scaleNow();
    const out = [];
    for (let l = 0; l < state.L; l++) {
      for (let hd = 0; hd < state.H; hd++) {
        const v = value(k, l, hd);
        if (!Number.isFinite(v)) continue;
        out.push({ x: left + (hd + 0.5) * cell, y: top + (l + 0.5) * cell, text: v.toFixed(2), color: readableText(scale.rgb(v)) });
      }
    }
    return out;
  }
  function valuesSVG() {
    return cellValues()
      .map((c) => `<text x="${c.x.toFixed(1)}" y="${c.y.toFixed(1)}" font-size="10" font-family="${theme.font.replace(/"/g, "'")}" fill="${c.color}" text-anchor="middle" dominant-baseline="central">${c.text}</text>`)
      .join("\n");
  }

  function drawMain() {
    if (!state.values) return;
    const { L, H } = state;
    const k = kindIndex();
    const kind = kinds()[k];
    const scale = scaleNow();
    const layers = info().attn_layers || [];
    heatmap.update({
      rows: L,
      cols: H,
      paint: (pixels) => paintKind(k, pixels, scale),
      rowLabels: layers.map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      title: `${label(kind)} score${computed(kind) ? "" : " (not computed yet)"}`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale,
      theme,
      maxPlot: Math.max(160, Math.min(420, Math.max(L, H) * 28)),
    });
    // cell values on the picture itself (so PNG keeps them)
    const ctx = heatmap.canvas.getContext("2d");
    const dpr = globalThis.devicePixelRatio || 1;
    ctx.save();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = `10px ${theme.font}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (const c of cellValues()) {
      ctx.fillStyle = c.color;
      ctx.fillText(c.text, c.x, c.y);
    }
    ctx.restore();
    drawMarks();
  }

  function drawMarks() {
    const hover = state.hover;
    heatmap.setHighlight(hover ? { row: hover.row, col: hover.col } : {});
    const row = selectedRow();
    if (heatmap.scene && row >= 0) {
      const { left, top, cell } = heatmap.scene.layout;
      const ctx = heatmap.overlay.getContext("2d");
      ctx.save();
      ctx.strokeStyle = theme.accent;
      ctx.lineWidth = 2.5;
      ctx.strokeRect(left + model.get("head") * cell + 1, top + row * cell + 1, cell - 2, cell - 2);
      ctx.restore();
    }
    drawReadout();
  }

  function drawReadout() {
    if (!state.values) {
      readout.textContent = "no scores yet";
      return;
    }
    const layers = info().attn_layers || [];
    const hover = state.hover;
    const l = hover ? hover.row : selectedRow();
    const hd = hover ? hover.col : model.get("head");
    if (l < 0) {
      readout.textContent = "";
      return;
    }
    const ks = kinds();
    const current = model.get("kind");
    const parts = ks.map((k, i) => {
      if (!computed(k)) return `${label(k)} —`;
      const text = `${label(k)} ${formatValue(value(i, l, hd), 3)}`;
      return k === current ? `[${text}]` : text;
    });
    readout.textContent = `${hover ? "" : "selected "}L${layers[l]} H${hd} · ${parts.join(" · ")}`;
    readout.dataset.cwLayer = String(layers[l]);
    readout.dataset.cwHead = String(hd);
  }

  function drawNote() {
    const k = model.get("kind");
    const desc = (info().descriptions || {})[k] || "";
    const scale = meta().scale === "diverging" ? "one colour scale for every grid, −1 to 1 (0 neutral)" : "one colour scale for every grid, 0 to 1";
    note.textContent = `${label(k)}: ${desc} · ${scale} · attention scores on ${info().ran_on || "random tokens"}`;
  }

  function syncControls() {
    const ks = kinds();
    const key = ks.join("|");
    if (kindSelect.dataset.options !== key) {
      kindSelect.replaceChildren(...ks.map((k) => h("option", { value: k, text: label(k) })));
      kindSelect.dataset.options = key;
    }
    kindSelect.value = model.get("kind");
    const layers = info().attn_layers || [];
    layerSelect.set(layers.map((l) => ({ value: l, label: String(l) })), model.get("layer"));
    headSelect.set(Array.from({ length: info().n_heads || 1 }, (_, i) => ({ value: i, label: String(i) })), model.get("head"));
  }

  function drawAll() {
    syncControls();
    drawThumbs();
    drawMain();
    drawNote();
    showError();
    mark("all");
  }

  function onScores() {
    const m = meta();
    if (!m.shape) {
      // nothing computed yet (a deferred first refresh): the busy note says what is running
      state.values = null;
      syncControls();
      drawReadout();
      showError();
      return;
    }
    try {
      const [K, L, H] = m.shape || [0, 0, 0];
      const values = float32Of(model.get("scores"));
      if (!L || values.length !== K * L * H) throw new RangeError(`scores hold ${values.length} values; shape ${JSON.stringify(m.shape)}`);
      Object.assign(state, { values, K, L, H });
      state.localError = "";
    } catch (err) {
      state.values = null;
      state.localError = `could not read the scores: ${err.message}`;
    }
    drawAll();
  }

  const onSelect = () => {
    syncControls();
    thumbs.repaint();
    drawMarks();
    mark("select");
  };
  const onKind = () => {
    state.hover = null;
    drawAll();
  };
  const onBusy = () => {
    busy.hidden = !model.get("busy");
    busy.textContent = `computing ${label(model.get("kind"))} scores…`;
  };
  const handlers = {
    "change:scores_meta": onScores,
    "change:kind": onKind,
    "change:layer": onSelect,
    "change:head": onSelect,
    "change:error": showError,
    "change:busy": onBusy,
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);

  const onKey = (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    const layers = info().attn_layers || [];
    const row = selectedRow();
    const n = info().n_heads || 1;
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      const next = model.get("head") + (e.key === "ArrowRight" ? 1 : -1);
      if (next >= 0 && next < n) setTrait({ head: next });
    } else if (e.key === "ArrowUp" || e.key === "ArrowDown") {
      e.preventDefault();
      const next = row + (e.key === "ArrowDown" ? 1 : -1);
      if (next >= 0 && next < layers.length) setTrait({ layer: layers[next] });
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    drawAll();
  });

  onBusy();
  onScores();

  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    root.removeEventListener("keydown", onKey);
    stopTheme();
    heatmap.destroy();
    thumbs.destroy();
    root.remove();
  };
}
