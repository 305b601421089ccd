// AttentionPattern view: heatmap of one head, thumbnails of every head in the layer, token view.
//
// The layer's patterns arrive once as uint8 codes; switching head redraws from them without the
// kernel. Hover read-outs use the exact float32 row the kernel sends for the selected query
// (a quantised value, marked "≈", is shown until it arrives or when there is no kernel).
//
// Long prompts (a payload with `lod`) arrive as one pooled overview per head: the heatmap shows a
// window of the pattern (wheel, buttons, drag, + - 0 and Shift+arrows zoom and pan), and asks the
// kernel for the exact cells of the window through `tile_request` (answered in `tile`): lib/zoom.js.
//
// Drawn from tensors (`AttentionPattern.from_tensors`, info.tensors): no model, so no layer select
// and no prompt box; a note says so, heads carry the names given (info.head_names).

import { colorScaleOf, scaleSelect, timesUniform } from "../lib/color-scale.js";
import { h } from "../lib/controls.js";
import { ExactRow } from "../lib/exact-row.js";
import { headKeys, headToolbar, setHead as setModelHead } from "../lib/heads.js";
import { Heatmap, visibleHeight } from "../lib/heatmap.js";
import { heldLayer } from "../lib/held.js";
import { patternReader } from "../lib/inflate.js";
import { quote } from "../lib/layout.js";
import { progressRow } from "../lib/progress.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { sequenceBox } from "../lib/sequence-box.js";
import { drawStackThumb, ThumbGrid } from "../lib/thumbs.js";
import { TokenView } from "../lib/token-view.js";
import { defineView } from "../lib/view.js";
import { colWeights, overviewValue, rowWeights, Zoom } from "../lib/zoom.js";

const AXIS_TITLES = { yTitle: "destination (query) ↓", xTitle: "source (key) →" };
// The least height (px) the pattern's picture is given when the screen is short (labels and colour bar included).
const MIN_HEIGHT = 300;
const MIN_COMPACT_HEIGHT = 220;
const FAINT_TOKENS = 64;
const FAINT_POSITION = 0.15;
const FAINT_HINT = "faint: most weights are small on a long prompt, try colour: log (or relative)";

