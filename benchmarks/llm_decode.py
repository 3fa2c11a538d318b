"""A decoder language model on relax_vk beside PyTorch eager, in one process: prefill and decode tokens/s,
and how far each step's logits are from PyTorch's.

The model is a Qwen3-shaped checkpoint made from a preset config with seeded random weights (numpy,
the same on every machine), written as ``config.json`` + ``model.safetensors`` and built from that
directory as a user's checkpoint would be (``relax_vk.frontends.hf_decoder``). PyTorch runs the same
weights through a plain implementation with a key/value cache (:class:`TorchDecoder`, checked against
transformers' own model when transformers is installed). Per API and context (a prompt of that many
tokens): relax_vk's prefill tokens/s, decode tokens/s over ``--new-tokens`` greedy steps, PyTorch's,
the greedy tokens' agreement and the largest logit difference over the steps (a share of the largest
logit).

    python benchmarks/llm_decode.py [--preset tiny|mini|qwen3-0.6b] [--dtype float32|float16] [--int4] [--contexts 16]
                                    [--new-tokens 8] [--apis opencl vulkan] [--json]

On a machine without TVM (the GPU machine), in two steps: ``--build DIR`` here (the artifacts, their
constants stored once), then ``--run DIR --device gpu`` there (the runtime, numpy and torch)::

    python benchmarks/llm_decode.py --build .gpu/llm --preset mini --dtype float16 --contexts 128 512
    python3 benchmarks/llm_decode.py --run .gpu/llm --device gpu --json     # GPU machine

A model larger than the machine's transport carries (the whole Qwen3-0.6B) is built with
``--refill-over MIB``: its weights over that size travel as seeds and are refilled with other values
of the same dtype and shape where it runs, for speed only (no kernel's work depends on the values;
correctness is what the same build shows here and the smaller presets show there).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from backend_latency import is_refilled, load_artifact, store_constants  # noqa: E402

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}
#: Qwen3-style configs (per-head q/k norms, tied embeddings)
PRESETS = {
    "tiny": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=160),
    "small": dict(hidden_size=384, intermediate_size=1152, num_hidden_layers=4, num_attention_heads=6, num_key_value_heads=2, head_dim=64,
                  vocab_size=4096),
    "mini": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
                 vocab_size=4096),
    # Qwen3-0.6B's layer shapes and vocabulary with 2 of its 28 layers (a full build needs more memory than 24 GiB)
    "qwen3-0.6b-2layers": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=8,
                               head_dim=128, vocab_size=151936),
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, vocab_size=151936),
}  # fmt: skip


def config_of(preset: str) -> dict:
    return dict(PRESETS[preset], architectures=["Qwen3ForCausalLM"], model_type="qwen3", rms_norm_eps=1e-6, rope_theta=1000000.0,
                tie_word_embeddings=True, max_position_embeddings=4096, hidden_act="silu")  # fmt: skip


def make_weights(c: dict, seed: int = 0) -> dict:
    """Seeded random weights by transformers' names (normal, std 0.02; norm weights around 1)."""
    rng = np.random.default_rng(seed)
    h, i, hd, heads, kv = c["hidden_size"], c["intermediate_size"], c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)

    w = {"model.embed_tokens.weight": normal(c["vocab_size"], h), "model.norm.weight": 1 + normal(h, std=0.1)}
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        w.update({f"{p}.input_layernorm.weight": 1 + normal(h, std=0.1), f"{p}.post_attention_layernorm.weight": 1 + normal(h, std=0.1),
                  f"{p}.self_attn.q_proj.weight": normal(heads * hd, h), f"{p}.self_attn.k_proj.weight": normal(kv * hd, h),
                  f"{p}.self_attn.v_proj.weight": normal(kv * hd, h), f"{p}.self_attn.o_proj.weight": normal(h, heads * hd),
                  f"{p}.self_attn.q_norm.weight": 1 + normal(hd, std=0.1), f"{p}.self_attn.k_norm.weight": 1 + normal(hd, std=0.1),
                  f"{p}.mlp.gate_proj.weight": normal(i, h), f"{p}.mlp.up_proj.weight": normal(i, h), f"{p}.mlp.down_proj.weight": normal(h, i)})  # fmt: skip
    return w


