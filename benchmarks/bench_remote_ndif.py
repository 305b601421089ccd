"""circuitwidgets' remote path against a real NDIF server on this machine: first pictures, zoom, weight views.

The server is ``ndif_local/start.sh`` (PyPI ndif 0.1.2 on localhost, CPU only: redis, moto as the S3
store, a Ray head with the NDIF controller and a CPU model actor, the NDIF API), serving the tiny
random Llama of ``ndif_local/make_model.py`` (2 layers, 4 heads in 2 K/V groups of d_head 16, d_model
64, vocabulary 315, 2 048 positions) saved in ``.ndif/model``. This script starts it and stops it at
the end (as the ``ndif`` fixture of tests/ndif does), unless ``NDIF_URL`` names a running server (then
``NDIF_MODEL``, default ``.ndif/model``, is its checkpoint and it is left running). If the server cannot
start, the script prints why and exits 2. The client is this venv's nnsight: ``TransformersModel(path,
task="text-generation")`` (weights on ``meta`` here) in ``cw.HFView(model, remote=True)``. The same
folder loaded here (``AutoModelForCausalLM.from_pretrained``) gives the comparison rows. Client and
server share this machine's CPUs, and the network is the loopback: what a request costs here is the
server's own overhead (serialising, the websocket, queueing, dispatching to the model actor), not a link.

1. Ping: a one-token trace saving the logits, the first one (cold: the server provisions its model
   actor) and 5 more; each request's time split by the status updates the server streams
   (nnsight's ``RemoteBackend.__call__``, ``_serialize`` and ``note``, wrapped here to stamp them; they
   still do what they did): ``serialize`` (the request, here), ``submit`` (the websocket, the POST,
   until RECEIVED), ``wait`` (RECEIVED until RUNNING: queue and dispatch), ``run`` (RUNNING until
   COMPLETED), ``fetch`` (COMPLETED until the trace returns: download, deserialising);
   ``server_runtime`` is what the server reports (``meta["runtime"]``). The same split is recorded for
   the remote rows below (``phases``). The times are when each update reaches the client: updates that
   arrive together (RUNNING and COMPLETED of a short run) make ``run`` shorter than the server's runtime.
2. First picture: ``cw.AttentionPattern(view, tokens=ids, layer=1, head=1)`` construction until its
   payload is ready, per length (random ids, BOS first; default 256 and the model's 2 048), on three
   paths: ``remote`` (the served model, ``remote=True``), ``nnsight_local`` (the local copy wrapped in
   ``nnsight.TransformersModel``, ``remote="local"``: nnsight's serialising dry run) and ``local``
   (``cw.HFView(hf, tokenizer=tok)``), after a 16-token warm-up of each path. Medians of 3 (a fresh
   model each time for ``remote``, the widget cache cleared for the others); ``view_s``: building the
   `HFView`; ``traces`` and ``download_bytes`` (`HFView.traces`, `HFView.bytes_received`) of one
   construction; ``first_message``: the widget's state as the comm open message carries it.
3. Zoom (``remote``, the longest length): after the first picture, 10 tiles (the whole prompt, then
   zoomed windows moving down the diagonal) and 10 hovers on the shown head (L1H1), as
   `bench_remote_zoom.py` drives them: the requests they sent (``HFView.traces`` before and after, 0
   expected: the head's queries and keys came with the picture), their bytes, the time of each action;
   the last 256-token tile and a hover row against the exact local pattern. Then a head switch (``head
   = 3``, a tile and a hover): exactly 1 request expected.
4. Weight views (`circuitwidgets.weight_views`, run in a trace by `circuitwidgets.backends.remote_weights`) on the served model: per call the time
   (median of 3) against the server, the same call with ``remote="local"`` and the local analysis
   function on the local copy (`cw.analysis.full_ov_block`, `full_qk_block`, `ov_eigenvalues`,
   `copying_scores`, `composition_scores`, `skip_trigrams`; `remote_logit_attribution` against
   `logit_attribution_by_position`, a run of the prompt there), the bytes downloaded and the requests, and
   ``max_abs_diff`` against the local analysis (eigenvalues: each local eigenvalue's nearest remote
   one, conjugate pairs have equal magnitudes so their order is not defined); ``ok``: ``max_abs_diff
   <= 1e-5 * scale``, scale the largest magnitude of the local answer.

Machine facts include ``server_idle_cpu_cores``: the CPU the idle server's processes use (3 s, from
/proc), beside the local rows. Results: ``benchmarks/results/remote_ndif.json`` and ``remote_ndif.md``. Exit status 1 when a check
(0 zoom requests, 1 per head switch, a weight view equal to the local one) fails.

    .venv/bin/python benchmarks/bench_remote_ndif.py [--lengths 256,max] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _shared import comm_bytes

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "remote_ndif.json"
LAYER, HEAD, SWITCH_TO = 1, 1, 3
BOS = 0  # <|bos|>, the first token of make_model.py's tokenizer
TOLERANCE = 1e-5

# ----- the server -----------------------------------------------------------------------------------


@contextlib.contextmanager
def ndif_server():
    """``(url, model path, start seconds or None)`` of a running NDIF server; started here (and stopped) unless NDIF_URL."""
    url = os.environ.get("NDIF_URL")
    if url:
        yield url, os.environ.get("NDIF_MODEL", str(REPO / ".ndif" / "model")), None
        return
    start = time.perf_counter()
    try:
        done = subprocess.run(["bash", str(REPO / "ndif_local" / "start.sh")], capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired as e:
        stop_server()
        raise SystemExit(f"ndif_local/start.sh did not finish in {e.timeout:.0f} s; see .ndif/logs") from e
    said = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("NDIF_"))
    if done.returncode != 0 or "NDIF_URL" not in said:
        stop_server()
        raise SystemExit(f"the NDIF server did not start: ndif_local/start.sh exited {done.returncode}\n"
                         f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    started = "already running" not in done.stdout
    try:
        yield said["NDIF_URL"], said["NDIF_MODEL"], round(time.perf_counter() - start, 1) if started else None
    finally:
        if started:
            stop_server()


def stop_server() -> None:
    done = subprocess.run(["bash", str(REPO / "ndif_local" / "stop.sh")], capture_output=True, text=True, timeout=120)
    print(done.stdout.strip() or done.stderr.strip(), flush=True)


def server_cpu(seconds: float = 3.0) -> float | None:
    """CPU cores the server's processes (the sessions start.sh recorded in .ndif/run) use over `seconds`, idle."""
    sids = [int(f.read_text()) for f in (REPO / ".ndif" / "run").glob("*.sid")]
    if not sids:
        return None

    def ticks() -> int:
        total = 0
        for stat in glob.glob("/proc/[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
                if int(fields[3]) in sids:  # (field 6 of stat: the session id)
                    total += int(fields[11]) + int(fields[12])  # utime + stime
        return total

    before = ticks()
    time.sleep(seconds)
    return round((ticks() - before) / os.sysconf("SC_CLK_TCK") / seconds, 2)


# ----- request timing: the status updates the server streams ------------------------------------------

REQUESTS: list[dict[str, Any]] = []  # one per remote request: {"start", status: time, ..., "end", "runtime"}


def stamp_requests() -> None:
    """Wrap nnsight's `RemoteBackend` so that each request's status updates are timed (it still does what it did)."""
    from nnsight.intervention.backends.remote import RemoteBackend

    call, note, serialize = RemoteBackend.__call__, RemoteBackend.note, RemoteBackend._serialize

    def timed_call(self, tracer=None):
        REQUESTS.append({"start": time.perf_counter()})
        try:
            return call(self, tracer)
        finally:
            REQUESTS[-1]["end"] = time.perf_counter()

    def timed_note(self, response):
        REQUESTS[-1].setdefault(response.status.value, time.perf_counter())
        if response.meta and "runtime" in response.meta:
            REQUESTS[-1]["runtime"] = response.meta["runtime"]
        return note(self, response)

    def timed_serialize(self, tracer):
        start = time.perf_counter()
        try:
            return serialize(self, tracer)
        finally:
            REQUESTS[-1]["serialize"] = time.perf_counter() - start

    RemoteBackend.__call__, RemoteBackend.note, RemoteBackend._serialize = timed_call, timed_note, timed_serialize


def phases(requests: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds of `requests` summed per phase: submit, wait (queue and dispatch), run, fetch; the server's runtime."""
    out = {"serialize": 0.0, "submit": 0.0, "wait": 0.0, "run": 0.0, "fetch": 0.0, "server_runtime": 0.0}
    for r in requests:
        if not all(k in r for k in ("RECEIVED", "RUNNING", "COMPLETED", "end")):
            continue
        out["serialize"] += r.get("serialize", 0.0)
        out["submit"] += r["RECEIVED"] - r["start"] - r.get("serialize", 0.0)
        out["wait"] += r["RUNNING"] - r["RECEIVED"]
        out["run"] += r["COMPLETED"] - r["RUNNING"]
        out["fetch"] += r["end"] - r["COMPLETED"]
        out["server_runtime"] += r.get("runtime", 0.0)
    return {k: round(v, 4) for k, v in out.items()}


# ----- the measurements ------------------------------------------------------------------------------


class Client:
    """The served checkpoint three ways: a fresh remote nnsight model, the local HF model, nnsight around it."""

    def __init__(self, path: str):
        import transformers

        self.path = path
        self.tok = transformers.AutoTokenizer.from_pretrained(path)
        self.local = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
        self.config = self.local.config

    def remote_model(self):
        from nnsight.modeling.transformers import TransformersModel

        return TransformersModel(self.path, task="text-generation", tokenizer=self.tok)  # weights on meta here

    def view(self, path: str):
        import circuitwidgets as cw

        if path == "remote":
            return cw.HFView(self.remote_model(), remote=True)
        if path == "nnsight_local":
            from nnsight.modeling.transformers import TransformersModel

            return cw.HFView(TransformersModel(self.local, tokenizer=self.tok), remote="local")
        return cw.HFView(self.local, tokenizer=self.tok)


def ping(client: Client, runs: int = 5) -> dict[str, Any]:
    import torch

    model = client.remote_model()
    times = []
    for _ in range(runs + 1):
        first = len(REQUESTS)
        start = time.perf_counter()
        with model.trace(torch.tensor([[BOS, 5, 6]]), remote=True):
            logits = model.lm_head.output.save()
        times.append((time.perf_counter() - start, phases(REQUESTS[first:])))
    assert tuple(logits.shape) == (1, 3, client.config.vocab_size)
    warm = sorted(times[1:], key=lambda t: t[0])[len(times[1:]) // 2]
    return {"cold_s": round(times[0][0], 3), "cold_phases": times[0][1], "warm_s_median": round(warm[0], 4),
            "warm_phases": warm[1], "warm_s": [round(t, 4) for t, _ in times[1:]]}


def random_ids(n: int, vocab: int, seed: int = 0):
    import torch

    body = torch.randint(1, vocab, (n - 1,), generator=torch.Generator().manual_seed(seed))
    return torch.cat([torch.tensor([BOS]), body])


def first_picture(client: Client, n: int, path: str, runs: int) -> dict[str, Any]:
    import circuitwidgets as cw
    from circuitwidgets.widgets import _cache

    ids = random_ids(n, client.config.vocab_size)
    view_times, times, widgets = [], [], []
    for _ in range(runs):
        _cache.clear()
        first = len(REQUESTS)
        start = time.perf_counter()
        view = client.view(path)
        built = time.perf_counter()
        w = cw.AttentionPattern(view, tokens=ids, layer=LAYER, head=HEAD)
        times.append(time.perf_counter() - built)
        view_times.append(built - start)
        if w.error:
            raise RuntimeError(f"{path}, {n} tokens: {w.error}")
        widgets.append((w, view, phases(REQUESTS[first:])))
    w, view, request_phases = widgets[-1]
    return {
        "tokens": n, "path": path, "runs": runs, "view_s": round(statistics.median(view_times), 4),
        "picture_s": round(statistics.median(times), 4), "picture_s_all": [round(t, 4) for t in times],
        "traces": view.traces, "download_bytes": view.bytes_received, "first_message_bytes": comm_bytes(w),
        "lod_factor": (w.patterns.get("lod") or {}).get("factor", 1), "remote_note": w.remote_note,
        **({"phases": request_phases} if path == "remote" else {}),
    }


def zoom(client: Client, n: int) -> dict[str, Any]:
    """The actions of bench_remote_zoom.py on the served model, with the exact local pattern to check against."""
    import circuitwidgets as cw
    from circuitwidgets import analysis, transport

    ids = random_ids(n, client.config.vocab_size, seed=1)
    view = client.view("remote")
    start = time.perf_counter()
    w = cw.AttentionPattern(view, tokens=ids, layer=LAYER, head=HEAD)
    first_s = time.perf_counter() - start
    assert w.error == "", w.error
    first_traces, first_bytes = view.traces, view.bytes_received
    inputs = w._parts["inputs"][HEAD]
    head_bytes = sum(t.numel() * t.element_size() for t in (inputs["q"], inputs["k"]))
    windows = []  # (row0, col0, size, step): the whole prompt, then zoomed windows moving down the diagonal
    for k, size in enumerate((n, 1024, 512, 256, 128, 256, 512, 1024, 512, 256)):
        size = min(size, n)
        row0 = (n - size) * k // 9
        windows.append((row0, max(0, row0 - size // 2), size, -(-size // 1024)))
    actions = []
    for k, (row0, col0, size, step) in enumerate(windows):
        t0 = time.perf_counter()
        w.tile_request = {"id": k + 1, "layer": LAYER, "head": HEAD, "row0": row0, "col0": col0, "rows": size, "cols": size,
                          "step": step, "revision": w.patterns["revision"]}
        actions.append(("tile", time.perf_counter() - t0))
        assert w.tile.get("id") == k + 1, w.error
    last_tile, last_window, quantum = transport.decode(w.tile), windows[-1], transport.quantisation_step(w.tile)
    for k in range(10):
        t0 = time.perf_counter()
        w.selection = {"query": n // 11 * (k + 1), "key": 0, "locked": False}
        actions.append(("hover", time.perf_counter() - t0))
    row = transport.decode(w.row)
    action_traces, action_bytes = view.traces - first_traces, view.bytes_received - first_bytes
    exact = analysis.attention_patterns(client.view("local"), ids, layers=[LAYER])[0, HEAD]
    row0, col0, size, _ = last_window
    window = exact[row0:row0 + size, col0:col0 + size]
    drawn = ~last_tile.isnan()  # (the cells above the diagonal, masked, are NaN in a tile)
    tile_diff = float((last_tile[drawn] - window[drawn]).abs().max())
    masked_ok = bool((window[~drawn] == 0).all())
    row_diff = float((row[HEAD] - exact[n // 11 * 10]).abs().max())
    before = (view.traces, view.bytes_received, len(REQUESTS))
    t0 = time.perf_counter()
    w.head = SWITCH_TO
    w.tile_request = {"id": 99, "layer": LAYER, "head": SWITCH_TO, "row0": 0, "col0": 0, "rows": 256, "cols": 256, "step": 1,
                      "revision": w.patterns["revision"]}
    w.selection = {"query": n - 1, "key": 0, "locked": True}
    switch_s = time.perf_counter() - t0
    assert w.tile.get("id") == 99, w.error
    switch_traces, switch_bytes = view.traces - before[0], view.bytes_received - before[1]
    tiles = sorted(s for a, s in actions if a == "tile")
    hovers = sorted(s for a, s in actions if a == "hover")
    return {
        "tokens": n, "first_picture_s": round(first_s, 3), "first_traces": first_traces, "first_download_bytes": first_bytes,
        "head_inputs_bytes": head_bytes, "actions": len(actions), "action_traces": action_traces,
        "action_download_bytes": action_bytes, "tile_s_median": round(tiles[len(tiles) // 2], 4),
        "tile_s_max": round(tiles[-1], 4), "hover_s_median": round(hovers[len(hovers) // 2], 4),
        "hover_s_max": round(hovers[-1], 4), "tile_max_abs_diff": tile_diff,
        "tile_quantisation_step": quantum, "tile_nan_cells_masked": masked_ok,
        "row_max_abs_diff": row_diff, "head_switch_traces": switch_traces, "head_switch_download_bytes": switch_bytes,
        "head_switch_s": round(switch_s, 3), "head_switch_phases": phases(REQUESTS[before[2]:]),
        "remote_note": w.remote_note,
        "ok": action_traces == 0 and switch_traces == 1 and tile_diff <= quantum + 1e-6 and masked_ok and row_diff < 1e-5,
    }


def weight_views(client: Client, runs: int) -> list[dict[str, Any]]:
    import torch

    from circuitwidgets import analysis

    remote, here, local = client.view("remote"), client.view("nnsight_local"), client.view("local")
    here.backend.weights_local = False  # (as the served model's: its weight views run in traces, here)
    ids = [int(i) for i in torch.randperm(client.config.vocab_size - 1, generator=torch.Generator().manual_seed(2))[:64] + 1]
    token = ids[0]
    cases: list[tuple[str, str, Any, Any]] = []  # (view, arguments, remote call (view -> answer), local call)
    for layer in (0, 1):
        cases += [
            ("remote_ov_block", f"L{layer}, 64 tokens", lambda v, layer=layer: analysis.full_ov_block(v, layer, ids),
             lambda layer=layer: analysis.full_ov_block(local, layer, ids)),
            ("remote_qk_block", f"L{layer}, 64 tokens", lambda v, layer=layer: analysis.full_qk_block(v, layer, ids),
             lambda layer=layer: analysis.full_qk_block(local, layer, ids)),
            ("remote_ov_eigenvalues", f"L{layer}", lambda v, layer=layer: analysis.ov_eigenvalues(v, layer),
             lambda layer=layer: analysis.ov_eigenvalues(local, layer)),
        ]
    cases += [
        ("remote_copying_scores", "all heads", analysis.copying_scores, lambda: analysis.copying_scores(local)),
        ("remote_composition_scores", "Q, K, V (one request)", lambda v: v.weight_views([{"view": "composition", "kinds": ["Q", "K", "V"]}])[0],
         lambda: {k: analysis.composition_scores(local, k) for k in "QKV"}),
        ("remote_skip_trigrams", f"L1H{HEAD}, source {token}, k=10", lambda v: analysis.skip_trigrams(v, 1, HEAD, token, 10)._asdict(),
         lambda: analysis.skip_trigrams(local, 1, HEAD, token, 10)._asdict()),
    ]
    sequence = torch.tensor([[BOS, *ids]])  # a logit attribution: every term at every position, next-token targets
    cases.append(("remote_logit_attribution", "65 tokens, heads' terms",
                  lambda v: analysis.logit_attribution_by_position(v, sequence).heads[:-1],
                  lambda: analysis.logit_attribution_by_position(local, sequence).heads[:-1]))
    rows = []
    for name, args, call, expected_of in cases:
        expected = expected_of()  # (a warm-up: the local weights are built once)
        local_s = timed(expected_of, runs)
        here_s = timed(lambda call=call: call(here), runs)
        traces, received, first = remote.traces, remote.bytes_received, len(REQUESTS)
        answer = call(remote)
        traces, received = remote.traces - traces, remote.bytes_received - received
        request_phases = phases(REQUESTS[first:])
        remote_s = timed(lambda call=call: call(remote), runs)
        diff, scale, same_ids = compare(name, answer, expected)
        row = {"view": name, "args": args, "remote_s": remote_s, "nnsight_local_s": here_s, "local_s": local_s,
               "traces": traces, "download_bytes": received, "phases": request_phases, "max_abs_diff": diff,
               "scale": scale, "rel_diff": diff / scale if scale else diff,
               "ok": diff <= TOLERANCE * scale and same_ids}
        if same_ids is not True:
            row["same_ids"] = same_ids
        rows.append(row)
        print(f"  {name:<26} {args:<28} remote {remote_s * 1e3:7.1f} ms  local {local_s * 1e3:7.1f} ms  "
              f"{received:>7} B  max|diff| {diff:.2e} (scale {scale:.3g})  {'ok' if row['ok'] else 'MISMATCH'}", flush=True)
    return rows


def timed(call, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 5)


def compare(name: str, answer: Any, expected: Any) -> tuple[float, float, bool]:
    """``(max abs difference, scale, ids equal)`` of a remote answer against the local analysis."""
    import torch

    if name == "remote_composition_scores":
        diffs = [compare("", answer[k], expected[k]) for k in "QKV"]
        return max(d for d, _, _ in diffs), max(s for _, s, _ in diffs), all(i for _, _, i in diffs)
    if name == "remote_skip_trigrams":
        same = all(torch.equal(torch.as_tensor(answer[k]).long(), expected[k].long()) for k in ("destinations", "outs"))
        same = same and int(answer["source"]) == int(expected["source"])
        diffs = [compare("", torch.as_tensor(answer[k]), expected[k]) for k in ("destination_values", "out_values")]
        return max(d for d, _, _ in diffs), max(s for _, s, _ in diffs), same
    a, e = torch.as_tensor(answer), torch.as_tensor(expected)
    if a.shape != e.shape:
        return float("inf"), 0.0, False
    if name == "remote_ov_eigenvalues":  # each local eigenvalue's nearest remote one (a conjugate pair's order is free)
        a, e = a.to(torch.complex128), e.to(torch.complex128)
        diff = float((e[..., :, None] - a[..., None, :]).abs().amin(-1).max())
        return diff, float(e.abs().max()), True
    a, e = a.double(), e.double()
    if not torch.equal(a.isnan(), e.isnan()):
        return float("inf"), 0.0, False
    finite = ~e.isnan()
    return float((a[finite] - e[finite]).abs().max()), float(e[finite].abs().max()), True


# ----- the report --------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import nnsight
    import torch

    server = sorted(glob.glob(str(REPO / ".venv-ndif" / "lib" / "python*" / "site-packages" / "ndif-*.dist-info")))
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "nnsight": nnsight.__version__,
            "ndif": Path(server[-1]).name.removesuffix(".dist-info").removeprefix("ndif-") if server else "?",
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def kb(n: int) -> str:
    return f"{n} B" if n < 1e3 else f"{n / 1e3:.1f} kB" if n < 1e6 else f"{n / 1e6:.2f} MB"


def markdown(result: dict[str, Any]) -> str:
    m, s, p, z = result["machine"], result["server"], result["ping"], result["zoom"]
    lines = [
        "# circuitwidgets against a real NDIF server (localhost, CPU)",
        "",
        f"`.venv/bin/python benchmarks/bench_remote_ndif.py` (`remote_ndif.json` holds every figure). Server: ndif {m['ndif']} "
        f"(ndif_local/start.sh, {'started by the script in ' + str(s['start_s']) + ' s' if s['start_s'] else 'already running'}); "
        f"client nnsight {m['nnsight']}, torch {m['torch']}, {m['cpu_count']} CPUs shared by client and server "
        f"({m['threads']} torch threads), load average {m['load_average']} at the start, {m['load_average_end']} at the end; "
        f"{m['platform']}. The idle server's processes (Ray's daemons, the model actor, the API) used "
        f"{m['server_idle_cpu_cores']} cores; other jobs on the shared CPUs (the load average) make single times noisy.",
        f"Model: {result['model']}.",
        "",
        f"Ping (a 3-token trace saving the logits): cold {p['cold_s']:.2f} s (the server provisions its model actor), "
        f"warm {p['warm_s_median'] * 1e3:.0f} ms median.",
        "",
        "## AttentionPattern first picture (layer 1, head 1; median of "
        f"{result['first_picture'][0]['runs']})",
        "",
        "| tokens | path | HFView | picture | requests | downloaded | first message | overview factor |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["first_picture"]:
        lines.append(f"| {r['tokens']} | {r['path']} | {r['view_s'] * 1e3:.0f} ms | {r['picture_s'] * 1e3:.0f} ms | {r['traces']} | "
                     f"{kb(r['download_bytes'])} | {kb(r['first_message_bytes'])} | {r['lod_factor']} |")
    lines += [
        "",
        f"## Remote zoom ({z['tokens']} tokens, L1H1)",
        "",
        "| what | requests | downloaded | time |",
        "|---|---:|---:|---:|",
        f"| first picture (with the head's queries and keys: {kb(z['head_inputs_bytes'])}) | {z['first_traces']} | "
        f"{kb(z['first_download_bytes'])} | {z['first_picture_s'] * 1e3:.0f} ms |",
        f"| {z['actions']} zoom / pan / hover actions | {z['action_traces']} | {z['action_download_bytes']} B | "
        f"tile {z['tile_s_median'] * 1e3:.0f} ms median ({z['tile_s_max'] * 1e3:.0f} max), hover {z['hover_s_median'] * 1e3:.1f} ms median |",
        f"| head switch (H{HEAD} -> H{SWITCH_TO}, a tile, a hover) | {z['head_switch_traces']} | {kb(z['head_switch_download_bytes'])} | "
        f"{z['head_switch_s'] * 1e3:.0f} ms |",
        "",
        f"Last 256-token tile vs the exact local pattern: max |diff| {z['tile_max_abs_diff']:.1e}; hover row: {z['row_max_abs_diff']:.1e}.",
        "",
        "## Remote weight views (median of 3 calls)",
        "",
        "| view | arguments | NDIF | remote=\"local\" | local analysis | requests | downloaded | max abs diff / scale | ok |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in result["weights"]:
        lines.append(f"| {r['view']} | {r['args']} | {r['remote_s'] * 1e3:.0f} ms | {r['nnsight_local_s'] * 1e3:.0f} ms | "
                     f"{r['local_s'] * 1e3:.1f} ms | {r['traces']} | {kb(r['download_bytes'])} | "
                     f"{r['max_abs_diff']:.1e} / {r['scale']:.3g} | {'yes' if r['ok'] else '**no**'} |")
    names = ("serialize", "submit", "wait", "run", "fetch")
    lines += [
        "",
        "## Where a remote request's time goes (ms; one request each)",
        "",
        "serialize: the request, here; submit: websocket and POST until the server says RECEIVED; wait: RECEIVED until "
        "RUNNING (queue, dispatch to the model actor); run: RUNNING until COMPLETED (the server's own `runtime` in "
        "brackets); fetch: COMPLETED until the trace returns (download, deserialising).",
        "",
        "| request | " + " | ".join(names) + " | total |",
        "|---|" + "---:|" * (len(names) + 1),
    ]
    timed_rows = [("ping, cold", p["cold_phases"]), ("ping, warm (median)", p["warm_phases"])]
    timed_rows += [(f"first picture, {r['tokens']} tokens", r["phases"]) for r in result["first_picture"] if r["path"] == "remote"]
    timed_rows += [(f"head switch, {z['tokens']} tokens", z["head_switch_phases"])]
    timed_rows += [(f"{r['view']} ({r['args']})", r["phases"]) for r in result["weights"][:3]]
    for label, ph in timed_rows:
        cells = [f"{ph[k] * 1e3:.1f}" + (f" ({ph['server_runtime'] * 1e3:.1f})" if k == "run" else "") for k in names]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {sum(ph[k] for k in names) * 1e3:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="256,max", help="prompt lengths ('max': the model's max_position_embeddings)")
    parser.add_argument("--runs", type=int, default=3, help="constructions / calls per measurement (medians)")
    args = parser.parse_args()
    with ndif_server() as (url, path, start_s):
        import nnsight
        import nnsight.modeling.huggingface as nnsight_hf

        nnsight.CONFIG.API.HOST, nnsight.CONFIG.APP.REMOTE_LOGGING = url, False
        nnsight_hf._ID_CACHE[path] = path  # nnsight canonicalises a repo id on the Hub: a local path has no entry
        stamp_requests()
        client = Client(path)
        n_ctx = client.config.max_position_embeddings
        lengths = [n_ctx if x == "max" else int(x) for x in args.lengths.split(",")]
        if max(lengths) > n_ctx:
            raise SystemExit(f"--lengths: the served model has {n_ctx} positions")
        facts = machine()
        facts["server_idle_cpu_cores"] = server_cpu()
        print(f"server {url}, model {path}", flush=True)
        result: dict[str, Any] = {"machine": facts, "server": {"url": url, "start_s": start_s, "model_path": path}}
        c = client.config
        result["model"] = (f"tiny random Llama (ndif_local/make_model.py): {c.num_hidden_layers} layers, {c.num_attention_heads} heads "
                           f"in {c.num_key_value_heads} K/V groups of d_head {c.head_dim}, d_model {c.hidden_size}, vocabulary "
                           f"{c.vocab_size}, {n_ctx} positions, float32")
        result["ping"] = ping(client)
        print("ping", json.dumps(result["ping"]), flush=True)
        for way in ("remote", "nnsight_local", "local"):  # warm-up: imports, each path's first trace
            first_picture(client, 16, way, 1)
        rows = []
        for n in lengths:
            for way in ("remote", "nnsight_local", "local"):
                row = first_picture(client, n, way, args.runs)
                rows.append(row)
                print(f"  {n:>5} {way:<14} view {row['view_s'] * 1e3:7.1f} ms  picture {row['picture_s'] * 1e3:7.1f} ms  "
                      f"traces {row['traces']}  {row['download_bytes']:>8} B", flush=True)
        result["first_picture"] = rows
        result["zoom"] = zoom(client, max(lengths))
        print("zoom", json.dumps(result["zoom"]), flush=True)
        result["weights"] = weight_views(client, args.runs)
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    checks = [result["zoom"]["ok"]] + [r["ok"] for r in result["weights"]]
    result["ok"] = all(checks)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    RESULTS.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    print(f"wrote {RESULTS} and {RESULTS.with_suffix('.md')}; checks {'passed' if result['ok'] else 'FAILED'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
