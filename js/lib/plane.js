// Complex-plane scatter (eigenvalue spectra) as a scene (its dots are hit-tested by scene.js nearestDot).

/** Largest |z| of points [[re, im], ...] that are finite (0 when there are none). */
export function maxModulus(points) {
  let m = 0;
  for (const [re, im] of points) {
    const r = Math.hypot(re, im);
    if (Number.isFinite(r) && r > m) m = r;
  }
  return m;
}

/**
 * The scene of a complex-plane scatter of `points` ([[re, im], ...]), each divided by the largest
 * modulus so the spectrum fills the unit disc whatever its scale; the unit circle and both axes
 * are drawn, and a ring around dot `ring` (an index) when given. spec: {points, size, theme, title, ring}.
 * Returns {width, height, ops, scale, toPx(re, im), dots: [{x, y, i}], unit, cx, cy}.
 */
export function planeScene({ points, size = 240, theme, title = "", ring = null }) {
  const pad = 26;
  const top = title ? 24 : 6;
  const width = size;
  const height = size + top - 6;
  const plot = size - 2 * pad;
  const cx = pad + plot / 2;
  const cy = top + pad - 6 + plot / 2;
  const extent = 1.15; // the unit circle leaves a margin for labels
  const unit = plot / 2 / extent;
  const scale = maxModulus(points) || 1;
  const toPx = (re, im) => [cx + (re / scale) * unit, cy - (im / scale) * unit];
  const small = `11px ${theme.font}`;
  const half = plot / 2;
  const ops = [];
  if (title) ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  ops.push({ type: "line", x1: cx - half, y1: cy, x2: cx + half, y2: cy, stroke: theme.border });
  ops.push({ type: "line", x1: cx, y1: cy - half, x2: cx, y2: cy + half, stroke: theme.border });
  ops.push({ type: "circle", x: cx, y: cy, r: unit, stroke: theme.muted, dash: [4, 3] });
  ops.push({ type: "text", x: cx + unit - 3, y: cy - 4, text: "1", font: small, color: theme.muted, align: "right" });
  ops.push({ type: "text", x: cx - unit + 3, y: cy - 4, text: "−1", font: small, color: theme.muted, align: "left" });
  ops.push({ type: "text", x: cx + half, y: cy + 13, text: "Re", font: small, color: theme.muted, align: "right" });
  ops.push({ type: "text", x: cx + 4, y: cy - half + 9, text: "Im", font: small, color: theme.muted, align: "left" });
  const dots = [];
  points.forEach(([re, im], i) => {
    if (!Number.isFinite(re) || !Number.isFinite(im)) return;
    const [x, y] = toPx(re, im);
    dots.push({ x, y, i });
    ops.push({ type: "circle", x, y, r: 3.2, fill: re >= 0 ? theme.accent : theme.fg, alpha: 0.75 });
  });
  const ringed = dots.find((d) => d.i === ring);
  if (ringed) ops.push({ type: "circle", x: ringed.x, y: ringed.y, r: 6, stroke: theme.fg, width: 1.5 });
  return { width, height, ops, scale, toPx, dots, unit, cx, cy };
}
