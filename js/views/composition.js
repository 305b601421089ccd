// CompositionDiagram view: Q/K/V composition between heads as a node-link graph (SVG) or as a
// (layer, head) x (layer, head) heatmap (canvas), a threshold slider, raw or baseline-corrected
// scores, hover read-out, click to select a head or a pair, the selected pair's patterns and the
// circuit term the pair builds for the kind shown (heatmap, eigenvalues, positivity).
//
// The kernel sends raw float32 scores [3, L, H, L, H] (NaN where undefined or not computed);
// threshold, baseline correction and the view switch are drawn here without the kernel.
// Causal edges (`edge_value` "causal"): the payload `causal` float32 [2, 3, L, H, L, H] holds each edge's
// path-patching effect (0: the metric's change, 1: normalised), NaN where its layer pair was not computed;
// the edges are then coloured (diverging, around 0) and thresholded by the normalised effect.

import { h, throttle } from "../lib/controls.js";
import { compositionControls, KINDS } from "../lib/composition-controls.js";
import { TermPanel } from "../lib/composition-term.js";
import { causalNoteText, causalPairText, noteText, pairText, scoresCaption } from "../lib/composition-text.js";
import { floatValues, hasData } from "../lib/decode.js";
import { pairIndex, rawDomain, scoreRange, shiftThreshold } from "../lib/graph.js";
import { graphScene, graphTarget } from "../lib/graph-scene.js";
import { PairPanel } from "../lib/pair-panel.js";
import { saveButtons } from "../lib/save.js";
import { makeScale } from "../lib/scales.js";
import { svgElement, svgTree } from "../lib/scene.js";
import { ScoreMatrix } from "../lib/score-matrix.js";
import { defineView } from "../lib/view.js";

