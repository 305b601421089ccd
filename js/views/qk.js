// QKCircuit view: the full QK circuit of a head on a token subset (query token x key token, in
// attention-logit units) beside its positional view (the attention a head pays from positions
// alone, causal and softmaxed). Every head of the layer arrives at once: switching head is local.

import { CodeStack } from "../lib/decode.js";
import { errorBanner, h } from "../lib/controls.js";
import { Heatmap } from "../lib/heatmap.js";
import { composeCanvases, composeSVG } from "../lib/plane.js";
import { safeName, savePNG, saveSVG } from "../lib/save.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { readTheme, watchTheme } from "../lib/theme.js";
import { exactValue, headStack, headToolbar, quote, setHeadOn } from "./ov.js";

export function render({ model, el }) {
  const standalone = model.standalone === true;
  const state = { hover: null, lock: null, draws: 0, localError: "" };
  const root = h("div", { class: "cw-root cw-qk", attrs: { tabindex: 0, "data-cw-kind": "qk" } });
  el.append(root);
  let theme = readTheme(root);
  let maxPlot = 340;
  const head = () => model.get("head");
  const layer = () => (model.get("qk_meta") || {}).layer ?? model.get("layer");
  const fileBase = () => safeName(`qk_L${layer()}H${head()}`);

  const toolbar = headToolbar({
    model,
    standalone,
    kind: "QK",
    onHead: (hd) => setHeadOn(model, hd) || draw(),
    onPNG: () => savePNG(picture(), `${fileBase()}.png`),
    onSVG: () => saveSVG(pictureSVG(), `${fileBase()}.svg`),
  });
  const banner = errorBanner();
  const criterion = h("div", { class: "cw-hint cw-criterion" });
  const hover = (which) => (hit) => {
    state.hover = hit ? { which, ...hit } : null;
    drawSelection();
  };
  const click = (which) => (hit) => {
    const same = state.lock && state.lock.which === which && state.lock.row === hit.row && state.lock.col === hit.col;
    state.lock = same ? null : { which, ...hit };
    drawSelection();
  };
  const tokenMap = new Heatmap({ label: "full QK circuit", onHover: hover("tokens"), onClick: click("tokens") });
  const posMap = new Heatmap({ label: "positional QK pattern", onHover: hover("positions"), onClick: click("positions") });
  const note = h("div", { class: "cw-qk-note", attrs: { role: "note" } });
  note.hidden = true;
  const posCaption = h("div", { class: "cw-hint cw-qk-caption" });
  const posBox = h("div", { class: "cw-qk-pos" }, [posMap.el, posCaption, note]);
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  root.append(toolbar.el, banner.el, criterion, h("div", { class: "cw-qk-main" }, [tokenMap.el, posBox]), readout);

  let tokenStack = null;
  let posStack = null;
  const selection = () => state.lock || state.hover;
  const showError = () => banner.show(model.get("error") || state.localError);
  const showBusy = () => toolbar.busy(!standalone && model.get("busy") ? "computing…" : "");

  function mark(t0) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwHead = String(head());
    root.dataset.cwLayer = String(layer());
    root.dataset.cwTokens = String(tokenStack ? tokenStack.rows : 0);
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what: "qk", ms: performance.now() - t0 } }));
  }

  function draw() {
    const t0 = performance.now();
    toolbar.setHead(head());
    try {
      tokenStack = headStack(model.get("qk"), model.get("qk_meta"), head());
      const pm = model.get("positional_meta");
      posStack = pm && pm.shape ? new CodeStack(model.get("positional"), pm) : null;
    } catch (err) {
      tokenStack = null;
      posStack = null;
      state.localError = `could not read the QK payload: ${err.message}`;
    }
    showError();
    if (!tokenStack) return;
    const tokens = model.get("str_tokens") || [];
    const diverging = makeScale("diverging", { dark: theme.dark, domain: [tokenStack.lo, tokenStack.hi] });
    const lut = diverging.lut(tokenStack);
    tokenMap.update({
      rows: tokenStack.rows,
      cols: tokenStack.cols,
      paint: (pixels) => tokenStack.paint(0, lut, pixels, 0),
      rowLabels: tokens,
      colLabels: tokens,
      title: `Full QK circuit (attention logits), layer ${layer()} head ${head()}`,
      yTitle: "query ↓",
      xTitle: "key →",
      scale: diverging,
      theme,
      maxPlot,
    });
    const noteText = model.get("positional_note") || "";
    note.textContent = noteText;
    posCaption.textContent = posStack ? `softmax over keys of mask(W_pos W_Q W_Kᵀ W_posᵀ / √d_head), first ${posStack.rows} of ${(model.get("info") || {}).n_ctx ?? "?"} positions` : "";
    note.hidden = !noteText;
    posMap.el.hidden = !posStack || head() >= posStack.count;
    if (posStack && head() < posStack.count) {
      const seq = makeScale("sequential", { dark: theme.dark });
      const plut = seq.lut(posStack);
      const positions = Array.from({ length: posStack.rows }, (_, i) => String(i));
      posMap.update({
        rows: posStack.rows,
        cols: posStack.cols,
        paint: (pixels) => posStack.paint(head(), plut, pixels, seq.lut(posStack)[posStack.nanCode]),
        rowLabels: positions,
        colLabels: positions,
        title: `Attention from positions alone, head ${head()}`,
        yTitle: "query pos ↓",
        xTitle: "key pos →",
        scale: seq,
        theme,
        maxPlot,
      });
    }
    drawSelection();
    mark(t0);
  }

  function drawSelection() {
    const sel = selection();
    for (const [which, map] of [["tokens", tokenMap], ["positions", posMap]]) {
      const hv = state.hover && state.hover.which === which ? state.hover : null;
      const lk = state.lock && state.lock.which === which ? state.lock : null;
      if (map.scene) map.setHighlight({ row: hv?.row ?? null, col: hv?.col ?? null, lockedRow: lk?.row ?? null, lockedCol: lk?.col ?? null });
    }
    const tokens = model.get("str_tokens") || [];
    const ids = model.get("tokens") || [];
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (sel && sel.which === "tokens" && tokenStack && sel.row < tokenStack.rows && sel.col < tokenStack.cols) {
      const exact = exactValue(model.get("values"), model.get("values_meta"), head(), sel.row, sel.col);
      const value = exact == null ? `≈${formatValue(tokenStack.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      parts.push(`query ${quote(tokens[sel.row] ?? sel.row)} (id ${ids[sel.row]}) → key ${quote(tokens[sel.col] ?? sel.col)} (id ${ids[sel.col]})`, `logit ${value}`);
      if (exact != null) readout.dataset.value = String(exact);
    } else if (sel && sel.which === "positions" && posStack && sel.row < posStack.rows && sel.col < posStack.cols) {
      const v = sel.col <= sel.row ? posStack.value(head(), sel.row, sel.col) : 0;
      parts.push(`query position ${sel.row} → key position ${sel.col}`, sel.col <= sel.row ? `weight ≈${formatValue(v, 3)}` : "masked (future key)");
      readout.dataset.value = String(v);
    } else {
      parts.push(tokenStack ? `${tokenStack.rows} tokens · hover a cell (click to lock)` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }

  function picture() {
    const pics = [tokenMap.toCanvas()];
    if (posStack && posMap.scene && !posMap.el.hidden) pics.push(posMap.toCanvas());
    return composeCanvases(pics, theme.bgCss);
  }

  function pictureSVG() {
    const parts = [tokenMap.toSVG()];
    if (posStack && posMap.scene && !posMap.el.hidden) parts.push(posMap.toSVG());
    return composeSVG(parts, theme.bgCss);
  }

  const onPayload = () => {
    state.hover = null;
    state.lock = null;
    criterion.textContent = `Tokens: ${model.get("token_criterion") || ""}`;
    toolbar.sync("qk_meta");
    draw();
  };
  const handlers = {
    "change:qk_meta": onPayload,
    "change:head": () => draw(),
    "change:error": showError,
    "change:busy": showBusy,
    "change:layer": () => toolbar.sync("qk_meta"),
    "change:info": () => toolbar.sync("qk_meta"),
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);

  const onKey = (e) => {
    if (e.target.closest && e.target.closest("textarea, input, select")) return;
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      setHeadOn(model, head() + (e.key === "ArrowRight" ? 1 : -1));
    } else if (e.key === "Escape") {
      state.lock = null;
      drawSelection();
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    draw();
  });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    const next = Math.max(180, Math.min(340, (width - 330) / 2));
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
    stopTheme();
    if (resize) resize.disconnect();
    tokenMap.destroy();
    posMap.destroy();
    root.remove();
  };
}
