// One drawing vocabulary for every picture: a scene is {width, height, ops} in CSS px, built by pure
// functions and rendered to a canvas (screen, PNG) or to SVG (export text, or live DOM for the
// composition graph). So what is saved is what is shown, and node --test can read a picture.
//
// ops (every field but `type` and the geometry optional):
//   text   {x, y, text, font: "[600 ]11px family", color, align: left|right|center, baseline: middle, rotate}
//   line   {x1, y1, x2, y2, stroke, width, dash}
//   rect   {x, y, w, h, fill, stroke, width, alpha}
//   circle {x, y, r, fill, stroke, width, dash, alpha}
//   path   {d, fill, stroke, width, alpha, cap}
//   bar    {x, y, w, h, stops: [[t, css]], stroke}        vertical gradient, t = 0 at the top
//   image  {x, y, w, h, source, smooth, cells}             source: a canvas (SVG: its PNG data URL);
//                                                          cells: each source pixel is a heatmap cell
//   group  {x, y, rotate, ops}                             ops translated by (x, y), then rotated
// `attrs` on an op become attributes of its SVG element (class, data-*, pointer-events).

const SVG_NS = "http://www.w3.org/2000/svg";
const ANCHOR = { left: "start", right: "end", center: "middle" };
const num = (v) => +Number(v).toFixed(2);
let gradients = 0; // gradient ids stay unique on a page holding several widgets

/** Size and family of a canvas font string "[600 ]11px family". */
function parseFont(font) {
  const m = /^(?:(\d{3}|bold) )?([\d.]+)px (.*)$/.exec(font || "");
  return m ? { weight: m[1], size: +m[2], family: m[3] } : { size: 11, family: "sans-serif" };
}

// ----- canvas -----------------------------------------------------------------------------

/** Draw `scene` (or a list of ops) onto a 2D context whose transform maps CSS px. */
export function drawScene(ctx, scene) {
  for (const op of scene.ops || scene) {
    ctx.save();
    if (op.alpha != null) ctx.globalAlpha = op.alpha;
    ctx.lineWidth = op.width ?? 1;
    if (op.dash) ctx.setLineDash(op.dash);
    if (op.type === "group") {
      ctx.translate(op.x || 0, op.y || 0);
      if (op.rotate) ctx.rotate(op.rotate);
      drawScene(ctx, op.ops);
    } else if (op.type === "text" && op.text) {
      ctx.font = op.font;
      ctx.fillStyle = op.color;
      ctx.textAlign = op.align || "left";
      ctx.textBaseline = op.baseline || "alphabetic";
      ctx.translate(op.x, op.y);
      if (op.rotate) ctx.rotate(op.rotate);
      ctx.fillText(op.text, 0, 0);
    } else if (op.type === "image") {
      // Upscaling: crisp blocks. Downscaling: let the browser average, thin stripes stay visible.
      ctx.imageSmoothingEnabled = !!op.smooth;
      if (op.smooth) ctx.imageSmoothingQuality = "high";
      if (op.source) ctx.drawImage(op.source, op.x, op.y, op.w, op.h);
    } else if (op.type === "bar") {
      const grad = ctx.createLinearGradient(0, op.y, 0, op.y + op.h);
      for (const [t, css] of op.stops) grad.addColorStop(t, css);
      ctx.fillStyle = grad;
      ctx.fillRect(op.x, op.y, op.w, op.h);
      ctx.strokeStyle = op.stroke;
      ctx.strokeRect(op.x - 0.5, op.y - 0.5, op.w + 1, op.h + 1);
    } else {
      const path = shapePath(op);
      if (op.fill) {
        ctx.fillStyle = op.fill;
        ctx.fill(path);
      }
      if (op.stroke) {
        ctx.strokeStyle = op.stroke;
        ctx.lineCap = op.cap || "butt";
        ctx.stroke(path);
      }
    }
    ctx.restore();
  }
}

function shapePath(op) {
  if (op.type === "path") return new Path2D(op.d);
  const p = new Path2D();
  if (op.type === "line") {
    p.moveTo(op.x1, op.y1);
    p.lineTo(op.x2, op.y2);
  } else if (op.type === "rect") {
    p.rect(op.x, op.y, op.w, op.h);
  } else if (op.type === "circle") {
    p.arc(op.x, op.y, op.r, 0, 2 * Math.PI);
  }
  return p;
}

/** Size `canvas` to `scene` at the device pixel ratio and draw it there. */
export function paintCanvas(canvas, scene) {
  const dpr = globalThis.devicePixelRatio || 1;
  const w = Math.round(scene.width * dpr);
  const h = Math.round(scene.height * dpr);
  if (canvas.width !== w || canvas.height !== h) {
    canvas.width = w;
    canvas.height = h;
    canvas.style.width = `${scene.width}px`;
    canvas.style.height = `${scene.height}px`;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, scene.width, scene.height);
  drawScene(ctx, scene);
  return ctx;
}

