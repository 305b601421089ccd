// circuitwidgets js bundle, built by js/build.mjs with esbuild 0.28.2; do not edit. sources-sha256: 35b04bf8e9654fea7ba84e3c9a80667dbe0645400fa73f8c69718d39510955fc
var __defProp = Object.defineProperty;
var __export = (target, all) => {
  for (var name in all)
    __defProp(target, name, { get: all[name], enumerable: true });
};

// js/views/attention.js
var attention_exports = {};
__export(attention_exports, {
  render: () => render
});

// js/lib/decode.js
var CODE_MAX = 254;
var NAN_CODE = 255;
function bytesOf(data) {
  if (data == null) return new Uint8Array(0);
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(`expected binary data (DataView, ArrayBuffer, typed array); got ${typeof data}`);
}
function float32Of(data) {
  const bytes = bytesOf(data);
  if (bytes.byteLength % 4) throw new RangeError(`float32 payload of ${bytes.byteLength} bytes is not a multiple of 4`);
  const n = bytes.byteLength / 4;
  if (bytes.byteOffset % 4 === 0) return new Float32Array(bytes.buffer, bytes.byteOffset, n);
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) out[i] = dv.getFloat32(4 * i, true);
  return out;
}
var product = (xs) => xs.reduce((a, b) => a * b, 1);
var CodeStack = class {
  constructor(data, meta) {
    if (!meta || meta.dtype !== "uint8") throw new TypeError(`expected a uint8 payload; got dtype ${meta && meta.dtype}`);
    const shape = meta.shape;
    if (!Array.isArray(shape) || shape.length < 2) throw new RangeError(`payload shape must have 2+ dims; got ${JSON.stringify(shape)}`);
    this.codes = bytesOf(data);
    this.shape = shape;
    this.rows = shape[shape.length - 2];
    this.cols = shape[shape.length - 1];
    this.count = product(shape.slice(0, -2));
    this.layout = meta.layout || "full";
    this.lo = meta.lo;
    this.hi = meta.hi;
    this.nanCode = meta.nan_code ?? NAN_CODE;
    this.step = (this.hi - this.lo) / CODE_MAX;
    if (this.layout === "tril" && this.rows !== this.cols) throw new RangeError("tril layout needs square matrices");
    this.perMatrix = this.layout === "tril" ? this.rows * (this.rows + 1) / 2 : this.rows * this.cols;
    const expected = this.count * this.perMatrix;
    if (this.codes.length !== expected) {
      throw new RangeError(`payload holds ${this.codes.length} bytes; shape ${JSON.stringify(shape)} (${this.layout}) needs ${expected}`);
    }
    this.zeroCode = Math.max(0, Math.min(CODE_MAX, Math.round(-this.lo / this.step)));
  }
  /** Offset in `codes` of row r of matrix m (its first stored cell). */
  rowStart(m, r) {
    const base = m * this.perMatrix;
    return this.layout === "tril" ? base + r * (r + 1) / 2 : base + r * this.cols;
  }
  /** Number of stored cells in row r (the rest of a tril row is above the diagonal). */
  rowLength(r) {
    return this.layout === "tril" ? r + 1 : this.cols;
  }
  /** True when cell (r, c) is stored (not above the diagonal of a tril payload). */
  stored(r, c) {
    return this.layout !== "tril" || c <= r;
  }
  code(m, r, c) {
    if (!this.stored(r, c)) return this.zeroCode;
    return this.codes[this.rowStart(m, r) + c];
  }
  valueOfCode(code) {
    return code === this.nanCode ? NaN : this.lo + code * this.step;
  }
  value(m, r, c) {
    return this.valueOfCode(this.code(m, r, c));
  }
  /** Values of row r of matrix m (length cols; zeros above a tril diagonal). */
  rowValues(m, r) {
    const out = new Float32Array(this.cols);
    const start = this.rowStart(m, r);
    const len = this.rowLength(r);
    for (let c = 0; c < this.cols; c++) out[c] = c < len ? this.valueOfCode(this.codes[start + c]) : 0;
    return out;
  }
  /** Values of column c of matrix m (length rows). */
  colValues(m, c) {
    const out = new Float32Array(this.rows);
    for (let r = 0; r < this.rows; r++) out[r] = this.value(m, r, c);
    return out;
  }
  /**
   * Paint matrix m into `pixels` (Uint32Array of rows*cols RGBA pixels) through `lut`
   * (Uint32Array(256), code -> pixel). Cells a tril payload leaves out get `emptyPixel`.
   */
  paint(m, lut, pixels, emptyPixel = 0) {
    const { rows, cols, codes } = this;
    if (pixels.length < rows * cols) throw new RangeError("pixel buffer too small");
    for (let r = 0; r < rows; r++) {
      const start = this.rowStart(m, r);
      const len = this.rowLength(r);
      const out = r * cols;
      for (let c = 0; c < len; c++) pixels[out + c] = lut[codes[start + c]];
      for (let c = len; c < cols; c++) pixels[out + c] = emptyPixel;
    }
  }
  /**
   * Shrink matrix m to outRows x outCols codes, keeping in each block the code furthest from
   * `centre` (default: the zero code), so a one-cell stripe stays visible in a thumbnail.
   * Blocks entirely above a tril diagonal come back as -1 (empty).
   */
  pool(m, outRows, outCols, centre = this.zeroCode) {
    const { rows, cols, codes } = this;
    const out = new Int16Array(outRows * outCols).fill(-1);
    const best = new Int16Array(outRows * outCols).fill(-1);
    const dist = new Int16Array(256);
    for (let code = 0; code < 256; code++) dist[code] = code === this.nanCode ? 0 : Math.abs(code - centre);
    const colBin = new Int32Array(cols);
    for (let c = 0; c < cols; c++) colBin[c] = Math.min(outCols - 1, Math.floor(c * outCols / cols));
    for (let r = 0; r < rows; r++) {
      const orow = Math.min(outRows - 1, Math.floor(r * outRows / rows)) * outCols;
      const start = this.rowStart(m, r);
      const len = this.rowLength(r);
      for (let c = 0; c < len; c++) {
        const code = codes[start + c];
        const i = orow + colBin[c];
        if (dist[code] > best[i]) {
          best[i] = dist[code];
          out[i] = code;
        }
      }
    }
    return out;
  }
};

// js/lib/controls.js
function h(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  const { class: cls, text, attrs, on, style, ...rest } = props;
  if (cls) node.className = cls;
  if (text != null) node.textContent = String(text);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) if (v != null && v !== false) node.setAttribute(k, v === true ? "" : String(v));
  }
  if (style) Object.assign(node.style, style);
  for (const [k, v] of Object.entries(rest)) if (v !== void 0) node[k] = v;
  if (on) for (const [evt, fn] of Object.entries(on)) node.addEventListener(evt, fn);
  for (const child of [].concat(children)) if (child != null) node.append(child);
  return node;
}
function throttle(fn, ms) {
  let last = 0;
  let timer = null;
  let pending = null;
  const fire = () => {
    timer = null;
    last = Date.now();
    const args = pending;
    pending = null;
    fn(...args);
  };
  const wrapped = (...args) => {
    pending = args;
    const wait = ms - (Date.now() - last);
    if (wait <= 0 && !timer) fire();
    else if (!timer) timer = setTimeout(fire, Math.max(0, wait));
  };
  wrapped.cancel = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    pending = null;
  };
  return wrapped;
}
function selectControl(label, onChange, { title } = {}) {
  const select = h("select", { class: "cw-select", attrs: { "aria-label": label, title } });
  select.addEventListener("change", () => onChange(Number(select.value)));
  const el = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: label }), select]);
  return {
    el,
    select,
    set(options, value) {
      const key = options.map((o) => `${o.value}:${o.label}`).join("|");
      if (select.dataset.options !== key) {
        select.replaceChildren(...options.map((o) => h("option", { value: String(o.value), text: o.label })));
        select.dataset.options = key;
      }
      select.value = String(value);
    },
    disable(off) {
      select.disabled = !!off;
    }
  };
}
function promptBox({ placeholder, debounceMs = 600, onSubmit, label = "prompt" }) {
  const area = h("textarea", { class: "cw-prompt", rows: 2, spellcheck: false, placeholder, attrs: { "aria-label": label } });
  let sent = null;
  let timer = null;
  const submit = () => {
    clearTimeout(timer);
    timer = null;
    if (area.value !== sent) {
      sent = area.value;
      onSubmit(area.value);
    }
  };
  area.addEventListener("keydown", (e) => {
    e.stopPropagation();
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  });
  area.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(submit, debounceMs);
  });
  return {
    el: area,
    /** Show `text` unless the user is typing in the box. */
    show(text) {
      if (document.activeElement === area && timer) return;
      area.value = text;
      sent = text;
    },
    readOnly(on, why) {
      area.readOnly = !!on;
      area.title = on ? why : "";
    },
    destroy() {
      clearTimeout(timer);
    }
  };
}
function button(text, title, onClick) {
  return h("button", { class: "cw-button", type: "button", text, title, attrs: { "aria-label": title }, on: { click: onClick } });
}
function errorBanner() {
  const el = h("div", { class: "cw-error", attrs: { role: "alert" } });
  el.hidden = true;
  return {
    el,
    show(message) {
      el.textContent = message || "";
      el.hidden = !message;
    }
  };
}

// js/lib/layout.js
var CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/g;
function displayToken(s) {
  const text = String(s).replace(/ /g, "␣").replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(CONTROL, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return text === "" ? "∅" : text;
}
function inlineToken(s) {
  const text = String(s).replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(CONTROL, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return text === "" ? "∅" : text;
}
function truncate(s, max) {
  const chars = Array.from(String(s));
  if (chars.length <= max) return chars.join("");
  return chars.slice(0, Math.max(1, max - 1)).join("") + "…";
}
var NICE = [1, 2, 5];
function labelStride(cellPx, minGapPx) {
  if (!(cellPx > 0)) throw new RangeError(`cellPx must be > 0; got ${cellPx}`);
  if (cellPx >= minGapPx) return 1;
  for (let mag = 1; ; mag *= 10) {
    for (const m of NICE) if (m * mag * cellPx >= minGapPx) return m * mag;
  }
}
function labelPositions(n, stride) {
  const out = [];
  for (let i = 0; i < n; i += stride) out.push(i);
  return out;
}
function heatmapLayout({ rows, cols, maxPlot = 560, minPlot = 160, maxCell = 28, rowLabelPx = 80, colLabelPx = 80, titlePx = 36, barPx = 56, pad = 6 }) {
  if (!(rows > 0 && cols > 0)) throw new RangeError(`heatmap needs rows, cols > 0; got ${rows} x ${cols}`);
  const long = Math.max(rows, cols);
  let cell = Math.min(maxCell, maxPlot / long);
  if (cell * long < minPlot) cell = Math.min(minPlot, maxPlot) / long;
  const plotW = cell * cols;
  const plotH = cell * rows;
  const left = pad + rowLabelPx;
  const top = pad + titlePx;
  return {
    cell,
    left,
    top,
    plotW,
    plotH,
    barX: left + plotW + 14,
    width: Math.ceil(left + plotW + 14 + barPx + pad),
    height: Math.ceil(top + plotH + colLabelPx + pad)
  };
}
function cellAt(layout, rows, cols, x, y) {
  const c = Math.floor((x - layout.left) / layout.cell);
  const r = Math.floor((y - layout.top) / layout.cell);
  if (r < 0 || c < 0 || r >= rows || c >= cols) return null;
  return { row: r, col: c };
}

// js/lib/scales.js
var STOPS = {
  sequential: {
    light: [[0, 247, 250, 255], [0.15, 208, 225, 242], [0.35, 140, 190, 225], [0.6, 66, 140, 200], [0.85, 25, 85, 160], [1, 12, 44, 110]],
    dark: [[0, 26, 30, 40], [0.2, 32, 62, 104], [0.45, 42, 112, 172], [0.7, 92, 176, 216], [0.9, 182, 226, 240], [1, 242, 250, 255]]
  },
  diverging: {
    light: [[0, 33, 90, 170], [0.25, 120, 170, 215], [0.5, 246, 246, 246], [0.75, 232, 140, 110], [1, 170, 30, 40]],
    dark: [[0, 96, 164, 240], [0.25, 44, 84, 136], [0.5, 34, 36, 42], [0.75, 142, 62, 52], [1, 250, 122, 100]]
  }
};
var NAN_RGB = { light: [205, 205, 205], dark: [78, 78, 78] };
var SCALE_KINDS = Object.keys(STOPS);
function colorAt(stops, t) {
  if (!(t > 0)) t = 0;
  if (t > 1) t = 1;
  let i = 1;
  while (i < stops.length - 1 && stops[i][0] < t) i++;
  const [p0, r0, g0, b0] = stops[i - 1];
  const [p1, r1, g1, b1] = stops[i];
  const f = p1 > p0 ? (t - p0) / (p1 - p0) : 0;
  return [Math.round(r0 + (r1 - r0) * f), Math.round(g0 + (g1 - g0) * f), Math.round(b0 + (b1 - b0) * f)];
}
function packRGBA(r, g, b, a = 255) {
  return (a << 24 | b << 16 | g << 8 | r) >>> 0;
}
function cssOf([r, g, b], a = 1) {
  return a === 1 ? `rgb(${r}, ${g}, ${b})` : `rgba(${r}, ${g}, ${b}, ${a})`;
}
function makeScale(kind = "sequential", { dark = false, domain = [0, 1] } = {}) {
  if (!STOPS[kind]) throw new RangeError(`scale kind must be one of ${SCALE_KINDS.join(", ")}; got ${kind}`);
  const [d0, d1] = domain;
  if (!(Number.isFinite(d0) && Number.isFinite(d1) && d1 > d0)) throw new RangeError(`scale domain must be finite lo < hi; got ${domain}`);
  const stops = STOPS[kind][dark ? "dark" : "light"];
  const nan = NAN_RGB[dark ? "dark" : "light"];
  const rgb = (v) => Number.isNaN(v) ? nan : colorAt(stops, (v - d0) / (d1 - d0));
  return {
    kind,
    domain: [d0, d1],
    dark,
    stops,
    nan,
    rgb,
    css: (v) => cssOf(rgb(v)),
    /** Lookup table code -> pixel for a CodeStack (codes map linearly onto [stack.lo, stack.hi]). */
    lut(stack) {
      const table = new Uint32Array(256);
      for (let code = 0; code <= CODE_MAX; code++) table[code] = packRGBA(...rgb(stack.lo + code * stack.step));
      table[stack.nanCode] = packRGBA(...nan);
      return table;
    }
  };
}
function niceTicks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, count - 1);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) ticks.push(Math.abs(v) < step * 1e-9 ? 0 : +v.toPrecision(12));
  return ticks;
}
function formatValue(v, digits = 4) {
  if (v == null || Number.isNaN(v)) return "n/a";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e-3 && a < 1e5) return String(+v.toPrecision(digits));
  return v.toExponential(digits - 1);
}
function readableText([r, g, b]) {
  const lum = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  return lum > 0.55 ? "#111" : "#fff";
}

