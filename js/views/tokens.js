// ColoredTokens view: the tokens as running text, each coloured by its value (float32, exact), a
// legend of the colour scale, and a read-out of the hovered (or clicked, locked) token's value.

import { h } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { quote } from "../lib/layout.js";
import { formatValue, makeScale } from "../lib/scales.js";
import { TokenStrip } from "../lib/tokens.js";
import { defineView } from "../lib/view.js";

/**
 * The colour scale of values over range [lo, hi]: sequential from lo to hi, or (lo < 0) diverging
 * around 0, negatives reaching the end colour at lo and positives at hi. Returns {rgb(v), css(v)}.
 */
export function tokenScale([lo, hi], dark = false) {
  if (!(lo < 0)) return makeScale("sequential", { dark, domain: [lo, hi] });
  const base = makeScale("diverging", { dark, domain: [-1, 1] });
  const rgb = (v) => (Number.isNaN(v) ? base.nan : base.rgb(v < 0 ? -v / lo : hi > 0 ? v / hi : 0));
  return { ...base, domain: [lo, hi], rgb, css: (v) => base.css(v < 0 ? -v / lo : hi > 0 ? v / hi : 0) };
}

/** Values at which the legend shows colours: `count` points from lo to hi, 0 among them when inside. */
export function legendStops([lo, hi], count = 9) {
  const stops = Array.from({ length: count }, (_, i) => lo + ((hi - lo) * i) / (count - 1));
  if (lo < 0 && hi > 0 && !stops.includes(0))
    stops.splice(
      stops.findIndex((x) => x > 0),
      0,
      0,
    );
  return stops;
}

defineView("tokens", (v) => {
  const state = { hover: null, lock: null };
  const payload = () => v.payloads("values")?.values;
  const values = () => (hasData(payload()) ? floatValues(payload()) : null);
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
      },
    }),
  );
  const bar = h("span", { class: "cw-tokens-bar" });
  const legend = h("div", { class: "cw-tokens-legend cw-hint" }, [
    h("span", { class: "cw-tokens-lo" }),
    bar,
    h("span", { class: "cw-tokens-hi" }),
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
    const at = (x) => `${sc.css(x)} ${((100 * (x - lo)) / (hi - lo)).toFixed(1)}%`;
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
      },
    },
    marks: () => ({ tokens: (payload()?.labels || []).length, revision: payload()?.revision ?? "" }),
  };
});
