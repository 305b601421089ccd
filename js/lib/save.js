// Saving the current view: PNG from a canvas, SVG from a string, as a browser download.

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

export function savePNG(canvas, filename) {
  canvas.toBlob((blob) => blob && download(blob, filename), "image/png");
}

export function saveSVG(svgText, filename) {
  download(new Blob([svgText], { type: "image/svg+xml" }), filename);
}

/** A file-name-safe version of `s`. */
export function safeName(s) {
  return String(s).replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^_+|_+$/g, "") || "view";
}
