// AttentionPattern view: heatmap of one head, thumbnails of every head in the layer, token view.
//
// The layer's patterns arrive once as uint8 codes; switching head redraws from them without the
// kernel. Hover read-outs use the exact float32 row the kernel sends for the selected query
// (a quantised value, marked "≈", is shown until it arrives or when there is no kernel).

import { h, promptBox, throttle } from "../lib/controls.js";
import { CodeStack, floatValues, hasData } from "../lib/decode.js";
import { headKeys, headToolbar, setHead as setModelHead } from "../lib/heads.js";
import { Heatmap } from "../lib/heatmap.js";
import { quote, truncate } from "../lib/layout.js";
import { sameRevision } from "../lib/payloads.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { drawStackThumb, ThumbGrid } from "../lib/thumbs.js";
import { TokenStrip } from "../lib/tokens.js";
import { defineView } from "../lib/view.js";

defineView("attention", (v) => {
  const { model } = v;
  const state = {
    stack: null,
    labels: [],
    preview: null, // head under the pointer in the thumbnails
    headLocked: false, // a clicked thumbnail holds the view until clicked again
    hover: null, // {query, key} under the pointer
    lock: null, // {query, key} clicked in the heatmap or token strip
    mode: "pays", // token view: attention the focused token pays, or receives
  };
  const info = () => model.get("info") || {};
  const patterns = () => v.payloads("patterns")?.patterns;
  const shownHead = () => (!state.headLocked && state.preview != null ? state.preview : model.get("head"));
  const shownLayer = () => patterns()?.layer ?? model.get("layer");
  const selection = () => state.lock || state.hover;
  const scale = () => makeScale("sequential", { dark: v.theme.dark });

  // ----- controls ------------------------------------------------------------------------
  const prompt = v.own(
    promptBox({
      placeholder: info().has_tokenizer ? "type a prompt, Enter to run" : "token ids separated by spaces, Enter to run",
      onSubmit: (text) => {
        if (info().has_tokenizer) return v.set({ prompt: text });
        const ids = text.trim().split(/[\s,]+/).filter(Boolean).map(Number);
        if (!ids.length || ids.some((x) => !Number.isInteger(x) || x < 0)) {
          v.error(`token ids must be non-negative integers separated by spaces; got ${JSON.stringify(truncate(text, 40))}`, "prompt");
          return;
        }
        v.error("", "prompt");
        v.set({ tokens: ids });
      },
    }),
  );
  if (v.standalone) prompt.readOnly(true, "exported page: no kernel to re-run the model");
  const toolbar = headToolbar(v, {
    layer: shownLayer,
    onHead: setHead,
    save: { what: "heatmap", picture: () => heatmap.scene, name: () => `attention_L${shownLayer()}H${shownHead()}` },
  });
  toolbar.el.prepend(prompt.el);
  const modeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "token view" } }, [
    h("option", { value: "pays", text: "attention paid by (as destination)" }),
    h("option", { value: "receives", text: "attention received by (as source)" }),
  ]);
  v.listen(modeSelect, "change", () => {
    state.mode = modeSelect.value;
    drawTokens();
  });

  // ----- pictures ------------------------------------------------------------------------
  const heatmap = v.own(
    new Heatmap({
      label: "attention pattern",
      onHover: (hit) => select("hover", hit ? { query: hit.row, key: hit.col } : null),
      onClick: (hit) => {
        const same = state.lock?.query === hit.row && state.lock?.key === hit.col;
        select("lock", same ? null : { query: hit.row, key: hit.col });
      },
    }),
  );
  const thumbs = v.own(
    new ThumbGrid({
      label: "heads of this layer",
      draw: drawThumb,
      onHover: (i) => {
        state.preview = i;
        if (!state.headLocked) drawMain();
        thumbs.mark(model.get("head"), state.preview, state.headLocked);
      },
      onClick: (i) => {
        state.headLocked = i === model.get("head") ? !state.headLocked : true; // a second click releases
        setHead(i);
      },
    }),
  );
  const tokenAt = (i) => (i == null ? null : state.mode === "pays" ? { query: i, key: null } : { query: null, key: i });
  const strip = v.own(
    new TokenStrip({
      onHover: (i) => select("hover", tokenAt(i)),
      onClick: (i) => {
        const axis = state.mode === "pays" ? "query" : "key";
        select("lock", state.lock?.[axis] === i ? null : tokenAt(i));
      },
    }),
  );
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const tokenHead = h("div", { class: "cw-token-head" }, [
    h("span", { class: "cw-field-label", text: "Token view: colour by" }),
    modeSelect,
    h("span", { class: "cw-hint", text: "the hovered token (click to lock)" }),
  ]);
  v.root.append(toolbar.el, v.banner, thumbs.el, heatmap.el, readout, tokenHead, strip.el);

  function setHead(head) {
    if (!setModelHead(v, head)) {
      thumbs.mark(model.get("head"), state.preview, state.headLocked);
      drawMain();
    }
  }

  /** The exact weights of `query` for the head shown, when the kernel sent them for this picture. */
  function exactRow(query) {
    const row = model.get("row");
    if (!hasData(row) || row.query !== query || !sameRevision(row, patterns())) return null;
    const [nHeads, nKeys] = row.shape;
    const head = shownHead();
    return head < nHeads ? floatValues(row).subarray(head * nKeys, (head + 1) * nKeys) : null;
  }

  // ----- drawing -------------------------------------------------------------------------
  function drawMain() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const head = shownHead();
    const sc = scale();
    const lut = sc.lut(stack);
    heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(head, lut, pixels, 0),
      rowLabels: state.labels,
      colLabels: state.labels,
      title: `Layer ${shownLayer()}, head ${head}${state.headLocked ? " (locked)" : ""}`,
      yTitle: "destination (query) ↓",
      xTitle: "source (key) →",
      scale: sc,
      theme: v.theme,
      maxPlot: v.size,
    });
    drawSelection();
    v.drawn("main", t0);
  }

  function drawThumb(i, ctx, px) {
    if (state.stack && i < state.stack.count) drawStackThumb(ctx, px, state.stack, i, scale().lut(state.stack));
  }

  function drawThumbs() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    thumbs.setItems(Array.from({ length: stack.count }, (_, i) => `H${i}`));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    v.drawn("thumbs", t0);
  }

  function drawTokens() {
    const { stack } = state;
    const sel = selection();
    const head = shownHead();
    const locked = !!state.lock;
    if (stack && sel && state.mode === "pays" && sel.query != null) {
      const q = sel.query;
      const row = exactRow(q) || stack.rowValues(head, q);
      strip.setWeights(Array.from({ length: stack.cols }, (_, j) => (stack.stored(q, j) ? row[j] : null)), scale(), q, locked);
    } else if (stack && sel && state.mode === "receives" && sel.key != null) {
      const k = sel.key;
      const col = stack.colValues(head, k);
      strip.setWeights(Array.from({ length: stack.rows }, (_, i) => (stack.stored(i, k) ? col[i] : null)), scale(), k, locked);
    } else {
      strip.setWeights(null, scale());
    }
  }

  function drawReadout() {
    const { stack, labels } = state;
    const sel = selection();
    const head = shownHead();
    const name = (i) => `${i} ${quote(labels[i] ?? i)}`;
    const parts = [`L${shownLayer()} H${head}`];
    if (stack && sel?.query != null && sel.key != null && sel.query < stack.rows && sel.key < stack.cols) {
      const { query: q, key: k } = sel;
      const exact = exactRow(q);
      const weight = exact ? formatValue(exact[k]) : `≈${formatValue(stack.value(head, q, k), 3)}`;
      parts.push(`destination (query) ${name(q)} → source (key) ${name(k)}`, `weight ${weight}`);
    } else if (stack && sel?.query != null) {
      parts.push(`destination (query) ${name(sel.query)}`);
    } else if (stack && sel?.key != null) {
      parts.push(`source (key) ${name(sel.key)}`);
    } else {
      parts.push(stack ? `${stack.rows} tokens · hover a cell or a token` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc to release)");
    readout.textContent = parts.join(" · ");
  }

  function drawSelection() {
    heatmap.setHighlight({ row: state.hover?.query, col: state.hover?.key, lockedRow: state.lock?.query, lockedCol: state.lock?.key });
    drawTokens();
    drawReadout();
  }

  // The kernel learns the selection (for the exact row) at most ~12 times a second.
  let lastSent = null;
  const selectionValue = (sel, locked) => JSON.stringify({ query: sel?.query ?? null, key: sel?.key ?? null, locked });
  const sendSelection = v.own(
    throttle(() => {
      const key = selectionValue(selection(), !!state.lock);
      if (key === lastSent) return;
      lastSent = key;
      v.set({ selection: JSON.parse(key) });
    }, 80),
  );

  function select(which, value) {
    state[which] = value;
    drawSelection();
    sendSelection();
  }

  // ----- model -> view -------------------------------------------------------------------
  function syncControls() {
    toolbar.sync();
    prompt.show(info().has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
  }

  function start() {
    const p = patterns();
    try {
      state.stack = hasData(p) ? new CodeStack(p) : null;
      v.error("", "decode");
    } catch (err) {
      state.stack = null;
      v.error(`could not read the patterns: ${err.message}`, "decode");
    }
    state.labels = p?.labels || [];
    strip.setTokens(state.labels);
    const n = state.stack ? state.stack.rows : 0;
    const inRange = (s) => s && (s.query == null || s.query < n) && (s.key == null || s.key < n);
    if (!inRange(state.lock)) state.lock = null;
    if (!inRange(state.hover)) state.hover = null;
    const t0 = performance.now();
    syncControls();
    drawAll();
    v.drawn("all", t0);
  }

  function drawAll() {
    drawMain();
    drawThumbs();
  }

  v.onPayloads("patterns", start);
  v.on("change:head", () => {
    toolbar.headSelect.select.value = String(model.get("head"));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    drawMain();
  });
  v.on("change:row", () => {
    drawTokens();
    drawReadout();
  });
  v.on("change:prompt change:tokens change:layer change:info", syncControls);
  v.on("change:selection", () => {
    // Python may set the selection; adopt it when it is not the one we just sent.
    const value = model.get("selection") || {};
    if (selectionValue(value, !!value.locked) === lastSent) return;
    const sel = value.query == null && value.key == null ? null : { query: value.query ?? null, key: value.key ?? null };
    state[value.locked ? "lock" : "hover"] = sel;
    drawSelection();
  });

  return {
    start,
    draw: drawAll,
    size: (width) => Math.max(200, Math.min(560, width - 190)),
    busy: () => (model.get("busy") ? "running…" : ""),
    keys: {
      ...headKeys(v, { layers: true, onHead: setHead }),
      Escape: () => {
        state.headLocked = false;
        thumbs.mark(model.get("head"), state.preview, false);
        select("lock", null);
        drawMain();
      },
    },
    marks: () => ({ head: shownHead(), layer: shownLayer(), tokens: state.labels.length, revision: patterns()?.revision ?? "" }),
  };
});
