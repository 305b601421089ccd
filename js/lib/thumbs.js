// Small multiples: a grid of labelled thumbnails (one per head). Hover previews, click selects.

import { h } from "./controls.js";

export class ThumbGrid {
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
    labels.forEach((text, i) => (this.items[i].caption.textContent = text));
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
}
