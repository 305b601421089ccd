// Training view: a head metric of every head along training (one line a head, coloured by layer; hover names it,
// click selects it), the loss curves below, the phase-change window shaded in each, and a step scrubber (slider
// and play) that moves the selected step; linked views in the kernel show that step's model.
//
// The curves arrive as exact float32 [n_steps, layers, heads] (a composition metric: every earlier head into the
// selected one), the losses as float32 [n_losses, n_steps]; steps are drawn on a log axis (log(1 + step)) or a
// linear one.

import { button, h, indexOptions, numberOptions, selectControl } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { saveButtons } from "../lib/save.js";
import { formatValue } from "../lib/scales.js";
import { paintCanvas } from "../lib/scene.js";
import { layerColour, nearestLine, stepAt, stepChartScene, stepText } from "../lib/step-chart.js";
import { defineView } from "../lib/view.js";

/** Milliseconds between two steps while playing. */
export const PLAY_MS = 700;

/** "L1H2". */
export const headName = (layer, head) => `L${layer}H${head}`;

/** The window's words: "phase change: steps 1 000–2 600". */
export function windowText(window, unit = "step") {
  return window ? `phase change: ${unit}s ${stepText(window[0])}–${stepText(window[1])}` : "";
}

/**
 * The series of the head chart: one per head (row, head) of `values` [n_steps, L, H], coloured by layer; the selected
 * head (`selected`: {row, head}) drawn thick in the accent colour, last (on top). A composition metric's lines are
 * the earlier heads writing into the selected one (`into`): only those rows have values.
 */
export function headSeries(values, [nSteps, L, H], { layers, selected, theme }) {
  const series = [];
  let chosen = null;
  for (let row = 0; row < L; row++) {
    for (let head = 0; head < H; head++) {
      const line = new Array(nSteps);
      let any = false;
      for (let s = 0; s < nSteps; s++) {
        line[s] = values[(s * L + row) * H + head];
        if (Number.isFinite(line[s])) any = true;
      }
      if (!any) continue;
      const isSelected = selected && selected.row === row && selected.head === head;
      const item = {
        name: headName(layers[row], head),
        row,
        head,
        values: line,
        color: isSelected ? theme.accent : layerColour(row, theme.dark),
        width: isSelected ? 2.8 : 1.3,
        alpha: isSelected ? 1 : 0.75,
      };
      if (isSelected) chosen = item;
      else series.push(item);
    }
  }
  if (chosen) series.push(chosen);
  return series;
}

