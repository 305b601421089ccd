// circuitwidgets js bundle, built by js/build.mjs with esbuild 0.28.2; do not edit. sources-sha256: 00a475a9593355b5910b158465e6ec19617b300a4d4a5686cdd6f57f32feb820

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
function itemEvents(el, selector, { onHover, onClick } = {}) {
  const indexOf = (node) => {
    const item = node?.closest?.(selector);
    return item && el.contains(item) ? Number(item.dataset.index) : null;
  };
  const handlers = {
    mouseover: (e) => {
      const i = indexOf(e.target);
      if (i !== null) onHover?.(i);
    },
    mouseleave: () => onHover?.(null),
    click: (e) => {
      const i = indexOf(e.target);
      if (i !== null) onClick?.(i);
    }
  };
  for (const [type, fn] of Object.entries(handlers)) el.addEventListener(type, fn);
  return () => {
    for (const [type, fn] of Object.entries(handlers)) el.removeEventListener(type, fn);
  };
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
function numberOptions(values) {
  return values.map((x) => ({ value: x, label: String(x) }));
}
function indexOptions(n) {
  return numberOptions(Array.from({ length: n }, (_, i) => i));
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

// js/lib/codes.js
var CODE_MAX = 254;
var NAN_CODE = 255;

// js/lib/scales.js
var STOPS = {
  sequential: {
    light: [
      [0, 247, 250, 255],
      [0.15, 208, 225, 242],
      [0.35, 140, 190, 225],
      [0.6, 66, 140, 200],
      [0.85, 25, 85, 160],
      [1, 12, 44, 110]
    ],
    dark: [
      [0, 26, 30, 40],
      [0.2, 32, 62, 104],
      [0.45, 42, 112, 172],
      [0.7, 92, 176, 216],
      [0.9, 182, 226, 240],
      [1, 242, 250, 255]
    ]
  },
  diverging: {
    light: [
      [0, 33, 90, 170],
      [0.25, 120, 170, 215],
      [0.5, 246, 246, 246],
      [0.75, 232, 140, 110],
      [1, 170, 30, 40]
    ],
    dark: [
      [0, 96, 164, 240],
      [0.25, 44, 84, 136],
      [0.5, 34, 36, 42],
      [0.75, 142, 62, 52],
      [1, 250, 122, 100]
    ]
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
function makeScale(kind = "sequential", { dark = false, domain = [0, 1], ticks = null, caption = "" } = {}) {
  if (!STOPS[kind]) throw new RangeError(`scale kind must be one of ${SCALE_KINDS.join(", ")}; got ${kind}`);
  const [d0, d1] = domain;
  if (!(Number.isFinite(d0) && Number.isFinite(d1) && d1 > d0)) throw new RangeError(`scale domain must be finite lo < hi; got ${domain}`);
  const stops = STOPS[kind][dark ? "dark" : "light"];
  const nan = NAN_RGB[dark ? "dark" : "light"];
  const rgb = (v) => Number.isNaN(v) ? nan : colorAt(stops, (v - d0) / (d1 - d0));
  return {
    kind,
    domain: [d0, d1],
    ticks,
    // [[value, label]] for the colour bar (a colour scale's own: lib/color-scale.js); null: round values
    caption,
    // the colour bar's name of the scale ("log", "× uniform"), "" for none
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
function effectDomain(values, centre, floor) {
  let m = Number.isFinite(floor) ? Math.abs(floor) : 0;
  for (const x of values) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x - centre));
  m = m || 1;
  return [centre - m, centre + m];
}
function niceTicks(lo, hi, count2 = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, count2 - 1);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : +v.toPrecision(12));
  return ticks;
}
var NOISE = 1e-6;
function formatValue(v, digits = 4) {
  if (v == null || Number.isNaN(v)) return "n/a";
  const a = Math.abs(v);
  if (a < NOISE) return "0";
  if (a >= 1e-3 && a < 1e5) return String(+v.toPrecision(digits));
  return v.toExponential(digits - 1);
}
function formatCell(v) {
  const text = v.toFixed(2);
  return text === "-0.00" ? "0.00" : text;
}
function readableText([r, g, b]) {
  const lum = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  return lum > 0.55 ? "#111" : "#fff";
}
function rgbOf(css) {
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(String(css).trim());
  if (hex) {
    const full = hex[1].length === 3 ? [...hex[1]].map((c) => c + c).join("") : hex[1];
    return [0, 2, 4].map((i) => parseInt(full.slice(i, i + 2), 16));
  }
  const m = /rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)/.exec(String(css));
  return m ? [+m[1], +m[2], +m[3]] : [128, 128, 128];
}

// js/lib/color-scale.js
var COLOR_SCALES = ["linear", "auto", "log", "power", "relative"];
var SCALE_NAMES = {
  linear: "linear 0–1",
  auto: "auto (each head's typical peak)",
  log: "log",
  power: "power (√)",
  relative: "relative to uniform"
};
var LINEAR = { kind: "linear" };
function weightLabel(v) {
  if (v > 0 && v < 1e-3) return `1e${Math.round(Math.log10(v))}`;
  return formatValue(v, 3);
}
function colorScaleOf(spec, m = 0) {
  const s = spec || LINEAR;
  const kind = s.kind || "linear";
  const n = s.n || 1;
  const seen = (row) => s.causal === false ? n : Math.min(n, row + 1);
  const cellRow = (r) => (s.row0 || 0) + (r + 1) * (s.step || 1) - 1;
  const clamp = (t) => Math.min(1, Math.max(0, t)) || 0;
  if (kind === "auto") {
    const hi = s.his?.[m] > 0 ? s.his[m] : 1;
    return {
      kind,
      position: (v) => clamp(v / hi),
      value: (t) => t * hi,
      ticks: niceTicks(0, hi, 5).filter((v) => v <= hi).map((v) => [v / hi, formatValue(v, 3)]),
      caption: "auto"
    };
  }
  if (kind === "log") {
    const lo = Math.log10(s.floor);
    const decades = [];
    const every = -lo > 6 ? 2 : 1;
    for (let e = 0; e >= lo; e -= every) decades.push(e);
    return {
      kind,
      position: (v) => clamp((Math.log10(Math.max(v, s.floor)) - lo) / -lo),
      value: (t) => t > 0 ? 10 ** (lo - lo * t) : 0,
      ticks: decades.map((e) => [(e - lo) / -lo, weightLabel(10 ** e)]),
      caption: "log"
    };
  }
  if (kind === "power") {
    const g = s.gamma;
    return {
      kind,
      position: (v) => clamp(Math.max(v, 0) ** g),
      value: (t) => t ** (1 / g),
      ticks: [0, 0.01, 0.1, 0.25, 0.5, 1].map((v) => [v ** g, formatValue(v, 3)]),
      caption: `power ${g}`
    };
  }
  if (kind === "relative") {
    const top = s.relative_max;
    return {
      kind,
      position: (v, row) => clamp(v * seen(row) / top),
      value: (t, r) => t * top / seen(cellRow(r)),
      ticks: niceTicks(0, top, 5).map((v) => [v / top, `${formatValue(v, 3)}×`]),
      caption: "× uniform"
    };
  }
  return {
    kind: "linear",
    position: (v) => clamp(v),
    value: (t) => t,
    ticks: niceTicks(0, 1, 5).map((v) => [v, formatValue(v, 3)]),
    caption: ""
  };
}
function timesUniform(spec, v, row) {
  if (!spec || v == null || Number.isNaN(v)) return null;
  const n = spec.n || 1;
  return v * (spec.causal === false ? n : Math.min(n, row + 1));
}
function scaleSelect(v) {
  const el = h(
    "select",
    { class: "cw-select cw-scale-select", attrs: { "aria-label": "colour scale" } },
    COLOR_SCALES.map((k) => h("option", { value: k, text: `colour: ${SCALE_NAMES[k]}` }))
  );
  v.listen(el, "change", () => v.set({ color_scale: el.value }));
  if (v.standalone) {
    el.disabled = true;
    el.title = "exported page: drawn on this scale; other scales need the kernel";
  }
  const show = (kind) => {
    el.value = kind || v.model.get("color_scale") || "linear";
  };
  v.on("change:color_scale", () => show(v.model.get("color_scale")));
  show();
  return { el, show };
}

// js/lib/decode.js
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
function hasData(p) {
  return !!p && p.data != null && Array.isArray(p.shape);
}
var CodeStack = class {
  constructor(payload) {
    if (payload?.dtype !== "uint8") throw new TypeError(`expected a uint8 payload; got dtype ${payload?.dtype}`);
    if (payload.encoding != null) throw new TypeError(`payload is ${payload.encoding}d: inflate it first (lib/inflate.js)`);
    const shape = payload.shape;
    if (!Array.isArray(shape) || shape.length < 2) throw new RangeError(`payload shape must have 2+ dims; got ${JSON.stringify(shape)}`);
    this.codes = bytesOf(payload.data);
    this.shape = shape;
    this.rows = shape[shape.length - 2];
    this.cols = shape[shape.length - 1];
    this.count = product(shape.slice(0, -2));
    this.layout = payload.layout || "full";
    this.lo = payload.lo;
    this.hi = payload.hi;
    this.nanCode = payload.nan_code ?? NAN_CODE;
    this.step = (this.hi - this.lo) / CODE_MAX;
    this.scale = payload.scale?.kind && payload.scale.kind !== "linear" ? payload.scale : null;
    this.unscaled = this.scale ? Array.from({ length: this.count }, (_, m) => colorScaleOf(this.scale, m).value) : null;
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
  /** The value of cell (r, c) of matrix m: a weight, also when the codes are colour positions. */
  value(m, r, c) {
    const v = this.valueOfCode(this.code(m, r, c));
    return this.unscaled && !Number.isNaN(v) ? this.unscaled[m](v, r) : v;
  }
  /** Values of row r of matrix m (length cols; zeros above a tril diagonal). */
  rowValues(m, r) {
    const out = new Float32Array(this.cols);
    const len = this.rowLength(r);
    for (let c = 0; c < this.cols; c++) out[c] = c < len ? this.value(m, r, c) : 0;
    return out;
  }
  /** Values of column c of matrix m (length rows). */
  colValues(m, c) {
    const out = new Float32Array(this.rows);
    for (let r = 0; r < this.rows; r++) out[r] = this.value(m, r, c);
    return out;
  }
  /** Each column's largest code in matrix m, NaN codes left out (how strongly some row reaches it). */
  colMaxCodes(m) {
    const values = new Float32Array(this.cols);
    for (let r = 0; r < this.rows; r++) {
      const start = this.rowStart(m, r);
      const len = this.rowLength(r);
      for (let c = 0; c < len; c++) {
        const code = this.codes[start + c];
        if (code !== this.nanCode && code > values[c]) values[c] = code;
      }
    }
    return values;
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
function headStack(payload, h2) {
  if (!hasData(payload) || payload.shape.length !== 3 || !Array.isArray(payload.ranges)) return null;
  const [nHeads, rows, cols] = payload.shape;
  if (!(h2 >= 0 && h2 < nHeads) || !rows || !cols) return null;
  const size = rows * cols;
  const bytes = bytesOf(payload.data);
  if (bytes.length !== nHeads * size)
    throw new RangeError(`payload holds ${bytes.length} bytes; shape ${JSON.stringify(payload.shape)} needs ${nHeads * size}`);
  const [lo, hi] = payload.ranges[h2];
  const data = bytes.subarray(h2 * size, (h2 + 1) * size);
  return new CodeStack({ dtype: "uint8", data, shape: [rows, cols], lo, hi, layout: "full", nan_code: payload.nan_code });
}
function floatValues(payload) {
  if (!hasData(payload) || payload.dtype !== "float32") throw new TypeError(`expected a float32 payload; got dtype ${payload?.dtype}`);
  const values = float32Of(payload.data);
  const n = product(payload.shape);
  if (values.length !== n) throw new RangeError(`payload holds ${values.length} values; shape ${JSON.stringify(payload.shape)} needs ${n}`);
  return values;
}
function exactValue(payload, ...index) {
  if (!hasData(payload) || payload.dtype !== "float32" || index.length !== payload.shape.length) return null;
  let flat = 0;
  for (let d = 0; d < index.length; d++) {
    if (!(index[d] >= 0 && index[d] < payload.shape[d])) return null;
    flat = flat * payload.shape[d] + index[d];
  }
  const bytes = bytesOf(payload.data);
  if (4 * flat + 4 > bytes.byteLength) return null;
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getFloat32(4 * flat, true);
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
  return `${chars.slice(0, Math.max(1, max - 1)).join("")}…`;
}
var NICE = [1, 2, 5];
function labelStride(cellPx, minGapPx) {
  if (!(cellPx > 0)) throw new RangeError(`cellPx must be > 0; got ${cellPx}`);
  if (cellPx >= minGapPx) return 1;
  for (let mag = 1; ; mag *= 10) {
    for (const m of NICE) if (m * mag * cellPx >= minGapPx) return m * mag;
  }
}
var MIN_LABEL_PX = 8;
function labelFit(cellPx, fontPx) {
  if (cellPx >= fontPx + 2) return { fontPx, gapPx: fontPx + 2, all: true };
  const small = Math.min(fontPx, Math.floor(cellPx) - 1);
  if (small >= MIN_LABEL_PX) return { fontPx: small, gapPx: small + 1, all: true };
  return { fontPx, gapPx: fontPx + 2, all: false };
}
function pickLabels(n, cellPx, gapPx, { priority = null, keep = [] } = {}) {
  if (!(n > 0)) return [];
  if (!(cellPx > 0)) throw new RangeError(`cellPx must be > 0; got ${cellPx}`);
  if (cellPx >= gapPx) return Array.from({ length: n }, (_, i) => i);
  const apart = Math.ceil(gapPx / cellPx - 1e-9);
  const order = keep.filter((i) => Number.isInteger(i) && i >= 0 && i < n);
  if (priority) {
    const strong = [];
    for (let i = 0; i < n; i++) if (Number.isFinite(priority[i])) strong.push(i);
    strong.sort((a, b) => priority[b] - priority[a] || a - b);
    order.push(...strong);
  }
  const k = Math.floor((n - 1) / apart) + 1;
  for (let t = 0; t < k; t++) order.push(k === 1 ? 0 : Math.round(t * (n - 1) / (k - 1)));
  const taken = [];
  for (const i of order) {
    let lo = 0;
    let hi = taken.length;
    while (lo < hi) {
      const mid = lo + hi >> 1;
      if (taken[mid] < i) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0 && i - taken[lo - 1] < apart || lo < taken.length && taken[lo] - i < apart) continue;
    taken.splice(lo, 0, i);
  }
  return taken;
}
function axisPriority(rows, cols, valueAt) {
  const rowPriority = new Float32Array(rows).fill(Number.NaN);
  const colPriority = new Float32Array(cols).fill(Number.NaN);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const x = Math.abs(valueAt(r, c));
      if (!Number.isFinite(x)) continue;
      if (!(rowPriority[r] >= x)) rowPriority[r] = x;
      if (!(colPriority[c] >= x)) colPriority[c] = x;
    }
  }
  return { rowPriority, colPriority };
}
function labelPositions(n, stride) {
  const out = [];
  for (let i = 0; i < n; i += stride) out.push(i);
  return out;
}
function heatmapLayout({
  rows,
  cols,
  maxPlot = 560,
  minPlot = 160,
  maxCell = 28,
  rowLabelPx = 80,
  colLabelPx = 80,
  titlePx = 36,
  barPx = 56,
  pad = 6
}) {
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
function quote(s, max = 24) {
  return `“${truncate(displayToken(s), max)}”`;
}

// js/lib/heatmap-scene.js
var FONT_PX = 11;
var LABEL_CHARS = 14;
function heatmapScene(spec, measure) {
  const scene = sceneAt(spec, measure);
  const { maxWidth = Infinity, maxHeight = Infinity } = spec;
  if (!(scene.width > maxWidth || scene.height > maxHeight)) return scene;
  const { rows, cols } = spec;
  const { cell, plotW, plotH } = scene.layout;
  const fitCell = Math.min(cell, (maxWidth - (scene.width - plotW)) / cols, (maxHeight - (scene.height - plotH)) / rows);
  const maxPlot = Math.max(MIN_FIT_PX, Math.floor(fitCell * Math.max(rows, cols)));
  const fitted = sceneAt({ ...spec, maxPlot }, measure);
  const over = Math.max(fitted.width - maxWidth, fitted.height - maxHeight);
  return over > 0 && maxPlot > MIN_FIT_PX ? sceneAt({ ...spec, maxPlot: Math.max(MIN_FIT_PX, maxPlot - Math.ceil(over)) }, measure) : fitted;
}
var MIN_FIT_PX = 64;
function sceneAt(spec, measure) {
  const { rows, cols, rowLabels = [], colLabels = [], title = "", xTitle = "", yTitle = "", scale, theme, maxPlot = 560 } = spec;
  const sans = `${FONT_PX}px ${theme.font}`;
  const probe = heatmapLayout({ rows, cols, maxPlot });
  const fit = labelFit(probe.cell, FONT_PX);
  const mono = `${fit.fontPx}px ${theme.mono}`;
  const pick = (n, priority, keep) => pickLabels(n, probe.cell, fit.gapPx, { priority, keep: [keep ?? []].flat() });
  const stride = (shown) => shown.length < 2 ? 1 : Math.min(...shown.slice(1).map((i, k) => i - shown[k]));
  const label = (labels, i) => truncate(displayToken(labels[i] ?? i), LABEL_CHARS);
  const rowIndices = pick(rows, spec.rowPriority, spec.keepRows);
  const colIndices = pick(cols, spec.colPriority, spec.keepCols);
  const rowStride = stride(rowIndices);
  const colStride = stride(colIndices);
  const rowShown = rowIndices.map((i) => [i, label(rowLabels, i)]);
  const colShown = colIndices.map((i) => [i, label(colLabels, i)]);
  const widest = (items) => items.reduce((m, [, t]) => Math.max(m, measure(t, mono)), 0);
  const yTitleW = measure(yTitle, sans);
  const rowLabelPx = Math.min(120, Math.max(28, widest(rowShown), measure(xTitle, sans)) + 8);
  const colLabelPx = Math.min(120, Math.max(28, widest(colShown)) + 8);
  const layout = heatmapLayout({ rows, cols, maxPlot, rowLabelPx, colLabelPx });
  const { left, top, plotW, plotH, cell } = layout;
  const ops = [];
  ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  ops.push({ type: "image", x: left, y: top, w: plotW, h: plotH, source: spec.cells, smooth: cell < 1, cells: true });
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  for (const [i, text] of rowShown) {
    ops.push({
      type: "text",
      x: left - 4,
      y: top + (i + 0.5) * cell,
      text,
      font: mono,
      color: theme.fg,
      align: "right",
      baseline: "middle"
    });
  }
  for (const [j, text] of colShown) {
    ops.push({
      type: "text",
      x: left + (j + 0.5) * cell,
      y: top + plotH + 4,
      text,
      font: mono,
      color: theme.fg,
      align: "right",
      baseline: "middle",
      rotate: -Math.PI / 2
    });
  }
  if (yTitle) {
    const fits = yTitleW <= left - 10;
    ops.push({
      type: "text",
      x: fits ? left - 4 : 6,
      y: top - 8,
      text: yTitle,
      font: sans,
      color: theme.muted,
      align: fits ? "right" : "left"
    });
  }
  if (xTitle) ops.push({ type: "text", x: left - 4, y: top + plotH + 16, text: xTitle, font: sans, color: theme.muted, align: "right" });
  if (scale) {
    const barH = Math.max(120, plotH);
    layout.bar = { x: layout.barX, y: top, h: barH };
    ops.push(...colourBar(scale, layout.bar, theme));
    layout.height = Math.max(layout.height, Math.ceil(top + barH + 8));
  }
  if (spec.marks) ops.push(...spec.marks(layout));
  return {
    width: layout.width,
    height: layout.height,
    ops,
    layout,
    rowStride,
    colStride,
    rowShown: rowIndices,
    colShown: colIndices,
    font: mono
  };
}
function colourBar(scale, { x, y, h: h2 }, theme, { size = FONT_PX } = {}) {
  const [d0, d1] = scale.domain;
  const stops = [];
  for (let k = 0; k <= 16; k++) stops.push([k / 16, scale.css(d1 - (d1 - d0) * k / 16)]);
  const ops = [{ type: "bar", x, y, w: 12, h: h2, stops, stroke: theme.border }];
  const ticks = scale.ticks || niceTicks(d0, d1, 5).map((t) => [t, formatValue(t, 3)]);
  for (const [t, text] of ticks) {
    const ty = y + (d1 - t) / (d1 - d0) * h2;
    ops.push({ type: "line", x1: x + 12, y1: ty, x2: x + 16, y2: ty, stroke: theme.muted });
    ops.push({
      type: "text",
      x: x + 18,
      y: ty,
      text,
      font: `${size}px ${theme.font}`,
      color: theme.muted,
      align: "left",
      baseline: "middle"
    });
  }
  if (scale.caption)
    ops.push({
      type: "text",
      x,
      y: y - 18,
      text: scale.caption,
      font: `${size}px ${theme.font}`,
      color: theme.muted,
      align: "left",
      baseline: "middle",
      legend: true
    });
  return ops;
}
function barY([d0, d1], { y, h: h2 }, v) {
  return y + (d1 - Math.max(d0, Math.min(d1, v))) / (d1 - d0) * h2;
}
function diagonalOps(layout, n, theme) {
  const { left, top, cell } = layout;
  const thick = cell >= 5;
  const ops = [];
  for (let i = 0; i < n; i++) {
    const side = Math.max(0.5, cell - 1);
    ops.push({
      type: "rect",
      x: left + i * cell + 0.5,
      y: top + i * cell + 0.5,
      w: side,
      h: side,
      stroke: theme.fg,
      alpha: thick ? 0.85 : 0.45,
      width: thick ? 1 : 0.6
    });
  }
  return ops;
}
function cellValueOps(layout, rows, cols, { value, text, scale, theme }) {
  const ops = [];
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const x = value(r, c);
      if (!Number.isFinite(x)) continue;
      const at = { x: layout.left + (c + 0.5) * layout.cell, y: layout.top + (r + 0.5) * layout.cell };
      ops.push({
        type: "text",
        ...at,
        text: text(x),
        font: `10px ${theme.font}`,
        color: readableText(scale.rgb(x)),
        align: "center",
        baseline: "middle"
      });
    }
  }
  return ops;
}
function cellBox(layout, row, col, { color, width = 2, inset = 0 }) {
  const { left, top, cell } = layout;
  const side = Math.max(cell, 2) - 2 * inset;
  return { type: "rect", x: left + col * cell + inset, y: top + row * cell + inset, w: side, h: side, stroke: color, width };
}

// js/lib/scene.js
var SVG_NS = "http://www.w3.org/2000/svg";
var ANCHOR = { left: "start", right: "end", center: "middle" };
var num = (v) => +Number(v).toFixed(2);
var gradients = 0;
function parseFont(font) {
  const m = /^(?:(\d{3}|bold) )?([\d.]+)px (.*)$/.exec(font || "");
  return m ? { weight: m[1], size: +m[2], family: m[3] } : { size: 11, family: "sans-serif" };
}
function drawScene(ctx, scene) {
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
function paintCanvas(canvas, scene) {
  const dpr = globalThis.devicePixelRatio || 1;
  const w = Math.round(scene.width * dpr);
  const h2 = Math.round(scene.height * dpr);
  if (canvas.width !== w || canvas.height !== h2) {
    canvas.width = w;
    canvas.height = h2;
    canvas.style.width = `${scene.width}px`;
    canvas.style.height = `${scene.height}px`;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, scene.width, scene.height);
  drawScene(ctx, scene);
  return ctx;
}
function sceneCanvas(scene, background, scale = globalThis.devicePixelRatio || 1) {
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
var SVG_VECTOR_CELLS = 128 * 128;
var SVG_RASTER_SCALE = 2;
var SVG_CELLS_RULE = "heatmap cells as vector rectangles up to 128 × 128 = 16 384 cells; above that one PNG image at 2×";
var hex2 = (v) => v.toString(16).padStart(2, "0");
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
      while (end < cols && data[i] === data[(r * cols + end) * 4] && data[i + 1] === data[(r * cols + end) * 4 + 1] && data[i + 2] === data[(r * cols + end) * 4 + 2] && data[i + 3] === data[(r * cols + end) * 4 + 3])
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
          "fill-opacity": a < 255 ? num(a / 255) : void 0
        };
        children.push({ tag: "rect", attrs });
      }
      c = end;
    }
  }
  return { tag: "g", attrs: { class: "cw-cells", "shape-rendering": "crispEdges", "data-cells": `${rows}x${cols}` }, children };
}
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
var paint = (op) => ({
  fill: op.fill || "none",
  stroke: op.stroke,
  "stroke-width": op.stroke && op.width != null && op.width !== 1 ? op.width : void 0,
  "stroke-dasharray": op.dash ? op.dash.join(" ") : void 0,
  "stroke-linecap": op.cap,
  opacity: op.alpha
});
function svgNode(op, defs) {
  let node;
  if (op.type === "group") {
    const rotate = op.rotate ? ` rotate(${num(op.rotate * 180 / Math.PI)})` : "";
    node = {
      tag: "g",
      attrs: { transform: `translate(${num(op.x || 0)} ${num(op.y || 0)})${rotate}` },
      children: op.ops.map((o) => svgNode(o, defs))
    };
  } else if (op.type === "text") {
    const f = parseFont(op.font);
    const rotate = op.rotate ? `rotate(${num(op.rotate * 180 / Math.PI)} ${num(op.x)} ${num(op.y)})` : void 0;
    const attrs = {
      x: num(op.x),
      y: num(op.y),
      "font-size": f.size,
      "font-family": f.family,
      "font-weight": f.weight,
      fill: op.color,
      "text-anchor": ANCHOR[op.align || "left"]
    };
    node = {
      tag: "text",
      attrs: { ...attrs, "dominant-baseline": op.baseline === "middle" ? "central" : void 0, transform: rotate },
      text: op.text
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
      children: op.stops.map(([t, css]) => ({ tag: "stop", attrs: { offset: num(t), "stop-color": css } }))
    });
    node = {
      tag: "rect",
      attrs: { x: num(op.x), y: num(op.y), width: num(op.w), height: num(op.h), fill: `url(#${id})`, stroke: op.stroke }
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
        style: op.smooth ? void 0 : "image-rendering:pixelated",
        href
      }
    };
    if (op.cells && op.source) node.attrs["data-cells"] = `${op.source.height}x${op.source.width}`;
  } else {
    throw new TypeError(`unknown scene op ${op.type}`);
  }
  if (op.attrs) Object.assign(node.attrs, op.attrs);
  return node;
}
function svgTree(scene, { background, attrs = {} } = {}) {
  const defs = [];
  const children = scene.ops.map((op) => svgNode(op, defs));
  if (defs.length) children.unshift({ tag: "defs", attrs: {}, children: defs });
  if (background) children.unshift({ tag: "rect", attrs: { width: "100%", height: "100%", fill: background } });
  const { width, height } = scene;
  return { tag: "svg", attrs: { xmlns: SVG_NS, width, height, viewBox: `0 0 ${width} ${height}`, ...attrs }, children };
}
var xml = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
function svgText(node) {
  const attrs = Object.entries(node.attrs || {}).filter(([, v]) => v != null).map(([k, v]) => ` ${k}="${xml(v)}"`).join("");
  const inner = node.children?.length ? `
${node.children.map(svgText).join("\n")}
` : node.text != null ? xml(node.text) : "";
  return inner ? `<${node.tag}${attrs}>${inner}</${node.tag}>` : `<${node.tag}${attrs}/>`;
}
function svgElement(node) {
  const el = document.createElementNS(SVG_NS, node.tag);
  for (const [k, v] of Object.entries(node.attrs || {})) if (v != null) el.setAttribute(k, String(v));
  if (node.children) el.append(...node.children.map(svgElement));
  else if (node.text != null) el.textContent = String(node.text);
  return el;
}
function sceneToSVG(scene, background) {
  return svgText(svgTree(scene, { background }));
}
function composeScenes(scenes, gap = 16) {
  const ops = [];
  let x = 0;
  for (const s of scenes) {
    ops.push({ type: "group", x, y: 0, ops: s.ops });
    x += s.width + gap;
  }
  return { width: Math.max(0, x - gap), height: Math.max(0, ...scenes.map((s) => s.height)), ops };
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

// js/lib/heatmap.js
var Heatmap = class {
  constructor({ onHover, onClick, label = "heatmap" } = {}) {
    this.canvas = h("canvas", { class: "cw-heatmap-canvas", attrs: { role: "img", "aria-label": label } });
    this.overlay = h("canvas", { class: "cw-heatmap-overlay" });
    this.el = h("div", { class: "cw-heatmap" }, [this.canvas, this.overlay]);
    this.cells = document.createElement("canvas");
    this.spec = null;
    this.scene = null;
    this.highlight = {};
    const hit = (e) => {
      if (!this.scene) return null;
      const box = this.overlay.getBoundingClientRect();
      return cellAt(this.scene.layout, this.spec.rows, this.spec.cols, e.clientX - box.left, e.clientY - box.top);
    };
    this.listeners = {
      mousemove: (e) => onHover?.(hit(e)),
      mouseleave: () => onHover?.(null),
      click: (e) => {
        const cell = hit(e);
        if (cell) onClick?.(cell);
      }
    };
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.addEventListener(type, fn);
  }
  /** Redraw. spec: {rows, cols, paint(pixels), ...heatmapScene's spec}. */
  update(spec) {
    const { rows, cols, paint: paint2 } = spec;
    if (this.cells.width !== cols || this.cells.height !== rows || !this.image) {
      this.cells.width = cols;
      this.cells.height = rows;
      this.image = this.cells.getContext("2d").createImageData(cols, rows);
      this.pixels = new Uint32Array(this.image.data.buffer);
    }
    paint2(this.pixels);
    this.cells.getContext("2d").putImageData(this.image, 0, 0);
    this.spec = spec;
    const ctx = this.canvas.getContext("2d");
    const maxWidth = spec.maxWidth ?? this.room();
    this.scene = heatmapScene({ ...spec, maxWidth, cells: this.cells }, (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    });
    this.canvas.cwScene = this.scene;
    paintCanvas(this.canvas, this.scene);
    this.el.style.width = `${this.scene.width}px`;
    this.el.style.height = `${this.scene.height}px`;
    this.drawOverlay();
  }
  /**
   * The width left to the picture in its widget's box (the root's width right of where the heatmap
   * starts), so that it never spills into a neighbouring column; Infinity before it is on the page.
   */
  room() {
    const root = this.el.closest?.(".cw-root");
    if (!root || !this.el.isConnected || !(root.clientWidth > 0)) return Number.POSITIVE_INFINITY;
    const offset = this.el.getBoundingClientRect().left - root.getBoundingClientRect().left;
    return root.clientWidth - Math.max(0, offset);
  }
  /** Hover/selection marks: {row, col, lockedRow, lockedCol, marks(layout) -> ops}, any may be absent. */
  setHighlight(highlight) {
    this.highlight = highlight || {};
    this.drawOverlay();
  }
  drawOverlay() {
    if (!this.scene) return;
    const ctx = this.overlay.getContext("2d");
    const measure = (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    };
    const ops = this.overlayOps(measure);
    this.overlay.cwScene = { ops };
    paintCanvas(this.overlay, { width: this.scene.width, height: this.scene.height, ops });
  }
  /** Bands on the hovered and locked row/column, and chips with their own labels (thinned out). */
  overlayOps(measure) {
    const { layout, font } = this.scene;
    const { left, top, cell, plotW, plotH } = layout;
    const { theme, rows, cols, rowLabels = [], colLabels = [] } = this.spec;
    const { row, col, lockedRow, lockedCol, marks } = this.highlight;
    const ops = [];
    const band = (r, c, color, dash) => {
      const side = Math.max(cell, 1) + 1;
      if (r != null && r >= 0 && r < rows)
        ops.push({ type: "rect", x: left - 0.5, y: top + r * cell - 0.5, w: plotW + 1, h: side, stroke: color, width: 1.5, dash });
      if (c != null && c >= 0 && c < cols)
        ops.push({ type: "rect", x: left + c * cell - 0.5, y: top - 0.5, w: side, h: plotH + 1, stroke: color, width: 1.5, dash });
    };
    band(lockedRow, lockedCol, theme.accent, null);
    band(row, col, theme.fg, [3, 2]);
    const chip = (text, x, y, rotate) => {
      const w = measure(text, font) + 6;
      const box = { type: "rect", x: -w, y: -8, w, h: 16, fill: theme.bgCss, stroke: theme.accent };
      const label2 = { type: "text", x: -3, y: 0, text, font, color: theme.fg, align: "right", baseline: "middle" };
      ops.push({ type: "group", x, y, rotate, ops: [box, label2] });
    };
    const label = (labels, i) => truncate(displayToken(labels[i] ?? i), LABEL_CHARS);
    const chipRows = [.../* @__PURE__ */ new Set([row, lockedRow])].filter((r) => r != null && r >= 0 && r < rows);
    const chipCols = [.../* @__PURE__ */ new Set([col, lockedCol])].filter((c) => c != null && c >= 0 && c < cols);
    for (const r of chipRows) chip(label(rowLabels, r), left - 2, top + (r + 0.5) * cell);
    for (const c of chipCols) chip(label(colLabels, c), left + (c + 0.5) * cell, top + plotH + 2, -Math.PI / 2);
    if (marks) ops.push(...marks(layout));
    return ops;
  }
  destroy() {
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.removeEventListener(type, fn);
    this.el.remove();
  }
};
function visibleHeight(el) {
  const screen = window.screen?.availHeight > 0 ? window.screen.availHeight : Number.POSITIVE_INFINITY;
  let scroller = null;
  for (let p = el.parentElement; p; p = p.parentElement) {
    const overflow = getComputedStyle(p).overflowY;
    const wraps = p.scrollHeight <= p.clientHeight + 1 && p.clientHeight <= el.offsetHeight + 40;
    if ((overflow === "auto" || overflow === "scroll") && p.clientHeight > 0 && !wraps) scroller = p;
  }
  if (scroller) return Math.min(scroller.clientHeight, screen);
  return window.self !== window.top ? screen : Math.min(window.innerHeight, screen);
}

// js/lib/line-chart.js
var FONT_PX2 = 11;
var LABEL_CHARS2 = 10;
function runsOf(indices) {
  const sorted = [...new Set(indices)].filter(Number.isInteger).sort((a, b) => a - b);
  const runs = [];
  for (const i of sorted) {
    const last = runs[runs.length - 1];
    if (last && i === last[1] + 1) last[1] = i;
    else runs.push([i, i]);
  }
  return runs;
}
function valueDomain(series) {
  let lo = 0;
  let hi = 0;
  for (const s of series) {
    for (const x of s.values) {
      if (!Number.isFinite(x)) continue;
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
    }
  }
  if (!(hi > lo)) hi = lo + 1;
  const ticks = niceTicks(lo, hi, 5);
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : hi - lo;
  const round = (x) => +x.toPrecision(12);
  return [round(Math.floor(lo / step + 1e-9) * step), round(Math.ceil(hi / step - 1e-9) * step)];
}
function lineChartScene(spec, measure) {
  const { series, labels = [], marked = [], title = "", xTitle = "", yTitle = "", theme, width = 640, height = 240 } = spec;
  const n = Math.max(1, ...series.map((s) => s.values.length));
  const mono = `${FONT_PX2}px ${theme.mono}`;
  const sans = `${FONT_PX2}px ${theme.font}`;
  const domain = valueDomain(series);
  const [d0, d1] = domain;
  const ticks = niceTicks(d0, d1, 5).filter((t) => t >= d0 && t <= d1);
  const tickText = ticks.map((t) => formatValue(t, 3));
  const shownLabels = (stride) => labelPositions(n, stride).map((i) => [i, truncate(displayToken(labels[i] ?? i), LABEL_CHARS2)]);
  const left = 10 + Math.max(28, ...tickText.map((t) => measure(t, sans)));
  const right = 12;
  const top = 44;
  const plotW = Math.max(40, width - left - right);
  const step = plotW / n;
  const xLabels = shownLabels(labelStride(step, FONT_PX2 + 2));
  const bottom = 12 + Math.min(80, Math.max(20, ...xLabels.map(([, t]) => measure(t, mono)))) + 16;
  const plotH = Math.max(60, height - top - bottom);
  const x = (i) => left + (i + 0.5) * step;
  const y = (v) => top + (d1 - v) / (d1 - d0) * plotH;
  const ops = [{ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" }];
  for (const [a, b] of runsOf(marked)) {
    if (a >= n) continue;
    ops.push({
      type: "rect",
      x: left + a * step,
      y: top,
      w: (Math.min(b, n - 1) - a + 1) * step,
      h: plotH,
      fill: theme.muted,
      alpha: 0.14
    });
  }
  ticks.forEach((t, k) => {
    ops.push({ type: "line", x1: left, y1: y(t), x2: left + plotW, y2: y(t), stroke: theme.border, width: t === 0 ? 1.2 : 0.6 });
    ops.push({ type: "text", x: left - 4, y: y(t), text: tickText[k], font: sans, color: theme.muted, align: "right", baseline: "middle" });
  });
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  for (const [i, text] of xLabels) {
    ops.push({
      type: "text",
      x: x(i),
      y: top + plotH + 4,
      text,
      font: mono,
      color: theme.fg,
      align: "right",
      baseline: "middle",
      rotate: -Math.PI / 2
    });
  }
  if (yTitle) ops.push({ type: "text", x: 6, y: top - 8, text: yTitle, font: sans, color: theme.muted, align: "left" });
  if (xTitle) ops.push({ type: "text", x: left + plotW, y: height - 4, text: xTitle, font: sans, color: theme.muted, align: "right" });
  let lx = width - right;
  for (const s of [...series].reverse()) {
    const w = measure(s.name, sans);
    lx -= w;
    ops.push({ type: "text", x: lx, y: 30, text: s.name, font: sans, color: theme.fg, align: "left", baseline: "middle" });
    lx -= 22;
    ops.push({ type: "line", x1: lx, y1: 30, x2: lx + 16, y2: 30, stroke: s.color, width: 2, dash: s.dash });
    lx -= 14;
  }
  const dots = step >= 5;
  for (const s of series) {
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (!Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${x(i).toFixed(2)} ${y(v).toFixed(2)}`;
      pen = true;
      if (dots) ops.push({ type: "circle", x: x(i), y: y(v), r: 2.2, fill: s.color });
    });
    if (d) ops.push({ type: "path", d, stroke: s.color, width: 1.6, dash: s.dash });
  }
  return { width, height, ops, layout: { left, top, plotW, plotH, step, n, domain } };
}
function slotAt(layout, px, py) {
  const { left, top, plotW, plotH, step, n } = layout;
  if (px < left || px >= left + plotW || py < top || py > top + plotH) return null;
  return Math.min(n - 1, Math.floor((px - left) / step));
}
var LineChart = class {
  constructor({ onHover, label = "chart" } = {}) {
    const layer = { position: "absolute", left: "0", top: "0" };
    this.canvas = h("canvas", { class: "cw-chart-canvas", attrs: { role: "img", "aria-label": label }, style: layer });
    this.overlay = h("canvas", { class: "cw-chart-overlay", style: { ...layer, cursor: "crosshair" } });
    this.el = h("div", { class: "cw-chart", style: { position: "relative" } }, [this.canvas, this.overlay]);
    this.scene = null;
    this.spec = null;
    this.hover = null;
    this.listeners = {
      mousemove: (e) => {
        if (!this.scene) return;
        const box = this.overlay.getBoundingClientRect();
        onHover?.(slotAt(this.scene.layout, e.clientX - box.left, e.clientY - box.top));
      },
      mouseleave: () => onHover?.(null)
    };
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.addEventListener(type, fn);
  }
  /** Redraw: spec as lineChartScene's. */
  update(spec) {
    const ctx = this.canvas.getContext("2d");
    this.spec = spec;
    this.scene = lineChartScene(spec, (text, font) => {
      ctx.font = font;
      return ctx.measureText(text).width;
    });
    this.canvas.cwScene = this.scene;
    paintCanvas(this.canvas, this.scene);
    this.el.style.width = `${this.scene.width}px`;
    this.el.style.height = `${this.scene.height}px`;
    this.setHover(this.hover);
  }
  /** Mark slot `i` (null: none): a dashed line and each series' point there. */
  setHover(i) {
    this.hover = i;
    if (!this.scene) return;
    const { left, top, plotH, step, domain } = this.scene.layout;
    const ops = [];
    if (i != null && i >= 0) {
      const x = left + (i + 0.5) * step;
      const { theme, series } = this.spec;
      ops.push({ type: "line", x1: x, y1: top, x2: x, y2: top + plotH, stroke: theme.fg, dash: [3, 2] });
      for (const s of series) {
        const v = s.values[i];
        if (!Number.isFinite(v)) continue;
        const y = top + (domain[1] - v) / (domain[1] - domain[0]) * plotH;
        ops.push({ type: "circle", x, y, r: 4, fill: s.color, stroke: theme.bgCss, width: 1.5 });
      }
    }
    paintCanvas(this.overlay, { width: this.scene.width, height: this.scene.height, ops });
  }
  destroy() {
    for (const [type, fn] of Object.entries(this.listeners)) this.overlay.removeEventListener(type, fn);
    this.el.remove();
  }
};

// js/lib/save.js
function pngScale(dpr = globalThis.devicePixelRatio) {
  return Math.max(2, Number(dpr) || 1);
}
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
function safeName(s) {
  return String(s).replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^_+|_+$/g, "") || "view";
}
function saveButtons({ what, picture, name: name3, background, scale }) {
  const save = (kind) => () => {
    const scene = picture();
    if (!scene) return;
    const file = `${safeName(name3())}.${kind}`;
    if (kind === "svg") {
      download(new Blob([sceneToSVG(scene, background())], { type: "image/svg+xml" }), file);
    } else {
      const canvas = sceneCanvas(scene, background(), scale ?? pngScale());
      canvas.toBlob((blob) => blob && download(blob, file), "image/png");
    }
  };
  const png = button("PNG", `save the ${what} as PNG`, save("png"));
  png.title = `save the ${what} as PNG (at the screen's pixel ratio, at least 2×)`;
  const svg = button("SVG", `save the ${what} as SVG`, save("svg"));
  svg.title = `save the ${what} as SVG (${SVG_CELLS_RULE})`;
  return [png, svg];
}

// js/lib/note.js
function modelNote(v, banner) {
  const el = h("div", { class: "cw-hint cw-model-note", attrs: { "aria-live": "polite" }, style: { margin: "2px 0 4px" } });
  const show = () => {
    const text = [v.model.get("model_note"), v.model.get("hooks_note")].filter(Boolean).join(" · ");
    if (!text && !el.parentElement) return;
    if (!el.parentElement) {
      if (banner.parentElement) banner.after(el);
      else v.root.prepend(el);
    }
    el.textContent = text;
    el.hidden = !text;
    v.root.dataset.cwModelNote = text;
  };
  show();
  v.on("change:model_note change:hooks_note", show);
  return el;
}

// js/lib/payloads.js
function agree(payloads) {
  if (!payloads.length || payloads.some((p) => p == null || typeof p !== "object")) return false;
  return payloads.every((p) => p.revision === payloads[0].revision);
}
function payloadReader(names, get) {
  let last = null;
  return () => {
    const now = names.map((name3) => get(name3));
    const same = last && names.every((name3, i) => last[name3] === now[i]);
    if (!same && agree(now)) last = Object.fromEntries(names.map((name3, i) => [name3, now[i]]));
    return last;
  };
}
function sameRevision(extra, base) {
  return agree([extra, base]);
}

// js/lib/theme.js
function parseColor(css) {
  const s = String(css ?? "").trim();
  const hex = /^#([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i.exec(s);
  if (hex) {
    let d = hex[1];
    if (d.length <= 4) d = [...d].map((c) => c + c).join("");
    const n = (i) => parseInt(d.slice(i, i + 2), 16);
    return { rgb: [n(0), n(2), n(4)], alpha: d.length === 8 ? n(6) / 255 : 1 };
  }
  const m = /^rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:[ ,/]+([\d.]+%?))?/.exec(s);
  if (!m) return null;
  const alpha = m[4] === void 0 ? 1 : m[4].endsWith("%") ? parseFloat(m[4]) / 100 : parseFloat(m[4]);
  return { rgb: [+m[1], +m[2], +m[3]], alpha };
}
function luminance([r, g, b]) {
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}
var isDark = (rgb) => luminance(rgb) < 0.45;
var DEFAULT_BG = { light: [255, 255, 255], dark: [17, 19, 24] };
function detectTheme(facts = {}) {
  const { jpLight, jpBackground, vscodeBackground, colabTheme, pageBackground, prefersDark } = facts;
  const classes = new Set(typeof facts.bodyClasses === "string" ? facts.bodyClasses.split(/\s+/) : facts.bodyClasses || []);
  const opaque = (css) => {
    const c = parseColor(css);
    return c && c.alpha > 0.5 ? c.rgb : null;
  };
  const pick = (source, dark, own) => {
    const d = dark ?? (own ? isDark(own) : pageBackground ? isDark(pageBackground) : !!prefersDark);
    const bg = [pageBackground, own].find((c) => c && isDark(c) === d);
    return { source, dark: d, bg: bg || DEFAULT_BG[d ? "dark" : "light"] };
  };
  if (jpLight === "true" || jpLight === "false") return pick("jupyterlab", jpLight === "false", opaque(jpBackground));
  if (opaque(jpBackground)) return pick("jupyterlab", null, opaque(jpBackground));
  const vscodeClass = classes.has("vscode-high-contrast-light") || classes.has("vscode-light") ? false : classes.has("vscode-dark") || classes.has("vscode-high-contrast") ? true : null;
  const vscodeBg = opaque(vscodeBackground);
  if (vscodeClass != null || vscodeBg) return pick("vscode", vscodeClass, vscodeBg);
  if (colabTheme === "dark" || colabTheme === "light") return pick("colab", colabTheme === "dark", null);
  if (pageBackground) return pick("page", null, pageBackground);
  return pick("preference", !!prefersDark, null);
}
function ancestorBackground(el) {
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
    const parsed = parseColor(getComputedStyle(node).backgroundColor);
    if (parsed && parsed.alpha > 0.5) return parsed.rgb;
  }
  return null;
}
function themeFacts(el) {
  const style = getComputedStyle(el);
  const doc = el.ownerDocument || document;
  return {
    jpLight: doc.body?.getAttribute("data-jp-theme-light") ?? void 0,
    jpBackground: style.getPropertyValue("--jp-layout-color0").trim(),
    vscodeBackground: style.getPropertyValue("--vscode-editor-background").trim(),
    bodyClasses: doc.body ? [...doc.body.classList] : [],
    colabTheme: doc.documentElement?.getAttribute("theme") ?? void 0,
    pageBackground: ancestorBackground(el),
    prefersDark: typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches
  };
}
function readTheme(el) {
  const style = getComputedStyle(el);
  const v = (name3, fallback) => style.getPropertyValue(name3).trim() || fallback;
  const { source, dark, bg } = detectTheme(themeFacts(el));
  return {
    source,
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
      if (node)
        mo.observe(node, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name", "style", "theme"] });
    }
    observers.push(() => mo.disconnect());
  }
  if (typeof matchMedia === "function") {
    const mq = matchMedia("(prefers-color-scheme: dark)");
    mq.addEventListener("change", check);
    observers.push(() => mq.removeEventListener("change", check));
  }
  return () => {
    for (const stop of observers) stop();
  };
}

// js/lib/unsupported.js
function greyOut(root, unsupported) {
  const reasons = unsupported || {};
  const names = Object.keys(reasons).sort().join(",");
  if (!names && !root.dataset.cwUnsupported) return;
  for (const node of root.querySelectorAll("[data-control]")) {
    const reason = reasons[node.dataset.control] ?? reasons["*"];
    if (reason) {
      if (!node.classList.contains("cw-unsupported")) node.dataset.cwTitle = node.title || "";
      node.disabled = true;
      node.setAttribute("aria-disabled", "true");
      node.classList.add("cw-unsupported");
      node.title = reason;
    } else if (node.classList.contains("cw-unsupported")) {
      node.disabled = false;
      node.removeAttribute("aria-disabled");
      node.classList.remove("cw-unsupported");
      node.title = node.dataset.cwTitle || "";
    }
  }
  root.dataset.cwUnsupported = names;
}
function reasonLines(unsupported) {
  return Object.entries(unsupported || {}).map(([control, reason]) => control === "*" ? reason : `${control}: ${reason}`);
}
function unsupportedNote(v, banner) {
  const el = h("div", { class: "cw-hint cw-unsupported-note", attrs: { "aria-live": "polite" } });
  el.hidden = true;
  const show = () => {
    const unsupported = v.model.get("unsupported") || {};
    greyOut(v.root, unsupported);
    const lines = reasonLines(unsupported);
    if (!lines.length && !el.parentElement) return;
    if (!el.parentElement) {
      if (banner.parentElement) banner.after(el);
      else v.root.prepend(el);
    }
    el.textContent = lines.join("\n");
    el.hidden = !lines.length;
  };
  show();
  v.on("change:unsupported", show);
  v.root.addEventListener("cw-drawn", show);
  return show;
}

// js/lib/view.js
var VIEWS = {};
function defineView(name3, setup) {
  if (VIEWS[name3]) throw new Error(`circuitwidgets: two views named ${name3}`);
  const view = { name: name3, render: ({ model, el }) => mount(name3, setup, model, el) };
  VIEWS[name3] = view;
  return view;
}
function render({ model, el }) {
  const name3 = model.get("_cw_view");
  const view = VIEWS[name3];
  if (!view) {
    el.textContent = `circuitwidgets: no view named ${JSON.stringify(name3)} in this bundle (reinstall the package?)`;
    return void 0;
  }
  try {
    return view.render({ model, el });
  } catch (err) {
    el.append(h("pre", { class: "cw-error", text: `circuitwidgets: the ${name3} view failed to draw: ${err?.stack ?? err}` }));
    return void 0;
  }
}
var camel = (key) => `cw${key[0].toUpperCase()}${key.slice(1)}`;
function mount(name3, setup, model, el) {
  const root = h("div", {
    class: `cw-root cw-${name3}`,
    attrs: { tabindex: 0, "data-cw-kind": name3, "data-lm-suppress-shortcuts": "true" }
  });
  el.append(root);
  const cleanups = [];
  let hooks = {};
  const guard = (fn) => (...args) => {
    try {
      return fn(...args);
    } catch (err) {
      console.error(err);
      v.error(`circuitwidgets: the ${name3} view failed: ${err?.message ?? err}`, "crash");
    }
  };
  const compact = compactMode(root, model);
  const banner = errorBanner();
  const v = viewContext({ name: name3, model, root, banner, cleanups, guard, compact, hooks: () => hooks });
  hooks = setup(v) || {};
  compact.ready = true;
  compact.update();
  modelNote(v, banner.el);
  unsupportedNote(v, banner.el);
  const redraw = guard(() => hooks.draw?.());
  v.size = hooks.size?.(Number.POSITIVE_INFINITY);
  v.on("change:error", v.refresh);
  v.on("change:busy", v.refresh);
  const headControls = () => {
    root.dataset.cwHeadControls = model.get("head_controls") === false ? "off" : "on";
  };
  headControls();
  v.on("change:head_controls", headControls);
  const resized = () => {
    v.size = hooks.size?.(v.width > 0 ? v.width : Number.POSITIVE_INFINITY);
    redraw();
  };
  v.on("change:compact", () => {
    compact.expanded = false;
    if (compact.update()) resized();
  });
  v.listen(compact.more, "click", () => {
    compact.expanded = !compact.expanded;
    if (compact.update()) resized();
  });
  v.listen(root, "keydown", (e) => pressed(e, hooks.keys));
  cleanups.push(
    watchTheme(root, () => {
      v.theme = readTheme(root);
      redraw();
    })
  );
  if (typeof ResizeObserver === "function") cleanups.push(watchWidth(v, hooks, redraw));
  v.refresh();
  guard(() => (hooks.start ?? hooks.draw)?.())();
  return () => {
    for (const fn of cleanups.reverse()) fn();
    root.remove();
  };
}
function viewContext({ name: name3, model, root, banner, cleanups, guard, compact, hooks }) {
  const errors = /* @__PURE__ */ new Map();
  const busyMark = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  busyMark.hidden = true;
  const v = {
    name: name3,
    model,
    root,
    standalone: model.standalone === true,
    // an exported page: no kernel behind the model
    theme: readTheme(root),
    width: 0,
    size: void 0,
    /** True while the view is drawn compact (a Dashboard's first glance): sizes may be smaller. */
    get compact() {
      return compact.shown;
    },
    banner: banner.el,
    busyMark,
    ...undoneOnCleanup(model, cleanups, guard),
    /** Set model traits and send them to the kernel. */
    set(values) {
      for (const [k, value] of Object.entries(values)) model.set(k, value);
      model.save_changes();
    },
    /** Show a local error (`source` keeps several apart; "" clears); the model's error comes first. */
    error(message, source = "view") {
      errors.set(source, message || "");
      v.refresh();
    },
    /** Re-read the error banner and the busy mark. */
    refresh() {
      banner.show(model.get("error") || [...errors.values()].find(Boolean) || "");
      const busy = hooks().busy;
      const text = v.standalone ? "" : busy ? busy() : model.get("busy") ? "computing…" : "";
      busyMark.textContent = text;
      busyMark.hidden = !text;
    }
  };
  return Object.assign(v, payloadSets(v), { drawn: drawCounter(v, hooks) });
}
function undoneOnCleanup(model, cleanups, guard) {
  return {
    /** Call fn on model events ("change:a change:b"); removed on clean-up. */
    on(events, fn) {
      const safe = guard(fn);
      for (const event of events.split(/\s+/).filter(Boolean)) {
        model.on(event, safe);
        cleanups.push(() => model.off(event, safe));
      }
    },
    /** addEventListener, removed on clean-up. */
    listen(target, type, fn) {
      const safe = guard(fn);
      target.addEventListener(type, safe);
      cleanups.push(() => target.removeEventListener(type, safe));
    },
    /** End `thing` on clean-up: its destroy() or cancel() (a throttled function), else call it; returns it. */
    own(thing) {
      cleanups.push(() => {
        if (thing.destroy) thing.destroy();
        else if (thing.cancel) thing.cancel();
        else thing();
      });
      return thing;
    }
  };
}
function payloadSets(v) {
  const readers = /* @__PURE__ */ new Map();
  return {
    /**
     * The payloads `names` when their revisions agree, else the last set that did (null before):
     * a picture never mixes two refreshes.
     */
    payloads(...names) {
      const key = names.join(" ");
      if (!readers.has(key))
        readers.set(
          key,
          payloadReader(names, (n) => v.model.get(n))
        );
      return readers.get(key)();
    },
    /**
     * Call fn(set) when the payloads `names` ("a b") form a new set whose revisions agree: a
     * payload that arrives ahead of the others of its refresh leaves the picture as it is.
     */
    onPayloads(names, fn) {
      const list = names.split(/\s+/).filter(Boolean);
      let seen = v.payloads(...list);
      v.on(list.map((n) => `change:${n}`).join(" "), () => {
        const now = v.payloads(...list);
        if (now === seen) return;
        seen = now;
        fn(now);
      });
    }
  };
}
function drawCounter(v, hooks) {
  const { root } = v;
  let draws = 0;
  return (what, t0) => {
    draws += 1;
    root.dataset.cwDraws = String(draws);
    root.dataset.cwTheme = v.theme.dark ? "dark" : "light";
    root.dataset.cwThemeSource = v.theme.source;
    const marks = hooks().marks ? hooks().marks() : {};
    for (const [k, value] of Object.entries(marks)) root.dataset[camel(k)] = String(value ?? "");
    if (typeof requestAnimationFrame === "function") {
      requestAnimationFrame(() => {
        root.dataset.cwFrameAt = String(performance.now());
        root.dataset.cwFrameRevision = String(marks.revision ?? "");
      });
    }
    const detail = t0 == null ? { what } : { what, ms: performance.now() - t0 };
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail }));
  };
}
function compactMode(root, model) {
  const more = h("button", { class: "cw-button cw-more", type: "button", attrs: { "aria-expanded": "false" } });
  const mode = {
    more,
    shown: false,
    // the cw-compact class is on the root
    ready: false,
    // the view's own elements are in the root (the button goes after them)
    expanded: false,
    // "more" was clicked: this view shows all while the trait stays on
    update() {
      const on = model.get("compact") === true;
      const was = mode.shown;
      mode.shown = on && !mode.expanded;
      root.classList?.toggle("cw-compact", mode.shown);
      root.dataset.cwCompact = on ? mode.expanded ? "expanded" : "on" : "off";
      more.hidden = !on;
      more.textContent = mode.expanded ? "less ▴" : "more ▾";
      more.title = mode.expanded ? "back to the compact view" : "show this view's captions and other panels";
      more.setAttribute("aria-expanded", String(mode.expanded));
      if (on && mode.ready && !more.parentElement) root.append(more);
      return was !== mode.shown;
    }
  };
  mode.update();
  return mode;
}
function pressed(e, keys) {
  if (e.target.closest?.("textarea, input, select")) return;
  const fn = keys?.[e.key];
  if (!fn) return;
  e.preventDefault();
  e.stopPropagation();
  fn(e);
}
function watchWidth(v, hooks, redraw) {
  const step = hooks.sizeStep ?? 8;
  const resize = new ResizeObserver(() => {
    const width = v.root.clientWidth;
    if (!(width > 0)) return;
    const moved = Math.abs(width - v.width) > step;
    v.width = width;
    const next = hooks.size ? hooks.size(width) : v.size;
    if (moved || Math.abs(next - v.size) > step) {
      v.size = next;
      redraw();
    }
  });
  resize.observe(v.root);
  return () => resize.disconnect();
}

// js/views/ablation.js
var signed = (x, digits = 4) => Number.isFinite(x) && x > 0 ? `+${formatValue(x, digits)}` : formatValue(x, digits);
var headName = ([l, hd]) => `L${l}H${hd}`;
var sameHeads = (a, b) => JSON.stringify(a || []) === JSON.stringify(b || []);
function toggled(heads, pair) {
  const key = (p) => p[0] * 1e6 + p[1];
  const rest = heads.filter((p) => key(p) !== key(pair));
  if (rest.length === heads.length) rest.push(pair);
  return rest.sort((a, b) => key(a) - key(b));
}
defineView("ablation", (v) => {
  const { model } = v;
  const state = { fx: null, L: 0, H: 0, strip: null, batch: 0, P: 0, hover: null, hoverPos: null };
  const info = () => model.get("info") || {};
  const effects = () => v.payloads("effects")?.effects || {};
  const pair = () => v.payloads("joint", "strip") || {};
  const joint = () => pair().joint || {};
  const strip = () => pair().strip || {};
  const layers = () => effects().layers || info().attn_layers || [];
  const ablated = () => model.get("ablated") || [];
  const isAblated = (l, hd) => ablated().some((p) => p[0] === l && p[1] === hd);
  const selectedRow = () => layers().indexOf(model.get("layer"));
  const fx = (k, row, hd) => state.fx[(k * state.L + row) * state.H + hd];
  const metricLabel = () => info().metric_labels?.[effects().metric || model.get("metric")] || model.get("metric");
  const prompt = () => Math.max(0, Math.min(state.batch - 1, model.get("prompt_index") || 0));
  const pending = () => !sameHeads(joint().heads, ablated());
  const metricSelect = selectField("Metric", "metric", ["loss", "logit_diff"], (m) => info().metric_labels?.[m] || m);
  const methodSelect = selectField("Ablation", "method", ["zero", "mean", "resample"], (m) => m);
  const promptSelect = selectControl("Prompt", (i) => v.set({ prompt_index: i }));
  const clear = button("clear", "ablate no head (empty the set)", () => v.set({ ablated: [] }));
  const buttons = saveButtons({
    what: "grid",
    picture: () => grid.scene,
    name: () => `ablation_${model.get("metric")}_${model.get("method")}`,
    background: () => v.theme.bgCss
  });
  if (v.standalone) metricSelect.select.disabled = methodSelect.select.disabled = clear.disabled = true;
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    metricSelect.el,
    methodSelect.el,
    promptSelect.el,
    clear,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons
  ]);
  function selectField(label, trait, values, text) {
    const select = h("select", { class: "cw-select", attrs: { "aria-label": label.toLowerCase() } });
    v.listen(select, "change", () => v.set({ [trait]: select.value }));
    const el = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: label }), select]);
    return {
      el,
      select,
      sync() {
        const options = values.filter((x) => x !== "logit_diff" || info().has_target || model.get(trait) === x);
        if (select.dataset.options !== options.join("|")) {
          select.replaceChildren(...options.map((x) => h("option", { value: x, text: text(x) })));
          select.dataset.options = options.join("|");
        }
        select.value = model.get(trait);
      }
    };
  }
  const caption = h("div", { class: "cw-hint cw-ab-caption" });
  const grid = v.own(
    new Heatmap({
      label: "effect of ablating each head",
      onHover: (hit) => {
        state.hover = hit;
        drawMarks();
      },
      onClick: (hit) => toggleHead(hit.row, hit.col)
    })
  );
  const panel = h("div", { class: "cw-ab-joint", attrs: { "aria-live": "polite" } });
  const readout = h("div", { class: "cw-readout cw-ab-readout", attrs: { "aria-live": "polite" } });
  const stripTitle = h("div", { class: "cw-hint cw-ab-strip-title" });
  const chart = v.own(
    new LineChart({
      label: "metric at each position",
      onHover: (i) => {
        state.hoverPos = i;
        chart.setHover(i);
        drawStripReadout();
      }
    })
  );
  const stripReadout = h("div", { class: "cw-readout cw-ab-strip-readout", attrs: { "aria-live": "polite" } });
  v.root.append(
    toolbar,
    v.banner,
    caption,
    h("div", { class: "cw-ab-main" }, [grid.el, panel]),
    readout,
    stripTitle,
    chart.el,
    stripReadout
  );
  function toggleHead(row, hd) {
    const l = layers()[row];
    if (l == null) return;
    if (v.standalone) {
      v.set({ layer: l, head: hd });
      return;
    }
    v.set({ ablated: toggled(ablated(), [l, hd]), layer: l, head: hd });
  }
  function scale() {
    let m = 0;
    for (let i = 0; i < state.L * state.H; i++) if (Number.isFinite(state.fx[i])) m = Math.max(m, Math.abs(state.fx[i]));
    return makeScale("diverging", { dark: v.theme.dark, domain: [-(m || 1), m || 1] });
  }
  function gridMarks(layout, sc) {
    const text = (x) => signed(x, 2);
    const values = { value: (l, hd) => fx(0, l, hd), text, scale: sc, theme: v.theme };
    const ops = layout.cell >= 24 ? cellValueOps(layout, state.L, state.H, values) : [];
    for (const [l, hd] of ablated()) {
      const row = layers().indexOf(l);
      if (row >= 0) ops.push(cellBox(layout, row, hd, { color: v.theme.accent, width: 3, inset: 1.5 }));
    }
    return ops;
  }
  function drawGrid() {
    const { L, H } = state;
    const sc = scale();
    grid.update({
      rows: L,
      cols: H,
      paint: (pixels) => {
        for (let i = 0; i < L * H; i++) pixels[i] = packRGBA(...sc.rgb(state.fx[i]));
      },
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      title: `Δ ${metricLabel()} per head`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: Math.max(200, Math.min(420, Math.max(L, H) * 48)),
      marks: (layout) => gridMarks(layout, sc)
    });
    drawMarks();
  }
  function drawMarks() {
    const row = selectedRow();
    const selected = (layout) => row >= 0 ? [{ ...cellBox(layout, row, model.get("head"), { color: v.theme.fg, width: 1.5, inset: -2 }), dash: [3, 2] }] : [];
    grid.setHighlight({ row: state.hover?.row, col: state.hover?.col, marks: selected });
    drawReadout();
  }
  function drawReadout() {
    if (!state.fx) {
      readout.textContent = "";
      return;
    }
    const hover = state.hover;
    const row = hover ? hover.row : selectedRow();
    const hd = hover ? hover.col : model.get("head");
    if (row < 0 || row >= state.L) {
      readout.textContent = "";
      return;
    }
    const e = effects();
    const [x, lo, hi, p] = [0, 1, 2, 3].map((k) => fx(k, row, hd));
    const l = layers()[row];
    const lead = `${hover ? "" : "selected "}L${l} H${hd}${isAblated(l, hd) ? " (in the ablated set)" : ""}`;
    const interval = `95 % interval [${signed(lo)}, ${signed(hi)}] (bootstrap, ${e.n_boot} resamples, seed ${e.seed})`;
    readout.textContent = Number.isFinite(x) ? `${lead} · effect ${signed(x)} · ${interval} · p = ${formatValue(p, 3)} (${e.p_method})` : `${lead} · not ablated alone`;
    Object.assign(readout.dataset, {
      layer: String(l),
      head: String(hd),
      effect: String(x),
      low: String(lo),
      high: String(hi),
      p: String(p)
    });
  }
  function drawCaption() {
    const e = effects();
    const i = info();
    const method = info().method_labels?.[e.method] || e.method;
    caption.textContent = [
      `Mean over ${i.batch} prompts of metric(ablated) − metric(clean) for the ${metricLabel()} (clean ${formatValue(e.clean)}),`,
      `each head ${method}; reference: ${i.reference}. Prompts: ${i.ran_on}.`,
      v.standalone ? "Saved page: changing the ablated set needs the kernel." : "Click heads to ablate them together (Enter toggles the selected head)."
    ].join(" ");
  }
  function drawPanel() {
    const j = joint();
    const heads = ablated();
    const rows = [h("div", { class: "cw-field-label", text: "Ablated together" })];
    if (!heads.length) {
      rows.push(h("div", { class: "cw-hint", text: "No head ablated: click cells of the grid to add heads to the set." }));
    } else if (pending()) {
      rows.push(
        h("div", { class: "cw-ab-heads", text: heads.map(headName).join(", ") }),
        h("div", { class: "cw-hint", text: "computing the combined effect…" })
      );
    } else {
      const interaction = j.mean - j.sum_single;
      rows.push(
        h("div", { class: "cw-ab-heads", text: heads.map(headName).join(", ") }),
        h("div", { class: "cw-ab-combined", text: `combined effect ${signed(j.mean)}` }),
        h("div", { class: "cw-hint", text: `95 % interval [${signed(j.low)}, ${signed(j.high)}] · p = ${formatValue(j.p_value, 3)}` }),
        h("div", { class: "cw-ab-sum", text: `sum of single effects ${signed(j.sum_single)}` }),
        h("div", { class: "cw-hint", text: `interaction (combined − sum) ${signed(interaction)}` })
      );
    }
    panel.replaceChildren(...rows);
    Object.assign(panel.dataset, {
      heads: heads.map(headName).join(","),
      pending: String(pending()),
      mean: String(j.mean ?? ""),
      sumSingle: String(j.sum_single ?? "")
    });
  }
  function stripSeries() {
    const s = state.strip;
    const at = (k) => Array.from(s.subarray((k * state.batch + prompt()) * state.P, (k * state.batch + prompt() + 1) * state.P));
    const series = [{ name: "clean", values: at(0), color: v.theme.muted, dash: [4, 2] }];
    const heads = strip().heads || [];
    if (heads.length) series.push({ name: `${heads.map(headName).join(", ")} ablated`, values: at(1), color: v.theme.accent });
    return series;
  }
  function slotLabels() {
    const labels = strip().labels?.[prompt()] || [];
    return strip().kind === "loss" ? labels.slice(1) : labels;
  }
  function drawStrip() {
    if (!state.strip) return;
    const kind = strip().kind;
    const what = kind === "loss" ? "next-token loss at each position (labelled by the token it predicts)" : "logit difference at each position";
    stripTitle.textContent = `Prompt ${prompt()}: ${what}; shaded: the positions the metric ${kind === "loss" ? "averages" : "reads"}`;
    chart.update({
      series: stripSeries(),
      labels: slotLabels(),
      marked: strip().positions || [],
      title: `${kind === "loss" ? "Loss" : "Logit difference"} on prompt ${prompt()}`,
      yTitle: kind === "loss" ? "loss (nats)" : "logit diff",
      xTitle: kind === "loss" ? "predicted token →" : "position →",
      theme: v.theme,
      width: v.size ?? 640,
      height: 250
    });
    chart.el.dataset.prompt = String(prompt());
    chart.el.dataset.heads = (strip().heads || []).map(headName).join(",");
    drawStripReadout();
  }
  function drawStripReadout() {
    const i = state.hoverPos;
    if (!state.strip || i == null) {
      stripReadout.textContent = "hover the chart for the values at a position";
      return;
    }
    const series = stripSeries();
    const labels = strip().labels?.[prompt()] || [];
    const where = strip().kind === "loss" ? `position ${i} ${quote(labels[i] ?? "")} → ${quote(labels[i + 1] ?? "")}` : `position ${i} ${quote(labels[i] ?? "")}`;
    const values = series.map((s) => `${s.name} ${formatValue(s.values[i])}`);
    const delta = series.length > 1 ? ` (${signed(series[1].values[i] - series[0].values[i])})` : "";
    stripReadout.textContent = `${where} · ${values.join(" · ")}${delta}`;
  }
  function syncControls() {
    metricSelect.sync();
    methodSelect.sync();
    promptSelect.set(indexOptions(state.batch || info().batch || 1), model.get("prompt_index"));
  }
  function draw() {
    syncControls();
    if (!state.fx) return;
    const t0 = performance.now();
    drawCaption();
    drawGrid();
    drawPanel();
    drawStrip();
    v.drawn("all", t0);
  }
  function readEffects() {
    const p = effects();
    if (!hasData(p)) return;
    try {
      const [K, L, H] = p.shape;
      if (K !== 4 || !L || !H) throw new RangeError(`effects have shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { fx: floatValues(p), L, H });
      v.error("", "decode");
    } catch (err) {
      state.fx = null;
      v.error(`could not read the effects: ${err.message}`, "decode");
    }
  }
  function readStrip() {
    const p = strip();
    if (!hasData(p)) return;
    try {
      const [two, batch, P] = p.shape;
      if (two !== 2 || !batch || !P) throw new RangeError(`strip has shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { strip: floatValues(p), batch, P });
      v.error("", "decode-strip");
    } catch (err) {
      state.strip = null;
      v.error(`could not read the strip: ${err.message}`, "decode-strip");
    }
  }
  function start() {
    readEffects();
    readStrip();
    draw();
  }
  v.onPayloads("effects", () => {
    state.hover = null;
    readEffects();
    draw();
  });
  v.onPayloads("joint strip", () => {
    readStrip();
    draw();
  });
  v.on("change:ablated", () => {
    if (!state.fx) return;
    drawGrid();
    drawPanel();
    v.refresh();
    v.drawn("ablated");
  });
  v.on("change:prompt_index", () => {
    syncControls();
    state.hoverPos = null;
    drawStrip();
    v.drawn("prompt");
  });
  v.on("change:layer change:head", () => {
    if (!state.fx) return;
    drawMarks();
    v.drawn("select");
  });
  v.on("change:metric change:method", syncControls);
  v.on("change:progress", v.refresh);
  const move = (dl, dh) => () => {
    const row = selectedRow() + dl;
    const hd = model.get("head") + dh;
    if (row >= 0 && row < state.L && hd >= 0 && hd < state.H) v.set({ layer: layers()[row], head: hd });
  };
  const toggleSelected = () => {
    if (selectedRow() >= 0) toggleHead(selectedRow(), model.get("head"));
  };
  return {
    start,
    draw,
    size: (width) => Math.max(360, Math.min(900, width - 20)),
    busy: () => model.get("progress") || (model.get("busy") ? pending() && ablated().length ? `ablating ${ablated().map(headName).join(", ")} together…` : "computing…" : ""),
    keys: {
      ArrowRight: move(0, 1),
      ArrowLeft: move(0, -1),
      ArrowDown: move(1, 0),
      ArrowUp: move(-1, 0),
      Enter: toggleSelected,
      " ": toggleSelected
    },
    marks: () => ({
      ablated: ablated().map(headName).join(","),
      jointHeads: (joint().heads || []).map(headName).join(","),
      prompt: prompt(),
      metric: model.get("metric"),
      method: model.get("method"),
      layer: model.get("layer"),
      head: model.get("head"),
      revision: strip().revision ?? ""
    })
  };
});

