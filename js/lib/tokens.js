// Token strip: the prompt as running text, one span per token, coloured by a weight per token.
// Hovering a token reports it; clicking locks it (a second click on the same token releases).

import { h } from "./controls.js";
import { inlineToken } from "./layout.js";
import { cssOf, readableText } from "./scales.js";

export class TokenStrip {
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
}