/** A new canvas holding `scene` on `background`, `scale` device px per CSS px (for PNG). */
export function sceneCanvas(scene, background, scale = globalThis.devicePixelRatio || 1) {
  const out = document.createElement("canvas");
  out.width = Math.max(1, Math.round(scene.width * scale));
  out.height = Math.max(1, Math.round(scene.height * scale));
  const ctx = out.getContext("2d");
  ctx.fillStyle = background;
  ctx.fillRect(0, 0, out.width, out.height);
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  drawScene(ctx, scene);
  return out;
}

// ----- SVG --------------------------------------------------------------------------------
//
// Heatmap cells in SVG (an image op with `cells`), the rule:
//   - up to SVG_VECTOR_CELLS = 128 x 128 = 16 384 cells: vector <rect> elements, one per run of
//     equal cells in a row (exact colours, any zoom, editable in a vector editor);
//   - above that: one PNG <image> at SVG_RASTER_SCALE = 2x the plot's size (what the PNG export
//     draws), since tens of thousands of rects make a file of megabytes that editors choke on.

export const SVG_VECTOR_CELLS = 128 * 128;
export const SVG_RASTER_SCALE = 2;
/** The rule above, in words (the SVG button's title says it). */
export const SVG_CELLS_RULE = "heatmap cells as vector rectangles up to 128 × 128 = 16 384 cells; above that one PNG image at 2×";

const hex2 = (v) => v.toString(16).padStart(2, "0");

/** The cells of image op `op` as a <g> of <rect>s: equal neighbours in a row merge into one. */
function cellRects(op) {
  const { width: cols, height: rows } = op.source;
  const data = op.source.getContext("2d").getImageData(0, 0, cols, rows).data;
  const cw = op.w / cols;
  const ch = op.h / rows;
  const children = [];
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; ) {
      const i = (r * cols + c) * 4;
      let end = c + 1;
      while (
        end < cols &&
        data[i] === data[(r * cols + end) * 4] &&
        data[i + 1] === data[(r * cols + end) * 4 + 1] &&
        data[i + 2] === data[(r * cols + end) * 4 + 2] &&
        data[i + 3] === data[(r * cols + end) * 4 + 3]
      )
        end++;
      const a = data[i + 3];
      if (a > 0) {
        const fill = `#${hex2(data[i])}${hex2(data[i + 1])}${hex2(data[i + 2])}`;
        const x = num(op.x + c * cw);
        const y = num(op.y + r * ch);
        const attrs = {
          x,
          y,
          width: num(op.x + end * cw - x),
          height: num(op.y + (r + 1) * ch - y),
          fill,
          "fill-opacity": a < 255 ? num(a / 255) : undefined,
        };
        children.push({ tag: "rect", attrs });
      }
      c = end;
    }
  }
  return { tag: "g", attrs: { class: "cw-cells", "shape-rendering": "crispEdges", "data-cells": `${rows}x${cols}` }, children };
}

/** The PNG data URL of image op `op` drawn at `scale` x its size (same smoothing as the canvas). */
function rasterURL(op, scale) {
  const out = document.createElement("canvas");
  out.width = Math.max(1, Math.round(op.w * scale));
  out.height = Math.max(1, Math.round(op.h * scale));
  const ctx = out.getContext("2d");
  ctx.imageSmoothingEnabled = !!op.smooth;
  if (op.smooth) ctx.imageSmoothingQuality = "high";
  ctx.drawImage(op.source, 0, 0, out.width, out.height);
  return out.toDataURL("image/png");
}

const paint = (op) => ({
  fill: op.fill || "none",
  stroke: op.stroke,
  "stroke-width": op.stroke && op.width != null && op.width !== 1 ? op.width : undefined,
  "stroke-dasharray": op.dash ? op.dash.join(" ") : undefined,
  "stroke-linecap": op.cap,
  opacity: op.alpha,
});

