// The heads a Patching widget in attribution mode has patched exactly (its `verified` trait), read for one cell.

/**
 * The exact value and its normalised form of head `hd` of layer `layer` in `verified`
 * ({heads: [[layer, head]], values, normalised}; by position each value a list, read at `pos`), or null.
 */
export function verifiedValue(verified, layer, hd, pos = null) {
  const heads = verified?.heads || [];
  const i = heads.findIndex(([vl, vh]) => vl === layer && vh === hd);
  if (i < 0) return null;
  const pick = (x) => (Array.isArray(x) ? (pos == null ? null : x[pos]) : x);
  const value = pick(verified.values?.[i]);
  if (value == null) return null;
  const normalised = pick(verified.normalised?.[i]);
  return { value, normalised: normalised ?? Number.NaN };
}
