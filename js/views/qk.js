// QKCircuit view: the full QK circuit of a head on a token subset (destination (query) token x source (key) token, in
// attention-logit units) beside its positional view (the attention a head pays from positions
// alone, causal and softmaxed). Every head of the layer arrives at once: switching head is local.

import { colorScaleOf } from "../lib/color-scale.js";
import { h } from "../lib/controls.js";
import { CodeStack, exactValue, hasData, headStack } from "../lib/decode.js";
import { Heatmap } from "../lib/heatmap.js";
import { headKeys, headToolbar, setHead } from "../lib/heads.js";
import { heldLayer } from "../lib/held.js";
import { quote } from "../lib/layout.js";
import { sameRevision } from "../lib/payloads.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { CellSelection } from "../lib/selection.js";
import { composeScenes } from "../lib/scene.js";
import { defineView } from "../lib/view.js";

defineView("qk", (v) => {
  const { model } = v;
  const state = { tokens: null, positions: null };
  const cells = new CellSelection(() => drawSelection());
  const head = () => model.get("head");
  const shown = () => v.payloads("qk", "positional"); // one refresh's token and position pictures
  const layer = () => shown()?.qk.layer ?? model.get("layer");
  // an exported page asked (through a link) for a layer it does not hold: says so instead of drawing
  const held = heldLayer(v, { held: () => shown()?.qk.layer, parts: () => [main, readout, toolbar.criterion], what: "QK circuit" });

  const toolbar = headToolbar(v, {
    layer: () => (held.stale ? model.get("layer") : layer()),
    onHead: (hd) => setHead(v, hd) || draw(),
    save: { what: "QK view", picture, name: () => `qk_L${layer()}H${head()}` },
    criterion: true,
  });
  const tokenMap = v.own(new Heatmap({ label: "full QK circuit", ...cells.on("tokens") }));
  const posMap = v.own(new Heatmap({ label: "positional QK pattern", ...cells.on("positions") }));
  const note = h("div", { class: "cw-qk-note", attrs: { role: "note" } });
  note.hidden = true;
  const posCaption = h("div", { class: "cw-hint cw-qk-caption" });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const tokenCaption = h("div", { class: "cw-hint cw-qk-caption" });
  const main = h("div", { class: "cw-qk-main" }, [
    h("div", { class: "cw-qk-tokens" }, [tokenMap.el, tokenCaption]),
    h("div", { class: "cw-qk-pos" }, [posMap.el, posCaption, note]),
  ]);
  v.root.append(toolbar.el, v.banner, toolbar.criterion, held.el, main, readout);

  function draw() {
    const t0 = performance.now();
    toolbar.headSelect.select.value = String(head());
    const set = shown();
    try {
      state.tokens = set && headStack(set.qk, head());
      state.positions = set && hasData(set.positional) ? new CodeStack(set.positional) : null;
      v.error("", "decode");
    } catch (err) {
      state.tokens = state.positions = null;
      v.error(`could not read the QK payload: ${err.message}`, "decode");
    }
    const { tokens, positions } = state;
    if (!tokens) return;
    const labels = set.qk.labels || [];
    const diverging = makeScale("diverging", { dark: v.theme.dark, domain: [tokens.lo, tokens.hi] });
    const lut = diverging.lut(tokens);
    tokenMap.update({
      rows: tokens.rows,
      cols: tokens.cols,
      paint: (pixels) => tokens.paint(0, lut, pixels, 0),
      rowLabels: labels,
      colLabels: labels,
      title: `Full QK circuit (attention logits), layer ${layer()} head ${head()}`,
      yTitle: "destination (query) ↓",
      xTitle: "source (key) →",
      scale: diverging,
      theme: v.theme,
      maxPlot: v.size,
    });
    const noteText = set.positional.note || "";
    note.textContent = noteText;
    note.hidden = !noteText;
    tokenCaption.textContent = set.qk.caption || "";
    posCaption.textContent = positions ? set.positional.caption || "" : "";
    posMap.el.hidden = !positions || head() >= positions.count;
    if (!posMap.el.hidden) {
      const c = colorScaleOf(set.positional.scale, head()); // the codes are positions on the colour scale
      const seq = makeScale("sequential", { dark: v.theme.dark, ticks: c.ticks, caption: c.caption });
      const plut = seq.lut(positions);
      const names = Array.from({ length: positions.rows }, (_, i) => String(i));
      posMap.update({
        rows: positions.rows,
        cols: positions.cols,
        paint: (pixels) => positions.paint(head(), plut, pixels, plut[positions.nanCode]),
        rowLabels: names,
        colLabels: names,
        title: `Attention from positions alone, head ${head()}`,
        yTitle: "destination pos ↓",
        xTitle: "source pos →",
        scale: seq,
        theme: v.theme,
        maxPlot: v.size,
      });
    }
    drawSelection();
    v.drawn("qk", t0);
  }

  function drawSelection() {
    if (tokenMap.scene) tokenMap.setHighlight(cells.highlight("tokens"));
    if (posMap.scene) posMap.setHighlight(cells.highlight("positions"));
    const set = shown();
    const { tokens, positions } = state;
    const sel = cells.current;
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (sel?.which === "tokens" && tokens && sel.row < tokens.rows && sel.col < tokens.cols) {
      const labels = set.qk.labels || [];
      const ids = set.qk.ids || [];
      const values = model.get("values");
      const exact = sameRevision(values, set.qk) ? exactValue(values, head(), sel.row, sel.col) : null;
      const value = exact == null ? `≈${formatValue(tokens.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      const token = (i) => `${quote(labels[i] ?? i)} (id ${ids[i]})`;
      parts.push(`destination (query) ${token(sel.row)} → source (key) ${token(sel.col)}`, `logit ${value}`);
      if (exact != null) readout.dataset.value = String(exact);
    } else if (sel?.which === "positions" && positions && sel.row < positions.rows && sel.col < positions.cols) {
      const w = sel.col <= sel.row ? positions.value(head(), sel.row, sel.col) : 0;
      parts.push(
        `destination position ${sel.row} → source position ${sel.col}`,
        sel.col <= sel.row ? `weight ≈${formatValue(w, 3)}` : "masked (future key)",
      );
      readout.dataset.value = String(w);
    } else {
      parts.push(tokens ? `${tokens.rows} tokens · hover a cell (click to lock)` : "no picture yet");
    }
    if (cells.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }

  function picture() {
    if (!tokenMap.scene) return null;
    return composeScenes(posMap.scene && !posMap.el.hidden ? [tokenMap.scene, posMap.scene] : [tokenMap.scene]);
  }

  function start() {
    cells.reset();
    held.check();
    toolbar.sync();
    draw();
  }

  v.onPayloads("qk positional", start);
  v.on("change:head", draw);
  v.on("change:values", drawSelection);
  v.on("change:layer change:info change:token_criterion", () => {
    held.check();
    toolbar.sync();
  });

  return {
    start,
    draw,
    size: (width) => Math.max(180, Math.min(340, (width - 330) / 2)),
    keys: {
      ...headKeys(v),
      Escape: () => cells.release(),
    },
    marks: () => ({
      head: head(),
      layer: held.stale ? model.get("layer") : layer(),
      held: held.stale ? String(layer()) : "",
      tokens: state.tokens?.rows ?? 0,
    }),
  };
});
