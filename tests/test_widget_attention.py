"""AttentionPattern without a browser: traits, payloads, errors, coalescing, export."""

from __future__ import annotations

import asyncio
import base64
import json
import re

import ipywidgets
import pytest
import torch
import traitlets
from ipywidgets.widgets.widget import _remove_buffers
from planted import planted_model

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import attention_patterns
from circuitwidgets.widgets._export import export_html, widget_state
from circuitwidgets.widgets.attention import AttentionPattern

PROMPT = "t1 t2 t3 t4 t5 t1 t2 t3 t4 t5"
XSS = "t1 <img src=x onerror=alert(1)> </script><script>alert(2)</script>"


@pytest.fixture(scope="module")
def bare():
    """The planted_words model without a tokenizer."""
    return planted_model()[0]


def patterns_of(widget) -> torch.Tensor:
    return transport.decode(widget.patterns)


def test_payload_is_the_layer_as_uint8_lower_triangle(planted_words):
    model, heads = planted_words
    layer, head = heads["induction"]
    w = AttentionPattern(model, prompt=PROMPT, layer=layer, head=head)
    seq = 11  # BOS + 10 words
    assert w.error == ""
    assert w.str_tokens[:3] == ["<bos>", "t1", "t2"] and len(w.str_tokens) == seq
    assert w.patterns["shape"] == [4, seq, seq] and w.patterns["layout"] == "tril"
    assert len(w.patterns["data"]) == 4 * seq * (seq + 1) // 2
    exact = attention_patterns(model, PROMPT, layers=[layer])[0]
    assert (patterns_of(w) - exact).abs().max() <= transport.quantisation_step(w.patterns) + 1e-6
    assert torch.allclose(w.current_patterns(), exact)
    assert w.info == {"n_layers": 2, "n_heads": 4, "attn_layers": [0, 1], "n_ctx": 64, "has_tokenizer": True}
    # the planted_words induction head attends from the second t3 (position 8) to the token after the first t3
    assert int(exact[head, 8].argmax()) == 4


def test_traits_are_synced_and_documented():
    for name in ("prompt", "tokens", "layer", "head", "selection", "patterns", "row", "str_tokens", "error"):
        trait = AttentionPattern.class_traits()[name]
        assert trait.metadata.get("sync") is True, name
        assert trait.help, f"{name} has no help text"
    w = AttentionPattern(cw.demo_model(), prompt="abab", selection={"query": 2, "key": None, "locked": True})
    # each payload is one trait whose bytes leave the kernel as a binary buffer, not as JSON
    _, paths, buffers = _remove_buffers(w.get_state(["patterns", "row"]))
    sent = {tuple(path): len(buffer) for path, buffer in zip(paths, buffers, strict=True)}
    assert sent == {("patterns", "data"): len(w.patterns["data"]), ("row", "data"): len(w.row["data"])}


def test_prompt_change_reruns_and_head_change_does_not(planted_words):
    model, _ = planted_words
    w = AttentionPattern(model, prompt=PROMPT, layer=1)
    runs = w.refresh_count
    w.head = 3
    assert w.refresh_count == runs and w.head == 3
    before = w.patterns
    w.prompt = "t7 t8 t9"
    assert w.refresh_count == runs + 1
    assert w.str_tokens == ["<bos>", "t7", "t8", "t9"] and w.patterns != before
    w.layer = 0
    assert w.patterns["layer"] == 0
    assert torch.allclose(w.current_patterns(), attention_patterns(model, "t7 t8 t9", layers=[0])[0])


@pytest.mark.parametrize("name, value", [("head", 4), ("head", -1), ("layer", 2), ("layer", -1)])
def test_out_of_range_from_python_raises_and_shows_in_widget(planted_words, name, value):
    model, _ = planted_words
    w = AttentionPattern(model, prompt=PROMPT, layer=1, head=1)
    before = (w.patterns, w.layer, w.head)
    with pytest.raises(traitlets.TraitError, match=f"{name}={value} is out of range"):
        setattr(w, name, value)
    assert f"{name}={value} is out of range" in w.error
    assert (w.patterns, w.layer, w.head) == before  # the last good picture stays
    setattr(w, name, getattr(w, name))  # the same good value again (no change event) clears it
    assert w.error == ""
    with pytest.raises(traitlets.TraitError):
        setattr(w, name, value)
    w.head = 2
    assert w.error == ""


def test_non_int_head_is_a_trait_error(planted_words):
    w = AttentionPattern(planted_words[0], prompt=PROMPT)
    with pytest.raises(traitlets.TraitError):
        w.head = "2"


@pytest.mark.parametrize(
    "bad, message",
    [("", "prompt is empty"), (" ".join(["t1"] * 70), "longer than the model's n_ctx=64")],
)
def test_bad_prompt_keeps_last_picture(planted_words, bad, message):
    w = AttentionPattern(planted_words[0], prompt=PROMPT, layer=1)
    before = (w.patterns, list(w.str_tokens))
    with pytest.raises(traitlets.TraitError, match=message):  # the contract: raise in Python ...
        w.prompt = bad
    assert message in w.error  # ... and say it in the widget
    assert (w.patterns, list(w.str_tokens)) == before
    w.prompt = "t2 t3"
    assert w.error == "" and w.str_tokens == ["<bos>", "t2", "t3"]


