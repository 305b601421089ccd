"""Issue 32, heads across training: `Checkpoints`, `scan_checkpoints`, `CheckpointScan.phase_change`, the demo run.

Every step's values equal the same analysis run on that step's model directly (`head_scores`, `composition_scores`,
the loss from the model's logits); the phase-change rule is checked on hand-made curves; a scan of 40 checkpoints
keeps at most `keep` models alive (weak references); a Hugging Face checkpoint series saved in local folders loads
with no network; TransformerLens's ``checkpoint_index`` is checked through a stand-in loader (the real one downloads
from the Hub); on the demo model's own training run the three curves of the phase change (layer-1 induction, the
K-composition of previous-token into induction heads, the second-copy loss) change in one window.
"""

from __future__ import annotations

import gc
import math
import weakref

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets.analysis.checkpoints import (
    Checkpoints,
    CheckpointScan,
    checkpoint_values,
    in_context_positions,
    phase_change_window,
    scan_checkpoints,
)
from circuitwidgets.demo import checkpoints as demo_run

#: [BOS, r, r] with |r| = 25 (the scan's default tokens): the logits at 26..49 predict the second copy's tokens 2..25.
SECOND_COPY = range(26, 50)
PREVIOUS_TOKEN_HEADS = [(0, 1), (0, 3)]  # the demo model's (model card)
INDUCTION_HEADS = [(1, h) for h in range(4)]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit, NaN where the other is NaN."""
    return a.shape == b.shape and torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.fixture(scope="module")
def demo_scan():
    """The scan of the demo training run that the notebook and the card show (default tokens, every checkpoint)."""
    metrics = ["previous_token", "induction", "composition_k", "loss", "in_context_loss"]
    return scan_checkpoints(cw.demo_checkpoints(), metrics=metrics, progress=False)


# ----- Checkpoints ---------------------------------------------------------------------------------------
def test_checkpoints_from_a_list_a_mapping_and_a_loader():
    a, b = small_bridge(seed=1), small_bridge(seed=2)
    listed = Checkpoints([a, b], steps=[0, 100])
    assert len(listed) == 2 and listed.steps == (0, 100) and listed[1] is b and listed.at(0) is a and listed[-1] is b
    assert Checkpoints([a, b]).steps == (0, 1)
    mapped = Checkpoints({100: b, 0: a})
    assert mapped.steps == (0, 100) and list(mapped) == [a, b]
    made = []
    loaded = Checkpoints(load=lambda step: made.append(step) or small_bridge(seed=step + 1), steps=[0, 5, 50], keep=1)
    assert loaded.loaded == () and made == []  # nothing loads until asked for
    first = loaded.at(5)
    assert loaded.at(5) is first and made == [5] and loaded.loaded == (5,)
    loaded[0]
    assert loaded.loaded == (0,) and loaded.loads == 2  # keep=1: step 5 left
    part = loaded[1:]
    assert isinstance(part, Checkpoints) and part.steps == (5, 50) and part.keep == 1
    assert Checkpoints(lambda step: a, steps=[3]).at(3) is a  # a loader as the first argument
    assert "3 steps 0..50" in repr(loaded)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((), {}, ValueError, "pass models"),
        ((small_bridge(),), {}, TypeError, "one model\\? wrap it in a list"),
        (([],), {}, ValueError, "at least one step"),
        (([small_bridge()],), {"steps": [0, 1]}, ValueError, "2 entries for 1 checkpoints"),
        (([small_bridge(), small_bridge()],), {"steps": [5, 5]}, ValueError, "steps must increase"),
        (([small_bridge()],), {"steps": [-1]}, ValueError, "steps must be >= 0"),
        (([small_bridge()],), {"steps": [1.5]}, TypeError, "steps must be ints"),
        (([None],), {}, ValueError, "holds None"),
        ((), {"load": lambda s: None}, ValueError, "needs steps"),
        (([small_bridge()],), {"load": lambda s: None, "steps": [0]}, ValueError, "not both"),
        (({0: small_bridge()},), {"steps": [0]}, ValueError, "pass no steps"),
        ((), {"load": lambda s: None, "steps": [0], "keep": 0}, ValueError, "keep must be an int >= 1"),
    ],
)
def test_checkpoints_refuse_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        Checkpoints(*args, **kwargs)


def test_a_step_that_is_not_a_checkpoint_names_the_nearest():
    ck = Checkpoints(load=lambda step: small_bridge(), steps=[0, 10, 100])
    with pytest.raises(ValueError, match=r"step=30 is not a checkpoint step; the nearest are \[10, 100\]"):
        ck.at(30)
    with pytest.raises(IndexError, match="out of range: 3 checkpoints"):
        ck[3]
    with pytest.raises(TypeError, match="ck.at\\(step\\) takes a step"):
        ck["10"]
    with pytest.raises(ValueError, match="load\\(0\\) returned None"):
        Checkpoints(load=lambda step: None, steps=[0])[0]


def test_a_scan_of_40_checkpoints_keeps_at_most_keep_models_alive():
    """The LRU holds `keep` models; an evicted one is freed at once (its reference cycles collected), never later."""
    refs: list[weakref.ref] = []

    def load(step: int):
        model = small_bridge(seed=step + 1)
        refs.append(weakref.ref(model))
        return model

    ck = Checkpoints(load=load, steps=list(range(0, 400, 10)), keep=2)
    alive: list[int] = []
    tokens = torch.randint(1, 64, (2, 10), generator=torch.Generator().manual_seed(0))
    scan = scan_checkpoints(ck, tokens, ["loss"], progress=lambda done, total: alive.append(sum(r() is not None for r in refs)))
    assert scan.complete and len(refs) == 40 and ck.loads == 40
    assert max(alive) == 2 and alive[-1] == 2  # (measured while the scan runs, with no collection of our own)
    held = ck.at(390)  # the last two stay in the LRU; a model the caller holds stays alive after it leaves
    ck.clear()
    gc.collect()
    assert sum(r() is not None for r in refs) == 1 and held is refs[-1]()


# ----- the values of each step ----------------------------------------------------------------------------
def test_each_steps_values_equal_the_analysis_run_on_that_steps_model():
    ck = cw.demo_checkpoints()
    chosen = ck[11::10]  # three steps: the 12th, the 22nd and the last
    metrics = ["previous_token", "induction", "prefix_matching", "ov_copying", "composition_k", "composition_v", "loss",
               "in_context_loss"]
    scan = scan_checkpoints(chosen, metrics=metrics, progress=False)
    tokens = scan.tokens
    for i, step in enumerate(chosen.steps):
        model = chosen.at(step)
        for kind in ("previous_token", "induction", "prefix_matching", "ov_copying"):
            assert same(scan.values[kind][i], cw.analysis.head_scores(model, kind)), (step, kind)
        assert same(scan.values["composition_k"][i], cw.analysis.composition_scores(model, "K"))
        assert same(scan.values["composition_v"][i], cw.analysis.composition_scores(model, "V"))
        losses = torch.nn.functional.cross_entropy(model(tokens)[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
        assert torch.allclose(scan.values["loss"][i], losses.mean(), atol=1e-6)
        assert torch.allclose(scan.position_loss[i], losses.mean(0), atol=1e-6)
        early, late = in_context_positions(tokens.shape[1])
        manual = losses[:, [p - 1 for p in late]].mean() - losses[:, [p - 1 for p in early]].mean()
        assert torch.allclose(scan.values["in_context_loss"][i], manual, atol=1e-6)
    assert tokens.shape == (8, 51) and not scan.tokens_given
    assert torch.equal(tokens, cw.analysis.repeated_random_tokens(chosen.at(chosen.steps[0])).cpu())


def test_values_on_given_tokens_and_run_metrics_equal_the_analysis():
    ck = Checkpoints([small_bridge(seed=1), small_bridge(seed=2)], steps=[0, 7])
    tokens = torch.randint(1, 64, (3, 16), generator=torch.Generator().manual_seed(1))
    metrics = ["duplicate_token", "entropy", "direct_copying", "composition_q", "loss"]
    scan = scan_checkpoints(ck, tokens, metrics, progress=False)
    assert scan.tokens_given and torch.equal(scan.tokens, tokens)
    for i, model in enumerate(ck):
        for kind in ("duplicate_token", "entropy", "direct_copying"):
            assert same(scan.values[kind][i], cw.analysis.head_scores(model, kind, tokens)), kind
        assert same(scan.values["composition_q"][i], cw.analysis.composition_scores(model, "Q"))
        direct = checkpoint_values(model, metrics, tokens)
        assert all(same(direct[m], scan.values[m][i]) for m in metrics)
    text = scan_checkpoints(Checkpoints([cw.demo_model()]), ["abcabc", "abcdabcd"], ["loss"], progress=False)
    assert text.tokens.shape == (2, 7) and "cut to the shortest (7 tokens)" in text.notes["tokens"]


def test_in_context_loss_compares_the_last_tenth_with_the_first_after_position_one():
    assert in_context_positions(51) == (range(2, 6), range(47, 51))
    assert in_context_positions(4) == (range(2, 3), range(3, 4))
    assert in_context_positions(512) == (range(2, 53), range(461, 512))
    with pytest.raises(ValueError, match="at least 4 tokens"):
        in_context_positions(3)


def test_scan_arguments_are_checked():
    ck = Checkpoints([small_bridge()])
    with pytest.raises(ValueError, match="'junk'; each metric must be one of"):
        scan_checkpoints(ck, metrics=["induction", "junk"], progress=False)
    with pytest.raises(ValueError, match="must not repeat"):
        scan_checkpoints(ck, metrics=["loss", "loss"], progress=False)
    with pytest.raises(ValueError, match="in_context_loss needs at least 4 tokens"):
        scan_checkpoints(ck, [[0, 1, 2]], ["in_context_loss"], progress=False)
    with pytest.raises(TypeError, match="resume must be a CheckpointScan"):
        scan_checkpoints(ck, metrics=["loss"], resume={}, progress=False)
    other = Checkpoints([small_bridge(), small_bridge(n_heads=2, d_head=32)])
    with pytest.raises(ValueError, match="every checkpoint must have one architecture"):
        scan_checkpoints(other, [[0, 1, 2, 3]], ["loss"], progress=False)


def test_a_stopped_scan_resumes_and_saves(tmp_path):
    ck = Checkpoints(load=lambda step: small_bridge(seed=step + 1), steps=[0, 1, 2, 3])
    tokens = torch.randint(1, 64, (2, 12), generator=torch.Generator().manual_seed(2))
    asked = []
    partial = scan_checkpoints(ck, tokens, ["induction", "loss"], progress=False, stop=lambda: len(asked.append(1) or asked) > 2)
    assert partial.n_done == 2 and not partial.complete and torch.isnan(partial.values["loss"][2:]).all()
    assert "2 of 4 checkpoints scanned" in repr(partial)
    again = CheckpointScan.load(partial.save(tmp_path / "scan.pt"))
    done = scan_checkpoints(ck, tokens, ["induction", "loss"], progress=False, resume=again)
    assert done is again and done.complete
    fresh = scan_checkpoints(ck, tokens, ["induction", "loss"], progress=False)
    assert same(done.values["induction"], fresh.values["induction"]) and same(done.values["loss"], fresh.values["loss"])
    with pytest.raises(ValueError, match="other tokens"):
        scan_checkpoints(ck, tokens[:, :10], ["induction", "loss"], progress=False, resume=done)
    with pytest.raises(ValueError, match="other checkpoints or other metrics"):
        scan_checkpoints(ck, tokens, ["loss"], progress=False, resume=done)
    torch.save({"format": "other"}, tmp_path / "junk.pt")
    with pytest.raises(ValueError, match="not a CheckpointScan file"):
        CheckpointScan.load(tmp_path / "junk.pt")


@pytest.fixture(scope="module")
def small_scan():
    """A complete scan of three small checkpoints: a head metric, a composition metric and both losses."""
    ck = Checkpoints(load=lambda step: small_bridge(seed=step + 1), steps=[0, 5, 20])
    tokens = torch.randint(1, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    return scan_checkpoints(ck, tokens, ["induction", "composition_k", "loss", "in_context_loss"], progress=False)


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda s: s.update(n_heads=7), r"values\['induction'\] has shape \(3, 2, 4\), not \(3, 2, 7\)"),
        (lambda s: s.update(steps=[0, 20, 5]), "steps must be increasing ints"),
        (lambda s: s.update(steps=[0, 5]), "done must be 2 booleans"),
        (lambda s: s.update(done=s["done"].float()), "done must be 3 booleans"),
        (lambda s: s.update(metrics=["induction", "induction", "loss", "in_context_loss"]), "must not repeat"),
        (lambda s: s.update(metrics=["no_such_metric"]), "no_such_metric"),
        (lambda s: s["values"].pop("loss"), "values holds"),
        (lambda s: s["values"].update(composition_k=s["values"]["composition_k"][:, 0]), r"values\['composition_k'\]"),
        (lambda s: s.update(position_loss=s["position_loss"][:, :4]), "position_loss must have shape"),
        (lambda s: s.update(position_loss=None), "position_loss must be there exactly when a loss was scanned"),
        (lambda s: s.update(tokens=s["tokens"].float()), "tokens must be"),
        (lambda s: s.update(layers=[-1, 1]), "layers must be block indices"),
        (lambda s: s.pop("done"), "not a consistent CheckpointScan file"),
        (lambda s: s.update(steps=7), "not a consistent CheckpointScan file"),
    ],
)
def test_a_tampered_or_inconsistent_checkpoint_scan_file_is_refused_on_load(small_scan, tmp_path, tamper, message):
    path = small_scan.save(tmp_path / "scan.pt")
    assert CheckpointScan.load(path).complete  # the file as written loads
    state = torch.load(path, weights_only=True)
    tamper(state)
    torch.save(state, path)
    with pytest.raises(ValueError, match=message):
        CheckpointScan.load(path)


# ----- the phase change ---------------------------------------------------------------------------------
def test_the_phase_change_rule_on_hand_made_curves():
    steps = [0, 1, 10, 100, 1000, 2000, 4000, 6000]
    # the largest rise 100 -> 1000 (0.4); 1000 -> 2000 rises 0.25 (>= half): widened; 10 -> 100 rises 0.1 (< half): not
    rise = torch.tensor([0.0, 0.0, 0.05, 0.15, 0.55, 0.8, 0.85, 0.86])
    assert phase_change_window(steps, rise) == (100, 2000)
    # a fall is a change too; a neighbour of the other sign never widens the window, however large
    fall = torch.tensor([4.0, 4.0, 4.0, 3.9, 1.0, 2.5, 2.4, 2.4])
    assert phase_change_window(steps, fall) == (100, 1000)
    assert phase_change_window([0, 5], torch.tensor([1.0, 2.0])) == (0, 5)
    assert phase_change_window(steps, torch.linspace(0, 1, 8)) == (0, 6000)  # an even rise: every pair
    with pytest.raises(ValueError, match="does not change"):
        phase_change_window(steps, torch.ones(8))
    with pytest.raises(ValueError, match="at least 2 checkpoints"):
        phase_change_window([0], torch.ones(1))


def test_curves_take_the_maximum_over_the_heads_of_interest(demo_scan):
    scan = demo_scan
    layer1 = scan.curve("induction", INDUCTION_HEADS)
    assert torch.equal(layer1, scan.values["induction"][:, 1].amax(-1))
    pairs = [(p, i) for p in PREVIOUS_TOKEN_HEADS for i in INDUCTION_HEADS]
    k = scan.curve("composition_k", pairs)
    assert torch.equal(k, scan.values["composition_k"][:, 0, [1, 3], 1, :].reshape(scan.n_steps, -1).amax(-1))
    every = scan.values["composition_k"].reshape(scan.n_steps, -1).nan_to_num(-1).amax(-1)
    assert torch.equal(scan.curve("composition_k"), every)
    assert torch.allclose(scan.curve("loss", positions=SECOND_COPY), scan.position_loss[:, 26:50].mean(1))
    with pytest.raises(ValueError, match="undefined \\(the reader must be in a later layer\\)"):
        scan.curve("composition_k", [((1, 0), (0, 1))])
    with pytest.raises(ValueError, match="head 4 is out of range"):
        scan.curve("induction", [(1, 4)])
    with pytest.raises(ValueError, match="one number per checkpoint"):
        scan.curve("loss", [(1, 0)])
    with pytest.raises(ValueError, match="was not scanned"):
        scan.curve("entropy")


# ----- the demo model's training run ----------------------------------------------------------------------
def test_demo_checkpoints_are_the_training_run_from_initialisation_to_the_shipped_weights():
    ck = cw.demo_checkpoints()
    steps = ck.steps
    assert len(steps) >= 24 and steps[0] == 0 and steps[-1] == 6000 == cw.demo.model_card()["training"]["steps"]
    assert steps == tuple(demo_run.checkpoint_steps())
    ratios = [b / a for a, b in zip(steps[1:], steps[2:], strict=False)]
    assert max(ratios) < 2.5 and steps[1] <= 10  # log-spaced: no gap of more than a factor 2.5 after step 0
    final, shipped = ck.at(6000).state_dict(), cw.demo_model().state_dict()
    assert all(torch.equal(final[name], shipped[name]) for name in shipped)  # the last equals demo_model(), bit for bit
    initial, booted = ck.at(0).state_dict(), cw.demo.boot(seed=0).state_dict()  # the run's initialisation (seed 0)
    for name, value in booted.items():
        if value.dtype.is_floating_point:
            scale = (value - shipped[name]).abs().max()
            assert (initial[name] - value).abs().max() <= 1e-3 * scale + 1e-7, name  # float16 rounding of the difference
    assert demo_run.CHECKPOINTS_FILE.stat().st_size < 3_000_000
    with pytest.raises(ValueError, match="not a saved step"):
        demo_run.checkpoint_state(7)


def test_checkpoint_steps_are_log_spaced_and_distinct():
    assert demo_run.checkpoint_steps(6000, 8) == [0, 10, 29, 84, 245, 711, 2066, 6000]
    many = demo_run.checkpoint_steps(100, 40)  # crowded: steps that round onto the one before move up
    assert len(set(many)) == 40 and many[:3] == [0, 10, 11] and many[-1] == 100 and many == sorted(many)
    with pytest.raises(ValueError, match="count must be an int from 3 to 3"):
        demo_run.checkpoint_steps(10, 12, first=9)


def test_on_the_demo_run_induction_and_the_losses_change_in_one_window(demo_scan):
    """Layer-1 induction rises, the second-copy and the in-context loss fall: `phase_change` finds one window for the
    three, and the previous-token heads sharpen in it. The K-composition score of the previous-token heads into the
    induction heads rises into that window (its largest rise after its lowest point ends where the window starts) and
    keeps rising after it, apart from the other layer-0 heads'; but the largest change of that score between two
    checkpoints is the end of a transient of the first few hundred steps, which is what `phase_change` finds for it."""
    scan = demo_scan
    pairs = [(p, i) for p in PREVIOUS_TOKEN_HEADS for i in INDUCTION_HEADS]
    others = [((0, o), i) for o in (0, 2) for i in INDUCTION_HEADS]
    induction = scan.phase_change("induction", INDUCTION_HEADS)
    second_copy = scan.phase_change("loss", positions=SECOND_COPY)
    in_context = scan.phase_change("in_context_loss")
    previous = scan.phase_change("previous_token", PREVIOUS_TOKEN_HEADS)
    composition = scan.phase_change("composition_k", pairs)
    assert induction == second_copy == in_context  # one window
    start, end = induction
    assert previous[0] <= start < end <= previous[1]
    i0, i1 = scan.steps.index(start), scan.steps.index(end)
    ind = scan.curve("induction", INDUCTION_HEADS)
    loss = scan.curve("loss", positions=SECOND_COPY)
    assert ind[i1] - ind[i0] > 0.5 and loss[i0] - loss[i1] > 2.5  # most of the change, inside the window
    assert ind[: i0 + 1].max() < 0.1 and loss[: i0 + 1].min() > 3.5 and ind[-1] > 0.4 and loss[-1] < 0.5
    k, k_other = scan.curve("composition_k", pairs), scan.curve("composition_k", others)
    low = int(k.argmin())
    best = low + int((k[low + 1 :] - k[low:-1]).argmax())
    assert scan.steps[best + 1] == start and k[i1] > k[low] + 0.05 and k[-1] > k[i1]
    assert abs(k[low] - k_other[low]) < 0.01 and k[-1] - k_other[-1] > 0.05
    assert composition[1] < start and k[:i0].max() > k[-1]  # the transient, above the final score
    card = cw.demo.model_card()["training_run"]
    assert card["steps"] == list(scan.steps)
    keys = ("induction", "second_copy_loss", "in_context_loss", "previous_token", "k_composition")
    assert [card["phase_change"][key] for key in keys] == [list(induction), list(second_copy), list(in_context),
                                                           list(previous), list(composition)]
    assert card["curves"]["k_composition"] == [round(float(x), 4) for x in k]


# ----- other sources of checkpoints -----------------------------------------------------------------------
def test_a_hugging_face_series_in_local_folders_loads_offline(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    _, tokenizer = cw.demo.tiny_hf_model("neox")
    config = transformers.GPTNeoXConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
        vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    saved = {}
    for seed, revision in enumerate(["step0", "step1000", "step143000"]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config)
        model.save_pretrained(tmp_path / "pythia-tiny" / revision)
        saved[revision] = model
    tokenizer.save_pretrained(tmp_path / "pythia-tiny" / "step0")
    ck = Checkpoints.hugging_face(tmp_path / "pythia-tiny", ["step1000", "step0", "step143000"])
    assert ck.steps == (0, 1000, 143000)
    model = ck.at(1000)
    assert type(model).__name__ == "GPTNeoXForCausalLM" and not model.training
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), saved["step1000"].parameters(), strict=True))
    assert model.tokenizer is not None and cw.as_view(model).to_tokens("ab").tolist() == [[0, 2, 3]]
    scan = scan_checkpoints(ck, "abcabcabc", ["induction", "loss"], progress=False)
    for i, step in enumerate(ck.steps):
        assert same(scan.values["induction"][i], cw.analysis.head_scores(ck.at(step), "induction", "abcabcabc"))
    pattern = Checkpoints.hugging_face(str(tmp_path / "pythia-tiny" / "{revision}"), ["step0", "step143000"], steps=[0, 5])
    assert pattern.steps == (0, 5) and type(pattern[1]).__name__ == "GPTNeoXForCausalLM"
    with pytest.raises(ValueError, match="no folder 'step7'"):
        Checkpoints.hugging_face(tmp_path / "pythia-tiny", ["step7"])
    with pytest.raises(ValueError, match="names no step"):
        Checkpoints.hugging_face(tmp_path / "pythia-tiny", ["main"])
    with pytest.raises(ValueError, match="must not repeat"):
        Checkpoints.hugging_face(tmp_path / "pythia-tiny", ["step0", "step0"])
    with pytest.raises(ValueError, match="1 entries for 2 revisions"):
        Checkpoints.hugging_face(tmp_path / "pythia-tiny", ["step0", "step1000"], steps=[0])


def test_transformer_lens_checkpoints_pass_checkpoint_index_to_its_loader(monkeypatch):
    """TransformerLens downloads each checkpoint from the Hub: here its loader is a stand-in that records its arguments
    (the labels of Pythia's checkpoints are TransformerLens's own table, no network)."""
    from transformer_lens.model_bridge import TransformerBridge

    calls = []

    def boot_transformers(name, **kwargs):
        calls.append((name, kwargs))
        return small_bridge()

    monkeypatch.setattr(TransformerBridge, "boot_transformers", boot_transformers)
    ck = Checkpoints.transformer_lens("EleutherAI/pythia-70m", [-1, 0, 10, 11], keep=1, dtype=torch.float32)
    assert ck.steps == (0, 512, 1000, 143000) and ck.unit == "step" and calls == []
    ck.at(1000)
    assert calls == [("EleutherAI/pythia-70m", {"checkpoint_index": 11, "dtype": torch.float32})]
    ck[-1]
    assert calls[-1][1]["checkpoint_index"] == 153  # -1: the last of Pythia's 154 checkpoints
    assert len(Checkpoints.transformer_lens("EleutherAI/pythia-70m")) == 154
    with pytest.raises(ValueError, match="checkpoint index 154 is out of range: EleutherAI/pythia-70m has 154"):
        Checkpoints.transformer_lens("EleutherAI/pythia-70m", [154])
    with pytest.raises(ValueError, match="name a checkpoint twice"):
        Checkpoints.transformer_lens("EleutherAI/pythia-70m", [0, -154])
    with pytest.raises(TypeError, match="indices must be ints"):
        Checkpoints.transformer_lens("EleutherAI/pythia-70m", [0.5])
    with pytest.raises(ValueError, match="gpt2 is not checkpointed"):
        Checkpoints.transformer_lens("gpt2", [0])


def test_a_folder_of_state_dicts(tmp_path):
    from safetensors.torch import save_file

    states = {step: small_bridge(seed=step + 1).state_dict() for step in (0, 20, 300)}
    torch.save(states[0], tmp_path / "ckpt_0.pt")
    torch.save({"state_dict": states[20]}, tmp_path / "ckpt_20.pth")
    save_file({k: v.contiguous() for k, v in states[300].items()}, str(tmp_path / "model-300.safetensors"))
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    ck = Checkpoints.state_dicts(tmp_path, small_bridge)
    assert ck.steps == (0, 20, 300)
    for step, state in states.items():
        loaded = ck.at(step).state_dict()
        assert all(torch.equal(loaded[name], value) for name, value in state.items()), step
    renamed = Checkpoints.state_dicts(tmp_path, small_bridge, steps={"ckpt_0.pt": 1, "model-300.safetensors": 9})
    assert renamed.steps == (1, 9)
    with pytest.raises(TypeError, match="a model would be shared by every step"):
        Checkpoints.state_dicts(tmp_path, small_bridge())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no state dict"):
        Checkpoints.state_dicts(tmp_path / "empty", small_bridge)


def test_a_model_of_each_step_is_an_ordinary_model_for_every_view():
    ck = cw.demo_checkpoints(keep=1)
    view = cw.as_view(ck.at(0))
    assert view.n_heads == 4 and cw.analysis.attention_patterns(ck.at(0), "abab").shape == (2, 4, 5, 5)
    assert math.isfinite(float(cw.analysis.copying_scores(ck[5]).sum()))