// js/views/ablationtoggle.js
var METHODS = ["zero", "mean", "resample"];
var name = ([layer, head]) => `L${layer}H${head}`;
defineView("ablationtoggle", (v) => {
  const { model, standalone } = v;
  const heads = () => model.get("ablated") || [];
  const selected = () => [model.get("layer"), model.get("head")];
  const same = (a) => (b) => a[0] === b[0] && a[1] === b[1];
  const toggle = button("ablate", "ablate the selected head (again: restore it)", () => {
    const head = selected();
    const list = heads();
    v.set({ ablated: list.some(same(head)) ? list.filter((x) => !same(head)(x)) : [...list, head] });
  });
  toggle.classList.add("cw-abl-toggle");
  toggle.dataset.control = "ablated";
  const clear = button("clear all", "restore every ablated head", () => v.set({ ablated: [] }));
  clear.classList.add("cw-abl-clear");
  clear.dataset.control = "ablated";
  const method = h("select", {
    class: "cw-select cw-abl-method",
    attrs: { "aria-label": "ablation method", "data-control": "ablation_method" }
  });
  method.replaceChildren(...METHODS.map((m) => h("option", { value: m, text: m })));
  v.listen(method, "change", () => v.set({ ablation_method: method.value }));
  const methodField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Method" }), method]);
  const status = h("span", { class: "cw-abl-status", attrs: { "aria-live": "polite" } });
  const title = h("span", { class: "cw-abl-title", text: "Ablation" });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [title, toggle, clear, methodField, status, v.busyMark]);
  v.root.append(toolbar, v.banner);
  function draw() {
    const head = selected();
    const list = heads();
    const on = list.some(same(head));
    toggle.textContent = `${on ? "restore" : "ablate"} ${name(head)}`;
    toggle.setAttribute("aria-pressed", String(on));
    toggle.title = on ? `restore ${name(head)} (stop ablating it)` : `ablate ${name(head)}, the selected head`;
    toggle.disabled = standalone || Boolean(model.get("unsupported")?.ablated);
    clear.disabled = standalone || list.length === 0 || Boolean(model.get("unsupported")?.ablated);
    method.value = model.get("ablation_method") || "zero";
    method.disabled = standalone;
    const label = model.get("status")?.label;
    status.textContent = list.length ? `${label || list.map(name).join(", ")}: the views that run the model show it ablated` : "no head ablated: select a head, then ablate it";
    v.drawn("all");
  }
  v.on("change:ablated change:ablation_method change:layer change:head change:status", draw);
  return {
    draw,
    marks: () => ({ ablated: heads().map(name).join(","), method: model.get("ablation_method") })
  };
});

