// The selected pair of a composition diagram on the prompt: the first head's pattern, the second
// head's, and their virtual head (the later pattern times the earlier one), with a shared hover.

import { colorScaleOf } from "./color-scale.js";
import { h } from "./controls.js";
import { CodeStack, hasData } from "./decode.js";
import { Heatmap } from "./heatmap.js";
import { axisPriority, quote } from "./layout.js";
import { formatValue, makeScale } from "./scales.js";

const LABELS = ["first head's pattern", "second head's pattern", "virtual head's pattern"];
const HINT = "hover a cell: destination (query) row, source (key) column";

export class PairPanel {
  constructor() {
    this.maps = LABELS.map((label) => new Heatmap({ label, onHover: (hit) => this.hover(hit) }));
    this.readout = h("div", { class: "cw-readout" });
    this.el = h("div", { class: "cw-comp-pair" });
    this.stack = null;
    this.payload = null;
  }

  /** Titles of the three pictures from the payload's pair [[l1, h1], [l2, h2]]. */
  titles() {
    const pair = this.payload?.pair || [];
    if (pair.length !== 2) return ["", "", ""];
    const a = `L${pair[0][0]}H${pair[0][1]}`;
    const b = `L${pair[1][0]}H${pair[1][1]}`;
    return [a, b, `virtual ${b}·${a}`];
  }

  hint(text, cls = "cw-hint") {
    this.stack = null;
    this.el.replaceChildren(h("div", { class: cls, text }));
  }

  /** Draw `payload` (pair_patterns) for the pair `want` the user selected. */
  update({ payload, want, standalone, theme, width }) {
    this.payload = payload;
    if (want.length !== 2)
      return this.hint(
        "Click an edge to see both heads' attention patterns, their virtual head " +
          "(the later pattern times the earlier one) and the circuit term the edge builds.",
        "cw-hint cw-pair-hint",
      );
    if (payload?.reason === "no tokens")
      return this.hint("Pass prompt= or tokens= to CompositionDiagram to see the selected pair's patterns and their virtual head.");
    if (JSON.stringify(payload?.pair) !== JSON.stringify(want) || !hasData(payload)) {
      return this.hint(
        standalone
          ? "this page holds only the pair selected when it was saved (no kernel to compute others)"
          : "computing the pair's patterns…",
      );
    }
    try {
      this.stack = new CodeStack(payload);
    } catch (err) {
      return this.hint(`could not read the pair's patterns: ${err.message}`, "cw-error");
    }
    const stack = this.stack;
    const labels = payload.labels || [];
    // the codes are positions on the colour scale (payload `scale`): one table; a legend per scale
    const lut = makeScale("sequential", { dark: theme.dark }).lut(stack);
    const scaleOf = (i) => {
      const c = colorScaleOf(payload.scale, i);
      return makeScale("sequential", { dark: theme.dark, ticks: c.ticks, caption: c.caption });
    };
    const perPanel = payload.scale?.kind === "auto"; // each pattern on its own range: each its own legend
    const titles = this.titles();
    const size = Math.max(120, Math.min(240, (width - 40) / 3 - 170));
    this.maps.forEach((m, i) => {
      m.update({
        rows: stack.rows,
        cols: stack.cols,
        paint: (pixels) => stack.paint(i, lut, pixels, 0),
        rowLabels: labels,
        colLabels: labels,
        // on small panels: the destinations and sources where this pattern is strongest (the hovered
        // cell's tokens show as chips)
        ...axisPriority(stack.rows, stack.cols, (r, c) => (stack.stored(r, c) ? stack.value(i, r, c) : Number.NaN)),
        title: titles[i],
        yTitle: "destination (query) ↓",
        xTitle: "source (key) →",
        scale: i === 2 || perPanel ? scaleOf(i) : null,
        theme,
        maxPlot: size,
      });
    });
    this.readout.textContent = HINT;
    const row = h(
      "div",
      { class: "cw-comp-pair-row" },
      this.maps.map((m) => m.el),
    );
    this.el.replaceChildren(
      h("div", { class: "cw-field-label", text: "Selected pair on the prompt: attention patterns and the virtual head" }),
      row,
      this.readout,
    );
  }

  hover(hit) {
    for (const m of this.maps) m.setHighlight(hit ? { row: hit.row, col: hit.col } : {});
    if (!hit || !this.stack) {
      this.readout.textContent = HINT;
      return;
    }
    const labels = this.payload.labels || [];
    const parts = this.titles().map((t, j) => `${t} ${formatValue(this.stack.value(j, hit.row, hit.col), 3)}`);
    const token = (i) => `${i} ${quote(labels[i] ?? i, 20)}`;
    this.readout.textContent = `destination (query) ${token(hit.row)} → source (key) ${token(hit.col)} · ${parts.join(" · ")} (≈, uint8)`;
  }

  destroy() {
    for (const m of this.maps) m.destroy();
    this.el.remove();
  }
}