/** One op as an SVG node {tag, attrs, text?, children?}; `defs` collects gradients. */
function svgNode(op, defs) {
  let node;
  if (op.type === "group") {
    const rotate = op.rotate ? ` rotate(${num((op.rotate * 180) / Math.PI)})` : "";
    node = {
      tag: "g",
      attrs: { transform: `translate(${num(op.x || 0)} ${num(op.y || 0)})${rotate}` },
      children: op.ops.map((o) => svgNode(o, defs)),
    };
  } else if (op.type === "text") {
    const f = parseFont(op.font);
    const rotate = op.rotate ? `rotate(${num((op.rotate * 180) / Math.PI)} ${num(op.x)} ${num(op.y)})` : undefined;
    const attrs = {
      x: num(op.x),
      y: num(op.y),
      "font-size": f.size,
      "font-family": f.family,
      "font-weight": f.weight,
      fill: op.color,
      "text-anchor": ANCHOR[op.align || "left"],
    };
    node = {
      tag: "text",
      attrs: { ...attrs, "dominant-baseline": op.baseline === "middle" ? "central" : undefined, transform: rotate },
      text: op.text,
    };
  } else if (op.type === "line") {
    node = { tag: "line", attrs: { x1: num(op.x1), y1: num(op.y1), x2: num(op.x2), y2: num(op.y2), ...paint(op) } };
  } else if (op.type === "rect") {
    node = { tag: "rect", attrs: { x: num(op.x), y: num(op.y), width: num(op.w), height: num(op.h), ...paint(op) } };
  } else if (op.type === "circle") {
    node = { tag: "circle", attrs: { cx: num(op.x), cy: num(op.y), r: num(op.r), ...paint(op) } };
  } else if (op.type === "path") {
    node = { tag: "path", attrs: { d: op.d, ...paint(op) } };
  } else if (op.type === "bar") {
    const id = `cw-grad-${++gradients}`;
    defs.push({
      tag: "linearGradient",
      attrs: { id, x1: 0, y1: 0, x2: 0, y2: 1 },
      children: op.stops.map(([t, css]) => ({ tag: "stop", attrs: { offset: num(t), "stop-color": css } })),
    });
    node = {
      tag: "rect",
      attrs: { x: num(op.x), y: num(op.y), width: num(op.w), height: num(op.h), fill: `url(#${id})`, stroke: op.stroke },
    };
  } else if (op.type === "image" && op.cells && op.source && op.source.width * op.source.height <= SVG_VECTOR_CELLS) {
    node = cellRects(op);
  } else if (op.type === "image") {
    const href = !op.source ? "" : op.cells ? rasterURL(op, SVG_RASTER_SCALE) : op.source.toDataURL("image/png");
    node = {
      tag: "image",
      attrs: {
        x: num(op.x),
        y: num(op.y),
        width: num(op.w),
        height: num(op.h),
        preserveAspectRatio: "none",
        style: op.smooth ? undefined : "image-rendering:pixelated",
        href,
      },
    };
    if (op.cells && op.source) node.attrs["data-cells"] = `${op.source.height}x${op.source.width}`;
  } else {
    throw new TypeError(`unknown scene op ${op.type}`);
  }
  if (op.attrs) Object.assign(node.attrs, op.attrs);
  return node;
}

/** The scene as an SVG node tree (root <svg>), on `background` when given. */
export function svgTree(scene, { background, attrs = {} } = {}) {
  const defs = [];
  const children = scene.ops.map((op) => svgNode(op, defs));
  if (defs.length) children.unshift({ tag: "defs", attrs: {}, children: defs });
  if (background) children.unshift({ tag: "rect", attrs: { width: "100%", height: "100%", fill: background } });
  const { width, height } = scene;
  return { tag: "svg", attrs: { xmlns: SVG_NS, width, height, viewBox: `0 0 ${width} ${height}`, ...attrs }, children };
}

const xml = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

/** An SVG node tree as markup; every attribute and text escaped. */
export function svgText(node) {
  const attrs = Object.entries(node.attrs || {})
    .filter(([, v]) => v != null)
    .map(([k, v]) => ` ${k}="${xml(v)}"`)
    .join("");
  const inner = node.children?.length ? `\n${node.children.map(svgText).join("\n")}\n` : node.text != null ? xml(node.text) : "";
  return inner ? `<${node.tag}${attrs}>${inner}</${node.tag}>` : `<${node.tag}${attrs}/>`;
}

/** An SVG node tree as live DOM elements (text through textContent only). */
export function svgElement(node) {
  const el = document.createElementNS(SVG_NS, node.tag);
  for (const [k, v] of Object.entries(node.attrs || {})) if (v != null) el.setAttribute(k, String(v));
  if (node.children) el.append(...node.children.map(svgElement));
  else if (node.text != null) el.textContent = String(node.text);
  return el;
}

/** The scene as a standalone SVG document on `background`. */
export function sceneToSVG(scene, background) {
  return svgText(svgTree(scene, { background }));
}

/** Scenes side by side, `gap` px apart, top-aligned, as one scene. */
export function composeScenes(scenes, gap = 16) {
  const ops = [];
  let x = 0;
  for (const s of scenes) {
    ops.push({ type: "group", x, y: 0, ops: s.ops });
    x += s.width + gap;
  }
  return { width: Math.max(0, x - gap), height: Math.max(0, ...scenes.map((s) => s.height)), ops };
}

/** The dot of a scene's `dots` ([{x, y, …}]: a scatter's) nearest CSS-px point (x, y) within `radius` px, or null. */
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
