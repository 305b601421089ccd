// Payload decoding: the payloads of circuitwidgets.transport, read without copying.
//
// A payload is one trait holding {data, dtype, shape, layout, lo, hi, nan_code | ranges, ...}.
// Its `data` reaches the browser as a DataView that may start part-way into a larger buffer (the
// comm message carries several), so everything here honours byteOffset and byteLength.

import { CODE_MAX, NAN_CODE } from "./codes.js";
import { colorScaleOf } from "./color-scale.js";

/** The bytes of a DataView / ArrayBuffer / typed array as a Uint8Array (no copy). */
export function bytesOf(data) {
  if (data == null) return new Uint8Array(0);
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(`expected binary data (DataView, ArrayBuffer, typed array); got ${typeof data}`);
}

/** Little-endian float32 values; a view when aligned, else a copy (Float32Array needs 4-byte alignment). */
export function float32Of(data) {
  const bytes = bytesOf(data);
  if (bytes.byteLength % 4) throw new RangeError(`float32 payload of ${bytes.byteLength} bytes is not a multiple of 4`);
  const n = bytes.byteLength / 4;
  if (bytes.byteOffset % 4 === 0) return new Float32Array(bytes.buffer, bytes.byteOffset, n);
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) out[i] = dv.getFloat32(4 * i, true);
  return out;
}

const product = (xs) => xs.reduce((a, b) => a * b, 1);

/** True when payload `p` has something to draw (a payload without `data` says why it has not). */
export function hasData(p) {
  return !!p && p.data != null && Array.isArray(p.shape);
}

/**
 * A stack of matrices sent as uint8 codes (transport.uint8_payload): shape [..., rows, cols],
 * layout "full" or "tril" (lower triangle only, row r starting at r(r+1)/2).
 */
export class CodeStack {
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
    // Codes of colour positions (a `scale` other than linear): value() reads them back as weights.
    this.scale = payload.scale?.kind && payload.scale.kind !== "linear" ? payload.scale : null;
    this.unscaled = this.scale ? Array.from({ length: this.count }, (_, m) => colorScaleOf(this.scale, m).value) : null;
    if (this.layout === "tril" && this.rows !== this.cols) throw new RangeError("tril layout needs square matrices");
    this.perMatrix = this.layout === "tril" ? (this.rows * (this.rows + 1)) / 2 : this.rows * this.cols;
    const expected = this.count * this.perMatrix;
    if (this.codes.length !== expected) {
      throw new RangeError(`payload holds ${this.codes.length} bytes; shape ${JSON.stringify(shape)} (${this.layout}) needs ${expected}`);
    }
    // Code of the value 0, used for the cells a tril payload leaves out.
    this.zeroCode = Math.max(0, Math.min(CODE_MAX, Math.round(-this.lo / this.step)));
  }

  /** Offset in `codes` of row r of matrix m (its first stored cell). */
  rowStart(m, r) {
    const base = m * this.perMatrix;
    return this.layout === "tril" ? base + (r * (r + 1)) / 2 : base + r * this.cols;
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
    const dist = new Int16Array(256); // code -> distance from the centre (NaN counts as 0)
    for (let code = 0; code < 256; code++) dist[code] = code === this.nanCode ? 0 : Math.abs(code - centre);
    const colBin = new Int32Array(cols);
    for (let c = 0; c < cols; c++) colBin[c] = Math.min(outCols - 1, Math.floor((c * outCols) / cols));
    for (let r = 0; r < rows; r++) {
      const orow = Math.min(outRows - 1, Math.floor((r * outRows) / rows)) * outCols;
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
}

/**
 * Head `h` of a per-head uint8 payload (transport.heads_payload: shape [H, rows, cols], head h on
 * its own range `ranges[h]`) as a one-matrix CodeStack; null when there is no such head.
 */
export function headStack(payload, h) {
  if (!hasData(payload) || payload.shape.length !== 3 || !Array.isArray(payload.ranges)) return null;
  const [nHeads, rows, cols] = payload.shape;
  if (!(h >= 0 && h < nHeads) || !rows || !cols) return null;
  const size = rows * cols;
  const bytes = bytesOf(payload.data);
  if (bytes.length !== nHeads * size)
    throw new RangeError(`payload holds ${bytes.length} bytes; shape ${JSON.stringify(payload.shape)} needs ${nHeads * size}`);
  const [lo, hi] = payload.ranges[h];
  const data = bytes.subarray(h * size, (h + 1) * size);
  return new CodeStack({ dtype: "uint8", data, shape: [rows, cols], lo, hi, layout: "full", nan_code: payload.nan_code });
}

/** All values of a float32 payload, checked against its shape. */
export function floatValues(payload) {
  if (!hasData(payload) || payload.dtype !== "float32") throw new TypeError(`expected a float32 payload; got dtype ${payload?.dtype}`);
  const values = float32Of(payload.data);
  const n = product(payload.shape);
  if (values.length !== n) throw new RangeError(`payload holds ${values.length} values; shape ${JSON.stringify(payload.shape)} needs ${n}`);
  return values;
}

/**
 * The exact value at `index` (one index per dimension) of a float32 payload, read in place (no
 * copy, whatever the alignment); null when the payload has no data or the index is outside.
 */
export function exactValue(payload, ...index) {
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
