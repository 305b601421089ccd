// HeadScores view: one layer x head grid per score kind as thumbnails, the selected kind drawn
// large with axes, colour bar and hover values; click a cell to select a head (arrow keys move it).
//
// Scores arrive exact as float32 [kinds, layers, heads] (NaN where not computed or undefined),
// each kind on the colour scale the kernel names for it (the payload's `scales`).

import { h, indexOptions, numberOptions, selectControl } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { Heatmap } from "../lib/heatmap.js";
import { cellBox, cellValueOps } from "../lib/heatmap-scene.js";
import { axisPriority } from "../lib/layout.js";
import { progressRow } from "../lib/progress.js";
import { saveButtons } from "../lib/save.js";
import { formatCell, formatValue, makeScale, packRGBA } from "../lib/scales.js";
import { ThumbGrid } from "../lib/thumbs.js";
import { defineView } from "../lib/view.js";

defineView("headscores", (v) => {
  const { model } = v;
  const state = { values: null, L: 0, H: 0, hover: null };
  const info = () => model.get("info") || {};
  const scores = () => v.payloads("scores")?.scores || {};
  const kinds = () => scores().kinds || model.get("kinds") || [];
  const layers = () => scores().layers || info().attn_layers || [];
  const label = (k) => info().labels?.[k] || k;
  const kindIndex = () => Math.max(0, kinds().indexOf(model.get("kind")));
  const computed = (k) => (scores().computed || []).includes(k);
  const value = (k, l, hd) => state.values[(k * state.L + l) * state.H + hd];
  const selectedRow = () => layers().indexOf(model.get("layer"));
  // each kind on its own colour scale: [0, 1] shares, or [-1, 1] for copying scores
  const scaleSpec = (k) => (scores().scales || [])[k] || ["sequential", [0, 1]];
  const scale = (k = kindIndex()) =>
    makeScale(scaleSpec(k)[0] === "diverging" ? "diverging" : "sequential", { dark: v.theme.dark, domain: scaleSpec(k)[1] });
  const shade = (dark, light) => packRGBA(...(v.theme.dark ? dark : light));
  const hatch = (r, c) => ((r + c) % 2 ? shade([60, 60, 64], [226, 226, 230]) : shade([44, 44, 48], [240, 240, 243]));

  // ----- controls ------------------------------------------------------------------------
  const kindSelect = h("select", { class: "cw-select", attrs: { "aria-label": "score" } });
  v.listen(kindSelect, "change", () => v.set({ kind: kindSelect.value }));
  const kindField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Score" }), kindSelect]);
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const buttons = saveButtons({
    what: "grid",
    picture: () => heatmap.scene,
    name: () => `headscores_${model.get("kind")}`,
    background: () => v.theme.bgCss,
  });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    kindField,
    layerSelect.el,
    headSelect.el,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons,
  ]);
  const thumbs = v.own(
    new ThumbGrid({
      label: "score kinds",
      size: 56,
      draw: drawThumb,
      onClick: (i) => kinds()[i] && v.set({ kind: kinds()[i] }),
    }),
  );
  const heatmap = v.own(
    new Heatmap({
      label: "head scores",
      onHover: (hit) => {
        state.hover = hit;
        drawMarks();
      },
      onClick: (hit) => v.set({ layer: layers()[hit.row], head: hit.col }),
    }),
  );
  const readout = h("div", { class: "cw-readout cw-hs-readout", attrs: { "aria-live": "polite" } });
  const note = h("div", { class: "cw-hint" });
  const progress = progressRow(v); // (a long prompt's scores: what is being computed, and Cancel)
  v.root.append(toolbar, progress.el, v.banner, thumbs.el, heatmap.el, readout, note);

  // ----- drawing -------------------------------------------------------------------------
  function paintKind(k, pixels, sc) {
    const { L, H } = state;
    const done = computed(kinds()[k]);
    for (let l = 0; l < L; l++) {
      for (let hd = 0; hd < H; hd++) pixels[l * H + hd] = done ? packRGBA(...sc.rgb(value(k, l, hd))) : hatch(l, hd);
    }
  }

  const scratch = document.createElement("canvas");
  function drawThumb(i, ctx, px) {
    if (!state.values) return;
    const { L, H } = state;
    scratch.width = H;
    scratch.height = L;
    const sctx = scratch.getContext("2d");
    const image = sctx.createImageData(H, L);
    paintKind(i, new Uint32Array(image.data.buffer), scale(i));
    sctx.putImageData(image, 0, 0);
    const cell = px / Math.max(L, H);
    const x0 = (px - cell * H) / 2;
    const y0 = (px - cell * L) / 2;
    ctx.fillStyle = v.theme.bgCss;
    ctx.fillRect(0, 0, px, px);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(scratch, x0, y0, cell * H, cell * L);
    const row = selectedRow();
    if (row >= 0) {
      ctx.strokeStyle = v.theme.accent;
      ctx.lineWidth = Math.max(1, px / 40);
      ctx.strokeRect(x0 + model.get("head") * cell, y0 + row * cell, cell, cell);
    }
  }

  function drawThumbs() {
    const ks = kinds();
    thumbs.setItems(ks.map((k) => (computed(k) ? label(k) : `${label(k)} (click to compute)`)));
    thumbs.items.forEach(({ el: item }, i) => {
      item.setAttribute("title", info().descriptions?.[ks[i]] || ks[i]);
    });
    thumbs.mark(kindIndex(), null, false);
  }

  /** Values written in the cells when they are big enough (so PNG and SVG keep them). */
  function cellValues(layout) {
    const k = kindIndex();
    if (layout.cell < 24 || !computed(kinds()[k])) return [];
    return cellValueOps(layout, state.L, state.H, { value: (l, hd) => value(k, l, hd), text: formatCell, scale: scale(), theme: v.theme });
  }

  function drawMain() {
    if (!state.values) return;
    const { L, H } = state;
    const kind = kinds()[kindIndex()];
    const sc = scale();
    heatmap.update({
      rows: L,
      cols: H,
      paint: (pixels) => paintKind(kindIndex(), pixels, sc),
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      // labels beyond what fits: the selected layer and head, then the highest scores
      ...axisPriority(L, H, (l, hd) => (computed(kind) ? value(kindIndex(), l, hd) : Number.NaN)),
      keepRows: selectedRow(),
      keepCols: model.get("head"),
      title: `${label(kind)} score${computed(kind) ? "" : " (not computed yet)"}`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      // 28 px a head, 160 to 420 px, more (up to 720) so that each head keeps 10 px and its label
      maxPlot: Math.max(160, Math.min(Math.max(420, 10 * Math.max(L, H)), 28 * Math.max(L, H), 720)),
      marks: cellValues,
    });
    drawMarks();
  }

  function drawMarks() {
    const row = selectedRow();
    const selected = (layout) =>
      row >= 0 ? [cellBox(layout, row, model.get("head"), { color: v.theme.accent, width: 2.5, inset: 1 })] : [];
    heatmap.setHighlight({ row: state.hover?.row, col: state.hover?.col, marks: selected });
    drawReadout();
  }

  function drawReadout() {
    if (!state.values) {
      readout.textContent = "no scores yet";
      return;
    }
    const hover = state.hover;
    const l = hover ? hover.row : selectedRow();
    const hd = hover ? hover.col : model.get("head");
    if (l < 0) {
      readout.textContent = "";
      return;
    }
    const current = model.get("kind");
    const parts = kinds().map((k, i) => {
      if (!computed(k)) return `${label(k)} —`;
      const text = `${label(k)} ${formatValue(value(i, l, hd), 3)}`;
      return k === current ? `[${text}]` : text;
    });
    readout.textContent = `${hover ? "" : "selected "}L${layers()[l]} H${hd} · ${parts.join(" · ")}`;
    readout.dataset.cwLayer = String(layers()[l]);
    readout.dataset.cwHead = String(hd);
  }

  function drawNote() {
    const k = model.get("kind");
    const desc = info().descriptions?.[k] || "";
    const [kindOfScale, [low, high]] = scaleSpec(kindIndex());
    const bounds = `${formatValue(low).replace("-", "−")} to ${formatValue(high)}`;
    const range = kindOfScale === "diverging" ? `colour scale ${bounds} (0 neutral)` : `colour scale ${bounds}`;
    note.textContent = `${label(k)}: ${desc} · ${range} · attention scores on ${info().ran_on || "random tokens"}`;
  }

  function syncControls() {
    const ks = kinds();
    if (kindSelect.dataset.options !== ks.join("|")) {
      kindSelect.replaceChildren(...ks.map((k) => h("option", { value: k, text: label(k), attrs: { "data-control": `kind:${k}` } })));
      kindSelect.dataset.options = ks.join("|");
    }
    kindSelect.value = model.get("kind");
    layerSelect.set(numberOptions(layers()), model.get("layer"));
    headSelect.set(indexOptions(info().n_heads || 1), model.get("head"));
  }

  function draw() {
    syncControls();
    drawThumbs();
    drawMain();
    drawNote();
    const k = model.get("kind");
    const unsaved = v.standalone && state.values && !computed(k);
    v.error(unsaved ? `${label(k)} scores were not computed when this page was saved` : "", "unsaved");
    v.drawn("all");
  }

  function start() {
    const p = scores();
    if (!hasData(p)) {
      // nothing computed yet (a deferred first refresh): the busy mark says what is running
      state.values = null;
      syncControls();
      drawReadout();
      return;
    }
    try {
      const [K, L, H] = p.shape;
      const values = floatValues(p);
      if (!L || K * L * H === 0) throw new RangeError(`scores have shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { values, L, H });
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      v.error(`could not read the scores: ${err.message}`, "decode");
    }
    draw();
  }

  v.onPayloads("scores", start);
  v.on("change:kind", () => {
    state.hover = null;
    draw();
    v.refresh();
  });
  v.on("change:layer change:head", () => {
    syncControls();
    thumbs.repaint();
    if (state.values)
      drawMain(); // the selected head's labels, and its marks
    else drawMarks();
    v.drawn("select");
  });

  const move = (trait, values, current, d) => {
    const next = current + d;
    if (next >= 0 && next < values.length) v.set({ [trait]: values[next] });
  };
  const heads = () => Array.from({ length: info().n_heads || 1 }, (_, i) => i);
  return {
    start,
    draw,
    busy: () => (model.get("busy") ? `computing ${label(model.get("kind"))} scores…` : ""),
    keys: {
      ArrowRight: () => move("head", heads(), model.get("head"), 1),
      ArrowLeft: () => move("head", heads(), model.get("head"), -1),
      ArrowDown: () => move("layer", layers(), selectedRow(), 1),
      ArrowUp: () => move("layer", layers(), selectedRow(), -1),
    },
    marks: () => ({
      score: model.get("kind"),
      layer: model.get("layer"),
      head: model.get("head"),
      computed: (scores().computed || []).join(","),
    }),
  };
});
