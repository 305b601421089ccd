"""`AttentionPattern`: one layer's attention patterns, live on a prompt or on token ids, or drawn from tensors given.

The model path is one request (`circuitwidgets.analysis.attention_request.ask`): the shown layer's
picture, whatever the length and the backend, and the answer that serves every later tile and row.
Short prompts send the whole layer (uint8, lower triangle); long ones (the layer's codes above
`LOD_BYTES`) send an overview per head, pooled over `factor x factor` cells, and the view asks for
exact tiles. `AttentionPicture` draws the answer; `LongRuns` runs a long request with progress and
Cancel in the widget.

`AttentionPattern.from_tensors` draws attention computed anywhere (a TransformerLens cache,
nnsight, NumPy or JAX arrays) with no model: the same picture, level of detail and export, the
tiles and rows cut from the tensor given (`AttentionFromTensors`); the controls that need a model are hidden.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

import torch
import traitlets

from .. import transport
from ..analysis import attention_request
from ..analysis.attention_request import LayerRequest, WholeLayer
from . import _cache
from ._attention_picture import AttentionPicture
from ._given import COPY_BYTES, ModelFree, edited, token_strings
from ._given_attention import TENSOR_NOTE, checked_attention, head_names_of, layer_caption, tensor_note
from ._long_runs import LongRuns
from .base import selector_facts

#: Above this many bytes of uint8 codes for the layer (lower triangles of every head), the widget
#: sends overviews and tiles (level of detail) instead of every cell.
LOD_BYTES = 4 << 20
#: Longest side of an overview, in pooled cells (a factor of ceil(seq / OVERVIEW_CELLS)).
OVERVIEW_CELLS = 512


def uses_lod(lod: bool, seq: int, n_heads: int) -> bool:
    """True when a layer of `seq` tokens and `n_heads` heads is drawn by level of detail (`lod`: the widget's trait)."""
    return lod and n_heads * seq * (seq + 1) // 2 > LOD_BYTES


def overview_factor(seq: int) -> int:
    """How many positions each cell of a long prompt's overview pools, per side."""
    return -(-seq // OVERVIEW_CELLS)


def memory_note(reason: str, n_heads: int, seq: int, dtype: torch.dtype) -> str:
    """What a long prompt costs on a model that must hold its patterns (`ModelView.memory_reason`): '' for none.

    Example:
        >>> memory_note("a hook sits on the pattern", 12, 8192, torch.float32)[-67:]
        '(3.2 GB per layer, one layer at a time): a hook sits on the pattern'
    """
    if not reason:
        return ""
    size = n_heads * seq * seq * max(4, dtype.itemsize) / 1e9
    held = f"each layer's {seq} x {seq} attention patterns on the way ({size:.1f} GB per layer, one layer at a time)"
    return f"this model holds {held}: {reason}"


class AttentionPattern(AttentionPicture, LongRuns, view="attention"):
    """Heatmap of a head's attention pattern, thumbnails of every head in the layer, a token view.

    Rows are destinations (the query position, where the head writes), columns sources (the key
    position, the token attended to); each row sums to 1.

    Switching head within a layer happens in the browser (the whole layer is sent, as uint8);
    editing the prompt or changing layer re-runs the model in the kernel, up to that layer only.

    Long prompts (the layer's uint8 codes above `LOD_BYTES`, e.g. 12 heads from about 830
    tokens) are drawn by level of detail: ``patterns`` holds each head's overview, pooled over
    ``factor x factor`` cells (`pool`: "max" keeps a one-cell stripe visible, "mean" averages),
    and zooming in the view asks the kernel for exact tiles through ``tile_request``, answered in
    ``tile``. Hover values are exact at every zoom (``row``). Exported pages hold the overview;
    deeper zoom needs the kernel.

    `from_tensors` draws attention weights computed elsewhere, with no model (see there).

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        prompt: text to run (tokenised with BOS). Needs a tokenizer.
        tokens: token ids ``[seq]`` or ``[1, seq]``, in place of `prompt` (labels then show ids).
        layer: block index of an attention layer. head: head index in that layer.
        pool: "max" or "mean", how overviews of long prompts pool cells.
        defer: in a notebook kernel, show the widget at once and compute just after the cell returns: a long
            prompt then runs on the worker thread, with a progress bar and Cancel in the widget, and fills in
            (``patterns`` stays empty until then). Default False: the picture is there for the next line,
            with the cell's own progress bar on long work.
        lod: False sends every cell of long prompts too (the full-matrix path).

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abcabc", layer=1, head=0)
        >>> w.patterns["shape"], w.str_tokens[1:4]
        ([4, 7, 7], ['a', 'b', 'c'])
    """

    inputs: ClassVar[tuple[str, ...]] = ("layer",)  # (with the picture's pool, lod and color scale, and the prompt or tokens)
    picture_trait = "patterns"

    memory_note = traitlets.Unicode(
        "", help="for a long prompt on a model whose attention cannot run memory efficiently: that each layer's n x n "
        "patterns are held on the way, and why"
    ).tag(sync=True)

    def __init__(
        self, model: Any, prompt: str | None = None, *, tokens: Any = None, layer: int = 0, head: int = 0,
        defer: bool = False, **kwargs: Any,
    ) -> None:
        if prompt is not None and tokens is not None:
            raise ValueError("pass either prompt or tokens, not both")
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        super().__init__(model, layer=layer, head=head, **kwargs)
        self.info = {**selector_facts(self.mv), "n_ctx": self.mv.n_ctx}
        if tokens is not None:
            self.tokens, self.source = self._sequence(self.mv.check_tokens(tokens)), "tokens"
        elif prompt is not None:
            self.prompt, self.source = prompt, "prompt"
        self._start(defer)

    @classmethod
    def from_tensors(
        cls, tokens: Any, attention: Any, *, head_names: Any = None, layer_name: Any = None, **kwargs: Any
    ) -> AttentionPattern:
        """The widget drawing attention weights computed anywhere, with no model.

        The same picture, head thumbnails, hover read-outs, selection, level of detail for long
        prompts (tiles and exact rows cut from `attention` in the kernel; every cell shipped when
        small) and export as a model's. The layer and prompt controls, which need a model, are
        hidden; the widget says so in its note (``info["note"]``), with any rows that do not sum
        to ~1 (allowed, drawn as given).

        Args:
            tokens: the token strings, one per position (e.g. ``model.to_str_tokens(prompt)``).
            attention: ``[n_heads, destination, source]`` weights in [0, 1], or one head's
                ``[destination, source]``: a torch tensor of any float dtype on any device (e.g.
                ``cache["pattern", 0][0]``), a NumPy or JAX array, nested lists. Kept as float32 on
                the CPU, as a copy of its own (a later edit of the tensor given changes nothing drawn).
            head_names: a name for each head (thumbnails, head selector, title); default H0, H1...
            layer_name: a caption for the layer (str, or an int shown as "Layer <n>").
            **kwargs: initial values of other traits (head, pool, lod, selection).

        Raises ValueError or TypeError naming the problem: tokens that are not strings, a shape
        that is not square over its last two dims or does not match ``len(tokens)``, NaN or
        infinite values, values outside [0, 1], head names of the wrong number or type.

        Example:
            >>> import torch
            >>> import circuitwidgets as cw
            >>> prev = torch.eye(4).roll(-1, 1).tril() + torch.eye(4) * torch.tensor([1.0, 0, 0, 0])
            >>> w = cw.AttentionPattern.from_tensors(["a", "b", "c", "d"], prev, head_names=["previous"])
            >>> w.patterns["shape"], w.info["head_names"], w.info["note"]
            ([1, 4, 4], ['previous'], 'from tensors: no model, so no layer or prompt controls')
        """
        return AttentionFromTensors(tokens, attention, head_names=head_names, layer_name=layer_name, **kwargs)

    @traitlets.observe("head")
    def _on_head(self, change: dict) -> None:
        if self._ready and self._answer is not None and self._answer.held:  # a remote model: the new head's inputs
            self._soon("selection", self._selection_row, defer=True)  # (one request)

    def _refresh(self) -> None:
        mv = self.mv
        tokens = mv.check_tokens(self.tokens) if self.source == "tokens" else mv.to_tokens(self.prompt)
        labels = mv.to_str_tokens(tokens)
        ids = tokens[0].tolist()  # the read-out names each token's id beside its string
        seq = len(ids)
        long = uses_lod(self.lod, seq, mv.n_heads)
        factor = overview_factor(seq) if long else 1
        scale = transport.color_scale(self.color_scale, seq, step=factor)
        request = LayerRequest(tuple(ids), self.layer, lod=long, factor=factor, pool=self.pool, scale=scale, head=self.head)
        self._set(memory_note=memory_note(attention_request.memory_reason(mv, request), mv.n_heads, seq, mv.dtype))

        def show(answer: attention_request.LayerAnswer) -> None:
            self._draw(labels, answer, ids=ids)
            self.tokens = ids

        ask = partial(attention_request.ask, mv, request, _cache.kept)
        self._compute(f"layer {self.layer} of {seq} tokens", ask, show, long=long)


class AttentionFromTensors(ModelFree, AttentionPattern):
    """What `AttentionPattern.from_tensors` makes: an `AttentionPattern` of the tensors given, with no model.

    Layer, prompt and token ids cannot be set (no model to run: the message says so); the head is
    checked against the heads given. Tiles and exact rows of a long prompt are cut from the
    tensor kept in the kernel. It draws with `AttentionPicture`, as the model's widget does, and
    has none of its model path: its own set-up, and a refresh that draws the tensor
    (a subclass of `AttentionPattern` only so that what ``from_tensors`` returns is one).

    Example:
        >>> import torch
        >>> w = AttentionFromTensors(["x", "y"], torch.tensor([[1.0, 0.0], [0.5, 0.5]]), layer_name=3)
        >>> w.info["layer_name"], w.current_patterns()[0, 1].tolist(), w.model is None
        ('Layer 3', [0.5, 0.5], True)
    """

    no_model = TENSOR_NOTE

    def __init__(self, tokens: Any, attention: Any, *, head_names: Any = None, layer_name: Any = None, **kwargs: Any) -> None:
        labels = token_strings(tokens)
        stack, facts = checked_attention(attention, len(labels))
        n_heads, n = stack.shape[0], stack.shape[1]
        names, caption = head_names_of(head_names, n_heads), layer_caption(layer_name)
        self._given_labels, self._given, self._given_causal = labels, stack, facts.causal
        self._given_version = stack._version  # (a tensor kept by reference, past COPY_BYTES: checked before each use)
        self._overviews: dict[str, torch.Tensor] = {}  # a long one's, by pool
        AttentionPicture.__init__(self, None, **kwargs)  # the picture's set-up (AttentionPattern's own runs a model)
        self.info = {
            "n_layers": 0, "n_heads": n_heads, "attn_layers": [], "n_ctx": n, "has_tokenizer": False,
            "tensors": True, "head_names": names, "layer_name": caption, "note": tensor_note(facts),
        }
        self._start()

    def _check_layer(self, value: int) -> int:
        if value != 0:  # (the one layer there is; name it with layer_name)
            raise ValueError(f"layer={value}: {TENSOR_NOTE}")
        return value

    def _check_head(self, value: int) -> int:
        n_heads = self._given.shape[0]
        if not 0 <= value < n_heads:
            raise ValueError(f"head={value} is out of range: the tensors given have heads 0..{n_heads - 1}")
        return value

    def _no_model(self, value: Any) -> Any:
        raise ValueError(TENSOR_NOTE)

    _check_prompt = _check_tokens = _check_source = _no_model

    def _verify_given(self) -> None:
        if edited(self._given, self._given_version):
            raise ValueError(
                "the attention tensor given was changed in place after this widget checked it (it is kept by reference: "
                f"larger than {COPY_BYTES >> 30} GiB); make a new widget of the tensor as it is now"
            )

    def _refresh(self) -> None:
        self._verify_given()
        n_heads, n = self._given.shape[0], self._given.shape[1]
        long = uses_lod(self.lod, n, n_heads)
        answer = WholeLayer(self._given, 0, lod=long, factor=overview_factor(n) if long else 1, pool=self.pool,
                            overview=self._overviews, causal=self._given_causal)
        self._draw(self._given_labels, answer)
