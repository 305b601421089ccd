// Saving what a view shows: its scene as PNG or SVG, offered as a browser download.

import { button } from "./controls.js";
import { SVG_CELLS_RULE, sceneCanvas, sceneToSVG } from "./scene.js";

/** Device px per CSS px of a saved PNG: the screen's pixel ratio, at least 2 (sharp when printed or zoomed). */
export function pngScale(dpr = globalThis.devicePixelRatio) {
  return Math.max(2, Number(dpr) || 1);
}

/** Offer `blob` as a download named `filename` (works in notebooks and on a plain page). */
export function download(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.style.display = "none";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** A file-name-safe version of `s`. */
export function safeName(s) {
  return (
    String(s)
      .replace(/[^A-Za-z0-9._-]+/g, "_")
      .replace(/^_+|_+$/g, "") || "view"
  );
}

/**
 * PNG and SVG buttons saving `picture()` (a scene, or null when there is nothing to save) on
 * `background()` as `name()`.png / .svg; `what` names the picture in the buttons' titles.
 * PNG resolution: `scale` device px per CSS px (default pngScale(): the screen's, at least 2).
 * SVG: heatmap cells follow the rule of scene.js (SVG_CELLS_RULE), told in the button's title.
 */
export function saveButtons({ what, picture, name, background, scale }) {
  const save = (kind) => () => {
    const scene = picture();
    if (!scene) return;
    const file = `${safeName(name())}.${kind}`;
    if (kind === "svg") {
      download(new Blob([sceneToSVG(scene, background())], { type: "image/svg+xml" }), file);
    } else {
      const canvas = sceneCanvas(scene, background(), scale ?? pngScale());
      canvas.toBlob((blob) => blob && download(blob, file), "image/png");
    }
  };
  const png = button("PNG", `save the ${what} as PNG`, save("png"));
  png.title = `save the ${what} as PNG (at the screen's pixel ratio, at least 2×)`;
  const svg = button("SVG", `save the ${what} as SVG`, save("svg"));
  svg.title = `save the ${what} as SVG (${SVG_CELLS_RULE})`; // the accessible name stays short
  return [png, svg];
}
