// The view scaffold: what every widget view shares, so that a view file holds only what it draws.
//
//   defineView("qk", (v) => { ...build the picture...; return { draw, keys, size, marks } });
//
// The scaffold owns the root element, listeners (removed on clean-up), the theme (redraw on
// change), the width (redraw when the view's size for it changes), keys, the error banner and busy
// mark, the draw counter with its data-cw-* marks and `cw-drawn` event, and the revision rule of
// the payloads. A view registers itself by name; `render` picks it by the model's `_cw_view`.

import { errorBanner, h } from "./controls.js";
import { modelNote } from "./note.js";
import { payloadReader } from "./payloads.js";
import { readTheme, watchTheme } from "./theme.js";
import { unsupportedNote } from "./unsupported.js";

/** Every view defined so far: name -> {name, render}. */
export const VIEWS = {};

/**
 * Define view `name`. setup(v) builds the view and returns its hooks, all optional:
 *   draw()            redraw everything (first picture, theme change, new size)
 *   start()           the first picture when it needs more than draw()
 *   keys: {key: fn}   keys handled when pressed inside the view (not in a text box or select)
 *   size(width)       the view's size for a root `width` (Infinity before it is known); v.size
 *   sizeStep          how far (px) v.size must move before a redraw (default 8)
 *   busy()            text of the busy mark (default "computing…" while the model is busy)
 *   marks()           {name: value} written as data-cw-<name> on every draw
 */
export function defineView(name, setup) {
  if (VIEWS[name]) throw new Error(`circuitwidgets: two views named ${name}`);
  const view = { name, render: ({ model, el }) => mount(name, setup, model, el) };
  VIEWS[name] = view;
  return view;
}

/** anywidget's render: the view named by the model's `_cw_view`; never a silent blank cell. */
export function render({ model, el }) {
  const name = model.get("_cw_view");
  const view = VIEWS[name];
  if (!view) {
    el.textContent = `circuitwidgets: no view named ${JSON.stringify(name)} in this bundle (reinstall the package?)`;
    return undefined;
  }
  try {
    return view.render({ model, el });
  } catch (err) {
    el.append(h("pre", { class: "cw-error", text: `circuitwidgets: the ${name} view failed to draw: ${err?.stack ?? err}` }));
    return undefined;
  }
}

const camel = (key) => `cw${key[0].toUpperCase()}${key.slice(1)}`;

function mount(name, setup, model, el) {
  // data-lm-suppress-shortcuts: JupyterLab leaves keys pressed inside the widget to the widget.
  const root = h("div", {
    class: `cw-root cw-${name}`,
    attrs: { tabindex: 0, "data-cw-kind": name, "data-lm-suppress-shortcuts": "true" },
  });
  el.append(root);
  const cleanups = [];
  let hooks = {};
  // A handler that throws shows its error in the view instead of failing silently.
  const guard =
    (fn) =>
    (...args) => {
      try {
        return fn(...args);
      } catch (err) {
        console.error(err);
        v.error(`circuitwidgets: the ${name} view failed: ${err?.message ?? err}`, "crash");
      }
    };
  const compact = compactMode(root, model);
  const banner = errorBanner();
  const v = viewContext({ name, model, root, banner, cleanups, guard, compact, hooks: () => hooks });

  hooks = setup(v) || {};
  compact.ready = true;
  compact.update();
  modelNote(v, banner.el); // a caption about the model shown (e.g. an ablation), under the banner
  unsupportedNote(v, banner.el); // controls this model's backend cannot serve: greyed, with the reason
  const redraw = guard(() => hooks.draw?.());
  v.size = hooks.size?.(Number.POSITIVE_INFINITY);
  v.on("change:error", v.refresh);
  v.on("change:busy", v.refresh);
  // A Dashboard keeps one layer/head pair (on its attention pattern): the others hide theirs (CSS).
  const headControls = () => {
    root.dataset.cwHeadControls = model.get("head_controls") === false ? "off" : "on";
  };
  headControls();
  v.on("change:head_controls", headControls);
  const resized = () => {
    // a compact view may size its picture differently (v.compact): its size again, and a redraw
    v.size = hooks.size?.(v.width > 0 ? v.width : Number.POSITIVE_INFINITY);
    redraw();
  };
  v.on("change:compact", () => {
    compact.expanded = false;
    if (compact.update()) resized();
  });
  v.listen(compact.more, "click", () => {
    compact.expanded = !compact.expanded;
    if (compact.update()) resized();
  });
  v.listen(root, "keydown", (e) => pressed(e, hooks.keys));
  cleanups.push(
    watchTheme(root, () => {
      v.theme = readTheme(root);
      redraw();
    }),
  );
  if (typeof ResizeObserver === "function") cleanups.push(watchWidth(v, hooks, redraw));
  v.refresh();
  guard(() => (hooks.start ?? hooks.draw)?.())();
  return () => {
    for (const fn of cleanups.reverse()) fn();
    root.remove();
  };
}

