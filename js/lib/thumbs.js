// Small multiples: a grid of labelled thumbnails (one per head). Hover previews, click selects.

import { h, itemEvents } from "./controls.js";

export class ThumbGrid {
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
}

let scratch = null; // one canvas for every thumbnail, made on first use

/**
 * Paint matrix m of CodeStack `stack` through `lut` as a px x px thumbnail on `ctx`. A matrix larger
 * than the thumbnail is pooled (CodeStack.pool), so a one-cell stripe stays visible.
 */
export function drawStackThumb(ctx, px, stack, m, lut) {
  const rows = Math.min(stack.rows, px);
  const cols = Math.min(stack.cols, px);
  scratch ??= document.createElement("canvas");
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
