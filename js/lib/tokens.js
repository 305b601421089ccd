// Token strip: the prompt as running text, one span per token, coloured by a weight per token.
// Hovering a token reports it; clicking locks it (a second click on the same token releases).

import { h, itemEvents } from "./controls.js";
import { inlineToken } from "./layout.js";
import { cssOf, readableText } from "./scales.js";

export class TokenStrip {
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
      const span = h("span", { class: "cw-token", text: inlineToken(s), attrs: { role: "listitem", "data-index": i, title: `${i}` } });
      return s.includes("\n") ? [span, h("br")] : [span];
    });
    this.el.replaceChildren(...this.spans.flat());
    this.spans = this.spans.map((pair) => pair[0]);
  }

  /**
   * Colour each token by weights[k] (the k-th token shown) through `scale.rgb(weight, position)`
   * (null clears); mark `focus` (the position whose attention is shown) and whether it is locked.
   */
  setWeights(weights, scale, focus = null, locked = false) {
    this.spans.forEach((span, k) => {
      const i = (this.offset || 0) + k;
      const w = weights ? weights[k] : null;
      if (w == null || Number.isNaN(w)) {
        span.style.background = "";
        span.style.color = "";
        span.removeAttribute("data-weight");
      } else {
        const rgb = scale.rgb(w, i);
        span.style.background = cssOf(rgb);
        span.style.color = readableText(rgb);
        span.dataset.weight = w.toFixed(4);
      }
      span.classList.toggle("cw-token-focus", i === focus);
      span.classList.toggle("cw-token-locked", i === focus && locked);
    });
  }

  destroy() {
    this.stop();
    this.el.remove();
  }
}
