// The token view under an attention pattern: the prompt's tokens coloured by the attention that the
// focused token pays (as destination: its row) or receives (as source: its column), with the select
// that switches between the two. Over a long prompt it holds the zoomed window's sources or
// destinations only.

import { h } from "./controls.js";
import { TokenStrip } from "./tokens.js";

/**
 * The tokens of the token strip, which follows the zoom: the window's sources (`mode` "pays") or
 * destinations ("receives"); all `count` labels without a window. Returns {from, to, note}.
 */
export function stripSpan(lod, win, mode, count) {
  if (!lod) return { from: 0, to: count, note: "" };
  const from = mode === "pays" ? win.c0 : win.r0;
  const to = Math.min(lod.n, from + win.size);
  return { from, to, note: to - from < lod.n ? `tokens ${from}–${to - 1} of ${lod.n} (the zoomed window)` : "" };
}

export class TokenView {
  /**
   * select(which, token) hovers or locks (which: "hover" | "lock") token {query, key}, or none
   * (null); locked() is the locked token; changed() redraws after the mode changed.
   */
  constructor(v, { select, locked, changed }) {
    this.mode = "pays"; // attention the focused token pays, or receives
    this.shown = null; // the tokens shown ("from:to:count"): replaced only when they change
    const tokenAt = (i) => (i == null ? null : this.mode === "pays" ? { query: i, key: null } : { query: null, key: i });
    this.strip = v.own(
      new TokenStrip({
        onHover: (i) => select("hover", tokenAt(i)),
        onClick: (i) => {
          const axis = this.mode === "pays" ? "query" : "key";
          select("lock", locked()?.[axis] === i ? null : tokenAt(i));
        },
      }),
    );
    const modeSelect = h("select", { class: "cw-select", attrs: { "aria-label": "token view" } }, [
      h("option", { value: "pays", text: "attention paid by (as destination)" }),
      h("option", { value: "receives", text: "attention received by (as source)" }),
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
      this.note,
    ]);
  }

  /** The focused destination `q` (mode "pays") or source `k` ("receives") of selection `sel`; null when none. */
  focus(sel) {
    const q = this.mode === "pays" ? (sel?.query ?? null) : null;
    const k = this.mode === "receives" ? (sel?.key ?? null) : null;
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
}