defineView("attention", (v) => {
  const { model } = v;
  const state = {
    stack: null,
    labels: [],
    preview: null, // head under the pointer in the thumbnails
    headLocked: false, // a clicked thumbnail holds the view until clicked again
    hover: null, // {query, key} under the pointer
    lock: null, // {query, key} clicked in the heatmap or token strip
    room: null, // the height and width the picture may take, measured at the last fitting draw (a head switch reuses them)
    widthRoom: Number.POSITIVE_INFINITY,
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
    parts: () => [thumbs.el, zoom.el, heatmap.el, readout, tokenView.head, tokenView.strip.el],
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

  // ----- pictures ------------------------------------------------------------------------
  // A grid cell of the heatmap as tokens (in a zoomed window a cell may stand for step x step tokens).
  const cellTokens = (hit) => (zoom.lod ? zoom.tokensOf(hit) : { query: hit.row, key: hit.col });
  const heatmap = v.own(
    new Heatmap({
      label: "attention pattern",
      onHover: (hit) => {
        if (!zoom.drag) select("hover", hit ? cellTokens(hit) : null);
      },
      onClick: (hit) => {
        if (zoom.dragged) return;
        const at = cellTokens(hit);
        const same = state.lock?.query === at.query && state.lock?.key === at.key;
        select("lock", same ? null : at);
      },
    }),
  );
  // long prompts: the window shown, zoomed and panned, and the exact tiles asked for it
  const zoom = new Zoom(v, { heatmap, head: shownHead, patterns, redraw: drawMain });
  const scales = scaleSelect(v);
  toolbar.headSelect.el.after(scales.el); // beside layer and head, on the toolbar's row
  const remoteNote = h("div", { class: "cw-hint cw-remote-note" });
  remoteNote.hidden = true;
  const progress = progressRow(v);
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
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const tokenView = new TokenView(v, { select, locked: () => state.lock, changed: drawTokens });
  const exact = new ExactRow(v, { current: () => ({ sel: selection(), locked: !!state.lock }), patterns, head: shownHead });
  v.root.append(toolbar.el, progress.el, v.banner, held.el);
  v.root.append(thumbs.el, zoom.el, remoteNote, heatmap.el, readout, tokenView.head, tokenView.strip.el);

  function setHead(head) {
    if (!setModelHead(v, head)) {
      thumbs.mark(model.get("head"), state.preview, state.headLocked);
      drawMain();
    }
  }

  // ----- drawing -------------------------------------------------------------------------
  /**
   * Draw the shown head. `fit`: measure the room the picture may take first (new patterns, a resize, a theme):
   * measuring lays the page out, which in JupyterLab costs about as much as the draw, so a head switch (the same
   * rows and columns) reuses the last room.
   */
  function drawMain({ fit = false } = {}) {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const head = shownHead();
    const sc = scale();
    const lut = sc.lut(stack);
    const measure = fit || state.room == null;
    if (measure) {
      state.room = heightRoom();
      state.widthRoom = heatmap.room();
    }
    // (a long prompt's overview keeps a pixel per grid cell: it is not shrunk to the screen's height)
    const maxHeight = zoom.lod ? Number.POSITIVE_INFINITY : state.room;
    const axes = { title: titleOf(head), ...AXIS_TITLES, scale: sc, theme: v.theme, maxPlot: v.size, maxHeight, maxWidth: state.widthRoom };
    if (zoom.lod) {
      zoom.draw(stack, head, lut, state.labels, axes);
    } else {
      heatmap.update({
        ...axes,
        rows: stack.rows,
        cols: stack.cols,
        paint: (pixels) => stack.paint(head, lut, pixels, 0),
        rowLabels: state.labels,
        colLabels: state.labels,
        colPriority: sourcePriority(stack, head), // where labels cannot all fit: the most attended sources
      });
    }
    drawSelection();
    v.drawn("main", t0);
    if (measure) refitSoon();
  }

  /**
   * A picture drawn before the view's other parts had their heights (thumbnails, token strip) may
   * be too tall for the screen: measure again once they are laid out, and redraw once if so (never
   * again for a picture that could not shrink).
   */
  function refitSoon() {
    if (state.refit) return;
    const later = globalThis.requestAnimationFrame ?? ((fn) => setTimeout(fn, 16));
    state.refit = true;
    later(() => {
      state.refit = false;
      if (zoom.lod) return;
      const drawnHeight = heatmap.el.offsetHeight;
      const room = heightRoom();
      const widthRoom = heatmap.room(); // (drawn before it was on the page: no width was known)
      const tall = drawnHeight > room + 4 && drawnHeight !== state.refitFrom;
      const wide = heatmap.el.offsetWidth > widthRoom + 4 && widthRoom < state.widthRoom;
      if (tall || wide) {
        state.refitFrom = drawnHeight;
        state.room = room;
        state.widthRoom = widthRoom;
        drawMain();
      }
    });
  }

  /**
   * The height the pattern may take so that the whole view is seen at once (a 48-token prompt in a
   * notebook on a laptop screen): the visible height less the view's other parts, never below a
   * readable picture.
   */
  function heightRoom() {
    if (!v.root.isConnected) return Number.POSITIVE_INFINITY;
    const others = v.root.offsetHeight - heatmap.el.offsetHeight;
    return Math.max(v.compact ? MIN_COMPACT_HEIGHT : MIN_HEIGHT, visibleHeight(v.root) - others - 12);
  }

  /**
   * True when the picture is nearly blank: on a prompt of FAINT_TOKENS or more, most sources' largest
   * weight sits in the palest FAINT_POSITION of the colour scale (attention spread thin on a long
   * prompt looks white on a linear scale). The codes are colour positions in [0, 1].
   */
  function faint(stack, head) {
    if (stack.cols < FAINT_TOKENS || colors().kind === "log") return false;
    const maxima = sourcePriority(stack, head);
    let pale = 0;
    for (const code of maxima) if (stack.valueOfCode(code) < FAINT_POSITION) pale++;
    return pale > 0.8 * maxima.length;
  }

  /** Each source's largest code in `head` (how strongly some destination attends to it), cached per picture. */
  function sourcePriority(stack, head) {
    if (state.priority?.stack !== stack || state.priority.head !== head) state.priority = { stack, head, values: stack.colMaxCodes(head) };
    return state.priority.values;
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

  /** The token view coloured by the focused destination's row ("pays") or source's column ("receives"). */
  function drawTokens() {
    const { stack } = state;
    const [from, to] = tokenView.show(state.labels, zoom.lod, zoom.win);
    const focus = tokenView.focus(selection());
    if (!stack || !focus) {
      tokenView.strip.setWeights(null, scale());
      return;
    }
    const { q, k } = focus;
    const head = shownHead();
    const locked = !!state.lock;
    if (q != null) tokenView.strip.setWeights(rowWeights(stack, zoom.lod, head, q, exact.values(q), from, to), stripScale(q), q, locked);
    else tokenView.strip.setWeights(colWeights(stack, zoom.lod, head, k, from, to), stripScale(null), k, locked);
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
    const { lod } = zoom;
    const [rows, cols] = lod ? [lod.n, lod.n] : [stack?.rows, stack?.cols];
    let value = ""; // the exact weight shown, in full (data-cw-value: tests and tools read it)
    if (stack && sel?.query != null && sel.key != null && sel.query < rows && sel.key < cols) {
      const { query: q, key: k } = sel;
      const row = exact.values(q);
      if (row) value = String(row[k]);
      const quantised = () => (lod ? overviewValue(stack, lod, head, q, k) : stack.value(head, q, k));
      const weight = row ? formatValue(row[k]) : `≈${formatValue(quantised(), 3)}`;
      parts.push(`destination (query) ${name(q)} → source (key) ${name(k)}`, `weight ${weight}${uniformNote(row?.[k], q)}`);
      if (lod && !zoom.exact && !row) parts.push("zoom in for single cells");
    } else if (stack && sel?.query != null) {
      parts.push(`destination (query) ${name(sel.query)}`);
    } else if (stack && sel?.key != null) {
      parts.push(`source (key) ${name(sel.key)}`);
    } else {
      parts.push(stack ? `${rows} tokens · hover a cell or a token` : "no picture yet");
      if (stack && faint(stack, head)) parts.push(FAINT_HINT);
    }
    if (state.lock) parts.push("locked (click again or Esc to release)");
    readout.textContent = parts.join(" · ");
    readout.dataset.cwValue = value;
  }

  function drawSelection() {
    const { hover, lock } = state;
    const marks = { row: hover?.query, col: hover?.key, lockedRow: lock?.query, lockedCol: lock?.key };
    heatmap.setHighlight(zoom.lod ? zoom.highlight(hover, lock) : marks);
    drawTokens();
    drawReadout();
  }

  function select(which, value) {
    state[which] = value;
    drawSelection();
    exact.send();
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
    const heads = Array.from({ length: info().n_heads || 1 }, (_, i) => ({ value: i, label: headName(i) }));
    if (given) toolbar.headSelect.set(heads, model.get("head")); // named as given
  }

  const start = patternReader(v, patterns, show);

  /** Draw payload `p` (its codes read into `stack`). */
  function show(p, stack) {
    state.stack = stack;
    zoom.show(p, state.stack);
    scales.show(p?.scale?.kind);
    tokenView.reset();
    state.labels = p?.labels || [];
    const n = zoom.lod ? zoom.lod.n : state.stack ? state.stack.rows : 0;
    const inRange = (s) => s && (s.query == null || s.query < n) && (s.key == null || s.key < n);
    if (!inRange(state.lock)) state.lock = null;
    if (!inRange(state.hover)) state.hover = null;
    const t0 = performance.now();
    syncControls();
    drawAll();
    held.check();
    if (state.stack || !model.get("busy")) v.drawn("all", t0); // (a long prompt still computing: no picture yet)
    if (zoom.lod) zoom.request();
  }

  function drawAll() {
    drawMain({ fit: true });
    drawThumbs();
  }

  v.onPayloads("patterns", start);
  v.on("change:head", () => {
    toolbar.headSelect.select.value = String(model.get("head"));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    drawMain();
    zoom.request();
  });
  v.on("change:tile", () => {
    zoom.takeTile().catch((err) => v.error(`could not read a tile: ${err.message}`, "decode"));
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
    const taken = exact.received();
    if (taken) state[taken.locked ? "lock" : "hover"] = taken.sel;
    return !!taken;
  }
  v.on("change:selection", () => adoptSelection() && drawSelection());
  adoptSelection(); // one set before the view existed (in Python, or saved in a page) shows in the first picture

  return {
    start,
    draw: drawAll,
    size: (width) => Math.max(v.compact ? 160 : 200, Math.min(560, width - (v.compact ? 150 : 190))),
    busy: () => (model.get("busy") ? "running…" : ""),
    keys: {
      ...zoom.keys(headKeys(v, { layers: true, onHead: setHead })),
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
      ...zoom.marks(),
    }),
  };
});
