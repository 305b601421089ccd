// The words of the composition diagram: a pair's score in the units shown, the note under the
// picture and its caption. Pure, so the numbers a reader sees can be tested.

import { formatValue } from "./scales.js";

/**
 * "L0H2 → L1H1 · K-composition 0.31 (baseline 0.088)" for pair p with raw score `raw`;
 * `corrected` shows raw − baseline. `name(l, h)` names a head.
 */
export function pairText(p, raw, { kind, corrected, base, name }) {
  const pair = `${name(p.l1, p.h1)} → ${name(p.l2, p.h2)}`;
  if (!Number.isFinite(raw)) return `${pair} · undefined (the writer must be in an earlier layer)`;
  const score = corrected
    ? `${kind}-composition ${formatValue(raw - base)} (raw ${formatValue(raw)} − baseline ${formatValue(base, 3)})`
    : `${kind}-composition ${formatValue(raw)} (baseline ${formatValue(base, 3)})`;
  return `${pair} · ${score}`;
}

/**
 * The note: units, what the baseline means, and how many pairs pass the threshold. With fewer
 * than two attention layers there is no pair at all, and the note says why instead.
 */
export function noteText({ corrected, base, dModel, graph, shown, passing, layers = 2 }) {
  if (layers < 2) {
    return "this model has one attention layer: composition pairs a head with a head of a later layer, so there is nothing to draw";
  }
  const units = corrected ? "baseline-corrected (raw − baseline)" : "raw";
  const plural = (n) => (n === 1 ? "" : "s");
  const count = graph
    ? `${shown} of ${passing} pair${plural(passing)} above the threshold drawn${passing > shown ? " (the strongest)" : ""}`
    : `${shown} pair${plural(shown)} above the threshold`;
  const typical = formatValue(1 / Math.sqrt(dModel || 1), 3);
  const baseline = `baseline ${formatValue(base, 3)}: what random matrices of these shapes score (≈ 1/√d_model = ${typical})`;
  return `${units} scores · ${baseline} · ${count}`;
}

/**
 * The caption under the note: what the scores of `kind` leave out or fold in, as the kernel
 * says in the scores payload (`captions`: rotary positions for Q and K, the folded norms); ""
 * when there is nothing to say or nothing to draw.
 */
export function scoresCaption(scores, kind, layers = 2) {
  if (layers < 2) return "";
  const caption = scores?.captions?.[kind];
  return typeof caption === "string" ? caption : "";
}

/**
 * "L0H1 → L1H2 · K path: 0.42 of the clean metric restored (next-token loss −1.23) · K-composition 0.18" for pair p
 * in causal mode: `value` its normalised path-patching effect, `effect` the change of the metric, `raw` its weight
 * score (NaN when the edge's layer pair was not computed).
 */
export function causalPairText(p, { value, effect, raw, kind, metric, name }) {
  const pair = `${name(p.l1, p.h1)} → ${name(p.l2, p.h2)}`;
  const weights = Number.isFinite(raw) ? ` · ${kind}-composition ${formatValue(raw)} (weights)` : "";
  if (!Number.isFinite(effect)) return `${pair} · ${kind} path not computed: select an edge of this layer pair${weights}`;
  const restored = Number.isFinite(value) ? `carries ${formatValue(value, 3)} of the clean − corrupted difference` : "not normalised";
  return `${pair} · ${kind} path: ${restored} (${metric || "metric"} ${effect >= 0 ? "+" : ""}${formatValue(effect)})${weights}`;
}

/** The note in causal mode: what the colours are and which layer pairs were computed for `kind`. */
export function causalNoteText({ kind, computed, metric, shown, cleanValue, corruptedValue, reason, direction = "denoising" }) {
  const pairs = (computed?.[kind] || []).map(([a, b]) => `${a}→${b}`);
  const which = pairs.length ? `layer pairs computed: ${pairs.join(", ")}` : "no layer pair computed yet";
  const ends = `clean ${formatValue(cleanValue)}, corrupted ${formatValue(corruptedValue)}`;
  const why = reason ? ` · ${reason}` : "";
  const how =
    direction === "noising"
      ? `the clean run with each ${kind} edge's corrupted sender output reaching only the receiver's ${kind.toLowerCase()} ` +
        `input, (clean − patched) / (clean − corrupted)`
      : `the corrupted run with each ${kind} edge's clean sender output reaching only the receiver's ${kind.toLowerCase()} ` +
        `input, (patched − corrupted) / (clean − corrupted)`;
  return `path patching: ${how} of the ${metric || "metric"} (${ends}) · ${which} · ${shown} edges above the threshold${why}`;
}
