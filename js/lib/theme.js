// Theme: the notebook's colours and fonts, for what the canvas draws (CSS handles the DOM).
//
// Which notebook frontend sets the theme, first match wins (detectTheme, a pure function):
//   1. JupyterLab / Notebook 7: <body data-jp-theme-light="true|false">, --jp-layout-color0
//   2. VS Code notebook webviews: --vscode-editor-background / -foreground, and <body> classes
//      vscode-dark, vscode-light, vscode-high-contrast (-light)
//   3. Colab: <html theme="dark|light">
//   4. the first opaque background among the widget's ancestors (a page that sets one)
//   5. prefers-color-scheme
// style.css resolves --cw-* variables in the same order; here we read the resolved values.

/** [r, g, b, alpha] of a CSS colour: #rgb, #rgba, #rrggbb, #rrggbbaa, rgb(), rgba(); else null. */
export function parseColor(css) {
  const s = String(css ?? "").trim();
  const hex = /^#([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i.exec(s);
  if (hex) {
    let d = hex[1];
    if (d.length <= 4) d = [...d].map((c) => c + c).join("");
    const n = (i) => parseInt(d.slice(i, i + 2), 16);
    return { rgb: [n(0), n(2), n(4)], alpha: d.length === 8 ? n(6) / 255 : 1 };
  }
  const m = /^rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:[ ,/]+([\d.]+%?))?/.exec(s);
  if (!m) return null;
  const alpha = m[4] === undefined ? 1 : m[4].endsWith("%") ? parseFloat(m[4]) / 100 : parseFloat(m[4]);
  return { rgb: [+m[1], +m[2], +m[3]], alpha };
}

/** Relative luminance in [0, 1] of an [r, g, b] colour. */
export function luminance([r, g, b]) {
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}

const isDark = (rgb) => luminance(rgb) < 0.45;

/** Backgrounds when a frontend says light or dark but gives no usable colour. */
export const DEFAULT_BG = { light: [255, 255, 255], dark: [17, 19, 24] };

/**
 * Which theme the page is in, from facts read off the DOM (all optional):
 *   jpLight: <body>'s data-jp-theme-light ("true" / "false"), jpBackground: --jp-layout-color0,
 *   vscodeBackground: --vscode-editor-background, bodyClasses: <body>'s classes (string or list),
 *   colabTheme: <html>'s theme attribute, pageBackground: the first opaque ancestor background
 *   ([r, g, b] or null), prefersDark: matchMedia("(prefers-color-scheme: dark)").matches.
 * Returns {source: "jupyterlab" | "vscode" | "colab" | "page" | "preference", dark, bg: [r, g, b]}.
 */
export function detectTheme(facts = {}) {
  const { jpLight, jpBackground, vscodeBackground, colabTheme, pageBackground, prefersDark } = facts;
  const classes = new Set(typeof facts.bodyClasses === "string" ? facts.bodyClasses.split(/\s+/) : facts.bodyClasses || []);
  const opaque = (css) => {
    const c = parseColor(css);
    return c && c.alpha > 0.5 ? c.rgb : null;
  };
  // bg: what the widget sits on (the page's background) when it agrees with `dark`, else the
  // frontend's own colour, else a default for `dark`.
  const pick = (source, dark, own) => {
    const d = dark ?? (own ? isDark(own) : pageBackground ? isDark(pageBackground) : !!prefersDark);
    const bg = [pageBackground, own].find((c) => c && isDark(c) === d);
    return { source, dark: d, bg: bg || DEFAULT_BG[d ? "dark" : "light"] };
  };

  if (jpLight === "true" || jpLight === "false") return pick("jupyterlab", jpLight === "false", opaque(jpBackground));
  if (opaque(jpBackground)) return pick("jupyterlab", null, opaque(jpBackground));

  const vscodeClass =
    classes.has("vscode-high-contrast-light") || classes.has("vscode-light")
      ? false
      : classes.has("vscode-dark") || classes.has("vscode-high-contrast")
        ? true
        : null;
  const vscodeBg = opaque(vscodeBackground);
  if (vscodeClass != null || vscodeBg) return pick("vscode", vscodeClass, vscodeBg);

  if (colabTheme === "dark" || colabTheme === "light") return pick("colab", colabTheme === "dark", null);

  if (pageBackground) return pick("page", null, pageBackground);
  return pick("preference", !!prefersDark, null);
}

/** The first ancestor background that is not transparent (a widget sits on the cell's background). */
function ancestorBackground(el) {
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
    const parsed = parseColor(getComputedStyle(node).backgroundColor);
    if (parsed && parsed.alpha > 0.5) return parsed.rgb;
  }
  return null;
}

/** The facts detectTheme reads, taken from the page around `el`. */
export function themeFacts(el) {
  const style = getComputedStyle(el);
  const doc = el.ownerDocument || document;
  return {
    jpLight: doc.body?.getAttribute("data-jp-theme-light") ?? undefined,
    jpBackground: style.getPropertyValue("--jp-layout-color0").trim(),
    vscodeBackground: style.getPropertyValue("--vscode-editor-background").trim(),
    bodyClasses: doc.body ? [...doc.body.classList] : [],
    colabTheme: doc.documentElement?.getAttribute("theme") ?? undefined,
    pageBackground: ancestorBackground(el),
    prefersDark: typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches,
  };
}

/** Colours and fonts to draw with, read from the element's computed style. */
export function readTheme(el) {
  const style = getComputedStyle(el);
  const v = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  const { source, dark, bg } = detectTheme(themeFacts(el));
  return {
    source,
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
    // JupyterLab flips data-jp-theme-* on <body>; VS Code changes classes on <body> and variables
    // in <html>'s style; Colab flips <html theme>.
    const mo = new MutationObserver(check);
    for (const node of [document.documentElement, document.body]) {
      if (node)
        mo.observe(node, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name", "style", "theme"] });
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
