// The prompt box of a view that runs the model on a sequence: text with a tokenizer, else token
// ids separated by spaces (checked here, so a typo shows at once and never reaches the kernel).

import { promptBox } from "./controls.js";
import { truncate } from "./layout.js";

/** A `promptBox` that sets the view's `prompt` (or `tokens`, without a tokenizer); read-only when exported. */
export function sequenceBox(v, hasTokenizer) {
  const box = promptBox({
    placeholder: hasTokenizer() ? "type a prompt, Enter to run" : "token ids separated by spaces, Enter to run",
    onSubmit: (text) => {
      if (hasTokenizer()) return v.set({ prompt: text });
      const ids = text
        .trim()
        .split(/[\s,]+/)
        .filter(Boolean)
        .map(Number);
      if (!ids.length || ids.some((x) => !Number.isInteger(x) || x < 0)) {
        v.error(`token ids must be non-negative integers separated by spaces; got ${JSON.stringify(truncate(text, 40))}`, "prompt");
        return;
      }
      v.error("", "prompt");
      v.set({ tokens: ids });
    },
  });
  if (v.standalone) box.readOnly(true, "exported page: no kernel to re-run the model");
  return box;
}