defineView("composition", (v) => {
  const { model } = v;
  const state = {
    values: null,
    causal: null,
    causalThreshold: null,
    L: 0,
    H: 0,
    hover: null,
    threshold: model.get("threshold"),
    shown: 0,
    passing: 0,
    graph: null,
  };
  const causalPayload = () => v.payloads("causal")?.causal || {};
  const causalMode = () => model.get("edge_value") === "causal" && !!state.causal;
  /** The values drawn: the weight scores, or in causal mode the normalised path effects (same [3, L, H, L, H] layout). */
  const drawn = () => (causalMode() ? state.causal.subarray(state.causal.length / 2) : state.values);
  const causalAt = (part, p) =>
    state.causal[part * (state.causal.length / 2) + pairIndex(kindIndex(), p.l1, p.h1, p.l2, p.h2, state.L, state.H)];
  const info = () => model.get("info") || {};
  const scores = () => v.payloads("scores")?.scores || {};
  const layerLabels = () => scores().layers || info().attn_layers || [];
  const kind = () => model.get("kind");
  const kindIndex = () => Math.max(0, (scores().kinds || KINDS).indexOf(kind()));
  const baseValue = () => model.get("baseline_value") || 0;
  const offset = () => (model.get("baseline") && !causalMode() ? baseValue() : 0);
  const computed = () => scores().computed || [];
  const raw = (p) => state.values[pairIndex(kindIndex(), p.l1, p.h1, p.l2, p.h2, state.L, state.H)];
  const headName = (l, hd) => `L${layerLabels()[l]}H${hd}`;
  const selectedPos = () => ({ l: layerLabels().indexOf(model.get("layer")), h: model.get("head") });
  const samePair = (a, b) => !!a && !!b && a.l1 === b.l1 && a.h1 === b.h1 && a.l2 === b.l2 && a.h2 === b.h2;
  function selectedPair() {
    const pair = model.get("selected_pair") || [];
    if (pair.length !== 2) return null;
    const at = (l) => layerLabels().indexOf(l);
    return { l1: at(pair[0][0]), h1: pair[0][1], l2: at(pair[1][0]), h2: pair[1][1] };
  }
  /** The causal threshold: as set on the slider, else half the strongest normalised effect of the kind shown. */
  function causalThreshold() {
    if (state.causalThreshold != null) return state.causalThreshold;
    const range = scoreRange(drawn(), kindIndex(), state.L, state.H);
    return range ? +(0.5 * Math.max(range[1], 0)).toFixed(4) : 0;
  }
  const threshold = () => (causalMode() ? causalThreshold() : state.threshold);
  /** Colour domain in the units shown (raw minus the offset); in causal mode symmetric around 0. */
  function scale() {
    if (causalMode()) {
      const range = scoreRange(drawn(), kindIndex(), state.L, state.H);
      const m = Math.max(range ? Math.max(Math.abs(range[0]), Math.abs(range[1])) : 0, 0.05) * 1.05;
      return makeScale("diverging", { dark: v.theme.dark, domain: [-m, m] });
    }
    const range = state.values ? scoreRange(state.values, kindIndex(), state.L, state.H) : null;
    const [d0, d1] = rawDomain(range, baseValue());
    return makeScale("sequential", { dark: v.theme.dark, domain: [d0 - offset(), d1 - offset()] });
  }

  // ----- controls ------------------------------------------------------------------------
  const sendThreshold = v.own(throttle((value) => v.set({ threshold: value }), 120));
  const controls = compositionControls(
    v,
    {
      kind: (k) => v.set({ kind: k }),
      baseline: (on) => {
        state.threshold = shiftThreshold(state.threshold, baseValue(), on); // the same edges stay
        v.set({ baseline: on, threshold: state.threshold });
      },
      threshold: (value) => {
        if (causalMode()) {
          state.causalThreshold = value; // (causal units live here: the kernel's threshold is the scores')
          draw();
          return;
        }
        state.threshold = value;
        draw();
        sendThreshold(value);
      },
      view: (name) => v.set({ view: name }),
      edges: (name) => v.set({ edge_value: name }),
    },
    saveButtons({
      what: "diagram",
      picture: () => (model.get("view") === "graph" ? state.graph : matrix.scene),
      name: () => `composition_${kind()}${model.get("baseline") ? "_corrected" : ""}`,
      background: () => v.theme.bgCss,
    }),
  );
  const picture = h("div", { class: "cw-comp-picture" });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const noteLine = h("div", { class: "cw-comp-note-line" });
  const caption = h("div", { class: "cw-comp-caption" });
  const note = h("div", { class: "cw-hint cw-comp-note" }, [noteLine, caption]);
  const pair = v.own(new PairPanel());
  const term = v.own(new TermPanel());
  v.root.append(controls.el, v.banner, picture, readout, note, h("div", { class: "cw-comp-below" }, [pair.el, term.el]));
  const matrix = v.own(
    new ScoreMatrix({
      onHover: (p) => {
        state.hover = p;
        matrix.mark(spec());
        drawReadout();
      },
      onClick: (p) => Number.isFinite(causalMode() ? causalAt(1, p) : raw(p)) && clickPair(p),
    }),
  );

  function clickPair(p) {
    const labels = layerLabels();
    if (samePair(p, selectedPair())) return v.set({ selected_pair: [] });
    // The later (reading) head becomes the selected head, so linked widgets show it.
    v.set({
      selected_pair: [
        [labels[p.l1], p.h1],
        [labels[p.l2], p.h2],
      ],
      layer: labels[p.l2],
      head: p.h2,
    });
  }

  // ----- read-outs -----------------------------------------------------------------------
  const describe = (p) =>
    causalMode()
      ? causalPairText(p, {
          value: causalAt(1, p),
          effect: causalAt(0, p),
          raw: state.values ? raw(p) : Number.NaN,
          kind: kind(),
          metric: causalPayload().metric,
          name: headName,
        })
      : pairText(p, raw(p), { kind: kind(), corrected: model.get("baseline"), base: baseValue(), name: headName });

  function drawReadout() {
    const { hover } = state;
    const sel = selectedPair();
    const pos = selectedPos();
    if (hover?.type === "edge") readout.textContent = describe(hover);
    else if (hover?.type === "node") readout.textContent = `${headName(hover.l, hover.h)} · click to select this head`;
    else if (sel && sel.l1 >= 0 && sel.l2 >= 0 && state.values)
      readout.textContent = `selected: ${describe(sel)} · click it again to release`;
    else
      readout.textContent = state.values
        ? `selected head ${headName(pos.l, pos.h)} · hover a pair for its score, click to select`
        : "no scores yet";
  }

  // ----- pictures ------------------------------------------------------------------------
  /** What the graph and the matrix draw. */
  const spec = () => ({
    values: drawn(),
    k: kindIndex(),
    L: state.L,
    H: state.H,
    layerLabels: layerLabels(),
    kind: kind(),
    title: causalMode() ? `${kind()} paths (path patching, normalised)` : undefined,
    corrected: model.get("baseline") && !causalMode(),
    threshold: threshold(),
    offset: offset(),
    baseline: causalMode() ? null : model.get("baseline") ? 0 : baseValue(), // where the baseline sits on the colour bar
    scale: scale(),
    theme: v.theme,
    selected: selectedPos(),
    pair: selectedPair(),
    hover: state.hover,
  });

  function drawGraph() {
    const { scene, shown, passing } = graphScene({ ...spec(), maxWidth: Math.max(v.compact ? 280 : 420, Math.min(900, v.size)) });
    Object.assign(state, { graph: scene, shown, passing });
    const attrs = { role: "img", "aria-label": `${kind()}-composition graph`, class: "cw-comp-graph" };
    picture.replaceChildren(svgElement(svgTree(scene, { background: v.theme.bgCss, attrs })));
  }

  function drawMatrix() {
    if (state.L < 2) {
      picture.replaceChildren(h("div", { class: "cw-hint", text: "one attention layer: no head reads another's output" }));
      state.shown = 0;
      return;
    }
    matrix.update({ ...spec(), maxPlot: Math.max(240, Math.min(560, v.size - 220)) });
    state.shown = state.passing = matrix.shown;
    if (!picture.contains(matrix.el)) picture.replaceChildren(matrix.el);
  }

  function draw() {
    if (!state.values) return;
    if (model.get("view") === "graph") drawGraph();
    else drawMatrix();
    drawReadout();
    const { shown, passing } = state;
    const layers = (info().attn_layers || []).length;
    const c = causalPayload();
    noteLine.textContent = causalMode()
      ? causalNoteText({
          kind: kind(),
          computed: c.computed,
          metric: c.metric,
          shown,
          cleanValue: c.clean_value,
          corruptedValue: c.corrupted_value,
          reason: c.not_normalised,
          direction: c.direction,
        })
      : noteText({
          corrected: model.get("baseline"),
          base: baseValue(),
          dModel: info().d_model,
          graph: model.get("view") === "graph",
          shown,
          passing,
          layers,
        });
    caption.textContent = scoresCaption(scores(), kind(), layers);
    caption.hidden = !caption.textContent;
    v.drawn("main");
  }

  function drawPair() {
    pair.update({
      payload: v.payloads("pair_patterns")?.pair_patterns,
      want: model.get("selected_pair") || [],
      standalone: v.standalone,
      theme: v.theme,
      width: v.size,
    });
  }

  function drawTerm() {
    term.update({
      set: v.payloads("term", "term_eigenvalues"),
      values: model.get("term_values"),
      kind: kind(),
      want: model.get("selected_pair") || [],
      standalone: v.standalone,
      theme: v.theme,
      width: v.size,
      criterion: model.get("term_criterion"),
    });
    if (term.stack) v.drawn("term");
  }

  function sync() {
    const sc = scale();
    controls.sync({
      kind: kind(),
      baseline: model.get("baseline"),
      view: model.get("view"),
      domain: sc.domain,
      threshold: threshold(),
      edges: model.get("edge_value"),
      causalReason: causalPayload().reason || "",
    });
    const unsaved = v.standalone && state.values && !computed().includes(kind());
    v.error(unsaved ? `${kind()}-composition was not computed when this page was saved` : "", "unsaved");
  }

  function start() {
    const p = scores();
    if (!hasData(p)) {
      // nothing computed yet (a deferred first refresh): say so rather than draw an empty frame
      state.values = null;
      picture.replaceChildren(h("div", { class: "cw-hint cw-comp-wait", text: "computing composition scores…" }));
      sync();
      return;
    }
    try {
      const [, L, H] = p.shape;
      if (!L) throw new RangeError(`scores have shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { values: floatValues(p), L, H });
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      v.error(`could not read the scores: ${err.message}`, "decode");
    }
    sync();
    draw();
  }

  function startCausal() {
    const p = causalPayload();
    state.causal = null;
    if (hasData(p)) {
      try {
        state.causal = floatValues(p);
        v.error("", "causal");
      } catch (err) {
        v.error(`could not read the causal edges: ${err.message}`, "causal");
      }
    }
    sync();
    draw();
  }

  // ----- events on the graph -------------------------------------------------------------
  const inGraph = () => model.get("view") === "graph";
  v.listen(picture, "mouseover", (e) => {
    if (!inGraph()) return;
    const t = graphTarget(e.target);
    if (JSON.stringify(t) === JSON.stringify(state.hover)) return;
    state.hover = t;
    draw();
  });
  v.listen(picture, "mouseleave", () => {
    if (!inGraph() || !state.hover) return;
    state.hover = null;
    draw();
  });
  v.listen(picture, "click", (e) => {
    const t = inGraph() ? graphTarget(e.target) : null;
    if (t?.type === "node") v.set({ layer: layerLabels()[t.l], head: t.h, selected_pair: [] });
    else if (t) clickPair(t);
  });

  // ----- model -> view -------------------------------------------------------------------
  v.onPayloads("scores", start);
  v.onPayloads("causal", startCausal);
  v.on("change:edge_value", () => {
    state.hover = null;
    sync();
    draw();
    v.refresh();
  });
  v.on("change:progress", v.refresh);
  v.on("change:threshold", () => {
    if (model.get("threshold") === state.threshold) return;
    state.threshold = model.get("threshold");
    sync();
    draw();
  });
  v.on("change:kind change:baseline change:view", () => {
    state.threshold = model.get("threshold");
    state.causalThreshold = null;
    state.hover = null;
    sync();
    draw();
    drawTerm();
    v.refresh();
  });
  v.on("change:layer change:head", draw);
  v.on("change:selected_pair", () => {
    draw();
    drawPair();
    drawTerm();
  });
  v.onPayloads("pair_patterns", drawPair);
  v.onPayloads("term term_eigenvalues", drawTerm);
  v.on("change:term_values change:term_criterion", drawTerm);

  return {
    start: () => {
      start();
      startCausal();
      drawPair();
      drawTerm();
    },
    draw: () => {
      draw();
      drawPair();
      drawTerm();
    },
    size: (width) => (Number.isFinite(width) ? width : 760),
    sizeStep: 40,
    busy: () => model.get("progress") || (model.get("busy") ? `computing ${kind()}-composition…` : ""),
    keys: { Escape: () => v.set({ selected_pair: [] }) },
    marks: () => ({
      edges: causalMode() ? "causal" : "weights",
      view: model.get("view"),
      compKind: kind(),
      shown: state.shown,
      threshold: state.threshold,
      computed: computed().join(","),
      layer: model.get("layer"),
      head: model.get("head"),
    }),
  };
});
