// The composition graph as a scene: heads as nodes in layer columns, pairs above the threshold as
// curved edges (earlier head -> later head), and a colour bar with the baseline and threshold
// marked. Edges and nodes carry data-* attributes, so the live SVG answers hover and click.

import { barY, colourBar } from "./heatmap-scene.js";
import { edgePath, edgeWidth, graphLayout, visibleEdges } from "./graph.js";
import { readableText, rgbOf } from "./scales.js";

export const MAX_EDGES = 600; // the graph draws at most this many edges (the strongest)
const LEGEND = ["nodes: heads (number = head index)", "edges: earlier head → later head"];
const LEGEND_CHAR_PX = 6; // an upper bound of a 10 px sans character's mean width

const samePair = (a, b) => !!a && !!b && a.l1 === b.l1 && a.h1 === b.h1 && a.l2 === b.l2 && a.h2 === b.h2;

/**
 * Baseline (dashed, optionally labelled) and threshold (a triangle) on a colour bar {x, y, h} of
 * `scale`. `baseline` is null when it is off the bar's domain.
 */
export function thresholdMarks(scale, bar, { baseline, threshold, theme, labelled = false }) {
  const { x } = bar;
  const ops = [];
  const [d0, d1] = scale.domain;
  if (baseline != null && baseline >= d0 && baseline <= d1) {
    const y = barY(scale.domain, bar, baseline);
    ops.push({
      type: "line",
      x1: x - 4,
      y1: y,
      x2: x + 16,
      y2: y,
      stroke: theme.fg,
      width: 1.5,
      dash: [3, 2],
      attrs: { class: "cw-baseline-mark" },
    });
    if (labelled)
      ops.push({
        type: "text",
        x: x - 6,
        y,
        text: "baseline",
        font: `10px ${theme.font}`,
        color: theme.fg,
        align: "right",
        baseline: "middle",
      });
  }
  const y = barY(scale.domain, bar, threshold);
  ops.push({ type: "path", d: `M ${x - 1} ${+y.toFixed(2)} l -6 -4 l 0 8 z`, fill: theme.accent, attrs: { class: "cw-threshold-mark" } });
  return ops;
}

/**
 * spec: {values, k, L, H, layerLabels, kind, corrected, threshold, offset, baseline, scale, theme,
 * selected: {l, h}, pair: {l1, h1, l2, h2} | null, hover, maxWidth, title?}. Scores shown are raw - offset.
 * Returns {scene, shown, passing}: edges drawn, and how many passed the threshold.
 */
export function graphScene(spec) {
  const { values, k, L, H, layerLabels, kind, corrected, threshold, offset, scale, theme, selected, pair, hover } = spec;
  const lay = graphLayout({ layers: L, heads: H, maxWidth: spec.maxWidth });
  const { edges, passing } = visibleEdges(values, k, L, H, threshold, offset, MAX_EDGES);
  const font = (px, weight = "") => `${weight}${px}px ${theme.font}`;
  const ops = [
    {
      type: "text",
      x: 6,
      y: 15,
      text: spec.title ?? `${kind}-composition${corrected ? " (minus baseline)" : ""}`,
      font: font(12, "600 "),
      color: theme.fg,
    },
  ];
  layerLabels.forEach((name, l) => {
    ops.push({
      type: "text",
      x: lay.left + l * lay.colW,
      y: lay.top - 10,
      text: `layer ${name}`,
      font: font(11),
      color: theme.muted,
      align: "center",
    });
  });
  ops.push({ type: "group", ops: edgeOps(edges, lay, { H, threshold, scale, theme, pair, hover }), attrs: { class: "cw-edges" } });
  ops.push({ type: "group", ops: nodeOps(lay, { theme, selected, pair }), attrs: { class: "cw-nodes" } });
  const bar = { x: lay.plotRight + lay.radius + 64, y: lay.top, h: Math.min(220, Math.max(100, lay.height - lay.top - 30)) };
  // the legend on one line when it fits the picture's width, else on two (never cut)
  const legend = LEGEND.join(" · ");
  const lines = legend.length * LEGEND_CHAR_PX <= lay.width - 12 ? [legend] : LEGEND;
  if (lines.length > 1) lay.height += 13 * (lines.length - 1);
  lines.forEach((text, i) => {
    ops.push({ type: "text", x: 6, y: lay.height - 6 - 13 * (lines.length - 1 - i), text, font: font(10), color: theme.muted });
  });
  ops.push(...colourBar(scale, bar, theme, { size: 10 }));
  ops.push(...thresholdMarks(scale, bar, { baseline: spec.baseline, threshold, theme, labelled: true }));
  return { scene: { width: lay.width, height: lay.height, ops }, shown: edges.length, passing };
}

