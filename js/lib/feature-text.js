// The words of the feature attention view: a feature's name, a bar's text, a list's extent (pure: tested in node).

import { quote } from "./layout.js";

/** A feature's name on a bar or a card: its label, else "#id". */
export function featureName(feature) {
  if (!feature) return "?";
  return feature.label ? `#${feature.id} ${feature.label}` : `#${feature.id}`;
}

/** The text of one bar of the split (pair, other pairs, a term). */
export function barText(bar, features) {
  if (bar.kind === "pair") {
    const names = (bar.features || []).map((n) => featureName(features[n]));
    if (bar.output != null) return `${names[0]} → ${bar.output}`;
    const at = bar.source != null ? ` @ ${bar.source} ${quote(bar.source_text ?? "")}` : "";
    return `${names[0]} × ${names[1]}${at}`;
  }
  return bar.label || bar.kind;
}

/** The largest |value| of a list of numbers (1e-9 when all are 0). */
export function extent(values) {
  let m = 0;
  for (const x of values) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x));
  return m > 0 ? m : 1e-9;
}
