// Revision consistency of a view's payloads (see design.md, "Transport").
//
// A payload is one trait, so its bytes and shape always agree; a picture built from several
// payloads must also see them from one refresh. The kernel stamps every payload of a refresh with
// the same `revision`, and some frontends (marimo) deliver changed traits one at a time, in any
// order: until the revisions agree, the view keeps drawing the last set that did.

/** True when every payload is an object and all carry the same `revision`. */
export function agree(payloads) {
  if (!payloads.length || payloads.some((p) => p == null || typeof p !== "object")) return false;
  return payloads.every((p) => p.revision === payloads[0].revision);
}

/**
 * A reader of the payloads `names` (read through `get(name)`): each call returns {name: payload}
 * for the newest values when their revisions agree, else the last set that agreed (null before any).
 * The same object comes back while the payloads are the same, so a caller can tell a new set.
 */
export function payloadReader(names, get) {
  let last = null;
  return () => {
    const now = names.map((name) => get(name));
    const same = last && names.every((name, i) => last[name] === now[i]);
    if (!same && agree(now)) last = Object.fromEntries(names.map((name, i) => [name, now[i]]));
    return last;
  };
}

/** True when `extra` (an optional payload) belongs to the same refresh as `base`. */
export function sameRevision(extra, base) {
  return agree([extra, base]);
}