/**
 * The `v` a view's setup gets (see defineView): its root, model, theme and sizes, listeners and
 * owned things undone on clean-up (`guard` shows what a handler throws), the error banner and busy
 * mark, the payloads of one refresh and the draw counter. hooks() are the view's hooks, once set up.
 */
function viewContext({ name, model, root, banner, cleanups, guard, compact, hooks }) {
  const errors = new Map(); // local errors by source, shown when the model has none
  const busyMark = h("span", { class: "cw-busy", attrs: { "aria-live": "polite" } });
  busyMark.hidden = true;
  const v = {
    name,
    model,
    root,
    standalone: model.standalone === true, // an exported page: no kernel behind the model
    theme: readTheme(root),
    width: 0,
    size: undefined,
    /** True while the view is drawn compact (a Dashboard's first glance): sizes may be smaller. */
    get compact() {
      return compact.shown;
    },
    banner: banner.el,
    busyMark,
    ...undoneOnCleanup(model, cleanups, guard),
    /** Set model traits and send them to the kernel. */
    set(values) {
      for (const [k, value] of Object.entries(values)) model.set(k, value);
      model.save_changes();
    },
    /** Show a local error (`source` keeps several apart; "" clears); the model's error comes first. */
    error(message, source = "view") {
      errors.set(source, message || "");
      v.refresh();
    },
    /** Re-read the error banner and the busy mark. */
    refresh() {
      banner.show(model.get("error") || [...errors.values()].find(Boolean) || "");
      const busy = hooks().busy;
      const text = v.standalone ? "" : busy ? busy() : model.get("busy") ? "computing…" : "";
      busyMark.textContent = text;
      busyMark.hidden = !text;
    },
  };
  return Object.assign(v, payloadSets(v), { drawn: drawCounter(v, hooks) });
}

/** v.on, v.listen and v.own: each undone on clean-up (`cleanups`); handlers go through `guard`. */
function undoneOnCleanup(model, cleanups, guard) {
  return {
    /** Call fn on model events ("change:a change:b"); removed on clean-up. */
    on(events, fn) {
      const safe = guard(fn);
      for (const event of events.split(/\s+/).filter(Boolean)) {
        model.on(event, safe);
        cleanups.push(() => model.off(event, safe));
      }
    },
    /** addEventListener, removed on clean-up. */
    listen(target, type, fn) {
      const safe = guard(fn);
      target.addEventListener(type, safe);
      cleanups.push(() => target.removeEventListener(type, safe));
    },
    /** End `thing` on clean-up: its destroy() or cancel() (a throttled function), else call it; returns it. */
    own(thing) {
      cleanups.push(() => {
        if (thing.destroy) thing.destroy();
        else if (thing.cancel) thing.cancel();
        else thing();
      });
      return thing;
    },
  };
}

