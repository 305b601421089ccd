// SkipTrigrams view: for one source token, the ranked destinations (attention logits), outs
// (logits) and "source … destination → out" triples of a head, beside the ranking of source tokens
// by trigram strength. Clicking any token, or typing one, makes it the source (a kernel round trip);
// copying triples (out = source) are marked.

import { button, h, indexOptions, numberOptions, selectControl } from "../lib/controls.js";
import { floatValues, hasData } from "../lib/decode.js";
import { headKeys } from "../lib/heads.js";
import { displayToken, quote, truncate } from "../lib/layout.js";
import { formatValue } from "../lib/scales.js";
import { defineView } from "../lib/view.js";

defineView("trigrams", (v) => {
  const { model, standalone } = v;
  const info = () => model.get("info") || {};
  const shown = () => v.payloads("trigrams", "sources"); // one refresh's lists and ranking

  // ----- controls --------------------------------------------------------------------------
  const layerSelect = selectControl("Layer", (layer) => v.set({ layer }));
  const headSelect = selectControl("Head", (head) => v.set({ head }));
  const input = h("input", {
    class: "cw-input cw-tg-input",
    type: "text",
    spellcheck: false,
    placeholder: "a token or #id, then Enter", // a token id when the model has no tokenizer (set in draw)
    attrs: { "aria-label": "source token" },
  });
  const strongest = button("strongest", "show the strongest source of this head (and follow it when the head changes)", () =>
    v.set({ source: null }),
  );
  for (const control of [layerSelect, headSelect]) control.disable(standalone);
  input.disabled = strongest.disabled = standalone;
  v.listen(input, "keydown", (e) => {
    e.stopPropagation(); // keep notebook shortcuts and the arrow keys out of the text
    if (e.key === "Enter" && input.value !== "") {
      e.preventDefault();
      v.set({ typed: input.value }); // the kernel turns it into the source, or says why not
    }
  });
  const sourceField = h("label", { class: "cw-field" }, [h("span", { class: "cw-field-label", text: "Source" }), input]);
  const toolbar = h("div", { class: "cw-toolbar-row" }, [layerSelect.el, headSelect.el, sourceField, strongest, v.busyMark]);
  const headline = h("div", { class: "cw-tg-headline", attrs: { "aria-live": "polite" } });
  const columns = h("div", { class: "cw-tg-columns" });
  const note = h("div", { class: "cw-hint cw-tg-note" });
  v.root.append(toolbar, v.banner, headline, columns, note);
  v.root.classList.toggle("cw-tg-static", standalone); // a saved page: one source, no kernel to ask

  // every token drawn carries its id: a click on one makes it the source
  v.listen(columns, "click", (e) => {
    const item = e.target.closest?.(".cw-tg-token[data-id]");
    if (!item || standalone) return;
    v.set({ source: Number(item.dataset.id) });
  });

  // ----- drawing ---------------------------------------------------------------------------
  const tokenEl = (id, label, extra = "") =>
    h("span", {
      class: `cw-tg-token${extra}`,
      text: truncate(displayToken(label), 28),
      title: standalone ? `${quote(label, 80)} (id ${id})` : `${quote(label, 80)} (id ${id}): click to make it the source`,
      attrs: { "data-id": id, role: standalone ? null : "button" },
    });
  const bar = (value, max) => {
    const el = h("span", { class: `cw-tg-bar${value < 0 ? " cw-tg-neg" : ""}` });
    el.style.width = `${max > 0 ? Math.min(100, (100 * Math.abs(value)) / max) : 0}%`;
    return h("span", { class: "cw-tg-barbox" }, [el]);
  };
  const valueEl = (value) => h("span", { class: "cw-tg-value", text: formatValue(value, 4), attrs: { "data-value": String(value) } });

  /** One titled, ranked list; `rows` are [cells] with the row's value for its bar. */
  function list(kind, title, subtitle, rows) {
    const max = Math.max(0, ...rows.map((r) => Math.abs(r.value)));
    const items = rows.map((r, i) =>
      h(
        "li",
        {
          class: `cw-tg-row${r.mark ? " cw-tg-copy" : ""}`,
          attrs: { "data-rank": i, "data-id": r.id ?? null, "data-value": String(r.value) },
        },
        [
          h("span", { class: "cw-tg-rank", text: `${i + 1}` }),
          h("span", { class: "cw-tg-cells" }, r.cells),
          bar(r.value, max),
          valueEl(r.value),
          r.mark ? h("span", { class: "cw-tg-mark", text: r.mark, title: "copying: the out token is the source token" }) : h("span"),
        ],
      ),
    );
    return h("section", { class: `cw-tg-list cw-tg-${kind}`, attrs: { "data-list": kind } }, [
      h("div", { class: "cw-tg-title", text: title }),
      h("div", { class: "cw-hint cw-tg-subtitle", text: subtitle }),
      h("ol", {}, items),
    ]);
  }

  function draw() {
    const t0 = performance.now();
    syncControls();
    const set = shown();
    note.textContent = info().note || "";
    if (info().has_tokenizer === false) input.placeholder = "a token id, then Enter";
    if (!set || !hasData(set.trigrams) || !hasData(set.sources)) {
      headline.textContent = model.get("busy") ? "" : "no trigrams yet";
      return;
    }
    let values;
    let ranking;
    try {
      values = floatValues(set.trigrams);
      ranking = floatValues(set.sources);
      v.error("", "decode");
    } catch (err) {
      v.error(`could not read the trigrams: ${err.message}`, "decode");
      return;
    }
    const t = set.trigrams;
    const s = set.sources;
    const k = t.shape[1];
    const src = t.source;
    const label = new Map([[src, t.source_label]]);
    for (const [i, id] of t.destinations.entries()) label.set(id, t.destination_labels[i]);
    for (const [i, id] of t.outs.entries()) label.set(id, t.out_labels[i]);
    const tok = (id, extra) => tokenEl(id, label.get(id) ?? String(id), extra);
    const copy = (id) => (id === src ? "copy" : "");

    headline.replaceChildren(
      h("span", { text: `L${t.layer} H${t.head} · source ` }),
      tokenEl(src, t.source_label, " cw-tg-source"),
      h("span", {
        text: ` (id ${src}) · strength ${formatValue(t.strength, 4)}${t.following ? " · the strongest source of this head" : ""}`,
      }),
    );
    headline.dataset.source = String(src);

    const sourceRows = s.ids.map((id, i) => ({
      id,
      value: ranking[3 * i],
      cells: [
        tokenEl(id, s.labels[i], id === src ? " cw-tg-current" : ""),
        h("span", { class: "cw-tg-arrow", text: " … " }),
        tokenEl(s.destinations[i], s.destination_labels[i]),
        h("span", { class: "cw-tg-arrow", text: " → " }),
        tokenEl(s.outs[i], s.out_labels[i], s.outs[i] === id ? " cw-tg-copied" : ""),
      ],
      mark: s.outs[i] === id ? "copy" : "",
    }));
    const destRows = t.destinations.map((id, i) => ({ id, value: values[i], cells: [tok(id)] }));
    const outRows = t.outs.map((id, i) => ({
      id,
      value: values[k + i],
      cells: [tok(id, copy(id) ? " cw-tg-copied" : "")],
      mark: copy(id),
    }));
    const tripleRows = t.triples.map(([d, o], i) => ({
      value: values[2 * k + i],
      cells: [
        tok(src),
        h("span", { class: "cw-tg-arrow", text: " … " }),
        tok(d),
        h("span", { class: "cw-tg-arrow", text: " → " }),
        tok(o, copy(o) ? " cw-tg-copied" : ""),
      ],
      mark: copy(o),
    }));
    columns.replaceChildren(
      list("sources", "Strongest sources", "strength = max(0, top QK) · max(0, top OV); its best destination → out", sourceRows),
      list("destinations", "Destinations (query)", "attend to the source: W_E W_QK W_Eᵀ / scale, column source", destRows),
      list("outs", "Outs", "logits the source raises: W_E W_OV W_U, row source", outRows),
      list("triples", "Triples: source … destination → out", "top destinations × top outs, by QK · OV", tripleRows),
    );
    v.drawn("trigrams", t0);
  }

  function syncControls() {
    const shownLayer = shown()?.trigrams.layer ?? model.get("layer");
    const layers = standalone ? [shownLayer] : info().attn_layers || [model.get("layer")];
    layerSelect.set(numberOptions(layers), standalone ? shownLayer : model.get("layer"));
    const shownHead = standalone ? (shown()?.trigrams.head ?? model.get("head")) : model.get("head");
    headSelect.set(indexOptions(info().n_heads || 1), shownHead);
  }

  v.onPayloads("trigrams sources", draw);
  v.on("change:layer change:head change:info", syncControls);
  v.on("change:progress", v.refresh);

  return {
    draw,
    busy: () => model.get("progress") || (model.get("busy") ? "computing…" : ""),
    keys: standalone ? {} : headKeys(v, { layers: true }),
    marks: () => {
      const t = shown()?.trigrams;
      return { layer: t?.layer ?? "", head: t?.head ?? "", source: t?.source ?? "", revision: t?.revision ?? "" };
    },
  };
});
