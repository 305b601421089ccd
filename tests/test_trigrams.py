"""Skip-trigrams: `skip_trigrams` / `skip_trigram_sources` against dense brute force, a planted
one-layer model whose trigrams are known, and the `SkipTrigrams` widget's payloads against the analysis."""

from __future__ import annotations

import math

import pytest
import torch
import traitlets
from factories import small_bridge
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import skip_trigram_sources, skip_trigrams
from circuitwidgets.analysis.trigrams import TrigramSources
from circuitwidgets.demo import model_card

# ----- dense brute force -------------------------------------------------------------------------


def dense(model, layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(QK / attn_scale [query d, key s], OV [source s, out o])`` as full float64 matrices."""
    view = cw.as_view(model)
    i = view.attn_layers.index(layer)
    W_E, W_U = view.W_E.double(), view.W_U.double()
    W_Q, W_K, W_V, W_O = (getattr(view, n)[i, head].double() for n in ("W_Q", "W_K", "W_V", "W_O"))
    qk = W_E @ W_Q @ W_K.T @ W_E.T / view.attn_scale
    ov = W_E @ W_V @ W_O @ W_U
    return qk, ov


MODELS = {
    "two_layer": lambda: small_bridge(),
    "grouped_kv": lambda: small_bridge(n_key_value_heads=2),
    "layernorm_mlp": lambda: small_bridge(attn_only=False, d_mlp=128, normalization_type="LN", d_vocab=300),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def random_model(request):
    return MODELS[request.param]()


@pytest.mark.parametrize("layer, head", [(0, 1), (1, 3)])
def test_lists_equal_dense_column_and_row(random_model, layer, head):
    qk, ov = dense(random_model, layer, head)
    vocab = qk.shape[0]
    for source in (0, 7, vocab - 1):
        lists = skip_trigrams(random_model, layer, head, source, k=6)
        assert lists.source == source
        top_qk = torch.topk(qk[:, source], 6)
        top_ov = torch.topk(ov[source], 6)
        torch.testing.assert_close(lists.destination_values.double(), top_qk.values, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(lists.out_values.double(), top_ov.values, atol=1e-4, rtol=1e-4)
        # the ids have those values (ties aside, they are the dense top-k ids)
        torch.testing.assert_close(qk[lists.destinations, source], top_qk.values, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(ov[source, lists.outs], top_ov.values, atol=1e-4, rtol=1e-4)
        assert float(lists.strength) == pytest.approx(
            max(0.0, float(top_qk.values[0])) * max(0.0, float(top_ov.values[0])), rel=1e-4, abs=1e-6
        )


def test_sources_equal_dense_maxima(random_model):
    layer, head = 1, 2
    qk, ov = dense(random_model, layer, head)
    vocab = qk.shape[0]
    col_max, row_max = qk.max(dim=0).values, ov.max(dim=1).values
    expected = col_max.clamp_min(0) * row_max.clamp_min(0)
    ranked = skip_trigram_sources(random_model, layer, head, k=vocab)
    assert sorted(ranked.sources.tolist()) == list(range(vocab))
    assert bool((ranked.strengths[:-1] >= ranked.strengths[1:]).all())
    ids = ranked.sources
    torch.testing.assert_close(ranked.strengths.double(), expected[ids], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ranked.top_qk.double(), col_max[ids], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ranked.top_ov.double(), row_max[ids], atol=1e-4, rtol=1e-4)
    # the named destination and out hold those maxima
    torch.testing.assert_close(qk[ranked.destinations, ids], col_max[ids], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ov[ids, ranked.outs], row_max[ids], atol=1e-4, rtol=1e-4)
    # the strongest source by brute force leads, and its strength is its lists' strength
    assert float(expected.max()) == pytest.approx(float(ranked.strengths[0]), rel=1e-4)
    assert float(skip_trigrams(random_model, layer, head, int(ids[0])).strength) == pytest.approx(
        float(ranked.strengths[0]), rel=1e-4
    )


def test_chunking_and_progress_do_not_change_the_answer():
    model = small_bridge(d_vocab=300)
    whole = skip_trigram_sources(model, 0, 0, k=300)
    seen = []
    chunked = skip_trigram_sources(model, 0, 0, k=300, chunk_size=7, progress=lambda done, total: seen.append((done, total)))
    torch.testing.assert_close(chunked.strengths, whole.strengths, atol=1e-5, rtol=1e-5)
    assert seen[-1] == (600, 600) and len(seen) == 2 * math.ceil(300 / 7)
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:], strict=False))

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        skip_trigram_sources(model, 0, 0, progress=stop)


def test_triples_are_products_of_the_lists():
    model = small_bridge()
    lists = skip_trigrams(model, 1, 0, 5, k=4)
    triples = lists.triples()
    assert len(triples) == 4 and len(lists.triples(16)) == 16
    products = {
        (int(d), int(o)): float(dv * ov)
        for d, dv in zip(lists.destinations, lists.destination_values, strict=True)
        for o, ov in zip(lists.outs, lists.out_values, strict=True)
    }
    best = sorted(products.values(), reverse=True)[:16]
    assert [t[2] for t in lists.triples(16)] == pytest.approx(best)
    for d, o, score in triples:
        assert products[(d, o)] == pytest.approx(score)


def test_sources_by_string_and_hash_id(demo):
    by_char = skip_trigrams(demo, 1, 0, "a", k=3)
    assert by_char.source == 2
    assert skip_trigrams(demo, 1, 0, "#2", k=3).destinations.tolist() == by_char.destinations.tolist()
    assert skip_trigrams(demo, 1, 0, torch.tensor(2), k=3).source == 2


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(source="ab"), ValueError, "2 tokens, not one"),
        (dict(source=64), ValueError, "out of range"),
        (dict(source=-1), ValueError, "out of range"),
        (dict(source=2.0), TypeError, "source must be a token id"),
        (dict(source=True), TypeError, "source must be a token id"),
        (dict(source=[2]), TypeError, "source must be a token id"),
        (dict(head=4), ValueError, "head=4 is out of range"),
        (dict(layer=2), ValueError, "layer=2 is out of range"),
        (dict(k=0), ValueError, "k=0 is out of range"),
        (dict(k=65), ValueError, "k=65 is out of range"),
    ],
)
def test_bad_arguments(demo, kwargs, error, match):
    args = {"layer": 1, "head": 0, "source": 2, "k": 3, **kwargs}
    with pytest.raises(error, match=match):
        skip_trigrams(demo, **args)


def test_sources_bad_arguments(demo):
    with pytest.raises(ValueError, match="k=0"):
        skip_trigram_sources(demo, 1, 0, k=0)
    with pytest.raises(TypeError, match="chunk_size"):
        skip_trigram_sources(demo, 1, 0, chunk_size=1.5)
    with pytest.raises(TypeError, match="no tokenizer"):
        skip_trigrams(small_bridge(), 0, 0, "a")


def test_never_vocab_by_vocab(monkeypatch):
    """No product of the lists or the ranking is wider than d_vocab x chunk (a 2 000-token vocabulary)."""
    model = small_bridge(d_vocab=2000)
    biggest = []
    real = torch.matmul

    def spy(a, b, *args, **kwargs):
        out = real(a, b, *args, **kwargs)
        biggest.append(out.numel())
        return out

    monkeypatch.setattr(torch, "matmul", spy)
    skip_trigram_sources(model, 0, 0, chunk_size=100)
    assert biggest and max(biggest) <= 100 * 2000
    torch.testing.assert_close(
        skip_trigrams(model, 0, 0, 3).out_values.double(), torch.topk(dense(model, 0, 0)[1][3], 10).values, atol=1e-4, rtol=1e-4
    )


# ----- a one-layer model with planted trigrams ---------------------------------------------------

VOCAB, D_HEAD = 32, 4
# head -> [(source, destination, out, QK logit, OV logit)]: each trigram on its own head dimension
PLANTED = {
    0: [(3, 5, 7, 8.0, 2.0), (10, 11, 10, 6.0, 1.5)],  # the second one copies
    1: [(20, 21, 22, 5.0, 3.0)],
}


def planted_one_layer() -> TransformerBridge:
    """One layer, two heads of 4, d_model = d_vocab = 32 with one-hot embeddings and unembeddings."""
    cfg = TransformerBridgeConfig(
        d_model=VOCAB, d_head=D_HEAD, n_heads=2, n_layers=1, n_ctx=16, d_vocab=VOCAB, attn_only=True,
        normalization_type=None, seed=0,
    )
    model = TransformerBridge.boot_native(cfg)
    scale = math.sqrt(D_HEAD)
    W = {n: torch.zeros(2, VOCAB, D_HEAD) for n in ("W_Q", "W_K", "W_V")}
    W_O = torch.zeros(2, D_HEAD, VOCAB)
    for head, trigrams in PLANTED.items():
        for dim, (s, d, o, qk, ov) in enumerate(trigrams):
            W["W_Q"][head, d, dim] = qk * scale  # QK[d, s] / scale = qk
            W["W_K"][head, s, dim] = 1.0
            W["W_V"][head, s, dim] = 1.0
            W_O[head, dim, o] = ov
    params = dict(model.named_parameters())

    def param(suffix):
        (name,) = [n for n in params if n.endswith(suffix)]
        return params[name]

    attn = "layers.0._original_component.attn._original_component."
    with torch.no_grad():
        param("tok_embed._original_component.weight").copy_(torch.eye(VOCAB))
        param("pos._original_component.weight").zero_()
        param("head._original_component.weight").copy_(torch.eye(VOCAB))
        for short, name in (("q", "W_Q"), ("k", "W_K"), ("v", "W_V")):
            param(f"{attn}{short}._original_component.weight").copy_(W[name].permute(0, 2, 1).reshape(2 * D_HEAD, VOCAB))
            param(f"{attn}{short}._original_component.bias").zero_()
        param(f"{attn}o._original_component.weight").copy_(W_O.reshape(2 * D_HEAD, VOCAB).T)
        param(f"{attn}o._original_component.bias").zero_()
    assert torch.equal(model.W_Q.detach()[0], W["W_Q"]) and torch.equal(model.W_O.detach()[0], W_O)
    return model.eval()


@pytest.fixture(scope="module")
def one_layer():
    return planted_one_layer()


def test_planted_trigrams_top_the_lists(one_layer):
    for head, trigrams in PLANTED.items():
        ranked = skip_trigram_sources(one_layer, 0, head, k=len(trigrams))
        # strongest first: QK logit x OV logit of each planted trigram
        order = sorted(trigrams, key=lambda t: -t[3] * t[4])
        assert ranked.sources.tolist() == [t[0] for t in order]
        assert ranked.strengths.tolist() == pytest.approx([t[3] * t[4] for t in order])
        assert ranked.destinations.tolist() == [t[1] for t in order]
        assert ranked.outs.tolist() == [t[2] for t in order]
        for s, d, o, qk, ov in trigrams:
            lists = skip_trigrams(one_layer, 0, head, s, k=3)
            assert int(lists.destinations[0]) == d and float(lists.destination_values[0]) == pytest.approx(qk)
            assert int(lists.outs[0]) == o and float(lists.out_values[0]) == pytest.approx(ov)
            assert lists.triples(1) == [(d, o, pytest.approx(qk * ov))]


def test_widget_opens_on_the_strongest_planted_trigram_and_marks_copying(one_layer):
    w = cw.SkipTrigrams(one_layer, head=0, k=3, n_sources=4)
    assert w.layer == 0 and w.source is None
    assert w.shown_source == 3 and w.trigrams["following"] is True
    assert w.trigrams["destinations"][0] == 5 and w.trigrams["outs"][0] == 7 and w.trigrams["triples"][0] == [5, 7]
    w.source = 10  # the copying trigram [10] ... [11] -> [10]
    assert w.trigrams["triples"][0] == [11, 10] and w.trigrams["outs"][0] == w.shown_source == 10
    assert w.sources["outs"][:2] == [7, 10] and w.sources["ids"][:2] == [3, 10]
    w.source = None
    w.head = 1  # following the strongest source: the head's own
    assert w.shown_source == 20 and w.trigrams["triples"][0] == [21, 22]
    w.source = 3
    w.head = 0
    assert w.shown_source == 3  # a chosen source stays when the head changes


# ----- the widget -------------------------------------------------------------------------------


def check_payloads(w, model) -> None:
    """The widget's payloads decode to the analysis of its layer, head and source."""
    t, s = w.trigrams, w.sources
    assert t["revision"] == s["revision"] == w.revision
    lists = skip_trigrams(model, w.layer, w.head, t["source"], k=w.k)
    values = transport.decode(t)
    assert t["shape"] == [3, w.k]
    torch.testing.assert_close(values[0], lists.destination_values)
    torch.testing.assert_close(values[1], lists.out_values)
    torch.testing.assert_close(values[2], torch.tensor([x[2] for x in lists.triples()]))
    assert t["destinations"] == lists.destinations.tolist() and t["outs"] == lists.outs.tolist()
    assert t["triples"] == [[d, o] for d, o, _ in lists.triples()]
    view = cw.as_view(model)
    assert t["destination_labels"] == view.token_strings(t["destinations"])
    assert t["out_labels"] == view.token_strings(t["outs"])
    assert t["source_label"] == view.token_strings([t["source"]])[0]
    ranked = skip_trigram_sources(model, w.layer, w.head, k=w.n_sources)
    torch.testing.assert_close(transport.decode(s), torch.stack([ranked.strengths, ranked.top_qk, ranked.top_ov], dim=1))
    assert s["ids"] == ranked.sources.tolist() and s["labels"] == view.token_strings(s["ids"])
    assert s["destinations"] == ranked.destinations.tolist() and s["outs"] == ranked.outs.tolist()
    assert (t["layer"], t["head"], s["layer"], s["head"]) == (w.layer, w.head, w.layer, w.head)


def test_widget_payloads_equal_the_analysis(demo):
    w = cw.SkipTrigrams(demo, head=2, layer=1, k=6, n_sources=8)
    check_payloads(w, demo)
    assert w.shown_source == w.ranked_sources()[0]
    for change in (dict(source="e"), dict(head=3), dict(layer=0), dict(k=4), dict(n_sources=3), dict(source="#40")):
        before = w.revision
        for name, value in change.items():
            setattr(w, name, value)
        assert w.revision == before + 1, change
        check_payloads(w, demo)
    assert w.shown_source == 40 and w.source == 40
    assert "Exact skip-trigrams only for a one-layer attention-only model" in w.info["note"] and not w.info["exact"]


def test_widget_bad_input_shows_the_message_and_keeps_the_picture(demo):
    w = cw.SkipTrigrams(demo, head=1, source="a")
    assert w.layer == 0  # the first attention layer by default
    shown = dict(w.trigrams)
    for name, value, match in (
        ("source", "ab", "2 tokens, not one"),
        ("source", 99, "out of range"),
        ("head", 4, "head=4 is out of range"),
        ("layer", 5, "layer=5 is out of range"),
        ("k", 0, "k=0 is out of range"),
        ("n_sources", 1000, "n_sources=1000 is out of range"),
    ):
        with pytest.raises(traitlets.TraitError, match=match):
            setattr(w, name, value)
        assert match.split()[0] in w.error
        assert w.trigrams == shown
    w.source = "b"
    assert w.error == "" and w.shown_source == 3
    w.typed = "cd"  # what the browser's source box sends: the message shows, nothing raises
    assert "2 tokens, not one" in w.error and w.typed == "" and w.shown_source == 3
    w.typed = "e"
    assert w.error == "" and w.typed == "" and w.source == w.shown_source == 6
    w.typed = "cd"
    w.source = None  # a good value clears the message
    assert w.error == "" and w.shown_source == w.ranked_sources()[0]
    w.set_state({"typed": "e"})  # as the browser sends them
    w.set_state({"typed": "cd"})
    assert "2 tokens, not one" in w.error and w.shown_source == 6
    w.set_state({"source": None})  # the "strongest" button
    assert w.error == "" and w.source is None and w.shown_source == w.ranked_sources()[0]
    w.set_state({"source": 7})  # a click on a token
    assert w.shown_source == 7


def test_widget_constructor_errors(demo):
    with pytest.raises(traitlets.TraitError, match="2 tokens"):
        cw.SkipTrigrams(demo, source="xy")
    with pytest.raises(TypeError, match="did you mean 'source'"):
        cw.SkipTrigrams(demo, sourc=2)
    with pytest.raises(traitlets.TraitError, match="head=9"):
        cw.SkipTrigrams(demo, head=9)


def test_widget_without_tokenizer_and_exact_note(one_layer):
    w = cw.SkipTrigrams(one_layer, head=1, source="#20")
    assert w.shown_source == 20 and w.trigrams["source_label"] == "20"
    assert w.info["exact"] is True and "these are its skip-trigrams" in w.info["note"]
    with pytest.raises(traitlets.TraitError, match="no tokenizer"):
        w.source = "a"
    w.typed = "21"  # digits typed in the box are an id when there is no tokenizer
    assert w.shown_source == 21 and w.error == ""


def test_widget_follows_weight_edits():
    model = cw.demo_model()
    w = cw.SkipTrigrams(model, head=0, source="a", k=3)
    with torch.no_grad():
        next(p for n, p in model.named_parameters() if n.endswith("tok_embed._original_component.weight")).mul_(2)
    w.refresh()
    check_payloads(w, model)



# ----- the one-layer demo model --------------------------------------------------------------------


def test_widget_recovers_the_planted_trigrams_of_the_one_layer_demo():
    """Every planted trigram the card says a head finds is in that head's top-10 lists in the widget."""
    model, card = cw.demo_model("1l"), model_card("1l")
    found_by = card["metrics"]["trigram_heads"]
    w = cw.SkipTrigrams(model, head=0, k=10)
    assert w.info["exact"] is True
    found_any = 0
    for trigram in card["planted_trigrams"]:
        s, d, o = trigram["source"], trigram["destination"], trigram["out"]
        heads = [int(name.split(".")[1]) for name in found_by[f"{s}...{d}->{o}"]]
        found_any += bool(heads)
        for head in range(model.cfg.n_heads):
            w.head, w.source = head, s
            t = w.trigrams
            assert t["source_label"] == s
            found = d in t["destination_labels"] and o in t["out_labels"]
            assert found == (head in heads), (s, d, o, head)
    assert found_any / len(card["planted_trigrams"]) == card["metrics"]["trigrams_found_by_any_head"]
    assert found_any / len(card["planted_trigrams"]) >= 0.9


@pytest.mark.parametrize(
    "overrides, exact",
    [
        (dict(n_layers=1), True),
        (dict(n_layers=1, normalization_type="LN"), False),
        (dict(n_layers=1, attn_only=False, d_mlp=32), False),
    ],
)
def test_the_widget_says_when_its_trigrams_are_exact(overrides, exact):
    w = cw.SkipTrigrams(small_bridge(**overrides), head=0, source=3, k=2)
    assert w.info["exact"] is exact
    assert ("these are its skip-trigrams" in w.info["note"]) is exact
    assert "the positional term" in w.info["note"]


def test_widget_reports_the_ranking_progress_while_it_runs(monkeypatch):
    """The ranking of every source is the long part on a big vocabulary: the widget says how far it is."""
    from circuitwidgets import weight_views

    monkeypatch.setattr(weight_views, "TRIGRAM_ENTRIES", 30 * 3000)  # 30 rows a chunk: 200 progress reports
    model = small_bridge(d_vocab=3000, d_model=32, d_head=8, n_ctx=16)
    w = cw.SkipTrigrams(model, head=0)
    seen = []
    w.observe(lambda change: seen.append(change["new"]), names="progress")
    w.head = 1  # a new head: a new ranking
    assert seen[0] == "ranking 3,000 source tokens: 0%" and seen[-1] == ""
    percents = [int(text.rsplit(" ", 1)[1][:-1]) for text in seen[:-1]]
    assert percents == sorted(set(percents)) and percents[-1] == 100 and len(percents) > 50
    assert w.ranked_sources() == skip_trigram_sources(model, 0, 1, k=20).sources.tolist()


# ----- the blocked row-maximum pass (`row_maxima.row_max`) against the dense product -------------------

# (`tiling`: every tiling the pass can take, tests/conftest.py)


def integer_model(d_vocab: int = 1500, seed: int = 0) -> TransformerBridge:
    """`small_bridge` with weights in {-2..2}: every circuit entry is an exact float32 integer (no rounding
    anywhere), and tokens from d_vocab / 2 on repeat tokens 0..96 (same embedding and unembedding): exact ties."""
    model = small_bridge(d_vocab=d_vocab)
    g = torch.Generator().manual_seed(seed)
    same = torch.arange(d_vocab)
    same[d_vocab // 2 :] %= 97
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randint(-2, 3, p.shape, generator=g))
            if name.endswith(("tok_embed._original_component.weight", "head._original_component.weight")):
                p.copy_(p[same])
    return model


def naive_sources(model, layer: int, head: int) -> TrigramSources:
    """`skip_trigram_sources` from the dense float32 circuits and ``torch.max`` (first index of the maximum)."""
    qk = cw.analysis.full_qk_circuit(model, layer, head, scaled=True).dense()
    ov = cw.analysis.full_ov_circuit(model, layer, head).dense()
    top_qk, destinations = qk.max(dim=0)
    top_ov, outs = ov.max(dim=1)
    strengths = top_qk.clamp_min(0) * top_ov.clamp_min(0)
    order = torch.sort(strengths, descending=True, stable=True).indices
    return TrigramSources(order, strengths[order], top_qk[order], destinations[order], top_ov[order], outs[order])


@pytest.mark.parametrize("chunk_size", [None, 30])
def test_sources_equal_the_dense_maxima_exactly_with_ties(tiling, chunk_size):
    """Exact equality, tie rule included: a maximum held by several tokens names the smallest id."""
    model = integer_model()
    for layer, head in [(0, 1), (1, 3)]:
        expected = naive_sources(model, layer, head)
        ranked = skip_trigram_sources(model, layer, head, k=1500, chunk_size=chunk_size)
        assert (ranked.destinations >= 750).sum() == 0  # ties with the repeated tokens went to the first id
        for name, got, want in zip(TrigramSources._fields, ranked, expected, strict=True):
            assert torch.equal(got, want), name


def test_row_max_follows_torch_max_on_ties_inf_and_nan(tiling):
    from circuitwidgets.row_maxima import row_max

    g = torch.Generator().manual_seed(1)
    for trial in range(12):
        n, m, r = (int(x) for x in torch.randint(40, 300, (3,), generator=g))
        left = torch.randint(-2, 3, (n, r % 9 + 1), generator=g).float()
        right = torch.randint(-2, 3, (r % 9 + 1, m), generator=g).float()
        if trial % 3 == 0:  # inf products, and NaN where inf meets 0 or -inf
            left[torch.randint(0, n, (3,), generator=g)] = float("inf")
            right[:, torch.randint(0, m, (3,), generator=g)] = float("-inf")
        rows = int(torch.randint(1, 60, (), generator=g))
        seen = []
        values, indices = row_max(left, right, rows, seen.append)
        best = (left @ right).max(dim=1)
        assert torch.equal(indices, best.indices)
        assert torch.equal(values.isnan(), best.values.isnan())
        assert torch.equal(values.nan_to_num(0.5), best.values.nan_to_num(0.5))
        assert seen == [min(s + rows, n) for s in range(0, n, rows)]  # one report per block, in order


def test_cancelling_from_progress_stops_the_threaded_pass(monkeypatch):
    """An exception from progress propagates from worker threads too, and the threads setting is left as it was."""
    import threading

    from circuitwidgets import row_maxima

    monkeypatch.setattr(row_maxima, "PARALLEL_ENTRIES", 0)
    monkeypatch.setattr(row_maxima, "TILE_ROWS", 10)
    model = small_bridge(d_vocab=600)
    threads = torch.get_num_threads()
    seen = []

    def stop(done, total):
        seen.append(done)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        skip_trigram_sources(model, 0, 0, chunk_size=20, progress=stop)
    assert seen == [20, 40, 60]
    fresh = []
    worker = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    worker.start()
    worker.join()
    assert torch.get_num_threads() == threads and fresh == [threads]
    # and a full threaded pass equals the inline one (exact integer circuits: a BLAS may round a product
    # differently on one thread than on two)
    model = integer_model(600)
    monkeypatch.setattr(row_maxima, "PARALLEL_ENTRIES", 2**62)
    inline = skip_trigram_sources(model, 0, 0, k=600, chunk_size=20)
    monkeypatch.setattr(row_maxima, "PARALLEL_ENTRIES", 0)
    threaded = skip_trigram_sources(model, 0, 0, k=600, chunk_size=20)
    for got, want in zip(threaded, inline, strict=True):
        assert torch.equal(got, want)