// js/lib/exact-row.js
var SEND_MS = 80;
function selectionKey(sel, locked) {
  return JSON.stringify({ query: sel?.query ?? null, key: sel?.key ?? null, locked });
}
var ExactRow = class {
  constructor(v, { current, patterns, head }) {
    Object.assign(this, { v, patterns, head });
    this.sent = null;
    this.send = v.own(
      throttle(() => {
        const { sel, locked } = current();
        const key = selectionKey(sel, locked);
        if (key === this.sent) return;
        this.sent = key;
        v.set({ selection: JSON.parse(key) });
      }, SEND_MS)
    );
  }
  /** The model's selection (set from Python, or saved in a page) as {sel, locked}; null when it is the one sent last. */
  received() {
    const value = this.v.model.get("selection") || {};
    if (selectionKey(value, !!value.locked) === this.sent) return null;
    const sel = value.query == null && value.key == null ? null : { query: value.query ?? null, key: value.key ?? null };
    return { sel, locked: !!value.locked };
  }
  /** The exact weights of `query` for the head shown, when the kernel sent them for this picture; else null. */
  values(query) {
    const row = this.v.model.get("row");
    if (!hasData(row) || row.query !== query || !sameRevision(row, this.patterns())) return null;
    const nKeys = row.shape[1];
    const index = row.heads ? row.heads.indexOf(this.head()) : this.head();
    return index >= 0 && index < row.shape[0] ? floatValues(row).subarray(index * nKeys, (index + 1) * nKeys) : null;
  }
};

// js/lib/heads.js
function headToolbar(v, { layer, save, criterion = false, onHead = (head) => setHead(v, head) }) {
  const { model, standalone } = v;
  const layerSelect = selectControl("Layer", (value) => v.set({ layer: value }));
  const headSelect = selectControl("Head", onHead);
  layerSelect.disable(standalone);
  if (standalone) layerSelect.el.title = "exported page: it holds the layer shown; other layers need the kernel";
  const buttons = saveButtons({ ...save, background: () => v.theme.bgCss });
  const row = h("div", { class: "cw-toolbar-row" }, [
    layerSelect.el,
    headSelect.el,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons
  ]);
  const line = criterion ? h("div", { class: "cw-hint cw-criterion" }) : null;
  return {
    el: h("div", { class: "cw-toolbar" }, [row]),
    criterion: line,
    layerSelect,
    headSelect,
    sync() {
      const info = model.get("info") || {};
      const shown = layer();
      const layers = standalone ? [shown] : info.attn_layers || [model.get("layer")];
      layerSelect.set(numberOptions(layers), standalone ? shown : model.get("layer"));
      headSelect.set(indexOptions(info.n_heads || 1), model.get("head"));
      if (line) line.textContent = `Tokens: ${model.get("token_criterion") || ""}`;
    }
  };
}
function setHead(v, head) {
  const n = v.model.get("info")?.n_heads || 1;
  const next = Math.max(0, Math.min(n - 1, head));
  if (next === v.model.get("head")) return false;
  v.set({ head: next });
  return true;
}
function headKeys(v, { layers = false, onHead = (head) => setHead(v, head) } = {}) {
  const keys = {
    ArrowRight: () => onHead(v.model.get("head") + 1),
    ArrowLeft: () => onHead(v.model.get("head") - 1)
  };
  if (layers && !v.standalone) {
    const step = (d) => () => {
      const layers2 = v.model.get("info")?.attn_layers || [];
      const i = layers2.indexOf(v.model.get("layer")) + d;
      if (i >= 0 && i < layers2.length) v.set({ layer: layers2[i] });
    };
    keys.ArrowDown = step(1);
    keys.ArrowUp = step(-1);
  }
  return keys;
}

// js/lib/held.js
function heldLayer(v, { held, parts, what }) {
  const note = h("div", { class: "cw-hint cw-held-note", attrs: { role: "status" } });
  note.hidden = true;
  const state = { stale: false };
  return {
    el: note,
    /** True when the page holds another layer than the one selected (the picture then hidden, the note shown). */
    get stale() {
      return state.stale;
    },
    check() {
      const wanted = v.model.get("layer");
      const layer = held();
      state.stale = v.standalone && layer != null && wanted != null && wanted !== layer;
      const only = `this page holds the ${what} of layer ${layer} only (select a head of layer ${layer}, or run the notebook)`;
      note.textContent = state.stale ? `Layer ${wanted} needs the kernel: ${only}` : "";
      note.hidden = !state.stale;
      for (const part of parts()) if (part) part.style.display = state.stale ? "none" : "";
      const seen = `${wanted}:${state.stale}`;
      if (v.standalone && state.seen != null && state.seen !== seen) v.drawn("held");
      state.seen = seen;
      return state.stale;
    }
  };
}

// js/lib/inflate.js
function isDeflated(p) {
  return !!p && p.encoding != null;
}
async function inflateBytes(data) {
  if (typeof DecompressionStream !== "function") throw new Error("this browser has no DecompressionStream to inflate the payload");
  const stream = new Blob([bytesOf(data)]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
async function inflated(p) {
  if (!isDeflated(p)) return p;
  if (p.encoding !== "deflate") throw new TypeError(`unknown payload encoding ${JSON.stringify(p.encoding)}`);
  const data = await inflateBytes(p.data);
  if (p.raw_bytes != null && data.length !== p.raw_bytes)
    throw new RangeError(`inflated ${data.length} bytes; the payload says ${p.raw_bytes}`);
  const { encoding: _, raw_bytes: __, ...rest } = p;
  return { ...rest, data };
}
function newestInflated() {
  let newest = 0;
  return (p, then, fail) => {
    const ticket = ++newest;
    if (!isDeflated(p)) return then(p);
    inflated(p).then(
      (plain) => ticket === newest && then(plain),
      (err) => ticket === newest && fail(err)
    );
  };
}

// js/lib/progress.js
function progressRow(v) {
  const fill = h("div", { class: "cw-progress-fill" });
  const bar = h("div", { class: "cw-progress-bar", attrs: { role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100 } }, [fill]);
  const text = h("span", { class: "cw-progress-text" });
  const cancel = h("button", {
    class: "cw-button cw-progress-cancel",
    text: "Cancel",
    attrs: { type: "button", title: "stop this computation" }
  });
  cancel.addEventListener("click", () => {
    cancel.disabled = true;
    v.set({ cancel: (v.model.get("cancel") || 0) + 1 });
  });
  const el = h("div", { class: "cw-toolbar-row cw-progress", attrs: { "aria-live": "polite" } }, [bar, text, cancel]);
  const show = () => {
    const p = v.model.get("progress") || {};
    el.hidden = !p.running || v.standalone;
    const percent2 = Math.round(100 * Math.min(1, Math.max(0, p.fraction || 0)));
    fill.style.width = `${percent2}%`;
    bar.setAttribute("aria-valuenow", String(percent2));
    text.textContent = p.text ? `computing ${p.text}` : "computing…";
    if (!p.running) cancel.disabled = false;
  };
  v.on("change:progress", show);
  show();
  return { el };
}

// js/lib/sequence-box.js
function sequenceBox(v, hasTokenizer) {
  const box = promptBox({
    placeholder: hasTokenizer() ? "type a prompt, Enter to run" : "token ids separated by spaces, Enter to run",
    onSubmit: (text) => {
      if (hasTokenizer()) return v.set({ prompt: text });
      const ids = text.trim().split(/[\s,]+/).filter(Boolean).map(Number);
      if (!ids.length || ids.some((x) => !Number.isInteger(x) || x < 0)) {
        v.error(`token ids must be non-negative integers separated by spaces; got ${JSON.stringify(truncate(text, 40))}`, "prompt");
        return;
      }
      v.error("", "prompt");
      v.set({ tokens: ids });
    }
  });
  if (v.standalone) box.readOnly(true, "exported page: no kernel to re-run the model");
  return box;
}

// js/lib/thumbs.js
var ThumbGrid = class {
  /** draw(i, ctx, sizePx) paints thumbnail i; onHover(i | null); onClick(i). */
  constructor({ draw, onHover, onClick, size = 64, label = "heads" } = {}) {
    this.draw = draw;
    this.size = size;
    this.el = h("div", { class: "cw-thumbs", attrs: { role: "listbox", "aria-label": label } });
    this.items = [];
    this.stop = itemEvents(this.el, ".cw-thumb", { onHover, onClick });
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
    labels.forEach((text, i) => {
      this.items[i].caption.textContent = text;
    });
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
    this.stop();
    this.el.remove();
  }
};
var scratch = null;
function drawStackThumb(ctx, px, stack, m, lut) {
  const rows = Math.min(stack.rows, px);
  const cols = Math.min(stack.cols, px);
  scratch ?? (scratch = document.createElement("canvas"));
  scratch.width = cols;
  scratch.height = rows;
  const sctx = scratch.getContext("2d");
  const image = sctx.createImageData(cols, rows);
  const pixels = new Uint32Array(image.data.buffer);
  if (rows === stack.rows && cols === stack.cols) {
    stack.paint(m, lut, pixels, 0);
  } else {
    const pooled = stack.pool(m, rows, cols);
    for (let k = 0; k < pooled.length; k++) pixels[k] = pooled[k] < 0 ? 0 : lut[pooled[k]];
  }
  sctx.putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(scratch, 0, 0, px, px);
}

// js/lib/tokens.js
var TokenStrip = class {
  constructor({ onHover, onClick } = {}) {
    this.el = h("div", { class: "cw-tokens", attrs: { role: "list", "aria-label": "tokens" } });
    this.spans = [];
    this.stop = itemEvents(this.el, ".cw-token", { onHover, onClick });
  }
  /**
   * Replace the tokens (strings are shown as text, never parsed as HTML); `offset`: the position of
   * the first (a strip of part of a sequence), which hover, click, focus and the scale's rgb see.
   */
  setTokens(strings, offset = 0) {
    this.offset = offset;
    this.spans = strings.map((s, k) => {
      const i = offset + k;
      const span2 = h("span", { class: "cw-token", text: inlineToken(s), attrs: { role: "listitem", "data-index": i, title: `${i}` } });
      return s.includes("\n") ? [span2, h("br")] : [span2];
    });
    this.el.replaceChildren(...this.spans.flat());
    this.spans = this.spans.map((pair) => pair[0]);
  }
  /**
   * Colour each token by weights[k] (the k-th token shown) through `scale.rgb(weight, position)`
   * (null clears); mark `focus` (the position whose attention is shown) and whether it is locked.
   */
  setWeights(weights, scale, focus = null, locked = false) {
    this.spans.forEach((span2, k) => {
      const i = (this.offset || 0) + k;
      const w = weights ? weights[k] : null;
      if (w == null || Number.isNaN(w)) {
        span2.style.background = "";
        span2.style.color = "";
        span2.removeAttribute("data-weight");
      } else {
        const rgb = scale.rgb(w, i);
        span2.style.background = cssOf(rgb);
        span2.style.color = readableText(rgb);
        span2.dataset.weight = w.toFixed(4);
      }
      span2.classList.toggle("cw-token-focus", i === focus);
      span2.classList.toggle("cw-token-locked", i === focus && locked);
    });
  }
  destroy() {
    this.stop();
    this.el.remove();
  }
};

// js/lib/token-view.js
function stripSpan(lod, win, mode, count2) {
  if (!lod) return { from: 0, to: count2, note: "" };
  const from = mode === "pays" ? win.c0 : win.r0;
  const to = Math.min(lod.n, from + win.size);
  return { from, to, note: to - from < lod.n ? `tokens ${from}–${to - 1} of ${lod.n} (the zoomed window)` : "" };
}
var TokenView = class {
  /**
   * select(which, token) hovers or locks (which: "hover" | "lock") token {query, key}, or none
   * (null); locked() is the locked token; changed() redraws after the mode changed.
   */
  constructor(v, { select, locked, changed }) {
    this.mode = "pays";
    this.shown = null;
    const tokenAt2 = (i) => i == null ? null : this.mode === "pays" ? { query: i, key: null } : { query: null, key: i };
    this.strip = v.own(
      new TokenStrip({
        onHover: (i) => select("hover", tokenAt2(i)),
        onClick: (i) => {
          const axis = this.mode === "pays" ? "query" : "key";
          select("lock", locked()?.[axis] === i ? null : tokenAt2(i));
        }
      })
    );
    const modeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "token view" } }, [
      h("option", { value: "pays", text: "attention paid by (as destination)" }),
      h("option", { value: "receives", text: "attention received by (as source)" })
    ]);
    v.listen(modeSelect, "change", () => {
      this.mode = modeSelect.value;
      changed();
    });
    this.note = h("span", { class: "cw-hint cw-strip-note" });
    this.head = h("div", { class: "cw-token-head" }, [
      h("span", { class: "cw-field-label", text: "Token view: colour by" }),
      modeSelect,
      h("span", { class: "cw-hint", text: "the hovered token (click to lock)" }),
      this.note
    ]);
  }
  /** The focused destination `q` (mode "pays") or source `k` ("receives") of selection `sel`; null when none. */
  focus(sel) {
    const q = this.mode === "pays" ? sel?.query ?? null : null;
    const k = this.mode === "receives" ? sel?.key ?? null : null;
    return q == null && k == null ? null : { q, k };
  }
  /** Show `labels`, or a long prompt's (`lod`) window `win` of them; returns [from, to], the positions shown. */
  show(labels, lod, win) {
    const { from, to, note } = stripSpan(lod, win, this.mode, labels.length);
    const key = `${from}:${to}:${labels.length}`;
    if (this.shown !== key) {
      this.shown = key;
      this.strip.setTokens(labels.slice(from, to), from);
      this.note.textContent = note;
    }
    return [from, to];
  }
  /** Show the tokens again at the next show() (a new payload). */
  reset() {
    this.shown = null;
  }
};

// js/lib/lod.js
var GRID = 512;
var MIN_WINDOW = 16;
var TILE_KEEP = 8;
function fullWindow(n) {
  return { r0: 0, c0: 0, size: n };
}
function stepFor(size) {
  return Math.max(1, Math.ceil(size / GRID));
}
function clampWindow({ r0, c0, size }, n) {
  const s = Math.max(Math.min(MIN_WINDOW, n), Math.min(n, Math.round(size)));
  const step = stepFor(s);
  const fit = (x) => Math.max(0, Math.min(n - s, Math.round(x)));
  const snap = (x) => Math.floor(fit(x) / step) * step;
  return { r0: snap(r0), c0: snap(c0), size: s };
}
function zoomWindow(win, n, by, at = null) {
  const r = at ? at.r : win.r0 + win.size / 2;
  const c = at ? at.c : win.c0 + win.size / 2;
  const size = Math.max(Math.min(MIN_WINDOW, n), Math.min(n, win.size / by));
  const k = size / win.size;
  return clampWindow({ r0: r - (r - win.r0) * k, c0: c - (c - win.c0) * k, size }, n);
}
function panWindow(win, n, dr, dc) {
  return clampWindow({ r0: win.r0 + dr, c0: win.c0 + dc, size: win.size }, n);
}
function gridSize(win) {
  return Math.ceil(win.size / stepFor(win.size));
}
function tileFor(win, factor) {
  const step = stepFor(win.size);
  if (step >= factor) return null;
  return { row0: win.r0, col0: win.c0, rows: win.size, cols: win.size, step };
}
function isExact(win) {
  return stepFor(win.size) === 1;
}
function tokenAt(win, row, col) {
  const step = stepFor(win.size);
  return { query: win.r0 + row * step, key: win.c0 + col * step };
}
function cellOf(win, t, t0) {
  if (t == null) return null;
  const step = stepFor(win.size);
  const i = Math.floor((t - t0) / step);
  return i >= 0 && i < gridSize(win) ? i : null;
}
function tileOf(p, bytes) {
  const [rows, cols] = p.shape;
  if (bytes.length !== rows * cols)
    throw new RangeError(`tile holds ${bytes.length} bytes; shape ${JSON.stringify(p.shape)} needs ${rows * cols}`);
  return {
    codes: bytes,
    rows,
    cols,
    row0: p.row0,
    col0: p.col0,
    step: p.step,
    head: p.head,
    layer: p.layer,
    revision: p.revision,
    pool: p.pool,
    id: p.id
  };
}
function tileCode(tile, r, c, step) {
  if (tile.step !== step) return -1;
  const dr = r - tile.row0;
  const dc = c - tile.col0;
  if (dr < 0 || dc < 0 || dr % step || dc % step) return -1;
  const i = dr / step;
  const j = dc / step;
  if (i >= tile.rows || j >= tile.cols) return -1;
  return tile.codes[i * tile.cols + j];
}
function coarseCode(tile, r, c) {
  const i = Math.floor((r - tile.row0) / tile.step);
  const j = Math.floor((c - tile.col0) / tile.step);
  if (i < 0 || j < 0 || i >= tile.rows || j >= tile.cols) return -1;
  return tile.codes[i * tile.cols + j];
}
function paintWindow({ win, n, stack, factor, head, tiles = [], lut, pixels, emptyPixel = 0, nanCode = 255, causal = true }) {
  const step = stepFor(win.size);
  const g = gridSize(win);
  if (pixels.length < g * g) throw new RangeError("pixel buffer too small");
  let fromTiles = 0;
  let cells = 0;
  const same = tiles.filter((t) => t.step === step);
  const coarser = tiles.filter((t) => t.step > step && t.step < factor).sort((a, b) => a.step - b.step);
  for (let y = 0; y < g; y++) {
    const r = win.r0 + y * step;
    const br = Math.min(stack.rows - 1, Math.floor(r / factor));
    for (let x = 0; x < g; x++) {
      const c = win.c0 + x * step;
      let code = -1;
      if (r < n && c < n && (!causal || c <= r + step - 1)) {
        cells++;
        for (const tile of same) {
          code = tileCode(tile, r, c, step);
          if (code >= 0) {
            fromTiles++;
            break;
          }
        }
        for (let k = 0; code < 0 && k < coarser.length; k++) code = coarseCode(coarser[k], r, c);
        if (code < 0) code = stack.code(head, br, Math.min(stack.cols - 1, Math.floor(c / factor)));
      }
      pixels[y * g + x] = code < 0 || code === nanCode ? emptyPixel : lut[code];
    }
  }
  return cells ? fromTiles / cells : 1;
}

// js/lib/zoom.js
var DRAG_PX = 4;
var REQUEST_MS = 60;
function tileCovers(tile, want, head) {
  return tile.head === head && tile.step === want.step && tile.row0 <= want.row0 && tile.col0 <= want.col0 && tile.row0 + tile.rows * tile.step >= want.row0 + want.rows && tile.col0 + tile.cols * tile.step >= want.col0 + want.cols;
}
function tileWanted(win, factor, head, tiles) {
  const want = tileFor(win, factor);
  return want && !tiles.some((t) => tileCovers(t, want, head)) ? want : null;
}
function tokenAtPoint(win, { left, top, cell }, x, y) {
  const step = stepFor(win.size);
  return { r: win.r0 + (y - top) / cell * step, c: win.c0 + (x - left) / cell * step };
}
function dragWindow(start, n, dx, dy, cell) {
  const perPx = stepFor(start.size) / cell;
  return panWindow(start, n, -dy * perPx, -dx * perPx);
}
function windowAxis(win, from, labels) {
  const step = stepFor(win.size);
  return Array.from({ length: gridSize(win) }, (_, i) => win.size <= 64 ? labels[from + i] ?? from + i : String(from + i * step));
}
function windowCaption({ lod, win, share, finest, head, standalone }) {
  const step = stepFor(win.size);
  const last = (t) => Math.min(lod.n, t + win.size) - 1;
  const whole = win.size >= lod.n;
  const exact = step === 1 ? "exact cells" : `each cell the ${lod.pool} of ${step} × ${step} exact cells`;
  const cells = share >= 1 ? exact : `each cell the ${lod.pool} of ${lod.factor} × ${lod.factor} tokens (overview)`;
  const stored = finest < lod.factor ? `holds blocks down to ${finest} × ${finest} tokens for head ${head}; ` : "";
  const deeper = standalone && !whole ? ` · exported page: ${stored}exact cells need the kernel` : "";
  const where = whole ? "whole prompt" : `destinations ${win.r0}–${last(win.r0)} × sources ${win.c0}–${last(win.c0)}`;
  return `${lod.n} tokens · ${where} · ${cells}${deeper}`;
}
function overviewValue(stack, lod, head, q, k) {
  if (k > q && lod.causal !== false) return 0;
  const row = Math.min(stack.rows - 1, Math.floor(q / lod.factor));
  return stack.value(head, row, Math.min(stack.cols - 1, Math.floor(k / lod.factor)));
}
function rowWeights(stack, lod, head, q, exact, from, to) {
  if (!lod) {
    const row = exact || stack.rowValues(head, q);
    return Array.from({ length: stack.cols }, (_, j) => stack.stored(q, j) ? row[j] : null);
  }
  const causal = lod.causal !== false;
  return span(from, to, (j) => j > q && causal ? null : exact ? exact[j] : overviewValue(stack, lod, head, q, j));
}
function colWeights(stack, lod, head, k, from, to) {
  if (!lod) {
    const col = stack.colValues(head, k);
    return Array.from({ length: stack.rows }, (_, i) => stack.stored(i, k) ? col[i] : null);
  }
  const causal = lod.causal !== false;
  return span(from, to, (i) => k > i && causal ? null : overviewValue(stack, lod, head, i, k));
}
var span = (from, to, fn) => Array.from({ length: to - from }, (_, k) => fn(from + k));
var Zoom = class {
  constructor(v, { heatmap, head, patterns, redraw }) {
    Object.assign(this, { v, heatmap, head, patterns, redraw });
    this.lod = null;
    this.win = null;
    this.tiles = [];
    this.levels = [];
    this.share = 0;
    this.requested = 0;
    this.drag = null;
    this.dragged = false;
    this.label = h("span", { class: "cw-hint cw-zoom-label" });
    this.pool = h("select", { class: "cw-select", attrs: { "aria-label": "overview pooling" } }, [
      h("option", { value: "max", text: "overview: max of each block" }),
      h("option", { value: "mean", text: "overview: mean of each block" })
    ]);
    v.listen(this.pool, "change", () => v.set({ pool: this.pool.value }));
    if (v.standalone) this.pool.disabled = true;
    this.el = h("div", { class: "cw-zoom" }, [
      this.button("−", "zoom out (-)", () => this.zoom(0.5)),
      this.button("+", "zoom in (+)", () => this.zoom(2)),
      this.button("whole", "the whole prompt (0)", () => this.whole()),
      this.pool,
      this.label
    ]);
    this.el.hidden = true;
    this.request = v.own(throttle(() => this.sendRequest(), REQUEST_MS));
    this.listenPointer();
  }
  button(text, label, fn) {
    const b = h("button", { class: "cw-button cw-zoom-button", text, attrs: { type: "button", "aria-label": label, title: label } });
    this.v.listen(b, "click", fn);
    return b;
  }
  /** Wheel zooms about the token under the pointer; a drag pans. */
  listenPointer() {
    const { v, heatmap } = this;
    v.listen(heatmap.overlay, "wheel", (e) => {
      if (!this.lod || !heatmap.scene) return;
      e.preventDefault();
      const box = heatmap.overlay.getBoundingClientRect();
      this.zoom(e.deltaY < 0 ? 2 : 0.5, tokenAtPoint(this.win, heatmap.scene.layout, e.clientX - box.left, e.clientY - box.top));
    });
    v.listen(heatmap.overlay, "mousedown", (e) => {
      this.dragged = false;
      if (this.lod && e.button === 0) this.drag = { x: e.clientX, y: e.clientY, win: this.win };
    });
    v.listen(window, "mousemove", (e) => {
      if (!this.drag || !heatmap.scene) return;
      const dx = e.clientX - this.drag.x;
      const dy = e.clientY - this.drag.y;
      if (!this.dragged && Math.hypot(dx, dy) < DRAG_PX) return;
      this.dragged = true;
      this.setWindow(dragWindow(this.drag.win, this.lod.n, dx, dy, heatmap.scene.layout.cell));
    });
    v.listen(window, "mouseup", () => {
      this.drag = null;
    });
  }
  /** A new patterns payload `p` (its overview decoded as `stack`, null when it has none). */
  show(p, stack) {
    const before = this.lod;
    this.lod = stack && p.lod ? p.lod : null;
    this.tiles = [];
    this.levels = [];
    if (this.lod) {
      this.loadLevels(p);
      const same = before && before.n === this.lod.n && this.win;
      this.win = same ? clampWindow(this.win, this.lod.n) : fullWindow(this.lod.n);
      this.pool.value = this.lod.pool;
    }
    this.el.hidden = !this.lod;
  }
  zoom(by, at = null) {
    if (this.lod) this.setWindow(zoomWindow(this.win, this.lod.n, by, at));
  }
  whole() {
    if (this.lod) this.setWindow(fullWindow(this.lod.n));
  }
  setWindow(win) {
    const w = clampWindow(win, this.lod.n);
    const old = this.win;
    if (old && w.r0 === old.r0 && w.c0 === old.c0 && w.size === old.size) return;
    this.win = w;
    this.redraw();
    this.request();
  }
  /** Ask the kernel for the window's exact cells, unless the overview or a kept tile holds them. */
  sendRequest() {
    if (!this.lod || this.v.standalone) return;
    const head = this.head();
    const want = tileWanted(this.win, this.lod.factor, head, this.tiles);
    if (!want) return;
    this.requested += 1;
    const p = this.patterns();
    this.v.set({ tile_request: { id: this.requested, layer: p.layer, head, revision: p.revision, ...want } });
  }
  /** Keep the model's `tile` when it answers the picture shown (an earlier picture's is ignored), then redraw. */
  async takeTile() {
    const { model } = this.v;
    const t = model.get("tile");
    const p = this.patterns();
    if (!this.lod || !hasData(t) || !p || t.revision !== p.revision || t.layer !== p.layer || t.pool !== this.lod.pool) return;
    const plain = await inflated(t);
    if (model.get("tile") !== t || this.patterns() !== p) return;
    this.tiles = [tileOf(plain, bytesOf(plain.data)), ...this.tiles].slice(0, TILE_KEEP);
    this.redraw();
  }
  /** The exported page's levels of payload `p` (inflated), then a redraw. */
  loadLevels(p) {
    const { v } = this;
    const levels = (v.model.get("levels") || []).filter((t) => hasData(t) && t.revision === p.revision && t.layer === p.layer);
    if (!levels.length) return;
    Promise.all(levels.map((t) => inflated(t).then((plain) => tileOf(plain, bytesOf(plain.data))))).then(
      (tiles) => {
        if (this.patterns() !== p) return;
        this.levels = tiles;
        this.redraw();
      },
      (err) => v.error(`could not read the exported levels: ${err.message}`, "decode")
    );
  }
  /**
   * Draw the window of `head` from the overview `stack` (a lookup table `lut` of its codes): exact
   * tiles where the kernel sent them, the overview elsewhere. `spec`: the heatmap's title, scale….
   */
  draw(stack, head, lut, labels, spec) {
    const { lod, win } = this;
    const tiles = [...this.tiles, ...this.levels].filter((t) => t.head === head);
    const causal = lod.causal !== false;
    const g = gridSize(win);
    this.heatmap.update({
      ...spec,
      rows: g,
      cols: g,
      paint: (pixels) => {
        const { n, factor } = lod;
        this.share = paintWindow({ win, n, stack, factor, head, tiles, lut, pixels, emptyPixel: 0, nanCode: stack.nanCode, causal });
      },
      rowLabels: windowAxis(win, win.r0, labels),
      colLabels: windowAxis(win, win.c0, labels)
    });
    const finest = this.levels.filter((t) => t.head === head).reduce((m, t) => Math.min(m, t.step), lod.factor);
    this.label.textContent = windowCaption({ lod, win, share: this.share, finest, head, standalone: this.v.standalone });
  }
  /** The tokens {query, key} of grid cell `hit` ({row, col}) of the window. */
  tokensOf(hit) {
    return tokenAt(this.win, hit.row, hit.col);
  }
  /** The heatmap's marks of the tokens hovered and locked ({query, key}, either may be null). */
  highlight(hover, lock) {
    const w = this.win;
    return {
      row: cellOf(w, hover?.query, w.r0),
      col: cellOf(w, hover?.key, w.c0),
      lockedRow: cellOf(w, lock?.query, w.r0),
      lockedCol: cellOf(w, lock?.key, w.c0)
    };
  }
  /** True when each cell drawn is one token (a hovered cell has one exact weight). */
  get exact() {
    return isExact(this.win);
  }
  /** `keys` with zoom keys (+ - 0) and Shift+arrows to pan; plain arrows keep their jobs. */
  keys(keys) {
    const pan = (dr, dc, plain) => (e) => {
      if (this.lod && e?.shiftKey) this.setWindow(panWindow(this.win, this.lod.n, dr * this.win.size / 4, dc * this.win.size / 4));
      else plain?.(e);
    };
    return {
      ...keys,
      ArrowLeft: pan(0, -1, keys.ArrowLeft),
      ArrowRight: pan(0, 1, keys.ArrowRight),
      ArrowUp: pan(-1, 0, keys.ArrowUp),
      ArrowDown: pan(1, 0, keys.ArrowDown),
      "+": () => this.zoom(2),
      "=": () => this.zoom(2),
      "-": () => this.zoom(0.5),
      0: () => this.whole()
    };
  }
  /** The view's data-cw-window and data-cw-tile-share marks ("" without a window). */
  marks() {
    const { lod, win } = this;
    return { window: lod ? `${win.r0},${win.c0},${win.size}` : "", tileShare: lod ? String(this.share ?? 0) : "" };
  }
};

