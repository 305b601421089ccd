// AttentionPattern view: heatmap of one head, thumbnails of every head in the layer, token view.
//
// The layer's patterns arrive once as uint8 codes; switching head redraws from them without the
// kernel. Hover read-outs use the exact float32 row the kernel sends for the selected query
// (a quantised value, marked "≈", is shown until it arrives or when there is no kernel).

import { CodeStack, float32Of } from "../lib/decode.js";
import { button, errorBanner, h, promptBox, selectControl, throttle } from "../lib/controls.js";
import { Heatmap } from "../lib/heatmap.js";
import { displayToken, truncate } from "../lib/layout.js";
import { safeName, savePNG, saveSVG } from "../lib/save.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { readTheme, watchTheme } from "../lib/theme.js";
import { ThumbGrid } from "../lib/thumbs.js";
import { TokenStrip } from "../lib/tokens.js";

const quote = (s) => `“${truncate(displayToken(s), 24)}”`;

export function render({ model, el }) {
  const standalone = model.standalone === true;
  const state = {
    stack: null,
    strTokens: [],
    preview: null, // head under the pointer in the thumbnails
    headLocked: false, // a clicked thumbnail holds the view until clicked again
    hover: null, // {query, key} under the pointer
    lock: null, // {query, key} clicked in the heatmap or token strip
    mode: "pays", // token view: attention the focused token pays, or receives
    localError: "",
    draws: 0,
  };
  // data-lm-suppress-shortcuts: JupyterLab leaves keys pressed inside the widget to the widget.
  const root = h("div", { class: "cw-root cw-attention", attrs: { tabindex: 0, "data-cw-kind": "attention", "data-lm-suppress-shortcuts": "true" } });
  el.append(root);
  let theme = readTheme(root);
  let scale = makeScale("sequential", { dark: theme.dark });
  let maxPlot = 560;

  // ----- controls ------------------------------------------------------------------------
  const info = () => model.get("info") || {};
  const prompt = promptBox({
    placeholder: info().has_tokenizer ? "type a prompt, Enter to run" : "token ids separated by spaces, Enter to run",
    onSubmit: (text) => {
      if (info().has_tokenizer) {
        model.set("prompt", text);
      } else {
        const parts = text.trim().split(/[\s,]+/).filter(Boolean);
        const ids = parts.map(Number);
        if (!ids.length || ids.some((x) => !Number.isInteger(x) || x < 0)) {
          state.localError = `token ids must be non-negative integers separated by spaces; got ${JSON.stringify(truncate(text, 40))}`;
          showError();
          return;
        }
        model.set("tokens", ids);
      }
      state.localError = "";
      showError();
      model.save_changes();
    },
  });
  if (standalone) prompt.readOnly(true, "exported page: no kernel to re-run the model");
  const layerSelect = selectControl("Layer", (layer) => {
    model.set("layer", layer);
    model.save_changes();
  });
  const headSelect = selectControl("Head", (head) => setHead(head));
  layerSelect.disable(standalone);
  const modeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "token view" } }, [
    h("option", { value: "pays", text: "attention paid by" }),
    h("option", { value: "receives", text: "attention received by" }),
  ]);
  modeSelect.addEventListener("change", () => {
    state.mode = modeSelect.value;
    drawTokens();
  });
  const busy = h("span", { class: "cw-busy", text: "running…", attrs: { "aria-live": "polite" } });
  busy.hidden = true;
  const fileBase = () => safeName(`attention_L${shownLayer()}H${shownHead()}`);
  const pngButton = button("PNG", "save the heatmap as PNG", () => savePNG(heatmap.toCanvas(), `${fileBase()}.png`));
  const svgButton = button("SVG", "save the heatmap as SVG", () => saveSVG(heatmap.toSVG(), `${fileBase()}.svg`));
  const banner = errorBanner();
  const toolbar = h("div", { class: "cw-toolbar" }, [
    prompt.el,
    h("div", { class: "cw-toolbar-row" }, [layerSelect.el, headSelect.el, busy, h("span", { class: "cw-spacer" }), pngButton, svgButton]),
  ]);

  // ----- views ---------------------------------------------------------------------------
  const heatmap = new Heatmap({
    label: "attention pattern",
    onHover: (hit) => {
      state.hover = hit ? { query: hit.row, key: hit.col } : null;
      selectionChanged();
    },
    onClick: (hit) => {
      const same = state.lock && state.lock.query === hit.row && state.lock.key === hit.col;
      state.lock = same ? null : { query: hit.row, key: hit.col };
      selectionChanged();
    },
  });
  const thumbs = new ThumbGrid({
    label: "heads of this layer",
    draw: drawThumb,
    onHover: (i) => {
      state.preview = i;
      if (!state.headLocked) drawMain();
      thumbs.mark(model.get("head"), state.preview, state.headLocked);
    },
    onClick: (i) => {
      if (i === model.get("head")) state.headLocked = !state.headLocked; // second click releases the focus
      else state.headLocked = true;
      setHead(i);
    },
  });
  const strip = new TokenStrip({
    onHover: (i) => {
      state.hover = i == null ? null : state.mode === "pays" ? { query: i, key: null } : { query: null, key: i };
      selectionChanged();
    },
    onClick: (i) => {
      const key = state.mode === "pays" ? "query" : "key";
      const same = state.lock && state.lock[key] === i;
      state.lock = same ? null : state.mode === "pays" ? { query: i, key: null } : { query: null, key: i };
      selectionChanged();
    },
  });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const tokenHead = h("div", { class: "cw-token-head" }, [
    h("span", { class: "cw-field-label", text: "Token view: colour by" }),
    modeSelect,
    h("span", { class: "cw-hint", text: "the hovered token (click to lock)" }),
  ]);
  root.append(toolbar, banner.el, thumbs.el, heatmap.el, readout, tokenHead, strip.el);

  // ----- helpers -------------------------------------------------------------------------
  const shownHead = () => (!state.headLocked && state.preview != null ? state.preview : model.get("head"));
  const shownLayer = () => (model.get("patterns_meta") || {}).layer ?? model.get("layer");
  const selection = () => state.lock || state.hover;

  function setHead(head) {
    const n = info().n_heads || 1;
    const next = Math.max(0, Math.min(n - 1, head));
    if (next !== model.get("head")) {
      model.set("head", next);
      model.save_changes();
    } else {
      thumbs.mark(next, state.preview, state.headLocked);
      drawMain();
    }
  }

  function exactRow(query) {
    const meta = model.get("row_meta") || {};
    const pm = model.get("patterns_meta") || {};
    if (meta.query !== query || meta.revision !== pm.revision) return null;
    const values = float32Of(model.get("row"));
    const [nHeads, nKeys] = meta.shape;
    const head = shownHead();
    return head < nHeads ? values.subarray(head * nKeys, (head + 1) * nKeys) : null;
  }

  function showError() {
    banner.show(model.get("error") || state.localError);
  }

  function mark(what, t0) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwHead = String(shownHead());
    root.dataset.cwLayer = String(shownLayer());
    root.dataset.cwTokens = String(state.strTokens.length);
    root.dataset.cwTheme = theme.dark ? "dark" : "light";
    const revision = String((model.get("patterns_meta") || {}).revision ?? "");
    root.dataset.cwRevision = revision;
    if (what === "all" && typeof requestAnimationFrame === "function") {
      // When the new picture reached the screen (benchmarks read this): the frame after the draw.
      requestAnimationFrame(() => {
        root.dataset.cwFrameAt = String(performance.now());
        root.dataset.cwFrameRevision = revision;
      });
    }
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what, ms: performance.now() - t0 } }));
  }

  // ----- drawing -------------------------------------------------------------------------
  function drawMain() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const head = shownHead();
    const lut = scale.lut(stack);
    heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(head, lut, pixels, 0),
      rowLabels: state.strTokens,
      colLabels: state.strTokens,
      title: `Layer ${shownLayer()}, head ${head}${state.headLocked ? " (locked)" : ""}`,
      yTitle: "query ↓",
      xTitle: "key →",
      scale,
      theme,
      maxPlot,
    });
    drawSelection();
    mark("main", t0);
  }

  const scratch = document.createElement("canvas");
  function drawThumb(i, ctx, px) {
    const stack = state.stack;
    if (!stack || i >= stack.count) return;
    const lut = scale.lut(stack);
    const rows = Math.min(stack.rows, px);
    const cols = Math.min(stack.cols, px);
    scratch.width = cols;
    scratch.height = rows;
    const sctx = scratch.getContext("2d");
    const image = sctx.createImageData(cols, rows);
    const pixels = new Uint32Array(image.data.buffer);
    if (rows === stack.rows && cols === stack.cols) {
      stack.paint(i, lut, pixels, 0);
    } else {
      const pooled = stack.pool(i, rows, cols);
      for (let k = 0; k < pooled.length; k++) pixels[k] = pooled[k] < 0 ? 0 : lut[pooled[k]];
    }
    sctx.putImageData(image, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(scratch, 0, 0, px, px);
  }

  function drawThumbs() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const labels = Array.from({ length: stack.count }, (_, i) => `H${i}`);
    thumbs.setItems(labels);
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    mark("thumbs", t0);
  }

  function drawTokens() {
    const stack = state.stack;
    const sel = selection();
    if (!stack || !sel) {
      strip.setWeights(null, scale);
      return;
    }
    const head = shownHead();
    if (state.mode === "pays" && sel.query != null) {
      const q = sel.query;
      const exact = exactRow(q);
      const row = exact || stack.rowValues(head, q);
      const weights = Array.from({ length: stack.cols }, (_, j) => (stack.stored(q, j) ? row[j] : null));
      strip.setWeights(weights, scale, q, !!state.lock);
    } else if (state.mode === "receives" && sel.key != null) {
      const k = sel.key;
      const col = stack.colValues(head, k);
      const weights = Array.from({ length: stack.rows }, (_, i) => (stack.stored(i, k) ? col[i] : null));
      strip.setWeights(weights, scale, k, !!state.lock);
    } else {
      strip.setWeights(null, scale);
    }
  }

  function drawReadout() {
    const stack = state.stack;
    const sel = selection();
    const toks = state.strTokens;
    const head = shownHead();
    const parts = [`L${shownLayer()} H${head}`];
    if (stack && sel && sel.query != null && sel.key != null && sel.query < stack.rows && sel.key < stack.cols) {
      const { query: q, key: k } = sel;
      const exact = exactRow(q);
      const weight = exact ? formatValue(exact[k]) : `≈${formatValue(stack.value(head, q, k), 3)}`;
      parts.push(`query ${q} ${quote(toks[q] ?? q)} → key ${k} ${quote(toks[k] ?? k)}`, `weight ${weight}`);
    } else if (stack && sel && sel.query != null) {
      parts.push(`query ${sel.query} ${quote(toks[sel.query] ?? sel.query)}`);
    } else if (stack && sel && sel.key != null) {
      parts.push(`key ${sel.key} ${quote(toks[sel.key] ?? sel.key)}`);
    } else {
      parts.push(stack ? `${stack.rows} tokens · hover a cell or a token` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc to release)");
    readout.textContent = parts.join(" · ");
  }

  function drawSelection() {
    const sel = selection();
    heatmap.setHighlight({
      row: state.hover?.query ?? null,
      col: state.hover?.key ?? null,
      lockedRow: state.lock?.query ?? null,
      lockedCol: state.lock?.key ?? null,
    });
    drawTokens();
    drawReadout();
    return sel;
  }

  // The kernel learns the selection (for the exact row) at most ~12 times a second.
  let lastSent = null;
  const sendSelection = throttle(() => {
    const sel = selection();
    const value = { query: sel?.query ?? null, key: sel?.key ?? null, locked: !!state.lock };
    const key = JSON.stringify(value);
    if (key === lastSent) return;
    lastSent = key;
    model.set("selection", value);
    model.save_changes();
  }, 80);

  function selectionChanged() {
    drawSelection();
    sendSelection();
  }

  // ----- model -> view -------------------------------------------------------------------
  function syncControls() {
    const inf = info();
    const layers = inf.attn_layers || [model.get("layer")];
    const layerOptions = standalone ? [{ value: shownLayer(), label: String(shownLayer()) }] : layers.map((l) => ({ value: l, label: String(l) }));
    layerSelect.set(layerOptions, standalone ? shownLayer() : model.get("layer"));
    const nHeads = inf.n_heads || 1;
    headSelect.set(Array.from({ length: nHeads }, (_, i) => ({ value: i, label: String(i) })), model.get("head"));
    prompt.show(inf.has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
  }

  function onPatterns() {
    const meta = model.get("patterns_meta");
    const data = model.get("patterns");
    try {
      state.stack = meta && meta.shape ? new CodeStack(data, meta) : null;
    } catch (err) {
      state.stack = null;
      state.localError = `could not read the patterns: ${err.message}`;
    }
    state.strTokens = model.get("str_tokens") || [];
    strip.setTokens(state.strTokens);
    const n = state.stack ? state.stack.rows : 0;
    const inRange = (s) => s && (s.query == null || s.query < n) && (s.key == null || s.key < n);
    if (!inRange(state.lock)) state.lock = null;
    if (!inRange(state.hover)) state.hover = null;
    const t0 = performance.now();
    syncControls();
    drawMain();
    drawThumbs();
    showError();
    mark("all", t0);
  }

  const onHead = () => {
    headSelect.select.value = String(model.get("head"));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    drawMain();
  };
  const onError = () => showError();
  const onBusy = () => (busy.hidden = !model.get("busy"));
  const onRow = () => {
    drawTokens();
    drawReadout();
  };
  const onInput = () => syncControls();
  const onSelection = () => {
    // Python may set the selection; adopt it when it is not the one we just sent.
    const value = model.get("selection") || {};
    if (JSON.stringify({ query: value.query ?? null, key: value.key ?? null, locked: !!value.locked }) === lastSent) return;
    const sel = value.query == null && value.key == null ? null : { query: value.query ?? null, key: value.key ?? null };
    if (value.locked) state.lock = sel;
    else state.hover = sel;
    drawSelection();
  };
  const handlers = {
    "change:patterns_meta": onPatterns,
    "change:head": onHead,
    "change:error": onError,
    "change:busy": onBusy,
    "change:row_meta": onRow,
    "change:prompt": onInput,
    "change:tokens": onInput,
    "change:layer": onInput,
    "change:info": onInput,
    "change:selection": onSelection,
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);

  // ----- keyboard, theme, size -------------------------------------------------------------
  const onKey = (e) => {
    if (e.target.closest && e.target.closest("textarea, input, select")) return;
    const layers = info().attn_layers || [];
    const handled = ["ArrowRight", "ArrowLeft", "Escape"].includes(e.key) || ((e.key === "ArrowUp" || e.key === "ArrowDown") && !standalone);
    if (handled) {
      e.preventDefault();
      e.stopPropagation(); // not also a notebook shortcut
    }
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      setHead(model.get("head") + (e.key === "ArrowRight" ? 1 : -1));
    } else if ((e.key === "ArrowUp" || e.key === "ArrowDown") && !standalone) {
      const i = layers.indexOf(model.get("layer")) + (e.key === "ArrowDown" ? 1 : -1);
      if (i >= 0 && i < layers.length) {
        model.set("layer", layers[i]);
        model.save_changes();
      }
    } else if (e.key === "Escape") {
      state.lock = null;
      state.headLocked = false;
      selectionChanged();
      drawMain();
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    scale = makeScale("sequential", { dark: theme.dark });
    drawMain();
    drawThumbs();
  });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    const next = Math.max(200, Math.min(560, width - 190));
    if (width > 0 && Math.abs(next - maxPlot) > 8) {
      maxPlot = next;
      drawMain();
    }
  }) : null;
  if (resize) resize.observe(root);

  // ----- first picture -------------------------------------------------------------------
  onBusy();
  onPatterns();

  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    root.removeEventListener("keydown", onKey);
    sendSelection.cancel();
    stopTheme();
    if (resize) resize.disconnect();
    prompt.destroy();
    heatmap.destroy();
    thumbs.destroy();
    strip.destroy();
    root.remove();
  };
}
