"""circuitwidgets against a real NDIF server (PyPI ndif 0.1.2) on this machine: ``make test-ndif``.

The server (ndif_local/start.sh: redis, moto as the S3 store, a Ray head with the NDIF controller
and a CPU model actor, the NDIF API) serves a tiny random Llama saved in .ndif/model. The `ndif`
fixture starts it and stops it after the session; with NDIF_URL (and NDIF_MODEL, default
.ndif/model) set it uses that server and leaves it running. Every remote answer is compared with
the same saved model run here. The client is this venv's nnsight (no API key: the local server
has no authentication; ``http://`` means no TLS).
"""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import nnsight
import nnsight.modeling.huggingface as nnsight_hf
import pytest
import torch
import transformers
from nnsight.modeling.transformers import TransformersModel

import circuitwidgets as cw
from circuitwidgets import analysis, transport

ROOT = Path(__file__).resolve().parents[2]
BOS = 0  # <|bos|>, the first token of make_model.py's tokenizer
_RANDOM = torch.randint(1, 300, (40,), generator=torch.Generator().manual_seed(0))
IDS = torch.cat([torch.tensor([BOS]), _RANDOM, _RANDOM])  # a repeated random sequence: 81 tokens


def _start() -> tuple[str, str, bool]:
    """Run start.sh: ``(url, model path, whether it started the server)``."""
    done = subprocess.run(["bash", str(ROOT / "ndif_local" / "start.sh")], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"ndif_local/start.sh failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    said = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("NDIF_"))
    return said["NDIF_URL"], said["NDIF_MODEL"], "already running" not in done.stdout


@pytest.fixture(scope="session")
def ndif():
    """``(url, model path)`` of a running NDIF server; nnsight's client pointed at it."""
    url = os.environ.get("NDIF_URL")
    if url:
        path, started = os.environ.get("NDIF_MODEL", str(ROOT / ".ndif" / "model")), False
    else:
        url, path, started = _start()
    host, logging = nnsight.CONFIG.API.HOST, nnsight.CONFIG.APP.REMOTE_LOGGING
    nnsight.CONFIG.API.HOST, nnsight.CONFIG.APP.REMOTE_LOGGING = url, False  # (no job status lines on stdout)
    nnsight_hf._ID_CACHE[path] = path  # nnsight canonicalises a repo id on the Hub: a local path has no entry
    try:
        yield url, path
    finally:
        nnsight.CONFIG.API.HOST, nnsight.CONFIG.APP.REMOTE_LOGGING = host, logging
        if started:
            subprocess.run(["bash", str(ROOT / "ndif_local" / "stop.sh")], check=False, timeout=120)


@pytest.fixture(scope="module")
def models(ndif):
    """``(remote nnsight model, local Hugging Face model, tokenizer)`` of the served checkpoint."""
    _, path = ndif
    tok = transformers.AutoTokenizer.from_pretrained(path)
    remote = TransformersModel(path, task="text-generation", tokenizer=tok)  # weights on meta: only shapes here
    local = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    return remote, local, tok


def codes(payload: dict) -> bytes:
    data = bytes(payload["data"])
    return zlib.decompress(data) if payload.get("encoding") == "deflate" else data


def test_a_remote_trace_equals_a_local_forward(models):
    remote, local, _ = models
    with remote.trace(IDS[None], remote=True):
        hidden = remote.model.layers[0].output.save()  # (in the order the model runs them)
        logits = remote.lm_head.output.save()
    with torch.no_grad():
        expected = local(IDS[None], output_hidden_states=True)
    hidden = hidden[0] if isinstance(hidden, tuple) else hidden
    assert logits.shape == expected.logits.shape == (1, len(IDS), local.config.vocab_size)
    scale = float(expected.logits.abs().max())
    assert scale > 1  # order-1 weights (make_model.py): a tolerance that means something
    assert float((logits - expected.logits).abs().max()) <= 1e-5 * scale
    assert torch.allclose(hidden, expected.hidden_states[1], atol=1e-5 * float(hidden.abs().max()))


def test_attention_pattern_of_the_served_model_draws_the_local_codes_in_one_request(models):
    remote, local, tok = models
    view = cw.HFView(remote, remote=True)
    assert not view.weights_local
    w = cw.AttentionPattern(view, tokens=IDS, layer=1, head=2)
    assert w.error == "" and w.patterns["layer"] == 1
    assert view.backend.traces == 1 and view.backend.bytes_received > 4 * len(IDS) * (len(IDS) + 1) // 2  # the codes
    here = cw.AttentionPattern(cw.HFView(local, tokenizer=tok), tokens=IDS, layer=1, head=2)
    assert here.error == ""
    assert codes(w.patterns) == codes(here.patterns)
    assert w.patterns["shape"] == here.patterns["shape"] == [4, len(IDS), len(IDS)]
    drawn = transport.decode(w.patterns)
    assert float(drawn.amax()) > 0.5  # the picture is not blank: some head attends sharply
    w.layer = 0  # another layer: one more request
    assert view.backend.traces == 2 and codes(w.patterns) != codes(here.patterns)


def test_remote_ov_block_equals_the_local_full_ov_block(models):
    remote, local, tok = models
    view, local_view = cw.HFView(remote, remote=True), cw.HFView(local, tokenizer=tok)
    ids = [int(i) for i in IDS[1:8]]
    for layer in (0, 1):
        block = analysis.full_ov_block(view, layer, ids)
        expected = analysis.full_ov_block(local_view, layer, ids)
        assert block.shape == expected.shape == (4, len(ids), len(ids))
        scale = max(1.0, float(expected.abs().max()))
        assert float((block - expected).abs().max()) <= 1e-5 * scale
    assert view.backend.traces == 2 and view.backend.bytes_received == 2 * 4 * len(ids) ** 2 * 4  # the blocks only


def test_zooming_into_the_shown_head_needs_no_new_request(models):
    """A 1 600-token prompt: the picture is an overview (4 x 4 cells pooled); its head's tiles and rows are rebuilt here."""
    _, local, tok = models
    fresh = TransformersModel(local.name_or_path, task="text-generation", tokenizer=tok)  # (no picture cached with it)
    view = cw.HFView(fresh, remote=True)
    ids = torch.randint(1, 300, (800,), generator=torch.Generator().manual_seed(1))
    ids = torch.cat([torch.tensor([BOS]), ids, ids[:799]])
    w = cw.AttentionPattern(view, tokens=ids, layer=1, head=1)
    assert w.error == "" and w.patterns["lod"]["factor"] == 4 and w.remote_note.startswith("H1's")
    assert view.backend.traces == 1
    exact = analysis.attention_patterns(cw.HFView(local, tokenizer=tok), ids)[1, 1]  # [q, k] of L1H1
    w.tile_request = {"id": 1, "layer": 1, "head": 1, "row0": 1200, "col0": 300, "rows": 256, "cols": 256, "step": 1,
                      "revision": w.patterns["revision"]}
    tile = transport.decode(w.tile)
    w.selection = {"query": 1590, "key": 5, "locked": True}
    row = transport.decode(w.row)
    assert view.backend.traces == 1  # the tile and the row came from the inputs downloaded with the picture
    assert w.tile["id"] == 1 and tile.shape == (256, 256)
    assert float((tile - exact[1200:1456, 300:556]).abs().max()) <= transport.quantisation_step(w.tile) + 1e-6
    assert float((row[1] - exact[1590]).abs().max()) < 1e-5
    w.head = 3  # another head: one request
    w.tile_request = {"id": 2, "layer": 1, "head": 3, "row0": 0, "col0": 0, "rows": 64, "cols": 64, "step": 1,
                      "revision": w.patterns["revision"]}
    assert view.backend.traces == 2 and w.tile["id"] == 2


def test_logit_attribution_of_the_served_model_equals_the_local_one_in_one_request(models):
    remote, local, tok = models
    view, local_view = cw.HFView(remote, remote=True), cw.HFView(local, tokenizer=tok)
    theirs = analysis.logit_attribution_by_position(view, IDS[None], baseline_token=5)
    ours = analysis.logit_attribution_by_position(local_view, IDS[None], baseline_token=5)
    assert view.backend.traces == 1
    seq, layers, heads = theirs.heads.shape
    assert view.backend.bytes_received == 4 * seq * (layers * heads + len(theirs.others) + 2)  # terms, logits, scales
    scale = max(1.0, float(ours.heads.nan_to_num().abs().max()))
    assert float((theirs.heads - ours.heads).nan_to_num().abs().max()) <= 1e-5 * scale
    assert all(float((theirs.others[n] - ours.others[n]).nan_to_num().abs().max()) <= 1e-5 * scale for n in ours.others)
    w = cw.LogitAttribution(view, tokens=IDS)
    assert w.error == "" and w.attribution["names"] == cw.LogitAttribution(local_view, tokens=IDS).attribution["names"]