def test_bad_constructor_arguments(planted_words, bare):
    with pytest.raises(ValueError, match="either prompt or tokens"):
        AttentionPattern(planted_words[0], prompt="t1", tokens=[0, 1])
    with pytest.raises(TypeError, match="prompt must be a str"):
        AttentionPattern(planted_words[0], prompt=3)
    with pytest.raises(traitlets.TraitError, match="head=9"):
        AttentionPattern(planted_words[0], prompt="t1", head=9)
    with pytest.raises(TypeError):
        AttentionPattern(object(), prompt="t1")
    with pytest.raises(traitlets.TraitError, match="no tokenizer"):  # a clear error, not a crash
        AttentionPattern(bare, prompt="t1")


def test_tokens_mode_labels_are_ids(bare):
    ids = [0, 5, 6, 7, 5, 6, 7]
    w = AttentionPattern(bare, tokens=torch.tensor(ids), layer=1, head=1)
    assert w.source == "tokens" and w.tokens == ids and w.str_tokens == [str(i) for i in ids]
    assert w.info["has_tokenizer"] is False
    assert torch.allclose(w.current_patterns(), attention_patterns(bare, torch.tensor(ids), layers=[1])[0])
    w.tokens = [0, 9, 9]
    assert w.str_tokens == ["0", "9", "9"]
    with pytest.raises(traitlets.TraitError, match="outside the vocabulary 0..63"):
        w.tokens = [0, 64]
    assert "outside the vocabulary 0..63" in w.error and w.str_tokens == ["0", "9", "9"]


def test_selection_sends_the_exact_row_of_every_head(planted_words):
    w = AttentionPattern(planted_words[0], prompt=PROMPT, layer=1)
    w.selection = {"query": 6, "key": 2, "locked": True}
    assert w.row["query"] == 6 and w.row["shape"] == [4, 11]
    assert w.row["revision"] == w.patterns["revision"]
    row = transport.decode(w.row)
    assert torch.equal(row, w.current_patterns()[:, 6, :])
    with pytest.raises(traitlets.TraitError, match="selection query=99 is out of range"):
        w.selection = {"query": 99, "key": None, "locked": False}  # out of range: refused, the row stays
    assert w.row["query"] == 6 and "query=99" in w.error and w.selection["query"] == 6


def test_browser_edits_coalesce_latest_wins(planted_words):
    """Prompt edits arriving from the browser in a burst cost one model run, on the last one."""
    w = AttentionPattern(planted_words[0], prompt=PROMPT, layer=1)
    runs = w.refresh_count

    async def burst():
        for i in range(1, 8):
            w.set_state({"prompt": " ".join(f"t{j}" for j in range(1, i + 1))})
            await asyncio.sleep(0)  # let the loop handle other messages, as the kernel does
        assert w.refresh_count == runs  # nothing ran yet: the refresh waits for the burst to end
        await asyncio.sleep(0.2)

    asyncio.run(burst())
    assert w.refresh_count == runs + 1
    assert w.str_tokens == ["<bos>"] + [f"t{j}" for j in range(1, 8)]


def test_a_message_on_a_kernel_subshell_thread_is_handled_on_the_kernel_loop_after_the_refresh(planted_words):
    """JupyterLab 4.6 sends widget messages to a kernel subshell, which ipykernel 7 runs on a thread of its own.

    A layer change arriving there while a refresh runs on the kernel's thread must neither be applied in
    the middle of it (taken for the widget's own assignment, never drawn) nor be lost: it is handled on the
    kernel's loop once the refresh has returned, and drawn.
    """
    import threading

    seen = []

    async def cell():
        w = AttentionPattern(planted_words[0], prompt=PROMPT, layer=0)
        w.finish_start()
        refresh = w._refresh

        def refresh_then_a_message_from_a_subshell():
            refresh()
            if not seen:  # (once) the browser picks layer 1 while this refresh is still running
                msg = {"content": {"data": {"method": "update", "state": {"layer": 1}, "buffer_paths": []}}, "buffers": []}
                subshell = threading.Thread(target=w._handle_msg, args=(msg,))
                subshell.start()
                subshell.join()
                seen.append(w.layer)

        w._refresh = refresh_then_a_message_from_a_subshell
        w.refresh()
        layers = [w.layer]
        for _ in range(200):
            await asyncio.sleep(0.01)
            if w.patterns.get("layer") == 1:
                break
        layers.append(w.layer)
        return w, layers

    w, layers = asyncio.run(cell())
    assert seen == [0] and layers == [0, 1]  # not applied on the other thread; applied on the loop
    assert w.patterns["layer"] == 1 and w.error == ""
    assert (transport.decode(w.patterns) - w.current_patterns()).abs().max() <= 1 / 254  # (uint8 steps)


