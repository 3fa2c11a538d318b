"""Hugging Face decoder front door: a Llama-, Qwen3-, Gemma-3- or Phi-3-style checkpoint directory (``config.json`` and
safetensors) as one Relax program that serves prefill and token-by-token decode, its key/value cache
kept on the device between runs.

The program (``main``)::

    main(input_ids: int32[1, S], attention_mask: int64[1, T], past_k0: [MAX, KV*D], past_v0, ...)
        -> (logits: float32[1, S, V] (or [1, 1, V], the last token's), new_k0: [S, KV*D], new_v0, ...)

* ``S`` (the tokens of this call, ``1..max_prompt``) and ``T`` (the tokens seen so far, this call's
  included, ``1..max_len``) are run-time dims: one artifact runs a prompt of any length and then one
  token at a time, and nothing is compiled at a new length.
* The tokens sit at positions ``T-S .. T-1`` (RoPE's positions, as Hugging Face's ``cache_position``).
  ``attention_mask`` is Hugging Face's: 1 where a token is attended to, 0 for padding.
* ``past_k<i>`` / ``past_v<i>`` are the layer's cache, ``MAX = max_len`` rows of ``KV*D`` values,
  rows ``0..T-S-1`` holding the keys and values of earlier calls. They are *states*
  (:mod:`relax_vk.core.states`): the runtime keeps them on the device, zeroed at load, and after
  each run writes ``new_k<i>`` (this call's keys, after RoPE) into rows ``T-S .. T-1``. No cache
  crosses to the host, and the cache is held once.
* Attention reads rows ``0..T-S-1`` of the cache and this call's keys, causally masked.

The math follows ``transformers``' ``LlamaForCausalLM``, ``Qwen3ForCausalLM``,
``Gemma2ForCausalLM``, ``Gemma3ForCausalLM`` and ``Phi3ForCausalLM`` (RMSNorm, RoPE default or scaled as ``rope_scaling``
says (:mod:`relax_vk.frontends.rope_scaling`), over whole heads or Phi's first
``partial_rotary_factor`` of them, grouped-query attention, SwiGLU or Gemma's tanh-GELU gate,
Qwen3's and Gemma 3's per-head q/k RMSNorm, Gemma's soft-capped scores and logits, tied or separate
output embeddings, optional attention and MLP biases, Phi's fused q/k/v and gate/up weights; Qwen2 and
Mistral too). Sliding-window layers mask the cache to their window (the cache
is held at its bound either way). Weights are read from safetensors (float32, float16 or bfloat16)
without ``transformers`` or ``torch``. What the converter does not know (another architecture,
LongRoPE past its original length, a checkpoint weight the program would not read) is an
:class:`~relax_vk.core.errors.UnsupportedError` naming the field or the weight.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
import tvm
from tvm import relax, tirx

from ..core.dims import with_dim_ranges
from ..core.errors import UnsupportedError
from ..core.provenance import record_model_ops
from ..core.states import with_states
from ..schedules.decode_attention import Attention, attention_combine_kernel, attention_one_pass_kernel, attention_parts_kernel, one_pass
from ..schedules.decode_attention import parts as key_parts
from ..schedules.rotary import Rotary, rotary_kernel
from .blockwise import BlockwiseFormat, as_words, gather_parts, pack_symmetric
from .errors import ModelLoadError
from .rope_scaling import check as check_rope
from .rope_scaling import rope_type, rotary_frequencies

#: the score of a key a query may not attend to. transformers uses float32's lowest value; a row of
#: masked keys only (a padded query) must then softmax to a uniform row, which needs the max
#: reduction to start at or below that value (TVM's OpenCL code started above it until
#: relax_vk.codegen.exact_floats: NaN, carried to every token by the next layers). -1e30 leaves
#: that margin on any backend, and exp(MASKED - max) is 0 beside any attended key.
MASKED = -1.0e30

#: ``quantize="int4"``: weights in blocks of this many along each dot product (llama.cpp's Q4_0 and
#: ExecuTorch's ``linear_q4gsw`` default)
INT4_BLOCK = 32
#: the buffer binding every Vulkan device and OpenCL allocation offers at least (2**27 bytes)
MIN_BINDING_BYTES = 1 << 27
#: the most packed bytes of one 4-bit weight tensor (a larger table, Qwen3-1.7B's 151,936 x 2,048 at
#: 155 MB, is held in parts that the gather and the head read)
INT4_PART_BYTES = MIN_BINDING_BYTES

#: Mistral is Llama's architecture without biases (its sliding window: ``DecoderConfig.sliding_window``);
#: Gemma 2 and 3 add one to their norms' weights, scale their embeddings, normalize each sublayer's
#: output too, gate their MLPs with tanh-GELU and scale scores by ``query_pre_attn_scalar ** -0.5``;
#: Gemma 2 soft-caps its scores and logits and has no q/k norms
#: Phi-3 is Llama's math with q, k and v in one weight and gate and up in another (``_unfused``)
_ARCHITECTURES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen3ForCausalLM": "qwen3", "Qwen2ForCausalLM": "qwen2",
                  "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3", "Phi3ForCausalLM": "phi3"}  # fmt: skip
_MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen3": "qwen3", "qwen2": "qwen2", "gemma2": "gemma2", "gemma3_text": "gemma3",
                "phi3": "phi3"}  # fmt: skip
#: the architectures transformers runs with soft-capped scores and logits where the config asks
_SOFTCAPS = {"gemma2", "gemma3"}
#: of those, the ones whose attention does not read ``attn_logit_softcapping`` (transformers 4.57
#: and 5.0: Gemma 3's eager and SDPA attention never cap scores; only its logits)
_SCORES_NOT_CAPPED = {"gemma3"}
#: ``hidden_act`` -> the gated MLP's activation: transformers' ``silu``, and its tanh GELUs
#: (``gelu_pytorch_tanh`` and ``gelu_new`` compute the same formula)
_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh"}
#: the architectures whose attention honours ``partial_rotary_factor`` (transformers 4.57)
_PARTIAL_ROTARY = {"phi3"}
#: what each architecture's o_proj and MLP take of ``attention_bias`` / ``mlp_bias`` (transformers 4.57)
_OUTPUT_BIAS = {"llama", "qwen3", "gemma2", "gemma3"}


def eos_token_ids(path: str) -> List[int]:
    """The end-of-sequence ids a checkpoint directory names: ``generation_config.json``'s
    ``eos_token_id`` (what transformers' ``generate`` stops at), else ``config.json``'s; an int or a
    list in either; [] when neither names one."""
    for name in ("generation_config.json", "config.json"):
        try:
            with open(os.path.join(path, name)) as f:
                value = json.load(f).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            continue
        if value is not None:
            values = value if isinstance(value, list) else [value]
            return sorted({int(v) for v in values if v is not None})
    return []


def _sliding_layers(c: dict, arch: str, layers: int, where: str) -> Tuple[Optional[int], tuple]:
    """``(window, the layers that attend through it)`` as transformers 4.57 reads a config: its
    ``layer_types`` where written, else Mistral's window on every layer, Qwen's on the layers from
    ``max_window_layers`` on (with ``use_sliding_window``), Gemma 2's on every other layer from the
    first and Gemma 3's on all but every ``sliding_window_pattern``-th."""
    window = c.get("sliding_window")
    if "layer_types" in c and c["layer_types"] is not None:
        types = list(c["layer_types"])
        if len(types) != layers or set(types) - {"sliding_attention", "full_attention"}:
            raise UnsupportedError(f"{where}: layer_types {types} (one of sliding_attention or full_attention a layer)")
        sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    elif arch in ("llama", "phi3"):
        sliding = tuple(range(layers))
    elif arch == "gemma2":
        sliding = tuple(range(0, layers, 2))
    elif arch == "gemma3":
        pattern = int(c.get("sliding_window_pattern") or c.get("_sliding_window_pattern") or 6)
        sliding = tuple(i for i in range(layers) if (i + 1) % pattern)
    else:
        sliding = tuple(range(int(c.get("max_window_layers", layers)), layers)) if c.get("use_sliding_window") else ()
    if window is None or not sliding:
        return None, ()
    if int(window) < 1:
        raise UnsupportedError(f"{where}: sliding_window {window} (at least 1)")
    return int(window), sliding


def _hashable(value):
    """A config value as a frozen dataclass field can hold it (lists as tuples)."""
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


_LAYER_TYPES = {"full_attention", "sliding_attention"}


def _rope_as_v4(c: dict, where: str) -> dict:
    """``c`` with transformers 5's ``rope_parameters`` read into the keys transformers 4 writes
    (``rope_theta``, ``rope_scaling``, ``partial_rotary_factor``,
    ``original_max_position_embeddings``, Gemma 3's ``rope_local_base_freq``), which the rest of
    :meth:`DecoderConfig.from_dict` reads. transformers 5 keeps RoPE in one dict of those settings, or
    one per layer type (Gemma 3: ``full_attention``, ``sliding_attention``); a config without it is
    returned as it is."""
    params = c.get("rope_parameters")
    if not params:
        return c
    if not isinstance(params, dict):
        raise UnsupportedError(f"{where}: rope_parameters {params!r} is not a mapping")
    local = None
    if set(params) <= _LAYER_TYPES and all(isinstance(v, dict) for v in params.values()):
        local, params = params.get("sliding_attention"), params.get("full_attention", {})
    out = dict(c)
    rope = {k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor")}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if "rope_theta" in params:
        out["rope_theta"] = params["rope_theta"]
    if params.get("partial_rotary_factor") is not None and c.get("partial_rotary_factor") is None:
        out["partial_rotary_factor"] = params["partial_rotary_factor"]
    if kind == "longrope" and rope.get("original_max_position_embeddings") and not c.get("original_max_position_embeddings"):
        out["original_max_position_embeddings"] = rope["original_max_position_embeddings"]  # (Phi-3 reads it there)
    out["rope_scaling"] = None if kind == "default" else rope
    if local is not None:
        local_kind = local.get("rope_type", local.get("type", "default"))
        if local_kind != "default":
            raise UnsupportedError(f"{where}: rope_parameters.sliding_attention rope_type {local_kind!r} (the sliding layers' "
                                   "RoPE is the default one with its own rope_theta)")  # fmt: skip
        if "rope_theta" in local:
            out["rope_local_base_freq"] = local["rope_theta"]
    return out


@dataclass(frozen=True)
class DecoderConfig:
    """What the program needs of a checkpoint's ``config.json``."""

    architecture: str  # "llama", "qwen2", "qwen3", "gemma2", "gemma3" or "phi3"
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rms_eps: float
    rope_theta: float
    tie_embeddings: bool
    attention_bias: bool  # q/k/v projections (and Llama's o_proj) carry biases
    mlp_bias: bool
    max_positions: int
    #: ``rope_scaling`` as sorted (key, value) pairs (:mod:`relax_vk.frontends.rope_scaling`); () for none
    rope_scaling: tuple = ()
    #: the attention window of the layers in ``sliding_layers`` (each query attends to the last
    #: ``sliding_window`` positions, its own included); None: none
    sliding_window: Optional[int] = None
    sliding_layers: tuple = ()
    #: "silu" (SwiGLU) or "gelu_tanh" (Gemma's GeGLU, transformers' ``gelu_pytorch_tanh``)
    activation: str = "silu"
    #: Gemma: norms multiply by ``1 + weight``, embeddings by ``sqrt(hidden)``, each sublayer's output
    #: is normalized before the residual add, the scores scale by ``query_pre_attn_scalar ** -0.5``
    #: (``score_scale``; None: ``head_dim ** -0.5``) and Gemma 3's sliding layers rotate by their own theta
    norm_offset: float = 0.0
    embed_scale: float = 1.0
    sandwich_norms: bool = False
    score_scale: Optional[float] = None
    local_rope_theta: Optional[float] = None
    #: Gemma's soft caps: scores become ``cap * tanh(score / cap)`` before the mask
    #: (``attn_logit_softcapping``), logits the same (``final_logit_softcapping``); None: none
    attention_softcap: Optional[float] = None
    logit_softcap: Optional[float] = None
    #: the values of a head RoPE rotates, the first ones (``partial_rotary_factor`` times
    #: ``head_dim``); None: all of them
    rotary_dim: Optional[int] = None
    #: ``original_max_position_embeddings`` (Phi-3's; longrope's short factors hold up to it)
    original_max_positions: Optional[int] = None

    @property
    def rotary(self) -> int:
        """The values of each head that RoPE rotates."""
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    @property
    def position_bound(self) -> int:
        """The most positions a cache may hold: ``max_position_embeddings``, and for longrope with
        an ``original_max_position_embeddings`` that (past it transformers rotates new tokens by
        the long factors and keeps the cached ones: a history this program does not follow)."""
        if rope_type(dict(self.rope_scaling)) == "longrope" and self.original_max_positions:
            return min(self.max_positions, self.original_max_positions)
        return self.max_positions

    def rotary_frequencies(self, local: bool = False):
        """``(inv_freq [rotary / 2] float32, attention factor)`` of this config's RoPE (``local``:
        of its sliding layers, where they have a theta of their own, unscaled as transformers does)."""
        if local and self.local_rope_theta is not None:
            return rotary_frequencies(self.rotary, self.local_rope_theta, None, self.max_positions)
        return rotary_frequencies(self.rotary, self.rope_theta, dict(self.rope_scaling) or None, self.max_positions, self.original_max_positions)

    @property
    def qkv_rows(self) -> Dict[str, int]:
        """The rows of the q, k and v projections, in the order one product holds them."""
        return {"q": self.heads * self.head_dim, "k": self.kv_heads * self.head_dim, "v": self.kv_heads * self.head_dim}

    @property
    def output_bias(self) -> bool:
        """Llama's, Qwen3's and Gemma's ``attention_bias`` cover o_proj too; Qwen2's covers q/k/v only."""
        return self.attention_bias and self.architecture in _OUTPUT_BIAS

    @property
    def qk_norm(self) -> bool:
        """Qwen3's and Gemma 3's RMSNorm over each head of q and k."""
        return self.architecture in ("qwen3", "gemma3")

    @classmethod
    def from_dict(cls, c: dict, where: str = "config.json") -> "DecoderConfig":
        c = _rope_as_v4(c, where)
        arch = next((_ARCHITECTURES[a] for a in c.get("architectures") or [] if a in _ARCHITECTURES), None)
        if arch is None:
            arch = _MODEL_TYPES.get(c.get("model_type", ""))
        if arch is None:
            raise UnsupportedError(f"{where}: architectures {c.get('architectures')} / model_type {c.get('model_type')!r}; "
                                   f"relax_vk runs {', '.join(sorted(_ARCHITECTURES))}")  # fmt: skip
        scaling = c.get("rope_scaling") or None
        if scaling is not None and not isinstance(scaling, dict):
            raise UnsupportedError(f"{where}: rope_scaling {scaling!r} is not a mapping")
        layers = int(c["num_hidden_layers"])
        window, sliding = _sliding_layers(c, arch, layers, where)
        gemma = arch in ("gemma2", "gemma3")
        act = c.get("hidden_activation", "gelu_pytorch_tanh") if gemma else c.get("hidden_act", "silu")
        if act not in _ACTIVATIONS:
            raise UnsupportedError(f"{where}: hidden_act {act!r} (gated MLPs with {', '.join(sorted(_ACTIVATIONS))} are supported)")
        caps = {}
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            value = c.get(key)
            if value is None:
                continue
            if key.startswith("attn") and arch in _SCORES_NOT_CAPPED:
                continue  # (its config carries the setting; its attention never reads it)
            if arch not in _SOFTCAPS:  # (transformers' other architectures do not read it)
                raise UnsupportedError(f"{where}: {key} {value}: soft-capping is {', '.join(sorted(_SOFTCAPS))}'s, not {arch}'s")
            if not isinstance(value, (int, float)) or not value > 0:
                raise UnsupportedError(f"{where}: {key} {value!r} (a positive number, or null for none)")
            caps["attention_softcap" if key.startswith("attn") else "logit_softcap"] = float(value)
        if c.get("use_bidirectional_attention"):
            raise UnsupportedError(f"{where}: use_bidirectional_attention is not supported (a causal decoder is)")
        heads = int(c["num_attention_heads"])
        kv_heads = int(c.get("num_key_value_heads") or heads)
        if heads < 1 or kv_heads < 1:
            raise UnsupportedError(f"{where}: {heads} attention heads, {kv_heads} key/value heads (at least 1 each)")
        if heads % kv_heads:
            raise UnsupportedError(f"{where}: {heads} attention heads are not a multiple of {kv_heads} key/value heads")
        head_dim = int(c.get("head_dim") or int(c["hidden_size"]) // heads)
        if head_dim % 2:
            raise UnsupportedError(f"{where}: head_dim {head_dim} is odd (RoPE rotates pairs)")
        partial = float(c.get("partial_rotary_factor") or 1.0)
        rotary = int(head_dim * partial)  # (transformers' rotary_ndims)
        if partial != 1.0 and arch not in _PARTIAL_ROTARY:
            raise UnsupportedError(f"{where}: partial_rotary_factor {partial}: transformers' {arch} rotates whole heads "
                                   f"(partial RoPE is {', '.join(sorted(_PARTIAL_ROTARY))}'s)")  # fmt: skip
        if not 0.0 < partial <= 1.0 or rotary < 2 or rotary % 2:
            raise UnsupportedError(f"{where}: partial_rotary_factor {partial} rotates {rotary} of a head's {head_dim} values "
                                   "(an even number, at least 2, is supported)")  # fmt: skip
        check_rope(scaling, rotary, where)
        bias = bool(c.get("attention_bias", arch == "qwen2"))
        hidden = int(c["hidden_size"])
        gemma_fields = dict(norm_offset=1.0, embed_scale=hidden**0.5, sandwich_norms=True,
                            score_scale=float(c.get("query_pre_attn_scalar", 256)) ** -0.5) if gemma else {}  # fmt: skip
        if arch == "gemma3":
            gemma_fields["local_rope_theta"] = float(c.get("rope_local_base_freq", 10000.0))
        gemma_fields["activation"] = _ACTIVATIONS[act]  # (any architecture: transformers' ACT2FN[hidden_act])
        return cls(arch, hidden, int(c["intermediate_size"]), layers, heads, kv_heads, head_dim,
                   int(c["vocab_size"]), float(c.get("rms_norm_eps", 1e-6)), float(c.get("rope_theta", 10000.0)),
                   bool(c.get("tie_word_embeddings", gemma)), bias, bool(c.get("mlp_bias", False)) and arch == "llama",
                   int(c.get("max_position_embeddings", 2048)),
                   tuple(sorted((str(k), _hashable(v)) for k, v in (scaling or {}).items())),
                   window, sliding, **gemma_fields, **caps, rotary_dim=rotary if rotary != head_dim else None,
                   original_max_positions=int(c["original_max_position_embeddings"]) if c.get("original_max_position_embeddings") else None)  # fmt: skip

    @classmethod
    def from_dir(cls, path: str) -> "DecoderConfig":
        config = os.path.join(path, "config.json")
        try:
            with open(config) as f:
                loaded = json.load(f)
            if not isinstance(loaded, dict):
                raise ModelLoadError(f"{config}: a JSON {type(loaded).__name__}, not an object of settings")
            return cls.from_dict(loaded, config)
        except (OSError, ValueError, KeyError, TypeError) as err:
            if isinstance(err, (UnsupportedError, ModelLoadError)):
                raise
            if isinstance(err, KeyError):
                raise ModelLoadError(f"{config}: no {err.args[0]!r}, which a decoder config needs") from None
            raise ModelLoadError(f"{config}: {type(err).__name__}: {err}") from None


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """The tensors of one ``.safetensors`` file as float32 arrays (bfloat16 widened exactly)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + n])
    except (struct.error, ValueError) as err:
        raise ModelLoadError(f"{path}: not a safetensors file ({err})") from None
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise UnsupportedError(f"{path}: tensor {name} is {info['dtype']}; float32, float16 and bfloat16 weights are read")
        begin, end = info["data_offsets"]
        array = np.frombuffer(data, dtype=dtype, count=(end - begin) // np.dtype(dtype).itemsize, offset=base + begin)
        if info["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        out[name] = array.astype(np.float32).reshape(info["shape"])
    return out


def read_weights(path: str) -> Dict[str, np.ndarray]:
    """A checkpoint directory's weights: ``model.safetensors`` or the shards its index names."""
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(path, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise ModelLoadError(f"{path}: no model.safetensors or model.safetensors.index.json")
    weights: Dict[str, np.ndarray] = {}
    for name in files:
        weights.update(read_safetensors(os.path.join(path, name)))
    return weights


@dataclass(frozen=True)
class DecoderProgram:
    """The Relax module and how to drive it: ``max_len`` (cache rows), ``max_prompt`` (tokens in one
    call), the config and the state pairs ``(input name, output index)``."""

    module: tvm.IRModule
    config: DecoderConfig
    max_len: int
    max_prompt: int


class _Weights:
    def __init__(self, weights: Dict[str, np.ndarray], where: str):
        self.weights, self.where, self.used = dict(weights), where, set()  # (a copy: join adds to it)
        self.checkpoint = frozenset(weights)
        self._packed: Dict[Tuple[str, str], tuple] = {}

    def array(self, name: str, shape: Tuple[int, ...]) -> np.ndarray:
        """The checkpoint's ``name``, checked against the ``shape`` the config gives."""
        if name not in self.weights:
            raise ModelLoadError(f"{self.where}: no weight {name}")
        w = self.weights[name]
        if tuple(w.shape) != tuple(shape):
            raise ModelLoadError(f"{self.where}: weight {name} is {list(w.shape)}, the config gives {list(shape)}")
        self.used.add(name)
        return w

    def check_all_used(self) -> None:
        """A checkpoint weight the program does not read is a layer this converter does not know (a
        bias the architecture has, say): refused by name, never dropped (RoPE's saved frequencies,
        which the program computes, excepted)."""
        unused = sorted(n for n in self.checkpoint if n not in self.used and not n.endswith("rotary_emb.inv_freq"))
        if unused:
            more = f" and {len(unused) - 3} more" if len(unused) > 3 else ""
            raise UnsupportedError(f"{self.where}: the checkpoint has weights this architecture does not read: {', '.join(unused[:3])}{more}")

    def join(self, names: List[str], joined: str, shapes: List[Tuple[int, ...]]) -> None:
        """``joined`` (a name of no checkpoint) for the checkpoint's ``names`` side by side along their
        first axis (linear layers' outputs: one matrix-vector product for several projections)."""
        self.weights[joined] = np.concatenate([self.array(n, sh) for n, sh in zip(names, shapes)], axis=0)

    def __call__(self, name: str, shape: Tuple[int, ...], transpose: bool = False, dtype: str = "float32") -> relax.Constant:
        w = self.array(name, shape)
        return relax.const(np.ascontiguousarray(w.T if transpose else w).astype(dtype), dtype)

    def packed(self, name: str, shape: Tuple[int, int], scale_dtype: str) -> List[tuple]:
        """``[(format, first n, B, scales)]``: the ``[N, K]`` weight ``name`` (Hugging Face's ``[out,
        in]``) as 4-bit blocks of 32 along ``K`` (:func:`~relax_vk.frontends.blockwise.pack_symmetric`),
        packed once however often it is read (a tied table serves both ends), in parts along ``N``
        of at most :data:`INT4_PART_BYTES` each (one part but for a vocabulary table past one buffer
        binding)."""
        key = (name, scale_dtype)
        if key not in self._packed:
            w = self.array(name, shape)
            fmt, B, S = pack_symmetric(np.asarray(w, np.float32).T, bits=4, block=INT4_BLOCK, scale_dtype=scale_dtype)
            rows = max(1, INT4_PART_BYTES // (B.shape[1] * B.shape[2]))
            parts = []
            for first in range(0, fmt.N, rows):
                last = min(fmt.N, first + rows)
                part = BlockwiseFormat(fmt.K, last - first, fmt.bits, fmt.block)
                parts.append((part, first, relax.const(as_words(B[first:last])),  # (read a word at a time)
                              relax.const(np.ascontiguousarray(S[first * fmt.k_blocks : last * fmt.k_blocks]), scale_dtype)))  # fmt: skip
            self._packed[key] = parts
        return self._packed[key]


def build_decoder(config: DecoderConfig, weights: Dict[str, np.ndarray], max_len: int, max_prompt: Optional[int] = None,
                  where: str = "checkpoint", dtype: str = "float32", quantize: Optional[str] = None,
                  logits: str = "all") -> DecoderProgram:  # fmt: skip
    """The program of the module docstring for ``config`` and ``weights`` (Hugging Face names).

    ``dtype="float16"``: weights, activations and the cache in float16, as transformers runs a
    float16 model: matmuls accumulate in float32 and round once, RMSNorm and softmax compute in
    float32, RoPE's angles are float32 rounded to float16; logits come out float32.

    ``quantize="int4"``: every linear layer's weight, the embedding table and the output head are
    4-bit blocks of :data:`INT4_BLOCK` (symmetric, a ``dtype`` scale per block: llama.cpp's Q4_0),
    quantized here from the checkpoint's weights; the kernels decode them as they multiply or
    gather (:mod:`relax_vk.frontends.blockwise`), and no float copy of a weight exists. Norms stay
    in ``dtype``. The model computed is exactly the checkpoint with its weights replaced by
    :func:`~relax_vk.frontends.blockwise.unpack` of their packing.

    ``logits="last"``: the program returns the logits of the call's last token only, ``[1, 1, V]``
    (all that generation reads: the output head, the largest matmul, runs on one row, and a prompt's
    ``[S, V]`` float32 logits, 311 MB for Qwen3 at S = 512, need not fit one buffer binding)."""
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype {dtype!r}: float32 or float16")
    if logits not in ("all", "last"):
        raise ValueError(f"logits={logits!r}: 'all' (every token's) or 'last'")
    if quantize not in (None, "int4"):
        raise UnsupportedError(f"quantize={quantize!r}: None (the checkpoint's weights in {dtype}) or 'int4'")
    max_prompt = max_len if max_prompt is None else max_prompt
    if not 1 <= max_prompt <= max_len:
        raise ValueError(f"max_prompt {max_prompt} must lie in 1..max_len ({max_len})")
    if max_len > config.max_positions:
        raise ValueError(f"max_len {max_len} is past the model's max_position_embeddings ({config.max_positions})")
    if max_len > config.position_bound:
        raise UnsupportedError(f"{where}: max_len {max_len} is past original_max_position_embeddings ({config.position_bound}), where "
                               "longrope's long factors take over for new tokens only; a cache bound up to it is supported")  # fmt: skip
    c, w = config, _Weights(_unfused(config, weights), where)
    S, T = tirx.Var("S", "int64"), tirx.Var("T", "int64")
    kv, hd, g = c.kv_heads, c.head_dim, c.heads // c.kv_heads
    R = relax.op
    ids = relax.Var("input_ids", relax.TensorType((1, S), "int32"))
    mask = relax.Var("attention_mask", relax.TensorType((1, T), "int64"))
    pasts = []
    for i in range(c.layers):
        pasts.append(relax.Var(f"past_k{i}", relax.TensorType((max_len, kv * hd), dtype)))
        pasts.append(relax.Var(f"past_v{i}", relax.TensorType((max_len, kv * hd), dtype)))
    bb = relax.BlockBuilder()
    made: List[Tuple[str, str]] = []  # (variable, the model op it belongs to): profile and bisect name ops by them
    op = ["model.embed_tokens"]

    def emit(expr, name_hint: str = ""):
        var = bb.emit(expr, name_hint=name_hint)
        made.append((var.name, op[0]))
        return var

    with bb.function("main", [ids, mask] + pasts):
        with bb.dataflow():
            e = emit

            def cast(x, to):
                return x if x.ty.dtype == to else e(R.astype(x, to))

            def norm_weight(name, size, to="float32"):  # (Gemma's norms multiply by 1 + weight)
                weight = w.array(name, (size,)).astype(np.float32)
                return relax.const((weight + np.float32(c.norm_offset)).astype(to), to)

            def rms_norm(x, name, size):
                op[0] = name.rsplit(".weight", 1)[0]
                if dtype == "float32":
                    return e(R.nn.rms_norm(x, norm_weight(name, size), axes=[-1], epsilon=c.rms_eps))
                # transformers: normalized in float32, rounded, then times the float16 weight. TOPI's
                # rms_norm of a float16 x computes in float32 and rounds once (its weight of ones
                # changes nothing), so the norm reads x as it is. A cast of x to float32 would be a
                # kernel of its own: FuseOps fuses no producer into a reduction with a tail
                unit = relax.const(np.ones(size, np.float16))
                return e(R.multiply(e(R.nn.rms_norm(x, unit, axes=[-1], epsilon=c.rms_eps)), norm_weight(name, size, to=dtype)))

            def packed_matmul(x, name, n_in, n_out, out_dtype):  # x @ W.T with W 4-bit, summed in float32
                outs = [e(bb.call_te(lambda X, Bq, Sq, f=fmt: f.matmul(X, Bq, Sq, out_dtype=out_dtype), x, B, scales, primfunc_name_hint="matmul_int4"))
                        for fmt, _, B, scales in w.packed(name, (n_out, n_in), dtype)]  # fmt: skip
                return outs[0] if len(outs) == 1 else e(R.concat(outs, axis=-1))

            def dense(x, name, n_in, n_out):  # x @ W.T with W float, summed in float32
                if n_in * n_out * np.dtype(dtype).itemsize <= MIN_BINDING_BYTES:  # (W as the checkpoint has it: [out, in])
                    return e(bb.call_te(_rows_times(n_in, n_out), x, w(name, (n_out, n_in), dtype=dtype), primfunc_name_hint="matmul"))
                # (past one binding: a matmul, whose constant weight the compiler splits)
                return e(R.matmul(x, w(name, (n_out, n_in), transpose=True, dtype=dtype), out_dtype="float32"))

            def linear(x, name, n_in, n_out, bias=False, out=None):
                op[0] = name
                if quantize:
                    y = packed_matmul(x, f"{name}.weight", n_in, n_out, "float32")
                else:
                    y = dense(x, f"{name}.weight", n_in, n_out)
                if bias:
                    y = e(R.add(y, w(f"{name}.bias", (n_out,))))
                y = R.astype(y, dtype) if dtype != "float32" else y
                return emit(y, name_hint=out) if out else e(y)

            def gated_mlp(x, name, n_in, n_out, bias):
                """``silu(x @ gate.T + b) * (x @ up.T + b)``: both products summed together in one
                kernel (a pair reduction, :func:`_gate_up`), SwiGLU its epilogue."""
                op[0] = f"{name}.gate_proj"
                if quantize:
                    packed = [w.packed(f"{name}.{which}_proj.weight", (n_out, n_in), dtype) for which in ("gate", "up")]
                    if any(len(parts) != 1 for parts in packed):  # (a layer past one buffer binding: two products)
                        activation = R.nn.silu if c.activation == "silu" else R.nn.gelu_tanh
                        gate = e(activation(linear(x, f"{name}.gate_proj", n_in, n_out, bias)))
                        return e(R.multiply(gate, linear(x, f"{name}.up_proj", n_in, n_out, bias)))
                    formats = [parts[0][0] for parts in packed]
                    weights = [t for parts in packed for t in parts[0][2:]]
                else:
                    formats = None
                    weights = [w(f"{name}.{which}_proj.weight", (n_out, n_in), dtype=dtype) for which in ("gate", "up")]
                if bias:
                    weights += [w(f"{name}.{which}_proj.bias", (n_out,)) for which in ("gate", "up")]
                out = e(bb.call_te(_gate_up(n_in, n_out, dtype, formats, bias, c.activation), x, *weights, primfunc_name_hint="gate_up"))
                op[0] = f"{name}.act"
                return out

            # (an id outside the vocabulary reads its nearest row, never outside the table: relax_vk.runtime.generate refuses it)
            tied = c.tie_embeddings
            if tied and "lm_head.weight" in w.checkpoint:  # transformers ties whatever the file holds: its head is not read
                w.used.add("lm_head.weight")
            table = "model.embed_tokens.weight"
            if quantize:  # rows decoded from the 4-bit table as they are gathered
                parts = w.packed(table, (c.vocab, c.hidden), dtype)
                buffers = [t for _, _, B, scales in parts for t in (B, scales)]
                layout = [(fmt, first) for fmt, first, _, _ in parts]
                x = e(bb.call_te(lambda I, *bufs: gather_parts(layout, I, bufs, out_dtype=dtype), e(R.reshape(ids, (S,))), *buffers,
                                 primfunc_name_hint="take_int4"))  # fmt: skip
            elif tied:  # one table for both ends: the output's [H, V], whose columns are the embeddings
                head = w(table, (c.vocab, c.hidden), transpose=True, dtype=dtype)
                x = e(R.permute_dims(e(R.take(head, e(R.reshape(ids, (S,))), axis=1, mode="clip")), [1, 0]))  # [S, H]
            else:
                x = e(R.take(w(table, (c.vocab, c.hidden), dtype=dtype), e(R.reshape(ids, (S,))), axis=0, mode="clip"))
            if c.embed_scale != 1.0:  # (Gemma: the rows times sqrt(hidden), the factor rounded to the weights' dtype first)
                x = e(R.multiply(x, relax.const(np.array(c.embed_scale, np.float32).astype(dtype), dtype)))
            # positions T-S .. T-1 and cache rows 0 .. T-1, from tensors alone (TVM's FuseTIR cannot fuse an
            # arange whose bounds are scalar arguments): every size comes from a buffer's shape
            op[0] = "model.positions"  # (RoPE's angles, the cache rows, the causal mask)
            rows = e(R.arange(0, T, dtype="int32"))  # [T]
            tokens = e(R.arange(0, S, dtype="int32"))  # [S]
            pos = e(R.strided_slice(rows, axes=[0], begin=[T - S], end=[T], assume_inbound=True))  # [S]: T-S .. T-1
            first = e(R.strided_slice(pos, axes=[0], begin=[0], end=[1], assume_inbound=True))  # [1]: T-S
            last = e(R.strided_slice(tokens, axes=[0], begin=[S - 1], end=[S], assume_inbound=True))  # [1]: S-1
            position = e(R.reshape(e(R.astype(pos, "float32")), (S, 1)))

            def rotation(local):  # (cos, sin) [S, 1, D] of the layers' RoPE
                inv_freq, attention_factor = c.rotary_frequencies(local)  # (scaled RoPE: its frequencies; YaRN: a factor on cos and sin)
                # (partial RoPE: the kernel's pairs (i, i + D/2) past the rotary ones turn by angle 0,
                # cos 1 and sin 0, and the weights put the values that pass unrotated there: _unfused)
                inv_freq = np.concatenate([inv_freq, np.zeros(hd // 2 - len(inv_freq), np.float32)])
                freqs = e(R.multiply(position, relax.const(inv_freq.reshape(1, hd // 2).astype(np.float32))))
                angles = e(R.concat([freqs, freqs], axis=1))  # [S, D]
                cos, sin = e(R.cos(angles)), e(R.sin(angles))
                if attention_factor != 1.0:  # (on the rotary values only)
                    factor = np.where(np.tile(np.arange(hd // 2) < c.rotary // 2, 2), np.float32(attention_factor), np.float32(1.0))
                    factor = relax.const(factor.reshape(1, hd).astype(np.float32))
                    cos, sin = e(R.multiply(cos, factor)), e(R.multiply(sin, factor))
                return e(R.reshape(cast(cos, dtype), (S, 1, hd))), e(R.reshape(cast(sin, dtype), (S, 1, hd)))

            rotations = {False: rotation(False)}
            if c.sliding_layers and c.local_rope_theta is not None:
                rotations[True] = rotation(True)
            # cache row j holds position j; this call's token s sits at row T-S+s: rel = j - (T-S)
            rel = e(R.reshape(e(R.subtract(rows, first)), (1, T)))  # [1, T]
            query = e(R.reshape(tokens, (S, 1)))  # [S, 1]
            causal = e(R.less_equal(rel, query))
            attend = e(R.logical_and(causal, e(R.not_equal(mask, relax.const(0, "int64")))))  # [S, T]
            bias = e(R.where(attend, relax.const(0.0, "float32"), relax.const(MASKED, "float32")))  # [S, T]: added to the scores
            biases = {False: bias}
            if c.sliding_layers and c.sliding_window < max_len:  # (a window no shorter than the cache masks nothing more)
                # a sliding layer's query at position p attends to positions p - window + 1 .. p:
                # rel > s - window, transformers' sliding_window_overlay
                near = e(R.greater(rel, e(R.subtract(query, relax.const(c.sliding_window, "int32")))))
                biases[True] = e(R.where(e(R.logical_and(attend, near)), relax.const(0.0, "float32"), relax.const(MASKED, "float32")))
            attention = Attention(c.heads, kv, hd, max_len, dtype, scale=c.score_scale, softcap=c.attention_softcap or 0.0)
            in_one_pass = one_pass(attention, max_prompt)  # (a long prompt bound: the parts folded in sequence, no partial sums)
            if in_one_pass:
                attention_one = bb.add_func(attention_one_pass_kernel(attention), "attention_one_pass")
            else:
                attention_parts = bb.add_func(attention_parts_kernel(attention), "attention_parts")
                attention_combine = bb.add_func(attention_combine_kernel(attention), "attention_combine")
            P = key_parts(T)  # the key rows in parts
            rotary = bb.add_func(rotary_kernel(Rotary(c.heads, kv, hd, max_len, c.qk_norm, c.rms_eps, dtype)), "rotary")
            outputs = []
            for i in range(c.layers):
                p = f"model.layers.{i}"
                sliding = i in c.sliding_layers
                cos, sin = rotations[sliding and True in rotations]
                layer_bias = biases[sliding and True in biases]
                h = rms_norm(x, f"{p}.input_layernorm.weight", c.hidden)
                # q, k and v in one product, [S, (H + 2 KV)*D]: q's columns, then k's, then v's
                sizes = c.qkv_rows
                for part in ("weight", "bias") if c.attention_bias else ("weight",):
                    w.join([f"{p}.self_attn.{n}_proj.{part}" for n in sizes], f"{p}.self_attn.qkv_proj.{part}",
                           [(n, c.hidden) if part == "weight" else (n,) for n in sizes.values()])  # fmt: skip
                qkv = linear(h, f"{p}.self_attn.qkv_proj", c.hidden, (c.heads + 2 * kv) * hd, c.attention_bias)
                # (Qwen3's per-head q/k norms and) RoPE, q's heads and k's, and v handed on as a
                # tensor of its own: one kernel (relax_vk.schedules.rotary)
                op[0] = f"{p}.self_attn.rotary"
                norms = [norm_weight(f"{p}.self_attn.{which}_norm.weight", hd, to=dtype) for which in "qk"] if c.qk_norm else []
                rotated = e(relax.call_tir(rotary, [qkv, cos, sin] + norms,
                                           out_ty=[relax.TensorType((S, c.heads * hd), dtype)] + [relax.TensorType((S, kv * hd), dtype)] * 2))  # fmt: skip
                q = e(relax.TupleGetItem(rotated, 0))
                new_k = emit(relax.TupleGetItem(rotated, 1), name_hint=f"new_k{i}")
                v = emit(relax.TupleGetItem(rotated, 2), name_hint=f"new_v{i}")
                outputs += [new_k, v]
                op[0] = f"{p}.self_attn.attention"
                # grouped-query attention (head h reads kv head h // g) over the cache's rows and this
                # call's, read where they lie (no [T, KV*D] copy of the keys or values), in parts of
                # the keys, folded in sequence by one kernel or found side by side and then combined
                # (relax_vk.schedules.decode_attention)
                operands = [q, pasts[2 * i], new_k, pasts[2 * i + 1], v, layer_bias]
                if in_one_pass:
                    attn = e(relax.call_tir(attention_one, operands, out_ty=relax.TensorType((S, c.heads * hd), dtype)))  # [S, H*D]
                else:
                    found = e(relax.call_tir(attention_parts, operands, out_ty=[relax.TensorType((S, c.heads, P, hd), "float32"),
                                                                                relax.TensorType((S, c.heads, P), "float32"),
                                                                                relax.TensorType((S, c.heads, P), "float32")]))  # fmt: skip
                    attn = e(relax.call_tir(attention_combine, [e(relax.TupleGetItem(found, j)) for j in range(3)],
                                            out_ty=relax.TensorType((S, c.heads * hd), dtype)))  # [S, H*D]  # fmt: skip
                out = linear(attn, f"{p}.self_attn.o_proj", c.heads * hd, c.hidden, c.output_bias)
                if c.sandwich_norms:  # (Gemma: each sublayer's output normalized before the residual add)
                    out = rms_norm(out, f"{p}.post_attention_layernorm.weight", c.hidden)
                op[0] = f"{p}.residual_attn"
                x = e(R.add(x, out))
                h = rms_norm(x, f"{p}.{'pre_feedforward' if c.sandwich_norms else 'post_attention'}_layernorm.weight", c.hidden)
                act = gated_mlp(h, f"{p}.mlp", c.hidden, c.intermediate, c.mlp_bias)  # act(gate) * up
                down = linear(act, f"{p}.mlp.down_proj", c.intermediate, c.hidden, c.mlp_bias)
                if c.sandwich_norms:
                    down = rms_norm(down, f"{p}.post_feedforward_layernorm.weight", c.hidden)
                op[0] = f"{p}.residual_mlp"
                x = e(R.add(x, down))
            if logits == "last":  # (the head, the largest matmul, on one row)
                x = e(R.take(x, last, axis=0))
            x = rms_norm(x, "model.norm.weight", c.hidden)
            op[0] = "lm_head"
            if quantize:
                head_logits = packed_matmul(x, table if tied else "lm_head.weight", c.hidden, c.vocab, "float32")
            elif not tied:
                head_logits = dense(x, "lm_head.weight", c.hidden, c.vocab)
            else:  # (the table both ends read, [H, V])
                head_logits = e(R.matmul(x, head, out_dtype="float32"))
            if c.logit_softcap:  # (Gemma 2: cap * tanh(logits / cap), in float32)
                cap = relax.const(np.float32(c.logit_softcap))
                head_logits = e(R.multiply(e(R.tanh(e(R.divide(cast(head_logits, "float32"), cap)))), cap))
            scores = emit(R.reshape(head_logits, (1, S if logits == "all" else 1, c.vocab)), name_hint="logits")
            result = bb.emit_output(relax.Tuple([scores] + outputs))
        bb.emit_func_output(result)
    mod = bb.get()
    w.check_all_used()
    states = [{"input": f"past_{kind}{i}", "output": 1 + 2 * i + j, "offset": T - S} for i in range(c.layers) for j, kind in enumerate("kv")]
    mod = with_dim_ranges(with_states(record_model_ops(mod, made), states), {"S": (1, max_prompt), "T": (1, max_len)})
    return DecoderProgram(mod, config, max_len, max_prompt)


def rotary_order(head_dim: int, rotary: int) -> np.ndarray:
    """The order of a head's values that puts partial RoPE's pairs where the rotary kernel pairs
    values, ``(i, i + head_dim / 2)``: transformers rotates pairs ``(i, i + rotary / 2)`` of the
    first ``rotary`` values and passes the rest; in this order the rotary pairs come first in each
    half and the passed values after them (new head ``= old head[order]``)."""
    r, rest = rotary // 2, (head_dim - rotary) // 2
    return np.concatenate([np.arange(r), rotary + np.arange(rest), r + np.arange(r), rotary + rest + np.arange(rest)])


def _unfused(c: DecoderConfig, weights: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The checkpoint's weights under the names and in the order the program reads: Phi-3's
    ``qkv_proj`` and ``gate_up_proj`` cut into the q/k/v and gate/up projections (row views, no
    copy), and with partial RoPE each q and k head's rows (biases, q/k norm weights) in
    :func:`rotary_order`. Scores are sums over a head's values, so both in one order change
    nothing; the cache holds the keys in that order."""
    out = dict(weights)
    sizes = c.qkv_rows
    for i in range(c.layers):
        p = f"model.layers.{i}"
        fused = out.pop(f"{p}.self_attn.qkv_proj.weight", None)
        if fused is not None:
            if fused.shape[0] != sum(sizes.values()):
                raise UnsupportedError(f"{p}.self_attn.qkv_proj.weight is {list(fused.shape)}; the config makes {sum(sizes.values())} rows")
            for (which, n), start in zip(sizes.items(), np.cumsum([0, sizes["q"], sizes["k"]])):
                out[f"{p}.self_attn.{which}_proj.weight"] = fused[start : start + n]
        fused = out.pop(f"{p}.mlp.gate_up_proj.weight", None)
        if fused is not None:
            if fused.shape[0] != 2 * c.intermediate:
                raise UnsupportedError(f"{p}.mlp.gate_up_proj.weight is {list(fused.shape)}; the config makes {2 * c.intermediate} rows")
            out[f"{p}.mlp.gate_proj.weight"], out[f"{p}.mlp.up_proj.weight"] = fused[: c.intermediate], fused[c.intermediate :]
        if c.rotary != c.head_dim:
            order = rotary_order(c.head_dim, c.rotary)
            for which, heads in (("q", c.heads), ("k", c.kv_heads)):
                rows = (np.arange(heads)[:, None] * c.head_dim + order[None, :]).reshape(-1)
                for name in (f"{p}.self_attn.{which}_proj.weight", f"{p}.self_attn.{which}_proj.bias"):
                    if name in out and out[name].shape[0] == heads * c.head_dim:
                        out[name] = out[name][rows]
                norm = f"{p}.self_attn.{which}_norm.weight"
                if norm in out and out[norm].shape == (c.head_dim,):
                    out[norm] = out[norm][order]
    return out


def _gate_up(K: int, N: int, dtype: str, formats: Optional[List[BlockwiseFormat]], bias: bool, activation: str = "silu"):
    """The TE of a gated MLP's first half, ``act(x @ G + bg) * (x @ U + bu)`` (``act``: silu, or
    ``gelu_tanh``, transformers' ``gelu_pytorch_tanh``; ``x`` ``[S, K]``;
    ``G``, ``U`` float ``[N, K]`` (the checkpoint's layout), or 4-bit blocks of ``formats``; the
    biases when ``bias``): the two sums are one pair reduction, so that one kernel reads ``x`` once
    for both and its epilogue holds a gate and its up side by side. Each product rounds to
    ``dtype`` before SwiGLU, as transformers' float16 model does."""
    from tvm import te

    def compute(x, *args):
        S = x.shape[0]
        index = S.ty.dtype
        k = te.reduce_axis((tirx.const(0, index), tirx.const(K, index)), name="k")
        pair = te.comm_reducer(lambda a, b: (a[0] + b[0], a[1] + b[1]), lambda t0, t1: (tirx.const(0.0, t0), tirx.const(0.0, t1)), name="pair_sum")
        per_weight = 2 if formats is not None else 1  # (packed blocks and scales, or one matrix)
        biases = args[2 * per_weight :]

        def weight(j, kk, n):  # the gate's (j = 0) or the up's (1) W[kk, n], in float32 (a float W held [N, K])
            if formats is not None:
                return formats[j].weight(args[2 * j], args[2 * j + 1], None, kk, n)
            return args[j][n, kk].astype("float32")

        gate, up = te.compute((S, tirx.const(N, index)), lambda s, n: pair(tuple(x[s, k].astype("float32") * weight(j, k, n) for j in range(2)), axis=k),
                              name="gate_up")  # fmt: skip

        def swiglu(s, n):
            g, u = gate[s, n], up[s, n]
            if bias:
                g, u = g + biases[0][n].astype("float32"), u + biases[1][n].astype("float32")
            g, u = g.astype(dtype), u.astype(dtype)
            if activation == "gelu_tanh":  # 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))
                inner = tirx.const(0.7978845608028654, dtype) * (g + tirx.const(0.044715, dtype) * g * g * g)
                return tirx.const(0.5, dtype) * g * (tirx.const(1.0, dtype) + tirx.tanh(inner)) * u
            return g * tirx.sigmoid(g) * u

        return te.compute((S, tirx.const(N, index)), swiglu, name="swiglu")

    return compute


def _rows_times(K: int, N: int):
    """The TE of ``x @ W.T`` (``x`` ``[S, K]``, ``W`` float ``[N, K]``), summed in float32. ``W`` keeps
    the checkpoint's layout, each output's ``K`` weights side by side: the linear layers' schedule
    then gives each output's sum to the lanes of a warp, reading runs of adjacent weights, as it
    reads 4-bit blocks (:mod:`relax_vk.schedules.linear`). Transposed to ``[K, N]`` (a matmul's
    layout) a warp read one weight of 32 outputs per step."""
    from tvm import te

    def compute(x, W):
        S = x.shape[0]
        index = S.ty.dtype
        k = te.reduce_axis((tirx.const(0, index), tirx.const(K, index)), name="k")
        return te.compute((S, tirx.const(N, index)), lambda s, n: te.sum(x[s, k].astype("float32") * W[n, k].astype("float32"), axis=k), name="matmul")

    return compute


def from_hf_decoder(path: str, max_len: int = 512, max_prompt: Optional[int] = None, dtype: str = "float32",
                    quantize: Optional[str] = None, logits: str = "all") -> DecoderProgram:  # fmt: skip
    """:func:`build_decoder` of a checkpoint directory (``config.json`` and safetensors)."""
    if not os.path.isdir(path):
        raise ModelLoadError(f"{path}: not a checkpoint directory")
    config = DecoderConfig.from_dir(path)
    return build_decoder(config, read_weights(path), max_len, max_prompt, where=path, dtype=dtype, quantize=quantize, logits=logits)
