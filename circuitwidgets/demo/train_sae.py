"""Train the demo dictionary: a top-k sparse autoencoder on the two-layer demo model's ``blocks.1.hook_resid_pre``.

``python -m circuitwidgets.demo.train_sae`` (``make train-demo-sae``; a few CPU minutes) writes
``dictionary.safetensors`` (the `circuitwidgets.Dictionary`, its labels in its metadata) and
``dictionary_card.json`` (recipe, versions, variance explained, L0, what its features are) into this folder.

The residual stream entering layer 1 is what the induction heads read: the token embedding, the learned
position, and what the previous-token heads of layer 0 wrote (the token before). The data is the demo model's
own: random characters after ``<bos>`` with one segment copied later (``make_batch`` of the demo's recipe). The
activations of `BUFFER` sequences are computed once; the autoencoder trains on shuffled batches of them
(AdamW, decoder rows kept at unit norm, an auxiliary loss that revives features dead for `DEAD_STEPS`).

Each feature is then named from what it fires on, over held-out sequences: "current token = 'a'" when at least
`LABEL_SHARE` of its activation falls on positions holding 'a', "previous token = 'a'" when on positions after
an 'a', "position 12-15" when on a few positions; the card counts each kind.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from ..dictionary import Dictionary
from . import CHARS, CONFIG, demo_model
from ._files import DEMO_DIR

DICTIONARY_FILE = DEMO_DIR / "dictionary.safetensors"
CARD_FILE = DEMO_DIR / "dictionary_card.json"
HOOK_NAME = "blocks.1.hook_resid_pre"
DEFAULTS = {"seed": 0, "features": 256, "k": 4, "steps": 3000, "batch": 4096, "lr": 2e-3}
BUFFER = 4096  # sequences of activations (262 144 positions)
EVAL_SEED = 4242
DEAD_STEPS = 250
AUX_K = 32
AUX_WEIGHT = 1 / 32
LABEL_SHARE = 0.5
MIN_SEGMENT, MAX_SEGMENT = 6, 20


def make_batch(batch: int, generator: torch.Generator, n_ctx: int = CONFIG["n_ctx"]) -> torch.Tensor:
    """``[batch, n_ctx]`` tokens: random characters after ``<bos>``, one segment of 6-20 copied later (the demo's recipe)."""
    tokens = torch.randint(2, CONFIG["d_vocab"], (batch, n_ctx), generator=generator)
    tokens[:, 0] = 0
    length = torch.randint(MIN_SEGMENT, MAX_SEGMENT + 1, (batch,), generator=generator)
    u, v = torch.rand(batch, generator=generator), torch.rand(batch, generator=generator)
    start = 1 + (u * (n_ctx - 2 * length)).long()
    copy = start + length + (v * (n_ctx - length - (start + length) + 1)).long()
    pos = torch.arange(n_ctx)[None, :]
    in_copy = (pos >= copy[:, None]) & (pos < (copy + length)[:, None])
    return tokens.gather(1, torch.where(in_copy, pos - copy[:, None] + start[:, None], pos))


def activations(model: Any, tokens: torch.Tensor, chunk: int = 512) -> torch.Tensor:
    """``[batch, seq, d_model]`` residual stream at `HOOK_NAME`."""
    out = []
    with torch.no_grad():
        for start in range(0, tokens.shape[0], chunk):
            _, cache = model.run_with_cache(tokens[start : start + chunk], names_filter=lambda name: name == HOOK_NAME)
            out.append(cache[HOOK_NAME].float())
    return torch.cat(out)


def train(
    seed: int, features: int, k: int, steps: int, batch: int, lr: float, log: Any = print
) -> tuple[Dictionary, list[float]]:
    """A top-k autoencoder trained on `BUFFER` sequences of the demo model's activations; its loss every 100 steps."""
    model = demo_model()
    data = torch.Generator().manual_seed(seed)
    x = activations(model, make_batch(BUFFER, data)).reshape(-1, CONFIG["d_model"])
    init = torch.Generator().manual_seed(seed + 1)
    d = x.shape[1]
    W_dec = torch.randn(features, d, generator=init)
    W_dec = torch.nn.Parameter(W_dec / W_dec.norm(dim=1, keepdim=True))
    W_enc = torch.nn.Parameter(W_dec.detach().T.clone())
    b_enc = torch.nn.Parameter(torch.zeros(features))
    b_dec = torch.nn.Parameter(x.mean(0).clone())
    optimiser = torch.optim.AdamW([W_enc, b_enc, W_dec, b_dec], lr=lr, weight_decay=0.0)
    since = torch.zeros(features)
    history = []
    order = torch.randperm(x.shape[0], generator=data)
    cursor = 0
    for step in range(steps):
        if cursor + batch > order.numel():
            order, cursor = torch.randperm(x.shape[0], generator=data), 0
        xb = x[order[cursor : cursor + batch]]
        cursor += batch
        pre = (xb - b_dec) @ W_enc + b_enc
        values, index = pre.topk(k, dim=-1)
        acts = torch.zeros_like(pre).scatter(-1, index, values.relu())
        recon = acts @ W_dec + b_dec
        loss = (recon - xb).pow(2).sum(-1).mean()
        with torch.no_grad():
            since += 1
            since[index[values > 0]] = 0
        dead = since > DEAD_STEPS
        if bool(dead.any()):  # the residual, explained by the dead features alone (they learn to fire again)
            masked = pre.masked_fill(~dead, float("-inf"))
            aux_values, aux_index = masked.topk(min(AUX_K, int(dead.sum())), dim=-1)
            aux = torch.zeros_like(pre).scatter(-1, aux_index, aux_values.relu())
            loss = loss + AUX_WEIGHT * ((aux @ W_dec) - (xb - recon).detach()).pow(2).sum(-1).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        with torch.no_grad():
            W_dec /= W_dec.norm(dim=1, keepdim=True)
        if step % 100 == 0 or step == steps - 1:
            history.append(round(float(loss.detach()), 5))
            if step % 500 == 0 or step == steps - 1:
                log(f"step {step}: loss {float(loss.detach()):.4f}, dead {int(dead.sum())}")
    dictionary = Dictionary(W_enc.detach().clone(), b_enc.detach().clone(), W_dec.detach().clone(), b_dec.detach().clone(),
                            HOOK_NAME, k=k, apply_b_dec_to_input=True, name=f"demo dictionary ({features} features, top-{k})")
    return dictionary, history


def _char(token: int) -> str:
    return "<bos>" if token == 0 else "<unk>" if token == 1 else CHARS[token - 2]


def evaluate(dictionary: Dictionary, sequences: int = 1024) -> tuple[dict[str, Any], dict[int, str]]:
    """Variance explained, L0, dead features and a label per feature, on held-out sequences."""
    model = demo_model()
    tokens = make_batch(sequences, torch.Generator().manual_seed(EVAL_SEED))
    x = activations(model, tokens)
    flat = x.reshape(-1, x.shape[-1])
    acts = torch.cat([dictionary.encode(flat[s : s + 8192]) for s in range(0, flat.shape[0], 8192)])
    recon = dictionary.decode(acts)
    explained = 1 - float((recon - flat).pow(2).sum() / (flat - flat.mean(0)).pow(2).sum())
    l0 = float((acts > 0).float().sum(-1).mean())
    n_ctx = tokens.shape[1]
    keys = {
        "current token": tokens.reshape(-1),
        "previous token": torch.cat([torch.full((sequences, 1), -1), tokens[:, :-1]], 1).reshape(-1) + 1,
        "position": torch.arange(n_ctx).expand(sequences, n_ctx).reshape(-1),
    }
    labels: dict[int, str] = {}
    kinds = {"current token": 0, "previous token": 0, "position": 0, "other": 0, "dead": 0}
    for feature in range(dictionary.n_features):
        w = acts[:, feature]
        if float(w.sum()) <= 0:
            kinds["dead"] += 1
            continue
        best = (0.0, "other", 0)
        for kind, key in keys.items():
            mass = torch.zeros(int(key.max()) + 1).index_add_(0, key, w)
            share, where = (mass / mass.sum()).max(0)
            if float(share) > best[0]:
                best = (float(share), kind, int(where))
        share, kind, where = best
        if share < LABEL_SHARE:  # spread: name its top positions' span instead
            top = torch.zeros(n_ctx).index_add_(0, keys["position"], w)
            cumulative = top.sort(descending=True)
            span = cumulative.indices[: int((cumulative.values.cumsum(0) < 0.8 * top.sum()).sum()) + 1]
            if span.numel() <= 8:
                kinds["position"] += 1
                labels[feature] = f"position {int(span.min())}-{int(span.max())}"
            else:
                kinds["other"] += 1
            continue
        kinds[kind] += 1
        if kind == "current token":
            labels[feature] = f"current token = {_char(where)!r}"
        elif kind == "previous token":
            labels[feature] = f"previous token = {_char(where - 1)!r}" if where > 0 else "first position"
        else:
            labels[feature] = f"position {where}"
    return {"variance_explained": round(explained, 4), "l0": round(l0, 3), "features": kinds}, labels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m circuitwidgets.demo.train_sae", description=__doc__.splitlines()[0])
    for name, value in DEFAULTS.items():
        parser.add_argument(f"--{name}", type=type(value), default=value)
    parser.add_argument("--out", default=str(DEMO_DIR), help="folder for dictionary.safetensors and dictionary_card.json")
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    begun = time.time()
    dictionary, history = train(args.seed, args.features, args.k, args.steps, args.batch, args.lr)
    metrics, labels = evaluate(dictionary)
    dictionary.set_labels(labels)
    from importlib.metadata import version
    from pathlib import Path

    out = Path(args.out)
    path = dictionary.save(out / DICTIONARY_FILE.name)
    card = {
        "what": "a top-k sparse autoencoder on the two-layer demo model's residual stream entering layer 1",
        "hook_name": HOOK_NAME,
        "recipe": {**{name: getattr(args, name) for name in DEFAULTS}, "buffer_sequences": BUFFER, "optimiser": "AdamW",
                   "decoder_rows": "unit norm", "aux_k": AUX_K, "aux_weight": AUX_WEIGHT, "dead_after_steps": DEAD_STEPS,
                   "data": "random characters after <bos>, one segment of 6-20 copied later (the demo's recipe)"},
        "metrics": {**metrics, "held_out_sequences": 1024, "label_share": LABEL_SHARE},
        "loss_every_100_steps": history,
        "size_bytes": path.stat().st_size,
        "seconds": round(time.time() - begun, 1),
        "versions": {"torch": torch.__version__, "transformer_lens": version("transformer-lens")},
    }
    (out / CARD_FILE.name).write_text(json.dumps(card, indent=1) + "\n")
    print(json.dumps(card["metrics"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