// js/lib/heatmap.js
var FONT_PX = 11;
var LABEL_CHARS = 14;
function buildScene(spec, measure) {
  const { rows, cols, rowLabels = [], colLabels = [], title = "", xTitle = "", yTitle = "", scale, theme, maxPlot = 560 } = spec;
  const mono = `${FONT_PX}px ${theme.mono}`;
  const sans = `${FONT_PX}px ${theme.font}`;
  const probe = heatmapLayout({ rows, cols, maxPlot });
  const gap = FONT_PX + 2;
  const rowStride = labelStride(probe.cell, gap);
  const colStride = labelStride(probe.cell, gap);
  const rowShown = labelPositions(rows, rowStride).map((i) => [i, truncate(displayToken(rowLabels[i] ?? i), LABEL_CHARS)]);
  const colShown = labelPositions(cols, colStride).map((i) => [i, truncate(displayToken(colLabels[i] ?? i), LABEL_CHARS)]);
  const widest = (items) => items.reduce((m, [, t]) => Math.max(m, measure(t, mono)), 0);
  const titleW = Math.max(measure(yTitle, sans), measure(xTitle, sans));
  const rowLabelPx = Math.min(120, Math.max(28, widest(rowShown), titleW) + 8);
  const colLabelPx = Math.min(120, Math.max(28, widest(colShown)) + 8);
  const layout = heatmapLayout({ rows, cols, maxPlot, rowLabelPx, colLabelPx });
  const { left, top, plotW, plotH, cell } = layout;
  const ops = [];
  ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  ops.push({ type: "cells", x: left, y: top, w: plotW, h: plotH });
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  for (const [i, text] of rowShown) {
    ops.push({ type: "text", x: left - 4, y: top + (i + 0.5) * cell, text, font: mono, color: theme.fg, align: "right", baseline: "middle" });
  }
  for (const [j, text] of colShown) {
    ops.push({ type: "text", x: left + (j + 0.5) * cell, y: top + plotH + 4, text, font: mono, color: theme.fg, align: "right", baseline: "middle", rotate: -Math.PI / 2 });
  }
  if (yTitle) ops.push({ type: "text", x: left - 4, y: top - 8, text: yTitle, font: sans, color: theme.muted, align: "right" });
  if (xTitle) ops.push({ type: "text", x: left - 4, y: top + plotH + 16, text: xTitle, font: sans, color: theme.muted, align: "right" });
  if (scale) {
    const barH = Math.max(120, plotH);
    const [d0, d1] = scale.domain;
    const stops = [];
    for (let k = 0; k <= 16; k++) stops.push([k / 16, scale.css(d1 - (d1 - d0) * k / 16)]);
    ops.push({ type: "bar", x: layout.barX, y: top, w: 12, h: barH, stops, stroke: theme.border });
    for (const t of niceTicks(d0, d1, 5)) {
      const y = top + (d1 - t) / (d1 - d0) * barH;
      ops.push({ type: "line", x1: layout.barX + 12, y1: y, x2: layout.barX + 16, y2: y, stroke: theme.muted });
      ops.push({ type: "text", x: layout.barX + 18, y, text: formatValue(t, 3), font: sans, color: theme.muted, align: "left", baseline: "middle" });
    }
    layout.height = Math.max(layout.height, Math.ceil(top + barH + 8));
  }
  return { layout, ops, rowStride, colStride, font: mono };
}
function drawScene(ctx, scene, cells) {
  for (const op of scene.ops) {
    if (op.type === "cells") {
      if (!cells) continue;
      ctx.imageSmoothingEnabled = scene.layout.cell < 1;
      if (ctx.imageSmoothingEnabled) ctx.imageSmoothingQuality = "high";
      ctx.drawImage(cells, op.x, op.y, op.w, op.h);
    } else if (op.type === "rect") {
      ctx.strokeStyle = op.stroke;
      ctx.lineWidth = 1;
      ctx.strokeRect(op.x, op.y, op.w, op.h);
    } else if (op.type === "line") {
      ctx.strokeStyle = op.stroke;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(op.x1, op.y1);
      ctx.lineTo(op.x2, op.y2);
      ctx.stroke();
    } else if (op.type === "bar") {
      const grad = ctx.createLinearGradient(0, op.y, 0, op.y + op.h);
      for (const [t, css] of op.stops) grad.addColorStop(t, css);
      ctx.fillStyle = grad;
      ctx.fillRect(op.x, op.y, op.w, op.h);
      ctx.strokeStyle = op.stroke;
      ctx.strokeRect(op.x - 0.5, op.y - 0.5, op.w + 1, op.h + 1);
    } else if (op.type === "text") {
      ctx.save();
      ctx.font = op.font;
      ctx.fillStyle = op.color;
      ctx.textAlign = op.align || "left";
      ctx.textBaseline = op.baseline || "alphabetic";
      ctx.translate(op.x, op.y);
      if (op.rotate) ctx.rotate(op.rotate);
      ctx.fillText(op.text, 0, 0);
      ctx.restore();
    }
  }
}
var xml = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
var num = (v) => +v.toFixed(2);
function sceneToSVG(scene, cellsHref, theme) {
  const { width, height } = scene.layout;
  const anchor = { left: "start", right: "end", center: "middle" };
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  parts.push(`<rect width="100%" height="100%" fill="${xml(theme.bgCss)}"/>`);
  let gradients = 0;
  for (const op of scene.ops) {
    if (op.type === "cells" && cellsHref) {
      const rendering = scene.layout.cell >= 1 ? ' style="image-rendering:pixelated"' : "";
      parts.push(`<image x="${num(op.x)}" y="${num(op.y)}" width="${num(op.w)}" height="${num(op.h)}" preserveAspectRatio="none"${rendering} href="${cellsHref}"/>`);
    } else if (op.type === "rect") {
      parts.push(`<rect x="${num(op.x)}" y="${num(op.y)}" width="${num(op.w)}" height="${num(op.h)}" fill="none" stroke="${xml(op.stroke)}"/>`);
    } else if (op.type === "line") {
      parts.push(`<line x1="${num(op.x1)}" y1="${num(op.y1)}" x2="${num(op.x2)}" y2="${num(op.y2)}" stroke="${xml(op.stroke)}"/>`);
    } else if (op.type === "bar") {
      const id = `cwbar${gradients++}`;
      const stops = op.stops.map(([t, css]) => `<stop offset="${t}" stop-color="${xml(css)}"/>`).join("");
      parts.push(`<defs><linearGradient id="${id}" x1="0" y1="0" x2="0" y2="1">${stops}</linearGradient></defs>`);
      parts.push(`<rect x="${num(op.x)}" y="${num(op.y)}" width="${op.w}" height="${num(op.h)}" fill="url(#${id})" stroke="${xml(op.stroke)}"/>`);
    } else if (op.type === "text") {
      const [size, ...family] = op.font.replace(/^600 /, "").split(" ");
      const weight = op.font.startsWith("600 ") ? ' font-weight="600"' : "";
      const rot = op.rotate ? ` transform="rotate(${num(op.rotate * 180 / Math.PI)} ${num(op.x)} ${num(op.y)})"` : "";
      const base = op.baseline === "middle" ? ' dominant-baseline="central"' : "";
      parts.push(`<text x="${num(op.x)}" y="${num(op.y)}" font-size="${parseFloat(size)}" font-family="${xml(family.join(" "))}"${weight} fill="${xml(op.color)}" text-anchor="${anchor[op.align || "left"]}"${base}${rot}>${xml(op.text)}</text>`);
    }
  }
  parts.push("</svg>");
  return parts.join("\n");
}
var Heatmap = class {
  constructor({ onHover, onClick, label = "heatmap" } = {}) {
    this.canvas = h("canvas", { class: "cw-heatmap-canvas", attrs: { role: "img", "aria-label": label } });
    this.overlay = h("canvas", { class: "cw-heatmap-overlay" });
    this.el = h("div", { class: "cw-heatmap" }, [this.canvas, this.overlay]);
    this.cells = document.createElement("canvas");
    this.spec = null;
    this.scene = null;
    this.highlight = {};
    this._onMove = (e) => {
      const hit = this.hit(e);
      if (onHover) onHover(hit);
    };
    this._onLeave = () => onHover && onHover(null);
    this._onClick = (e) => {
      const hit = this.hit(e);
      if (hit && onClick) onClick(hit);
    };
    this.overlay.addEventListener("mousemove", this._onMove);
    this.overlay.addEventListener("mouseleave", this._onLeave);
    this.overlay.addEventListener("click", this._onClick);
  }
  hit(e) {
    if (!this.scene) return null;
    const box = this.overlay.getBoundingClientRect();
    return cellAt(this.scene.layout, this.spec.rows, this.spec.cols, e.clientX - box.left, e.clientY - box.top);
  }
  /** Redraw. spec: {rows, cols, paint, rowLabels, colLabels, title, xTitle, yTitle, scale, theme, maxPlot}. */
  update(spec) {
    const { rows, cols, paint } = spec;
    if (this.cells.width !== cols || this.cells.height !== rows || !this.image) {
      this.cells.width = cols;
      this.cells.height = rows;
      this.image = this.cells.getContext("2d").createImageData(cols, rows);
      this.pixels = new Uint32Array(this.image.data.buffer);
    }
    paint(this.pixels);
    this.cells.getContext("2d").putImageData(this.image, 0, 0);
    this.spec = spec;
    const ctx = this.canvas.getContext("2d");
    this.scene = buildScene(spec, (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    });
    this.canvas.cwScene = this.scene;
    const { width, height } = this.scene.layout;
    const dpr = globalThis.devicePixelRatio || 1;
    for (const c of [this.canvas, this.overlay]) {
      if (c.width !== Math.round(width * dpr) || c.height !== Math.round(height * dpr)) {
        c.width = Math.round(width * dpr);
        c.height = Math.round(height * dpr);
        c.style.width = `${width}px`;
        c.style.height = `${height}px`;
      }
    }
    this.el.style.width = `${width}px`;
    this.el.style.height = `${height}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    drawScene(ctx, this.scene, this.cells);
    this.drawOverlay();
  }
  /** Hover/selection marks: {row, col, lockedRow, lockedCol}, any may be null. */
  setHighlight(highlight) {
    this.highlight = highlight || {};
    this.drawOverlay();
  }
  drawOverlay() {
    if (!this.scene) return;
    const ctx = this.overlay.getContext("2d");
    const dpr = globalThis.devicePixelRatio || 1;
    const { width, height, left, top, cell, plotW, plotH } = this.scene.layout;
    const { theme, rows, cols, rowLabels = [], colLabels = [] } = this.spec;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const { row, col, lockedRow, lockedCol } = this.highlight;
    const band = (r, c, color, dash) => {
      ctx.save();
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(dash);
      if (r != null && r >= 0 && r < rows) ctx.strokeRect(left - 0.5, top + r * cell - 0.5, plotW + 1, Math.max(cell, 1) + 1);
      if (c != null && c >= 0 && c < cols) ctx.strokeRect(left + c * cell - 0.5, top - 0.5, Math.max(cell, 1) + 1, plotH + 1);
      ctx.restore();
    };
    if (lockedRow != null || lockedCol != null) band(lockedRow, lockedCol, theme.accent, []);
    if (row != null || col != null) band(row, col, theme.fg, [3, 2]);
    const chip = (text, x, y, rotate) => {
      ctx.save();
      ctx.font = this.scene.font;
      const w = ctx.measureText(text).width + 6;
      ctx.translate(x, y);
      if (rotate) ctx.rotate(rotate);
      ctx.fillStyle = theme.bgCss;
      ctx.strokeStyle = theme.accent;
      ctx.fillRect(-w, -8, w, 16);
      ctx.strokeRect(-w, -8, w, 16);
      ctx.fillStyle = theme.fg;
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(text, -3, 0);
      ctx.restore();
    };
    if (row != null && row >= 0 && row < rows) chip(truncate(displayToken(rowLabels[row] ?? row), LABEL_CHARS), left - 2, top + (row + 0.5) * cell);
    if (col != null && col >= 0 && col < cols) chip(truncate(displayToken(colLabels[col] ?? col), LABEL_CHARS), left + (col + 0.5) * cell, top + plotH + 2, -Math.PI / 2);
  }
  /** The picture (no hover marks) on the page background, at device resolution. */
  toCanvas() {
    const out = document.createElement("canvas");
    out.width = this.canvas.width;
    out.height = this.canvas.height;
    const ctx = out.getContext("2d");
    ctx.fillStyle = this.spec.theme.bgCss;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(this.canvas, 0, 0);
    return out;
  }
  toSVG() {
    return sceneToSVG(this.scene, this.cells.toDataURL("image/png"), this.spec.theme);
  }
  destroy() {
    this.overlay.removeEventListener("mousemove", this._onMove);
    this.overlay.removeEventListener("mouseleave", this._onLeave);
    this.overlay.removeEventListener("click", this._onClick);
    this.el.remove();
  }
};

// js/lib/save.js
function download(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.style.display = "none";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1e3);
}
function savePNG(canvas, filename) {
  canvas.toBlob((blob) => blob && download(blob, filename), "image/png");
}
function saveSVG(svgText, filename) {
  download(new Blob([svgText], { type: "image/svg+xml" }), filename);
}
function safeName(s) {
  return String(s).replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^_+|_+$/g, "") || "view";
}

// js/lib/theme.js
function parseRGB(css) {
  const m = /rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:[ ,/]+([\d.]+%?))?/.exec(css || "");
  if (!m) return null;
  const alpha = m[4] === void 0 ? 1 : m[4].endsWith("%") ? parseFloat(m[4]) / 100 : parseFloat(m[4]);
  return { rgb: [+m[1], +m[2], +m[3]], alpha };
}
function luminance([r, g, b]) {
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}
function effectiveBackground(el) {
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
    const parsed = parseRGB(getComputedStyle(node).backgroundColor);
    if (parsed && parsed.alpha > 0.5) return parsed.rgb;
  }
  const prefersDark = typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches;
  return prefersDark ? [17, 19, 24] : [255, 255, 255];
}
function readTheme(el) {
  const style = getComputedStyle(el);
  const v = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  const bg = effectiveBackground(el);
  const dark = luminance(bg) < 0.45;
  return {
    dark,
    bg,
    bgCss: `rgb(${bg.join(", ")})`,
    fg: v("--cw-fg", dark ? "#e6e6e6" : "#1f2328"),
    muted: v("--cw-muted", dark ? "#9aa0a6" : "#5f6368"),
    border: v("--cw-border", dark ? "#3c4043" : "#d0d7de"),
    accent: v("--cw-accent", dark ? "#ffb74d" : "#d9480f"),
    font: v("--cw-font", "system-ui, sans-serif"),
    mono: v("--cw-mono", "ui-monospace, Menlo, Consolas, monospace")
  };
}
function watchTheme(el, onChange) {
  let last = JSON.stringify(readTheme(el));
  const check = () => {
    const now = JSON.stringify(readTheme(el));
    if (now !== last) {
      last = now;
      onChange(readTheme(el));
    }
  };
  const observers = [];
  if (typeof MutationObserver === "function" && typeof document !== "undefined") {
    const mo = new MutationObserver(check);
    for (const node of [document.documentElement, document.body]) {
      if (node) mo.observe(node, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name", "style"] });
    }
    observers.push(() => mo.disconnect());
  }
  if (typeof matchMedia === "function") {
    const mq = matchMedia("(prefers-color-scheme: dark)");
    mq.addEventListener("change", check);
    observers.push(() => mq.removeEventListener("change", check));
  }
  return () => observers.forEach((stop) => stop());
}

// js/lib/thumbs.js
var ThumbGrid = class {
  /** draw(i, ctx, sizePx) paints thumbnail i; onHover(i | null); onClick(i). */
  constructor({ draw, onHover, onClick, size = 64, label = "heads" } = {}) {
    this.draw = draw;
    this.size = size;
    this.el = h("div", { class: "cw-thumbs", attrs: { role: "listbox", "aria-label": label } });
    this.items = [];
    this._over = (e) => {
      const i = this.indexOf(e.target);
      if (i !== null && onHover) onHover(i);
    };
    this._leave = () => onHover && onHover(null);
    this._click = (e) => {
      const i = this.indexOf(e.target);
      if (i !== null && onClick) onClick(i);
    };
    this.el.addEventListener("mouseover", this._over);
    this.el.addEventListener("mouseleave", this._leave);
    this.el.addEventListener("click", this._click);
  }
  indexOf(node) {
    const item = node && node.closest ? node.closest(".cw-thumb") : null;
    return item && this.el.contains(item) ? Number(item.dataset.index) : null;
  }
  /** Make `labels.length` thumbnails (reusing existing ones) and repaint all of them. */
  setItems(labels) {
    while (this.items.length > labels.length) this.items.pop().el.remove();
    while (this.items.length < labels.length) {
      const i = this.items.length;
      const canvas = h("canvas", { class: "cw-thumb-canvas" });
      const caption = h("span", { class: "cw-thumb-label" });
      const el = h("div", { class: "cw-thumb", attrs: { role: "option", "data-index": i, tabindex: -1 } }, [canvas, caption]);
      this.el.append(el);
      this.items.push({ el, canvas, caption });
    }
    labels.forEach((text, i) => this.items[i].caption.textContent = text);
    this.repaint();
  }
  repaint() {
    const dpr = globalThis.devicePixelRatio || 1;
    const px = Math.round(this.size * dpr);
    this.items.forEach(({ canvas }, i) => {
      if (canvas.width !== px) {
        canvas.width = px;
        canvas.height = px;
        canvas.style.width = `${this.size}px`;
        canvas.style.height = `${this.size}px`;
      }
      const ctx = canvas.getContext("2d");
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.clearRect(0, 0, px, px);
      this.draw(i, ctx, px);
    });
  }
  /** Mark the selected item, the previewed one, and whether the selection is locked. */
  mark(selected, preview = null, locked = false) {
    this.items.forEach(({ el }, i) => {
      el.classList.toggle("cw-thumb-selected", i === selected);
      el.classList.toggle("cw-thumb-locked", i === selected && locked);
      el.classList.toggle("cw-thumb-preview", i === preview && i !== selected);
      el.setAttribute("aria-selected", i === selected ? "true" : "false");
    });
  }
  destroy() {
    this.el.removeEventListener("mouseover", this._over);
    this.el.removeEventListener("mouseleave", this._leave);
    this.el.removeEventListener("click", this._click);
    this.el.remove();
  }
};

// js/lib/tokens.js
var TokenStrip = class {
  constructor({ onHover, onClick } = {}) {
    this.el = h("div", { class: "cw-tokens", attrs: { role: "list", "aria-label": "tokens" } });
    this.spans = [];
    this._over = (e) => {
      const i = this.indexOf(e.target);
      if (i !== null && onHover) onHover(i);
    };
    this._leave = () => onHover && onHover(null);
    this._click = (e) => {
      const i = this.indexOf(e.target);
      if (i !== null && onClick) onClick(i);
    };
    this.el.addEventListener("mouseover", this._over);
    this.el.addEventListener("mouseleave", this._leave);
    this.el.addEventListener("click", this._click);
  }
  indexOf(node) {
    const span = node && node.closest ? node.closest(".cw-token") : null;
    return span && this.el.contains(span) ? Number(span.dataset.index) : null;
  }
  /** Replace the tokens (strings are shown as text, never parsed as HTML). */
  setTokens(strings) {
    this.spans = strings.map((s, i) => {
      const span = h("span", { class: "cw-token", text: inlineToken(s), attrs: { role: "listitem", "data-index": i, title: `${i}` } });
      return s.includes("\n") ? [span, h("br")] : [span];
    });
    this.el.replaceChildren(...this.spans.flat());
    this.spans = this.spans.map((pair) => pair[0]);
  }
  /**
   * Colour each token by weights[i] through `scale` (null clears); mark `focus` (the token whose
   * attention is shown) and whether it is locked.
   */
  setWeights(weights, scale, focus = null, locked = false) {
    this.spans.forEach((span, i) => {
      const w = weights ? weights[i] : null;
      if (w == null || Number.isNaN(w)) {
        span.style.background = "";
        span.style.color = "";
        span.removeAttribute("data-weight");
      } else {
        const rgb = scale.rgb(w);
        span.style.background = cssOf(rgb);
        span.style.color = readableText(rgb);
        span.dataset.weight = w.toFixed(4);
      }
      span.classList.toggle("cw-token-focus", i === focus);
      span.classList.toggle("cw-token-locked", i === focus && locked);
    });
  }
  destroy() {
    this.el.removeEventListener("mouseover", this._over);
    this.el.removeEventListener("mouseleave", this._leave);
    this.el.removeEventListener("click", this._click);
    this.el.remove();
  }
};

// js/views/attention.js
var quote = (s) => `“${truncate(displayToken(s), 24)}”`;
function render({ model, el }) {
  const standalone = model.standalone === true;
  const state = {
    stack: null,
    strTokens: [],
    preview: null,
    // head under the pointer in the thumbnails
    headLocked: false,
    // a clicked thumbnail holds the view until clicked again
    hover: null,
    // {query, key} under the pointer
    lock: null,
    // {query, key} clicked in the heatmap or token strip
    mode: "pays",
    // token view: attention the focused token pays, or receives
    localError: "",
    draws: 0
  };
  const root = h("div", { class: "cw-root cw-attention", attrs: { tabindex: 0, "data-cw-kind": "attention", "data-lm-suppress-shortcuts": "true" } });
  el.append(root);
  let theme = readTheme(root);
  let scale = makeScale("sequential", { dark: theme.dark });
  let maxPlot = 560;
  const info = () => model.get("info") || {};
  const prompt = promptBox({
    placeholder: info().has_tokenizer ? "type a prompt, Enter to run" : "token ids separated by spaces, Enter to run",
    onSubmit: (text) => {
      if (info().has_tokenizer) {
        model.set("prompt", text);
      } else {
        const parts = text.trim().split(/[\s,]+/).filter(Boolean);
        const ids = parts.map(Number);
        if (!ids.length || ids.some((x) => !Number.isInteger(x) || x < 0)) {
          state.localError = `token ids must be non-negative integers separated by spaces; got ${JSON.stringify(truncate(text, 40))}`;
          showError();
          return;
        }
        model.set("tokens", ids);
      }
      state.localError = "";
      showError();
      model.save_changes();
    }
  });
  if (standalone) prompt.readOnly(true, "exported page: no kernel to re-run the model");
  const layerSelect = selectControl("Layer", (layer) => {
    model.set("layer", layer);
    model.save_changes();
  });
  const headSelect = selectControl("Head", (head) => setHead(head));
  layerSelect.disable(standalone);
  const modeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "token view" } }, [
    h("option", { value: "pays", text: "attention paid by" }),
    h("option", { value: "receives", text: "attention received by" })
  ]);
  modeSelect.addEventListener("change", () => {
    state.mode = modeSelect.value;
    drawTokens();
  });
  const busy = h("span", { class: "cw-busy", text: "running…", attrs: { "aria-live": "polite" } });
  busy.hidden = true;
  const fileBase = () => safeName(`attention_L${shownLayer()}H${shownHead()}`);
  const pngButton = button("PNG", "save the heatmap as PNG", () => savePNG(heatmap.toCanvas(), `${fileBase()}.png`));
  const svgButton = button("SVG", "save the heatmap as SVG", () => saveSVG(heatmap.toSVG(), `${fileBase()}.svg`));
  const banner = errorBanner();
  const toolbar = h("div", { class: "cw-toolbar" }, [
    prompt.el,
    h("div", { class: "cw-toolbar-row" }, [layerSelect.el, headSelect.el, busy, h("span", { class: "cw-spacer" }), pngButton, svgButton])
  ]);
  const heatmap = new Heatmap({
    label: "attention pattern",
    onHover: (hit) => {
      state.hover = hit ? { query: hit.row, key: hit.col } : null;
      selectionChanged();
    },
    onClick: (hit) => {
      const same = state.lock && state.lock.query === hit.row && state.lock.key === hit.col;
      state.lock = same ? null : { query: hit.row, key: hit.col };
      selectionChanged();
    }
  });
  const thumbs = new ThumbGrid({
    label: "heads of this layer",
    draw: drawThumb,
    onHover: (i) => {
      state.preview = i;
      if (!state.headLocked) drawMain();
      thumbs.mark(model.get("head"), state.preview, state.headLocked);
    },
    onClick: (i) => {
      if (i === model.get("head")) state.headLocked = !state.headLocked;
      else state.headLocked = true;
      setHead(i);
    }
  });
  const strip = new TokenStrip({
    onHover: (i) => {
      state.hover = i == null ? null : state.mode === "pays" ? { query: i, key: null } : { query: null, key: i };
      selectionChanged();
    },
    onClick: (i) => {
      const key = state.mode === "pays" ? "query" : "key";
      const same = state.lock && state.lock[key] === i;
      state.lock = same ? null : state.mode === "pays" ? { query: i, key: null } : { query: null, key: i };
      selectionChanged();
    }
  });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const tokenHead = h("div", { class: "cw-token-head" }, [
    h("span", { class: "cw-field-label", text: "Token view: colour by" }),
    modeSelect,
    h("span", { class: "cw-hint", text: "the hovered token (click to lock)" })
  ]);
  root.append(toolbar, banner.el, thumbs.el, heatmap.el, readout, tokenHead, strip.el);
  const shownHead = () => !state.headLocked && state.preview != null ? state.preview : model.get("head");
  const shownLayer = () => (model.get("patterns_meta") || {}).layer ?? model.get("layer");
  const selection = () => state.lock || state.hover;
  function setHead(head) {
    const n = info().n_heads || 1;
    const next = Math.max(0, Math.min(n - 1, head));
    if (next !== model.get("head")) {
      model.set("head", next);
      model.save_changes();
    } else {
      thumbs.mark(next, state.preview, state.headLocked);
      drawMain();
    }
  }
  function exactRow(query) {
    const meta = model.get("row_meta") || {};
    const pm = model.get("patterns_meta") || {};
    if (meta.query !== query || meta.revision !== pm.revision) return null;
    const values = float32Of(model.get("row"));
    const [nHeads, nKeys] = meta.shape;
    const head = shownHead();
    return head < nHeads ? values.subarray(head * nKeys, (head + 1) * nKeys) : null;
  }
  function showError() {
    banner.show(model.get("error") || state.localError);
  }
  function mark(what, t0) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwHead = String(shownHead());
    root.dataset.cwLayer = String(shownLayer());
    root.dataset.cwTokens = String(state.strTokens.length);
    root.dataset.cwTheme = theme.dark ? "dark" : "light";
    const revision = String((model.get("patterns_meta") || {}).revision ?? "");
    root.dataset.cwRevision = revision;
    if (what === "all" && typeof requestAnimationFrame === "function") {
      requestAnimationFrame(() => {
        root.dataset.cwFrameAt = String(performance.now());
        root.dataset.cwFrameRevision = revision;
      });
    }
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what, ms: performance.now() - t0 } }));
  }
  function drawMain() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const head = shownHead();
    const lut = scale.lut(stack);
    heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(head, lut, pixels, 0),
      rowLabels: state.strTokens,
      colLabels: state.strTokens,
      title: `Layer ${shownLayer()}, head ${head}${state.headLocked ? " (locked)" : ""}`,
      yTitle: "query ↓",
      xTitle: "key →",
      scale,
      theme,
      maxPlot
    });
    drawSelection();
    mark("main", t0);
  }
  const scratch = document.createElement("canvas");
  function drawThumb(i, ctx, px) {
    const stack = state.stack;
    if (!stack || i >= stack.count) return;
    const lut = scale.lut(stack);
    const rows = Math.min(stack.rows, px);
    const cols = Math.min(stack.cols, px);
    scratch.width = cols;
    scratch.height = rows;
    const sctx = scratch.getContext("2d");
    const image = sctx.createImageData(cols, rows);
    const pixels = new Uint32Array(image.data.buffer);
    if (rows === stack.rows && cols === stack.cols) {
      stack.paint(i, lut, pixels, 0);
    } else {
      const pooled = stack.pool(i, rows, cols);
      for (let k = 0; k < pooled.length; k++) pixels[k] = pooled[k] < 0 ? 0 : lut[pooled[k]];
    }
    sctx.putImageData(image, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(scratch, 0, 0, px, px);
  }
  function drawThumbs() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const labels = Array.from({ length: stack.count }, (_, i) => `H${i}`);
    thumbs.setItems(labels);
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    mark("thumbs", t0);
  }
  function drawTokens() {
    const stack = state.stack;
    const sel = selection();
    if (!stack || !sel) {
      strip.setWeights(null, scale);
      return;
    }
    const head = shownHead();
    if (state.mode === "pays" && sel.query != null) {
      const q = sel.query;
      const exact = exactRow(q);
      const row = exact || stack.rowValues(head, q);
      const weights = Array.from({ length: stack.cols }, (_, j) => stack.stored(q, j) ? row[j] : null);
      strip.setWeights(weights, scale, q, !!state.lock);
    } else if (state.mode === "receives" && sel.key != null) {
      const k = sel.key;
      const col = stack.colValues(head, k);
      const weights = Array.from({ length: stack.rows }, (_, i) => stack.stored(i, k) ? col[i] : null);
      strip.setWeights(weights, scale, k, !!state.lock);
    } else {
      strip.setWeights(null, scale);
    }
  }
  function drawReadout() {
    const stack = state.stack;
    const sel = selection();
    const toks = state.strTokens;
    const head = shownHead();
    const parts = [`L${shownLayer()} H${head}`];
    if (stack && sel && sel.query != null && sel.key != null && sel.query < stack.rows && sel.key < stack.cols) {
      const { query: q, key: k } = sel;
      const exact = exactRow(q);
      const weight = exact ? formatValue(exact[k]) : `≈${formatValue(stack.value(head, q, k), 3)}`;
      parts.push(`query ${q} ${quote(toks[q] ?? q)} → key ${k} ${quote(toks[k] ?? k)}`, `weight ${weight}`);
    } else if (stack && sel && sel.query != null) {
      parts.push(`query ${sel.query} ${quote(toks[sel.query] ?? sel.query)}`);
    } else if (stack && sel && sel.key != null) {
      parts.push(`key ${sel.key} ${quote(toks[sel.key] ?? sel.key)}`);
    } else {
      parts.push(stack ? `${stack.rows} tokens · hover a cell or a token` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc to release)");
    readout.textContent = parts.join(" · ");
  }
  function drawSelection() {
    const sel = selection();
    heatmap.setHighlight({
      row: state.hover?.query ?? null,
      col: state.hover?.key ?? null,
      lockedRow: state.lock?.query ?? null,
      lockedCol: state.lock?.key ?? null
    });
    drawTokens();
    drawReadout();
    return sel;
  }
  let lastSent = null;
  const sendSelection = throttle(() => {
    const sel = selection();
    const value = { query: sel?.query ?? null, key: sel?.key ?? null, locked: !!state.lock };
    const key = JSON.stringify(value);
    if (key === lastSent) return;
    lastSent = key;
    model.set("selection", value);
    model.save_changes();
  }, 80);
  function selectionChanged() {
    drawSelection();
    sendSelection();
  }
  function syncControls() {
    const inf = info();
    const layers = inf.attn_layers || [model.get("layer")];
    const layerOptions = standalone ? [{ value: shownLayer(), label: String(shownLayer()) }] : layers.map((l) => ({ value: l, label: String(l) }));
    layerSelect.set(layerOptions, standalone ? shownLayer() : model.get("layer"));
    const nHeads = inf.n_heads || 1;
    headSelect.set(Array.from({ length: nHeads }, (_, i) => ({ value: i, label: String(i) })), model.get("head"));
    prompt.show(inf.has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
  }
  function onPatterns() {
    const meta = model.get("patterns_meta");
    const data = model.get("patterns");
    try {
      state.stack = meta && meta.shape ? new CodeStack(data, meta) : null;
    } catch (err) {
      state.stack = null;
      state.localError = `could not read the patterns: ${err.message}`;
    }
    state.strTokens = model.get("str_tokens") || [];
    strip.setTokens(state.strTokens);
    const n = state.stack ? state.stack.rows : 0;
    const inRange = (s) => s && (s.query == null || s.query < n) && (s.key == null || s.key < n);
    if (!inRange(state.lock)) state.lock = null;
    if (!inRange(state.hover)) state.hover = null;
    const t0 = performance.now();
    syncControls();
    drawMain();
    drawThumbs();
    showError();
    mark("all", t0);
  }
  const onHead = () => {
    headSelect.select.value = String(model.get("head"));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    drawMain();
  };
  const onError = () => showError();
  const onBusy = () => busy.hidden = !model.get("busy");
  const onRow = () => {
    drawTokens();
    drawReadout();
  };
  const onInput = () => syncControls();
  const onSelection = () => {
    const value = model.get("selection") || {};
    if (JSON.stringify({ query: value.query ?? null, key: value.key ?? null, locked: !!value.locked }) === lastSent) return;
    const sel = value.query == null && value.key == null ? null : { query: value.query ?? null, key: value.key ?? null };
    if (value.locked) state.lock = sel;
    else state.hover = sel;
    drawSelection();
  };
  const handlers = {
    "change:patterns_meta": onPatterns,
    "change:head": onHead,
    "change:error": onError,
    "change:busy": onBusy,
    "change:row_meta": onRow,
    "change:prompt": onInput,
    "change:tokens": onInput,
    "change:layer": onInput,
    "change:info": onInput,
    "change:selection": onSelection
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);
  const onKey = (e) => {
    if (e.target.closest && e.target.closest("textarea, input, select")) return;
    const layers = info().attn_layers || [];
    const handled = ["ArrowRight", "ArrowLeft", "Escape"].includes(e.key) || (e.key === "ArrowUp" || e.key === "ArrowDown") && !standalone;
    if (handled) {
      e.preventDefault();
      e.stopPropagation();
    }
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      setHead(model.get("head") + (e.key === "ArrowRight" ? 1 : -1));
    } else if ((e.key === "ArrowUp" || e.key === "ArrowDown") && !standalone) {
      const i = layers.indexOf(model.get("layer")) + (e.key === "ArrowDown" ? 1 : -1);
      if (i >= 0 && i < layers.length) {
        model.set("layer", layers[i]);
        model.save_changes();
      }
    } else if (e.key === "Escape") {
      state.lock = null;
      state.headLocked = false;
      selectionChanged();
      drawMain();
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    scale = makeScale("sequential", { dark: theme.dark });
    drawMain();
    drawThumbs();
  });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    const next = Math.max(200, Math.min(560, width - 190));
    if (width > 0 && Math.abs(next - maxPlot) > 8) {
      maxPlot = next;
      drawMain();
    }
  }) : null;
  if (resize) resize.observe(root);
  onBusy();
  onPatterns();
  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    root.removeEventListener("keydown", onKey);
    sendSelection.cancel();
    stopTheme();
    if (resize) resize.disconnect();
    prompt.destroy();
    heatmap.destroy();
    thumbs.destroy();
    strip.destroy();
    root.remove();
  };
}

// js/views/composition.js
var composition_exports = {};
__export(composition_exports, {
  render: () => render2
});

// js/lib/graph.js
function pairIndex(k, l1, h1, l2, h2, L, H) {
  return (((k * L + l1) * H + h1) * L + l2) * H + h2;
}
function graphLayout({ layers, heads, maxWidth = 760, legendPx = 150 }) {
  if (!(layers > 0 && heads > 0)) throw new RangeError(`graph needs layers, heads > 0; got ${layers} x ${heads}`);
  const left = 44;
  const top = 42;
  const span = Math.max(1, layers - 1);
  const colW = Math.max(56, Math.min(240, (maxWidth - left - legendPx - 24) / span));
  const rowH = Math.max(12, Math.min(30, 380 / heads));
  const radius = Math.max(4, Math.min(10, rowH * 0.36));
  const nodes = [];
  for (let l = 0; l < layers; l++) {
    for (let h2 = 0; h2 < heads; h2++) nodes.push({ l, h: h2, x: left + l * colW, y: top + (h2 + 0.5) * rowH });
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
    height: Math.ceil(top + heads * rowH + 30)
  };
}
function visibleEdges(values, k, L, H, threshold, offset = 0, limit = Infinity) {
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
function scoreRange(values, k, L, H) {
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
function rawDomain(range, baseline) {
  const top = Math.max(range ? range[1] : 0, 1.5 * baseline, 1e-6);
  return [0, Math.min(1, top * 1.05)];
}
function edgeWidth(value, threshold, top, max = 7) {
  if (!(top > threshold)) return 2;
  const t = Math.max(0, Math.min(1, (value - threshold) / (top - threshold)));
  return 1 + t * (max - 1);
}
function edgePath(x1, y1, x2, y2) {
  const c = (x2 - x1) * 0.5;
  const f = (v) => +v.toFixed(2);
  return `M ${f(x1)} ${f(y1)} C ${f(x1 + c)} ${f(y1)} ${f(x2 - c)} ${f(y2)} ${f(x2)} ${f(y2)}`;
}
function shiftThreshold(threshold, baseline, toCorrected) {
  const next = toCorrected ? threshold - baseline : threshold + baseline;
  return Math.max(-1, Math.min(1, +next.toFixed(6)));
}
function flatHeads(layerLabels, H, from = 0, to = layerLabels.length) {
  const heads = [];
  for (let l = from; l < to; l++) for (let h2 = 0; h2 < H; h2++) heads.push({ l, h: h2, label: `L${layerLabels[l]}H${h2}` });
  return heads;
}
function sliderStep(lo, hi) {
  const raw = (hi - lo) / 400;
  if (!(raw > 0)) return 1e-3;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
}
var SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v != null) node.setAttribute(k, String(v));
  if (text != null) node.textContent = String(text);
  return node;
}

// js/views/composition.js
var KINDS = ["Q", "K", "V"];
var KIND_TEXT = { Q: "Q-composition: the later head's queries read the earlier head's output", K: "K-composition: the later head's keys read it", V: "V-composition: its values read it (a virtual head)" };
var MAX_EDGES = 600;
function hexOrRgb(css) {
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(String(css).trim());
  if (hex) {
    const v = hex[1].length === 3 ? hex[1].split("").map((c) => c + c).join("") : hex[1];
    return [0, 2, 4].map((i) => parseInt(v.slice(i, i + 2), 16));
  }
  const m = /rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)/.exec(String(css));
  return m ? [+m[1], +m[2], +m[3]] : [128, 128, 128];
}
var quote2 = (s) => `“${truncate(displayToken(s), 20)}”`;
function render2({ model, el }) {
  const standalone = model.standalone === true;
  const root = h("div", { class: "cw-root cw-composition", attrs: { tabindex: 0, "data-cw-kind": "composition" } });
  el.append(root);
  let theme = readTheme(root);
  const state = { values: null, L: 0, H: 0, hover: null, threshold: model.get("threshold"), draws: 0, localError: "", shown: 0, passing: 0 };
  const kindButtons = KINDS.map(
    (k) => h("button", { class: "cw-button cw-seg", type: "button", text: k, title: KIND_TEXT[k], attrs: { "aria-pressed": "false", "data-kind": k }, on: { click: () => setTrait({ kind: k }) } })
  );
  const kindGroup = h("span", { class: "cw-seg-group", attrs: { role: "group", "aria-label": "composition kind" } }, kindButtons);
  const baselineBox = h("input", { type: "checkbox", attrs: { "aria-label": "baseline-corrected scores" } });
  baselineBox.addEventListener("change", () => {
    const on = baselineBox.checked;
    const next = shiftThreshold(state.threshold, model.get("baseline_value") || 0, on);
    state.threshold = next;
    setTrait({ baseline: on, threshold: next });
  });
  const baselineField = h("label", { class: "cw-field", title: "subtract what random matrices of these shapes already score" }, [baselineBox, h("span", { class: "cw-field-label", text: "minus baseline" })]);
  const slider = h("input", { type: "range", class: "cw-slider", attrs: { "aria-label": "threshold" } });
  const sliderText = h("span", { class: "cw-slider-value" });
  const sendThreshold = throttle((v) => setTrait({ threshold: v }), 120);
  slider.addEventListener("input", () => {
    state.threshold = Number(slider.value);
    sliderText.textContent = formatValue(state.threshold, 3);
    draw();
    sendThreshold(state.threshold);
  });
  const thresholdField = h("label", { class: "cw-field", title: "hide pairs scoring below this" }, [h("span", { class: "cw-field-label", text: "threshold" }), slider, sliderText]);
  const viewSelect = h("select", { class: "cw-select", attrs: { "aria-label": "view" } }, [
    h("option", { value: "graph", text: "graph" }),
    h("option", { value: "matrix", text: "matrix" })
  ]);
  viewSelect.addEventListener("change", () => setTrait({ view: viewSelect.value }));
  const busy = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  busy.hidden = true;
  const fileBase = () => safeName(`composition_${model.get("kind")}${model.get("baseline") ? "_corrected" : ""}`);
  const pngButton = button("PNG", "save the diagram as PNG", () => savePicturePNG());
  const svgButton = button("SVG", "save the diagram as SVG", () => saveSVG(pictureSVG(), `${fileBase()}.svg`));
  const banner = errorBanner();
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    kindGroup,
    baselineField,
    thresholdField,
    h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "view" }), viewSelect]),
    busy,
    h("span", { class: "cw-spacer" }),
    pngButton,
    svgButton
  ]);
  const picture = h("div", { class: "cw-comp-picture" });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const note = h("div", { class: "cw-hint cw-comp-note" });
  const pairBox = h("div", { class: "cw-comp-pair" });
  root.append(toolbar, banner.el, picture, readout, note, pairBox);
  const heatmap = new Heatmap({
    label: "composition scores",
    onHover: (hit) => {
      state.hover = hit ? matrixPair(hit.row, hit.col) : null;
      drawMarks();
    },
    onClick: (hit) => {
      const pair = matrixPair(hit.row, hit.col);
      if (pair && Number.isFinite(pair.raw)) clickPair(pair);
    }
  });
  let graphSvg = null;
  function setTrait(values) {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  }
  const info = () => model.get("info") || {};
  const layerLabels = () => info().attn_layers || [];
  const kindIndex = () => Math.max(0, KINDS.indexOf(model.get("kind")));
  const offset = () => model.get("baseline") ? model.get("baseline_value") || 0 : 0;
  const computed = () => (model.get("scores_meta") || {}).computed || [];
  const raw = (l1, h1, l2, h2) => state.values[pairIndex(kindIndex(), l1, h1, l2, h2, state.L, state.H)];
  const headName = (l, hd) => `L${layerLabels()[l]}H${hd}`;
  const selectedPos = () => ({ l: layerLabels().indexOf(model.get("layer")), h: model.get("head") });
  function selectedPairPos() {
    const pair = model.get("selected_pair") || [];
    if (pair.length !== 2) return null;
    const labels = layerLabels();
    return { l1: labels.indexOf(pair[0][0]), h1: pair[0][1], l2: labels.indexOf(pair[1][0]), h2: pair[1][1] };
  }
  function samePair(a, b) {
    return a && b && a.l1 === b.l1 && a.h1 === b.h1 && a.l2 === b.l2 && a.h2 === b.h2;
  }
  function domains() {
    const range = state.values ? scoreRange(state.values, kindIndex(), state.L, state.H) : null;
    const [d0, d1] = rawDomain(range, model.get("baseline_value") || 0);
    const off = offset();
    return { raw: [d0, d1], shown: [d0 - off, d1 - off] };
  }
  function scaleNow() {
    return makeScale("sequential", { dark: theme.dark, domain: domains().shown });
  }
  function matrixPair(row, col) {
    const H = state.H;
    const l1 = Math.floor(row / H);
    const l2 = 1 + Math.floor(col / H);
    const pair = { type: "edge", l1, h1: row % H, l2, h2: col % H };
    pair.raw = raw(pair.l1, pair.h1, pair.l2, pair.h2);
    return pair;
  }
  function clickNode(l, hd) {
    setTrait({ layer: layerLabels()[l], head: hd, selected_pair: [] });
  }
  function clickPair(p) {
    const labels = layerLabels();
    if (samePair(p, selectedPairPos())) {
      setTrait({ selected_pair: [] });
      return;
    }
    setTrait({ selected_pair: [[labels[p.l1], p.h1], [labels[p.l2], p.h2]], layer: labels[p.l2], head: p.h2 });
  }
  function showError() {
    let message = model.get("error") || state.localError;
    const kind = model.get("kind");
    if (!message && standalone && state.values && !computed().includes(kind)) message = `${kind}-composition was not computed when this page was saved`;
    banner.show(message);
  }
  function mark(what) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwView = model.get("view");
    root.dataset.cwCompKind = model.get("kind");
    root.dataset.cwShown = String(state.shown);
    root.dataset.cwThreshold = String(state.threshold);
    root.dataset.cwComputed = computed().join(",");
    root.dataset.cwLayer = String(model.get("layer"));
    root.dataset.cwHead = String(model.get("head"));
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what } }));
  }
  function pairText(p) {
    const kind = model.get("kind");
    const base = model.get("baseline_value") || 0;
    const r = raw(p.l1, p.h1, p.l2, p.h2);
    if (!Number.isFinite(r)) return `${headName(p.l1, p.h1)} → ${headName(p.l2, p.h2)} · undefined (the writer must be in an earlier layer)`;
    const shown = model.get("baseline") ? `${kind}-composition ${formatValue(r - base)} (raw ${formatValue(r)} − baseline ${formatValue(base, 3)})` : `${kind}-composition ${formatValue(r)} (baseline ${formatValue(base, 3)})`;
    return `${headName(p.l1, p.h1)} → ${headName(p.l2, p.h2)} · ${shown}`;
  }
  function drawReadout() {
    const hover = state.hover;
    const sel = selectedPairPos();
    let text;
    if (hover && hover.type === "edge") text = pairText(hover);
    else if (hover && hover.type === "node") text = `${headName(hover.l, hover.h)} · click to select this head`;
    else if (sel && sel.l1 >= 0 && sel.l2 >= 0 && state.values) text = `selected: ${pairText(sel)} · click it again to release`;
    else text = state.values ? `selected head ${headName(selectedPos().l, selectedPos().h)} · hover a pair for its score, click to select` : "no scores yet";
    readout.textContent = text;
  }
  function drawNote() {
    const base = model.get("baseline_value") || 0;
    const d = info().d_model;
    const units = model.get("baseline") ? "baseline-corrected (raw − baseline)" : "raw";
    const shownText = model.get("view") === "graph" ? `${state.shown} of ${state.passing} pair${state.passing === 1 ? "" : "s"} above the threshold drawn${state.passing > state.shown ? " (the strongest)" : ""}` : `${state.shown} pair${state.shown === 1 ? "" : "s"} above the threshold`;
    note.textContent = `${units} scores · baseline ${formatValue(base, 3)}: what random matrices of these shapes score (≈ 1/√d_model = ${formatValue(1 / Math.sqrt(d || 1), 3)}) · ${shownText}`;
  }
  function buildGraph() {
    const { L, H } = state;
    const lay = graphLayout({ layers: L, heads: H, maxWidth: Math.max(420, Math.min(900, root.clientWidth || 760)) });
    const scale = scaleNow();
    const off = offset();
    const { shown: [s0, s1] } = domains();
    const { edges, passing } = visibleEdges(state.values, kindIndex(), L, H, state.threshold, off, MAX_EDGES);
    state.shown = edges.length;
    state.passing = passing;
    const pos = (l, hd) => lay.nodes[l * H + hd];
    const sel = selectedPos();
    const selPair = selectedPairPos();
    const hover = state.hover;
    const root_ = svg("svg", { xmlns: "http://www.w3.org/2000/svg", width: lay.width, height: lay.height, viewBox: `0 0 ${lay.width} ${lay.height}`, role: "img", "aria-label": `${model.get("kind")}-composition graph`, class: "cw-comp-graph" });
    root_.append(svg("rect", { width: "100%", height: "100%", fill: theme.bgCss }));
    root_.append(svg("text", { x: 6, y: 15, "font-size": 12, "font-weight": 600, "font-family": theme.font, fill: theme.fg }, `${model.get("kind")}-composition${model.get("baseline") ? " (minus baseline)" : ""}`));
    layerLabels().forEach((lab, l) => {
      root_.append(svg("text", { x: lay.left + l * lay.colW, y: lay.top - 10, "text-anchor": "middle", "font-size": 11, "font-family": theme.font, fill: theme.muted }, `layer ${lab}`));
    });
    const edgeGroup = svg("g", { class: "cw-edges", fill: "none" });
    for (const e of edges) {
      const a = pos(e.l1, e.h1);
      const b = pos(e.l2, e.h2);
      const d = edgePath(a.x + lay.radius, a.y, b.x - lay.radius, b.y);
      const isSel = samePair(e, selPair);
      const isHover = hover && hover.type === "edge" && samePair(e, hover);
      const width = edgeWidth(e.value, state.threshold, s1);
      if (isSel || isHover) edgeGroup.append(svg("path", { d, stroke: theme.accent, "stroke-width": width + 4, "stroke-opacity": isSel ? 0.9 : 0.5, "pointer-events": "none" }));
      edgeGroup.append(svg("path", { d, stroke: scale.css(e.value), "stroke-width": width, "stroke-linecap": "round", "stroke-opacity": 0.9, class: "cw-edge", "data-edge": `${e.l1},${e.h1},${e.l2},${e.h2}`, "data-value": e.value, "data-raw": e.raw, "pointer-events": "none" }));
      edgeGroup.append(svg("path", { d, stroke: "transparent", "stroke-width": Math.max(8, width + 4), class: "cw-edge-hit", "data-edge": `${e.l1},${e.h1},${e.l2},${e.h2}`, "pointer-events": "stroke" }));
    }
    root_.append(edgeGroup);
    const nodeGroup = svg("g", { class: "cw-nodes" });
    for (const n of lay.nodes) {
      const isSel = n.l === sel.l && n.h === sel.h;
      const inPair = selPair && (n.l === selPair.l1 && n.h === selPair.h1 || n.l === selPair.l2 && n.h === selPair.h2);
      const g = svg("g", { class: "cw-node", "data-node": `${n.l},${n.h}`, cursor: "pointer" });
      g.append(svg("circle", { cx: n.x, cy: n.y, r: lay.radius, fill: inPair ? theme.accent : theme.bgCss, stroke: isSel ? theme.accent : theme.muted, "stroke-width": isSel ? 3 : 1.2 }));
      if (lay.radius >= 7) g.append(svg("text", { x: n.x, y: n.y + 0.5, "text-anchor": "middle", "dominant-baseline": "central", "font-size": Math.round(lay.radius * 1.1), "font-family": theme.font, fill: inPair ? readableText(hexOrRgb(theme.accent)) : theme.fg, "pointer-events": "none" }, String(n.h)));
      nodeGroup.append(g);
    }
    root_.append(nodeGroup);
    root_.append(svg("text", { x: 6, y: lay.height - 6, "font-size": 10, "font-family": theme.font, fill: theme.muted }, "nodes: heads (number = head index) · edges: earlier head → later head"));
    appendColourBar(root_, { x: lay.plotRight + lay.radius + 64, y: lay.top, h: Math.min(220, Math.max(100, lay.height - lay.top - 30)), scale });
    return root_;
  }
  function appendColourBar(parent, { x, y, h: barH, scale }) {
    const [d0, d1] = scale.domain;
    const id = `cwcomp${Math.random().toString(36).slice(2, 8)}`;
    const defs = svg("defs");
    const grad = svg("linearGradient", { id, x1: 0, y1: 0, x2: 0, y2: 1 });
    for (let k = 0; k <= 16; k++) grad.append(svg("stop", { offset: k / 16, "stop-color": scale.css(d1 - (d1 - d0) * k / 16) }));
    defs.append(grad);
    parent.append(defs);
    parent.append(svg("rect", { x, y, width: 12, height: barH, fill: `url(#${id})`, stroke: theme.border }));
    const yOf = (v) => y + (d1 - v) / (d1 - d0) * barH;
    for (const t of niceTicks(d0, d1, 5)) {
      parent.append(svg("line", { x1: x + 12, y1: yOf(t), x2: x + 16, y2: yOf(t), stroke: theme.muted }));
      parent.append(svg("text", { x: x + 18, y: yOf(t), "dominant-baseline": "central", "font-size": 10, "font-family": theme.font, fill: theme.muted }, formatValue(t, 3)));
    }
    const base = model.get("baseline") ? 0 : model.get("baseline_value") || 0;
    if (base >= d0 && base <= d1) {
      parent.append(svg("line", { x1: x - 4, y1: yOf(base), x2: x + 16, y2: yOf(base), stroke: theme.fg, "stroke-width": 1.5, "stroke-dasharray": "3 2", class: "cw-baseline-mark" }));
      parent.append(svg("text", { x: x - 6, y: yOf(base), "text-anchor": "end", "dominant-baseline": "central", "font-size": 10, "font-family": theme.font, fill: theme.fg }, "baseline"));
    }
    const thr = Math.max(d0, Math.min(d1, state.threshold));
    parent.append(svg("path", { d: `M ${x - 1} ${yOf(thr)} l -6 -4 l 0 8 z`, fill: theme.accent, class: "cw-threshold-mark" }));
  }
  function drawMatrix() {
    const { L, H } = state;
    if (L < 2) {
      picture.replaceChildren(h("div", { class: "cw-hint", text: "one attention layer: no head reads another's output" }));
      state.shown = 0;
      return;
    }
    const labels = layerLabels();
    const rows = flatHeads(labels, H, 0, L - 1);
    const cols = flatHeads(labels, H, 1, L);
    const scale = scaleNow();
    const off = offset();
    const bg = theme.bg;
    const nanPx = packRGBA(...scale.nan);
    let shown = 0;
    heatmap.update({
      rows: rows.length,
      cols: cols.length,
      paint: (pixels) => {
        for (let r = 0; r < rows.length; r++) {
          for (let c = 0; c < cols.length; c++) {
            const v0 = raw(rows[r].l, rows[r].h, cols[c].l, cols[c].h);
            let px = nanPx;
            if (Number.isFinite(v0)) {
              const v = v0 - off;
              const [cr, cg, cb] = scale.rgb(v);
              if (v >= state.threshold) {
                shown++;
                px = packRGBA(cr, cg, cb);
              } else {
                px = packRGBA(Math.round(bg[0] * 0.8 + cr * 0.2), Math.round(bg[1] * 0.8 + cg * 0.2), Math.round(bg[2] * 0.8 + cb * 0.2));
              }
            }
            pixels[r * cols.length + c] = px;
          }
        }
      },
      rowLabels: rows.map((x) => x.label),
      colLabels: cols.map((x) => x.label),
      title: `${model.get("kind")}-composition${model.get("baseline") ? " (minus baseline)" : ""}`,
      yTitle: "writer ↓",
      xTitle: "reader →",
      scale,
      theme,
      maxPlot: Math.max(240, Math.min(560, (root.clientWidth || 700) - 220))
    });
    state.shown = shown;
    state.passing = shown;
    drawBarMarks();
    if (!picture.contains(heatmap.el)) picture.replaceChildren(heatmap.el);
  }
  function barGeometry() {
    const { layout } = heatmap.scene;
    const barH = Math.max(120, layout.plotH);
    return { x: layout.barX, y: layout.top, h: barH };
  }
  function barMarkOps() {
    const scale = scaleNow();
    const [d0, d1] = scale.domain;
    const { x, y, h: barH } = barGeometry();
    const yOf = (v) => y + (d1 - v) / (d1 - d0) * barH;
    const ops = [];
    const base = model.get("baseline") ? 0 : model.get("baseline_value") || 0;
    if (base >= d0 && base <= d1) ops.push({ kind: "baseline", y: yOf(base), x });
    ops.push({ kind: "threshold", y: yOf(Math.max(d0, Math.min(d1, state.threshold))), x });
    return ops;
  }
  function drawBarMarks() {
    const ctx = heatmap.canvas.getContext("2d");
    const dpr = globalThis.devicePixelRatio || 1;
    ctx.save();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    for (const op of barMarkOps()) {
      if (op.kind === "baseline") {
        ctx.strokeStyle = theme.fg;
        ctx.lineWidth = 1.5;
        ctx.setLineDash([3, 2]);
        ctx.beginPath();
        ctx.moveTo(op.x - 4, op.y);
        ctx.lineTo(op.x + 16, op.y);
        ctx.stroke();
        ctx.setLineDash([]);
      } else {
        ctx.fillStyle = theme.accent;
        ctx.beginPath();
        ctx.moveTo(op.x - 1, op.y);
        ctx.lineTo(op.x - 7, op.y - 4);
        ctx.lineTo(op.x - 7, op.y + 4);
        ctx.closePath();
        ctx.fill();
      }
    }
    ctx.restore();
  }
  function barMarksSVG() {
    return barMarkOps().map((op) => op.kind === "baseline" ? `<line x1="${op.x - 4}" y1="${op.y.toFixed(2)}" x2="${op.x + 16}" y2="${op.y.toFixed(2)}" stroke="${theme.fg}" stroke-width="1.5" stroke-dasharray="3 2"/>` : `<path d="M ${op.x - 1} ${op.y.toFixed(2)} l -6 -4 l 0 8 z" fill="${theme.accent}"/>`).join("\n");
  }
  function drawMarks() {
    if (model.get("view") === "graph") {
      draw();
      return;
    }
    const H = state.H;
    const hover = state.hover;
    const sel = selectedPairPos();
    heatmap.setHighlight({
      row: hover ? hover.l1 * H + hover.h1 : null,
      col: hover ? (hover.l2 - 1) * H + hover.h2 : null
    });
    if (sel && sel.l1 >= 0 && sel.l2 >= 1 && heatmap.scene) {
      const { left, top, cell } = heatmap.scene.layout;
      const ctx = heatmap.overlay.getContext("2d");
      ctx.save();
      ctx.strokeStyle = theme.accent;
      ctx.lineWidth = 2;
      ctx.strokeRect(left + ((sel.l2 - 1) * H + sel.h2) * cell - 1, top + (sel.l1 * H + sel.h1) * cell - 1, Math.max(cell, 2) + 2, Math.max(cell, 2) + 2);
      ctx.restore();
    }
    drawReadout();
  }
  const pairMaps = [0, 1, 2].map((i) => new Heatmap({
    label: ["first head's pattern", "second head's pattern", "virtual head's pattern"][i],
    onHover: (hit) => pairHover(i, hit)
  }));
  const pairReadout = h("div", { class: "cw-readout" });
  let pairStack = null;
  function pairHover(i, hit) {
    pairMaps.forEach((m, j) => m.setHighlight(hit ? { row: hit.row, col: hit.col } : {}));
    if (!hit || !pairStack) {
      pairReadout.textContent = "hover a cell: query row, key column";
      return;
    }
    const toks = model.get("str_tokens") || [];
    const parts = pairTitles().map((t, j) => `${t} ${formatValue(pairStack.value(j, hit.row, hit.col), 3)}`);
    pairReadout.textContent = `query ${hit.row} ${quote2(toks[hit.row] ?? hit.row)} → key ${hit.col} ${quote2(toks[hit.col] ?? hit.col)} · ${parts.join(" · ")} (≈, uint8)`;
  }
  function pairTitles() {
    const pair = (model.get("pair_meta") || {}).pair || [];
    if (pair.length !== 2) return ["", "", ""];
    const a = `L${pair[0][0]}H${pair[0][1]}`;
    const b = `L${pair[1][0]}H${pair[1][1]}`;
    return [a, b, `virtual ${b}·${a}`];
  }
  function drawPair() {
    const meta = model.get("pair_meta") || {};
    const want = model.get("selected_pair") || [];
    pairStack = null;
    if (want.length !== 2) {
      pairBox.replaceChildren(h("div", { class: "cw-hint", text: "Click an edge to see both heads' attention patterns and their virtual head (the later pattern times the earlier one)." }));
      return;
    }
    if (meta.reason === "no tokens") {
      pairBox.replaceChildren(h("div", { class: "cw-hint", text: "Pass prompt= or tokens= to CompositionDiagram to see the selected pair's patterns and their virtual head." }));
      return;
    }
    if (JSON.stringify(meta.pair) !== JSON.stringify(want) || !meta.shape) {
      const why = standalone ? "this page holds only the pair selected when it was saved (no kernel to compute others)" : "computing the pair's patterns…";
      pairBox.replaceChildren(h("div", { class: "cw-hint", text: why }));
      return;
    }
    try {
      pairStack = new CodeStack(model.get("pair_patterns"), meta);
    } catch (err) {
      pairBox.replaceChildren(h("div", { class: "cw-error", text: `could not read the pair's patterns: ${err.message}` }));
      return;
    }
    const toks = model.get("str_tokens") || [];
    const scale = makeScale("sequential", { dark: theme.dark });
    const lut = scale.lut(pairStack);
    const titles = pairTitles();
    const size = Math.max(120, Math.min(240, ((root.clientWidth || 760) - 40) / 3 - 170));
    pairMaps.forEach((m, i) => {
      m.update({
        rows: pairStack.rows,
        cols: pairStack.cols,
        paint: (pixels) => pairStack.paint(i, lut, pixels, 0),
        rowLabels: toks,
        colLabels: toks,
        title: titles[i],
        yTitle: "query ↓",
        xTitle: "key →",
        scale: i === 2 ? scale : null,
        theme,
        maxPlot: size
      });
    });
    pairReadout.textContent = "hover a cell: query row, key column";
    const row = h("div", { class: "cw-comp-pair-row" }, pairMaps.map((m) => m.el));
    pairBox.replaceChildren(h("div", { class: "cw-field-label", text: "Selected pair on the prompt: attention patterns and the virtual head" }), row, pairReadout);
  }
  function syncControls() {
    const kind = model.get("kind");
    kindButtons.forEach((b) => {
      const on = b.dataset.kind === kind;
      b.classList.toggle("cw-seg-on", on);
      b.setAttribute("aria-pressed", on ? "true" : "false");
    });
    baselineBox.checked = !!model.get("baseline");
    viewSelect.value = model.get("view");
    const { shown: [s0, s1] } = domains();
    const lo = Math.min(s0, state.threshold);
    const hi = Math.max(s1, state.threshold);
    slider.min = String(lo);
    slider.max = String(hi);
    slider.step = String(sliderStep(lo, hi));
    slider.value = String(state.threshold);
    sliderText.textContent = formatValue(state.threshold, 3);
  }
  function draw() {
    if (!state.values) return;
    if (model.get("view") === "graph") {
      graphSvg = buildGraph();
      picture.replaceChildren(graphSvg);
    } else {
      drawMatrix();
      drawMarks();
    }
    drawReadout();
    drawNote();
    mark("main");
  }
  function onScores() {
    const meta = model.get("scores_meta") || {};
    if (!meta.shape) {
      state.values = null;
      picture.replaceChildren(h("div", { class: "cw-hint cw-comp-wait", text: "computing composition scores…" }));
      syncControls();
      showError();
      return;
    }
    try {
      const [K, L, H] = meta.shape || [0, 0, 0];
      const values = float32Of(model.get("scores"));
      if (values.length !== K * L * H * L * H || !L) throw new RangeError(`scores hold ${values.length} values; shape ${JSON.stringify(meta.shape)}`);
      state.values = values;
      state.L = L;
      state.H = H;
      state.localError = "";
    } catch (err) {
      state.values = null;
      state.localError = `could not read the scores: ${err.message}`;
    }
    syncControls();
    showError();
    draw();
  }
  const target = (e) => {
    const edge = e.target.closest && e.target.closest("[data-edge]");
    if (edge) {
      const [l1, h1, l2, h2] = edge.dataset.edge.split(",").map(Number);
      return { type: "edge", l1, h1, l2, h2 };
    }
    const node = e.target.closest && e.target.closest("[data-node]");
    if (node) {
      const [l, hd] = node.dataset.node.split(",").map(Number);
      return { type: "node", l, h: hd };
    }
    return null;
  };
  const sameHover = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const onOver = (e) => {
    if (model.get("view") !== "graph") return;
    const t = target(e);
    if (!sameHover(t, state.hover)) {
      state.hover = t;
      draw();
    }
  };
  const onLeave = () => {
    if (model.get("view") === "graph" && state.hover) {
      state.hover = null;
      draw();
    }
  };
  const onClick = (e) => {
    if (model.get("view") !== "graph") return;
    const t = target(e);
    if (!t) return;
    if (t.type === "node") clickNode(t.l, t.h);
    else clickPair(t);
  };
  picture.addEventListener("mouseover", onOver);
  picture.addEventListener("mouseleave", onLeave);
  picture.addEventListener("click", onClick);
  function pictureSVG() {
    if (model.get("view") === "graph") return new XMLSerializer().serializeToString(buildGraph());
    return heatmap.toSVG().replace("</svg>", `${barMarksSVG()}
</svg>`);
  }
  function savePicturePNG() {
    if (model.get("view") !== "graph") {
      savePNG(heatmap.toCanvas(), `${fileBase()}.png`);
      return;
    }
    const text = pictureSVG();
    const image = new Image();
    const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
    image.onload = () => {
      const dpr = Math.max(2, globalThis.devicePixelRatio || 1);
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(image.width * dpr);
      canvas.height = Math.round(image.height * dpr);
      const ctx = canvas.getContext("2d");
      ctx.scale(dpr, dpr);
      ctx.drawImage(image, 0, 0);
      URL.revokeObjectURL(url);
      savePNG(canvas, `${fileBase()}.png`);
    };
    image.onerror = () => {
      URL.revokeObjectURL(url);
      download(new Blob([text], { type: "image/svg+xml" }), `${fileBase()}.svg`);
    };
    image.src = url;
  }
  const onThreshold = () => {
    const v = model.get("threshold");
    if (v !== state.threshold) {
      state.threshold = v;
      syncControls();
      draw();
    }
  };
  const onControls = () => {
    state.threshold = model.get("threshold");
    state.hover = null;
    syncControls();
    showError();
    draw();
  };
  const onBusy = () => {
    busy.hidden = !model.get("busy");
    busy.textContent = `computing ${model.get("kind")}-composition…`;
  };
  const onSelection = () => {
    draw();
  };
  const handlers = {
    "change:scores_meta": onScores,
    "change:threshold": onThreshold,
    "change:kind": onControls,
    "change:baseline": onControls,
    "change:view": onControls,
    "change:layer": onSelection,
    "change:head": onSelection,
    "change:selected_pair": () => {
      draw();
      drawPair();
    },
    "change:pair_meta": drawPair,
    "change:error": showError,
    "change:busy": onBusy
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);
  const onKey = (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    if (e.key === "Escape") setTrait({ selected_pair: [] });
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    draw();
    drawPair();
  });
  let lastWidth = 0;
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    if (width > 0 && Math.abs(width - lastWidth) > 40) {
      lastWidth = width;
      draw();
      drawPair();
    }
  }) : null;
  if (resize) resize.observe(root);
  onBusy();
  onScores();
  drawPair();
  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    picture.removeEventListener("mouseover", onOver);
    picture.removeEventListener("mouseleave", onLeave);
    picture.removeEventListener("click", onClick);
    root.removeEventListener("keydown", onKey);
    sendThreshold.cancel();
    stopTheme();
    if (resize) resize.disconnect();
    heatmap.destroy();
    pairMaps.forEach((m) => m.destroy());
    root.remove();
  };
}