def _blockwise():
    """relax_vk.frontends.blockwise, read by path: the package's front doors import TVM, which the
    GPU machine's --run side does not have (the module itself needs numpy only)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("relax_vk_blockwise", os.path.join(os.path.dirname(__file__), "..", "relax_vk", "frontends", "blockwise.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


def int4_weights(weights: dict, scale_dtype: str = "float32") -> dict:
    """``weights`` with each matrix replaced by what its 4-bit packing (``--int4``, the builder's
    own) stands for: the model an int4 artifact computes, which PyTorch then runs in float."""
    blockwise = _blockwise()
    return {k: np.ascontiguousarray(blockwise.unpack(*blockwise.pack_symmetric(v.T, scale_dtype=scale_dtype)).T) if v.ndim == 2 else v
            for k, v in weights.items()}  # fmt: skip


def write_checkpoint(folder: str, config: dict, weights: dict) -> None:
    """``config.json`` and a float32 ``model.safetensors`` (the format: a JSON header, then the bytes)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    header, offset = {}, 0
    for name, array in weights.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for array in weights.values():
            f.write(np.ascontiguousarray(array, dtype="<f4").tobytes())


class TorchDecoder:
    """The same model in plain PyTorch with a key/value cache: ``forward(ids) -> float32 logits [S, V]``."""

    def __init__(self, c: dict, weights: dict, device: str = "cpu", dtype: str = "float32"):
        import torch

        self.torch, self.c, self.device = torch, c, device
        self.dtype = getattr(torch, dtype)
        self.w = {k: torch.from_numpy(v).to(device=device, dtype=self.dtype) for k, v in weights.items()}
        hd = c["head_dim"]
        self.inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float().to(device) / hd))
        self.reset()

    def reset(self) -> None:
        self.cache = [([], []) for _ in range(self.c["num_hidden_layers"])]
        self.length = 0

    def _norm(self, x, weight):
        t = self.torch
        x32 = x.float()
        return weight * (x32 * t.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])).to(x.dtype)

    def forward(self, ids) -> np.ndarray:
        t, c, w = self.torch, self.c, self.w
        with t.no_grad():
            S, hd, heads, kv = len(ids), c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
            x = w["model.embed_tokens.weight"][t.tensor(ids, device=self.device)]
            pos = t.arange(self.length, self.length + S, device=self.device).float()
            angles = pos[:, None] * self.inv_freq[None, :]
            emb = t.cat([angles, angles], dim=-1)
            cos, sin = emb.cos().to(self.dtype)[:, None, :], emb.sin().to(self.dtype)[:, None, :]

            def rope(v):
                rotated = t.cat([-v[..., hd // 2 :], v[..., : hd // 2]], dim=-1)
                return v * cos + rotated * sin

            total = self.length + S
            causal = t.arange(total, device=self.device)[None, :] <= (self.length + t.arange(S, device=self.device))[:, None]
            for layer in range(c["num_hidden_layers"]):
                p = f"model.layers.{layer}"
                h = self._norm(x, w[f"{p}.input_layernorm.weight"])
                q = (h @ w[f"{p}.self_attn.q_proj.weight"].T).view(S, heads, hd)
                k = (h @ w[f"{p}.self_attn.k_proj.weight"].T).view(S, kv, hd)
                v = (h @ w[f"{p}.self_attn.v_proj.weight"].T).view(S, kv, hd)
                q, k = rope(self._norm(q, w[f"{p}.self_attn.q_norm.weight"])), rope(self._norm(k, w[f"{p}.self_attn.k_norm.weight"]))
                keys, values = self.cache[layer]
                keys.append(k)
                values.append(v)
                K = t.cat(keys).repeat_interleave(heads // kv, dim=1)  # [T, H, D]
                V = t.cat(values).repeat_interleave(heads // kv, dim=1)
                scores = t.einsum("shd,thd->hst", q, K) / math.sqrt(hd)
                scores = scores.masked_fill(~causal[None], t.finfo(scores.dtype).min)
                probs = t.softmax(scores, dim=-1, dtype=t.float32).to(self.dtype)
                attn = t.einsum("hst,thd->shd", probs, V).reshape(S, heads * hd)
                x = x + attn @ w[f"{p}.self_attn.o_proj.weight"].T
                h = self._norm(x, w[f"{p}.post_attention_layernorm.weight"])
                gate = t.nn.functional.silu(h @ w[f"{p}.mlp.gate_proj.weight"].T)
                x = x + (gate * (h @ w[f"{p}.mlp.up_proj.weight"].T)) @ w[f"{p}.mlp.down_proj.weight"].T
            x = self._norm(x, w["model.norm.weight"])
            logits = (x @ w["model.embed_tokens.weight"].T).float()
            self.length = total
            return logits.cpu().numpy()


def _greedy(forward, reset, prompt, steps: int, sync=lambda: None):
    """``(tokens, per-step logits, prefill s, decode s)`` of greedy decoding through ``forward``."""
    reset()
    sync()
    start = time.perf_counter()
    last = forward(prompt)[-1]
    sync()
    prefill = time.perf_counter() - start
    logits, tokens = [last], [int(np.argmax(last))]
    start = time.perf_counter()
    for _ in range(steps - 1):
        last = forward(tokens[-1:])[-1]
        logits.append(last)
        tokens.append(int(np.argmax(last)))
    sync()
    return tokens, logits, prefill, time.perf_counter() - start


def measure(artifacts: dict, config: dict, weights: dict, dtype: str, contexts, steps: int, device, torch_device: str,
            compare: bool = True) -> list:  # fmt: skip
    """One row per API and context: relax_vk's and PyTorch's tokens/s, agreement and logit error
    (``compare=False``, artifacts whose weights were refilled: speed only, agreement None)."""
    import torch

    from relax_vk.runtime import load
    from relax_vk.runtime.generate import Generator

    reference = TorchDecoder(config, weights, torch_device, dtype)
    sync = torch.cuda.synchronize if torch_device.startswith("cuda") else (lambda: None)
    rng = np.random.default_rng(1)
    rows = []
    for api, artifact in artifacts.items():
        print(f"{api}: loading", file=sys.stderr, flush=True)
        generator = Generator(load(artifact, device=device or DEVICES[api]))
        generator.generate([1, 2, 3], 2)  # (a first run: drivers settle, clocks rise)
        for context in contexts:
            print(f"{api}: context {context}", file=sys.stderr, flush=True)
            prompt = [int(v) for v in rng.integers(0, config["vocab_size"], context)]
            result = generator.generate(prompt, steps, keep_logits=True)
            _greedy(reference.forward, reference.reset, prompt, 2, sync)  # warm
            tokens, ref_logits, t_prefill, t_decode = _greedy(reference.forward, reference.reset, prompt, steps, sync)
            err = None
            if compare:  # logits compared along relax_vk's own tokens (teacher-forced PyTorch): a near-tie may pick another token
                reference.reset()
                forced = [reference.forward(prompt)[-1]] + [reference.forward([tok])[-1] for tok in result.tokens[:-1]]
                err = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(result.logits, forced))
            rows.append({"api": api, "device": generator.session.device_name, "context": context, "steps": steps,
                         "prefill_tokens_per_s": result.prefill_tokens_per_s, "decode_tokens_per_s": result.decode_tokens_per_s,
                         "torch_prefill_tokens_per_s": context / t_prefill, "torch_decode_tokens_per_s": (steps - 1) / t_decode,
                         "same_tokens": result.tokens == tokens if compare else None, "max_logit_err": err,
                         "device_bytes": generator.session.device_bytes})  # fmt: skip
    return rows


def print_table(result: dict) -> None:
    weights = f"{result['dtype']}, 4-bit weights" if result.get("int4") else result["dtype"]
    refilled = "; weights refilled on this machine (speed only)" if result.get("refilled") else ""
    print(f"{result['preset']} ({result['params'] / 1e6:.1f}M parameters, {weights}), {result['steps']} greedy steps; "
          f"PyTorch eager ({result['dtype']}) on {result['torch_device']}{refilled}")  # fmt: skip
    print(f"{'api':7s} {'context':>7s} {'prefill tok/s':>14s} {'torch':>10s} {'decode tok/s':>13s} {'torch':>10s} {'ratio':>6s} "
          f"{'tokens':>7s} {'logit err':>10s} {'MiB':>8s}  device")  # fmt: skip
    for r in result["rows"]:
        ratio = r["decode_tokens_per_s"] / r["torch_decode_tokens_per_s"]
        print(f"{r['api']:7s} {r['context']:7d} {r['prefill_tokens_per_s']:14.1f} {r['torch_prefill_tokens_per_s']:10.1f} "
              f"{r['decode_tokens_per_s']:13.1f} {r['torch_decode_tokens_per_s']:10.1f} {ratio:6.2f} { {True: 'same', False: 'differ', None: '-'}[r['same_tokens']]:>7s} "
              f"{'-' if r['max_logit_err'] is None else format(r['max_logit_err'], '.2e'):>10s} {r['device_bytes'] / (1 << 20):8.1f}  {r['device']}")  # fmt: skip


def build(folder: str, preset: str, dtype: str, contexts, steps: int, apis, int4: bool = False) -> dict:
    """The checkpoint in ``folder/checkpoint`` and one artifact per API (dims: S up to the longest
    prompt, T up to it plus the steps); ``int4``: 4-bit weights. Each call returns its last
    token's logits (what generation reads)."""
    import relax_vk
    from relax_vk.frontends import load_model

    config = config_of(preset)
    weights = make_weights(config)
    write_checkpoint(os.path.join(folder, "checkpoint"), config, weights)
    dims = {"S": (1, max(contexts)), "T": (1, max(contexts) + steps)}
    mod, _ = load_model(os.path.join(folder, "checkpoint"), dims=dims, dtype=dtype, quantize="int4" if int4 else None, logits="last")
    return {api: relax_vk.build(mod, api).artifact() for api in apis}, config, weights


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    ap.add_argument("--int4", action="store_true", help="4-bit weights (PyTorch runs their float values in --dtype)")
    ap.add_argument("--refill-over", type=float, default=None, metavar="MIB",
                    help="(--build) weights over MIB are not stored but refilled with seeded values where --run runs: speed only")
    ap.add_argument("--contexts", type=int, nargs="+", default=[16])
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--apis", nargs="+", choices=sorted(DEVICES), default=["opencl", "vulkan"])
    ap.add_argument("--device", default=None, help="the runtime's device (default: pocl / lavapipe)")
    ap.add_argument("--torch-device", default=None, help="PyTorch's device (default: cuda when there is one, else cpu)")
    ap.add_argument("--build", metavar="DIR", help="write the artifacts and settings to DIR (to run elsewhere) instead of measuring")
    ap.add_argument("--run", metavar="DIR", help="measure DIR's artifacts (no TVM needed)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.run:
        with gzip.open(os.path.join(args.run, "bundle.json.gz"), "rt") as f:
            bundle = json.load(f)
        artifacts = {api: load_artifact(args.run, entry) for api, entry in bundle["artifacts"].items()}
        settings = bundle["settings"]
        settings["refilled"] = any(is_refilled(entry) for entry in bundle["artifacts"].values())
        config = config_of(settings["preset"])
        weights = make_weights(config)
    else:
        settings = {"preset": args.preset, "dtype": args.dtype, "int4": args.int4, "contexts": args.contexts, "steps": args.new_tokens}
        folder = os.path.join("/tmp", f"relax_vk_llm_{args.preset}")  # (the checkpoint: the --run side makes its weights again)
        artifacts, config, weights = build(folder, args.preset, args.dtype, args.contexts, args.new_tokens, args.apis, args.int4)
        if args.build:
            os.makedirs(os.path.join(args.build, "blobs"), exist_ok=True)
            over = None if args.refill_over is None else int(args.refill_over * (1 << 20))
            entries = {api: {"program": a.program, "source": a.source, "constants": store_constants(args.build, a, refill_over=over)}
                       for api, a in artifacts.items()}  # fmt: skip
            with gzip.open(os.path.join(args.build, "bundle.json.gz"), "wt") as f:  # (the kernels' source: 68 MB for Qwen3-0.6B)
                json.dump({"settings": settings, "artifacts": entries}, f)
            print(f"wrote {args.build}: {', '.join(artifacts)}")
            return 0
    import torch

    torch_device = args.torch_device or ("cuda" if torch.cuda.is_available() else "cpu")
    compare = not settings.get("refilled")
    if settings.get("int4") and compare:
        weights = int4_weights(weights, settings["dtype"])
    rows = measure(artifacts, config, weights, settings["dtype"], settings["contexts"], settings["steps"], args.device, torch_device, compare)
    result = dict(settings, params=sum(int(np.prod(v.shape)) for v in weights.values()), torch_device=torch_device, rows=rows)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