defineView("training", (v) => {
  const { model } = v;
  const state = { values: null, losses: null, hover: null, lossHover: null, playing: null };
  const curves = () => v.payloads("curves")?.curves || {};
  const lossesOf = () => model.get("losses") || {};
  const steps = () => curves().steps || [];
  const unit = () => curves().unit || "step";
  const layers = () => curves().layers || [];
  const nHeads = () => curves().n_heads || 1;
  const composition = () => Array.isArray(curves().into);
  const stepIndex = () => steps().indexOf(model.get("step"));

  // ----- controls ------------------------------------------------------------------------
  const metricSelect = h("select", { class: "cw-select", attrs: { "aria-label": "Metric" } });
  v.listen(metricSelect, "change", () => v.set({ metric: metricSelect.value }));
  const metricField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Metric" }), metricSelect]);
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const scaleButtons = ["log", "linear"].map((s) =>
    h("button", {
      class: "cw-button cw-tr-scale",
      type: "button",
      text: s === "log" ? "Log" : "Linear",
      attrs: { "data-scale": s, title: s === "log" ? "steps on a log axis: log(1 + step)" : "steps on a linear axis" },
      on: { click: () => v.set({ x_scale: s }) },
    }),
  );
  const scaleGroup = h("span", { class: "cw-tr-scales", attrs: { role: "group", "aria-label": "step axis" } }, scaleButtons);
  const toolbar = h("div", { class: "cw-toolbar-row" }, [metricField, layerSelect.el, headSelect.el, scaleGroup, v.busyMark]);

  const bar = h("div", { class: "cw-tr-bar-fill" });
  const progressBar = h("div", { class: "cw-tr-bar", attrs: { role: "progressbar", "aria-label": "checkpoints scanned" } }, [bar]);
  const progressText = h("span", { class: "cw-tr-progress-text" });
  const stopButton = button("Stop", "stop the scan before the next checkpoint (the checkpoints scanned stay)", () => {
    v.set({ scan_state: model.get("scan_state") === "running" ? "stopped" : "running" });
  });
  stopButton.classList.add("cw-tr-stop");
  const buttons = saveButtons({
    what: "curves",
    picture: () => picture(),
    name: () => `training_${model.get("metric")}`,
    background: () => v.theme.bgCss,
  });
  const progressRow = h("div", { class: "cw-toolbar-row cw-tr-progress" }, [
    progressBar,
    progressText,
    stopButton,
    h("span", { class: "cw-spacer" }),
    ...buttons,
  ]);

  // ----- the two charts (each: a picture canvas and a hover canvas on top) -------------------
  const chart = (label) => {
    const canvas = h("canvas", { class: "cw-tr-canvas", attrs: { role: "img", "aria-label": label } });
    const overlay = h("canvas", { class: "cw-tr-overlay" });
    const el = h("div", { class: "cw-tr-chart" }, [canvas, overlay]);
    return { canvas, overlay, el, scene: null, series: [] };
  };
  const heads = chart("every head's metric along training");
  const losses = chart("the loss along training");
  const readout = h("div", { class: "cw-readout cw-tr-readout", attrs: { "aria-live": "polite" } });

  // ----- the scrubber ------------------------------------------------------------------------
  const playButton = button("▶ Play", "play the steps one after the other", () => (state.playing ? stopPlaying() : play()));
  playButton.classList.add("cw-tr-play");
  const slider = h("input", { class: "cw-tr-slider", type: "range", attrs: { min: 0, step: 1, "aria-label": "step" } });
  const stepLabel = h("span", { class: "cw-tr-step" });
  const scrubber = h("div", { class: "cw-toolbar-row cw-tr-scrubber" }, [playButton, slider, stepLabel]);
  v.listen(slider, "input", () => selectStep(Number(slider.value)));
  const hint = h("div", { class: "cw-hint cw-tr-hint" });
  const kernelNote = h("div", { class: "cw-hint cw-tr-kernel" });

  v.root.append(toolbar, progressRow, v.banner, heads.el, readout, losses.el, scrubber, hint, kernelNote);

  function selectStep(i) {
    const list = steps();
    if (!(i >= 0 && i < list.length) || list[i] === model.get("step")) return;
    v.set({ step: list[i] });
  }
  function play() {
    const list = steps();
    if (!list.length) return;
    if (stepIndex() >= list.length - 1) selectStep(0); // from the start again
    state.playing = setInterval(() => {
      const i = stepIndex() + 1;
      if (i >= steps().length) stopPlaying();
      else selectStep(i);
    }, PLAY_MS);
    drawScrubber();
    v.drawn("play");
  }
  function stopPlaying() {
    clearInterval(state.playing);
    state.playing = null;
    drawScrubber();
    v.drawn("play");
  }
  v.own(() => clearInterval(state.playing));

  // ----- hover and clicks ----------------------------------------------------------------------
  const pointer = (c, e) => {
    const box = c.overlay.getBoundingClientRect();
    return [e.clientX - box.left, e.clientY - box.top];
  };
  v.listen(heads.overlay, "mousemove", (e) => {
    if (!heads.scene) return;
    const [x, y] = pointer(heads, e);
    const k = nearestLine(heads.scene, x, y, 7);
    const s = stepAt(heads.scene, x, y);
    state.hover = s == null ? null : { series: k, step: s };
    heads.overlay.style.cursor = k != null && !composition() ? "pointer" : s != null ? "col-resize" : "default";
    drawHover();
    drawReadout();
  });
  v.listen(heads.overlay, "mouseleave", () => {
    state.hover = null;
    drawHover();
    drawReadout();
  });
  v.listen(heads.overlay, "click", (e) => {
    if (!heads.scene) return;
    const [x, y] = pointer(heads, e);
    const k = nearestLine(heads.scene, x, y, 7);
    const s = stepAt(heads.scene, x, y);
    if (k != null && !composition()) {
      const line = heads.series[k];
      const layer = layers()[line.row];
      if (layer !== model.get("layer") || line.head !== model.get("head")) v.set({ layer, head: line.head });
    }
    if (s != null) selectStep(s);
  });
  v.listen(losses.overlay, "mousemove", (e) => {
    if (!losses.scene) return;
    const [x, y] = pointer(losses, e);
    state.lossHover = stepAt(losses.scene, x, y);
    drawHover();
    drawReadout();
  });
  v.listen(losses.overlay, "mouseleave", () => {
    state.lossHover = null;
    drawHover();
    drawReadout();
  });
  v.listen(losses.overlay, "click", (e) => {
    if (!losses.scene) return;
    const s = stepAt(losses.scene, ...pointer(losses, e));
    if (s != null) selectStep(s);
  });

  // ----- drawing -------------------------------------------------------------------------
  const measureWith = (canvas) => {
    const ctx = canvas.getContext("2d");
    return (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    };
  };
  const width = () => Math.max(380, Math.min(760, v.size ?? 680));

  function drawHeads() {
    const p = curves();
    heads.el.hidden = !state.values;
    if (!state.values) return;
    const row = layers().indexOf(model.get("layer"));
    heads.series = headSeries(state.values, p.shape, {
      layers: layers(),
      selected: composition() ? null : { row, head: model.get("head") },
      theme: v.theme,
    });
    const into = composition() ? ` into ${headName(...p.into)}` : "";
    const drawn = new Set(heads.series.map((s) => s.row)); // (a composition metric: only the earlier layers have lines)
    const legend = layers()
      .map((layer, r) => ({ name: `layer ${layer}`, color: layerColour(r, v.theme.dark), row: r }))
      .filter((item) => drawn.has(item.row));
    if (!composition()) legend.push({ name: headName(model.get("layer"), model.get("head")), color: v.theme.accent });
    heads.scene = stepChartScene(
      {
        steps: steps(),
        series: heads.series,
        scale: model.get("x_scale"),
        window: p.window,
        windowLabel: windowText(p.window, unit()),
        cursor: model.get("step"),
        title: `${p.label || p.metric}${into}: every ${composition() ? "earlier head" : "head"} along training`,
        yTitle: p.label,
        xTitle: unit(),
        legend,
        domain: p.range,
        theme: v.theme,
        width: width(),
        height: v.compact ? 220 : 280,
      },
      measureWith(heads.canvas),
    );
    heads.scene.names = heads.series.map((s) => s.name); // (what each line is: browser tests find a head's line)
    heads.canvas.cwScene = heads.scene;
    paintCanvas(heads.canvas, heads.scene);
    heads.el.style.width = `${heads.scene.width}px`;
    heads.el.style.height = `${heads.scene.height}px`;
  }

  function drawLosses() {
    const p = lossesOf();
    losses.el.hidden = !state.losses;
    if (!state.losses) {
      losses.scene = null;
      return;
    }
    const names = p.names || [];
    const n = steps().length;
    const styles = [
      { color: v.theme.fg, dash: null },
      { color: v.theme.accent, dash: [5, 3] },
    ];
    losses.series = names.map((name, k) => ({
      name: p.labels?.[name] || name,
      values: Array.from(state.losses.subarray(k * n, (k + 1) * n)),
      width: 2,
      ...styles[k % styles.length],
    }));
    const windowed = names.includes("in_context_loss") ? "in_context_loss" : names[0];
    const window = p.windows?.[windowed] || null;
    losses.scene = stepChartScene(
      {
        steps: steps(),
        series: losses.series,
        scale: model.get("x_scale"),
        window,
        windowLabel: window ? `${windowText(window, unit())} of the ${p.labels?.[windowed] || windowed}` : "",
        cursor: model.get("step"),
        title: "loss along training",
        yTitle: "nats",
        xTitle: unit(),
        legend: losses.series,
        theme: v.theme,
        width: width(),
        height: v.compact ? 180 : 220,
      },
      measureWith(losses.canvas),
    );
    losses.canvas.cwScene = losses.scene;
    paintCanvas(losses.canvas, losses.scene);
    losses.el.style.width = `${losses.scene.width}px`;
    losses.el.style.height = `${losses.scene.height}px`;
  }

  function drawHover() {
    const hoverStep = state.hover?.step ?? state.lossHover;
    for (const c of [heads, losses]) {
      if (!c.scene) continue;
      const ops = [];
      const { top, plotH, xs } = c.scene.layout;
      if (hoverStep != null && xs[hoverStep] != null)
        ops.push({ type: "line", x1: xs[hoverStep], y1: top, x2: xs[hoverStep], y2: top + plotH, stroke: v.theme.muted, dash: [3, 2] });
      const k = c === heads ? state.hover?.series : null;
      if (k != null && c.scene.lines[k]) {
        const pts = c.scene.lines[k].filter(Boolean);
        const d = pts.map((p, i) => `${i ? "L" : "M"}${p[0].toFixed(2)} ${p[1].toFixed(2)}`).join("");
        if (d) ops.push({ type: "path", d, stroke: v.theme.fg, width: 2.4, dash: [4, 2] });
        const at = c.scene.lines[k][hoverStep];
        if (at) ops.push({ type: "circle", x: at[0], y: at[1], r: 4, fill: v.theme.fg, stroke: v.theme.bgCss, width: 1.5 });
      }
      paintCanvas(c.overlay, { width: c.scene.width, height: c.scene.height, ops });
    }
  }

  function drawReadout() {
    const p = curves();
    if (!state.values) {
      readout.textContent = "no checkpoint scanned yet";
      return;
    }
    const i = state.hover?.step ?? state.lossHover ?? stepIndex();
    const step = steps()[i];
    const parts = [`${unit()} ${stepText(step ?? 0)}`];
    const k = state.hover?.series;
    const line = k != null ? heads.series[k] : null;
    const label = p.label || p.metric;
    if (line) parts.unshift(composition() ? `${line.name} → ${headName(...p.into)}` : line.name);
    if (line) parts.push(`${label} ${formatValue(line.values[i], 3)}`);
    else if (!composition()) {
      const row = layers().indexOf(model.get("layer"));
      const value = state.values[(i * layers().length + row) * nHeads() + model.get("head")];
      parts.unshift(`selected ${headName(model.get("layer"), model.get("head"))}`);
      parts.push(`${label} ${formatValue(value, 3)}`);
    } else parts.unshift(`${label} into ${headName(...p.into)} (hover a line for its head)`);
    const names = lossesOf().names || [];
    names.forEach((name, k2) => {
      const value = state.losses?.[k2 * steps().length + i];
      if (value != null) parts.push(`${lossesOf().labels?.[name] || name} ${formatValue(value, 3)}`);
    });
    readout.textContent = parts.join(" · ");
    readout.dataset.cwStep = String(step ?? "");
    readout.dataset.cwSeries = line ? line.name : "";
  }

  function drawScrubber() {
    const list = steps();
    slider.max = String(Math.max(0, list.length - 1));
    slider.value = String(Math.max(0, stepIndex()));
    slider.disabled = list.length < 2;
    const i = stepIndex();
    stepLabel.textContent = i >= 0 ? `${unit()} ${stepText(list[i])} (${i + 1} of ${list.length})` : "";
    playButton.textContent = state.playing ? "❚❚ Pause" : "▶ Play";
    playButton.setAttribute("aria-pressed", String(!!state.playing));
  }

  function drawProgress() {
    const pr = model.get("progress") || {};
    const st = model.get("scan_state");
    const total = pr.total || steps().length;
    const done = pr.done ?? 0;
    bar.style.width = `${total ? (100 * done) / total : 0}%`;
    progressBar.setAttribute("aria-valuemax", String(total));
    progressBar.setAttribute("aria-valuenow", String(done));
    const text = `checkpoints ${done} of ${total}`;
    if (st === "done") progressText.textContent = `scanned ${total} checkpoints`;
    else if (v.standalone) progressText.textContent = `saved with ${text} scanned`;
    else progressText.textContent = st === "running" ? `scanning: ${text}` : `stopped at ${text}`;
    progressBar.hidden = st === "done";
    stopButton.hidden = v.standalone || st === "done";
    stopButton.textContent = st === "running" ? "Stop" : "Resume";
  }

  function drawHint() {
    const p = curves();
    const lines = [];
    if (p.description) lines.push(`${p.label}: ${p.description}`);
    const lp = lossesOf();
    for (const name of lp.names || []) if (lp.descriptions?.[name]) lines.push(`${lp.labels?.[name] || name}: ${lp.descriptions[name]}`);
    lines.push(
      "Shaded: the neighbouring checkpoints where the curve (the maximum over the heads) changes most, widened while the change keeps half that size.",
    );
    hint.replaceChildren(...lines.map((text) => h("div", { text })));
    kernelNote.textContent = v.standalone ? `Saved page: ${model.get("kernel_note")}.` : "";
    kernelNote.hidden = !v.standalone;
  }

  function syncControls() {
    const p = curves();
    const list = p.metrics || [];
    const key = list.join("|");
    if (metricSelect.dataset.options !== key) {
      metricSelect.replaceChildren(...list.map((m) => h("option", { value: m, text: p.labels?.[m] || m })));
      metricSelect.dataset.options = key;
    }
    metricSelect.value = model.get("metric");
    layerSelect.set(numberOptions(layers()), model.get("layer"));
    headSelect.set(indexOptions(nHeads()), model.get("head"));
    for (const b of scaleButtons) b.setAttribute("aria-pressed", String(b.dataset.scale === model.get("x_scale")));
  }

  /** What the PNG / SVG buttons save: both charts, one above the other. */
  function picture() {
    const scenes = [heads.scene, losses.scene].filter(Boolean);
    if (!scenes.length) return null;
    if (scenes.length === 1) return scenes[0];
    const [a, b] = scenes;
    return {
      width: Math.max(a.width, b.width),
      height: a.height + 12 + b.height,
      ops: [
        { type: "group", x: 0, y: 0, ops: a.ops },
        { type: "group", x: 0, y: a.height + 12, ops: b.ops },
      ],
    };
  }
  function drawCharts() {
    drawHeads();
    drawLosses();
    drawHover();
  }

  function draw() {
    syncControls();
    drawProgress();
    drawCharts();
    drawReadout();
    drawScrubber();
    drawHint();
    v.drawn("all");
  }

  function start() {
    const p = curves();
    try {
      state.values = hasData(p) ? floatValues(p) : null;
      const lp = lossesOf();
      state.losses = hasData(lp) ? floatValues(lp) : null;
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      state.losses = null;
      v.error(`could not read the curves: ${err.message}`, "decode");
    }
    draw();
  }

  v.onPayloads("curves", start);
  v.on("change:losses", start);
  v.on("change:step", () => {
    drawCharts();
    drawReadout();
    drawScrubber();
    v.drawn("step");
  });
  v.on("change:layer change:head", () => {
    syncControls();
    drawCharts();
    drawReadout();
    v.drawn("select");
  });
  v.on("change:x_scale", () => {
    syncControls();
    drawCharts();
    v.drawn("scale");
  });
  v.on("change:progress change:scan_state", () => {
    drawProgress();
    v.drawn("progress");
  });

  const moveStep = (d) => () => selectStep(Math.max(0, Math.min(steps().length - 1, stepIndex() + d)));
  return {
    start,
    draw,
    size: (w) => Math.max(380, Math.min(760, w - 20)),
    busy: () => (model.get("busy") ? "computing…" : ""),
    keys: {
      ArrowRight: moveStep(1),
      ArrowLeft: moveStep(-1),
      " ": () => (state.playing ? stopPlaying() : play()),
    },
    marks: () => ({
      layer: model.get("layer"),
      head: model.get("head"),
      metric: model.get("metric"),
      step: model.get("step"),
      scale: model.get("x_scale"),
      lines: heads.series.length,
      window: (curves().window || []).join("-"),
      lossWindow: (() => {
        const lp = lossesOf();
        const name = (lp.names || []).includes("in_context_loss") ? "in_context_loss" : (lp.names || [])[0];
        return (lp.windows?.[name] || []).join("-");
      })(),
      scanState: model.get("scan_state"),
      done: (curves().done || []).filter(Boolean).length,
      playing: state.playing ? "on" : "off",
    }),
  };
});