// js/views/headscores.js
var headscores_exports = {};
__export(headscores_exports, {
  render: () => render3
});
function render3({ model, el }) {
  const standalone = model.standalone === true;
  const root = h("div", { class: "cw-root cw-headscores", attrs: { tabindex: 0, "data-cw-kind": "headscores" } });
  el.append(root);
  let theme = readTheme(root);
  const state = { values: null, K: 0, L: 0, H: 0, hover: null, draws: 0, localError: "" };
  const info = () => model.get("info") || {};
  const meta = () => model.get("scores_meta") || {};
  const kinds = () => meta().kinds || model.get("kinds") || [];
  const label = (k) => (info().labels || {})[k] || k;
  const kindSelect = h("select", { class: "cw-select", attrs: { "aria-label": "score" } });
  kindSelect.addEventListener("change", () => setTrait({ kind: kindSelect.value }));
  const kindField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Score" }), kindSelect]);
  const layerSelect = selectControl("Layer", (layer) => setTrait({ layer }));
  const headSelect = selectControl("Head", (head) => setTrait({ head }));
  const busy = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  busy.hidden = true;
  const fileBase = () => safeName(`headscores_${model.get("kind")}`);
  const pngButton = button("PNG", "save the grid as PNG", () => savePNG(heatmap.toCanvas(), `${fileBase()}.png`));
  const svgButton = button("SVG", "save the grid as SVG", () => saveSVG(heatmap.toSVG().replace("</svg>", `${valuesSVG()}
</svg>`), `${fileBase()}.svg`));
  const banner = errorBanner();
  const toolbar = h("div", { class: "cw-toolbar-row" }, [kindField, layerSelect.el, headSelect.el, busy, h("span", { class: "cw-spacer" }), pngButton, svgButton]);
  const thumbs = new ThumbGrid({
    label: "score kinds",
    size: 56,
    draw: drawThumb,
    onClick: (i) => {
      const k = kinds()[i];
      if (k) setTrait({ kind: k });
    }
  });
  const heatmap = new Heatmap({
    label: "head scores",
    onHover: (hit) => {
      state.hover = hit;
      drawMarks();
    },
    onClick: (hit) => {
      const layers = info().attn_layers || [];
      setTrait({ layer: layers[hit.row], head: hit.col });
    }
  });
  const readout = h("div", { class: "cw-readout cw-hs-readout", attrs: { "aria-live": "polite" } });
  const note = h("div", { class: "cw-hint" });
  root.append(toolbar, banner.el, thumbs.el, heatmap.el, readout, note);
  function setTrait(values) {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  }
  const kindIndex = () => Math.max(0, kinds().indexOf(model.get("kind")));
  const computed = (k) => (meta().computed || []).includes(k);
  const value = (k, l, hd) => state.values[(k * state.L + l) * state.H + hd];
  const selectedRow = () => (info().attn_layers || []).indexOf(model.get("layer"));
  const scaleNow = () => makeScale(meta().scale === "diverging" ? "diverging" : "sequential", { dark: theme.dark, domain: meta().domain || [0, 1] });
  const hatch = (r, c) => (r + c) % 2 ? packRGBA(...theme.dark ? [60, 60, 64] : [226, 226, 230]) : packRGBA(...theme.dark ? [44, 44, 48] : [240, 240, 243]);
  function showError() {
    let message = model.get("error") || state.localError;
    const k = model.get("kind");
    if (!message && standalone && state.values && !computed(k)) message = `${label(k)} scores were not computed when this page was saved`;
    banner.show(message);
  }
  function mark(what) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwScore = model.get("kind");
    root.dataset.cwLayer = String(model.get("layer"));
    root.dataset.cwHead = String(model.get("head"));
    root.dataset.cwComputed = (meta().computed || []).join(",");
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what } }));
  }
  function paintKind(k, pixels, scale, cellPx = 1) {
    const { L, H } = state;
    const width = H * cellPx;
    const done = computed(kinds()[k]);
    for (let l = 0; l < L; l++) {
      for (let hd = 0; hd < H; hd++) {
        const px = done ? packRGBA(...scale.rgb(value(k, l, hd))) : hatch(l, hd);
        for (let dy = 0; dy < cellPx; dy++) for (let dx = 0; dx < cellPx; dx++) pixels[(l * cellPx + dy) * width + hd * cellPx + dx] = px;
      }
    }
  }
  const scratch = document.createElement("canvas");
  function drawThumb(i, ctx, px) {
    if (!state.values) return;
    const { L, H } = state;
    const scale = scaleNow();
    scratch.width = H;
    scratch.height = L;
    const sctx = scratch.getContext("2d");
    const image = sctx.createImageData(H, L);
    paintKind(i, new Uint32Array(image.data.buffer), scale);
    sctx.putImageData(image, 0, 0);
    const cell = px / Math.max(L, H);
    const w = cell * H;
    const hgt = cell * L;
    const x0 = (px - w) / 2;
    const y0 = (px - hgt) / 2;
    ctx.fillStyle = theme.bgCss;
    ctx.fillRect(0, 0, px, px);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(scratch, x0, y0, w, hgt);
    const row = selectedRow();
    if (row >= 0) {
      ctx.strokeStyle = theme.accent;
      ctx.lineWidth = Math.max(1, px / 40);
      ctx.strokeRect(x0 + model.get("head") * cell, y0 + row * cell, cell, cell);
    }
  }
  function drawThumbs() {
    const ks = kinds();
    thumbs.setItems(ks.map((k) => computed(k) ? label(k) : `${label(k)} (click to compute)`));
    thumbs.items.forEach(({ el: item }, i) => item.setAttribute("title", (info().descriptions || {})[ks[i]] || ks[i]));
    thumbs.mark(kindIndex(), null, false);
  }
  function cellValues() {
    if (!heatmap.scene || !state.values) return [];
    const { left, top, cell } = heatmap.scene.layout;
    if (cell < 24) return [];
    const k = kindIndex();
    if (!computed(kinds()[k])) return [];
    const scale = scaleNow();
    const out = [];
    for (let l = 0; l < state.L; l++) {
      for (let hd = 0; hd < state.H; hd++) {
        const v = value(k, l, hd);
        if (!Number.isFinite(v)) continue;
        out.push({ x: left + (hd + 0.5) * cell, y: top + (l + 0.5) * cell, text: v.toFixed(2), color: readableText(scale.rgb(v)) });
      }
    }
    return out;
  }
  function valuesSVG() {
    return cellValues().map((c) => `<text x="${c.x.toFixed(1)}" y="${c.y.toFixed(1)}" font-size="10" font-family="${theme.font.replace(/"/g, "'")}" fill="${c.color}" text-anchor="middle" dominant-baseline="central">${c.text}</text>`).join("\n");
  }
  function drawMain() {
    if (!state.values) return;
    const { L, H } = state;
    const k = kindIndex();
    const kind = kinds()[k];
    const scale = scaleNow();
    const layers = info().attn_layers || [];
    heatmap.update({
      rows: L,
      cols: H,
      paint: (pixels) => paintKind(k, pixels, scale),
      rowLabels: layers.map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      title: `${label(kind)} score${computed(kind) ? "" : " (not computed yet)"}`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale,
      theme,
      maxPlot: Math.max(160, Math.min(420, Math.max(L, H) * 28))
    });
    const ctx = heatmap.canvas.getContext("2d");
    const dpr = globalThis.devicePixelRatio || 1;
    ctx.save();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = `10px ${theme.font}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (const c of cellValues()) {
      ctx.fillStyle = c.color;
      ctx.fillText(c.text, c.x, c.y);
    }
    ctx.restore();
    drawMarks();
  }
  function drawMarks() {
    const hover = state.hover;
    heatmap.setHighlight(hover ? { row: hover.row, col: hover.col } : {});
    const row = selectedRow();
    if (heatmap.scene && row >= 0) {
      const { left, top, cell } = heatmap.scene.layout;
      const ctx = heatmap.overlay.getContext("2d");
      ctx.save();
      ctx.strokeStyle = theme.accent;
      ctx.lineWidth = 2.5;
      ctx.strokeRect(left + model.get("head") * cell + 1, top + row * cell + 1, cell - 2, cell - 2);
      ctx.restore();
    }
    drawReadout();
  }
  function drawReadout() {
    if (!state.values) {
      readout.textContent = "no scores yet";
      return;
    }
    const layers = info().attn_layers || [];
    const hover = state.hover;
    const l = hover ? hover.row : selectedRow();
    const hd = hover ? hover.col : model.get("head");
    if (l < 0) {
      readout.textContent = "";
      return;
    }
    const ks = kinds();
    const current = model.get("kind");
    const parts = ks.map((k, i) => {
      if (!computed(k)) return `${label(k)} —`;
      const text = `${label(k)} ${formatValue(value(i, l, hd), 3)}`;
      return k === current ? `[${text}]` : text;
    });
    readout.textContent = `${hover ? "" : "selected "}L${layers[l]} H${hd} · ${parts.join(" · ")}`;
    readout.dataset.cwLayer = String(layers[l]);
    readout.dataset.cwHead = String(hd);
  }
  function drawNote() {
    const k = model.get("kind");
    const desc = (info().descriptions || {})[k] || "";
    const scale = meta().scale === "diverging" ? "one colour scale for every grid, −1 to 1 (0 neutral)" : "one colour scale for every grid, 0 to 1";
    note.textContent = `${label(k)}: ${desc} · ${scale} · attention scores on ${info().ran_on || "random tokens"}`;
  }
  function syncControls() {
    const ks = kinds();
    const key = ks.join("|");
    if (kindSelect.dataset.options !== key) {
      kindSelect.replaceChildren(...ks.map((k) => h("option", { value: k, text: label(k) })));
      kindSelect.dataset.options = key;
    }
    kindSelect.value = model.get("kind");
    const layers = info().attn_layers || [];
    layerSelect.set(layers.map((l) => ({ value: l, label: String(l) })), model.get("layer"));
    headSelect.set(Array.from({ length: info().n_heads || 1 }, (_, i) => ({ value: i, label: String(i) })), model.get("head"));
  }
  function drawAll() {
    syncControls();
    drawThumbs();
    drawMain();
    drawNote();
    showError();
    mark("all");
  }
  function onScores() {
    const m = meta();
    if (!m.shape) {
      state.values = null;
      syncControls();
      drawReadout();
      showError();
      return;
    }
    try {
      const [K, L, H] = m.shape || [0, 0, 0];
      const values = float32Of(model.get("scores"));
      if (!L || values.length !== K * L * H) throw new RangeError(`scores hold ${values.length} values; shape ${JSON.stringify(m.shape)}`);
      Object.assign(state, { values, K, L, H });
      state.localError = "";
    } catch (err) {
      state.values = null;
      state.localError = `could not read the scores: ${err.message}`;
    }
    drawAll();
  }
  const onSelect = () => {
    syncControls();
    thumbs.repaint();
    drawMarks();
    mark("select");
  };
  const onKind = () => {
    state.hover = null;
    drawAll();
  };
  const onBusy = () => {
    busy.hidden = !model.get("busy");
    busy.textContent = `computing ${label(model.get("kind"))} scores…`;
  };
  const handlers = {
    "change:scores_meta": onScores,
    "change:kind": onKind,
    "change:layer": onSelect,
    "change:head": onSelect,
    "change:error": showError,
    "change:busy": onBusy
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);
  const onKey = (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    const layers = info().attn_layers || [];
    const row = selectedRow();
    const n = info().n_heads || 1;
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      const next = model.get("head") + (e.key === "ArrowRight" ? 1 : -1);
      if (next >= 0 && next < n) setTrait({ head: next });
    } else if (e.key === "ArrowUp" || e.key === "ArrowDown") {
      e.preventDefault();
      const next = row + (e.key === "ArrowDown" ? 1 : -1);
      if (next >= 0 && next < layers.length) setTrait({ layer: layers[next] });
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    drawAll();
  });
  onBusy();
  onScores();
  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    root.removeEventListener("keydown", onKey);
    stopTheme();
    heatmap.destroy();
    thumbs.destroy();
    root.remove();
  };
}

// js/views/ov.js
var ov_exports = {};
__export(ov_exports, {
  drawDiagonal: () => drawDiagonal,
  exactValue: () => exactValue,
  headStack: () => headStack,
  headToolbar: () => headToolbar,
  heatmapSVGWithDiagonal: () => heatmapSVGWithDiagonal,
  quote: () => quote3,
  render: () => render4,
  setHeadOn: () => setHeadOn
});

// js/lib/plane.js
var xml2 = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
var num2 = (v) => +v.toFixed(2);
function maxModulus(points) {
  let m = 0;
  for (const [re, im] of points) {
    const r = Math.hypot(re, im);
    if (Number.isFinite(r) && r > m) m = r;
  }
  return m;
}
function planeScene({ points, size = 240, theme, title = "" }) {
  const pad = 26;
  const top = title ? 24 : 6;
  const width = size;
  const height = size + top - 6;
  const plot = size - 2 * pad;
  const cx = pad + plot / 2;
  const cy = top + pad - 6 + plot / 2;
  const extent = 1.15;
  const unit = plot / 2 / extent;
  const scale = maxModulus(points) || 1;
  const toPx = (re, im) => [cx + re / scale * unit, cy - im / scale * unit];
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
function nearestDot(scene, x, y, radius = 7) {
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
function drawPlane(ctx, scene) {
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
function planeToSVG(scene, theme) {
  const anchor = { left: "start", right: "end", center: "middle" };
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${scene.width}" height="${scene.height}" viewBox="0 0 ${scene.width} ${scene.height}">`];
  parts.push(`<rect width="100%" height="100%" fill="${xml2(theme.bgCss)}"/>`);
  for (const op of scene.ops) {
    if (op.type === "line") {
      parts.push(`<line x1="${num2(op.x1)}" y1="${num2(op.y1)}" x2="${num2(op.x2)}" y2="${num2(op.y2)}" stroke="${xml2(op.stroke)}"/>`);
    } else if (op.type === "circle") {
      const dash = op.dash ? ` stroke-dasharray="${op.dash.join(" ")}"` : "";
      parts.push(`<circle cx="${num2(op.x)}" cy="${num2(op.y)}" r="${num2(op.r)}" fill="none" stroke="${xml2(op.stroke)}"${dash}/>`);
    } else if (op.type === "dot") {
      parts.push(`<circle cx="${num2(op.x)}" cy="${num2(op.y)}" r="${op.r}" fill="${xml2(op.fill)}" fill-opacity="${op.alpha ?? 1}"/>`);
    } else if (op.type === "text" && op.text) {
      const [size, ...family] = op.font.replace(/^600 /, "").split(" ");
      const weight = op.font.startsWith("600 ") ? ' font-weight="600"' : "";
      parts.push(`<text x="${num2(op.x)}" y="${num2(op.y)}" font-size="${parseFloat(size)}" font-family="${xml2(family.join(" "))}"${weight} fill="${xml2(op.color)}" text-anchor="${anchor[op.align || "left"]}">${xml2(op.text)}</text>`);
    }
  }
  parts.push("</svg>");
  return parts.join("\n");
}
function composeCanvases(pictures, bg, gap = 16) {
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
function svgSize(svg2) {
  const w = /<svg[^>]*\swidth="([\d.]+)"/.exec(svg2);
  const h2 = /<svg[^>]*\sheight="([\d.]+)"/.exec(svg2);
  return { width: w ? +w[1] : 0, height: h2 ? +h2[1] : 0 };
}
function composeSVG(parts, bg, gap = 16) {
  const sizes = parts.map(svgSize);
  const width = sizes.reduce((w, s) => w + s.width, 0) + gap * Math.max(0, parts.length - 1);
  const height = sizes.reduce((m, s) => Math.max(m, s.height), 0);
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  out.push(`<rect width="100%" height="100%" fill="${xml2(bg)}"/>`);
  let x = 0;
  parts.forEach((svg2, i) => {
    out.push(svg2.replace('<svg xmlns="http://www.w3.org/2000/svg"', `<svg x="${x}" y="0"`));
    x += sizes[i].width + gap;
  });
  out.push("</svg>");
  return out.join("\n");
}

// js/views/ov.js
var quote3 = (s) => `“${truncate(displayToken(s), 24)}”`;
function headStack(data, meta, h2) {
  if (!meta || !Array.isArray(meta.shape) || meta.shape.length !== 3) return null;
  const [nHeads, rows, cols] = meta.shape;
  if (h2 < 0 || h2 >= nHeads || !rows || !cols) return null;
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const size = rows * cols;
  const [lo, hi] = meta.ranges[h2];
  return new CodeStack(bytes.subarray(h2 * size, (h2 + 1) * size), { dtype: "uint8", shape: [rows, cols], lo, hi, layout: "full", nan_code: meta.nan_code });
}
function exactValue(data, meta, m, r, c) {
  if (!meta || !Array.isArray(meta.shape) || !data || !data.byteLength) return null;
  const [, rows, cols] = meta.shape;
  const values = float32Of(data);
  const i = (m * rows + r) * cols + c;
  return i < values.length ? values[i] : null;
}
function headToolbar({ model, standalone, onHead, onPNG, onSVG, kind }) {
  const layerSelect = selectControl("Layer", (layer) => {
    model.set("layer", layer);
    model.save_changes();
  });
  const headSelect = selectControl("Head", (head) => onHead(head));
  layerSelect.disable(standalone);
  const busy = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  const png = button("PNG", `save the ${kind} view as PNG`, onPNG);
  const svg2 = button("SVG", `save the ${kind} view as SVG`, onSVG);
  const el = h("div", { class: "cw-toolbar" }, [
    h("div", { class: "cw-toolbar-row" }, [layerSelect.el, headSelect.el, busy, h("span", { class: "cw-spacer" }), png, svg2])
  ]);
  const shownLayer = (metaName) => (model.get(metaName) || {}).layer ?? model.get("layer");
  return {
    el,
    sync(metaName) {
      const info = model.get("info") || {};
      const layers = info.attn_layers || [model.get("layer")];
      const layer = shownLayer(metaName);
      layerSelect.set(standalone ? [{ value: layer, label: String(layer) }] : layers.map((l) => ({ value: l, label: String(l) })), standalone ? layer : model.get("layer"));
      headSelect.set(Array.from({ length: info.n_heads || 1 }, (_, i) => ({ value: i, label: String(i) })), model.get("head"));
    },
    setHead(head) {
      headSelect.select.value = String(head);
    },
    busy(text) {
      busy.textContent = text || "";
      busy.hidden = !text;
    }
  };
}
function setHeadOn(model, head) {
  const n = (model.get("info") || {}).n_heads || 1;
  const next = Math.max(0, Math.min(n - 1, head));
  if (next === model.get("head")) return false;
  model.set("head", next);
  model.save_changes();
  return true;
}
function drawDiagonal(marks, heatmap, theme) {
  const scene = heatmap.scene;
  if (!scene) return [];
  const dpr = globalThis.devicePixelRatio || 1;
  marks.width = heatmap.canvas.width;
  marks.height = heatmap.canvas.height;
  marks.style.width = heatmap.canvas.style.width;
  marks.style.height = heatmap.canvas.style.height;
  const ctx = marks.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, marks.width, marks.height);
  const { left, top, cell } = scene.layout;
  const n = Math.min(heatmap.spec.rows, heatmap.spec.cols);
  const rects = [];
  for (let i = 0; i < n; i++) rects.push([left + i * cell, top + i * cell, cell, cell]);
  ctx.strokeStyle = theme.fg;
  ctx.globalAlpha = cell >= 5 ? 0.85 : 0.45;
  ctx.lineWidth = cell >= 5 ? 1 : 0.6;
  for (const [x, y, w, hh] of rects) ctx.strokeRect(x + 0.5, y + 0.5, Math.max(0.5, w - 1), Math.max(0.5, hh - 1));
  return rects;
}
function heatmapSVGWithDiagonal(heatmap, rects, theme) {
  const marks = rects.map(([x, y, w, hh]) => `<rect x="${+(x + 0.5).toFixed(2)}" y="${+(y + 0.5).toFixed(2)}" width="${+Math.max(0.5, w - 1).toFixed(2)}" height="${+Math.max(0.5, hh - 1).toFixed(2)}" fill="none" stroke="${theme.fg}" stroke-opacity="0.85"/>`).join("");
  return heatmap.toSVG().replace(/<\/svg>\s*$/, `${marks}</svg>`);
}
var percent = (v) => v == null ? null : `${(100 * v).toFixed(1)} %`;
function render4({ model, el }) {
  const standalone = model.standalone === true;
  const state = { hover: null, lock: null, eigHover: null, draws: 0, localError: "", rects: [] };
  const root = h("div", { class: "cw-root cw-ov", attrs: { tabindex: 0, "data-cw-kind": "ov" } });
  el.append(root);
  let theme = readTheme(root);
  let maxPlot = 460;
  const head = () => model.get("head");
  const layer = () => (model.get("ov_meta") || {}).layer ?? model.get("layer");
  const fileBase = () => safeName(`ov_L${layer()}H${head()}`);
  const toolbar = headToolbar({
    model,
    standalone,
    kind: "OV",
    onHead: (hd) => setHeadOn(model, hd) || draw(),
    onPNG: () => savePNG(picture(), `${fileBase()}.png`),
    onSVG: () => saveSVG(pictureSVG(), `${fileBase()}.svg`)
  });
  const banner = errorBanner();
  const criterion = h("div", { class: "cw-hint cw-criterion" });
  const heatmap = new Heatmap({
    label: "full OV circuit",
    onHover: (hit) => {
      state.hover = hit;
      selectionChanged();
    },
    onClick: (hit) => {
      const same = state.lock && state.lock.row === hit.row && state.lock.col === hit.col;
      state.lock = same ? null : hit;
      selectionChanged();
    }
  });
  const marks = h("canvas", { class: "cw-diag-marks" });
  heatmap.el.insertBefore(marks, heatmap.overlay);
  const planeCanvas = h("canvas", { class: "cw-plane", attrs: { role: "img", "aria-label": "eigenvalues on the complex plane" } });
  const stat = (label, title) => {
    const value = h("span", { class: "cw-stat-value" });
    const row = h("div", { class: "cw-stat", attrs: { title } }, [h("span", { class: "cw-stat-label", text: label }), value]);
    return { row, value };
  };
  const copying = stat("copying score", "Σλ / Σ|λ| over the eigenvalues of W_E W_V W_O W_U: 1 means the head copies the token it attends to");
  const top1 = stat("top-1 accuracy", "share of all tokens whose own logit is the largest of their row of the full OV circuit");
  const top5 = stat("top-5 accuracy", "share of all tokens whose own logit is among the 5 largest of their row");
  const eigNote = h("div", { class: "cw-hint cw-eig-note" });
  const side = h("div", { class: "cw-ov-side" }, [planeCanvas, eigNote, h("div", { class: "cw-stats" }, [copying.row, top1.row, top5.row])]);
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  root.append(toolbar.el, banner.el, criterion, h("div", { class: "cw-ov-main" }, [heatmap.el, side]), readout);
  let stack = null;
  let scene = null;
  const selection = () => state.lock || state.hover;
  function showError() {
    banner.show(model.get("error") || state.localError);
  }
  function showBusy() {
    if (standalone) return toolbar.busy("");
    toolbar.busy(model.get("progress") || (model.get("busy") ? "computing…" : ""));
  }
  function mark(t0) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwHead = String(head());
    root.dataset.cwLayer = String(layer());
    root.dataset.cwTokens = String(stack ? stack.rows : 0);
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what: "ov", ms: performance.now() - t0 } }));
  }
  function eigenPoints() {
    const meta = model.get("eigenvalues_meta") || {};
    const data = model.get("eigenvalues");
    if (!meta.shape || !data || !data.byteLength) return [];
    const [nHeads, d] = meta.shape;
    if (head() >= nHeads) return [];
    const values = float32Of(data);
    const out = [];
    for (let i = 0; i < d; i++) out.push([values[(head() * d + i) * 2], values[(head() * d + i) * 2 + 1]]);
    return out;
  }
  function draw() {
    const t0 = performance.now();
    toolbar.setHead(head());
    try {
      stack = headStack(model.get("ov"), model.get("ov_meta"), head());
    } catch (err) {
      stack = null;
      state.localError = `could not read the OV payload: ${err.message}`;
    }
    showError();
    if (!stack) return;
    const tokens = model.get("str_tokens") || [];
    const scale = makeScale("diverging", { dark: theme.dark, domain: [stack.lo, stack.hi] });
    const lut = scale.lut(stack);
    heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(0, lut, pixels, 0),
      rowLabels: tokens,
      colLabels: tokens,
      title: `Full OV circuit, layer ${layer()} head ${head()}`,
      yTitle: "source ↓",
      xTitle: "logit →",
      scale,
      theme,
      maxPlot
    });
    state.rects = drawDiagonal(marks, heatmap, theme);
    drawPlaneAndStats();
    drawSelection();
    mark(t0);
  }
  function drawPlaneAndStats() {
    const points = eigenPoints();
    scene = planeScene({ points, size: 250, theme, title: "Eigenvalues of W_E W_OV W_U" });
    const dpr = globalThis.devicePixelRatio || 1;
    planeCanvas.width = Math.round(scene.width * dpr);
    planeCanvas.height = Math.round(scene.height * dpr);
    planeCanvas.style.width = `${scene.width}px`;
    planeCanvas.style.height = `${scene.height}px`;
    const ctx = planeCanvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, scene.width, scene.height);
    drawPlane(ctx, scene);
    if (state.eigHover) {
      const d = scene.dots.find((dot) => dot.i === state.eigHover.i);
      if (d) {
        ctx.strokeStyle = theme.fg;
        ctx.lineWidth = 1.5;
        ctx.beginPath();
        ctx.arc(d.x, d.y, 6, 0, 2 * Math.PI);
        ctx.stroke();
      }
    }
    const n = points.filter(([re, im]) => Number.isFinite(re) && Number.isFinite(im)).length;
    eigNote.textContent = n ? `${n} eigenvalues (d_head × d_head form), shown as λ / max|λ|, max|λ| = ${formatValue(scene.scale)}` : "no eigenvalues";
    const stats = (model.get("stats") || [])[head()] || {};
    copying.value.textContent = stats.copying == null ? "n/a" : formatValue(stats.copying, 4);
    copying.value.dataset.value = stats.copying == null ? "" : String(stats.copying);
    const pending = standalone ? "not computed when saved" : model.get("progress") ? "computing…" : "n/a";
    for (const [item, key] of [[top1, "top1"], [top5, "top5"]]) {
      item.value.textContent = percent(stats[key]) ?? pending;
      item.value.dataset.value = stats[key] == null ? "" : String(stats[key]);
    }
  }
  function drawSelection() {
    const sel = selection();
    heatmap.setHighlight({ row: state.hover?.row ?? null, col: state.hover?.col ?? null, lockedRow: state.lock?.row ?? null, lockedCol: state.lock?.col ?? null });
    const tokens = model.get("str_tokens") || [];
    const ids = model.get("tokens") || [];
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (state.eigHover) {
      const [re, im] = state.eigHover.point;
      parts.push(`λ${state.eigHover.i + 1} = ${formatValue(re)} ${im < 0 ? "−" : "+"} ${formatValue(Math.abs(im))}i`, `|λ| = ${formatValue(Math.hypot(re, im))}`);
    } else if (stack && sel && sel.row < stack.rows && sel.col < stack.cols) {
      const exact = exactValue(model.get("values"), model.get("values_meta"), head(), sel.row, sel.col);
      const value = exact == null ? `≈${formatValue(stack.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      const tag = sel.row === sel.col ? " (diagonal: copying)" : "";
      parts.push(`source ${quote3(tokens[sel.row] ?? sel.row)} (id ${ids[sel.row]}) → logit of ${quote3(tokens[sel.col] ?? sel.col)} (id ${ids[sel.col]})`, `${value}${tag}`);
      if (exact != null) readout.dataset.value = String(exact);
      readout.dataset.row = String(sel.row);
      readout.dataset.col = String(sel.col);
    } else {
      parts.push(stack ? `${stack.rows} tokens · hover a cell (click to lock) or an eigenvalue` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }
  function selectionChanged() {
    drawSelection();
  }
  function picture() {
    const hm = heatmap.toCanvas();
    hm.getContext("2d").drawImage(marks, 0, 0);
    return composeCanvases([hm, planeCanvas], theme.bgCss);
  }
  function pictureSVG() {
    return composeSVG([heatmapSVGWithDiagonal(heatmap, state.rects, theme), planeToSVG(scene, theme)], theme.bgCss);
  }
  const onPlaneMove = (e) => {
    if (!scene) return;
    const box = planeCanvas.getBoundingClientRect();
    const dot = nearestDot(scene, e.clientX - box.left, e.clientY - box.top);
    const next = dot ? { i: dot.i, point: eigenPoints()[dot.i] } : null;
    if ((next && next.i) !== (state.eigHover && state.eigHover.i)) {
      state.eigHover = next;
      drawPlaneAndStats();
      drawSelection();
    }
  };
  const onPlaneLeave = () => {
    state.eigHover = null;
    drawPlaneAndStats();
    drawSelection();
  };
  planeCanvas.addEventListener("mousemove", onPlaneMove);
  planeCanvas.addEventListener("mouseleave", onPlaneLeave);
  const onPayload = () => {
    const n = (model.get("ov_meta") || {}).shape?.[1] ?? 0;
    if (state.lock && (state.lock.row >= n || state.lock.col >= n)) state.lock = null;
    state.hover = null;
    criterion.textContent = `Tokens: ${model.get("token_criterion") || ""}`;
    toolbar.sync("ov_meta");
    draw();
  };
  const handlers = {
    "change:ov_meta": onPayload,
    "change:head": () => draw(),
    "change:stats": () => drawPlaneAndStats(),
    "change:error": showError,
    "change:busy": showBusy,
    "change:progress": () => {
      showBusy();
      drawPlaneAndStats();
    },
    "change:layer": () => toolbar.sync("ov_meta"),
    "change:info": () => toolbar.sync("ov_meta"),
    "change:token_criterion": onPayload
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);
  const onKey = (e) => {
    if (e.target.closest && e.target.closest("textarea, input, select")) return;
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      setHeadOn(model, head() + (e.key === "ArrowRight" ? 1 : -1));
    } else if (e.key === "Escape") {
      state.lock = null;
      selectionChanged();
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    draw();
  });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    const next = Math.max(200, Math.min(460, width - 420));
    if (width > 0 && Math.abs(next - maxPlot) > 8) {
      maxPlot = next;
      draw();
    }
  }) : null;
  if (resize) resize.observe(root);
  showBusy();
  onPayload();
  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    root.removeEventListener("keydown", onKey);
    planeCanvas.removeEventListener("mousemove", onPlaneMove);
    planeCanvas.removeEventListener("mouseleave", onPlaneLeave);
    stopTheme();
    if (resize) resize.disconnect();
    heatmap.destroy();
    root.remove();
  };
}

// js/views/qk.js
var qk_exports = {};
__export(qk_exports, {
  render: () => render5
});
function render5({ model, el }) {
  const standalone = model.standalone === true;
  const state = { hover: null, lock: null, draws: 0, localError: "" };
  const root = h("div", { class: "cw-root cw-qk", attrs: { tabindex: 0, "data-cw-kind": "qk" } });
  el.append(root);
  let theme = readTheme(root);
  let maxPlot = 340;
  const head = () => model.get("head");
  const layer = () => (model.get("qk_meta") || {}).layer ?? model.get("layer");
  const fileBase = () => safeName(`qk_L${layer()}H${head()}`);
  const toolbar = headToolbar({
    model,
    standalone,
    kind: "QK",
    onHead: (hd) => setHeadOn(model, hd) || draw(),
    onPNG: () => savePNG(picture(), `${fileBase()}.png`),
    onSVG: () => saveSVG(pictureSVG(), `${fileBase()}.svg`)
  });
  const banner = errorBanner();
  const criterion = h("div", { class: "cw-hint cw-criterion" });
  const hover = (which) => (hit) => {
    state.hover = hit ? { which, ...hit } : null;
    drawSelection();
  };
  const click = (which) => (hit) => {
    const same = state.lock && state.lock.which === which && state.lock.row === hit.row && state.lock.col === hit.col;
    state.lock = same ? null : { which, ...hit };
    drawSelection();
  };
  const tokenMap = new Heatmap({ label: "full QK circuit", onHover: hover("tokens"), onClick: click("tokens") });
  const posMap = new Heatmap({ label: "positional QK pattern", onHover: hover("positions"), onClick: click("positions") });
  const note = h("div", { class: "cw-qk-note", attrs: { role: "note" } });
  note.hidden = true;
  const posCaption = h("div", { class: "cw-hint cw-qk-caption" });
  const posBox = h("div", { class: "cw-qk-pos" }, [posMap.el, posCaption, note]);
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  root.append(toolbar.el, banner.el, criterion, h("div", { class: "cw-qk-main" }, [tokenMap.el, posBox]), readout);
  let tokenStack = null;
  let posStack = null;
  const selection = () => state.lock || state.hover;
  const showError = () => banner.show(model.get("error") || state.localError);
  const showBusy = () => toolbar.busy(!standalone && model.get("busy") ? "computing…" : "");
  function mark(t0) {
    state.draws += 1;
    root.dataset.cwDraws = String(state.draws);
    root.dataset.cwHead = String(head());
    root.dataset.cwLayer = String(layer());
    root.dataset.cwTokens = String(tokenStack ? tokenStack.rows : 0);
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail: { what: "qk", ms: performance.now() - t0 } }));
  }
  function draw() {
    const t0 = performance.now();
    toolbar.setHead(head());
    try {
      tokenStack = headStack(model.get("qk"), model.get("qk_meta"), head());
      const pm = model.get("positional_meta");
      posStack = pm && pm.shape ? new CodeStack(model.get("positional"), pm) : null;
    } catch (err) {
      tokenStack = null;
      posStack = null;
      state.localError = `could not read the QK payload: ${err.message}`;
    }
    showError();
    if (!tokenStack) return;
    const tokens = model.get("str_tokens") || [];
    const diverging = makeScale("diverging", { dark: theme.dark, domain: [tokenStack.lo, tokenStack.hi] });
    const lut = diverging.lut(tokenStack);
    tokenMap.update({
      rows: tokenStack.rows,
      cols: tokenStack.cols,
      paint: (pixels) => tokenStack.paint(0, lut, pixels, 0),
      rowLabels: tokens,
      colLabels: tokens,
      title: `Full QK circuit (attention logits), layer ${layer()} head ${head()}`,
      yTitle: "query ↓",
      xTitle: "key →",
      scale: diverging,
      theme,
      maxPlot
    });
    const noteText = model.get("positional_note") || "";
    note.textContent = noteText;
    posCaption.textContent = posStack ? `softmax over keys of mask(W_pos W_Q W_Kᵀ W_posᵀ / √d_head), first ${posStack.rows} of ${(model.get("info") || {}).n_ctx ?? "?"} positions` : "";
    note.hidden = !noteText;
    posMap.el.hidden = !posStack || head() >= posStack.count;
    if (posStack && head() < posStack.count) {
      const seq = makeScale("sequential", { dark: theme.dark });
      const plut = seq.lut(posStack);
      const positions = Array.from({ length: posStack.rows }, (_, i) => String(i));
      posMap.update({
        rows: posStack.rows,
        cols: posStack.cols,
        paint: (pixels) => posStack.paint(head(), plut, pixels, seq.lut(posStack)[posStack.nanCode]),
        rowLabels: positions,
        colLabels: positions,
        title: `Attention from positions alone, head ${head()}`,
        yTitle: "query pos ↓",
        xTitle: "key pos →",
        scale: seq,
        theme,
        maxPlot
      });
    }
    drawSelection();
    mark(t0);
  }
  function drawSelection() {
    const sel = selection();
    for (const [which, map] of [["tokens", tokenMap], ["positions", posMap]]) {
      const hv = state.hover && state.hover.which === which ? state.hover : null;
      const lk = state.lock && state.lock.which === which ? state.lock : null;
      if (map.scene) map.setHighlight({ row: hv?.row ?? null, col: hv?.col ?? null, lockedRow: lk?.row ?? null, lockedCol: lk?.col ?? null });
    }
    const tokens = model.get("str_tokens") || [];
    const ids = model.get("tokens") || [];
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (sel && sel.which === "tokens" && tokenStack && sel.row < tokenStack.rows && sel.col < tokenStack.cols) {
      const exact = exactValue(model.get("values"), model.get("values_meta"), head(), sel.row, sel.col);
      const value = exact == null ? `≈${formatValue(tokenStack.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      parts.push(`query ${quote3(tokens[sel.row] ?? sel.row)} (id ${ids[sel.row]}) → key ${quote3(tokens[sel.col] ?? sel.col)} (id ${ids[sel.col]})`, `logit ${value}`);
      if (exact != null) readout.dataset.value = String(exact);
    } else if (sel && sel.which === "positions" && posStack && sel.row < posStack.rows && sel.col < posStack.cols) {
      const v = sel.col <= sel.row ? posStack.value(head(), sel.row, sel.col) : 0;
      parts.push(`query position ${sel.row} → key position ${sel.col}`, sel.col <= sel.row ? `weight ≈${formatValue(v, 3)}` : "masked (future key)");
      readout.dataset.value = String(v);
    } else {
      parts.push(tokenStack ? `${tokenStack.rows} tokens · hover a cell (click to lock)` : "no picture yet");
    }
    if (state.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }
  function picture() {
    const pics = [tokenMap.toCanvas()];
    if (posStack && posMap.scene && !posMap.el.hidden) pics.push(posMap.toCanvas());
    return composeCanvases(pics, theme.bgCss);
  }
  function pictureSVG() {
    const parts = [tokenMap.toSVG()];
    if (posStack && posMap.scene && !posMap.el.hidden) parts.push(posMap.toSVG());
    return composeSVG(parts, theme.bgCss);
  }
  const onPayload = () => {
    state.hover = null;
    state.lock = null;
    criterion.textContent = `Tokens: ${model.get("token_criterion") || ""}`;
    toolbar.sync("qk_meta");
    draw();
  };
  const handlers = {
    "change:qk_meta": onPayload,
    "change:head": () => draw(),
    "change:error": showError,
    "change:busy": showBusy,
    "change:layer": () => toolbar.sync("qk_meta"),
    "change:info": () => toolbar.sync("qk_meta")
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);
  const onKey = (e) => {
    if (e.target.closest && e.target.closest("textarea, input, select")) return;
    if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      setHeadOn(model, head() + (e.key === "ArrowRight" ? 1 : -1));
    } else if (e.key === "Escape") {
      state.lock = null;
      drawSelection();
    }
  };
  root.addEventListener("keydown", onKey);
  const stopTheme = watchTheme(root, () => {
    theme = readTheme(root);
    draw();
  });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const width = root.clientWidth;
    const next = Math.max(180, Math.min(340, (width - 330) / 2));
    if (width > 0 && Math.abs(next - maxPlot) > 8) {
      maxPlot = next;
      draw();
    }
  }) : null;
  if (resize) resize.observe(root);
  showBusy();
  onPayload();
  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    root.removeEventListener("keydown", onKey);
    stopTheme();
    if (resize) resize.disconnect();
    tokenMap.destroy();
    posMap.destroy();
    root.remove();
  };
}

