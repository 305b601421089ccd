// LogitAttribution view: the direct contribution of every head to one logit at one destination
// position (layer x head grid), bars for the embeddings, MLPs and biases, and every head at every
// position (heads x positions). Every position arrives at once (float32 [seq, n_terms]), so a
// click on a token (the position) or on a head redraws here without the kernel.

import { button, h } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { headKeys, headToolbar } from "../lib/heads.js";
import { Heatmap } from "../lib/heatmap.js";
import { cellBox, cellValueOps } from "../lib/heatmap-scene.js";
import { axisPriority, quote } from "../lib/layout.js";
import { formatCell, formatValue, makeScale, packRGBA } from "../lib/scales.js";
import { TokenStrip } from "../lib/tokens.js";
import { sequenceBox } from "../lib/sequence-box.js";
import { defineView } from "../lib/view.js";

defineView("attribution", (v) => {
  const { model } = v;
  const state = { values: null, seq: 0, terms: 0, L: 0, H: 0, hoverGrid: null, hoverPos: null, scope: "all" };
  const info = () => model.get("info") || {};
  const payload = () => v.payloads("attribution")?.attribution || {};
  const layers = () => payload().layers || info().attn_layers || [];
  const labels = () => payload().labels || [];
  const position = () => {
    const p = model.get("position");
    return p < 0 ? state.seq + p : p;
  };
  const value = (pos, term) => state.values[pos * state.terms + term];
  const headTerm = (row, hd) => row * state.H + hd;
  const layerRow = () => layers().indexOf(model.get("layer"));
  const tokenName = (i) => `${i} ${quote(labels()[i] ?? i)}`;
  const outName = (pos) => {
    const p = payload();
    const t = p.targets?.[pos];
    if (t == null || t < 0) return "none";
    const base = p.baseline == null ? "" : ` − ${quote(p.baseline_string ?? p.baseline)}`;
    return `${quote(p.target_strings?.[pos] ?? t)}${base}`;
  };
  const symmetric = (xs) => {
    let m = 0;
    for (const x of xs) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x));
    return m > 0 ? m : 1e-6;
  };
  const diverging = (m) => makeScale("diverging", { dark: v.theme.dark, domain: [-m, m] });

  // ----- controls ------------------------------------------------------------------------
  const prompt = v.own(sequenceBox(v, () => info().has_tokenizer));
  const tokenInput = (label, trait, placeholder) => {
    const input = h("input", {
      class: "cw-input cw-la-token",
      type: "text",
      placeholder,
      spellcheck: false,
      attrs: { "aria-label": label },
    });
    v.listen(input, "keydown", (e) => {
      e.stopPropagation();
      if (e.key === "Enter") v.set({ [trait]: input.value });
    });
    v.listen(input, "change", () => v.set({ [trait]: input.value }));
    const el = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: label }), input]);
    return { el, input };
  };
  const target = tokenInput("Out token", "target_text", "next token");
  const baseline = tokenInput("minus", "baseline_text", "(none)");
  const nextButton = button("next token", "explain each position's actual next token", () => v.set({ target_text: "" }));
  if (v.standalone) target.input.readOnly = baseline.input.readOnly = nextButton.disabled = true;
  const toolbar = headToolbar(v, {
    layer: () => model.get("layer"),
    save: { what: "grid", picture: () => grid.scene, name: () => `attribution_pos${position()}` },
  });
  toolbar.el.prepend(prompt.el, h("div", { class: "cw-toolbar-row" }, [target.el, nextButton, baseline.el]));

  const caption = h("div", { class: "cw-hint cw-la-caption" });
  const grid = v.own(
    new Heatmap({
      label: "direct logit attribution per head",
      onHover: (hit) => {
        state.hoverGrid = hit;
        state.hoverPos = null;
        drawMarks();
      },
      onClick: (hit) => v.set({ layer: layers()[hit.row], head: hit.col }),
    }),
  );
  const bars = h("div", { class: "cw-la-bars", attrs: { role: "list", "aria-label": "other terms" } });
  const readout = h("div", { class: "cw-readout cw-la-readout", attrs: { "aria-live": "polite" } });
  const strip = v.own(
    new TokenStrip({
      onHover: () => {},
      onClick: (i) => v.set({ position: i }),
    }),
  );
  const scopeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "heads over positions" } }, [
    h("option", { value: "all", text: "every head" }),
    h("option", { value: "head", text: "the selected head" }),
  ]);
  v.listen(scopeSelect, "change", () => {
    state.scope = scopeSelect.value;
    drawPositions();
  });
  const byPosition = v.own(
    new Heatmap({
      label: "direct logit attribution per head and position",
      onHover: (hit) => {
        state.hoverPos = hit;
        state.hoverGrid = null;
        drawMarks();
      },
      onClick: (hit) => {
        const [row, hd] = positionRow(hit.row);
        v.set({ position: hit.col, layer: layers()[row], head: hd });
      },
    }),
  );
  const tokenHead = h("div", { class: "cw-token-head" }, [
    h("span", { class: "cw-hint", text: "Destination position: click a token · colour: the selected head's contribution there" }),
  ]);
  const posHead = h("div", { class: "cw-token-head" }, [h("span", { class: "cw-field-label", text: "Over positions:" }), scopeSelect]);
  v.root.append(
    toolbar.el,
    v.banner,
    caption,
    h("div", { class: "cw-la-main" }, [grid.el, bars]),
    readout,
    tokenHead,
    strip.el,
    posHead,
    byPosition.el,
  );

  // ----- drawing -------------------------------------------------------------------------
  function drawCaption() {
    const p = payload();
    const pos = position();
    const norm = p.norm ?? info().norm;
    const scale = p.scale?.[pos];
    const at = `scale frozen at position ${pos}${scale != null ? ` (${formatValue(scale)})` : ""}`;
    const frozen =
      norm === "LN"
        ? `final LayerNorm ${at}; each term centred`
        : norm === "RMS"
          ? `final RMSNorm ${at}; not centred (RMSNorm does not centre)`
          : "no final norm: the terms are exact";
    const what = p.baseline == null ? "logit" : "logit difference";
    caption.textContent = `Direct effect on the ${what} of out ${outName(pos)} at destination ${tokenName(pos)} · ${frozen}`;
    caption.dataset.norm = norm ?? "none";
  }

  function gridMarks(layout) {
    const ops = [];
    const row = layerRow();
    if (row >= 0) ops.push(cellBox(layout, row, model.get("head"), { color: v.theme.accent, width: 2.5, inset: 1 }));
    return ops;
  }

  function cellValues(layout, pos, sc) {
    if (layout.cell < 26) return [];
    return cellValueOps(layout, state.L, state.H, {
      value: (l, hd) => value(pos, headTerm(l, hd)),
      text: formatCell,
      scale: sc,
      theme: v.theme,
    });
  }

  function drawGrid() {
    const pos = position();
    const { L, H } = state;
    const heads = Array.from({ length: L * H }, (_, i) => value(pos, i));
    const sc = diverging(symmetric(heads));
    grid.update({
      rows: L,
      cols: H,
      paint: (pixels) => {
        for (let i = 0; i < L * H; i++) pixels[i] = packed(sc, heads[i]);
      },
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      // labels beyond what fits: the selected layer and head, then the strongest
      ...axisPriority(L, H, (l, hd) => heads[l * H + hd]),
      keepRows: layerRow(),
      keepCols: model.get("head"),
      title: `Heads → out ${outName(pos)} at position ${pos}`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: headGridPlot(L, H),
      marks: (layout) => [...cellValues(layout, pos, sc), ...gridMarks(layout)],
    });
    grid.el.dataset.position = String(pos);
  }

  const packed = (sc, x) => packRGBA(...(Number.isFinite(x) ? sc.rgb(x) : sc.nan));
  // 40 px a head, 160 to 360 px, more (up to 720) so that each head keeps 10 px and its label
  const headGridPlot = (L, H) => Math.max(160, Math.min(Math.max(360, 10 * Math.max(L, H)), 40 * Math.max(L, H), 720));

  function drawBars() {
    const p = payload();
    const pos = position();
    const names = p.names || [];
    const nHeads = state.L * state.H;
    let headSum = 0;
    for (let i = 0; i < nHeads; i++) headSum += value(pos, i);
    const rows = [["heads (sum)", headSum]];
    for (let i = nHeads; i < state.terms; i++) rows.push([names[i], value(pos, i)]);
    const total = rows.reduce((s, [, x]) => s + x, 0);
    const m = symmetric(rows.map(([, x]) => x));
    const sc = diverging(m);
    const items = rows.map(([name, x]) => {
      const width = Number.isFinite(x) ? (50 * Math.abs(x)) / m : 0;
      const bar = h("span", {
        class: "cw-la-bar",
        style: { width: `${width}%`, left: x < 0 ? `${50 - width}%` : "50%", background: sc.css(x) },
      });
      return h("div", { class: "cw-la-row", attrs: { role: "listitem", "data-term": name, "data-value": String(x) } }, [
        h("span", { class: "cw-la-name", text: name }),
        h("span", { class: "cw-la-track" }, [h("span", { class: "cw-la-zero" }), bar]),
        h("span", { class: "cw-la-value", text: formatValue(x) }),
      ]);
    });
    const logit = p.logits?.[pos];
    const sum = h("div", { class: "cw-la-sum", text: `sum of terms ${formatValue(total)} · model ${formatValue(logit)}` });
    sum.dataset.total = String(total);
    sum.dataset.logit = String(logit ?? "");
    bars.replaceChildren(h("div", { class: "cw-field-label", text: "Other terms (same units)" }), ...items, sum);
  }

  /** Rows of the positions view: every head, or the selected one. Returns [layer row, head] of row r. */
  function positionRows() {
    const row = layerRow();
    if (state.scope === "head" && row >= 0) return [[row, model.get("head")]];
    return Array.from({ length: state.L * state.H }, (_, i) => [Math.floor(i / state.H), i % state.H]);
  }
  const positionRow = (r) => positionRows()[r];

  function drawPositions() {
    if (!state.values) return;
    const rows = positionRows();
    const all = [];
    for (const [l, hd] of rows) for (let q = 0; q < state.seq; q++) all.push(value(q, headTerm(l, hd)));
    const sc = diverging(symmetric(all));
    const nL = layers();
    const target = payload().fixed_target ? `out ${outName(state.seq - 1)}` : "each its own next token";
    byPosition.update({
      rows: rows.length,
      cols: state.seq,
      paint: (pixels) => {
        for (let i = 0; i < all.length; i++) pixels[i] = packed(sc, all[i]);
      },
      rowLabels: rows.map(([l, hd]) => `L${nL[l]}H${hd}`),
      colLabels: labels(),
      // labels beyond what fits: the selected head and position, then the strongest
      ...axisPriority(rows.length, state.seq, (r, q) => all[r * state.seq + q]),
      keepRows: rows.findIndex(([l, hd]) => l === layerRow() && hd === model.get("head")),
      keepCols: position(),
      title: `Direct effect at every destination position (${target})`,
      yTitle: "head ↓",
      xTitle: "destination (query) →",
      scale: sc,
      theme: v.theme,
      maxPlot: v.size,
    });
  }

  function drawStrip() {
    const row = layerRow();
    const weights = row < 0 ? null : Array.from({ length: state.seq }, (_, q) => value(q, headTerm(row, model.get("head"))));
    strip.setWeights(weights, diverging(symmetric(weights || [])), position(), true);
  }

  function drawMarks() {
    const g = state.hoverGrid;
    grid.setHighlight({ row: g?.row, col: g?.col, marks: gridMarks });
    const hp = state.hoverPos;
    const rows = positionRows();
    const selected = rows.findIndex(([l, hd]) => l === layerRow() && hd === model.get("head"));
    byPosition.setHighlight({
      row: hp?.row,
      col: hp?.col,
      lockedCol: position(),
      marks: (layout) => (selected >= 0 ? [cellBox(layout, selected, position(), { color: v.theme.accent, width: 2, inset: 0 })] : []),
    });
    drawReadout();
  }

  function drawReadout() {
    if (!state.values) {
      readout.textContent = "no picture yet";
      return;
    }
    let l;
    let hd;
    let pos = position();
    if (state.hoverGrid) [l, hd] = [state.hoverGrid.row, state.hoverGrid.col];
    else if (state.hoverPos) [[l, hd], pos] = [positionRow(state.hoverPos.row), state.hoverPos.col];
    else [l, hd] = [layerRow(), model.get("head")];
    if (l < 0 || l == null) {
      readout.textContent = "";
      return;
    }
    const x = value(pos, headTerm(l, hd));
    const lead = state.hoverGrid || state.hoverPos ? "" : "selected ";
    const shown = Number.isFinite(x) ? formatValue(x) : "no target here";
    readout.textContent = `${lead}L${layers()[l]} H${hd} · destination ${tokenName(pos)} → out ${outName(pos)} · ${shown}`;
    Object.assign(readout.dataset, { value: String(x), layer: String(layers()[l]), head: String(hd), position: String(pos) });
  }

  function draw() {
    if (!state.values) return;
    const t0 = performance.now();
    const pos = position();
    const missing = !(pos >= 0 && pos < state.seq) ? `position ${model.get("position")} is outside the ${state.seq} tokens` : "";
    const noTarget =
      !missing && !(payload().targets?.[pos] >= 0) ? `position ${pos} has no next token: type an out token to explain there` : "";
    v.error(missing || noTarget, "position");
    if (missing) return;
    toolbar.sync();
    drawCaption();
    drawGrid();
    drawBars();
    drawStrip();
    drawPositions();
    drawMarks();
    v.drawn("all", t0);
  }

  function syncInputs() {
    prompt.el.hidden = model.get("show_prompt") === false;
    prompt.show(info().has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
    for (const [input, trait] of [
      [target.input, "target_text"],
      [baseline.input, "baseline_text"],
    ]) {
      if (document.activeElement !== input) input.value = model.get(trait) || "";
    }
  }

  function start() {
    const p = payload();
    try {
      if (!hasData(p)) throw new RangeError("no attribution yet");
      const [seq, terms] = p.shape;
      const values = floatValues(p);
      const L = (p.layers || []).length;
      const H = p.n_heads || 0;
      if (!seq || terms < L * H || !L || !H) throw new RangeError(`attribution has shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { values, seq, terms, L, H, hoverGrid: null, hoverPos: null });
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      if (hasData(p)) v.error(`could not read the attribution: ${err.message}`, "decode");
    }
    strip.setTokens(info().has_tokenizer === false ? labels().map((s) => `${s} `) : labels()); // ids apart
    syncInputs();
    toolbar.sync();
    draw();
  }

  v.onPayloads("attribution", start);
  v.on("change:position", draw);
  v.on("change:layer change:head", () => {
    toolbar.sync();
    drawGrid();
    drawStrip();
    drawPositions();
    drawMarks();
    v.drawn("select");
  });
  v.on("change:prompt change:tokens change:target_text change:baseline_text change:show_prompt", syncInputs);

  const step = (d) => () => {
    const next = position() + d;
    if (next >= 0 && next < state.seq) v.set({ position: next });
  };
  return {
    start,
    draw,
    size: (width) => Math.max(200, Math.min(640, width - 150)),
    busy: () => (model.get("busy") ? "running…" : ""),
    keys: { ...headKeys(v, { layers: true }), "[": step(-1), "]": step(1) },
    marks: () => ({
      position: position(),
      layer: model.get("layer"),
      head: model.get("head"),
      target: payload().targets?.[position()] ?? "",
      revision: payload().revision ?? "",
    }),
  };
});
