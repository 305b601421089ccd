// What several node tests share (not a test itself: node --test runs only *.test.* files): a plain
// light theme for scenes, and a small stand-in DOM for code that builds elements (node has none).

export const theme = {
  fg: "#000",
  muted: "#555",
  border: "#ccc",
  accent: "#f00",
  bgCss: "rgb(255, 255, 255)",
  font: "sans-serif",
  mono: "monospace",
  dark: false,
};

/** An element of the stand-in DOM: children, attributes, dataset, style and listeners, nothing drawn. */
export class FakeElement {
  constructor(tag) {
    Object.assign(this, {
      tag,
      children: [],
      parentElement: null,
      dataset: {},
      style: {},
      attrs: {},
      listeners: new Map(),
      hidden: false,
      className: "",
    });
    this.nodeType = 1;
    this.textContent = "";
  }
  setAttribute(k, v) {
    this.attrs[k] = String(v);
  }
  append(...nodes) {
    for (const n of nodes) {
      n.parentElement = this;
      this.children.push(n);
    }
  }
  after(node) {
    const siblings = this.parentElement.children;
    node.parentElement = this.parentElement;
    siblings.splice(siblings.indexOf(this) + 1, 0, node);
  }
  prepend(node) {
    node.parentElement = this;
    this.children.unshift(node);
  }
  remove() {
    if (this.parentElement) this.parentElement.children = this.parentElement.children.filter((c) => c !== this);
    this.parentElement = null;
  }
  closest() {
    return this.tag === "textarea" ? this : null; // (a key pressed in a text box is the box's)
  }
  addEventListener(type, fn) {
    if (!this.listeners.has(type)) this.listeners.set(type, new Set());
    this.listeners.get(type).add(fn);
  }
  removeEventListener(type, fn) {
    this.listeners.get(type)?.delete(fn);
  }
  dispatchEvent(e) {
    for (const fn of this.listeners.get(e.type) || []) fn(e);
  }
}

/** Put the stand-in DOM in place: document.createElement, and getComputedStyle (the theme reads it). */
export function installFakeDom() {
  globalThis.document = { createElement: (tag) => new FakeElement(tag) };
  globalThis.getComputedStyle = () => ({ getPropertyValue: () => "", backgroundColor: "" });
}
