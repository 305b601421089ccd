"""SkipTrigrams in a real browser: in JupyterLab (clicks and typing re-centre it on a source, the
head control redraws it) and as exported HTML opened offline. Every list drawn is read back from
the DOM and compared with circuitwidgets.analysis."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import network_urls, open_notebook, open_offline, run_all, wait_drawn, write_notebook  # noqa: E402

import circuitwidgets as cw  # noqa: E402
from circuitwidgets.analysis import skip_trigram_sources, skip_trigrams  # noqa: E402

K, N_SOURCES = 5, 6
SETUP = """
import circuitwidgets as cw
model = cw.demo_model()
"""


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


def drawn_list(root, kind: str) -> tuple[list[int | None], list[float]]:
    """(ids, values) of the rows of list `kind` as the page shows them."""
    rows = root.locator(f"section[data-list={kind}] li")
    ids = [None if r.get_attribute("data-id") is None else int(r.get_attribute("data-id")) for r in rows.all()]
    return ids, [float(r.get_attribute("data-value")) for r in rows.all()]


def check_lists(root, model, layer: int, head: int, source: int) -> None:
    """The page draws the analysis of (layer, head, source): every list, ids and values."""
    assert root.get_attribute("data-cw-source") == str(source)
    assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == (str(layer), str(head))
    lists = skip_trigrams(model, layer, head, source, k=K)
    ids, values = drawn_list(root, "destinations")
    assert ids == lists.destinations.tolist()
    assert values == pytest.approx(lists.destination_values.tolist(), rel=1e-6)
    ids, values = drawn_list(root, "outs")
    assert ids == lists.outs.tolist()
    assert values == pytest.approx(lists.out_values.tolist(), rel=1e-6)
    _, values = drawn_list(root, "triples")
    assert values == pytest.approx([t[2] for t in lists.triples()], rel=1e-6)
    texts = root.locator("section[data-list=triples] li").all_inner_texts()
    for text, (_, out, _) in zip(texts, lists.triples(), strict=True):
        assert ("copy" in text) == (out == source), text
    ranked = skip_trigram_sources(model, layer, head, k=N_SOURCES)
    ids, values = drawn_list(root, "sources")
    assert ids == ranked.sources.tolist()
    assert values == pytest.approx(ranked.strengths.tolist(), rel=1e-6)
    headline = root.locator(".cw-tg-headline").inner_text()
    assert f"L{layer} H{head}" in headline and f"(id {source})" in headline


def wait_source(page, root, source: int) -> None:
    page.wait_for_function(
        "([el, s]) => el.dataset.cwSource === s", arg=[root.element_handle(), str(source)], timeout=30_000
    )


def test_in_jupyterlab(lab, page, model):
    widget = f"w = cw.SkipTrigrams(model, head=0, layer=1, k={K}, n_sources={N_SOURCES})\nw"
    write_notebook(lab.root / "trigrams_check.ipynb", [SETUP, widget])
    open_notebook(page, lab, "trigrams_check.ipynb")
    run_all(page)
    root = page.locator(".cw-root[data-cw-kind=trigrams]").first
    wait_drawn(root)
    strongest = int(skip_trigram_sources(model, 1, 0, k=1).sources[0])
    check_lists(root, model, 1, 0, strongest)  # opens on the strongest source

    # click the second destination: it becomes the source, every list redraws
    target = root.locator("section[data-list=destinations] li").nth(1)
    clicked = int(target.get_attribute("data-id"))
    target.locator(".cw-tg-token").click()
    wait_source(page, root, clicked)
    check_lists(root, model, 1, 0, clicked)

    # another head: the chosen source stays, the lists are that head's
    root.locator("select[aria-label=Head]").select_option("2")
    page.wait_for_function("(el) => el.dataset.cwHead === '2'", arg=root.element_handle())  # marks of the drawn payload
    check_lists(root, model, 1, 2, clicked)

    # typing a token, Enter
    box = root.locator("input[aria-label='source token']")
    box.fill("e")
    box.press("Enter")
    wait_source(page, root, 6)
    check_lists(root, model, 1, 2, 6)

    # a string of two tokens: the message in the widget, the picture kept
    box.fill("ab")
    box.press("Enter")
    banner = root.locator(".cw-error")
    banner.wait_for(state="visible")
    assert "2 tokens, not one" in banner.inner_text()
    check_lists(root, model, 1, 2, 6)

    # back to the strongest source of this head
    root.get_by_role("button", name="show the strongest source").click()
    strongest2 = int(skip_trigram_sources(model, 1, 2, k=1).sources[0])
    wait_source(page, root, strongest2)
    check_lists(root, model, 1, 2, strongest2)
    assert root.locator(".cw-error").is_hidden()
    assert page.cw_errors == []


def test_exported_html_offline(page, model, tmp_path):
    path = cw.SkipTrigrams(model, head=3, layer=1, source="a", k=K, n_sources=N_SOURCES).save_html(tmp_path / "trigrams.html")
    requested = open_offline(page, path)
    root = page.locator(".cw-root[data-cw-kind=trigrams]").first
    wait_drawn(root)
    check_lists(root, model, 1, 3, 2)
    assert root.locator("select[aria-label=Head]").is_disabled()
    assert root.locator("input[aria-label='source token']").is_disabled()
    assert network_urls(requested) == []
    assert page.cw_errors == []
