// The circuit term an edge of the composition diagram builds (analysis.composition_term), on a
// token subset: a heatmap with the framework's axis words, the term's eigenvalues on the complex
// plane and their positivity Σλ / Σ|λ| (for V, the virtual head's copying score).

import { h } from "./controls.js";
import { CodeStack, exactValue, floatValues, hasData } from "./decode.js";
import { Heatmap } from "./heatmap.js";
import { diagonalOps } from "./heatmap-scene.js";
import { axisPriority, quote } from "./layout.js";
import { sameRevision } from "./payloads.js";
import { planeScene } from "./plane.js";
import { formatValue, makeScale } from "./scales.js";
import { nearestDot, paintCanvas } from "./scene.js";

const name = ([l, hd]) => `L${l}H${hd}`;

/**
 * The words of term `kind` for pair [[l1, h1], [l2, h2]]: title, axis titles, what a row and a
 * column are in the read-out, the units of a cell and the name of the positivity.
 */
export function termWords(kind, pair) {
  const [a, b] = pair.length === 2 ? pair.map(name) : ["h1", "h2"];
  if (kind === "V") {
    return {
      title: `V term: virtual head ${b}·${a}, full OV circuit`,
      yTitle: "source ↓",
      xTitle: "out →",
      axes: "rows: source token · columns: out token (whose logit moves)",
      row: "source",
      col: "out",
      units: "logit",
      positivity: "copying score (virtual head)",
      explain: `W_E W_OV(${a}) W_OV(${b}) W_U: what attending (through both heads) to the source token does to the out token's logit`,
    };
  }
  if (kind === "Q") {
    return {
      title: `Q term ${a} → ${b} (attention logits)`,
      yTitle: "moved to query ↓",
      xTitle: "source (key) →",
      axes: `rows: the token ${a} moved into the destination (query) position · columns: source (key) token`,
      row: `${a} moved into the destination (query)`,
      col: "source (key)",
      units: "attention logit",
      positivity: "positivity Σλ/Σ|λ|",
      explain: `(W_E W_OV(${a})) W_QK(${b}) W_Eᵀ / attention scale`,
    };
  }
  return {
    title: `K term ${a} → ${b} (attention logits)`,
    yTitle: "destination (query) ↓",
    xTitle: "moved to source →",
    axes: `rows: destination (query) token · columns: the token ${a} moved into the source (key) position`,
    row: "destination (query)",
    col: `${a} moved into the source (key)`,
    units: "attention logit",
    positivity: "positivity Σλ/Σ|λ|",
    explain:
      `W_E W_QK(${b}) (W_E W_OV(${a}))ᵀ / attention scale: ` +
      `positive on the diagonal when ${b} attends where ${a} moved the current token`,
  };
}

const samePair = (a, b) => JSON.stringify(a || []) === JSON.stringify(b || []);

export class TermPanel {
  constructor() {
    this.hover = null;
    this.lock = null;
    this.eigHover = null;
    this.stack = null;
    this.set = null;
    this.spec = null;
    this.heatmap = new Heatmap({
      label: "composition term",
      onHover: (hit) => {
        this.hover = hit;
        this.drawReadout();
      },
      onClick: (hit) => {
        const same = this.lock && this.lock.row === hit.row && this.lock.col === hit.col;
        this.lock = same ? null : hit;
        this.drawReadout();
      },
    });
    this.plane = h("canvas", {
      class: "cw-term-plane",
      attrs: { role: "img", "aria-label": "eigenvalues of the term on the complex plane" },
    });
    this.positivityLabel = h("span", { class: "cw-term-stat-label" });
    this.positivity = h("span", { class: "cw-term-positivity" });
    this.note = h("div", { class: "cw-hint cw-term-note" });
    this.readout = h("div", { class: "cw-readout cw-term-readout", attrs: { "aria-live": "polite" } });
    this.explain = h("div", { class: "cw-hint cw-term-explain" });
    this.axes = h("div", { class: "cw-term-axes" });
    this.criterion = h("div", { class: "cw-hint cw-term-criterion" });
    const stat = h("div", { class: "cw-term-stat" }, [this.positivityLabel, this.positivity]);
    const side = h("div", { class: "cw-term-side" }, [this.plane, this.note, stat]);
    this.body = [
      h("div", { class: "cw-field-label", text: "What the selected edge builds (token embeddings only)" }),
      this.axes,
      this.criterion,
      h("div", { class: "cw-term-main" }, [this.heatmap.el, side]),
      this.explain,
      this.readout,
    ];
    this.el = h("div", { class: "cw-comp-term" });
    this.onPlaneMove = (e) => {
      if (!this.planeScene) return;
      const box = this.plane.getBoundingClientRect();
      const dot = nearestDot(this.planeScene, e.clientX - box.left, e.clientY - box.top);
      this.hoverEigen(dot ? dot.i : null);
    };
    this.onPlaneLeave = () => this.hoverEigen(null);
    this.plane.addEventListener("mousemove", this.onPlaneMove);
    this.plane.addEventListener("mouseleave", this.onPlaneLeave);
  }

  hint(text, cls = "cw-hint") {
    this.stack = null;
    this.el.replaceChildren(h("div", { class: cls, text }));
  }

