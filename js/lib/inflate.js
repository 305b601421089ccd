// Deflated payloads (circuitwidgets.transport.deflated): `encoding: "deflate"` marks a zlib stream,
// inflated here with the browser's DecompressionStream (no library; Node 18+ has it too).

import { bytesOf, CodeStack, hasData } from "./decode.js";

/** True when payload `p` travels deflated and must go through `inflated` before it is read. */
export function isDeflated(p) {
  return !!p && p.encoding != null;
}

/** The bytes of a zlib (RFC 1950) stream, inflated. */
export async function inflateBytes(data) {
  if (typeof DecompressionStream !== "function") throw new Error("this browser has no DecompressionStream to inflate the payload");
  const stream = new Blob([bytesOf(data)]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Payload `p` with plain bytes: itself when not deflated, else a copy holding the inflated bytes. */
export async function inflated(p) {
  if (!isDeflated(p)) return p;
  if (p.encoding !== "deflate") throw new TypeError(`unknown payload encoding ${JSON.stringify(p.encoding)}`);
  const data = await inflateBytes(p.data);
  if (p.raw_bytes != null && data.length !== p.raw_bytes)
    throw new RangeError(`inflated ${data.length} bytes; the payload says ${p.raw_bytes}`);
  const { encoding: _, raw_bytes: __, ...rest } = p;
  return { ...rest, data };
}

/**
 * A reader of payloads that arrive one after another, the newest winning: read(p, then, fail)
 * calls then(plain) with `p`'s plain bytes (at once when `p` is not deflated), or fail(err); an
 * earlier payload still inflating when a newer one comes is dropped, its answer and its error.
 */
export function newestInflated() {
  let newest = 0;
  return (p, then, fail) => {
    const ticket = ++newest;
    if (!isDeflated(p)) return then(p);
    inflated(p).then(
      (plain) => ticket === newest && then(plain),
      (err) => ticket === newest && fail(err),
    );
  };
}

/**
 * The start of a view's patterns: a handler that reads the newest `payload()` (inflated, the newest winning) into a
 * CodeStack (null for a payload without data) and calls show(p, stack); a failure is said in the view's "decode"
 * banner (and cleared by the next payload read).
 */
export function patternReader(v, payload, show) {
  const inflate = newestInflated();
  return () => {
    const p = payload();
    inflate(
      p,
      (plain) => show(p, stackOf(v, plain)),
      (err) => v.error(`could not inflate the patterns: ${err.message}`, "decode"),
    );
  };
}

function stackOf(v, plain) {
  try {
    const stack = hasData(plain) ? new CodeStack(plain) : null;
    v.error("", "decode");
    return stack;
  } catch (err) {
    v.error(`could not read the patterns: ${err.message}`, "decode");
    return null;
  }
}