/** The edges' paths (under each, a wider invisible one that catches the pointer), the selected and hovered edge marked. */
function edgeOps(edges, lay, { H, threshold, scale, theme, pair, hover }) {
  const at = (l, hd) => lay.nodes[l * H + hd];
  const ops = [];
  for (const e of edges) {
    const a = at(e.l1, e.h1);
    const b = at(e.l2, e.h2);
    const d = edgePath(a.x + lay.radius, a.y, b.x - lay.radius, b.y);
    const width = edgeWidth(e.value, threshold, scale.domain[1]);
    const id = `${e.l1},${e.h1},${e.l2},${e.h2}`;
    const isSel = samePair(e, pair);
    if (isSel || (hover?.type === "edge" && samePair(e, hover))) {
      ops.push({
        type: "path",
        d,
        stroke: theme.accent,
        width: width + 4,
        alpha: isSel ? 0.9 : 0.5,
        attrs: { "pointer-events": "none" },
      });
    }
    const attrs = { class: "cw-edge", "data-edge": id, "data-value": e.value, "data-raw": e.raw, "pointer-events": "none" };
    ops.push({ type: "path", d, stroke: scale.css(e.value), width, cap: "round", alpha: 0.9, attrs });
    // a wider invisible stroke makes thin edges easy to hover and click
    ops.push({
      type: "path",
      d,
      stroke: "transparent",
      width: Math.max(8, width + 4),
      attrs: { class: "cw-edge-hit", "data-edge": id, "pointer-events": "stroke" },
    });
  }
  return ops;
}

/** The heads as circles numbered with their index (when there is room), the selected one and the pair's marked. */
function nodeOps(lay, { theme, selected, pair }) {
  const font = (px) => `${px}px ${theme.font}`;
  return lay.nodes.map((n) => {
    const isSel = n.l === selected.l && n.h === selected.h;
    const inPair = !!pair && ((n.l === pair.l1 && n.h === pair.h1) || (n.l === pair.l2 && n.h === pair.h2));
    const circle = {
      type: "circle",
      x: n.x,
      y: n.y,
      r: lay.radius,
      fill: inPair ? theme.accent : theme.bgCss,
      stroke: isSel ? theme.accent : theme.muted,
      width: isSel ? 3 : 1.2,
    };
    const label = {
      type: "text",
      x: n.x,
      y: n.y + 0.5,
      text: String(n.h),
      font: font(Math.round(lay.radius * 1.1)),
      color: inPair ? readableText(rgbOf(theme.accent)) : theme.fg,
      align: "center",
      baseline: "middle",
      attrs: { "pointer-events": "none" },
    };
    return {
      type: "group",
      ops: lay.radius >= 7 ? [circle, label] : [circle],
      attrs: { class: "cw-node", "data-node": `${n.l},${n.h}`, cursor: "pointer" },
    };
  });
}

/** What a pointer event's target in the live graph is: {type: "edge", l1, h1, l2, h2}, {type: "node", l, h} or null. */
export function graphTarget(el) {
  const edge = el?.closest?.("[data-edge]");
  if (edge) {
    const [l1, h1, l2, h2] = edge.dataset.edge.split(",").map(Number);
    return { type: "edge", l1, h1, l2, h2 };
  }
  const node = el?.closest?.("[data-node]");
  if (!node) return null;
  const [l, h] = node.dataset.node.split(",").map(Number);
  return { type: "node", l, h };
}