// js/views/attention.js
var AXIS_TITLES = { yTitle: "destination (query) ↓", xTitle: "source (key) →" };
var MIN_HEIGHT = 300;
var MIN_COMPACT_HEIGHT = 220;
var FAINT_TOKENS = 64;
var FAINT_POSITION = 0.15;
var FAINT_HINT = "faint: most weights are small on a long prompt, try colour: log (or relative)";
defineView("attention", (v) => {
  const { model } = v;
  const state = {
    stack: null,
    labels: [],
    preview: null,
    // head under the pointer in the thumbnails
    headLocked: false,
    // a clicked thumbnail holds the view until clicked again
    hover: null,
    // {query, key} under the pointer
    lock: null
    // {query, key} clicked in the heatmap or token strip
  };
  const info = () => model.get("info") || {};
  const patterns = () => v.payloads("patterns")?.patterns;
  const shownHead = () => !state.headLocked && state.preview != null ? state.preview : model.get("head");
  const shownLayer = () => patterns()?.layer ?? model.get("layer");
  const selection = () => state.lock || state.hover;
  const colors = () => colorScaleOf(patterns()?.scale, shownHead());
  const scale = () => {
    const c = colors();
    return makeScale("sequential", { dark: v.theme.dark, ticks: c.ticks, caption: c.caption });
  };
  const stripScale = (row) => {
    const sc = scale();
    const c = colors();
    return { ...sc, rgb: (w, i) => sc.rgb(c.position(w, row ?? i)) };
  };
  const tensors = () => info().tensors === true;
  const headName4 = (i) => info().head_names?.[i] ?? `H${i}`;
  const titleOf = (head) => {
    const locked = state.headLocked ? " (locked)" : "";
    if (!tensors()) return `Layer ${shownLayer()}, head ${head}${locked}`;
    const name3 = info().head_names?.[head] ?? `head ${head}`;
    return `${[info().layer_name, name3].filter(Boolean).join(", ")}${locked}`;
  };
  const prompt = v.own(sequenceBox(v, () => info().has_tokenizer));
  const held = heldLayer(v, {
    held: () => patterns()?.layer,
    parts: () => [thumbs.el, zoom.el, heatmap.el, readout, tokenView.head, tokenView.strip.el],
    what: "attention patterns"
  });
  const toolbar = headToolbar(v, {
    layer: () => held.stale ? model.get("layer") : shownLayer(),
    onHead: setHead2,
    save: {
      what: "heatmap",
      picture: () => heatmap.scene,
      name: () => tensors() ? `attention_${headName4(shownHead())}` : `attention_L${shownLayer()}H${shownHead()}`
    }
  });
  toolbar.el.prepend(prompt.el);
  const note = h("div", { class: "cw-hint cw-tensor-note" });
  note.hidden = true;
  toolbar.el.append(note);
  const cellTokens = (hit) => zoom.lod ? zoom.tokensOf(hit) : { query: hit.row, key: hit.col };
  const heatmap = v.own(
    new Heatmap({
      label: "attention pattern",
      onHover: (hit) => {
        if (!zoom.drag) select("hover", hit ? cellTokens(hit) : null);
      },
      onClick: (hit) => {
        if (zoom.dragged) return;
        const at = cellTokens(hit);
        const same = state.lock?.query === at.query && state.lock?.key === at.key;
        select("lock", same ? null : at);
      }
    })
  );
  const zoom = new Zoom(v, { heatmap, head: shownHead, patterns, redraw: drawMain });
  const scales = scaleSelect(v);
  toolbar.headSelect.el.after(scales.el);
  const remoteNote = h("div", { class: "cw-hint cw-remote-note" });
  remoteNote.hidden = true;
  const progress = progressRow(v);
  const thumbs = v.own(
    new ThumbGrid({
      label: "heads of this layer",
      draw: drawThumb,
      onHover: (i) => {
        state.preview = i;
        if (!state.headLocked) drawMain();
        thumbs.mark(model.get("head"), state.preview, state.headLocked);
      },
      onClick: (i) => {
        state.headLocked = i === model.get("head") ? !state.headLocked : true;
        setHead2(i);
      }
    })
  );
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const tokenView = new TokenView(v, { select, locked: () => state.lock, changed: drawTokens });
  const exact = new ExactRow(v, { current: () => ({ sel: selection(), locked: !!state.lock }), patterns, head: shownHead });
  v.root.append(toolbar.el, progress.el, v.banner, held.el);
  v.root.append(thumbs.el, zoom.el, remoteNote, heatmap.el, readout, tokenView.head, tokenView.strip.el);
  function setHead2(head) {
    if (!setHead(v, head)) {
      thumbs.mark(model.get("head"), state.preview, state.headLocked);
      drawMain();
    }
  }
  function drawMain() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const head = shownHead();
    const sc = scale();
    const lut = sc.lut(stack);
    const maxHeight = zoom.lod ? Number.POSITIVE_INFINITY : heightRoom();
    const axes = { title: titleOf(head), ...AXIS_TITLES, scale: sc, theme: v.theme, maxPlot: v.size, maxHeight };
    if (zoom.lod) {
      zoom.draw(stack, head, lut, state.labels, axes);
    } else {
      heatmap.update({
        ...axes,
        rows: stack.rows,
        cols: stack.cols,
        paint: (pixels) => stack.paint(head, lut, pixels, 0),
        rowLabels: state.labels,
        colLabels: state.labels,
        colPriority: sourcePriority(stack, head)
        // where labels cannot all fit: the most attended sources
      });
    }
    drawSelection();
    v.drawn("main", t0);
    refitSoon();
  }
  function refitSoon() {
    if (state.refit) return;
    const later = globalThis.requestAnimationFrame ?? ((fn) => setTimeout(fn, 16));
    state.refit = true;
    later(() => {
      state.refit = false;
      const drawnHeight = heatmap.el.offsetHeight;
      if (!zoom.lod && drawnHeight > heightRoom() + 4 && drawnHeight !== state.refitFrom) {
        state.refitFrom = drawnHeight;
        drawMain();
      }
    });
  }
  function heightRoom() {
    if (!v.root.isConnected) return Number.POSITIVE_INFINITY;
    const others = v.root.offsetHeight - heatmap.el.offsetHeight;
    return Math.max(v.compact ? MIN_COMPACT_HEIGHT : MIN_HEIGHT, visibleHeight(v.root) - others - 12);
  }
  function faint(stack, head) {
    if (stack.cols < FAINT_TOKENS || colors().kind === "log") return false;
    const maxima = sourcePriority(stack, head);
    let pale = 0;
    for (const code of maxima) if (stack.valueOfCode(code) < FAINT_POSITION) pale++;
    return pale > 0.8 * maxima.length;
  }
  function sourcePriority(stack, head) {
    if (state.priority?.stack !== stack || state.priority.head !== head) state.priority = { stack, head, values: stack.colMaxCodes(head) };
    return state.priority.values;
  }
  function drawThumb(i, ctx, px) {
    if (state.stack && i < state.stack.count) drawStackThumb(ctx, px, state.stack, i, scale().lut(state.stack));
  }
  function drawThumbs() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    thumbs.setItems(Array.from({ length: stack.count }, (_, i) => headName4(i)));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    v.drawn("thumbs", t0);
  }
  function drawTokens() {
    const { stack } = state;
    const [from, to] = tokenView.show(state.labels, zoom.lod, zoom.win);
    const focus = tokenView.focus(selection());
    if (!stack || !focus) {
      tokenView.strip.setWeights(null, scale());
      return;
    }
    const { q, k } = focus;
    const head = shownHead();
    const locked = !!state.lock;
    if (q != null) tokenView.strip.setWeights(rowWeights(stack, zoom.lod, head, q, exact.values(q), from, to), stripScale(q), q, locked);
    else tokenView.strip.setWeights(colWeights(stack, zoom.lod, head, k, from, to), stripScale(null), k, locked);
  }
  function uniformNote(weight, q) {
    const spec = patterns()?.scale;
    const times = spec?.kind === "relative" ? timesUniform(spec, weight, q) : null;
    return times == null ? "" : ` (${formatValue(times, 3)}× uniform)`;
  }
  function drawReadout() {
    const { stack, labels } = state;
    const sel = selection();
    const head = shownHead();
    const ids = patterns()?.ids || [];
    const name3 = (i) => `${i} ${quote(labels[i] ?? i)}${ids[i] != null ? ` (id ${ids[i]})` : ""}`;
    const parts = [tensors() ? [info().layer_name, headName4(head)].filter(Boolean).join(" ") : `L${shownLayer()} H${head}`];
    const { lod } = zoom;
    const [rows, cols] = lod ? [lod.n, lod.n] : [stack?.rows, stack?.cols];
    let value = "";
    if (stack && sel?.query != null && sel.key != null && sel.query < rows && sel.key < cols) {
      const { query: q, key: k } = sel;
      const row = exact.values(q);
      if (row) value = String(row[k]);
      const quantised = () => lod ? overviewValue(stack, lod, head, q, k) : stack.value(head, q, k);
      const weight = row ? formatValue(row[k]) : `≈${formatValue(quantised(), 3)}`;
      parts.push(`destination (query) ${name3(q)} → source (key) ${name3(k)}`, `weight ${weight}${uniformNote(row?.[k], q)}`);
      if (lod && !zoom.exact && !row) parts.push("zoom in for single cells");
    } else if (stack && sel?.query != null) {
      parts.push(`destination (query) ${name3(sel.query)}`);
    } else if (stack && sel?.key != null) {
      parts.push(`source (key) ${name3(sel.key)}`);
    } else {
      parts.push(stack ? `${rows} tokens · hover a cell or a token` : "no picture yet");
      if (stack && faint(stack, head)) parts.push(FAINT_HINT);
    }
    if (state.lock) parts.push("locked (click again or Esc to release)");
    readout.textContent = parts.join(" · ");
    readout.dataset.cwValue = value;
  }
  function drawSelection() {
    const { hover, lock } = state;
    const marks = { row: hover?.query, col: hover?.key, lockedRow: lock?.query, lockedCol: lock?.key };
    heatmap.setHighlight(zoom.lod ? zoom.highlight(hover, lock) : marks);
    drawTokens();
    drawReadout();
  }
  function select(which, value) {
    state[which] = value;
    drawSelection();
    exact.send();
  }
  function syncControls() {
    toolbar.sync();
    prompt.show(info().has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
    const given = tensors();
    prompt.el.hidden = given;
    toolbar.layerSelect.el.hidden = given;
    note.textContent = given ? info().note || "" : "";
    note.hidden = !note.textContent;
    const heads = Array.from({ length: info().n_heads || 1 }, (_, i) => ({ value: i, label: headName4(i) }));
    if (given) toolbar.headSelect.set(heads, model.get("head"));
  }
  const inflate = newestInflated();
  function start() {
    const p = patterns();
    inflate(
      p,
      (plain) => show(p, plain),
      (err) => v.error(`could not inflate the patterns: ${err.message}`, "decode")
    );
  }
  function show(p, plain) {
    try {
      state.stack = hasData(plain) ? new CodeStack(plain) : null;
      v.error("", "decode");
    } catch (err) {
      state.stack = null;
      v.error(`could not read the patterns: ${err.message}`, "decode");
    }
    zoom.show(p, state.stack);
    scales.show(p?.scale?.kind);
    tokenView.reset();
    state.labels = p?.labels || [];
    const n = zoom.lod ? zoom.lod.n : state.stack ? state.stack.rows : 0;
    const inRange = (s) => s && (s.query == null || s.query < n) && (s.key == null || s.key < n);
    if (!inRange(state.lock)) state.lock = null;
    if (!inRange(state.hover)) state.hover = null;
    const t0 = performance.now();
    syncControls();
    drawAll();
    held.check();
    if (state.stack || !model.get("busy")) v.drawn("all", t0);
    if (zoom.lod) zoom.request();
  }
  function drawAll() {
    drawMain();
    drawThumbs();
  }
  v.onPayloads("patterns", start);
  v.on("change:head", () => {
    toolbar.headSelect.select.value = String(model.get("head"));
    thumbs.mark(model.get("head"), state.preview, state.headLocked);
    drawMain();
    zoom.request();
  });
  v.on("change:tile", () => {
    zoom.takeTile().catch((err) => v.error(`could not read a tile: ${err.message}`, "decode"));
  });
  v.on("change:row", () => {
    drawTokens();
    drawReadout();
  });
  v.on("change:layer", () => held.check());
  v.on("change:prompt change:tokens change:layer change:info", syncControls);
  const showRemote = () => {
    remoteNote.textContent = [model.get("remote_note"), model.get("memory_note")].filter(Boolean).join(" · ");
    remoteNote.hidden = !remoteNote.textContent;
  };
  v.on("change:remote_note change:memory_note", showRemote);
  showRemote();
  function adoptSelection() {
    const taken = exact.received();
    if (taken) state[taken.locked ? "lock" : "hover"] = taken.sel;
    return !!taken;
  }
  v.on("change:selection", () => adoptSelection() && drawSelection());
  adoptSelection();
  return {
    start,
    draw: drawAll,
    size: (width) => Math.max(v.compact ? 160 : 200, Math.min(560, width - (v.compact ? 150 : 190))),
    busy: () => model.get("busy") ? "running…" : "",
    keys: {
      ...zoom.keys(headKeys(v, { layers: true, onHead: setHead2 })),
      Escape: () => {
        state.headLocked = false;
        thumbs.mark(model.get("head"), state.preview, false);
        select("lock", null);
        drawMain();
      }
    },
    marks: () => ({
      head: shownHead(),
      layer: held.stale ? model.get("layer") : shownLayer(),
      held: held.stale ? String(shownLayer()) : "",
      tokens: state.labels.length,
      revision: patterns()?.revision ?? "",
      scale: patterns()?.scale?.kind || "linear",
      ...zoom.marks()
    })
  };
});

// js/views/attribution.js
defineView("attribution", (v) => {
  const { model } = v;
  const state = { values: null, seq: 0, terms: 0, L: 0, H: 0, hoverGrid: null, hoverPos: null, scope: "all" };
  const info = () => model.get("info") || {};
  const payload = () => v.payloads("attribution")?.attribution || {};
  const layers = () => payload().layers || info().attn_layers || [];
  const labels = () => payload().labels || [];
  const position = () => {
    const p = model.get("position");
    return p < 0 ? state.seq + p : p;
  };
  const value = (pos, term) => state.values[pos * state.terms + term];
  const headTerm = (row, hd) => row * state.H + hd;
  const layerRow = () => layers().indexOf(model.get("layer"));
  const tokenName = (i) => `${i} ${quote(labels()[i] ?? i)}`;
  const outName = (pos) => {
    const p = payload();
    const t = p.targets?.[pos];
    if (t == null || t < 0) return "none";
    const base = p.baseline == null ? "" : ` − ${quote(p.baseline_string ?? p.baseline)}`;
    return `${quote(p.target_strings?.[pos] ?? t)}${base}`;
  };
  const symmetric = (xs) => {
    let m = 0;
    for (const x of xs) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x));
    return m > 0 ? m : 1e-6;
  };
  const diverging = (m) => makeScale("diverging", { dark: v.theme.dark, domain: [-m, m] });
  const prompt = v.own(sequenceBox(v, () => info().has_tokenizer));
  const tokenInput = (label, trait, placeholder) => {
    const input = h("input", {
      class: "cw-input cw-la-token",
      type: "text",
      placeholder,
      spellcheck: false,
      attrs: { "aria-label": label }
    });
    v.listen(input, "keydown", (e) => {
      e.stopPropagation();
      if (e.key === "Enter") v.set({ [trait]: input.value });
    });
    v.listen(input, "change", () => v.set({ [trait]: input.value }));
    const el = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: label }), input]);
    return { el, input };
  };
  const target = tokenInput("Out token", "target_text", "next token");
  const baseline = tokenInput("minus", "baseline_text", "(none)");
  const nextButton = button("next token", "explain each position's actual next token", () => v.set({ target_text: "" }));
  if (v.standalone) target.input.readOnly = baseline.input.readOnly = nextButton.disabled = true;
  const toolbar = headToolbar(v, {
    layer: () => model.get("layer"),
    save: { what: "grid", picture: () => grid.scene, name: () => `attribution_pos${position()}` }
  });
  toolbar.el.prepend(prompt.el, h("div", { class: "cw-toolbar-row" }, [target.el, nextButton, baseline.el]));
  const caption = h("div", { class: "cw-hint cw-la-caption" });
  const grid = v.own(
    new Heatmap({
      label: "direct logit attribution per head",
      onHover: (hit) => {
        state.hoverGrid = hit;
        state.hoverPos = null;
        drawMarks();
      },
      onClick: (hit) => v.set({ layer: layers()[hit.row], head: hit.col })
    })
  );
  const bars = h("div", { class: "cw-la-bars", attrs: { role: "list", "aria-label": "other terms" } });
  const readout = h("div", { class: "cw-readout cw-la-readout", attrs: { "aria-live": "polite" } });
  const strip = v.own(
    new TokenStrip({
      onHover: () => {
      },
      onClick: (i) => v.set({ position: i })
    })
  );
  const scopeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "heads over positions" } }, [
    h("option", { value: "all", text: "every head" }),
    h("option", { value: "head", text: "the selected head" })
  ]);
  v.listen(scopeSelect, "change", () => {
    state.scope = scopeSelect.value;
    drawPositions();
  });
  const byPosition = v.own(
    new Heatmap({
      label: "direct logit attribution per head and position",
      onHover: (hit) => {
        state.hoverPos = hit;
        state.hoverGrid = null;
        drawMarks();
      },
      onClick: (hit) => {
        const [row, hd] = positionRow(hit.row);
        v.set({ position: hit.col, layer: layers()[row], head: hd });
      }
    })
  );
  const tokenHead = h("div", { class: "cw-token-head" }, [
    h("span", { class: "cw-hint", text: "Destination position: click a token · colour: the selected head's contribution there" })
  ]);
  const posHead = h("div", { class: "cw-token-head" }, [h("span", { class: "cw-field-label", text: "Over positions:" }), scopeSelect]);
  v.root.append(
    toolbar.el,
    v.banner,
    caption,
    h("div", { class: "cw-la-main" }, [grid.el, bars]),
    readout,
    tokenHead,
    strip.el,
    posHead,
    byPosition.el
  );
  function drawCaption() {
    const p = payload();
    const pos = position();
    const norm = p.norm ?? info().norm;
    const scale = p.scale?.[pos];
    const at = `scale frozen at position ${pos}${scale != null ? ` (${formatValue(scale)})` : ""}`;
    const frozen = norm === "LN" ? `final LayerNorm ${at}; each term centred` : norm === "RMS" ? `final RMSNorm ${at}; not centred (RMSNorm does not centre)` : "no final norm: the terms are exact";
    const what = p.baseline == null ? "logit" : "logit difference";
    caption.textContent = `Direct effect on the ${what} of out ${outName(pos)} at destination ${tokenName(pos)} · ${frozen}`;
    caption.dataset.norm = norm ?? "none";
  }
  function gridMarks(layout) {
    const ops = [];
    const row = layerRow();
    if (row >= 0) ops.push(cellBox(layout, row, model.get("head"), { color: v.theme.accent, width: 2.5, inset: 1 }));
    return ops;
  }
  function cellValues(layout, pos, sc) {
    if (layout.cell < 26) return [];
    return cellValueOps(layout, state.L, state.H, {
      value: (l, hd) => value(pos, headTerm(l, hd)),
      text: formatCell,
      scale: sc,
      theme: v.theme
    });
  }
  function drawGrid() {
    const pos = position();
    const { L, H } = state;
    const heads = Array.from({ length: L * H }, (_, i) => value(pos, i));
    const sc = diverging(symmetric(heads));
    grid.update({
      rows: L,
      cols: H,
      paint: (pixels) => {
        for (let i = 0; i < L * H; i++) pixels[i] = packed(sc, heads[i]);
      },
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      // labels beyond what fits: the selected layer and head, then the strongest
      ...axisPriority(L, H, (l, hd) => heads[l * H + hd]),
      keepRows: layerRow(),
      keepCols: model.get("head"),
      title: `Heads → out ${outName(pos)} at position ${pos}`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: headGridPlot(L, H),
      marks: (layout) => [...cellValues(layout, pos, sc), ...gridMarks(layout)]
    });
    grid.el.dataset.position = String(pos);
  }
  const packed = (sc, x) => packRGBA(...Number.isFinite(x) ? sc.rgb(x) : sc.nan);
  const headGridPlot = (L, H) => Math.max(160, Math.min(Math.max(360, 10 * Math.max(L, H)), 40 * Math.max(L, H), 720));
  function drawBars() {
    const p = payload();
    const pos = position();
    const names = p.names || [];
    const nHeads = state.L * state.H;
    let headSum = 0;
    for (let i = 0; i < nHeads; i++) headSum += value(pos, i);
    const rows = [["heads (sum)", headSum]];
    for (let i = nHeads; i < state.terms; i++) rows.push([names[i], value(pos, i)]);
    const total = rows.reduce((s, [, x]) => s + x, 0);
    const m = symmetric(rows.map(([, x]) => x));
    const sc = diverging(m);
    const items = rows.map(([name3, x]) => {
      const width = Number.isFinite(x) ? 50 * Math.abs(x) / m : 0;
      const bar = h("span", {
        class: "cw-la-bar",
        style: { width: `${width}%`, left: x < 0 ? `${50 - width}%` : "50%", background: sc.css(x) }
      });
      return h("div", { class: "cw-la-row", attrs: { role: "listitem", "data-term": name3, "data-value": String(x) } }, [
        h("span", { class: "cw-la-name", text: name3 }),
        h("span", { class: "cw-la-track" }, [h("span", { class: "cw-la-zero" }), bar]),
        h("span", { class: "cw-la-value", text: formatValue(x) })
      ]);
    });
    const logit = p.logits?.[pos];
    const sum = h("div", { class: "cw-la-sum", text: `sum of terms ${formatValue(total)} · model ${formatValue(logit)}` });
    sum.dataset.total = String(total);
    sum.dataset.logit = String(logit ?? "");
    bars.replaceChildren(h("div", { class: "cw-field-label", text: "Other terms (same units)" }), ...items, sum);
  }
  function positionRows() {
    const row = layerRow();
    if (state.scope === "head" && row >= 0) return [[row, model.get("head")]];
    return Array.from({ length: state.L * state.H }, (_, i) => [Math.floor(i / state.H), i % state.H]);
  }
  const positionRow = (r) => positionRows()[r];
  function drawPositions() {
    if (!state.values) return;
    const rows = positionRows();
    const all = [];
    for (const [l, hd] of rows) for (let q = 0; q < state.seq; q++) all.push(value(q, headTerm(l, hd)));
    const sc = diverging(symmetric(all));
    const nL = layers();
    const target2 = payload().fixed_target ? `out ${outName(state.seq - 1)}` : "each its own next token";
    byPosition.update({
      rows: rows.length,
      cols: state.seq,
      paint: (pixels) => {
        for (let i = 0; i < all.length; i++) pixels[i] = packed(sc, all[i]);
      },
      rowLabels: rows.map(([l, hd]) => `L${nL[l]}H${hd}`),
      colLabels: labels(),
      // labels beyond what fits: the selected head and position, then the strongest
      ...axisPriority(rows.length, state.seq, (r, q) => all[r * state.seq + q]),
      keepRows: rows.findIndex(([l, hd]) => l === layerRow() && hd === model.get("head")),
      keepCols: position(),
      title: `Direct effect at every destination position (${target2})`,
      yTitle: "head ↓",
      xTitle: "destination (query) →",
      scale: sc,
      theme: v.theme,
      maxPlot: v.size
    });
  }
  function drawStrip() {
    const row = layerRow();
    const weights = row < 0 ? null : Array.from({ length: state.seq }, (_, q) => value(q, headTerm(row, model.get("head"))));
    strip.setWeights(weights, diverging(symmetric(weights || [])), position(), true);
  }
  function drawMarks() {
    const g = state.hoverGrid;
    grid.setHighlight({ row: g?.row, col: g?.col, marks: gridMarks });
    const hp = state.hoverPos;
    const rows = positionRows();
    const selected = rows.findIndex(([l, hd]) => l === layerRow() && hd === model.get("head"));
    byPosition.setHighlight({
      row: hp?.row,
      col: hp?.col,
      lockedCol: position(),
      marks: (layout) => selected >= 0 ? [cellBox(layout, selected, position(), { color: v.theme.accent, width: 2, inset: 0 })] : []
    });
    drawReadout();
  }
  function drawReadout() {
    if (!state.values) {
      readout.textContent = "no picture yet";
      return;
    }
    let l;
    let hd;
    let pos = position();
    if (state.hoverGrid) [l, hd] = [state.hoverGrid.row, state.hoverGrid.col];
    else if (state.hoverPos) [[l, hd], pos] = [positionRow(state.hoverPos.row), state.hoverPos.col];
    else [l, hd] = [layerRow(), model.get("head")];
    if (l < 0 || l == null) {
      readout.textContent = "";
      return;
    }
    const x = value(pos, headTerm(l, hd));
    const lead = state.hoverGrid || state.hoverPos ? "" : "selected ";
    const shown = Number.isFinite(x) ? formatValue(x) : "no target here";
    readout.textContent = `${lead}L${layers()[l]} H${hd} · destination ${tokenName(pos)} → out ${outName(pos)} · ${shown}`;
    Object.assign(readout.dataset, { value: String(x), layer: String(layers()[l]), head: String(hd), position: String(pos) });
  }
  function draw() {
    if (!state.values) return;
    const t0 = performance.now();
    const pos = position();
    const missing = !(pos >= 0 && pos < state.seq) ? `position ${model.get("position")} is outside the ${state.seq} tokens` : "";
    const noTarget = !missing && !(payload().targets?.[pos] >= 0) ? `position ${pos} has no next token: type an out token to explain there` : "";
    v.error(missing || noTarget, "position");
    if (missing) return;
    toolbar.sync();
    drawCaption();
    drawGrid();
    drawBars();
    drawStrip();
    drawPositions();
    drawMarks();
    v.drawn("all", t0);
  }
  function syncInputs() {
    prompt.el.hidden = model.get("show_prompt") === false;
    prompt.show(info().has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
    for (const [input, trait] of [
      [target.input, "target_text"],
      [baseline.input, "baseline_text"]
    ]) {
      if (document.activeElement !== input) input.value = model.get(trait) || "";
    }
  }
  function start() {
    const p = payload();
    try {
      if (!hasData(p)) throw new RangeError("no attribution yet");
      const [seq, terms] = p.shape;
      const values = floatValues(p);
      const L = (p.layers || []).length;
      const H = p.n_heads || 0;
      if (!seq || terms < L * H || !L || !H) throw new RangeError(`attribution has shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { values, seq, terms, L, H, hoverGrid: null, hoverPos: null });
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      if (hasData(p)) v.error(`could not read the attribution: ${err.message}`, "decode");
    }
    strip.setTokens(info().has_tokenizer === false ? labels().map((s) => `${s} `) : labels());
    syncInputs();
    toolbar.sync();
    draw();
  }
  v.onPayloads("attribution", start);
  v.on("change:position", draw);
  v.on("change:layer change:head", () => {
    toolbar.sync();
    drawGrid();
    drawStrip();
    drawPositions();
    drawMarks();
    v.drawn("select");
  });
  v.on("change:prompt change:tokens change:target_text change:baseline_text change:show_prompt", syncInputs);
  const step = (d) => () => {
    const next = position() + d;
    if (next >= 0 && next < state.seq) v.set({ position: next });
  };
  return {
    start,
    draw,
    size: (width) => Math.max(200, Math.min(640, width - 150)),
    busy: () => model.get("busy") ? "running…" : "",
    keys: { ...headKeys(v, { layers: true }), "[": step(-1), "]": step(1) },
    marks: () => ({
      position: position(),
      layer: model.get("layer"),
      head: model.get("head"),
      target: payload().targets?.[position()] ?? "",
      revision: payload().revision ?? ""
    })
  };
});

// js/lib/graph.js
function pairIndex(k, l1, h1, l2, h2, L, H) {
  return (((k * L + l1) * H + h1) * L + l2) * H + h2;
}
function graphLayout({ layers, heads, maxWidth = 760, legendPx = 150 }) {
  if (!(layers > 0 && heads > 0)) throw new RangeError(`graph needs layers, heads > 0; got ${layers} x ${heads}`);
  const left = 44;
  const top = 42;
  const span2 = Math.max(1, layers - 1);
  const colW = Math.max(56, Math.min(240, (maxWidth - left - legendPx - 24) / span2));
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

// js/lib/composition-controls.js
var KINDS = ["Q", "K", "V"];
var KIND_TEXT = {
  Q: "Q-composition: the later head's queries read the earlier head's output",
  K: "K-composition: the later head's keys read it",
  V: "V-composition: its values read it (a virtual head)"
};
var EDGE_TEXT = {
  weights: "edges coloured by the weight-based composition score",
  causal: "edges coloured by their path-patching effect on the clean and corrupted prompts"
};
function compositionControls(v, on, extras = []) {
  const kindButtons = KINDS.map(
    (k) => h("button", {
      class: "cw-button cw-seg",
      type: "button",
      text: k,
      title: KIND_TEXT[k],
      attrs: { "aria-pressed": "false", "data-kind": k },
      on: { click: () => on.kind(k) }
    })
  );
  const kindGroup = h("span", { class: "cw-seg-group", attrs: { role: "group", "aria-label": "composition kind" } }, kindButtons);
  const edgeButtons = Object.keys(EDGE_TEXT).map(
    (name3) => h("button", {
      class: "cw-button cw-seg",
      type: "button",
      text: name3,
      title: EDGE_TEXT[name3],
      attrs: { "aria-pressed": "false", "data-edges": name3, ...name3 === "causal" ? { "data-control": "edge_value" } : {} },
      on: { click: () => on.edges?.(name3) }
    })
  );
  const edgeGroup = h("span", { class: "cw-seg-group", attrs: { role: "group", "aria-label": "edge values" } }, edgeButtons);
  const baselineBox = h("input", { type: "checkbox", attrs: { "aria-label": "baseline-corrected scores" } });
  v.listen(baselineBox, "change", () => on.baseline(baselineBox.checked));
  const baselineField = h("label", { class: "cw-field", title: "subtract what random matrices of these shapes already score" }, [
    baselineBox,
    h("span", { class: "cw-field-label", text: "minus baseline" })
  ]);
  const slider = h("input", { type: "range", class: "cw-slider", attrs: { "aria-label": "threshold" } });
  const sliderText = h("span", { class: "cw-slider-value" });
  v.listen(slider, "input", () => {
    sliderText.textContent = formatValue(Number(slider.value), 3);
    on.threshold(Number(slider.value));
  });
  const thresholdField = h("label", { class: "cw-field", title: "hide pairs scoring below this" }, [
    h("span", { class: "cw-field-label", text: "threshold" }),
    slider,
    sliderText
  ]);
  const viewSelect = h("select", { class: "cw-select", attrs: { "aria-label": "view" } }, [
    h("option", { value: "graph", text: "graph" }),
    h("option", { value: "matrix", text: "matrix" })
  ]);
  v.listen(viewSelect, "change", () => on.view(viewSelect.value));
  const viewField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "view" }), viewSelect]);
  const el = h("div", { class: "cw-toolbar-row" }, [
    kindGroup,
    edgeGroup,
    baselineField,
    thresholdField,
    viewField,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...extras
  ]);
  return {
    el,
    sync({ kind, baseline, view, domain: [s0, s1], threshold, edges = "weights", causalReason = "" }) {
      for (const b of kindButtons) {
        b.classList.toggle("cw-seg-on", b.dataset.kind === kind);
        b.setAttribute("aria-pressed", b.dataset.kind === kind ? "true" : "false");
      }
      for (const b of edgeButtons) {
        b.classList.toggle("cw-seg-on", b.dataset.edges === edges);
        b.setAttribute("aria-pressed", b.dataset.edges === edges ? "true" : "false");
        if (b.dataset.edges === "causal") {
          b.disabled = !!causalReason;
          b.title = causalReason || EDGE_TEXT.causal;
        }
      }
      baselineBox.checked = !!baseline;
      baselineBox.disabled = edges === "causal";
      viewSelect.value = view;
      const lo = Math.min(s0, threshold);
      const hi = Math.max(s1, threshold);
      slider.min = String(lo);
      slider.max = String(hi);
      slider.step = String(sliderStep(lo, hi));
      slider.value = String(threshold);
      sliderText.textContent = formatValue(threshold, 3);
    }
  };
}

// js/lib/plane.js
function maxModulus(points) {
  let m = 0;
  for (const [re, im] of points) {
    const r = Math.hypot(re, im);
    if (Number.isFinite(r) && r > m) m = r;
  }
  return m;
}
function planeScene({ points, size = 240, theme, title = "", ring = null }) {
  const pad = 26;
  const top = title ? 24 : 6;
  const width = size;
  const height = size + top - 6;
  const plot = size - 2 * pad;
  const cx = pad + plot / 2;
  const cy = top + pad - 6 + plot / 2;
  const extent2 = 1.15;
  const unit = plot / 2 / extent2;
  const scale = maxModulus(points) || 1;
  const toPx = (re, im) => [cx + re / scale * unit, cy - im / scale * unit];
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

// js/lib/composition-term.js
var name2 = ([l, hd]) => `L${l}H${hd}`;
function termWords(kind, pair) {
  const [a, b] = pair.length === 2 ? pair.map(name2) : ["h1", "h2"];
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
      explain: `W_E W_OV(${a}) W_OV(${b}) W_U: what attending (through both heads) to the source token does to the out token's logit`
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
      explain: `(W_E W_OV(${a})) W_QK(${b}) W_Eᵀ / attention scale`
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
    explain: `W_E W_QK(${b}) (W_E W_OV(${a}))ᵀ / attention scale: positive on the diagonal when ${b} attends where ${a} moved the current token`
  };
}
var samePair = (a, b) => JSON.stringify(a || []) === JSON.stringify(b || []);
var TermPanel = class {
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
      }
    });
    this.plane = h("canvas", {
      class: "cw-term-plane",
      attrs: { role: "img", "aria-label": "eigenvalues of the term on the complex plane" }
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
      this.readout
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
    this.el.hidden = want.length !== 2;
    if (want.length !== 2) {
      this.stack = null;
      this.el.replaceChildren();
      return;
    }
    if (!term || !samePair(term.pair, want) || term.kind !== kind || !hasData(term)) {
      if (standalone) return this.hint("this page holds only the term of the pair and kind selected when it was saved");
      if (!this.stack) return this.hint(`computing the ${kind} term…`);
      this.el.classList.add("cw-term-stale");
      this.readout.textContent = `computing the ${kind} term of ${want.map(name2).join(" → ")}…`;
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
      ...axisPriority(stack.rows, stack.cols, (r, c) => stack.value(0, r, c)),
      // the strongest tokens, where not every label fits
      title: words.title,
      yTitle: words.yTitle,
      xTitle: words.xTitle,
      scale,
      theme,
      maxPlot: Math.max(200, Math.min(420, width - 330)),
      marks: (layout) => diagonalOps(layout, Math.min(stack.rows, stack.cols), theme)
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
    this.note.textContent = n ? `${n} eigenvalues (d_head × d_head form), shown as λ / max|λ|, max|λ| = ${formatValue(this.planeScene.scale)}` : "no eigenvalues";
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
};

// js/lib/composition-text.js
function pairText(p, raw, { kind, corrected, base, name: name3 }) {
  const pair = `${name3(p.l1, p.h1)} → ${name3(p.l2, p.h2)}`;
  if (!Number.isFinite(raw)) return `${pair} · undefined (the writer must be in an earlier layer)`;
  const score = corrected ? `${kind}-composition ${formatValue(raw - base)} (raw ${formatValue(raw)} − baseline ${formatValue(base, 3)})` : `${kind}-composition ${formatValue(raw)} (baseline ${formatValue(base, 3)})`;
  return `${pair} · ${score}`;
}
function noteText({ corrected, base, dModel, graph, shown, passing, layers = 2 }) {
  if (layers < 2) {
    return "this model has one attention layer: composition pairs a head with a head of a later layer, so there is nothing to draw";
  }
  const units = corrected ? "baseline-corrected (raw − baseline)" : "raw";
  const plural = (n) => n === 1 ? "" : "s";
  const count2 = graph ? `${shown} of ${passing} pair${plural(passing)} above the threshold drawn${passing > shown ? " (the strongest)" : ""}` : `${shown} pair${plural(shown)} above the threshold`;
  const typical = formatValue(1 / Math.sqrt(dModel || 1), 3);
  const baseline = `baseline ${formatValue(base, 3)}: what random matrices of these shapes score (≈ 1/√d_model = ${typical})`;
  return `${units} scores · ${baseline} · ${count2}`;
}
function scoresCaption(scores, kind, layers = 2) {
  if (layers < 2) return "";
  const caption = scores?.captions?.[kind];
  return typeof caption === "string" ? caption : "";
}
function causalPairText(p, { value, effect, raw, kind, metric, name: name3 }) {
  const pair = `${name3(p.l1, p.h1)} → ${name3(p.l2, p.h2)}`;
  const weights = Number.isFinite(raw) ? ` · ${kind}-composition ${formatValue(raw)} (weights)` : "";
  if (!Number.isFinite(effect)) return `${pair} · ${kind} path not computed: select an edge of this layer pair${weights}`;
  const restored = Number.isFinite(value) ? `carries ${formatValue(value, 3)} of the clean − corrupted difference` : "not normalised";
  return `${pair} · ${kind} path: ${restored} (${metric || "metric"} ${effect >= 0 ? "+" : ""}${formatValue(effect)})${weights}`;
}
function causalNoteText({ kind, computed, metric, shown, cleanValue, corruptedValue, reason, direction = "denoising" }) {
  const pairs = (computed?.[kind] || []).map(([a, b]) => `${a}→${b}`);
  const which = pairs.length ? `layer pairs computed: ${pairs.join(", ")}` : "no layer pair computed yet";
  const ends = `clean ${formatValue(cleanValue)}, corrupted ${formatValue(corruptedValue)}`;
  const why = reason ? ` · ${reason}` : "";
  const how = direction === "noising" ? `the clean run with each ${kind} edge's corrupted sender output reaching only the receiver's ${kind.toLowerCase()} input, (clean − patched) / (clean − corrupted)` : `the corrupted run with each ${kind} edge's clean sender output reaching only the receiver's ${kind.toLowerCase()} input, (patched − corrupted) / (clean − corrupted)`;
  return `path patching: ${how} of the ${metric || "metric"} (${ends}) · ${which} · ${shown} edges above the threshold${why}`;
}

// js/lib/graph-scene.js
var MAX_EDGES = 600;
var LEGEND = ["nodes: heads (number = head index)", "edges: earlier head → later head"];
var LEGEND_CHAR_PX = 6;
var samePair2 = (a, b) => !!a && !!b && a.l1 === b.l1 && a.h1 === b.h1 && a.l2 === b.l2 && a.h2 === b.h2;
function thresholdMarks(scale, bar, { baseline, threshold, theme, labelled = false }) {
  const { x } = bar;
  const ops = [];
  const [d0, d1] = scale.domain;
  if (baseline != null && baseline >= d0 && baseline <= d1) {
    const y2 = barY(scale.domain, bar, baseline);
    ops.push({
      type: "line",
      x1: x - 4,
      y1: y2,
      x2: x + 16,
      y2,
      stroke: theme.fg,
      width: 1.5,
      dash: [3, 2],
      attrs: { class: "cw-baseline-mark" }
    });
    if (labelled)
      ops.push({
        type: "text",
        x: x - 6,
        y: y2,
        text: "baseline",
        font: `10px ${theme.font}`,
        color: theme.fg,
        align: "right",
        baseline: "middle"
      });
  }
  const y = barY(scale.domain, bar, threshold);
  ops.push({ type: "path", d: `M ${x - 1} ${+y.toFixed(2)} l -6 -4 l 0 8 z`, fill: theme.accent, attrs: { class: "cw-threshold-mark" } });
  return ops;
}
function graphScene(spec) {
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
      color: theme.fg
    }
  ];
  layerLabels.forEach((name3, l) => {
    ops.push({
      type: "text",
      x: lay.left + l * lay.colW,
      y: lay.top - 10,
      text: `layer ${name3}`,
      font: font(11),
      color: theme.muted,
      align: "center"
    });
  });
  ops.push({ type: "group", ops: edgeOps(edges, lay, { H, threshold, scale, theme, pair, hover }), attrs: { class: "cw-edges" } });
  ops.push({ type: "group", ops: nodeOps(lay, { theme, selected, pair }), attrs: { class: "cw-nodes" } });
  const bar = { x: lay.plotRight + lay.radius + 64, y: lay.top, h: Math.min(220, Math.max(100, lay.height - lay.top - 30)) };
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
function edgeOps(edges, lay, { H, threshold, scale, theme, pair, hover }) {
  const at = (l, hd) => lay.nodes[l * H + hd];
  const ops = [];
  for (const e of edges) {
    const a = at(e.l1, e.h1);
    const b = at(e.l2, e.h2);
    const d = edgePath(a.x + lay.radius, a.y, b.x - lay.radius, b.y);
    const width = edgeWidth(e.value, threshold, scale.domain[1]);
    const id = `${e.l1},${e.h1},${e.l2},${e.h2}`;
    const isSel = samePair2(e, pair);
    if (isSel || hover?.type === "edge" && samePair2(e, hover)) {
      ops.push({
        type: "path",
        d,
        stroke: theme.accent,
        width: width + 4,
        alpha: isSel ? 0.9 : 0.5,
        attrs: { "pointer-events": "none" }
      });
    }
    const attrs = { class: "cw-edge", "data-edge": id, "data-value": e.value, "data-raw": e.raw, "pointer-events": "none" };
    ops.push({ type: "path", d, stroke: scale.css(e.value), width, cap: "round", alpha: 0.9, attrs });
    ops.push({
      type: "path",
      d,
      stroke: "transparent",
      width: Math.max(8, width + 4),
      attrs: { class: "cw-edge-hit", "data-edge": id, "pointer-events": "stroke" }
    });
  }
  return ops;
}
function nodeOps(lay, { theme, selected, pair }) {
  const font = (px) => `${px}px ${theme.font}`;
  return lay.nodes.map((n) => {
    const isSel = n.l === selected.l && n.h === selected.h;
    const inPair = !!pair && (n.l === pair.l1 && n.h === pair.h1 || n.l === pair.l2 && n.h === pair.h2);
    const circle = {
      type: "circle",
      x: n.x,
      y: n.y,
      r: lay.radius,
      fill: inPair ? theme.accent : theme.bgCss,
      stroke: isSel ? theme.accent : theme.muted,
      width: isSel ? 3 : 1.2
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
      attrs: { "pointer-events": "none" }
    };
    return {
      type: "group",
      ops: lay.radius >= 7 ? [circle, label] : [circle],
      attrs: { class: "cw-node", "data-node": `${n.l},${n.h}`, cursor: "pointer" }
    };
  });
}
function graphTarget(el) {
  const edge = el?.closest?.("[data-edge]");
  if (edge) {
    const [l1, h1, l2, h22] = edge.dataset.edge.split(",").map(Number);
    return { type: "edge", l1, h1, l2, h2: h22 };
  }
  const node = el?.closest?.("[data-node]");
  if (!node) return null;
  const [l, h2] = node.dataset.node.split(",").map(Number);
  return { type: "node", l, h: h2 };
}

// js/lib/pair-panel.js
var LABELS = ["first head's pattern", "second head's pattern", "virtual head's pattern"];
var HINT = "hover a cell: destination (query) row, source (key) column";
var PairPanel = class {
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
        "Click an edge to see both heads' attention patterns, their virtual head (the later pattern times the earlier one) and the circuit term the edge builds.",
        "cw-hint cw-pair-hint"
      );
    if (payload?.reason === "no tokens")
      return this.hint("Pass prompt= or tokens= to CompositionDiagram to see the selected pair's patterns and their virtual head.");
    if (JSON.stringify(payload?.pair) !== JSON.stringify(want) || !hasData(payload)) {
      return this.hint(
        standalone ? "this page holds only the pair selected when it was saved (no kernel to compute others)" : "computing the pair's patterns…"
      );
    }
    try {
      this.stack = new CodeStack(payload);
    } catch (err) {
      return this.hint(`could not read the pair's patterns: ${err.message}`, "cw-error");
    }
    const stack = this.stack;
    const labels = payload.labels || [];
    const lut = makeScale("sequential", { dark: theme.dark }).lut(stack);
    const scaleOf = (i) => {
      const c = colorScaleOf(payload.scale, i);
      return makeScale("sequential", { dark: theme.dark, ticks: c.ticks, caption: c.caption });
    };
    const perPanel = payload.scale?.kind === "auto";
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
        ...axisPriority(stack.rows, stack.cols, (r, c) => stack.stored(r, c) ? stack.value(i, r, c) : Number.NaN),
        title: titles[i],
        yTitle: "destination (query) ↓",
        xTitle: "source (key) →",
        scale: i === 2 || perPanel ? scaleOf(i) : null,
        theme,
        maxPlot: size
      });
    });
    this.readout.textContent = HINT;
    const row = h(
      "div",
      { class: "cw-comp-pair-row" },
      this.maps.map((m) => m.el)
    );
    this.el.replaceChildren(
      h("div", { class: "cw-field-label", text: "Selected pair on the prompt: attention patterns and the virtual head" }),
      row,
      this.readout
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
};

