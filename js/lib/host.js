// A stand-in for the widget manager on an exported page: the same `model` interface render()
// gets in a notebook (get, set, on, off, save_changes, send), over state saved in the page.

export function fromBase64(b64) {
  // Native where the browser has it (Chromium 140+, Firefox 133+, Safari 18.2+): several times faster
  // than the loop on the megabytes of a 1 024-token pattern stack.
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(b64);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Saved state -> live values: {"$bytes": base64} becomes a DataView, as the widget manager gives. */
export function decodeState(value) {
  if (Array.isArray(value)) return value.map(decodeState);
  if (value && typeof value === "object") {
    if (typeof value.$bytes === "string" && Object.keys(value).length === 1) {
      const bytes = fromBase64(value.$bytes);
      return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decodeState(v)]));
  }
  return value;
}

export class StaticModel {
  constructor(state) {
    this.state = { ...state };
    this.handlers = new Map(); // event name -> Set of callbacks
    this.standalone = true; // views check this to disable what needs a kernel
  }

  get(name) {
    return this.state[name];
  }

  set(name, value) {
    const old = this.state[name];
    this.state[name] = value;
    if (old !== value) this.emit(`change:${name}`, value);
  }

  emit(event, value) {
    for (const fn of [...(this.handlers.get(event) || [])]) fn(value);
    if (event.startsWith("change:")) for (const fn of [...(this.handlers.get("change") || [])]) fn();
  }

  on(event, fn) {
    for (const name of event.split(/\s+/)) {
      if (!this.handlers.has(name)) this.handlers.set(name, new Set());
      this.handlers.get(name).add(fn);
    }
  }

  off(event, fn) {
    const names = event ? event.split(/\s+/) : [...this.handlers.keys()];
    for (const name of names) {
      if (!fn) this.handlers.delete(name);
      else this.handlers.get(name)?.delete(fn);
    }
  }

  save_changes() {} // nothing to sync with: no kernel

  send() {} // custom messages have no kernel to go to
}

/**
 * Render the widgets saved in an exported page into `container` with `render` (anywidget's).
 * payload: {widgets: [state, ...], layout?, links?: [[[i, name], [j, name]], ...]} where layout is
 * a tree of {box: "vbox" | "hbox", children: [...]}, {widget: i} and {text: "..."} nodes (without
 * one, the widgets are stacked). Returns {models, cleanup}.
 */
export function mountStandalone(container, payload, render) {
  const models = payload.widgets.map((state) => new StaticModel(decodeState(state)));
  const cleanups = [];
  const mountWidget = (i, parent) => {
    const item = document.createElement("div");
    item.className = "cw-export-item";
    parent.append(item);
    const cleanup = render({ model: models[i], el: item });
    if (typeof cleanup === "function") cleanups.push(cleanup);
  };
  const build = (node, parent) => {
    if (node && typeof node.widget === "number") {
      if (node.widget >= 0 && node.widget < models.length) mountWidget(node.widget, parent);
    } else if (node && typeof node.text === "string") {
      const p = document.createElement("div");
      p.className = "cw-export-text";
      p.textContent = node.text; // text only, never markup
      parent.append(p);
    } else if (node && Array.isArray(node.children)) {
      const box = document.createElement("div");
      box.className = node.box === "hbox" ? "cw-export-hbox" : "cw-export-vbox";
      parent.append(box);
      for (const child of node.children) build(child, box);
    }
  };
  build(payload.layout || { box: "vbox", children: models.map((_, i) => ({ widget: i })) }, container);
  for (const [[i, a], [j, b]] of payload.links || []) {
    models[i].on(`change:${a}`, () => models[j].set(b, models[i].get(a)));
    models[j].on(`change:${b}`, () => models[i].set(a, models[j].get(b)));
  }
  return {
    models,
    cleanup: () => {
      for (const fn of cleanups) fn();
    },
  };
}