  /**
   * Draw the term for pair `want` and `kind`. set: {term, term_eigenvalues} of one refresh (or
   * null); values: the term_values payload (exact read-outs when its revision agrees).
   */
  update({ set, values, kind, want, standalone, theme, width, criterion = "" }) {
    this.spec = { values, theme };
    const term = set?.term;
    this.el.hidden = want.length !== 2; // the pair panel beside it says what a click shows
    if (want.length !== 2) {
      this.stack = null;
      this.el.replaceChildren();
      return;
    }
    if (!term || !samePair(term.pair, want) || term.kind !== kind || !hasData(term)) {
      if (standalone) return this.hint("this page holds only the term of the pair and kind selected when it was saved");
      if (!this.stack) return this.hint(`computing the ${kind} term…`);
      // keep the last picture (its title names its kind and pair), faded, until the new one arrives
      this.el.classList.add("cw-term-stale");
      this.readout.textContent = `computing the ${kind} term of ${want.map(name).join(" → ")}…`;
      return;
    }
    this.el.classList.remove("cw-term-stale");
    if (this.set !== set) {
      this.lock = null;
      this.eigHover = null;
    }
    this.set = set;
    try {
      this.stack = new CodeStack(term);
    } catch (err) {
      return this.hint(`could not read the term: ${err.message}`, "cw-error");
    }
    const stack = this.stack;
    const words = termWords(kind, term.pair);
    const scale = makeScale("diverging", { dark: theme.dark, domain: [stack.lo, stack.hi] });
    const lut = scale.lut(stack);
    const labels = term.labels || [];
    this.heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(0, lut, pixels, 0),
      rowLabels: labels,
      colLabels: labels,
      ...axisPriority(stack.rows, stack.cols, (r, c) => stack.value(0, r, c)), // the strongest tokens, where not every label fits
      title: words.title,
      yTitle: words.yTitle,
      xTitle: words.xTitle,
      scale,
      theme,
      maxPlot: Math.max(200, Math.min(420, width - 330)),
      marks: (layout) => diagonalOps(layout, Math.min(stack.rows, stack.cols), theme),
    });
    this.words = words;
    this.drawPlane();
    const p = term.positivity;
    this.positivityLabel.textContent = words.positivity;
    this.positivity.textContent = p == null ? "n/a" : formatValue(p, 4);
    this.positivity.dataset.value = p == null ? "" : String(p);
    this.explain.textContent = [words.explain, term.caption].filter(Boolean).join(" ");
    this.axes.textContent = words.axes;
    this.criterion.textContent = criterion ? `tokens: ${criterion}` : "";
    if (!this.el.contains(this.heatmap.el)) this.el.replaceChildren(...this.body);
    this.el.dataset.kind = kind;
    this.el.dataset.pair = JSON.stringify(term.pair);
    this.el.dataset.revision = String(term.revision);
    this.drawReadout();
  }

  /** Eigenvalues [[re, im], ...] of the term drawn. */
  points() {
    const eig = this.set?.term_eigenvalues;
    if (!hasData(eig)) return [];
    const v = floatValues(eig);
    return Array.from({ length: eig.shape[0] }, (_, i) => [v[2 * i], v[2 * i + 1]]);
  }

  drawPlane() {
    const points = this.points();
    this.planeScene = planeScene({ points, size: 250, theme: this.spec.theme, title: "Eigenvalues of the term", ring: this.eigHover });
    paintCanvas(this.plane, this.planeScene);
    const n = this.planeScene.dots.length;
    this.note.textContent = n
      ? `${n} eigenvalues (d_head × d_head form), shown as λ / max|λ|, max|λ| = ${formatValue(this.planeScene.scale)}`
      : "no eigenvalues";
  }

  hoverEigen(i) {
    if (i === this.eigHover) return;
    this.eigHover = i;
    this.drawPlane();
    this.drawReadout();
  }

  drawReadout() {
    const stack = this.stack;
    if (!stack || this.el.classList.contains("cw-term-stale")) return;
    const sel = this.lock || this.hover;
    this.heatmap.setHighlight({ row: this.hover?.row, col: this.hover?.col, lockedRow: this.lock?.row, lockedCol: this.lock?.col });
    const readout = this.readout;
    delete readout.dataset.value;
    delete readout.dataset.row;
    delete readout.dataset.col;
    const { labels = [], ids = [] } = this.set.term;
    if (this.eigHover != null) {
      const [re, im] = this.points()[this.eigHover] || [NaN, NaN];
      const z = `${formatValue(re)} ${im < 0 ? "−" : "+"} ${formatValue(Math.abs(im))}i`;
      readout.textContent = `λ${this.eigHover + 1} = ${z} · |λ| = ${formatValue(Math.hypot(re, im))}`;
      return;
    }
    if (!sel || sel.row >= stack.rows || sel.col >= stack.cols) {
      readout.textContent = `${stack.rows} tokens · hover a cell (click to lock) or an eigenvalue`;
      return;
    }
    const values = this.spec.values;
    const exact = sameRevision(values, this.set.term) ? exactValue(values, sel.row, sel.col) : null;
    const value = exact == null ? `≈${formatValue(stack.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
    const w = this.words;
    const tag = sel.row === sel.col ? " (diagonal: the same token)" : "";
    const token = (i) => `${quote(labels[i] ?? i)} (id ${ids[i]})`;
    const locked = this.lock ? " · locked (click again)" : "";
    readout.textContent = `${w.row} ${token(sel.row)} × ${w.col} ${token(sel.col)} · ${w.units} ${value}${tag}${locked}`;
    if (exact != null) readout.dataset.value = String(exact);
    readout.dataset.row = String(sel.row);
    readout.dataset.col = String(sel.col);
  }

  destroy() {
    this.plane.removeEventListener("mousemove", this.onPlaneMove);
    this.plane.removeEventListener("mouseleave", this.onPlaneLeave);
    this.heatmap.destroy();
    this.el.remove();
  }
}