// js/lib/score-matrix.js
function matrixAxes(layerLabels, H) {
  const L = layerLabels.length;
  return { rows: flatHeads(layerLabels, H, 0, L - 1), cols: flatHeads(layerLabels, H, 1, L) };
}
function matrixPair(row, col, H) {
  return { type: "edge", l1: Math.floor(row / H), h1: row % H, l2: 1 + Math.floor(col / H), h2: col % H };
}
function matrixCell(p, H) {
  return { row: p.l1 * H + p.h1, col: (p.l2 - 1) * H + p.h2 };
}
function paintMatrix(pixels, { values, k, L, H, axes, offset, threshold, scale, background }) {
  const { rows, cols } = axes;
  const nanPx = packRGBA(...scale.nan);
  const fade = (c, i) => Math.round(background[i] * 0.8 + c * 0.2);
  let shown = 0;
  for (let r = 0; r < rows.length; r++) {
    for (let c = 0; c < cols.length; c++) {
      const raw = values[pairIndex(k, rows[r].l, rows[r].h, cols[c].l, cols[c].h, L, H)];
      let px = nanPx;
      if (Number.isFinite(raw)) {
        const v = raw - offset;
        const rgb = scale.rgb(v);
        if (v >= threshold) shown++;
        px = v >= threshold ? packRGBA(...rgb) : packRGBA(...rgb.map(fade));
      }
      pixels[r * cols.length + c] = px;
    }
  }
  return shown;
}
var ScoreMatrix = class {
  constructor({ onHover, onClick }) {
    this.H = 1;
    this.shown = 0;
    this.heatmap = new Heatmap({
      label: "composition scores",
      onHover: (hit) => onHover(hit ? matrixPair(hit.row, hit.col, this.H) : null),
      onClick: (hit) => onClick(matrixPair(hit.row, hit.col, this.H))
    });
    this.el = this.heatmap.el;
  }
  get scene() {
    return this.heatmap.scene;
  }
  update(spec) {
    const { layerLabels, H, scale, theme, threshold } = spec;
    this.H = H;
    const axes = matrixAxes(layerLabels, H);
    this.heatmap.update({
      rows: axes.rows.length,
      cols: axes.cols.length,
      paint: (pixels) => {
        this.shown = paintMatrix(pixels, { ...spec, axes, background: theme.bg });
      },
      rowLabels: axes.rows.map((x) => x.label),
      colLabels: axes.cols.map((x) => x.label),
      title: spec.title ?? `${spec.kind}-composition${spec.corrected ? " (minus baseline)" : ""}`,
      yTitle: "writer ↓",
      xTitle: "reader →",
      scale,
      theme,
      maxPlot: spec.maxPlot,
      marks: (layout) => thresholdMarks(scale, layout.bar, { baseline: spec.baseline, threshold, theme })
    });
    this.mark(spec);
  }
  mark({ hover, pair, theme }) {
    const cell = hover?.type === "edge" ? matrixCell(hover, this.H) : {};
    const at = pair && pair.l1 >= 0 && pair.l2 >= 1 ? matrixCell(pair, this.H) : null;
    const marks = (layout) => at ? [cellBox(layout, at.row, at.col, { color: theme.accent, inset: -1 })] : [];
    this.heatmap.setHighlight({ row: cell.row, col: cell.col, marks });
  }
  destroy() {
    this.heatmap.destroy();
  }
};

// js/views/composition.js
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
    graph: null
  };
  const causalPayload = () => v.payloads("causal")?.causal || {};
  const causalMode = () => model.get("edge_value") === "causal" && !!state.causal;
  const drawn = () => causalMode() ? state.causal.subarray(state.causal.length / 2) : state.values;
  const causalAt = (part, p) => state.causal[part * (state.causal.length / 2) + pairIndex(kindIndex(), p.l1, p.h1, p.l2, p.h2, state.L, state.H)];
  const info = () => model.get("info") || {};
  const scores = () => v.payloads("scores")?.scores || {};
  const layerLabels = () => scores().layers || info().attn_layers || [];
  const kind = () => model.get("kind");
  const kindIndex = () => Math.max(0, (scores().kinds || KINDS).indexOf(kind()));
  const baseValue = () => model.get("baseline_value") || 0;
  const offset = () => model.get("baseline") && !causalMode() ? baseValue() : 0;
  const computed = () => scores().computed || [];
  const raw = (p) => state.values[pairIndex(kindIndex(), p.l1, p.h1, p.l2, p.h2, state.L, state.H)];
  const headName4 = (l, hd) => `L${layerLabels()[l]}H${hd}`;
  const selectedPos = () => ({ l: layerLabels().indexOf(model.get("layer")), h: model.get("head") });
  const samePair3 = (a, b) => !!a && !!b && a.l1 === b.l1 && a.h1 === b.h1 && a.l2 === b.l2 && a.h2 === b.h2;
  function selectedPair() {
    const pair2 = model.get("selected_pair") || [];
    if (pair2.length !== 2) return null;
    const at = (l) => layerLabels().indexOf(l);
    return { l1: at(pair2[0][0]), h1: pair2[0][1], l2: at(pair2[1][0]), h2: pair2[1][1] };
  }
  function causalThreshold() {
    if (state.causalThreshold != null) return state.causalThreshold;
    const range = scoreRange(drawn(), kindIndex(), state.L, state.H);
    return range ? +(0.5 * Math.max(range[1], 0)).toFixed(4) : 0;
  }
  const threshold = () => causalMode() ? causalThreshold() : state.threshold;
  function scale() {
    if (causalMode()) {
      const range2 = scoreRange(drawn(), kindIndex(), state.L, state.H);
      const m = Math.max(range2 ? Math.max(Math.abs(range2[0]), Math.abs(range2[1])) : 0, 0.05) * 1.05;
      return makeScale("diverging", { dark: v.theme.dark, domain: [-m, m] });
    }
    const range = state.values ? scoreRange(state.values, kindIndex(), state.L, state.H) : null;
    const [d0, d1] = rawDomain(range, baseValue());
    return makeScale("sequential", { dark: v.theme.dark, domain: [d0 - offset(), d1 - offset()] });
  }
  const sendThreshold = v.own(throttle((value) => v.set({ threshold: value }), 120));
  const controls = compositionControls(
    v,
    {
      kind: (k) => v.set({ kind: k }),
      baseline: (on) => {
        state.threshold = shiftThreshold(state.threshold, baseValue(), on);
        v.set({ baseline: on, threshold: state.threshold });
      },
      threshold: (value) => {
        if (causalMode()) {
          state.causalThreshold = value;
          draw();
          return;
        }
        state.threshold = value;
        draw();
        sendThreshold(value);
      },
      view: (name3) => v.set({ view: name3 }),
      edges: (name3) => v.set({ edge_value: name3 })
    },
    saveButtons({
      what: "diagram",
      picture: () => model.get("view") === "graph" ? state.graph : matrix.scene,
      name: () => `composition_${kind()}${model.get("baseline") ? "_corrected" : ""}`,
      background: () => v.theme.bgCss
    })
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
      onClick: (p) => Number.isFinite(causalMode() ? causalAt(1, p) : raw(p)) && clickPair(p)
    })
  );
  function clickPair(p) {
    const labels = layerLabels();
    if (samePair3(p, selectedPair())) return v.set({ selected_pair: [] });
    v.set({
      selected_pair: [
        [labels[p.l1], p.h1],
        [labels[p.l2], p.h2]
      ],
      layer: labels[p.l2],
      head: p.h2
    });
  }
  const describe = (p) => causalMode() ? causalPairText(p, {
    value: causalAt(1, p),
    effect: causalAt(0, p),
    raw: state.values ? raw(p) : Number.NaN,
    kind: kind(),
    metric: causalPayload().metric,
    name: headName4
  }) : pairText(p, raw(p), { kind: kind(), corrected: model.get("baseline"), base: baseValue(), name: headName4 });
  function drawReadout() {
    const { hover } = state;
    const sel = selectedPair();
    const pos = selectedPos();
    if (hover?.type === "edge") readout.textContent = describe(hover);
    else if (hover?.type === "node") readout.textContent = `${headName4(hover.l, hover.h)} · click to select this head`;
    else if (sel && sel.l1 >= 0 && sel.l2 >= 0 && state.values)
      readout.textContent = `selected: ${describe(sel)} · click it again to release`;
    else
      readout.textContent = state.values ? `selected head ${headName4(pos.l, pos.h)} · hover a pair for its score, click to select` : "no scores yet";
  }
  const spec = () => ({
    values: drawn(),
    k: kindIndex(),
    L: state.L,
    H: state.H,
    layerLabels: layerLabels(),
    kind: kind(),
    title: causalMode() ? `${kind()} paths (path patching, normalised)` : void 0,
    corrected: model.get("baseline") && !causalMode(),
    threshold: threshold(),
    offset: offset(),
    baseline: causalMode() ? null : model.get("baseline") ? 0 : baseValue(),
    // where the baseline sits on the colour bar
    scale: scale(),
    theme: v.theme,
    selected: selectedPos(),
    pair: selectedPair(),
    hover: state.hover
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
    noteLine.textContent = causalMode() ? causalNoteText({
      kind: kind(),
      computed: c.computed,
      metric: c.metric,
      shown,
      cleanValue: c.clean_value,
      corruptedValue: c.corrupted_value,
      reason: c.not_normalised,
      direction: c.direction
    }) : noteText({
      corrected: model.get("baseline"),
      base: baseValue(),
      dModel: info().d_model,
      graph: model.get("view") === "graph",
      shown,
      passing,
      layers
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
      width: v.size
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
      criterion: model.get("term_criterion")
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
      causalReason: causalPayload().reason || ""
    });
    const unsaved = v.standalone && state.values && !computed().includes(kind());
    v.error(unsaved ? `${kind()}-composition was not computed when this page was saved` : "", "unsaved");
  }
  function start() {
    const p = scores();
    if (!hasData(p)) {
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
    size: (width) => Number.isFinite(width) ? width : 760,
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
      head: model.get("head")
    })
  };
});

// js/lib/feature-text.js
function featureName(feature) {
  if (!feature) return "?";
  return feature.label ? `#${feature.id} ${feature.label}` : `#${feature.id}`;
}
function barText(bar, features) {
  if (bar.kind === "pair") {
    const names = (bar.features || []).map((n) => featureName(features[n]));
    if (bar.output != null) return `${names[0]} → ${bar.output}`;
    const at = bar.source != null ? ` @ ${bar.source} ${quote(bar.source_text ?? "")}` : "";
    return `${names[0]} × ${names[1]}${at}`;
  }
  return bar.label || bar.kind;
}
function extent(values) {
  let m = 0;
  for (const x of values) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x));
  return m > 0 ? m : 1e-9;
}

// js/views/featureattention.js
var AXIS_TITLES2 = { yTitle: "destination (query) ↓", xTitle: "source (key) →" };
var PANELS = [
  ["qk", "QK: why it attends", "the cell's score split over feature pairs"],
  ["ov", "OV: what it moves", "what the head writes at the destination, split over its source features"]
];
defineView("featureattention", (v) => {
  const { model } = v;
  const state = { stack: null, labels: [], hover: null, card: null };
  const info = () => model.get("info") || {};
  const patterns = () => v.payloads("patterns")?.patterns;
  const split = () => model.get("split") || {};
  const head = () => model.get("head");
  const shownLayer = () => patterns()?.layer ?? model.get("layer");
  const colors = () => colorScaleOf(patterns()?.scale, head());
  const scale = () => {
    const c = colors();
    return makeScale("sequential", { dark: v.theme.dark, ticks: c.ticks, caption: c.caption });
  };
  const prompt = v.own(sequenceBox(v, () => info().has_tokenizer));
  const toolbar = headToolbar(v, {
    layer: shownLayer,
    save: { what: "heatmap", picture: () => heatmap.scene, name: () => `feature_attention_L${shownLayer()}H${head()}` }
  });
  toolbar.el.prepend(prompt.el);
  const scales = scaleSelect(v);
  toolbar.headSelect.el.after(scales.el);
  const panelButtons = PANELS.map(([value, text, title]) => {
    const b = h("button", { class: "cw-button cw-fa-panel", type: "button", text, title });
    b.dataset.control = "panel";
    b.dataset.panel = value;
    v.listen(b, "click", () => v.set({ panel: value }));
    return b;
  });
  const kInput = h("input", { class: "cw-input cw-fa-k", type: "number", attrs: { min: 1, max: 200, "aria-label": "pairs ranked" } });
  kInput.dataset.control = "k";
  v.listen(kInput, "change", () => {
    const k = Number.parseInt(kInput.value, 10);
    if (Number.isFinite(k)) v.set({ k });
  });
  const rowButton = h("button", {
    class: "cw-button cw-fa-row-button",
    type: "button",
    text: "whole row",
    title: "split every source of the clicked destination at once (the top pairs over the row)"
  });
  rowButton.dataset.control = "cell";
  v.listen(rowButton, "click", () => {
    const cell = model.get("cell") || {};
    if (cell.query != null) v.set({ cell: { query: cell.query, key: cell.key == null ? cell.query : null } });
  });
  const controls = h("div", { class: "cw-toolbar-row cw-fa-controls" }, [
    ...panelButtons,
    rowButton,
    h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "pairs" }), kInput])
  ]);
  toolbar.el.append(controls);
  const dictionaryNote = h("div", { class: "cw-hint cw-fa-dictionary" });
  const progress = progressRow(v);
  const cellTokens = (hit) => zoom.lod ? zoom.tokensOf(hit) : { query: hit.row, key: hit.col };
  const heatmap = v.own(
    new Heatmap({
      label: "attention pattern (click a cell to split its score)",
      onHover: (hit) => {
        if (zoom.drag) return;
        state.hover = hit ? cellTokens(hit) : null;
        drawSelection();
        exact.send();
      },
      onClick: (hit) => {
        if (zoom.dragged || !hit) return;
        const at = cellTokens(hit);
        if (at.query == null) return;
        v.set({ cell: { query: at.query, key: at.key != null && at.key <= at.query ? at.key : null } });
      }
    })
  );
  const zoom = new Zoom(v, { heatmap, head, patterns, redraw: drawMain });
  const exact = new ExactRow(v, { current: () => ({ sel: state.hover, locked: false }), patterns, head });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const header = h("div", { class: "cw-fa-header", attrs: { "aria-live": "polite" } });
  const sum = h("div", { class: "cw-fa-sum" });
  const bars = h("div", { class: "cw-fa-bars", attrs: { role: "list", "aria-label": "the split's bars" } });
  const lists = h("div", { class: "cw-fa-lists" });
  const card = h("div", { class: "cw-fa-card", attrs: { role: "note" } });
  card.hidden = true;
  const side = h("div", { class: "cw-fa-side" }, [header, sum, bars, lists, card]);
  const main = h("div", { class: "cw-fa-main" }, [h("div", { class: "cw-fa-picture" }, [zoom.el, heatmap.el, readout]), side]);
  v.root.append(toolbar.el, progress.el, v.banner, dictionaryNote, main);
  function drawMain() {
    const stack = state.stack;
    if (!stack) return;
    const t0 = performance.now();
    const sc = scale();
    const lut = sc.lut(stack);
    const title = `Layer ${shownLayer()}, head ${head()}`;
    const axes = { title, ...AXIS_TITLES2, scale: sc, theme: v.theme, maxPlot: v.size };
    if (zoom.lod) zoom.draw(stack, head(), lut, state.labels, axes);
    else
      heatmap.update({
        ...axes,
        rows: stack.rows,
        cols: stack.cols,
        paint: (pixels) => stack.paint(head(), lut, pixels, 0),
        rowLabels: state.labels,
        colLabels: state.labels
      });
    drawSelection();
    v.drawn("main", t0);
  }
  function drawSelection() {
    const cell = model.get("cell") || {};
    const hover = state.hover;
    const marks = { row: hover?.query, col: hover?.key, lockedRow: cell.query ?? void 0, lockedCol: cell.key ?? void 0 };
    heatmap.setHighlight(zoom.lod ? zoom.highlight(hover, cell.query != null ? cell : null) : marks);
    const name3 = (i) => `${i} ${quote(state.labels[i] ?? i)}`;
    const parts = [`L${shownLayer()} H${head()}`];
    if (state.stack && hover?.query != null && hover.key != null) {
      const row = exact.values(hover.query);
      const lod = zoom.lod;
      const weight = row ? formatValue(row[hover.key]) : `≈${formatValue(lod ? overviewValue(state.stack, lod, head(), hover.query, hover.key) : state.stack.value(head(), hover.query, hover.key), 3)}`;
      parts.push(`destination ${name3(hover.query)} → source ${name3(hover.key)}`, `weight ${weight}`);
    } else parts.push("click a cell to split its score over the dictionary's features");
    readout.textContent = parts.join(" · ");
  }
  function showCard(feature) {
    state.card = feature;
    card.replaceChildren();
    if (!feature) {
      card.hidden = true;
      return;
    }
    const line = (label, text) => h("div", { class: "cw-fa-card-line" }, [h("span", { class: "cw-field-label", text: label }), h("span", { text })]);
    card.append(h("div", { class: "cw-fa-card-title", text: featureName(feature) }));
    const facts = [];
    if (feature.side) facts.push(`${feature.side} side`);
    if (feature.activation != null) facts.push(`activation ${formatValue(feature.activation, 3)}`);
    if (feature.marginal != null) facts.push(`marginal ${formatValue(feature.marginal, 3)}`);
    if (feature.weight != null) facts.push(`pattern-weighted activation ${formatValue(feature.weight, 3)}`);
    if (facts.length) card.append(line("", facts.join(" · ")));
    if (feature.positions?.length)
      card.append(line("top positions", feature.positions.map(([p, t, val]) => `${p} ${quote(t)} ${formatValue(val, 3)}`).join(", ")));
    if (feature.up?.length) card.append(line("raises", feature.up.map(([t, val]) => `${quote(t)} ${formatValue(val, 2)}`).join(", ")));
    if (feature.down?.length) card.append(line("lowers", feature.down.map(([t, val]) => `${quote(t)} ${formatValue(val, 2)}`).join(", ")));
    card.hidden = false;
  }
  function barRow(text, value, m, { kind = "term", features = [], error = false, bias = false } = {}) {
    const dark = v.theme.dark;
    const pos = dark ? "#6fa8dc" : "#2b6cb0";
    const neg = dark ? "#e8877a" : "#c0392b";
    const width = Math.abs(value) / m * 50;
    const bar = h("div", { class: "cw-fa-bar" });
    bar.style.left = value >= 0 ? "50%" : `${50 - width}%`;
    bar.style.width = `${width}%`;
    bar.style.background = value >= 0 ? pos : neg;
    const row = h("div", { class: `cw-fa-row cw-fa-${kind}`, attrs: { role: "listitem" } }, [
      h("span", { class: "cw-fa-name", text, title: text }),
      h("span", { class: "cw-fa-track" }, [h("span", { class: "cw-fa-zero" }), bar]),
      h("span", { class: "cw-fa-value", text: formatValue(value, 4) })
    ]);
    if (error) row.classList.add("cw-fa-error");
    if (bias) row.classList.add("cw-fa-bias");
    row.dataset.cwValue = String(value);
    if (features.length) {
      const feats = split().features || {};
      features.forEach((name3, i) => {
        row.dataset[`cwFeature${i}`] = String(feats[name3]?.id ?? "");
      });
      v.listen(row, "mousemove", (e) => {
        const half = features.length > 1 && e.offsetX > row.clientWidth / 2 ? 1 : 0;
        showCard(feats[features[Math.min(half, features.length - 1)]]);
      });
    }
    return row;
  }
  function drawSplit() {
    const p = split();
    bars.replaceChildren();
    lists.replaceChildren();
    const cell = p.cell;
    const feats = p.features || {};
    const panel = model.get("panel");
    for (const b of panelButtons) b.classList.toggle("cw-active", b.dataset.panel === panel);
    rowButton.textContent = model.get("cell")?.key == null && model.get("cell")?.query != null ? "one cell" : "whole row";
    rowButton.disabled = v.standalone || model.get("cell")?.query == null || panel === "ov";
    kInput.value = String(model.get("k"));
    header.classList.toggle("cw-fa-failed", !!p.failed);
    if (!hasData(p) || !cell) {
      header.textContent = p.note || "click a cell of the pattern to split its score";
      sum.textContent = "";
      showCard(null);
      return;
    }
    const values = floatValues(p);
    const name3 = (i) => `${i} ${quote(state.labels[i] ?? i)}`;
    const where = p.row ? `row of destination ${name3(cell.query)}` : `destination ${name3(cell.query)} → source ${name3(cell.key)}`;
    const what = p.panel === "ov" ? "what it moves" : "score split";
    header.textContent = `L${p.layer}H${p.head} ${what}: ${where}${p.caption ? ` (${p.caption})` : ""}`;
    const model_ = p.panel === "ov" ? "the head's read-out" : p.row ? "pattern-weighted score" : "model's score";
    sum.textContent = p.score == null ? "" : `sum of bars ${formatValue(p.total, 5)} · ${model_} ${formatValue(p.score, 5)} · error terms carry ${formatValue(100 * p.error_share, 3)}%`;
    sum.dataset.cwScore = String(p.score);
    sum.dataset.cwTotal = String(p.total);
    const m = extent(values);
    p.bars.forEach((bar, i) => {
      bars.append(
        barRow(barText(bar, feats), values[i], m, { kind: bar.kind, features: bar.features || [], error: bar.error, bias: bar.bias })
      );
    });
    for (const [sideName, names] of Object.entries(p.marginals || {})) {
      if (!names.length) continue;
      const list = h("div", { class: "cw-fa-list" }, [h("div", { class: "cw-field-label", text: `${sideName} features` })]);
      const ms = names.map((n) => feats[n]?.marginal ?? feats[n]?.size ?? 0);
      const mm = extent(ms);
      names.forEach((n, i) => {
        list.append(barRow(featureName(feats[n]), ms[i], mm, { kind: "feature", features: [n] }));
      });
      lists.append(list);
    }
    if (p.outputs?.length) {
      const list = h("div", { class: "cw-fa-list" }, [h("div", { class: "cw-field-label", text: "outputs" })]);
      const mm = extent(p.outputs.map((o) => o[1]));
      for (const [text, value] of p.outputs) list.append(barRow(text, value, mm, { kind: "output" }));
      lists.append(list);
    }
    if (state.card) showCard(feats[`${state.card.side}:${state.card.id}`] || null);
  }
  function drawInfo() {
    const d = model.get("dictionary_info") || {};
    const parts = Object.entries(d).map(
      ([role, x]) => `${role.replace("_", " ")}: ${x.name} (${x.features} features, ${x.activation}, ${x.hook_name}${x.labels ? `, ${x.labels} labelled` : ""})`
    );
    dictionaryNote.textContent = parts.join(" · ");
  }
  function syncControls() {
    toolbar.sync();
    prompt.show(info().has_tokenizer ? model.get("prompt") || "" : (model.get("tokens") || []).join(" "));
    drawInfo();
  }
  const inflate = newestInflated();
  function start() {
    const p = patterns();
    inflate(
      p,
      (plain) => show(p, plain),
      (err) => v.error(`could not inflate the patterns: ${err.message}`, "decode")
    );
  }
  function show(p, plain) {
    try {
      state.stack = hasData(plain) ? new CodeStack(plain) : null;
      v.error("", "decode");
    } catch (err) {
      state.stack = null;
      v.error(`could not read the patterns: ${err.message}`, "decode");
    }
    zoom.show(p, state.stack);
    scales.show(p?.scale?.kind);
    state.labels = p?.labels || [];
    const t0 = performance.now();
    syncControls();
    drawMain();
    drawSplit();
    if (state.stack || !model.get("busy")) v.drawn("all", t0);
    if (zoom.lod) zoom.request();
  }
  v.onPayloads("patterns", start);
  v.on("change:split", () => {
    drawSplit();
    drawSelection();
    v.drawn("split");
  });
  v.on("change:head", () => {
    toolbar.headSelect.select.value = String(head());
    drawMain();
    zoom.request();
  });
  v.on("change:tile", () => {
    zoom.takeTile().catch((err) => v.error(`could not read a tile: ${err.message}`, "decode"));
  });
  v.on("change:row", drawSelection);
  v.on("change:cell", drawSelection);
  v.on("change:panel change:k", drawSplit);
  v.on("change:prompt change:tokens change:layer change:info change:dictionary_info", syncControls);
  return {
    start,
    draw: () => {
      drawMain();
      drawSplit();
    },
    size: (width) => Math.max(v.compact ? 160 : 200, Math.min(460, (width - 40) / 2)),
    busy: () => model.get("busy") ? "running…" : "",
    keys: {
      ...zoom.keys(headKeys(v, { layers: true, onHead: (hd) => setHead(v, hd) })),
      Escape: () => v.set({ cell: { query: null, key: null } })
    },
    marks: () => ({
      head: head(),
      layer: shownLayer(),
      tokens: state.labels.length,
      revision: patterns()?.revision ?? "",
      cell: JSON.stringify(model.get("cell") || {}),
      bars: split().bars?.length ?? 0,
      panel: model.get("panel")
    })
  };
});

