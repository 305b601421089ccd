// Complex-plane scatter (eigenvalue spectra) and small helpers to compose several pictures into
// one PNG / SVG. The plane is a "scene" (a list of drawing operations) built by a pure function,
// so the same picture goes to a canvas and to SVG, and node --test can check the geometry.

const xml = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const num = (v) => +v.toFixed(2);

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
 * Drawing operations for a complex-plane scatter of `points` ([[re, im], ...]), each divided by
 * the largest modulus so the spectrum fills the unit disc whatever its scale; the unit circle
 * and both axes are drawn. spec: {points, size, theme, title}. Returns {ops, width, height,
 * scale, toPx(re, im), dots: [{x, y, i}]} (dots in CSS px, for hover).
 */
export function planeScene({ points, size = 240, theme, title = "" }) {
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
  const ops = [];
  if (title) ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  const half = plot / 2;
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
    ops.push({ type: "dot", x, y, r: 3.2, fill: re >= 0 ? theme.accent : theme.fg, alpha: 0.75 });
  });
  return { ops, width, height, scale, toPx, dots, unit, cx, cy };
}

/** The dot nearest CSS-px point (x, y) within `radius`, or null. */
export function nearestDot(scene, x, y, radius = 7) {
  let best = null;
  let bestD = radius;
  for (const d of scene.dots) {
    const dist = Math.hypot(d.x - x, d.y - y);
    if (dist <= bestD) {
      bestD = dist;
      best = d;
    }
  }
  return best;
}

/** Draw a plane scene onto a 2D context (CSS-px coordinates). */
export function drawPlane(ctx, scene) {
  for (const op of scene.ops) {
    ctx.save();
    if (op.type === "line") {
      ctx.strokeStyle = op.stroke;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(op.x1, op.y1);
      ctx.lineTo(op.x2, op.y2);
      ctx.stroke();
    } else if (op.type === "circle") {
      ctx.strokeStyle = op.stroke;
      ctx.lineWidth = 1;
      if (op.dash) ctx.setLineDash(op.dash);
      ctx.beginPath();
      ctx.arc(op.x, op.y, op.r, 0, 2 * Math.PI);
      ctx.stroke();
    } else if (op.type === "dot") {
      ctx.globalAlpha = op.alpha ?? 1;
      ctx.fillStyle = op.fill;
      ctx.beginPath();
      ctx.arc(op.x, op.y, op.r, 0, 2 * Math.PI);
      ctx.fill();
    } else if (op.type === "text" && op.text) {
      ctx.font = op.font;
      ctx.fillStyle = op.color;
      ctx.textAlign = op.align || "left";
      ctx.fillText(op.text, op.x, op.y);
    }
    ctx.restore();
  }
}

/** The plane scene as a standalone SVG document. */
export function planeToSVG(scene, theme) {
  const anchor = { left: "start", right: "end", center: "middle" };
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${scene.width}" height="${scene.height}" viewBox="0 0 ${scene.width} ${scene.height}">`];
  parts.push(`<rect width="100%" height="100%" fill="${xml(theme.bgCss)}"/>`);
  for (const op of scene.ops) {
    if (op.type === "line") {
      parts.push(`<line x1="${num(op.x1)}" y1="${num(op.y1)}" x2="${num(op.x2)}" y2="${num(op.y2)}" stroke="${xml(op.stroke)}"/>`);
    } else if (op.type === "circle") {
      const dash = op.dash ? ` stroke-dasharray="${op.dash.join(" ")}"` : "";
      parts.push(`<circle cx="${num(op.x)}" cy="${num(op.y)}" r="${num(op.r)}" fill="none" stroke="${xml(op.stroke)}"${dash}/>`);
    } else if (op.type === "dot") {
      parts.push(`<circle cx="${num(op.x)}" cy="${num(op.y)}" r="${op.r}" fill="${xml(op.fill)}" fill-opacity="${op.alpha ?? 1}"/>`);
    } else if (op.type === "text" && op.text) {
      const [size, ...family] = op.font.replace(/^600 /, "").split(" ");
      const weight = op.font.startsWith("600 ") ? ' font-weight="600"' : "";
      parts.push(`<text x="${num(op.x)}" y="${num(op.y)}" font-size="${parseFloat(size)}" font-family="${xml(family.join(" "))}"${weight} fill="${xml(op.color)}" text-anchor="${anchor[op.align || "left"]}">${xml(op.text)}</text>`);
    }
  }
  parts.push("</svg>");
  return parts.join("\n");
}

/** A canvas (device px = CSS px * dpr) holding `pictures` side by side, `gap` CSS px apart, on `bg`. */
export function composeCanvases(pictures, bg, gap = 16) {
  const dpr = globalThis.devicePixelRatio || 1;
  const width = pictures.reduce((w, c) => w + c.width, 0) + Math.round(gap * dpr) * Math.max(0, pictures.length - 1);
  const height = pictures.reduce((m, c) => Math.max(m, c.height), 0);
  const out = document.createElement("canvas");
  out.width = Math.max(1, width);
  out.height = Math.max(1, height);
  const ctx = out.getContext("2d");
  ctx.fillStyle = bg;
  ctx.fillRect(0, 0, out.width, out.height);
  let x = 0;
  for (const c of pictures) {
    ctx.drawImage(c, x, 0);
    x += c.width + Math.round(gap * dpr);
  }
  return out;
}

/** Size of a standalone SVG document string (its width/height attributes). */
export function svgSize(svg) {
  const w = /<svg[^>]*\swidth="([\d.]+)"/.exec(svg);
  const h = /<svg[^>]*\sheight="([\d.]+)"/.exec(svg);
  return { width: w ? +w[1] : 0, height: h ? +h[1] : 0 };
}

/** One SVG document with the standalone SVGs `parts` side by side, `gap` px apart. */
export function composeSVG(parts, bg, gap = 16) {
  const sizes = parts.map(svgSize);
  const width = sizes.reduce((w, s) => w + s.width, 0) + gap * Math.max(0, parts.length - 1);
  const height = sizes.reduce((m, s) => Math.max(m, s.height), 0);
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  out.push(`<rect width="100%" height="100%" fill="${xml(bg)}"/>`);
  let x = 0;
  parts.forEach((svg, i) => {
    out.push(svg.replace('<svg xmlns="http://www.w3.org/2000/svg"', `<svg x="${x}" y="0"`));
    x += sizes[i].width + gap;
  });
  out.push("</svg>");
  return out.join("\n");
}