// js/lib/host.js
function fromBase64(b64) {
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(b64);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
function decodeState(value) {
  if (Array.isArray(value)) return value.map(decodeState);
  if (value && typeof value === "object") {
    if (typeof value.$bytes === "string" && Object.keys(value).length === 1) {
      const bytes = fromBase64(value.$bytes);
      return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decodeState(v)]));
  }
  return value;
}
var StaticModel = class {
  constructor(state) {
    this.state = { ...state };
    this.handlers = /* @__PURE__ */ new Map();
    this.standalone = true;
  }
  get(name) {
    return this.state[name];
  }
  set(name, value) {
    const old = this.state[name];
    this.state[name] = value;
    if (old !== value) this.emit(`change:${name}`, value);
  }
  emit(event, value) {
    for (const fn of [...this.handlers.get(event) || []]) fn(value);
    if (event.startsWith("change:")) for (const fn of [...this.handlers.get("change") || []]) fn();
  }
  on(event, fn) {
    for (const name of event.split(/\s+/)) {
      if (!this.handlers.has(name)) this.handlers.set(name, /* @__PURE__ */ new Set());
      this.handlers.get(name).add(fn);
    }
  }
  off(event, fn) {
    const names = event ? event.split(/\s+/) : [...this.handlers.keys()];
    for (const name of names) {
      if (!fn) this.handlers.delete(name);
      else this.handlers.get(name)?.delete(fn);
    }
  }
  save_changes() {
  }
  // nothing to sync with: no kernel
  send() {
  }
  // custom messages have no kernel to go to
};
function mountStandalone(container, payload, views) {
  const models = payload.widgets.map((state) => new StaticModel(decodeState(state)));
  const cleanups = [];
  const mountWidget = (i, parent) => {
    const model = models[i];
    const kind = model.get("_kind");
    const item = document.createElement("div");
    item.className = "cw-export-item";
    parent.append(item);
    const view = views[kind];
    if (!view) {
      item.textContent = `circuitwidgets: this page has no view named ${JSON.stringify(kind)}`;
      return;
    }
    try {
      const cleanup = view.render({ model, el: item });
      if (typeof cleanup === "function") cleanups.push(cleanup);
    } catch (err) {
      item.textContent = `circuitwidgets: the ${kind} view failed to draw: ${err && err.message ? err.message : err}`;
    }
  };
  const build = (node, parent) => {
    if (node && typeof node.widget === "number") {
      if (node.widget >= 0 && node.widget < models.length) mountWidget(node.widget, parent);
    } else if (node && typeof node.text === "string") {
      const p = document.createElement("div");
      p.className = "cw-export-text";
      p.textContent = node.text;
      parent.append(p);
    } else if (node && Array.isArray(node.children)) {
      const box = document.createElement("div");
      box.className = node.box === "hbox" ? "cw-export-hbox" : "cw-export-vbox";
      parent.append(box);
      node.children.forEach((child) => build(child, box));
    }
  };
  build(payload.layout || { box: "vbox", children: models.map((_, i) => ({ widget: i })) }, container);
  for (const [[i, a], [j, b]] of payload.links || []) {
    models[i].on(`change:${a}`, () => models[j].set(b, models[i].get(a)));
    models[j].on(`change:${b}`, () => models[i].set(a, models[j].get(b)));
  }
  return { models, cleanup: () => cleanups.forEach((fn) => fn()) };
}

// js/index.js
var VIEWS = { attention: attention_exports, composition: composition_exports, headscores: headscores_exports, ov: ov_exports, qk: qk_exports };
function render6({ model, el }) {
  const kind = model.get("_kind");
  const view = VIEWS[kind];
  if (!view) {
    el.textContent = `circuitwidgets: no view named ${JSON.stringify(kind)} in this bundle (reinstall the package?)`;
    return void 0;
  }
  try {
    return view.render({ model, el });
  } catch (err) {
    const box = document.createElement("pre");
    box.className = "cw-error";
    box.textContent = `circuitwidgets: the ${kind} view failed to draw: ${err && err.stack ? err.stack : err}`;
    el.append(box);
    return void 0;
  }
}
function mountStandalone2(container, payload) {
  return mountStandalone(container, payload, VIEWS);
}
var index_default = { render: render6 };
export {
  VIEWS,
  index_default as default,
  mountStandalone2 as mountStandalone
};
