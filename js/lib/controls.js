// DOM helpers and controls. Text always goes in through textContent: token strings are untrusted.

/** Create an element: h("div", {class: "x", text: "y", title, attrs: {...}, on: {click}}, children). */
export function h(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  const { class: cls, text, attrs, on, style, ...rest } = props;
  if (cls) node.className = cls;
  if (text != null) node.textContent = String(text);
  if (attrs) for (const [k, v] of Object.entries(attrs)) if (v != null && v !== false) node.setAttribute(k, v === true ? "" : String(v));
  if (style) Object.assign(node.style, style);
  for (const [k, v] of Object.entries(rest)) if (v !== undefined) node[k] = v;
  if (on) for (const [evt, fn] of Object.entries(on)) node.addEventListener(evt, fn);
  for (const child of [].concat(children)) if (child != null) node.append(child);
  return node;
}

/**
 * Hover and click on the items matching `selector` (each with data-index) inside `el`, reported by
 * index (hover: null on leaving). Returns the function that stops listening.
 */
export function itemEvents(el, selector, { onHover, onClick } = {}) {
  const indexOf = (node) => {
    const item = node?.closest?.(selector);
    return item && el.contains(item) ? Number(item.dataset.index) : null;
  };
  const handlers = {
    mouseover: (e) => {
      const i = indexOf(e.target);
      if (i !== null) onHover?.(i);
    },
    mouseleave: () => onHover?.(null),
    click: (e) => {
      const i = indexOf(e.target);
      if (i !== null) onClick?.(i);
    },
  };
  for (const [type, fn] of Object.entries(handlers)) el.addEventListener(type, fn);
  return () => {
    for (const [type, fn] of Object.entries(handlers)) el.removeEventListener(type, fn);
  };
}

/** Call fn at most once per `ms`, always delivering the latest arguments (leading and trailing call). */
export function throttle(fn, ms) {
  let last = 0;
  let timer = null;
  let pending = null;
  const fire = () => {
    timer = null;
    last = Date.now();
    const args = pending;
    pending = null;
    fn(...args);
  };
  const wrapped = (...args) => {
    pending = args;
    const wait = ms - (Date.now() - last);
    if (wait <= 0 && !timer) fire();
    else if (!timer) timer = setTimeout(fire, Math.max(0, wait));
  };
  wrapped.cancel = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    pending = null;
  };
  return wrapped;
}

/** Options of a select of numbers (layers, heads), each labelled with itself. */
export function numberOptions(values) {
  return values.map((x) => ({ value: x, label: String(x) }));
}

/** Options 0 … n-1 (the heads of a layer). */
export function indexOptions(n) {
  return numberOptions(Array.from({ length: n }, (_, i) => i));
}

/** A labelled <select>; returns {el, set(options, value), value(), disable(bool)}. */
export function selectControl(label, onChange, { title } = {}) {
  const select = h("select", { class: "cw-select", attrs: { "aria-label": label, title } });
  select.addEventListener("change", () => onChange(Number(select.value)));
  const el = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: label }), select]);
  return {
    el,
    select,
    set(options, value) {
      const key = options.map((o) => `${o.value}:${o.label}`).join("|");
      if (select.dataset.options !== key) {
        select.replaceChildren(...options.map((o) => h("option", { value: String(o.value), text: o.label })));
        select.dataset.options = key;
      }
      select.value = String(value);
    },
    disable(off) {
      select.disabled = !!off;
    },
  };
}

/**
 * The prompt box: Enter submits (Shift+Enter for a new line), and a pause in typing of `debounceMs`
 * submits too. `onSubmit(text)` is not called again for text already submitted.
 */
export function promptBox({ placeholder, debounceMs = 600, onSubmit, label = "prompt" }) {
  const area = h("textarea", { class: "cw-prompt", rows: 2, spellcheck: false, placeholder, attrs: { "aria-label": label } });
  let sent = null;
  let timer = null;
  const submit = () => {
    clearTimeout(timer);
    timer = null;
    if (area.value !== sent) {
      sent = area.value;
      onSubmit(area.value);
    }
  };
  area.addEventListener("keydown", (e) => {
    e.stopPropagation(); // keep notebook shortcuts and the widget's arrow keys out of the text
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  });
  area.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(submit, debounceMs);
  });
  return {
    el: area,
    /** Show `text` unless the user is typing in the box. */
    show(text) {
      if (document.activeElement === area && timer) return;
      area.value = text;
      sent = text;
    },
    readOnly(on, why) {
      area.readOnly = !!on;
      area.title = on ? why : "";
    },
    destroy() {
      clearTimeout(timer);
    },
  };
}

export function button(text, title, onClick) {
  return h("button", { class: "cw-button", type: "button", text, title, attrs: { "aria-label": title }, on: { click: onClick } });
}

/** The error line: hidden when the message is empty. */
export function errorBanner() {
  const el = h("div", { class: "cw-error", attrs: { role: "alert" } });
  el.hidden = true;
  return {
    el,
    show(message) {
      el.textContent = message || "";
      el.hidden = !message;
    },
  };
}
