// The selection an attention view shares with the kernel (the `selection` trait), which answers the
// exact float32 weights of the selected destination's row (`row`): a read-out shows the quantised
// code, marked "≈", until that row arrives or where there is no kernel.

import { throttle } from "./controls.js";
import { floatValues, hasData } from "./decode.js";
import { sameRevision } from "./payloads.js";

const SEND_MS = 80; // the kernel learns the selection at most ~12 times a second

/** Selection `sel` ({query, key}, either may be null) and whether it is locked, as the trait holds it (JSON text). */
export function selectionKey(sel, locked) {
  return JSON.stringify({ query: sel?.query ?? null, key: sel?.key ?? null, locked });
}

/**
 * The exact row of the selection of view `v`. current() is the selection shown, {sel, locked};
 * patterns() the payload shown and head() its head shown.
 */
export class ExactRow {
  constructor(v, { current, patterns, head }) {
    Object.assign(this, { v, patterns, head });
    this.sent = null; // the selection sent last (its key): the model echoes it back
    this.send = v.own(
      throttle(() => {
        const { sel, locked } = current();
        const key = selectionKey(sel, locked);
        if (key === this.sent) return;
        this.sent = key;
        v.set({ selection: JSON.parse(key) });
      }, SEND_MS),
    );
  }

  /** The model's selection (set from Python, or saved in a page) as {sel, locked}; null when it is the one sent last. */
  received() {
    const value = this.v.model.get("selection") || {};
    if (selectionKey(value, !!value.locked) === this.sent) return null;
    const sel = value.query == null && value.key == null ? null : { query: value.query ?? null, key: value.key ?? null };
    return { sel, locked: !!value.locked };
  }

  /** The exact weights of `query` for the head shown, when the kernel sent them for this picture; else null. */
  values(query) {
    const row = this.v.model.get("row");
    if (!hasData(row) || row.query !== query || !sameRevision(row, this.patterns())) return null;
    const nKeys = row.shape[1];
    const index = row.heads ? row.heads.indexOf(this.head()) : this.head(); // (a remote model's row: the heads it holds)
    return index >= 0 && index < row.shape[0] ? floatValues(row).subarray(index * nKeys, (index + 1) * nKeys) : null;
  }
}