/** v.payloads and v.onPayloads: the payloads of one refresh of view `v`'s model. */
function payloadSets(v) {
  const readers = new Map();
  return {
    /**
     * The payloads `names` when their revisions agree, else the last set that did (null before):
     * a picture never mixes two refreshes.
     */
    payloads(...names) {
      const key = names.join(" ");
      if (!readers.has(key))
        readers.set(
          key,
          payloadReader(names, (n) => v.model.get(n)),
        );
      return readers.get(key)();
    },
    /**
     * Call fn(set) when the payloads `names` ("a b") form a new set whose revisions agree: a
     * payload that arrives ahead of the others of its refresh leaves the picture as it is.
     */
    onPayloads(names, fn) {
      const list = names.split(/\s+/).filter(Boolean);
      let seen = v.payloads(...list);
      v.on(list.map((n) => `change:${n}`).join(" "), () => {
        const now = v.payloads(...list);
        if (now === seen) return;
        seen = now;
        fn(now);
      });
    },
  };
}

/** v.drawn(what, t0): count a draw: data-cw-draws, the view's marks, and a `cw-drawn` event (t0: when it began). */
function drawCounter(v, hooks) {
  const { root } = v;
  let draws = 0;
  return (what, t0) => {
    draws += 1;
    root.dataset.cwDraws = String(draws);
    root.dataset.cwTheme = v.theme.dark ? "dark" : "light";
    root.dataset.cwThemeSource = v.theme.source; // which frontend said so (theme.js)
    const marks = hooks().marks ? hooks().marks() : {};
    for (const [k, value] of Object.entries(marks)) root.dataset[camel(k)] = String(value ?? "");
    if (typeof requestAnimationFrame === "function") {
      // When the picture reached the screen (benchmarks read this): the frame after the draw.
      requestAnimationFrame(() => {
        root.dataset.cwFrameAt = String(performance.now());
        root.dataset.cwFrameRevision = String(marks.revision ?? "");
      });
    }
    const detail = t0 == null ? { what } : { what, ms: performance.now() - t0 };
    root.dispatchEvent(new CustomEvent("cw-drawn", { bubbles: true, detail }));
  };
}

/**
 * Compact (the `compact` trait, a Dashboard's first glance): the root's cw-compact class hides long
 * captions and secondary panels (CSS); a "more" button at the foot shows them in this view alone.
 * update() shows the trait and the button's state; it returns true when the class came or went.
 */
function compactMode(root, model) {
  const more = h("button", { class: "cw-button cw-more", type: "button", attrs: { "aria-expanded": "false" } });
  const mode = {
    more,
    shown: false, // the cw-compact class is on the root
    ready: false, // the view's own elements are in the root (the button goes after them)
    expanded: false, // "more" was clicked: this view shows all while the trait stays on
    update() {
      const on = model.get("compact") === true;
      const was = mode.shown;
      mode.shown = on && !mode.expanded;
      root.classList?.toggle("cw-compact", mode.shown);
      root.dataset.cwCompact = on ? (mode.expanded ? "expanded" : "on") : "off";
      more.hidden = !on;
      more.textContent = mode.expanded ? "less ▴" : "more ▾";
      more.title = mode.expanded ? "back to the compact view" : "show this view's captions and other panels";
      more.setAttribute("aria-expanded", String(mode.expanded));
      if (on && mode.ready && !more.parentElement) root.append(more); // (only in a compact view: at its foot)
      return was !== mode.shown;
    },
  };
  mode.update();
  return mode;
}

/** A key pressed inside the view (not in a text box or select) goes to `keys` when it names it, and no further. */
function pressed(e, keys) {
  if (e.target.closest?.("textarea, input, select")) return;
  const fn = keys?.[e.key];
  if (!fn) return;
  e.preventDefault();
  e.stopPropagation(); // not also a notebook shortcut
  fn(e);
}

/**
 * Redraw when the root's width moves by more than hooks.sizeStep (pictures fit the width they are
 * given: a Dashboard's column, a resized window), or moves the view's size (hooks.size) by that
 * much; returns the clean-up.
 */
function watchWidth(v, hooks, redraw) {
  const step = hooks.sizeStep ?? 8;
  const resize = new ResizeObserver(() => {
    const width = v.root.clientWidth;
    if (!(width > 0)) return;
    const moved = Math.abs(width - v.width) > step;
    v.width = width;
    const next = hooks.size ? hooks.size(width) : v.size;
    if (moved || Math.abs(next - v.size) > step) {
      v.size = next;
      redraw();
    }
  });
  resize.observe(v.root);
  return () => resize.disconnect();
}
