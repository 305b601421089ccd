// Theme: the notebook's colours and fonts, for what the canvas draws (CSS handles the DOM).
//
// style.css resolves --cw-* variables from JupyterLab's --jp-* variables, then VS Code's
// --vscode-*, then prefers-color-scheme. Here we read the resolved values off the widget root.

function parseRGB(css) {
  const m = /rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:[ ,/]+([\d.]+%?))?/.exec(css || "");
  if (!m) return null;
  const alpha = m[4] === undefined ? 1 : m[4].endsWith("%") ? parseFloat(m[4]) / 100 : parseFloat(m[4]);
  return { rgb: [+m[1], +m[2], +m[3]], alpha };
}

/** Relative luminance in [0, 1] of an [r, g, b] colour. */
export function luminance([r, g, b]) {
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}

/** The first ancestor background that is not transparent (a widget sits on the cell's background). */
function effectiveBackground(el) {
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
    const parsed = parseRGB(getComputedStyle(node).backgroundColor);
    if (parsed && parsed.alpha > 0.5) return parsed.rgb;
  }
  const prefersDark = typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches;
  return prefersDark ? [17, 19, 24] : [255, 255, 255];
}

/** Colours and fonts to draw with, read from the element's computed style. */
export function readTheme(el) {
  const style = getComputedStyle(el);
  const v = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  const bg = effectiveBackground(el);
  const dark = luminance(bg) < 0.45;
  return {
    dark,
    bg,
    bgCss: `rgb(${bg.join(", ")})`,
    fg: v("--cw-fg", dark ? "#e6e6e6" : "#1f2328"),
    muted: v("--cw-muted", dark ? "#9aa0a6" : "#5f6368"),
    border: v("--cw-border", dark ? "#3c4043" : "#d0d7de"),
    accent: v("--cw-accent", dark ? "#ffb74d" : "#d9480f"),
    font: v("--cw-font", "system-ui, sans-serif"),
    mono: v("--cw-mono", "ui-monospace, Menlo, Consolas, monospace"),
  };
}

/** Call `onChange` when the notebook switches theme; returns the function that stops watching. */
export function watchTheme(el, onChange) {
  let last = JSON.stringify(readTheme(el));
  const check = () => {
    const now = JSON.stringify(readTheme(el));
    if (now !== last) {
      last = now;
      onChange(readTheme(el));
    }
  };
  const observers = [];
  if (typeof MutationObserver === "function" && typeof document !== "undefined") {
    // JupyterLab flips data-jp-theme-* on <body>; VS Code changes classes on <body> / <html>.
    const mo = new MutationObserver(check);
    for (const node of [document.documentElement, document.body]) {
      if (node) mo.observe(node, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name", "style"] });
    }
    observers.push(() => mo.disconnect());
  }
  if (typeof matchMedia === "function") {
    const mq = matchMedia("(prefers-color-scheme: dark)");
    mq.addEventListener("change", check);
    observers.push(() => mq.removeEventListener("change", check));
  }
  return () => {
    for (const stop of observers) stop();
  };
}