// js/views/headatlas.js
var FONT_PX3 = 11;
function decileLabel(decile) {
  return `${10 * decile}–${10 * decile + 10} %`;
}
function count(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, " ");
}
var headName2 = (layer, head) => `L${layer}H${head}`;
function metricScale([lo, hi], dark) {
  const signed2 = lo < 0 && hi > 0;
  const m = Math.max(Math.abs(lo), Math.abs(hi));
  return makeScale(signed2 ? "diverging" : "sequential", { dark, domain: signed2 ? [-m, m] : [lo, hi > lo ? hi : lo + 1] });
}
function scatterScene(spec, measure) {
  const { points, scale, theme, width = 560, height = 400, selected = null } = spec;
  const frame = scatterFrame(spec, measure);
  const { left, top, plotW, plotH, px, py } = frame;
  const ops = frame.ops;
  const n = points.length;
  const radius = n > 400 ? 3 : n > 120 ? 4 : 5.5;
  const dots = [];
  points.forEach((p, i) => {
    if (!Number.isFinite(p.x) || !Number.isFinite(p.y)) return;
    const x = Math.max(left, Math.min(left + plotW, px(p.x)));
    const y = Math.max(top, Math.min(top + plotH, py(p.y)));
    dots.push({ x, y, i });
    ops.push({ type: "circle", x, y, r: radius, fill: scale.css(p.c), stroke: theme.fg, width: 0.75, alpha: 0.9 });
  });
  const ringed = dots.find((d) => d.i === selected);
  if (ringed) ops.push(...ringOps(ringed, points[selected].label || "", { radius, frame, theme, measure }));
  return { width, height, ops, layout: { left, top, plotW, plotH }, dots, radius };
}
function scatterFrame(spec, measure) {
  const { xLabel = "", yLabel = "", cLabel = "", xDomain, yDomain, scale, theme, width = 560, height = 400, title = "" } = spec;
  const sans = `${FONT_PX3}px ${theme.font}`;
  const ticksOf = ([lo, hi]) => niceTicks(lo, hi, 5).filter((t) => t >= lo - 1e-9 && t <= hi + 1e-9);
  const xTicks = ticksOf(xDomain);
  const yTicks = ticksOf(yDomain);
  const cTicks = niceTicks(scale.domain[0], scale.domain[1], 5);
  const widest = (ticks) => Math.max(10, ...ticks.map((t) => measure(formatValue(t, 3), sans)));
  const top = title ? 30 : 10;
  const left = 8 + FONT_PX3 + 8 + widest(yTicks) + 6;
  const right = 16 + 12 + 6 + widest(cTicks) + 10 + FONT_PX3 + 6;
  const bottom = 6 + FONT_PX3 + 10 + FONT_PX3 + 6;
  const plotW = Math.max(120, width - left - right);
  const plotH = Math.max(120, height - top - bottom);
  const widen = ([lo, hi]) => {
    const pad = 0.04 * (hi - lo || 1);
    return [lo - pad, hi + pad];
  };
  const [x0, x1] = widen(xDomain);
  const [y0, y1] = widen(yDomain);
  const px = (x) => left + (x - x0) / (x1 - x0) * plotW;
  const py = (y) => top + plotH - (y - y0) / (y1 - y0) * plotH;
  const text = (x, y, value, more) => ({ type: "text", x, y, text: value, font: sans, color: theme.muted, baseline: "middle", ...more });
  const ops = [];
  if (title) ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  for (const t of xTicks) {
    ops.push({ type: "line", x1: px(t), y1: top, x2: px(t), y2: top + plotH, stroke: theme.border, width: 0.6 });
    ops.push(text(px(t), top + plotH + 6 + FONT_PX3 / 2, formatValue(t, 3), { align: "center" }));
  }
  for (const t of yTicks) {
    ops.push({ type: "line", x1: left, y1: py(t), x2: left + plotW, y2: py(t), stroke: theme.border, width: 0.6 });
    ops.push(text(left - 6, py(t), formatValue(t, 3), { align: "right" }));
  }
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  const name3 = { color: theme.fg, align: "center" };
  const upright = { ...name3, rotate: -Math.PI / 2 };
  ops.push(text(left + plotW / 2, top + plotH + 6 + FONT_PX3 + 10 + FONT_PX3 / 2, `${xLabel} →`, name3));
  ops.push(text(8 + FONT_PX3 / 2, top + plotH / 2, `${yLabel} →`, upright));
  const barX = left + plotW + 16;
  ops.push(...colourBar(scale, { x: barX, y: top, h: plotH }, theme));
  ops.push(text(barX + 12 + 6 + widest(cTicks) + 10 + FONT_PX3 / 2, top + plotH / 2, `colour: ${cLabel}`, upright));
  return { ops, left, top, plotW, plotH, px, py };
}
function ringOps(ringed, label, { radius, frame, theme, measure }) {
  const { left, top, plotW } = frame;
  const bold = `600 ${FONT_PX3}px ${theme.font}`;
  const onLeft = ringed.x > left + plotW - 48;
  const lx = ringed.x + (onLeft ? -1 : 1) * (radius + 8);
  const ly = Math.max(top + 8, ringed.y - radius - 6);
  const w = measure(label, bold) + 6;
  return [
    { type: "circle", x: ringed.x, y: ringed.y, r: radius + 4, stroke: theme.accent, width: 2.5 },
    { type: "rect", x: onLeft ? lx - w + 3 : lx - 3, y: ly - 8, w, h: 16, fill: theme.bgCss, alpha: 0.85 },
    { type: "text", x: lx, y: ly, text: label, font: bold, color: theme.fg, align: onLeft ? "right" : "left", baseline: "middle" }
  ];
}
defineView("headatlas", (v) => {
  const { model } = v;
  const state = { values: null, hover: null, examples: null, stack: null, rowHover: null };
  const scan = () => v.payloads("scan")?.scan || {};
  const metrics = () => scan().metrics || [];
  const layers = () => scan().layers || [];
  const nHeads = () => scan().n_heads || 1;
  const label = (m) => scan().labels?.[m] || m;
  const rangeOf = (m) => scan().metric_ranges?.[m] || [0, 1];
  const L = () => layers().length;
  const value = (m, row, hd) => {
    const k = metrics().indexOf(m);
    return state.values && k >= 0 ? state.values[(k * L() + row) * nHeads() + hd] : NaN;
  };
  const selectedRow = () => layers().indexOf(model.get("layer"));
  const colourScale = () => metricScale(rangeOf(model.get("color_metric")), v.theme.dark);
  const tokenScale2 = (i, row) => {
    const sc = makeScale("sequential", { dark: v.theme.dark, domain: [0, 1] });
    const c = colorScaleOf(state.examples?.scale, i);
    return { ...sc, rgb: (w) => sc.rgb(c.position(w, row)) };
  };
  const metricSelect = (text, trait) => {
    const select = h("select", { class: "cw-select", attrs: { "aria-label": text } });
    v.listen(select, "change", () => v.set({ [trait]: select.value }));
    return {
      select,
      el: h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text }), select]),
      sync(list) {
        const key = list.join("|");
        if (select.dataset.options !== key) {
          select.replaceChildren(...list.map((m) => h("option", { value: m, text: label(m) })));
          select.dataset.options = key;
        }
        select.value = model.get(trait);
      }
    };
  };
  const xSelect = metricSelect("X", "x_metric");
  const ySelect = metricSelect("Y", "y_metric");
  const cSelect = metricSelect("Colour", "color_metric");
  const modeButtons = ["scatter", "grid"].map(
    (m) => h("button", {
      class: "cw-button cw-ha-mode",
      type: "button",
      text: m === "scatter" ? "Scatter" : "Grid",
      attrs: {
        "data-mode": m,
        title: m === "scatter" ? "every head on the x and y metrics" : "a layer × head grid coloured by the colour metric"
      },
      on: { click: () => v.set({ mode: m }) }
    })
  );
  const modeGroup = h("span", { class: "cw-ha-modes", attrs: { role: "group", "aria-label": "view" } }, modeButtons);
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const buttons = saveButtons({
    what: "atlas",
    picture: () => model.get("mode") === "grid" ? heatmap.scene : state.scene,
    name: () => `headatlas_${model.get("x_metric")}_${model.get("y_metric")}`,
    background: () => v.theme.bgCss
  });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    xSelect.el,
    ySelect.el,
    cSelect.el,
    modeGroup,
    layerSelect.el,
    headSelect.el,
    v.busyMark
  ]);
  const bar = h("div", { class: "cw-ha-bar-fill" });
  const progressBar = h("div", { class: "cw-ha-bar", attrs: { role: "progressbar", "aria-label": "texts scanned", "aria-valuemin": 0 } }, [
    bar
  ]);
  const progressText = h("span", { class: "cw-ha-progress-text" });
  const stopButton = button("Stop", "stop the scan after the batch running (the texts scanned so far stay)", () => {
    v.set({ scan_state: model.get("scan_state") === "running" ? "stopped" : "running" });
  });
  stopButton.classList.add("cw-ha-stop");
  const progressRow2 = h("div", { class: "cw-toolbar-row cw-ha-progress" }, [
    progressBar,
    progressText,
    stopButton,
    h("span", { class: "cw-spacer" }),
    ...buttons
  ]);
  const canvas = h("canvas", { class: "cw-ha-canvas", attrs: { role: "img", "aria-label": "heads on two metrics" } });
  const overlay = h("canvas", { class: "cw-ha-overlay" });
  const scatter = h("div", { class: "cw-ha-scatter" }, [canvas, overlay]);
  const hitOf = (e) => {
    if (!state.scene) return null;
    const box = overlay.getBoundingClientRect();
    return nearestDot(state.scene, e.clientX - box.left, e.clientY - box.top, 9);
  };
  v.listen(overlay, "mousemove", (e) => {
    const dot = hitOf(e);
    const hover = dot ? headOf(dot.i) : null;
    overlay.style.cursor = dot ? "pointer" : "default";
    if (hover?.row !== state.hover?.row || hover?.head !== state.hover?.head) setHover(hover);
  });
  v.listen(overlay, "mouseleave", () => setHover(null));
  v.listen(overlay, "click", (e) => {
    const dot = hitOf(e);
    if (dot) selectHead(headOf(dot.i));
  });
  const heatmap = v.own(
    new Heatmap({
      label: "heads coloured by a metric",
      onHover: (hit) => setHover(hit ? { row: hit.row, head: hit.col } : null),
      onClick: (hit) => selectHead({ row: hit.row, head: hit.col })
    })
  );
  const readout = h("div", { class: "cw-readout cw-ha-readout", attrs: { "aria-live": "polite" } });
  const hint = h("div", { class: "cw-hint cw-ha-hint" });
  const exampleMetric = metricSelect("Examples by", "example_metric");
  const examplesHead = h("div", { class: "cw-hint cw-ha-examples-head" });
  const examplesNote = h("div", { class: "cw-hint cw-ha-examples-note" });
  const rows = h("div", { class: "cw-ha-examples", attrs: { role: "list", "aria-label": "examples" } });
  const scales = scaleSelect(v);
  const examplesBar = h("div", { class: "cw-toolbar-row" }, [exampleMetric.el, scales.el, examplesHead]);
  const examplesBox = h("div", { class: "cw-ha-examples-box" }, [examplesBar, examplesNote, rows]);
  let strips = [];
  v.root.append(toolbar, progressRow2, v.banner, scatter, heatmap.el, readout, hint, examplesBox);
  v.listen(rows, "click", (e) => {
    const row = e.target.closest?.(".cw-ha-example");
    const item = row && state.examples?.items?.[Number(row.dataset.index)];
    if (!item) return;
    const chosen = model.get("example") || [];
    if (chosen[0] !== item.text || chosen[1] !== item.dest) v.set({ example: [item.text, item.dest] });
  });
  v.listen(rows, "mouseleave", () => {
    state.rowHover = null;
  });
  const headOf = (i) => ({ row: Math.floor(i / nHeads()), head: i % nHeads() });
  function selectHead({ row, head }) {
    const layer = layers()[row];
    if (layer == null) return;
    if (layer === model.get("layer") && head === model.get("head")) return;
    v.set({ layer, head });
  }
  function setHover(hover) {
    state.hover = hover;
    drawHover();
    drawReadout();
  }
  function points() {
    const out = [];
    const [xm, ym, cm] = ["x_metric", "y_metric", "color_metric"].map((t) => model.get(t));
    for (let row = 0; row < L(); row++) {
      for (let hd = 0; hd < nHeads(); hd++)
        out.push({ x: value(xm, row, hd), y: value(ym, row, hd), c: value(cm, row, hd), label: headName2(layers()[row], hd) });
    }
    return out;
  }
  function title() {
    const { done = 0, total = 0 } = scan();
    const over = done === total ? `${count(total)} texts` : `the ${count(done)} texts scanned of ${count(total)}`;
    return `every head: mean over ${over}`;
  }
  function drawScatter() {
    const ctx = canvas.getContext("2d");
    const width = Math.max(360, Math.min(680, v.size ?? 600));
    const row = selectedRow();
    state.scene = scatterScene(
      {
        points: points(),
        xLabel: label(model.get("x_metric")),
        yLabel: label(model.get("y_metric")),
        cLabel: label(model.get("color_metric")),
        xDomain: rangeOf(model.get("x_metric")),
        yDomain: rangeOf(model.get("y_metric")),
        scale: colourScale(),
        theme: v.theme,
        width,
        height: Math.round(Math.min(440, Math.max(300, width * 0.66))),
        title: title(),
        selected: row >= 0 ? row * nHeads() + model.get("head") : null
      },
      (text, font) => {
        ctx.font = font;
        return ctx.measureText(text).width;
      }
    );
    canvas.cwScene = state.scene;
    paintCanvas(canvas, state.scene);
    scatter.style.width = `${state.scene.width}px`;
    scatter.style.height = `${state.scene.height}px`;
    drawHover();
  }
  function drawHover() {
    if (model.get("mode") === "grid") {
      const row = selectedRow();
      const marks = (layout) => row >= 0 ? [cellBox(layout, row, model.get("head"), { color: v.theme.accent, width: 2.5, inset: 1 })] : [];
      heatmap.setHighlight({ row: state.hover?.row, col: state.hover?.head, marks });
      return;
    }
    if (!state.scene) return;
    const ops = [];
    const i = state.hover ? state.hover.row * nHeads() + state.hover.head : -1;
    const dot = state.scene.dots.find((d) => d.i === i);
    if (dot) ops.push({ type: "circle", x: dot.x, y: dot.y, r: state.scene.radius + 3, stroke: v.theme.fg, width: 1.5, dash: [3, 2] });
    paintCanvas(overlay, { width: state.scene.width, height: state.scene.height, ops });
  }
  function cellValues(layout) {
    if (layout.cell < 26) return [];
    const cm = model.get("color_metric");
    const sc = colourScale();
    const text = (x) => formatValue(x, 2);
    return cellValueOps(layout, L(), nHeads(), { value: (row, hd) => value(cm, row, hd), text, scale: sc, theme: v.theme });
  }
  function drawGrid() {
    const cm = model.get("color_metric");
    const sc = colourScale();
    heatmap.update({
      rows: L(),
      cols: nHeads(),
      paint: (pixels) => {
        for (let row = 0; row < L(); row++)
          for (let hd = 0; hd < nHeads(); hd++) pixels[row * nHeads() + hd] = packRGBA(...sc.rgb(value(cm, row, hd)));
      },
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: nHeads() }, (_, i) => String(i)),
      title: label(cm),
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: Math.max(160, Math.min(460, Math.max(L(), nHeads()) * 30)),
      marks: cellValues
    });
    drawHover();
  }
  function drawReadout() {
    const shown = state.hover || (selectedRow() >= 0 ? { row: selectedRow(), head: model.get("head") } : null);
    if (!state.values || !shown) {
      readout.textContent = state.values ? "" : "no scan yet";
      return;
    }
    const wanted = [...new Set(["x_metric", "y_metric", "color_metric"].map((t) => model.get(t)))];
    const parts = wanted.map((m) => `${label(m)} ${formatValue(value(m, shown.row, shown.head), 3)}`);
    readout.textContent = `${state.hover ? "" : "selected "}${headName2(layers()[shown.row], shown.head)} · ${parts.join(" · ")}`;
    readout.dataset.cwLayer = String(layers()[shown.row]);
    readout.dataset.cwHead = String(shown.head);
  }
  function drawHint() {
    const d = scan().descriptions || {};
    const traits = model.get("mode") === "grid" ? ["color_metric"] : ["x_metric", "y_metric", "color_metric"];
    const wanted = [...new Set(traits.map((t) => model.get(t)))];
    const missing = state.scene && model.get("mode") !== "grid" ? points().length - state.scene.dots.length : 0;
    const lines = wanted.map((m) => `${label(m)}: ${d[m] || m}`);
    if (missing > 0)
      lines.push(
        `${missing} head${missing > 1 ? "s" : ""} without a value of x or y (no text has a destination the metric is defined on) not drawn`
      );
    hint.replaceChildren(...lines.map((text) => h("div", { text })));
  }
  function drawProgress() {
    const p = model.get("progress") || {};
    const st = model.get("scan_state");
    const total = p.total || scan().total || 0;
    const done = p.done ?? scan().done ?? 0;
    bar.style.width = `${total ? 100 * done / total : 0}%`;
    progressBar.setAttribute("aria-valuemax", String(total));
    progressBar.setAttribute("aria-valuenow", String(done));
    const text = `texts ${count(done)} of ${count(total)}`;
    if (st === "done") progressText.textContent = `scanned ${count(total)} texts`;
    else if (v.standalone) progressText.textContent = `saved with ${text} scanned`;
    else progressText.textContent = st === "running" ? `scanning: ${text}` : `stopped at ${text}`;
    progressBar.hidden = st === "done";
    stopButton.hidden = v.standalone || st === "done";
    stopButton.textContent = st === "running" ? "Stop" : "Resume";
    stopButton.title = st === "running" ? "stop the scan after the batch running (the texts scanned so far stay)" : "continue the scan from where it stopped";
  }
  function syncControls() {
    const ms = metrics();
    xSelect.sync(ms);
    ySelect.sync(ms);
    cSelect.sync(ms);
    const patternMetrics = ms.filter((m) => (scan().pattern_metrics || ms).includes(m));
    exampleMetric.sync(patternMetrics);
    exampleMetric.el.hidden = !patternMetrics.length;
    const grid = model.get("mode") === "grid";
    for (const b of modeButtons) b.setAttribute("aria-pressed", String(b.dataset.mode === model.get("mode")));
    for (const s of [xSelect, ySelect]) {
      s.select.disabled = grid;
      s.select.title = grid ? "the grid shows the colour metric (switch to Scatter for x and y)" : "";
    }
    layerSelect.set(numberOptions(layers()), model.get("layer"));
    headSelect.set(indexOptions(nHeads()), model.get("head"));
  }
  function drawPlot() {
    const grid = model.get("mode") === "grid";
    scatter.hidden = grid || !state.values;
    heatmap.el.hidden = !grid || !state.values;
    if (!state.values) return;
    if (grid) drawGrid();
    else drawScatter();
  }
  function drawExamples() {
    const p = state.examples;
    const want = headName2(model.get("layer"), model.get("head"));
    const held = p ? headName2(p.layer, p.head) : null;
    const metricLabel = label(p?.metric || model.get("example_metric"));
    const stale = p && (held !== want || p.metric !== model.get("example_metric"));
    let note = "";
    if (stale && v.standalone) {
      const by = p.metric !== model.get("example_metric") ? ` by ${label(model.get("example_metric"))}` : "";
      note = `examples of ${want}${by} need the kernel: this page holds ${held}'s by ${metricLabel}`;
    } else if (p && !hasData(p)) note = p.note ? `${held}: ${p.note}` : "";
    examplesNote.textContent = note;
    examplesNote.hidden = !note;
    const showRows = !!(state.stack && p && !(stale && v.standalone));
    rows.hidden = !showRows;
    if (!p) {
      examplesHead.textContent = "";
      return;
    }
    const { total = 0 } = scan();
    const over = p.scanned > 0 && p.scanned < total ? ` (from the ${count(p.scanned)} of ${count(total)} texts scanned then)` : "";
    const colour = "colour: attention from the outlined destination (hover a token for its own row)";
    examplesHead.textContent = `${held}: one text per decile of its per-text ${metricLabel}${over}; ${colour}; click a text to open it`;
    if (stale && !v.standalone) examplesHead.textContent = `${held}'s examples (computing ${want}'s…)`;
    if (!showRows) return;
    const chosen = model.get("example") || [];
    (p.items || []).forEach((item, i) => {
      const row = rows.children[i];
      row?.classList.toggle("cw-ha-example-selected", chosen.length === 2 && chosen[0] === item.text && chosen[1] === item.dest);
      colourStrip(i, state.rowHover?.example === i ? state.rowHover.token : null);
    });
  }
  function buildRows() {
    for (const s of strips) s.destroy();
    strips = [];
    const p = state.examples;
    if (!p || !state.stack) {
      rows.replaceChildren();
      return;
    }
    const items = p.items || [];
    rows.replaceChildren(
      ...items.map((item, i) => {
        const strip = new TokenStrip({
          onHover: (token) => {
            state.rowHover = token == null ? null : { example: i, token };
            colourStrip(i, token);
          }
        });
        strip.setTokens((p.tokens?.[i] || []).slice(0, item.length));
        strip.el.setAttribute("aria-label", `tokens of text ${item.text}`);
        strips.push(strip);
        const labelBox = h("div", { class: "cw-ha-example-label" }, [
          h("span", { class: "cw-ha-decile", text: decileLabel(item.decile) }),
          h("span", {
            class: "cw-ha-value",
            text: formatValue(item.value, 3),
            attrs: { title: `${label(p.metric)} of text ${item.text}` }
          }),
          h("span", { class: "cw-ha-text-index", text: `text ${item.text}` })
        ]);
        return h(
          "div",
          {
            class: "cw-ha-example",
            attrs: { role: "listitem", "data-index": i, "data-text": item.text, "data-dest": item.dest, title: "click to open this text" }
          },
          [labelBox, strip.el]
        );
      })
    );
    drawExamples();
    for (let i = 0; i < strips.length; i++) scrollToDest(i);
  }
  function colourStrip(i, token) {
    const strip = strips[i];
    const item = state.examples?.items?.[i];
    if (!strip || !item || !state.stack) return;
    const from = token ?? item.dest;
    const weights = state.stack.rowValues(i, from).subarray(0, item.length);
    strip.setWeights(weights, tokenScale2(i, from), from, false);
    strip.spans.forEach((span2, j) => {
      span2.classList.toggle("cw-ha-dest", j === item.dest);
    });
  }
  function scrollToDest(i) {
    const strip = strips[i];
    const item = state.examples?.items?.[i];
    const span2 = strip?.spans[item?.dest];
    if (!span2 || strip.el.scrollHeight <= strip.el.clientHeight) return;
    strip.el.scrollTop = Math.max(0, span2.offsetTop - strip.el.clientHeight / 2);
  }
  const inflate = newestInflated();
  function startExamples() {
    const p = model.get("examples");
    const show = (plain) => {
      try {
        state.stack = hasData(plain) ? new CodeStack(plain) : null;
        v.error("", "examples");
      } catch (err) {
        state.stack = null;
        v.error(`could not read the examples: ${err.message}`, "examples");
      }
      state.examples = p && typeof p === "object" && p.layer != null ? p : null;
      state.rowHover = null;
      buildRows();
      drawExamples();
      v.drawn("examples");
    };
    inflate(p, show, (err) => v.error(`could not inflate the examples: ${err.message}`, "examples"));
  }
  function draw() {
    syncControls();
    drawProgress();
    drawPlot();
    drawReadout();
    drawHint();
    drawExamples();
    v.drawn("all");
  }
  function start() {
    const p = scan();
    if (!hasData(p)) {
      state.values = null;
    } else {
      try {
        const [M, nl, nh] = p.shape;
        if (M * nl * nh === 0) throw new RangeError(`scan has shape ${JSON.stringify(p.shape)}`);
        state.values = floatValues(p);
        v.error("", "decode");
      } catch (err) {
        state.values = null;
        v.error(`could not read the scan: ${err.message}`, "decode");
      }
    }
    draw();
  }
  v.onPayloads("scan", start);
  v.on("change:examples", startExamples);
  v.on("change:x_metric change:y_metric change:color_metric change:mode", () => {
    state.hover = null;
    draw();
  });
  v.on("change:layer change:head", () => {
    syncControls();
    drawPlot();
    drawReadout();
    drawExamples();
    v.drawn("select");
  });
  v.on("change:example_metric", () => {
    syncControls();
    drawExamples();
  });
  v.on("change:example", () => {
    drawExamples();
    v.drawn("example");
  });
  v.on("change:progress change:scan_state", () => {
    drawProgress();
    v.drawn("progress");
  });
  startExamples();
  const move = (dl, dh) => {
    const row = selectedRow() + dl;
    const hd = model.get("head") + dh;
    if (row >= 0 && row < L() && hd >= 0 && hd < nHeads()) selectHead({ row, head: hd });
  };
  return {
    start,
    draw,
    size: (width) => Math.max(360, Math.min(680, width - 20)),
    busy: () => model.get("busy") ? `computing the examples of ${headName2(model.get("layer"), model.get("head"))}…` : "",
    keys: {
      ArrowRight: () => move(0, 1),
      ArrowLeft: () => move(0, -1),
      ArrowDown: () => move(1, 0),
      ArrowUp: () => move(-1, 0)
    },
    marks: () => ({
      layer: model.get("layer"),
      head: model.get("head"),
      mode: model.get("mode"),
      x: model.get("x_metric"),
      y: model.get("y_metric"),
      color: model.get("color_metric"),
      points: state.scene && model.get("mode") !== "grid" ? state.scene.dots.length : "",
      examples: rows.hidden ? 0 : (state.examples?.items || []).length,
      examplesHead: state.examples ? headName2(state.examples.layer, state.examples.head) : "",
      example: (model.get("example") || []).join(","),
      scanState: model.get("scan_state"),
      done: scan().done ?? "",
      total: scan().total ?? ""
    })
  };
});

