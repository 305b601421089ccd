// AttentionPattern view: heatmap of one head, thumbnails of every head in the layer, token view.
//
// The layer's patterns arrive once as uint8 codes; switching head redraws from them without the
// kernel. Hover read-outs use the exact float32 row the kernel sends for the selected query
// (a quantised value, marked "≈", is shown until it arrives or when there is no kernel).
//
// Long prompts (a payload with `lod`) arrive as one pooled overview per head: the heatmap shows a
// window of the pattern (wheel, buttons, drag, + - 0 and Shift+arrows zoom and pan), and asks the
// kernel for the exact cells of the window through `tile_request` (answered in `tile`).
//
// Drawn from tensors (`AttentionPattern.from_tensors`, info.tensors): no model, so no layer select
// and no prompt box; a note says so, heads carry the names given (info.head_names).

import { h, throttle } from "../lib/controls.js";
import { colorScaleOf, scaleSelect, timesUniform } from "../lib/color-scale.js";
import { bytesOf, CodeStack, floatValues, hasData } from "../lib/decode.js";
import { headKeys, headToolbar, setHead as setModelHead } from "../lib/heads.js";
import { heldLayer } from "../lib/held.js";
import { progressRow } from "../lib/progress.js";
import { Heatmap } from "../lib/heatmap.js";
import { quote } from "../lib/layout.js";
import { sameRevision } from "../lib/payloads.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { drawStackThumb, ThumbGrid } from "../lib/thumbs.js";
import { inflated, isDeflated } from "../lib/inflate.js";
import {
  cellOf,
  clampWindow,
  fullWindow,
  gridSize,
  isExact,
  panWindow,
  paintWindow,
  stepFor,
  TILE_KEEP,
  tileFor,
  tileOf,
  tokenAt as windowTokens,
  zoomWindow,
} from "../lib/lod.js";
import { TokenStrip } from "../lib/tokens.js";
import { sequenceBox } from "../lib/sequence-box.js";
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
    lod: null, // long prompts: {n, factor, pool, exact} of the overview in `stack`
    win: null, // the window of the pattern shown (tokens): {r0, c0, size}
    tiles: [], // exact tiles of this picture, newest first
    levels: [], // an exported page's finer overviews of one head (tiles of the whole pattern)
    loading: 0, // payloads being inflated (the newest wins)
  };
  const info = () => model.get("info") || {};
  const patterns = () => v.payloads("patterns")?.patterns;
  const shownHead = () => (!state.headLocked && state.preview != null ? state.preview : model.get("head"));
  const shownLayer = () => patterns()?.layer ?? model.get("layer");
  const selection = () => state.lock || state.hover;
  // The codes are positions on the picture's colour scale (payload `scale`): the colour table maps
  // them as they are, the legend names the scale and its ticks, exact weights go through `colors`.
  const colors = () => colorScaleOf(patterns()?.scale, shownHead());
  const scale = () => {
    const c = colors();
    return makeScale("sequential", { dark: v.theme.dark, ticks: c.ticks, caption: c.caption });
  };
  /** The scale of the token strip: an exact weight of token position i (a row when `rows`, else of `row`). */
  const stripScale = (row) => {
    const sc = scale();
    const c = colors();
    return { ...sc, rgb: (w, i) => sc.rgb(c.position(w, row ?? i)) };
  };
  const tensors = () => info().tensors === true;
  const causal = () => state.lod?.causal !== false; // tensors given may hold weights above the diagonal
  /** Head i as the widget names it: the name given (from tensors), else "H<i>". */
  const headName = (i) => info().head_names?.[i] ?? `H${i}`;
  /** The heatmap's title for `head`: "Layer 1, head 2", or from tensors the layer caption and head name. */
  const titleOf = (head) => {
    const locked = state.headLocked ? " (locked)" : "";
    if (!tensors()) return `Layer ${shownLayer()}, head ${head}${locked}`;
    const name = info().head_names?.[head] ?? `head ${head}`;
    return `${[info().layer_name, name].filter(Boolean).join(", ")}${locked}`;
  };

  // ----- controls ------------------------------------------------------------------------
  const prompt = v.own(sequenceBox(v, () => info().has_tokenizer));
  // an exported page asked (through a link) for a layer it does not hold: says so instead of drawing
  const held = heldLayer(v, {
    held: () => patterns()?.layer,
    parts: () => [thumbs.el, zoomBar, heatmap.el, readout, tokenHead, strip.el],
    what: "attention patterns",
  });
  const toolbar = headToolbar(v, {
    layer: () => (held.stale ? model.get("layer") : shownLayer()),
    onHead: setHead,
    save: {
      what: "heatmap",
      picture: () => heatmap.scene,
      name: () => (tensors() ? `attention_${headName(shownHead())}` : `attention_L${shownLayer()}H${shownHead()}`),
    },
  });
  toolbar.el.prepend(prompt.el);
  const note = h("div", { class: "cw-hint cw-tensor-note" });
  note.hidden = true;
  toolbar.el.append(note);
  const modeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "token view" } }, [
    h("option", { value: "pays", text: "attention paid by (as destination)" }),
    h("option", { value: "receives", text: "attention received by (as source)" }),
  ]);
  v.listen(modeSelect, "change", () => {
    state.mode = modeSelect.value;
    drawTokens();
  });

  // ----- pictures ------------------------------------------------------------------------
  // A grid cell of the heatmap as tokens (in a zoomed window a cell may stand for step x step tokens).
  const cellTokens = (hit) => (state.lod ? windowTokens(state.win, hit.row, hit.col) : { query: hit.row, key: hit.col });
  let dragged = false;
  const heatmap = v.own(
    new Heatmap({
      label: "attention pattern",
      onHover: (hit) => {
        if (!drag) select("hover", hit ? cellTokens(hit) : null);
      },
      onClick: (hit) => {
        if (dragged) return;
        const at = cellTokens(hit);
        const same = state.lock?.query === at.query && state.lock?.key === at.key;
        select("lock", same ? null : at);
      },
    }),
  );
  // ----- zoom and pan (long prompts) -------------------------------------------------------
  const zoomLabel = h("span", { class: "cw-hint cw-zoom-label" });
  const zoomButton = (text, label, fn) => {
    const b = h("button", { class: "cw-button cw-zoom-button", text, attrs: { type: "button", "aria-label": label, title: label } });
    v.listen(b, "click", fn);
    return b;
  };
  const poolSelect = h("select", { class: "cw-select", attrs: { "aria-label": "overview pooling" } }, [
    h("option", { value: "max", text: "overview: max of each block" }),
    h("option", { value: "mean", text: "overview: mean of each block" }),
  ]);
  v.listen(poolSelect, "change", () => v.set({ pool: poolSelect.value }));
  const scales = scaleSelect(v);
  toolbar.headSelect.el.after(scales.el); // beside layer and head, on the toolbar's row
  if (v.standalone) poolSelect.disabled = true;
  const remoteNote = h("div", { class: "cw-hint cw-remote-note" });
  remoteNote.hidden = true;
  const progress = progressRow(v);
  const zoomBar = h("div", { class: "cw-zoom" }, [
    zoomButton("−", "zoom out (-)", () => zoom(0.5)),
    zoomButton("+", "zoom in (+)", () => zoom(2)),
    zoomButton("whole", "the whole prompt (0)", () => setWindow(fullWindow(state.lod.n))),
    poolSelect,
    zoomLabel,
  ]);
  zoomBar.hidden = true;
  let drag = null;
  v.listen(heatmap.overlay, "wheel", (e) => {
    if (!state.lod || !heatmap.scene) return;
    e.preventDefault();
    const box = heatmap.overlay.getBoundingClientRect();
    const { left, top, cell } = heatmap.scene.layout;
    const step = stepFor(state.win.size);
    const at = {
      r: state.win.r0 + ((e.clientY - box.top - top) / cell) * step,
      c: state.win.c0 + ((e.clientX - box.left - left) / cell) * step,
    };
    zoom(e.deltaY < 0 ? 2 : 0.5, at);
  });
  v.listen(heatmap.overlay, "mousedown", (e) => {
    dragged = false;
    if (state.lod && e.button === 0) drag = { x: e.clientX, y: e.clientY, win: state.win };
  });
  v.listen(window, "mousemove", (e) => {
    if (!drag || !heatmap.scene) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (!dragged && Math.hypot(dx, dy) < 4) return;
    dragged = true;
    const perPx = stepFor(drag.win.size) / heatmap.scene.layout.cell;
    setWindow(panWindow(drag.win, state.lod.n, -dy * perPx, -dx * perPx));
  });
  v.listen(window, "mouseup", () => {
    drag = null;
  });

  function zoom(by, at = null) {
    if (state.lod) setWindow(zoomWindow(state.win, state.lod.n, by, at));
  }

  function setWindow(win) {
    const w = clampWindow(win, state.lod.n);
    if (state.win && w.r0 === state.win.r0 && w.c0 === state.win.c0 && w.size === state.win.size) return;
    state.win = w;
    drawMain();
    requestTile();
  }

  // The kernel answers the latest request; `tile` payloads of an earlier picture are ignored.
  let requested = 0;
  const requestTile = v.own(
    throttle(() => {
      if (!state.lod || v.standalone) return;
      const want = tileFor(state.win, state.lod.factor);
      const head = shownHead();
      if (
        !want ||
        state.tiles.some(
          (t) =>
            t.head === head &&
            t.step === want.step &&
            t.row0 <= want.row0 &&
            t.col0 <= want.col0 &&
            t.row0 + t.rows * t.step >= want.row0 + want.rows &&
            t.col0 + t.cols * t.step >= want.col0 + want.cols,
        )
      )
        return;
      requested += 1;
      const p = patterns();
      v.set({ tile_request: { id: requested, layer: p.layer, head, revision: p.revision, ...want } });
    }, 60),
  );

  /** The exported page's levels of payload `p` (inflated), then a redraw. */
  function loadLevels(p) {
    const levels = (model.get("levels") || []).filter((t) => hasData(t) && t.revision === p.revision && t.layer === p.layer);
    if (!levels.length) return;
    Promise.all(levels.map((t) => inflated(t).then((plain) => tileOf(plain, bytesOf(plain.data))))).then(
      (tiles) => {
        if (patterns() !== p) return;
        state.levels = tiles;
        drawMain();
      },
      (err) => v.error(`could not read the exported levels: ${err.message}`, "decode"),
    );
  }

  async function takeTile() {
    const t = model.get("tile");
    const p = patterns();
    if (!state.lod || !hasData(t) || !p || t.revision !== p.revision || t.layer !== p.layer || t.pool !== state.lod.pool) return;
    const plain = await inflated(t);
    if (model.get("tile") !== t || patterns() !== p) return; // a newer answer or picture came meanwhile
    state.tiles = [tileOf(plain, bytesOf(plain.data)), ...state.tiles].slice(0, TILE_KEEP);
    drawMain();
  }
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
  const stripNote = h("span", { class: "cw-hint cw-strip-note" });
  const tokenHead = h("div", { class: "cw-token-head" }, [
    h("span", { class: "cw-field-label", text: "Token view: colour by" }),
    modeSelect,
    h("span", { class: "cw-hint", text: "the hovered token (click to lock)" }),
    stripNote,
  ]);
  v.root.append(toolbar.el, progress.el, v.banner, held.el, thumbs.el, zoomBar, remoteNote, heatmap.el, readout, tokenHead, strip.el);

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
    const values = head < nHeads ? floatValues(row).subarray(head * nKeys, (head + 1) * nKeys) : null;
    return values && !Number.isNaN(values[0]) ? values : null; // (a remote model's row holds the heads it has: NaN elsewhere)
  }

  // ----- drawing -------------------------------------------------------------------------
  function drawMain() {
    const stack = state.stack;
    if (!stack) return;
    if (state.lod) return drawWindow();
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
      colPriority: sourcePriority(stack, head), // where labels cannot all fit: the most attended sources
      title: titleOf(head),
      yTitle: "destination (query) ↓",
      xTitle: "source (key) →",
      scale: sc,
      theme: v.theme,
      maxPlot: v.size,
    });
    drawSelection();
    v.drawn("main", t0);
  }

  /** The window of a long prompt: exact tiles where the kernel sent them, the overview elsewhere. */
  function drawWindow() {
    const { stack, lod, win, labels } = state;
    const t0 = performance.now();
    const head = shownHead();
    const sc = scale();
    const lut = sc.lut(stack);
    const step = stepFor(win.size);
    const g = gridSize(win);
    const tiles = [...state.tiles, ...state.levels].filter((t) => t.head === head);
    let share = 0;
    // Token strings where each row is one token and legible; positions otherwise.
    const axis = (from) => Array.from({ length: g }, (_, i) => (win.size <= 64 ? (labels[from + i] ?? from + i) : String(from + i * step)));
    heatmap.update({
      rows: g,
      cols: g,
      paint: (pixels) => {
        share = paintWindow({
          win,
          n: lod.n,
          stack,
          factor: lod.factor,
          head,
          tiles,
          lut,
          pixels,
          emptyPixel: 0,
          nanCode: stack.nanCode,
          causal: causal(),
        });
      },
      rowLabels: axis(win.r0),
      colLabels: axis(win.c0),
      title: titleOf(head),
      yTitle: "destination (query) ↓",
      xTitle: "source (key) →",
      scale: sc,
      theme: v.theme,
      maxPlot: v.size,
    });
    state.share = share;
    const last = (t) => Math.min(lod.n, t + win.size) - 1;
    const whole = win.size >= lod.n;
    const cells =
      share >= 1
        ? step === 1
          ? "exact cells"
          : `each cell the ${lod.pool} of ${step} × ${step} exact cells`
        : `each cell the ${lod.pool} of ${lod.factor} × ${lod.factor} tokens (overview)`;
    const finest = state.levels.filter((t) => t.head === head).reduce((m, t) => Math.min(m, t.step), lod.factor);
    const stored = finest < lod.factor ? `holds blocks down to ${finest} × ${finest} tokens for head ${head}; ` : "";
    const deeper = v.standalone && !whole ? ` · exported page: ${stored}exact cells need the kernel` : "";
    const where = whole ? "whole prompt" : `destinations ${win.r0}–${last(win.r0)} × sources ${win.c0}–${last(win.c0)}`;
    zoomLabel.textContent = `${lod.n} tokens · ${where} · ${cells}${deeper}`;
    drawSelection();
    v.drawn("main", t0);
  }

  /** Each source's largest code in `head` (how strongly some destination attends to it), cached per picture. */
  function sourcePriority(stack, head) {
    if (state.priority?.stack === stack && state.priority.head === head) return state.priority.values;
    const values = new Float32Array(stack.cols);
    for (let r = 0; r < stack.rows; r++) {
      const start = stack.rowStart(head, r);
      const len = stack.rowLength(r);
      for (let c = 0; c < len; c++) {
        const code = stack.codes[start + c];
        if (code !== stack.nanCode && code > values[c]) values[c] = code;
      }
    }
    state.priority = { stack, head, values };
    return values;
  }

  function drawThumb(i, ctx, px) {
    if (state.stack && i < state.stack.count) drawStackThumb(ctx, px, state.stack, i, scale().lut(state.stack));
  }

  function drawThumbs() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    thumbs.setItems(Array.from({ length: stack.count }, (_, i) => headName(i)));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    v.drawn("thumbs", t0);
  }

  /** Overview value of token cell (q, k) of a long prompt (the pooled block holding it). */
  function overviewValue(head, q, k) {
    const { stack, lod } = state;
    if (k > q && causal()) return 0;
    return stack.value(head, Math.min(stack.rows - 1, Math.floor(q / lod.factor)), Math.min(stack.cols - 1, Math.floor(k / lod.factor)));
  }

  /** The token view of a long prompt follows the zoom: the window's sources (pays) or destinations (receives). */
  function stripTokens() {
    const { lod, win, labels } = state;
    const from = !lod ? 0 : state.mode === "pays" ? win.c0 : win.r0;
    const to = !lod ? labels.length : Math.min(lod.n, from + win.size);
    const key = `${from}:${to}:${labels.length}`;
    if (state.stripKey !== key) {
      state.stripKey = key;
      strip.setTokens(labels.slice(from, to), from);
      stripNote.textContent = lod && to - from < lod.n ? `tokens ${from}–${to - 1} of ${lod.n} (the zoomed window)` : "";
    }
    return [from, to];
  }

  function drawTokens() {
    const { stack } = state;
    const sel = selection();
    const head = shownHead();
    const locked = !!state.lock;
    if (stack && state.lod) {
      const [from, to] = stripTokens();
      const span = (fn) => Array.from({ length: to - from }, (_, k) => fn(from + k));
      if (sel && state.mode === "pays" && sel.query != null) {
        const q = sel.query;
        const row = exactRow(q);
        strip.setWeights(
          span((j) => (j > q && causal() ? null : row ? row[j] : overviewValue(head, q, j))),
          stripScale(q),
          q,
          locked,
        );
      } else if (sel && state.mode === "receives" && sel.key != null) {
        const k = sel.key;
        strip.setWeights(
          span((i) => (k > i && causal() ? null : overviewValue(head, i, k))),
          stripScale(null),
          k,
          locked,
        );
      } else {
        strip.setWeights(null, scale());
      }
      return;
    }
    stripTokens();
    if (stack && sel && state.mode === "pays" && sel.query != null) {
      const q = sel.query;
      const row = exactRow(q) || stack.rowValues(head, q);
      strip.setWeights(
        Array.from({ length: stack.cols }, (_, j) => (stack.stored(q, j) ? row[j] : null)),
        stripScale(q),
        q,
        locked,
      );
    } else if (stack && sel && state.mode === "receives" && sel.key != null) {
      const k = sel.key;
      const col = stack.colValues(head, k);
      strip.setWeights(
        Array.from({ length: stack.rows }, (_, i) => (stack.stored(i, k) ? col[i] : null)),
        stripScale(null),
        k,
        locked,
      );
    } else {
      strip.setWeights(null, scale());
    }
  }

  /** " (3.2× uniform)" beside an exact weight on the relative scale. */
  function uniformNote(weight, q) {
    const spec = patterns()?.scale;
    const times = spec?.kind === "relative" ? timesUniform(spec, weight, q) : null;
    return times == null ? "" : ` (${formatValue(times, 3)}× uniform)`;
  }

  function drawReadout() {
    const { stack, labels } = state;
    const sel = selection();
    const head = shownHead();
    const ids = patterns()?.ids || [];
    const name = (i) => `${i} ${quote(labels[i] ?? i)}${ids[i] != null ? ` (id ${ids[i]})` : ""}`;
    const parts = [tensors() ? [info().layer_name, headName(head)].filter(Boolean).join(" ") : `L${shownLayer()} H${head}`];
    const n = state.lod ? state.lod.n : stack?.rows;
    let value = ""; // the exact weight shown, in full (data-cw-value: tests and tools read it)
    if (stack && state.lod && sel?.query != null && sel.key != null && sel.query < n && sel.key < n) {
      const { query: q, key: k } = sel;
      const exact = exactRow(q);
      if (exact) value = String(exact[k]);
      const weight = exact ? formatValue(exact[k]) : `≈${formatValue(overviewValue(head, q, k), 3)}`;
      parts.push(`destination (query) ${name(q)} → source (key) ${name(k)}`, `weight ${weight}${uniformNote(exact?.[k], q)}`);
      if (!isExact(state.win) && !exact) parts.push("zoom in for single cells");
    } else if (stack && sel?.query != null && sel.key != null && sel.query < stack.rows && sel.key < stack.cols) {
      const { query: q, key: k } = sel;
      const exact = exactRow(q);
      if (exact) value = String(exact[k]);
      const weight = exact ? formatValue(exact[k]) : `≈${formatValue(stack.value(head, q, k), 3)}`;
      parts.push(`destination (query) ${name(q)} → source (key) ${name(k)}`, `weight ${weight}${uniformNote(exact?.[k], q)}`);
    } else if (stack && sel?.query != null) {
      parts.push(`destination (query) ${name(sel.query)}`);
    } else if (stack && sel?.key != null) {
      parts.push(`source (key) ${name(sel.key)}`);
    } else {
      parts.push(stack ? `${n} tokens · hover a cell or a token` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc to release)");
    readout.textContent = parts.join(" · ");
    readout.dataset.cwValue = value;
  }

  function drawSelection() {
    if (state.lod) {
      const w = state.win;
      heatmap.setHighlight({
        row: cellOf(w, state.hover?.query, w.r0),
        col: cellOf(w, state.hover?.key, w.c0),
        lockedRow: cellOf(w, state.lock?.query, w.r0),
        lockedCol: cellOf(w, state.lock?.key, w.c0),
      });
    } else {
      heatmap.setHighlight({ row: state.hover?.query, col: state.hover?.key, lockedRow: state.lock?.query, lockedCol: state.lock?.key });
    }
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
    const given = tensors();
    prompt.el.hidden = given; // no model to run a prompt on, nor another layer
    toolbar.layerSelect.el.hidden = given;
    note.textContent = given ? info().note || "" : "";
    note.hidden = !note.textContent;
    const n = info().n_heads || 1;
    if (given)
      toolbar.headSelect.set(
        Array.from({ length: n }, (_, i) => ({ value: i, label: headName(i) })),
        model.get("head"),
      );
  }

  function start() {
    const p = patterns();
    const ticket = ++state.loading;
    if (isDeflated(p)) {
      inflated(p).then(
        (plain) => ticket === state.loading && show(p, plain),
        (err) => ticket === state.loading && v.error(`could not inflate the patterns: ${err.message}`, "decode"),
      );
      return;
    }
    show(p, p);
  }

  /** Draw payload `p` (its bytes `plain`, inflated). */
  function show(p, plain) {
    const before = state.lod;
    try {
      state.stack = hasData(plain) ? new CodeStack(plain) : null;
      v.error("", "decode");
    } catch (err) {
      state.stack = null;
      v.error(`could not read the patterns: ${err.message}`, "decode");
    }
    state.lod = state.stack && p.lod ? p.lod : null;
    state.tiles = [];
    state.levels = [];
    if (state.lod) loadLevels(p);
    if (state.lod)
      state.win = before && before.n === state.lod.n && state.win ? clampWindow(state.win, state.lod.n) : fullWindow(state.lod.n);
    zoomBar.hidden = !state.lod;
    if (state.lod) poolSelect.value = state.lod.pool;
    scales.show(p?.scale?.kind);
    state.stripKey = null;
    state.labels = p?.labels || [];
    const n = state.lod ? state.lod.n : state.stack ? state.stack.rows : 0;
    const inRange = (s) => s && (s.query == null || s.query < n) && (s.key == null || s.key < n);
    if (!inRange(state.lock)) state.lock = null;
    if (!inRange(state.hover)) state.hover = null;
    const t0 = performance.now();
    syncControls();
    drawAll();
    held.check();
    if (state.stack || !model.get("busy")) v.drawn("all", t0); // (a long prompt still computing: no picture yet)
    if (state.lod) requestTile();
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
    requestTile();
  });
  v.on("change:tile", () => {
    takeTile().catch((err) => v.error(`could not read a tile: ${err.message}`, "decode"));
  });
  v.on("change:row", () => {
    drawTokens();
    drawReadout();
  });
  v.on("change:layer", () => held.check()); // (first: the layer select then shows what is selected)
  v.on("change:prompt change:tokens change:layer change:info", syncControls);
  const showRemote = () => {
    remoteNote.textContent = [model.get("remote_note"), model.get("memory_note")].filter(Boolean).join(" · ");
    remoteNote.hidden = !remoteNote.textContent;
  };
  v.on("change:remote_note change:memory_note", showRemote);
  showRemote();
  /** Take the model's selection (set from Python) unless it is the one we just sent; true when taken. */
  function adoptSelection() {
    const value = model.get("selection") || {};
    if (selectionValue(value, !!value.locked) === lastSent) return false;
    const sel = value.query == null && value.key == null ? null : { query: value.query ?? null, key: value.key ?? null };
    state[value.locked ? "lock" : "hover"] = sel;
    return true;
  }
  v.on("change:selection", () => adoptSelection() && drawSelection());
  adoptSelection(); // one set before the view existed (in Python, or saved in a page) shows in the first picture

  return {
    start,
    draw: drawAll,
    size: (width) => Math.max(v.compact ? 160 : 200, Math.min(560, width - (v.compact ? 150 : 190))),
    busy: () => (model.get("busy") ? "running…" : ""),
    keys: {
      ...lodKeys(headKeys(v, { layers: true, onHead: setHead })),
      Escape: () => {
        state.headLocked = false;
        thumbs.mark(model.get("head"), state.preview, false);
        select("lock", null);
        drawMain();
      },
    },
    marks: () => ({
      head: shownHead(),
      layer: held.stale ? model.get("layer") : shownLayer(),
      held: held.stale ? String(shownLayer()) : "",
      tokens: state.labels.length,
      revision: patterns()?.revision ?? "",
      scale: patterns()?.scale?.kind || "linear",
      window: state.lod ? `${state.win.r0},${state.win.c0},${state.win.size}` : "",
      tileShare: state.lod ? String(state.share ?? 0) : "",
    }),
  };

  /** Zoom keys (+ - 0) and Shift+arrows to pan, for long prompts; plain arrows keep their jobs. */
  function lodKeys(keys) {
    const pan = (dr, dc, plain) => (e) => {
      if (state.lod && e?.shiftKey) setWindow(panWindow(state.win, state.lod.n, (dr * state.win.size) / 4, (dc * state.win.size) / 4));
      else plain?.(e);
    };
    return {
      ...keys,
      ArrowLeft: pan(0, -1, keys.ArrowLeft),
      ArrowRight: pan(0, 1, keys.ArrowRight),
      ArrowUp: pan(-1, 0, keys.ArrowUp),
      ArrowDown: pan(1, 0, keys.ArrowDown),
      "+": () => zoom(2),
      "=": () => zoom(2),
      "-": () => zoom(0.5),
      0: () => state.lod && setWindow(fullWindow(state.lod.n)),
    };
  }
});