@pytest.mark.parametrize("from_browser", [False, True])
def test_a_prompt_edit_drops_a_selection_past_its_end_and_keeps_one_inside(planted_words, from_browser):
    """Python reads what the page shows: the view drops a selection past the end of a shorter prompt, and so does
    the kernel (with its row); a selection inside the new prompt is kept and its row is the new prompt's."""
    w = AttentionPattern(planted_words[0], prompt="t1 t2 t3 t4 t5 t6 t7", layer=1)

    def edit(prompt):
        if from_browser:
            async def message():
                w.set_state({"prompt": prompt})
                await asyncio.sleep(0.2)  # the deferred refresh
            asyncio.run(message())
        else:
            w.prompt = prompt

    w.selection = {"query": 6, "key": 2, "locked": True}
    assert w.row["query"] == 6
    edit("t1 t2")  # 3 tokens: query 6 is past the end
    assert w.str_tokens == ["<bos>", "t1", "t2"]
    assert w.selection == {"query": None, "key": None, "locked": False}
    assert w.row.get("query") is None and "data" not in w.row and w.row["revision"] == w.patterns["revision"]
    w.selection = {"query": 2, "key": 1, "locked": True}
    edit("t3 t1 t2 t9")  # query 2 is still inside: kept, its row recomputed
    assert w.selection == {"query": 2, "key": 1, "locked": True}
    assert w.row["query"] == 2 and w.row["revision"] == w.patterns["revision"]
    assert torch.allclose(transport.decode(w.row), w.current_patterns()[:, 2, :])
    w.selection = {"query": 4, "key": None, "locked": False}  # the last token, hovered
    edit("t3 t1 t2 t9")  # the same prompt: nothing changes
    assert w.selection["query"] == 4 and w.row["query"] == 4 and w.error == ""


def test_python_edits_apply_at_once(planted_words):
    w = AttentionPattern(planted_words[0], prompt=PROMPT)
    w.prompt = "t3"
    assert w.str_tokens == ["<bos>", "t3"]  # no waiting: Python code reads the result right away


def _page_state(path):
    text = path.read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', text, re.S).group(1)
    return text, json.loads(block)


def test_save_html_is_self_contained(planted_words, tmp_path):
    w = AttentionPattern(planted_words[0], prompt=XSS, layer=1, head=1)
    path = w.save_html(tmp_path / "a.html")
    text, state = _page_state(path)
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", text), "the page must not load anything from the network"
    assert "cdn" not in text.lower() and "unpkg" not in text.lower()
    saved = state["widgets"][0]
    assert saved["_cw_view"] == "attention" and saved["str_tokens"] == w.str_tokens
    assert base64.b64decode(saved["patterns"]["data"]["$bytes"]) == w.patterns["data"]
    assert "<img" not in text  # token text is escaped inside the JSON
    assert text.count("</script>") == 2  # the state script and the module script: none from the prompt
    assert "_esm" not in saved and "layout" not in saved


def test_export_several_widgets_in_boxes_with_links(planted_words, tmp_path):
    model = planted_words[0]
    a = AttentionPattern(model, prompt=PROMPT, layer=0)
    b = AttentionPattern(model, prompt=PROMPT, layer=1)
    c = AttentionPattern(model, prompt="t1", layer=1)
    box = ipywidgets.VBox([ipywidgets.HTML("<b>Two layers</b>"), ipywidgets.HBox([a, b])])
    path = export_html([box, c], tmp_path / "many.html", links=[((a, "head"), (b, "head"))])
    _, state = _page_state(path)
    assert [s["patterns"]["layer"] for s in state["widgets"]] == [0, 1, 1]
    assert state["layout"] == {
        "box": "vbox",
        "children": [
            {"box": "vbox", "children": [{"text": "Two layers"}, {"box": "hbox", "children": [{"widget": 0}, {"widget": 1}]}]},
            {"widget": 2},
        ],
    }
    assert state["links"] == [[[0, "head"], [1, "head"]]]


def test_export_refuses_bad_input(planted_words, tmp_path):
    w = AttentionPattern(planted_words[0], prompt=PROMPT)
    with pytest.raises(ValueError, match="at least one"):
        export_html([], tmp_path / "x.html")
    with pytest.raises(ValueError, match=r"\.html"):
        w.save_html(tmp_path / "x.png")
    with pytest.raises(TypeError, match="IntSlider"):
        export_html([w, ipywidgets.IntSlider()], tmp_path / "x.html")
    with pytest.raises(ValueError, match="twice"):
        export_html([w, w], tmp_path / "x.html")
    with pytest.raises(ValueError, match="does not sync"):
        export_html([w], tmp_path / "x.html", links=[((w, "head"), (w, "nope"))])
    with pytest.raises(TypeError, match="circuitwidgets widget"):
        widget_state(ipywidgets.IntSlider())