// js/views/headscores.js
defineView("headscores", (v) => {
  const { model } = v;
  const state = { values: null, L: 0, H: 0, hover: null };
  const info = () => model.get("info") || {};
  const scores = () => v.payloads("scores")?.scores || {};
  const kinds = () => scores().kinds || model.get("kinds") || [];
  const layers = () => scores().layers || info().attn_layers || [];
  const label = (k) => info().labels?.[k] || k;
  const kindIndex = () => Math.max(0, kinds().indexOf(model.get("kind")));
  const computed = (k) => (scores().computed || []).includes(k);
  const value = (k, l, hd) => state.values[(k * state.L + l) * state.H + hd];
  const selectedRow = () => layers().indexOf(model.get("layer"));
  const scaleSpec = (k) => (scores().scales || [])[k] || ["sequential", [0, 1]];
  const scale = (k = kindIndex()) => makeScale(scaleSpec(k)[0] === "diverging" ? "diverging" : "sequential", { dark: v.theme.dark, domain: scaleSpec(k)[1] });
  const shade = (dark, light) => packRGBA(...v.theme.dark ? dark : light);
  const hatch = (r, c) => (r + c) % 2 ? shade([60, 60, 64], [226, 226, 230]) : shade([44, 44, 48], [240, 240, 243]);
  const kindSelect = h("select", { class: "cw-select", attrs: { "aria-label": "score" } });
  v.listen(kindSelect, "change", () => v.set({ kind: kindSelect.value }));
  const kindField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Score" }), kindSelect]);
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const buttons = saveButtons({
    what: "grid",
    picture: () => heatmap.scene,
    name: () => `headscores_${model.get("kind")}`,
    background: () => v.theme.bgCss
  });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    kindField,
    layerSelect.el,
    headSelect.el,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons
  ]);
  const thumbs = v.own(
    new ThumbGrid({
      label: "score kinds",
      size: 56,
      draw: drawThumb,
      onClick: (i) => kinds()[i] && v.set({ kind: kinds()[i] })
    })
  );
  const heatmap = v.own(
    new Heatmap({
      label: "head scores",
      onHover: (hit) => {
        state.hover = hit;
        drawMarks();
      },
      onClick: (hit) => v.set({ layer: layers()[hit.row], head: hit.col })
    })
  );
  const readout = h("div", { class: "cw-readout cw-hs-readout", attrs: { "aria-live": "polite" } });
  const note = h("div", { class: "cw-hint" });
  const progress = progressRow(v);
  v.root.append(toolbar, progress.el, v.banner, thumbs.el, heatmap.el, readout, note);
  function paintKind(k, pixels, sc) {
    const { L, H } = state;
    const done = computed(kinds()[k]);
    for (let l = 0; l < L; l++) {
      for (let hd = 0; hd < H; hd++) pixels[l * H + hd] = done ? packRGBA(...sc.rgb(value(k, l, hd))) : hatch(l, hd);
    }
  }
  const scratch2 = document.createElement("canvas");
  function drawThumb(i, ctx, px) {
    if (!state.values) return;
    const { L, H } = state;
    scratch2.width = H;
    scratch2.height = L;
    const sctx = scratch2.getContext("2d");
    const image = sctx.createImageData(H, L);
    paintKind(i, new Uint32Array(image.data.buffer), scale(i));
    sctx.putImageData(image, 0, 0);
    const cell = px / Math.max(L, H);
    const x0 = (px - cell * H) / 2;
    const y0 = (px - cell * L) / 2;
    ctx.fillStyle = v.theme.bgCss;
    ctx.fillRect(0, 0, px, px);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(scratch2, x0, y0, cell * H, cell * L);
    const row = selectedRow();
    if (row >= 0) {
      ctx.strokeStyle = v.theme.accent;
      ctx.lineWidth = Math.max(1, px / 40);
      ctx.strokeRect(x0 + model.get("head") * cell, y0 + row * cell, cell, cell);
    }
  }
  function drawThumbs() {
    const ks = kinds();
    thumbs.setItems(ks.map((k) => computed(k) ? label(k) : `${label(k)} (click to compute)`));
    thumbs.items.forEach(({ el: item }, i) => {
      item.setAttribute("title", info().descriptions?.[ks[i]] || ks[i]);
    });
    thumbs.mark(kindIndex(), null, false);
  }
  function cellValues(layout) {
    const k = kindIndex();
    if (layout.cell < 24 || !computed(kinds()[k])) return [];
    return cellValueOps(layout, state.L, state.H, { value: (l, hd) => value(k, l, hd), text: formatCell, scale: scale(), theme: v.theme });
  }
  function drawMain() {
    if (!state.values) return;
    const { L, H } = state;
    const kind = kinds()[kindIndex()];
    const sc = scale();
    heatmap.update({
      rows: L,
      cols: H,
      paint: (pixels) => paintKind(kindIndex(), pixels, sc),
      rowLabels: layers().map(String),
      colLabels: Array.from({ length: H }, (_, i) => String(i)),
      // labels beyond what fits: the selected layer and head, then the highest scores
      ...axisPriority(L, H, (l, hd) => computed(kind) ? value(kindIndex(), l, hd) : Number.NaN),
      keepRows: selectedRow(),
      keepCols: model.get("head"),
      title: `${label(kind)} score${computed(kind) ? "" : " (not computed yet)"}`,
      yTitle: "layer ↓",
      xTitle: "head →",
      scale: sc,
      theme: v.theme,
      // 28 px a head, 160 to 420 px, more (up to 720) so that each head keeps 10 px and its label
      maxPlot: Math.max(160, Math.min(Math.max(420, 10 * Math.max(L, H)), 28 * Math.max(L, H), 720)),
      marks: cellValues
    });
    drawMarks();
  }
  function drawMarks() {
    const row = selectedRow();
    const selected = (layout) => row >= 0 ? [cellBox(layout, row, model.get("head"), { color: v.theme.accent, width: 2.5, inset: 1 })] : [];
    heatmap.setHighlight({ row: state.hover?.row, col: state.hover?.col, marks: selected });
    drawReadout();
  }
  function drawReadout() {
    if (!state.values) {
      readout.textContent = "no scores yet";
      return;
    }
    const hover = state.hover;
    const l = hover ? hover.row : selectedRow();
    const hd = hover ? hover.col : model.get("head");
    if (l < 0) {
      readout.textContent = "";
      return;
    }
    const current = model.get("kind");
    const parts = kinds().map((k, i) => {
      if (!computed(k)) return `${label(k)} —`;
      const text = `${label(k)} ${formatValue(value(i, l, hd), 3)}`;
      return k === current ? `[${text}]` : text;
    });
    readout.textContent = `${hover ? "" : "selected "}L${layers()[l]} H${hd} · ${parts.join(" · ")}`;
    readout.dataset.cwLayer = String(layers()[l]);
    readout.dataset.cwHead = String(hd);
  }
  function drawNote() {
    const k = model.get("kind");
    const desc = info().descriptions?.[k] || "";
    const [kindOfScale, [low, high]] = scaleSpec(kindIndex());
    const bounds = `${formatValue(low).replace("-", "−")} to ${formatValue(high)}`;
    const range = kindOfScale === "diverging" ? `colour scale ${bounds} (0 neutral)` : `colour scale ${bounds}`;
    note.textContent = `${label(k)}: ${desc} · ${range} · attention scores on ${info().ran_on || "random tokens"}`;
  }
  function syncControls() {
    const ks = kinds();
    if (kindSelect.dataset.options !== ks.join("|")) {
      kindSelect.replaceChildren(...ks.map((k) => h("option", { value: k, text: label(k), attrs: { "data-control": `kind:${k}` } })));
      kindSelect.dataset.options = ks.join("|");
    }
    kindSelect.value = model.get("kind");
    layerSelect.set(numberOptions(layers()), model.get("layer"));
    headSelect.set(indexOptions(info().n_heads || 1), model.get("head"));
  }
  function draw() {
    syncControls();
    drawThumbs();
    drawMain();
    drawNote();
    const k = model.get("kind");
    const unsaved = v.standalone && state.values && !computed(k);
    v.error(unsaved ? `${label(k)} scores were not computed when this page was saved` : "", "unsaved");
    v.drawn("all");
  }
  function start() {
    const p = scores();
    if (!hasData(p)) {
      state.values = null;
      syncControls();
      drawReadout();
      return;
    }
    try {
      const [K, L, H] = p.shape;
      const values = floatValues(p);
      if (!L || K * L * H === 0) throw new RangeError(`scores have shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { values, L, H });
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      v.error(`could not read the scores: ${err.message}`, "decode");
    }
    draw();
  }
  v.onPayloads("scores", start);
  v.on("change:kind", () => {
    state.hover = null;
    draw();
    v.refresh();
  });
  v.on("change:layer change:head", () => {
    syncControls();
    thumbs.repaint();
    if (state.values)
      drawMain();
    else drawMarks();
    v.drawn("select");
  });
  const move = (trait, values, current, d) => {
    const next = current + d;
    if (next >= 0 && next < values.length) v.set({ [trait]: values[next] });
  };
  const heads = () => Array.from({ length: info().n_heads || 1 }, (_, i) => i);
  return {
    start,
    draw,
    busy: () => model.get("busy") ? `computing ${label(model.get("kind"))} scores…` : "",
    keys: {
      ArrowRight: () => move("head", heads(), model.get("head"), 1),
      ArrowLeft: () => move("head", heads(), model.get("head"), -1),
      ArrowDown: () => move("layer", layers(), selectedRow(), 1),
      ArrowUp: () => move("layer", layers(), selectedRow(), -1)
    },
    marks: () => ({
      score: model.get("kind"),
      layer: model.get("layer"),
      head: model.get("head"),
      computed: (scores().computed || []).join(",")
    })
  };
});

// js/lib/selection.js
var CellSelection = class {
  /** changed(): redraw the marks and the read-out. */
  constructor(changed) {
    this.hover = null;
    this.lock = null;
    this.changed = changed;
  }
  /** The locked cell, else the hovered one: {which, row, col} or null. */
  get current() {
    return this.lock || this.hover;
  }
  /** onHover / onClick for the Heatmap of picture `which`. */
  on(which) {
    return {
      onHover: (hit) => {
        this.hover = hit ? { which, ...hit } : null;
        this.changed();
      },
      onClick: (hit) => {
        const same = this.lock?.which === which && this.lock.row === hit.row && this.lock.col === hit.col;
        this.lock = same ? null : { which, ...hit };
        this.changed();
      }
    };
  }
  /** Heatmap.setHighlight's marks for picture `which`. */
  highlight(which) {
    const hv = this.hover?.which === which ? this.hover : null;
    const lk = this.lock?.which === which ? this.lock : null;
    return { row: hv?.row, col: hv?.col, lockedRow: lk?.row, lockedCol: lk?.col };
  }
  /** Forget both (new data); with `keep(cell)`, keep a lock it accepts. */
  reset(keep = () => false) {
    this.hover = null;
    if (this.lock && !keep(this.lock)) this.lock = null;
  }
  /** Escape: release the lock. */
  release() {
    this.lock = null;
    this.changed();
  }
};

// js/views/ov.js
var percent = (x) => x == null ? null : `${(100 * x).toFixed(1)} %`;
defineView("ov", (v) => {
  const { model } = v;
  const state = { eigHover: null, stack: null, plane: null };
  const cells = new CellSelection(() => drawSelection());
  const head = () => model.get("head");
  const shown = () => v.payloads("ov", "eigenvalues");
  const layer = () => shown()?.ov.layer ?? model.get("layer");
  const held = heldLayer(v, { held: () => shown()?.ov.layer, parts: () => [main, readout, toolbar.criterion], what: "OV circuit" });
  const toolbar = headToolbar(v, {
    layer: () => held.stale ? model.get("layer") : layer(),
    onHead: (hd) => setHead(v, hd) || draw(),
    save: { what: "OV view", picture, name: () => `ov_L${layer()}H${head()}` },
    criterion: true
  });
  const heatmap = v.own(new Heatmap({ label: "full OV circuit", ...cells.on("ov") }));
  const planeCanvas = h("canvas", { class: "cw-plane", attrs: { role: "img", "aria-label": "eigenvalues on the complex plane" } });
  const stat = (label, title) => {
    const value = h("span", { class: "cw-stat-value" });
    return { value, row: h("div", { class: "cw-stat", attrs: { title } }, [h("span", { class: "cw-stat-label", text: label }), value]) };
  };
  const copying = stat(
    "copying score",
    "Σλ / Σ|λ| over the eigenvalues of W_E W_V W_O W_U: 1 means the head copies the token it attends to"
  );
  const top1 = stat("top-1 accuracy", "share of all tokens whose own logit is the largest of their row of the full OV circuit");
  const top5 = stat("top-5 accuracy", "share of all tokens whose own logit is among the 5 largest of their row");
  const eigNote = h("div", { class: "cw-hint cw-eig-note" });
  const side = h("div", { class: "cw-ov-side" }, [
    planeCanvas,
    eigNote,
    h("div", { class: "cw-stats" }, [copying.row, top1.row, top5.row])
  ]);
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const caption = h("div", { class: "cw-hint cw-ov-caption" });
  const main = h("div", { class: "cw-ov-main" }, [h("div", { class: "cw-ov-map" }, [heatmap.el, caption]), side]);
  v.root.append(toolbar.el, v.banner, toolbar.criterion, held.el, main, readout);
  function eigenPoints() {
    const eig = shown()?.eigenvalues;
    if (!hasData(eig)) return [];
    const [nHeads, d] = eig.shape;
    if (head() >= nHeads) return [];
    const values = floatValues(eig);
    return Array.from({ length: d }, (_, i) => [values[(head() * d + i) * 2], values[(head() * d + i) * 2 + 1]]);
  }
  function draw() {
    const t0 = performance.now();
    toolbar.headSelect.select.value = String(head());
    try {
      state.stack = headStack(shown()?.ov, head());
      v.error("", "decode");
    } catch (err) {
      state.stack = null;
      v.error(`could not read the OV payload: ${err.message}`, "decode");
    }
    const stack = state.stack;
    if (!stack) return;
    const labels = shown().ov.labels || [];
    caption.textContent = shown().ov.caption || "";
    const scale = makeScale("diverging", { dark: v.theme.dark, domain: [stack.lo, stack.hi] });
    const lut = scale.lut(stack);
    heatmap.update({
      rows: stack.rows,
      cols: stack.cols,
      paint: (pixels) => stack.paint(0, lut, pixels, 0),
      rowLabels: labels,
      colLabels: labels,
      title: `Full OV circuit, layer ${layer()} head ${head()}`,
      yTitle: "source ↓",
      xTitle: "out (logit) →",
      scale,
      theme: v.theme,
      maxPlot: v.size,
      marks: (layout) => diagonalOps(layout, Math.min(stack.rows, stack.cols), v.theme)
    });
    drawPlaneAndStats();
    drawSelection();
    v.drawn("ov", t0);
  }
  function drawPlaneAndStats() {
    const points = eigenPoints();
    state.plane = planeScene({ points, size: 250, theme: v.theme, title: "Eigenvalues of W_E W_OV W_U", ring: state.eigHover?.i });
    paintCanvas(planeCanvas, state.plane);
    const n = state.plane.dots.length;
    eigNote.textContent = n ? `${n} eigenvalues (d_head × d_head form), shown as λ / max|λ|, max|λ| = ${formatValue(state.plane.scale)}` : "no eigenvalues";
    const stats = (model.get("stats") || [])[head()] || {};
    const current = stats.layer === layer();
    const copy = shown()?.eigenvalues.copying?.[head()] ?? (current ? stats.copying : null);
    copying.value.textContent = copy == null ? "n/a" : formatValue(copy, 4);
    copying.value.dataset.value = copy == null ? "" : String(copy);
    const pending = v.standalone ? "not computed when saved" : model.get("progress") ? "computing…" : "n/a";
    for (const [item, key] of [
      [top1, "top1"],
      [top5, "top5"]
    ]) {
      const value = current ? stats[key] : null;
      item.value.textContent = percent(value) ?? pending;
      item.value.dataset.value = value == null ? "" : String(value);
    }
  }
  function drawSelection() {
    const stack = state.stack;
    const sel = cells.current;
    heatmap.setHighlight(cells.highlight("ov"));
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (state.eigHover) {
      const [re, im] = state.eigHover.point;
      parts.push(
        `λ${state.eigHover.i + 1} = ${formatValue(re)} ${im < 0 ? "−" : "+"} ${formatValue(Math.abs(im))}i`,
        `|λ| = ${formatValue(Math.hypot(re, im))}`
      );
    } else if (stack && sel && sel.row < stack.rows && sel.col < stack.cols) {
      const { labels = [], ids = [] } = shown().ov;
      const values = model.get("values");
      const exact = sameRevision(values, shown().ov) ? exactValue(values, head(), sel.row, sel.col) : null;
      const value = exact == null ? `≈${formatValue(stack.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      const tag = sel.row === sel.col ? " (diagonal: copying)" : "";
      parts.push(
        `source ${quote(labels[sel.row] ?? sel.row)} (id ${ids[sel.row]}) → out ${quote(labels[sel.col] ?? sel.col)} (id ${ids[sel.col]})`,
        `logit ${value}${tag}`
      );
      if (exact != null) readout.dataset.value = String(exact);
      readout.dataset.row = String(sel.row);
      readout.dataset.col = String(sel.col);
    } else {
      parts.push(stack ? `${stack.rows} tokens · hover a cell (click to lock) or an eigenvalue` : "no picture yet");
    }
    if (cells.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }
  function picture() {
    return heatmap.scene && state.plane ? composeScenes([heatmap.scene, state.plane]) : null;
  }
  const hoverEigen = (next) => {
    if (next?.i === state.eigHover?.i) return;
    state.eigHover = next;
    drawPlaneAndStats();
    drawSelection();
  };
  v.listen(planeCanvas, "mousemove", (e) => {
    if (!state.plane) return;
    const box = planeCanvas.getBoundingClientRect();
    const dot = nearestDot(state.plane, e.clientX - box.left, e.clientY - box.top);
    hoverEigen(dot ? { i: dot.i, point: eigenPoints()[dot.i] } : null);
  });
  v.listen(planeCanvas, "mouseleave", () => hoverEigen(null));
  function start() {
    const n = shown()?.ov.shape?.[1] ?? 0;
    cells.reset((lock) => lock.row < n && lock.col < n);
    held.check();
    toolbar.sync();
    draw();
  }
  v.onPayloads("ov eigenvalues", start);
  v.on("change:head", draw);
  v.on("change:values", drawSelection);
  v.on("change:stats", drawPlaneAndStats);
  v.on("change:progress", () => {
    v.refresh();
    drawPlaneAndStats();
  });
  v.on("change:layer change:info change:token_criterion", () => {
    held.check();
    toolbar.sync();
  });
  return {
    start,
    draw,
    size: (width) => Math.max(200, Math.min(460, width - 420)),
    busy: () => model.get("progress") || (model.get("busy") ? "computing…" : ""),
    keys: {
      ...headKeys(v),
      Escape: () => cells.release()
    },
    marks: () => ({
      head: head(),
      layer: held.stale ? model.get("layer") : layer(),
      held: held.stale ? String(layer()) : "",
      tokens: state.stack?.rows ?? 0
    })
  };
});

// js/lib/verified.js
function verifiedValue(verified, layer, hd, pos = null) {
  const heads = verified?.heads || [];
  const i = heads.findIndex(([vl, vh]) => vl === layer && vh === hd);
  if (i < 0) return null;
  const pick = (x) => Array.isArray(x) ? pos == null ? null : x[pos] : x;
  const value = pick(verified.values?.[i]);
  if (value == null) return null;
  const normalised = pick(verified.normalised?.[i]);
  return { value, normalised: normalised ?? Number.NaN };
}

// js/views/patching.js
var SITES = ["out", "q", "k", "v", "pattern"];
var METHODS2 = { exact: "exact (a run per head)", attribution: "attribution (estimates)" };
var ESTIMATORS = { atp: "AtP", "atp*": "AtP*" };
defineView("patching", (v) => {
  const { model } = v;
  const state = { values: null, L: 0, H: 0, seq: 1, hover: null };
  const info = () => model.get("info") || {};
  const payload = () => v.payloads("patching")?.patching || {};
  const layers = () => payload().layers || info().attn_layers || [];
  const byPosition = () => !!payload().by_position;
  const shown = () => model.get("normalised") ? 1 : 0;
  const estimating = () => payload().method === "attribution";
  const value = (k, l, hd, pos = 0) => state.values[((k * state.L + l) * state.H + hd) * state.seq + pos];
  const selectedRow = () => layers().indexOf(model.get("layer"));
  const cellOf2 = (r, c) => byPosition() ? [Math.floor(r / state.H), r % state.H, c] : [r, c, 0];
  const select = (label, trait, options, title) => {
    const el = h(
      "select",
      { class: "cw-select", attrs: { "aria-label": label, "data-control": trait } },
      Object.entries(options).map(([value2, text]) => h("option", { value: value2, text }))
    );
    v.listen(el, "change", () => v.set({ [trait]: el.value }));
    const field = h("label", { class: "cw-field", title }, [h("span", { class: "cw-field-label", text: label }), el]);
    return { el, field };
  };
  const methodSelect = select("Method", "method", METHODS2, "exact patching, or attribution patching's estimates from gradients");
  const estimatorSelect = select(
    "Estimator",
    "estimator",
    ESTIMATORS,
    "AtP: first order; AtP*: the softmax of patched queries and keys computed, GradDrop ranking"
  );
  const siteSelect = h(
    "select",
    { class: "cw-select", attrs: { "aria-label": "site", "data-control": "site" } },
    SITES.map((s) => h("option", { value: s, text: s }))
  );
  v.listen(siteSelect, "change", () => v.set({ site: siteSelect.value }));
  const siteField = h("label", { class: "cw-field", title: "the activation patched from the clean run" }, [
    h("span", { class: "cw-field-label", text: "Site" }),
    siteSelect
  ]);
  const checkbox = (label, trait, title) => {
    const box = h("input", { type: "checkbox", attrs: { "aria-label": label } });
    v.listen(box, "change", () => v.set({ [trait]: box.checked }));
    return { box, el: h("label", { class: "cw-field", title }, [box, h("span", { class: "cw-field-label", text: label })]) };
  };
  const positionBox = checkbox("by position", "by_position", "patch one head at one position at a time");
  const normalBox = checkbox("normalised", "normalised", "(patched − corrupted) / (clean − corrupted): 1 = the clean metric restored");
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  if (v.standalone) siteSelect.disabled = positionBox.box.disabled = methodSelect.el.disabled = estimatorSelect.el.disabled = true;
  const buttons = saveButtons({
    what: "grid",
    picture: () => grid.scene,
    name: () => `patching_${payload().site || "out"}${byPosition() ? "_by_position" : ""}`,
    background: () => v.theme.bgCss
  });
  const toolbar = h("div", { class: "cw-toolbar-row" }, [
    methodSelect.field,
    estimatorSelect.field,
    siteField,
    positionBox.el,
    normalBox.el,
    layerSelect.el,
    headSelect.el,
    v.busyMark,
    h("span", { class: "cw-spacer" }),
    ...buttons
  ]);
  const caption = h("div", { class: "cw-hint cw-pt-caption" });
  const note = h("div", { class: "cw-pt-note", attrs: { role: "note" } });
  note.hidden = true;
  const grid = v.own(
    new Heatmap({
      label: "activation patching",
      onHover: (hit) => {
        state.hover = hit;
        drawMarks();
      },
      onClick: (hit) => {
        const [l, hd] = cellOf2(hit.row, hit.col);
        if (layers()[l] != null) v.set({ layer: layers()[l], head: hd });
      }
    })
  );
  const readout = h("div", { class: "cw-readout cw-pt-readout", attrs: { "aria-live": "polite" } });
  v.root.append(toolbar, v.banner, caption, note, grid.el, readout);
  function scale(all) {
    const p = payload();
    const domain = shown() ? effectDomain(all, 0, 1) : effectDomain(all, p.corrupted_value, p.clean_value - p.corrupted_value);
    return makeScale("diverging", { dark: v.theme.dark, domain });
  }
  function drawGrid() {
    const p = payload();
    const { L, H, seq } = state;
    const k = shown();
    const rows = byPosition() ? L * H : L;
    const cols = byPosition() ? seq : H;
    const all = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) all[r * cols + c] = value(k, ...cellOf2(r, c));
    const sc = scale(all);
    const what = k ? "normalised" : info().metric || "metric";
    grid.update({
      rows,
      cols,
      paint: (pixels) => {
        for (let i = 0; i < all.length; i++) pixels[i] = packRGBA(...sc.rgb(all[i]));
      },
      rowLabels: byPosition() ? Array.from({ length: rows }, (_, r) => `L${layers()[Math.floor(r / H)]}H${r % H}`) : layers().map(String),
      colLabels: byPosition() ? p.labels || [] : Array.from({ length: H }, (_, i) => String(i)),
      title: `${what} · ${p.site} patched${byPosition() ? " one position at a time" : ""}`,
      yTitle: byPosition() ? "head ↓" : "layer ↓",
      xTitle: byPosition() ? "position →" : "head →",
      scale: sc,
      theme: v.theme,
      maxPlot: byPosition() ? v.size : Math.max(200, Math.min(420, Math.max(L, H) * 48)),
      marks: (layout) => {
        if (byPosition() || layout.cell < 24) return [];
        return cellValueOps(layout, L, H, { value: (l, hd) => value(k, l, hd), text: formatCell, scale: sc, theme: v.theme });
      }
    });
    grid.el.dataset.site = p.site;
    grid.el.dataset.domain = sc.domain.join(" ");
    grid.el.dataset.byPosition = String(byPosition());
    drawMarks();
  }
  function drawMarks() {
    const row = selectedRow();
    const hd = model.get("head");
    if (byPosition()) {
      grid.setHighlight({ row: state.hover?.row, col: state.hover?.col, lockedRow: row >= 0 ? row * state.H + hd : null });
    } else {
      const checked = estimating() ? model.get("verified")?.heads || [] : [];
      const marks = (layout) => [
        ...checked.map(([vl, vh]) => [layers().indexOf(vl), vh]).filter(([l]) => l >= 0).map(([l, vh]) => cellBox(layout, l, vh, { color: v.theme.fg, width: 1.5, inset: 4 })),
        ...row >= 0 ? [cellBox(layout, row, hd, { color: v.theme.accent, width: 2.5, inset: 1 })] : []
      ];
      grid.setHighlight({ row: state.hover?.row, col: state.hover?.col, marks });
    }
    drawReadout();
  }
  function drawReadout() {
    if (!state.values) {
      readout.textContent = "";
      return;
    }
    const p = payload();
    const hover = state.hover;
    let l;
    let hd;
    let pos = null;
    if (hover) [l, hd, pos] = cellOf2(hover.row, hover.col);
    else [l, hd] = [selectedRow(), model.get("head")];
    if (l < 0 || l >= state.L) {
      readout.textContent = "";
      return;
    }
    const at = byPosition() && pos != null ? ` at position ${pos} ${quote(p.labels?.[pos] ?? pos)} (corrupted ${quote(p.corrupted_labels?.[pos] ?? "")})` : "";
    const raw = value(0, l, hd, pos ?? 0);
    const norm = value(1, l, hd, pos ?? 0);
    const lead = `${hover ? "" : "selected "}L${layers()[l]} H${hd}`;
    const word = estimating() ? `${ESTIMATORS[p.estimator] || p.estimator} estimate` : "patched";
    let values = byPosition() && pos == null ? "hover a position for its values" : `${word} ${formatValue(raw)} · normalised ${formatValue(norm, 3)}`;
    const exact = estimating() ? verifiedValue(model.get("verified"), layers()[l], hd, byPosition() ? pos : null) : null;
    if (exact) values += ` · exact ${formatValue(exact.value)} (normalised ${formatValue(exact.normalised, 3)})`;
    else if (estimating() && !(byPosition() && pos == null)) values += " · click the head for its exact value";
    const ends = `clean ${formatValue(p.clean_value)}, corrupted ${formatValue(p.corrupted_value)}`;
    readout.textContent = `${lead}${at} · ${p.site} · ${values} (${ends})`;
    Object.assign(readout.dataset, {
      layer: String(layers()[l]),
      head: String(hd),
      value: String(raw),
      normalised: String(norm),
      exact: exact ? String(exact.value) : ""
    });
  }
  function drawText() {
    const p = payload();
    const i = info();
    const estimate = estimating() ? [
      `Estimated by ${ESTIMATORS[p.estimator] || p.estimator} (attribution patching: one run with gradients, one without),`,
      "not run per head; click a head to patch it exactly and see both (checked heads are ringed)."
    ] : [];
    caption.textContent = [
      `Each head's ${i.site_labels?.[p.site] || p.site} taken from the clean run into the corrupted one;`,
      `the ${i.metric} of that run (clean ${formatValue(p.clean_value)}, corrupted ${formatValue(p.corrupted_value)}).`,
      ...estimate,
      "Normalised: (patched − corrupted) / (clean − corrupted), 1 = the head alone restores the clean metric.",
      `Colours centred on ${model.get("normalised") ? "0" : "the corrupted value"}. Prompts: ${i.ran_on}.`
    ].join(" ");
    const grouped = p.grouped ? [
      `K/V heads are grouped (${i.n_kv_heads} K/V heads for ${i.n_heads} query heads):`,
      `patching ${p.site} of a head patches its whole group, so the heads of a group show one shared value.`,
      `Patch "pattern" for one head's own use.`
    ].join(" ") : "";
    const unnormal = model.get("normalised") && p.not_normalised ? `Not normalised: ${p.not_normalised}.` : "";
    note.textContent = [grouped, unnormal].filter(Boolean).join(" ");
    note.hidden = !note.textContent;
    note.dataset.grouped = String(!!p.grouped);
  }
  function syncControls() {
    methodSelect.el.value = model.get("method");
    estimatorSelect.el.value = model.get("estimator");
    estimatorSelect.field.hidden = model.get("method") !== "attribution";
    siteSelect.value = model.get("site");
    positionBox.box.checked = !!model.get("by_position");
    normalBox.box.checked = !!model.get("normalised");
    layerSelect.set(numberOptions(layers()), model.get("layer"));
    headSelect.set(indexOptions(info().n_heads || 1), model.get("head"));
  }
  function draw() {
    syncControls();
    if (!state.values) return;
    const t0 = performance.now();
    drawText();
    drawGrid();
    v.drawn("all", t0);
  }
  function start() {
    const p = payload();
    if (!hasData(p)) {
      syncControls();
      return;
    }
    try {
      const [two, L, H, seq = 1] = p.shape;
      if (two !== 2 || !L || !H) throw new RangeError(`patching has shape ${JSON.stringify(p.shape)}`);
      Object.assign(state, { values: floatValues(p), L, H, seq, hover: null });
      v.error("", "decode");
    } catch (err) {
      state.values = null;
      v.error(`could not read the patching values: ${err.message}`, "decode");
    }
    draw();
  }
  v.onPayloads("patching", start);
  v.on("change:normalised", draw);
  v.on("change:site change:by_position change:method change:estimator", syncControls);
  v.on("change:verified", () => {
    if (!state.values) return;
    drawMarks();
    v.drawn("select");
  });
  v.on("change:layer change:head", () => {
    syncControls();
    if (!state.values) return;
    drawMarks();
    v.drawn("select");
  });
  v.on("change:progress", v.refresh);
  const move = (dl, dh) => () => {
    const row = selectedRow() + dl;
    const hd = model.get("head") + dh;
    if (row >= 0 && row < state.L && hd >= 0 && hd < state.H) v.set({ layer: layers()[row], head: hd });
  };
  return {
    start,
    draw,
    size: (width) => Math.max(200, Math.min(720, width - 150)),
    busy: () => model.get("progress") || (model.get("busy") ? "computing…" : ""),
    keys: { ArrowRight: move(0, 1), ArrowLeft: move(0, -1), ArrowDown: move(1, 0), ArrowUp: move(-1, 0) },
    marks: () => ({
      method: payload().method ?? "",
      verified: (model.get("verified")?.heads || []).length,
      site: payload().site ?? "",
      byPosition: byPosition(),
      normalised: !!model.get("normalised"),
      grouped: !!payload().grouped,
      layer: model.get("layer"),
      head: model.get("head"),
      revision: payload().revision ?? ""
    })
  };
});

// js/views/qk.js
defineView("qk", (v) => {
  const { model } = v;
  const state = { tokens: null, positions: null };
  const cells = new CellSelection(() => drawSelection());
  const head = () => model.get("head");
  const shown = () => v.payloads("qk", "positional");
  const layer = () => shown()?.qk.layer ?? model.get("layer");
  const held = heldLayer(v, { held: () => shown()?.qk.layer, parts: () => [main, readout, toolbar.criterion], what: "QK circuit" });
  const toolbar = headToolbar(v, {
    layer: () => held.stale ? model.get("layer") : layer(),
    onHead: (hd) => setHead(v, hd) || draw(),
    save: { what: "QK view", picture, name: () => `qk_L${layer()}H${head()}` },
    criterion: true
  });
  const tokenMap = v.own(new Heatmap({ label: "full QK circuit", ...cells.on("tokens") }));
  const posMap = v.own(new Heatmap({ label: "positional QK pattern", ...cells.on("positions") }));
  const note = h("div", { class: "cw-qk-note", attrs: { role: "note" } });
  note.hidden = true;
  const posCaption = h("div", { class: "cw-hint cw-qk-caption" });
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  const tokenCaption = h("div", { class: "cw-hint cw-qk-caption" });
  const main = h("div", { class: "cw-qk-main" }, [
    h("div", { class: "cw-qk-tokens" }, [tokenMap.el, tokenCaption]),
    h("div", { class: "cw-qk-pos" }, [posMap.el, posCaption, note])
  ]);
  v.root.append(toolbar.el, v.banner, toolbar.criterion, held.el, main, readout);
  function draw() {
    const t0 = performance.now();
    toolbar.headSelect.select.value = String(head());
    const set = shown();
    try {
      state.tokens = set && headStack(set.qk, head());
      state.positions = set && hasData(set.positional) ? new CodeStack(set.positional) : null;
      v.error("", "decode");
    } catch (err) {
      state.tokens = state.positions = null;
      v.error(`could not read the QK payload: ${err.message}`, "decode");
    }
    const { tokens, positions } = state;
    if (!tokens) return;
    const labels = set.qk.labels || [];
    const diverging = makeScale("diverging", { dark: v.theme.dark, domain: [tokens.lo, tokens.hi] });
    const lut = diverging.lut(tokens);
    tokenMap.update({
      rows: tokens.rows,
      cols: tokens.cols,
      paint: (pixels) => tokens.paint(0, lut, pixels, 0),
      rowLabels: labels,
      colLabels: labels,
      title: `Full QK circuit (attention logits), layer ${layer()} head ${head()}`,
      yTitle: "destination (query) ↓",
      xTitle: "source (key) →",
      scale: diverging,
      theme: v.theme,
      maxPlot: v.size
    });
    const noteText2 = set.positional.note || "";
    note.textContent = noteText2;
    note.hidden = !noteText2;
    tokenCaption.textContent = set.qk.caption || "";
    posCaption.textContent = positions ? set.positional.caption || "" : "";
    posMap.el.hidden = !positions || head() >= positions.count;
    if (!posMap.el.hidden) {
      const c = colorScaleOf(set.positional.scale, head());
      const seq = makeScale("sequential", { dark: v.theme.dark, ticks: c.ticks, caption: c.caption });
      const plut = seq.lut(positions);
      const names = Array.from({ length: positions.rows }, (_, i) => String(i));
      posMap.update({
        rows: positions.rows,
        cols: positions.cols,
        paint: (pixels) => positions.paint(head(), plut, pixels, plut[positions.nanCode]),
        rowLabels: names,
        colLabels: names,
        title: `Attention from positions alone, head ${head()}`,
        yTitle: "destination pos ↓",
        xTitle: "source pos →",
        scale: seq,
        theme: v.theme,
        maxPlot: v.size
      });
    }
    drawSelection();
    v.drawn("qk", t0);
  }
  function drawSelection() {
    if (tokenMap.scene) tokenMap.setHighlight(cells.highlight("tokens"));
    if (posMap.scene) posMap.setHighlight(cells.highlight("positions"));
    const set = shown();
    const { tokens, positions } = state;
    const sel = cells.current;
    const parts = [`L${layer()} H${head()}`];
    delete readout.dataset.value;
    if (sel?.which === "tokens" && tokens && sel.row < tokens.rows && sel.col < tokens.cols) {
      const labels = set.qk.labels || [];
      const ids = set.qk.ids || [];
      const values = model.get("values");
      const exact = sameRevision(values, set.qk) ? exactValue(values, head(), sel.row, sel.col) : null;
      const value = exact == null ? `≈${formatValue(tokens.value(0, sel.row, sel.col), 3)}` : formatValue(exact);
      const token = (i) => `${quote(labels[i] ?? i)} (id ${ids[i]})`;
      parts.push(`destination (query) ${token(sel.row)} → source (key) ${token(sel.col)}`, `logit ${value}`);
      if (exact != null) readout.dataset.value = String(exact);
    } else if (sel?.which === "positions" && positions && sel.row < positions.rows && sel.col < positions.cols) {
      const w = sel.col <= sel.row ? positions.value(head(), sel.row, sel.col) : 0;
      parts.push(
        `destination position ${sel.row} → source position ${sel.col}`,
        sel.col <= sel.row ? `weight ≈${formatValue(w, 3)}` : "masked (future key)"
      );
      readout.dataset.value = String(w);
    } else {
      parts.push(tokens ? `${tokens.rows} tokens · hover a cell (click to lock)` : "no picture yet");
    }
    if (cells.lock) parts.push("locked (click again or Esc)");
    readout.textContent = parts.join(" · ");
  }
  function picture() {
    if (!tokenMap.scene) return null;
    return composeScenes(posMap.scene && !posMap.el.hidden ? [tokenMap.scene, posMap.scene] : [tokenMap.scene]);
  }
  function start() {
    cells.reset();
    held.check();
    toolbar.sync();
    draw();
  }
  v.onPayloads("qk positional", start);
  v.on("change:head", draw);
  v.on("change:values", drawSelection);
  v.on("change:layer change:info change:token_criterion", () => {
    held.check();
    toolbar.sync();
  });
  return {
    start,
    draw,
    size: (width) => Math.max(180, Math.min(340, (width - 330) / 2)),
    keys: {
      ...headKeys(v),
      Escape: () => cells.release()
    },
    marks: () => ({
      head: head(),
      layer: held.stale ? model.get("layer") : layer(),
      held: held.stale ? String(layer()) : "",
      tokens: state.tokens?.rows ?? 0
    })
  };
});

// js/views/tokens.js
function tokenScale([lo, hi], dark = false) {
  if (!(lo < 0)) return makeScale("sequential", { dark, domain: [lo, hi] });
  const base = makeScale("diverging", { dark, domain: [-1, 1] });
  const rgb = (v) => Number.isNaN(v) ? base.nan : base.rgb(v < 0 ? -v / lo : hi > 0 ? v / hi : 0);
  return { ...base, domain: [lo, hi], rgb, css: (v) => base.css(v < 0 ? -v / lo : hi > 0 ? v / hi : 0) };
}
function legendStops([lo, hi], count2 = 9) {
  const stops = Array.from({ length: count2 }, (_, i) => lo + (hi - lo) * i / (count2 - 1));
  if (lo < 0 && hi > 0 && !stops.includes(0))
    stops.splice(
      stops.findIndex((x) => x > 0),
      0,
      0
    );
  return stops;
}
defineView("tokens", (v) => {
  const state = { hover: null, lock: null };
  const payload = () => v.payloads("values")?.values;
  const values = () => hasData(payload()) ? floatValues(payload()) : null;
  const range = () => payload()?.range || [0, 1];
  const scale = () => tokenScale(range(), v.theme.dark);
  const strip = v.own(
    new TokenStrip({
      onHover: (i) => {
        state.hover = i;
        drawSelection();
      },
      onClick: (i) => {
        state.lock = state.lock === i ? null : i;
        drawSelection();
      }
    })
  );
  const bar = h("span", { class: "cw-tokens-bar" });
  const legend = h("div", { class: "cw-tokens-legend cw-hint" }, [
    h("span", { class: "cw-tokens-lo" }),
    bar,
    h("span", { class: "cw-tokens-hi" })
  ]);
  const readout = h("div", { class: "cw-readout", attrs: { "aria-live": "polite" } });
  v.root.append(v.banner, strip.el, legend, readout);
  function drawSelection() {
    const labels = payload()?.labels || [];
    const vals = values();
    const i = state.lock ?? state.hover;
    if (vals) strip.setWeights(vals, scale(), i, state.lock != null);
    let text = vals ? `${labels.length} tokens · hover a token for its value` : "no values yet";
    let exact = "";
    if (vals && i != null && i < vals.length) {
      exact = String(vals[i]);
      const locked = state.lock != null ? " · locked (click again or Esc to release)" : "";
      text = `token ${i} ${quote(labels[i] ?? "")} · value ${formatValue(vals[i])}${locked}`;
    }
    readout.textContent = text;
    readout.dataset.cwValue = exact;
  }
  function draw() {
    const t0 = performance.now();
    const [lo, hi] = range();
    const sc = scale();
    legend.children[0].textContent = formatValue(lo);
    legend.children[2].textContent = formatValue(hi);
    const at = (x) => `${sc.css(x)} ${(100 * (x - lo) / (hi - lo)).toFixed(1)}%`;
    bar.style.background = `linear-gradient(to right, ${legendStops([lo, hi]).map(at).join(", ")})`;
    drawSelection();
    v.drawn("main", t0);
  }
  function start() {
    const labels = payload()?.labels || [];
    strip.setTokens(labels);
    if (state.lock != null && state.lock >= labels.length) state.lock = null;
    draw();
  }
  v.onPayloads("values", start);
  return {
    start,
    draw,
    keys: {
      Escape: () => {
        state.lock = null;
        drawSelection();
      }
    },
    marks: () => ({ tokens: (payload()?.labels || []).length, revision: payload()?.revision ?? "" })
  };
});

// js/lib/step-chart.js
var FONT_PX4 = 11;
var LAYER_COLOURS = {
  light: ["#4e79a7", "#59a14f", "#b07aa1", "#9c755f", "#76b7b2", "#edc948", "#e15759", "#f28e2b", "#ff9da7", "#bab0ac"],
  dark: ["#7eaedb", "#8cd17d", "#d4a6c8", "#c9a58a", "#a0d6d2", "#f1ce63", "#ff8b8c", "#ffbe7d", "#fabfd2", "#d7cfca"]
};
function layerColour(row, dark) {
  const list = LAYER_COLOURS[dark ? "dark" : "light"];
  return list[(row % list.length + list.length) % list.length];
}
function stepPosition(step, scale) {
  return scale === "log" ? Math.log10(1 + Math.max(0, step)) : step;
}
function stepTicks(first, last, scale) {
  if (scale !== "log") return niceTicks(first, last, 6).filter((t) => t >= first && t <= last);
  const ticks = first <= 0 ? [0] : [];
  for (let p = 1; p <= last; p *= 10) if (p >= first) ticks.push(p);
  return ticks;
}
function stepText(step) {
  if (step >= 1e6) return `${+(step / 1e6).toPrecision(3)}M`;
  return String(step).replace(/\B(?=(\d{3})+(?!\d))/g, " ");
}
function seriesDomain(series) {
  let lo = 0;
  let hi = 0;
  for (const s of series)
    for (const v of s.values)
      if (Number.isFinite(v)) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
  if (!(hi > lo)) hi = lo + 1;
  const ticks = niceTicks(lo, hi, 5);
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : hi - lo;
  const round = (x) => +x.toPrecision(12);
  return [round(Math.floor(lo / step + 1e-9) * step), round(Math.ceil(hi / step - 1e-9) * step)];
}
function stepChartScene(spec, measure) {
  const { steps, series, scale = "log", window: window2 = null, windowLabel = "", cursor = null, title = "", yTitle = "" } = spec;
  const { xTitle = "step", legend = [], theme, width = 640, height = 260 } = spec;
  const sans = `${FONT_PX4}px ${theme.font}`;
  const domain = spec.domain ?? seriesDomain(series);
  const [d0, d1] = domain;
  const yTicks = niceTicks(d0, d1, 5).filter((t) => t >= d0 - 1e-12 && t <= d1 + 1e-12);
  const yText = yTicks.map((t) => formatValue(t, 3));
  const left = 12 + Math.max(26, ...yText.map((t) => measure(t, sans)));
  const right = 14;
  const top = title ? 40 : 16;
  const bottom = 36;
  const plotW = Math.max(60, width - left - right);
  const plotH = Math.max(60, height - top - bottom);
  const first = steps.length ? steps[0] : 0;
  const last = steps.length ? steps[steps.length - 1] : 1;
  const p0 = stepPosition(first, scale);
  const p1 = Math.max(p0 + 1e-9, stepPosition(last, scale));
  const x = (step) => left + (stepPosition(step, scale) - p0) / (p1 - p0) * plotW;
  const y = (v) => top + (d1 - v) / (d1 - d0 || 1) * plotH;
  const xs = steps.map(x);
  const ops = [];
  if (title) ops.push({ type: "text", x: 6, y: 15, text: title, font: `600 12px ${theme.font}`, color: theme.fg, align: "left" });
  if (window2 && steps.length > 1) {
    const [a, b] = window2.map((s) => Math.max(left, Math.min(left + plotW, x(s))));
    ops.push({ type: "rect", x: a, y: top, w: Math.max(2, b - a), h: plotH, fill: theme.accent, alpha: 0.12 });
    if (windowLabel) {
      const half = measure(windowLabel, sans) / 2 + 3;
      const mid = Math.max(left + half, Math.min(left + plotW - half, (a + b) / 2));
      ops.push({ type: "text", x: mid, y: top + 11, text: windowLabel, font: sans, color: theme.muted, align: "center" });
    }
  }
  yTicks.forEach((t, k) => {
    ops.push({ type: "line", x1: left, y1: y(t), x2: left + plotW, y2: y(t), stroke: theme.border, width: t === 0 ? 1.2 : 0.6 });
    ops.push({ type: "text", x: left - 4, y: y(t), text: yText[k], font: sans, color: theme.muted, align: "right", baseline: "middle" });
  });
  for (const t of stepTicks(first, last, scale)) {
    ops.push({ type: "line", x1: x(t), y1: top + plotH, x2: x(t), y2: top + plotH + 4, stroke: theme.border });
    ops.push({ type: "text", x: x(t), y: top + plotH + 14, text: stepText(t), font: sans, color: theme.muted, align: "center" });
  }
  ops.push({ type: "rect", x: left - 0.5, y: top - 0.5, w: plotW + 1, h: plotH + 1, stroke: theme.border });
  if (yTitle) ops.push({ type: "text", x: left, y: top - 6, text: yTitle, font: sans, color: theme.muted, align: "left" });
  const axisName = scale === "log" ? `${xTitle} (log scale) →` : `${xTitle} →`;
  ops.push({ type: "text", x: left + plotW, y: height - 4, text: axisName, font: sans, color: theme.muted, align: "right" });
  let lx = width - right;
  for (const item of [...legend].reverse()) {
    lx -= measure(item.name, sans);
    ops.push({ type: "text", x: lx, y: 28, text: item.name, font: sans, color: theme.fg, align: "left", baseline: "middle" });
    lx -= 20;
    ops.push({ type: "line", x1: lx, y1: 28, x2: lx + 14, y2: 28, stroke: item.color, width: 2.2, dash: item.dash });
    lx -= 12;
  }
  const lines = [];
  for (const s of series) {
    const pts = s.values.map((v, i) => Number.isFinite(v) && i < xs.length ? [xs[i], y(v)] : null);
    lines.push(pts);
    let d = "";
    let pen = false;
    for (const p of pts) {
      if (!p) {
        pen = false;
        continue;
      }
      d += `${pen ? "L" : "M"}${p[0].toFixed(2)} ${p[1].toFixed(2)}`;
      pen = true;
    }
    if (d) ops.push({ type: "path", d, stroke: s.color, width: s.width ?? 1.4, alpha: s.alpha, dash: s.dash, cap: "round" });
  }
  if (cursor != null && steps.length) {
    const cx = x(cursor);
    ops.push({ type: "line", x1: cx, y1: top, x2: cx, y2: top + plotH, stroke: theme.fg, width: 1.2 });
  }
  return { width, height, ops, layout: { left, top, plotW, plotH, xs, domain }, lines };
}
function segmentDistance(px, py, [ax, ay], [bx, by]) {
  const dx = bx - ax;
  const dy = by - ay;
  const t = dx || dy ? Math.max(0, Math.min(1, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy))) : 0;
  return Math.hypot(px - (ax + t * dx), py - (ay + t * dy));
}
function nearestLine(scene, px, py, radius = 6) {
  let best = null;
  let bestD = radius;
  scene.lines.forEach((pts, k) => {
    let prev = null;
    for (const p of pts) {
      if (p) {
        const d = prev ? segmentDistance(px, py, prev, p) : Math.hypot(px - p[0], py - p[1]);
        if (d <= bestD) {
          bestD = d;
          best = k;
        }
      }
      prev = p;
    }
  });
  return best;
}
function stepAt(scene, px, py) {
  const { left, top, plotW, plotH, xs } = scene.layout;
  if (!xs.length || px < left - 6 || px > left + plotW + 6 || py < top || py > top + plotH) return null;
  let best = 0;
  xs.forEach((x, i) => {
    if (Math.abs(x - px) < Math.abs(xs[best] - px)) best = i;
  });
  return best;
}

