// Pure helpers of the composition graph and the score grids: node layout, which edges pass a
// threshold, edge widths, flattened (layer, head) indices, colour-domain choice. No DOM here.

/** Score of pair (l1, h1) -> (l2, h2) of kind k in a flat float32 [K, L, H, L, H] array. */
export function pairIndex(k, l1, h1, l2, h2, L, H) {
  return (((k * L + l1) * H + h1) * L + l2) * H + h2;
}

/**
 * Node positions of heads in layer columns. layers: number of attention layers; heads per layer.
 * Returns {nodes: [{l, h, x, y}], width, height, radius, colW, rowH, left, top, plotRight}.
 */
export function graphLayout({ layers, heads, maxWidth = 760, legendPx = 150 }) {
  if (!(layers > 0 && heads > 0)) throw new RangeError(`graph needs layers, heads > 0; got ${layers} x ${heads}`);
  const left = 44;
  const top = 42;
  const span = Math.max(1, layers - 1);
  const colW = Math.max(56, Math.min(240, (maxWidth - left - legendPx - 24) / span));
  const rowH = Math.max(12, Math.min(30, 380 / heads));
  const radius = Math.max(4, Math.min(10, rowH * 0.36));
  const nodes = [];
  for (let l = 0; l < layers; l++) {
    for (let h = 0; h < heads; h++) nodes.push({ l, h, x: left + l * colW, y: top + (h + 0.5) * rowH });
  }
  const plotRight = left + (layers - 1) * colW;
  return {
    nodes,
    radius,
    colW,
    rowH,
    left,
    top,
    plotRight,
    width: Math.ceil(plotRight + radius + legendPx),
    height: Math.ceil(top + heads * rowH + 30),
  };
}

/**
 * Pairs of kind k whose shown score (raw - offset) is >= threshold, weakest first (so the
 * strongest are drawn on top), at most `limit` of them (the strongest kept).
 * Returns {edges: [{l1, h1, l2, h2, value, raw}], passing} with `passing` the count before the limit.
 */
export function visibleEdges(values, k, L, H, threshold, offset = 0, limit = Infinity) {
  const edges = [];
  for (let l1 = 0; l1 < L; l1++) {
    for (let h1 = 0; h1 < H; h1++) {
      for (let l2 = l1 + 1; l2 < L; l2++) {
        for (let h2 = 0; h2 < H; h2++) {
          const raw = values[pairIndex(k, l1, h1, l2, h2, L, H)];
          if (!Number.isFinite(raw)) continue;
          const value = raw - offset;
          if (value >= threshold) edges.push({ l1, h1, l2, h2, value, raw });
        }
      }
    }
  }
  edges.sort((a, b) => a.value - b.value);
  const passing = edges.length;
  return { edges: edges.length > limit ? edges.slice(edges.length - limit) : edges, passing };
}

/** Finite min and max of kind k's scores (null when it has none). */
export function scoreRange(values, k, L, H) {
  const n = L * H * L * H;
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = k * n; i < (k + 1) * n; i++) {
    const v = values[i];
    if (Number.isFinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return hi >= lo ? [lo, hi] : null;
}

/**
 * Colour domain in raw units for composition scores: from 0 to a little above the strongest
 * pair, and never below 1.5x the baseline (so a model with nothing above baseline looks flat).
 */
export function rawDomain(range, baseline) {
  const top = Math.max(range ? range[1] : 0, 1.5 * baseline, 1e-6);
  return [0, Math.min(1, top * 1.05)];
}

/** Stroke width of an edge: 1 px at the threshold, up to `max` px at the top of the domain. */
export function edgeWidth(value, threshold, top, max = 7) {
  if (!(top > threshold)) return 2;
  const t = Math.max(0, Math.min(1, (value - threshold) / (top - threshold)));
  return 1 + t * (max - 1);
}

/** A cubic curve from (x1, y1) to (x2, y2), leaving and entering horizontally. */
export function edgePath(x1, y1, x2, y2) {
  const c = (x2 - x1) * 0.5;
  const f = (v) => +v.toFixed(2);
  return `M ${f(x1)} ${f(y1)} C ${f(x1 + c)} ${f(y1)} ${f(x2 - c)} ${f(y2)} ${f(x2)} ${f(y2)}`;
}

/** Threshold after switching between raw and baseline-corrected units, so the same edges stay. */
export function shiftThreshold(threshold, baseline, toCorrected) {
  const next = toCorrected ? threshold - baseline : threshold + baseline;
  return Math.max(-1, Math.min(1, +next.toFixed(6)));
}

/** Heads of layers [from, to) flattened in (layer, head) order: [{l, h}] and "L{layer}H{h}" labels. */
export function flatHeads(layerLabels, H, from = 0, to = layerLabels.length) {
  const heads = [];
  for (let l = from; l < to; l++) for (let h = 0; h < H; h++) heads.push({ l, h, label: `L${layerLabels[l]}H${h}` });
  return heads;
}

/** Step of a slider over [lo, hi]: about 400 steps, rounded to 1, 2 or 5 times a power of ten. */
export function sliderStep(lo, hi) {
  const raw = (hi - lo) / 400;
  if (!(raw > 0)) return 0.001;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
}