// js/views/training.js
var PLAY_MS = 700;
var headName3 = (layer, head) => `L${layer}H${head}`;
function windowText(window2, unit = "step") {
  return window2 ? `phase change: ${unit}s ${stepText(window2[0])}–${stepText(window2[1])}` : "";
}
function headSeries(values, [nSteps, L, H], { layers, selected, theme }) {
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
        name: headName3(layers[row], head),
        row,
        head,
        values: line,
        color: isSelected ? theme.accent : layerColour(row, theme.dark),
        width: isSelected ? 2.8 : 1.3,
        alpha: isSelected ? 1 : 0.75
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
  const metricSelect = h("select", { class: "cw-select", attrs: { "aria-label": "Metric" } });
  v.listen(metricSelect, "change", () => v.set({ metric: metricSelect.value }));
  const metricField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Metric" }), metricSelect]);
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const scaleButtons = ["log", "linear"].map(
    (s) => h("button", {
      class: "cw-button cw-tr-scale",
      type: "button",
      text: s === "log" ? "Log" : "Linear",
      attrs: { "data-scale": s, title: s === "log" ? "steps on a log axis: log(1 + step)" : "steps on a linear axis" },
      on: { click: () => v.set({ x_scale: s }) }
    })
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
    background: () => v.theme.bgCss
  });
  const progressRow2 = h("div", { class: "cw-toolbar-row cw-tr-progress" }, [
    progressBar,
    progressText,
    stopButton,
    h("span", { class: "cw-spacer" }),
    ...buttons
  ]);
  const chart = (label) => {
    const canvas = h("canvas", { class: "cw-tr-canvas", attrs: { role: "img", "aria-label": label } });
    const overlay = h("canvas", { class: "cw-tr-overlay" });
    const el = h("div", { class: "cw-tr-chart" }, [canvas, overlay]);
    return { canvas, overlay, el, scene: null, series: [] };
  };
  const heads = chart("every head's metric along training");
  const losses = chart("the loss along training");
  const readout = h("div", { class: "cw-readout cw-tr-readout", attrs: { "aria-live": "polite" } });
  const playButton = button("▶ Play", "play the steps one after the other", () => state.playing ? stopPlaying() : play());
  playButton.classList.add("cw-tr-play");
  const slider = h("input", { class: "cw-tr-slider", type: "range", attrs: { min: 0, step: 1, "aria-label": "step" } });
  const stepLabel = h("span", { class: "cw-tr-step" });
  const scrubber = h("div", { class: "cw-toolbar-row cw-tr-scrubber" }, [playButton, slider, stepLabel]);
  v.listen(slider, "input", () => selectStep(Number(slider.value)));
  const hint = h("div", { class: "cw-hint cw-tr-hint" });
  const kernelNote = h("div", { class: "cw-hint cw-tr-kernel" });
  v.root.append(toolbar, progressRow2, v.banner, heads.el, readout, losses.el, scrubber, hint, kernelNote);
  function selectStep(i) {
    const list = steps();
    if (!(i >= 0 && i < list.length) || list[i] === model.get("step")) return;
    v.set({ step: list[i] });
  }
  function play() {
    const list = steps();
    if (!list.length) return;
    if (stepIndex() >= list.length - 1) selectStep(0);
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
      theme: v.theme
    });
    const into = composition() ? ` into ${headName3(...p.into)}` : "";
    const drawn = new Set(heads.series.map((s) => s.row));
    const legend = layers().map((layer, r) => ({ name: `layer ${layer}`, color: layerColour(r, v.theme.dark), row: r })).filter((item) => drawn.has(item.row));
    if (!composition()) legend.push({ name: headName3(model.get("layer"), model.get("head")), color: v.theme.accent });
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
        height: v.compact ? 220 : 280
      },
      measureWith(heads.canvas)
    );
    heads.scene.names = heads.series.map((s) => s.name);
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
      { color: v.theme.accent, dash: [5, 3] }
    ];
    losses.series = names.map((name3, k) => ({
      name: p.labels?.[name3] || name3,
      values: Array.from(state.losses.subarray(k * n, (k + 1) * n)),
      width: 2,
      ...styles[k % styles.length]
    }));
    const windowed = names.includes("in_context_loss") ? "in_context_loss" : names[0];
    const window2 = p.windows?.[windowed] || null;
    losses.scene = stepChartScene(
      {
        steps: steps(),
        series: losses.series,
        scale: model.get("x_scale"),
        window: window2,
        windowLabel: window2 ? `${windowText(window2, unit())} of the ${p.labels?.[windowed] || windowed}` : "",
        cursor: model.get("step"),
        title: "loss along training",
        yTitle: "nats",
        xTitle: unit(),
        legend: losses.series,
        theme: v.theme,
        width: width(),
        height: v.compact ? 180 : 220
      },
      measureWith(losses.canvas)
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
    if (line) parts.unshift(composition() ? `${line.name} → ${headName3(...p.into)}` : line.name);
    if (line) parts.push(`${label} ${formatValue(line.values[i], 3)}`);
    else if (!composition()) {
      const row = layers().indexOf(model.get("layer"));
      const value = state.values[(i * layers().length + row) * nHeads() + model.get("head")];
      parts.unshift(`selected ${headName3(model.get("layer"), model.get("head"))}`);
      parts.push(`${label} ${formatValue(value, 3)}`);
    } else parts.unshift(`${label} into ${headName3(...p.into)} (hover a line for its head)`);
    const names = lossesOf().names || [];
    names.forEach((name3, k2) => {
      const value = state.losses?.[k2 * steps().length + i];
      if (value != null) parts.push(`${lossesOf().labels?.[name3] || name3} ${formatValue(value, 3)}`);
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
    bar.style.width = `${total ? 100 * done / total : 0}%`;
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
    for (const name3 of lp.names || []) if (lp.descriptions?.[name3]) lines.push(`${lp.labels?.[name3] || name3}: ${lp.descriptions[name3]}`);
    lines.push(
      "Shaded: the neighbouring checkpoints where the curve (the maximum over the heads) changes most, widened while the change keeps half that size."
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
        { type: "group", x: 0, y: a.height + 12, ops: b.ops }
      ]
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
    busy: () => model.get("busy") ? "computing…" : "",
    keys: {
      ArrowRight: moveStep(1),
      ArrowLeft: moveStep(-1),
      " ": () => state.playing ? stopPlaying() : play()
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
        const name3 = (lp.names || []).includes("in_context_loss") ? "in_context_loss" : (lp.names || [])[0];
        return (lp.windows?.[name3] || []).join("-");
      })(),
      scanState: model.get("scan_state"),
      done: (curves().done || []).filter(Boolean).length,
      playing: state.playing ? "on" : "off"
    })
  };
});

// js/views/trigrams.js
defineView("trigrams", (v) => {
  const { model, standalone } = v;
  const info = () => model.get("info") || {};
  const shown = () => v.payloads("trigrams", "sources");
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const input = h("input", {
    class: "cw-input cw-tg-input",
    type: "text",
    spellcheck: false,
    placeholder: "a token or #id, then Enter",
    // a token id when the model has no tokenizer (set in draw)
    attrs: { "aria-label": "source token" }
  });
  const strongest = button(
    "strongest",
    "show the strongest source of this head (and follow it when the head changes)",
    () => v.set({ source: null })
  );
  for (const control of [layerSelect, headSelect]) control.disable(standalone);
  input.disabled = strongest.disabled = standalone;
  v.listen(input, "keydown", (e) => {
    e.stopPropagation();
    if (e.key === "Enter" && input.value !== "") {
      e.preventDefault();
      v.set({ typed: input.value });
    }
  });
  const sourceField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Source" }), input]);
  const toolbar = h("div", { class: "cw-toolbar-row" }, [layerSelect.el, headSelect.el, sourceField, strongest, v.busyMark]);
  const headline = h("div", { class: "cw-tg-headline", attrs: { "aria-live": "polite" } });
  const columns = h("div", { class: "cw-tg-columns" });
  const note = h("div", { class: "cw-hint cw-tg-note" });
  v.root.append(toolbar, v.banner, headline, columns, note);
  v.root.classList.toggle("cw-tg-static", standalone);
  v.listen(columns, "click", (e) => {
    const item = e.target.closest?.(".cw-tg-token[data-id]");
    if (!item || standalone) return;
    v.set({ source: Number(item.dataset.id) });
  });
  const tokenEl = (id, label, extra = "") => h("span", {
    class: `cw-tg-token${extra}`,
    text: truncate(displayToken(label), 28),
    title: standalone ? `${quote(label, 80)} (id ${id})` : `${quote(label, 80)} (id ${id}): click to make it the source`,
    attrs: { "data-id": id, role: standalone ? null : "button" }
  });
  const bar = (value, max) => {
    const el = h("span", { class: `cw-tg-bar${value < 0 ? " cw-tg-neg" : ""}` });
    el.style.width = `${max > 0 ? Math.min(100, 100 * Math.abs(value) / max) : 0}%`;
    return h("span", { class: "cw-tg-barbox" }, [el]);
  };
  const valueEl = (value) => h("span", { class: "cw-tg-value", text: formatValue(value, 4), attrs: { "data-value": String(value) } });
  function list(kind, title, subtitle, rows) {
    const max = Math.max(0, ...rows.map((r) => Math.abs(r.value)));
    const items = rows.map(
      (r, i) => h(
        "li",
        {
          class: `cw-tg-row${r.mark ? " cw-tg-copy" : ""}`,
          attrs: { "data-rank": i, "data-id": r.id ?? null, "data-value": String(r.value) }
        },
        [
          h("span", { class: "cw-tg-rank", text: `${i + 1}` }),
          h("span", { class: "cw-tg-cells" }, r.cells),
          bar(r.value, max),
          valueEl(r.value),
          r.mark ? h("span", { class: "cw-tg-mark", text: r.mark, title: "copying: the out token is the source token" }) : h("span")
        ]
      )
    );
    return h("section", { class: `cw-tg-list cw-tg-${kind}`, attrs: { "data-list": kind } }, [
      h("div", { class: "cw-tg-title", text: title }),
      h("div", { class: "cw-hint cw-tg-subtitle", text: subtitle }),
      h("ol", {}, items)
    ]);
  }
  function draw() {
    const t0 = performance.now();
    syncControls();
    const set = shown();
    note.textContent = info().note || "";
    if (info().has_tokenizer === false) input.placeholder = "a token id, then Enter";
    if (!set || !hasData(set.trigrams) || !hasData(set.sources)) {
      headline.textContent = model.get("busy") ? "" : "no trigrams yet";
      return;
    }
    let values;
    let ranking;
    try {
      values = floatValues(set.trigrams);
      ranking = floatValues(set.sources);
      v.error("", "decode");
    } catch (err) {
      v.error(`could not read the trigrams: ${err.message}`, "decode");
      return;
    }
    const t = set.trigrams;
    const s = set.sources;
    const k = t.shape[1];
    const src = t.source;
    const label = /* @__PURE__ */ new Map([[src, t.source_label]]);
    for (const [i, id] of t.destinations.entries()) label.set(id, t.destination_labels[i]);
    for (const [i, id] of t.outs.entries()) label.set(id, t.out_labels[i]);
    const tok = (id, extra) => tokenEl(id, label.get(id) ?? String(id), extra);
    const copy = (id) => id === src ? "copy" : "";
    headline.replaceChildren(
      h("span", { text: `L${t.layer} H${t.head} · source ` }),
      tokenEl(src, t.source_label, " cw-tg-source"),
      h("span", {
        text: ` (id ${src}) · strength ${formatValue(t.strength, 4)}${t.following ? " · the strongest source of this head" : ""}`
      })
    );
    headline.dataset.source = String(src);
    const sourceRows = s.ids.map((id, i) => ({
      id,
      value: ranking[3 * i],
      cells: [
        tokenEl(id, s.labels[i], id === src ? " cw-tg-current" : ""),
        h("span", { class: "cw-tg-arrow", text: " … " }),
        tokenEl(s.destinations[i], s.destination_labels[i]),
        h("span", { class: "cw-tg-arrow", text: " → " }),
        tokenEl(s.outs[i], s.out_labels[i], s.outs[i] === id ? " cw-tg-copied" : "")
      ],
      mark: s.outs[i] === id ? "copy" : ""
    }));
    const destRows = t.destinations.map((id, i) => ({ id, value: values[i], cells: [tok(id)] }));
    const outRows = t.outs.map((id, i) => ({
      id,
      value: values[k + i],
      cells: [tok(id, copy(id) ? " cw-tg-copied" : "")],
      mark: copy(id)
    }));
    const tripleRows = t.triples.map(([d, o], i) => ({
      value: values[2 * k + i],
      cells: [
        tok(src),
        h("span", { class: "cw-tg-arrow", text: " … " }),
        tok(d),
        h("span", { class: "cw-tg-arrow", text: " → " }),
        tok(o, copy(o) ? " cw-tg-copied" : "")
      ],
      mark: copy(o)
    }));
    columns.replaceChildren(
      list("sources", "Strongest sources", "strength = max(0, top QK) · max(0, top OV); its best destination → out", sourceRows),
      list("destinations", "Destinations (query)", "attend to the source: W_E W_QK W_Eᵀ / scale, column source", destRows),
      list("outs", "Outs", "logits the source raises: W_E W_OV W_U, row source", outRows),
      list("triples", "Triples: source … destination → out", "top destinations × top outs, by QK · OV", tripleRows)
    );
    v.drawn("trigrams", t0);
  }
  function syncControls() {
    const shownLayer = shown()?.trigrams.layer ?? model.get("layer");
    const layers = standalone ? [shownLayer] : info().attn_layers || [model.get("layer")];
    layerSelect.set(numberOptions(layers), standalone ? shownLayer : model.get("layer"));
    const shownHead = standalone ? shown()?.trigrams.head ?? model.get("head") : model.get("head");
    headSelect.set(indexOptions(info().n_heads || 1), shownHead);
  }
  v.onPayloads("trigrams sources", draw);
  v.on("change:layer change:head change:info", syncControls);
  v.on("change:progress", v.refresh);
  return {
    draw,
    busy: () => model.get("progress") || (model.get("busy") ? "computing…" : ""),
    keys: standalone ? {} : headKeys(v, { layers: true }),
    marks: () => {
      const t = shown()?.trigrams;
      return { layer: t?.layer ?? "", head: t?.head ?? "", source: t?.source ?? "", revision: t?.revision ?? "" };
    }
  };
});

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
  get(name3) {
    return this.state[name3];
  }
  set(name3, value) {
    const old = this.state[name3];
    this.state[name3] = value;
    if (old !== value) this.emit(`change:${name3}`, value);
  }
  emit(event, value) {
    for (const fn of [...this.handlers.get(event) || []]) fn(value);
    if (event.startsWith("change:")) for (const fn of [...this.handlers.get("change") || []]) fn();
  }
  on(event, fn) {
    for (const name3 of event.split(/\s+/)) {
      if (!this.handlers.has(name3)) this.handlers.set(name3, /* @__PURE__ */ new Set());
      this.handlers.get(name3).add(fn);
    }
  }
  off(event, fn) {
    const names = event ? event.split(/\s+/) : [...this.handlers.keys()];
    for (const name3 of names) {
      if (!fn) this.handlers.delete(name3);
      else this.handlers.get(name3)?.delete(fn);
    }
  }
  save_changes() {
  }
  // nothing to sync with: no kernel
  send() {
  }
  // custom messages have no kernel to go to
};
function mountStandalone(container, payload, render2) {
  const models = payload.widgets.map((state) => new StaticModel(decodeState(state)));
  const cleanups = [];
  const mountWidget = (i, parent) => {
    const item = document.createElement("div");
    item.className = "cw-export-item";
    parent.append(item);
    const cleanup = render2({ model: models[i], el: item });
    if (typeof cleanup === "function") cleanups.push(cleanup);
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
      for (const child of node.children) build(child, box);
    }
  };
  build(payload.layout || { box: "vbox", children: models.map((_, i) => ({ widget: i })) }, container);
  for (const [[i, a], [j, b]] of payload.links || []) {
    models[i].on(`change:${a}`, () => models[j].set(b, models[i].get(a)));
    models[j].on(`change:${b}`, () => models[i].set(a, models[j].get(b)));
  }
  return {
    models,
    cleanup: () => {
      for (const fn of cleanups) fn();
    }
  };
}

// js/lib/page.js
function mountPage(root, payload, render2) {
  const models = payload.widgets.map((state) => new StaticModel(decodeState(state)));
  const cleanups = [];
  const build = (node, parent) => {
    if (node && typeof node.widget === "number") {
      if (node.widget < 0 || node.widget >= models.length) return;
      const item = document.createElement("div");
      item.className = "cw-export-item";
      parent.append(item);
      const cleanup = render2({ model: models[node.widget], el: item });
      if (typeof cleanup === "function") cleanups.push(cleanup);
    } else if (node && typeof node.text === "string") {
      const p = document.createElement("div");
      p.className = "cw-export-text";
      p.textContent = node.text;
      parent.append(p);
    } else if (node && node.box === "details" && Array.isArray(node.children)) {
      const box = document.createElement("details");
      box.className = "cw-export-details";
      box.open = node.open === true;
      const summary = document.createElement("summary");
      summary.textContent = String(node.title ?? "");
      const inner = document.createElement("div");
      inner.className = "cw-export-vbox";
      box.append(summary, inner);
      parent.append(box);
      for (const child of node.children) build(child, inner);
    } else if (node && Array.isArray(node.children)) {
      const box = document.createElement("div");
      box.className = { hbox: "cw-export-hbox", grid: "cw-export-grid" }[node.box] ?? "cw-export-vbox";
      if (node.box === "grid" && typeof node.columns === "string" && !/url|["'\\]/i.test(node.columns)) {
        box.style.gridTemplateColumns = node.columns;
      }
      if (typeof node.class === "string") box.classList.add(...node.class.split(/\s+/).filter((c) => /^cw-[\w-]+$/.test(c)));
      parent.append(box);
      for (const child of node.children) build(child, box);
    }
  };
  for (const el of root.querySelectorAll("[data-cw-output]")) {
    build(payload.outputs[Number(el.dataset.cwOutput)], el);
  }
  const follow = ([i, a], [j, b]) => {
    if (models[i] && models[j]) models[i].on(`change:${a}`, () => models[j].set(b, models[i].get(a)));
  };
  for (const [one, two] of payload.links || []) {
    follow(one, two);
    follow(two, one);
  }
  for (const [source, target] of payload.dlinks || []) follow(source, target);
  return {
    models,
    cleanup: () => {
      for (const fn of cleanups) fn();
    }
  };
}

// js/index.js
function mountStandalone2(container, payload) {
  return mountStandalone(container, payload, render);
}
function mountPage2(root, payload) {
  return mountPage(root, payload, render);
}
var js_default = { render };
export {
  VIEWS,
  js_default as default,
  mountPage2 as mountPage,
  mountStandalone2 as mountStandalone
};
