"""Random CNN graphs for differential testing: a seeded, JSON-able spec and the ``torch.nn``
module it describes.

A :class:`GraphSpec` is an input shape and a list of nodes; node ``i`` produces tensor ``i + 1``
(tensor 0 is the input). Every node names its op, the tensors it reads and its parameters, all
plain data, so a failing spec can be printed, shrunk (:mod:`.shrink`), stored as a regression
case and rebuilt exactly. Shapes are tracked while generating, so every spec is valid by
construction; :func:`infer_shapes` re-derives them (the shrinker uses it to keep only valid
candidates).

The ops cover what the registry claims and what mobile CNNs use: convolutions of every kernel
size, stride, dilation and group count (depthwise included), transposed convolutions, batch norm,
ReLU/ReLU6/SiLU/GELU/hard-swish/hard-sigmoid/ELU/leaky ReLU/sigmoid/tanh, broadcast
add/mul/sub (same shape, per channel, scalar, over the spatial axes, squeeze-excite gates),
concat and uneven channel splits, max/avg pools (ceil mode too), adaptive and global pooling,
nearest/bilinear resize, constant/reflect/replicate padding, channel softmax and channel mean,
channel shuffle and a linear head; and transformer pieces on the map's pixels as tokens:
multi-head self-attention (LayerNorm, qkv Linear, the 5-D qkv split, softmax(q k^T) v with head
sizes of any width, or ``F.scaled_dot_product_attention``; causal masks in both; projection,
residual) and channels-last LayerNorm + Linear + GELU blocks.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

Shape = Tuple[int, ...]

ACTIVATIONS = ("relu", "relu6", "silu", "gelu", "hardswish", "hardsigmoid", "elu", "leaky_relu", "sigmoid", "tanh")
CHANNELS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24)


@dataclass
class Node:
    op: str
    inputs: List[int]
    params: Dict[str, object] = field(default_factory=dict)


@dataclass
class GraphSpec:
    """A random graph: input shape, nodes (node ``i`` makes tensor ``i + 1``), outputs."""

    input_shape: Shape
    nodes: List[Node]
    outputs: List[int]
    seed: Optional[int] = None

    def to_json(self) -> dict:
        return {
            "seed": self.seed,
            "input_shape": list(self.input_shape),
            "nodes": [{"op": n.op, "inputs": list(n.inputs), "params": n.params} for n in self.nodes],
            "outputs": list(self.outputs),
        }

    @staticmethod
    def from_json(data: dict) -> "GraphSpec":
        nodes = [Node(n["op"], list(n["inputs"]), dict(n["params"])) for n in data["nodes"]]
        return GraphSpec(tuple(data["input_shape"]), nodes, list(data["outputs"]), data.get("seed"))

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    def describe(self) -> str:
        """One line per node, for reports and reproducers."""
        shapes = infer_shapes(self)
        lines = [f"t0 = input{list(self.input_shape)}"]
        for i, n in enumerate(self.nodes):
            args = ", ".join(f"t{j}" for j in n.inputs)
            params = ", ".join(f"{k}={v}" for k, v in sorted(n.params.items()) if k != "seed")
            lines.append(f"t{i + 1} = {n.op}({args}{', ' if params and args else ''}{params})  # {list(shapes[i + 1])}")
        lines.append(f"return {', '.join(f't{o}' for o in self.outputs)}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- shapes
def _conv_out(size: int, k: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def _pool_out(size: int, k: int, stride: int, pad: int, ceil: bool) -> int:
    span = size + 2 * pad - k
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + pad:  # PyTorch: the last window must start inside
        out -= 1
    return out


def node_shape(node: Node, shapes: Sequence[Shape]) -> Shape:
    """The output shape of ``node`` given its inputs' shapes (raises ValueError when invalid)."""
    p = node.params
    x = shapes[node.inputs[0]]
    op = node.op
    if op in ("conv", "conv_transpose"):
        n, c, h, w = x
        k, s, d, pad = p["kernel"], p["stride"], p["dilation"], p["padding"]
        if c % p["groups"] or p["out"] % p["groups"]:
            raise ValueError("groups do not divide channels")
        if op == "conv":
            oh, ow = _conv_out(h, k, s, pad, d), _conv_out(w, k, s, pad, d)
        else:
            op_ = p.get("output_padding", 0)
            oh = (h - 1) * s - 2 * pad + d * (k - 1) + op_ + 1
            ow = (w - 1) * s - 2 * pad + d * (k - 1) + op_ + 1
        if oh < 1 or ow < 1:
            raise ValueError("empty output")
        return (n, p["out"], oh, ow)
    if op in ("act", "bn", "softmax_c", "scale_c", "shuffle", "attention", "ln_nhwc"):
        if op == "shuffle" and x[1] % p["groups"]:
            raise ValueError("shuffle groups")
        return x
    if op == "binary":
        other = shapes[node.inputs[1]] if len(node.inputs) > 1 else None
        if other is not None and tuple(other) != tuple(x):
            raise ValueError("binary operands differ")
        return x
    if op == "se":
        return x
    if op == "concat":
        parts = [shapes[i] for i in node.inputs]
        if any(tuple(q[:1] + q[2:]) != tuple(x[:1] + x[2:]) for q in parts):
            raise ValueError("concat shapes")
        return (x[0], sum(q[1] for q in parts), x[2], x[3])
    if op == "split":
        sizes = p["sizes"]
        if sum(sizes) != x[1]:
            raise ValueError("split sizes")
        return (x[0], sizes[p["index"]], x[2], x[3])
    if op == "pool":
        n, c, h, w = x
        k, s, pad, ceil = p["kernel"], p["stride"], p["padding"], p["ceil"]
        if pad * 2 > k:
            raise ValueError("pool padding")
        oh, ow = _pool_out(h, k, s, pad, ceil), _pool_out(w, k, s, pad, ceil)
        if oh < 1 or ow < 1:
            raise ValueError("empty pool")
        return (n, c, oh, ow)
    if op == "adaptive_pool":
        return (x[0], x[1], p["size"][0], p["size"][1])
    if op == "global_mean":
        return (x[0], x[1], 1, 1)
    if op == "mean_c":
        return (x[0], 1, x[2], x[3])
    if op == "resize":
        if "size" in p:
            return (x[0], x[1], p["size"][0], p["size"][1])
        return (x[0], x[1], x[2] * p["scale"], x[3] * p["scale"])
    if op == "pad":
        l, r, t, b = p["pads"]
        if p["mode"] == "reflect" and max(l, r) >= x[3] or p["mode"] == "reflect" and max(t, b) >= x[2]:
            raise ValueError("reflect pad too large")
        return (x[0], x[1], x[2] + t + b, x[3] + l + r)
    if op == "linear":
        return (x[0], p["out"])
    raise ValueError(f"unknown op {op}")


def infer_shapes(spec: GraphSpec) -> List[Shape]:
    shapes: List[Shape] = [tuple(spec.input_shape)]
    for i, node in enumerate(spec.nodes):
        if any(j > i or j < 0 for j in node.inputs):
            raise ValueError(f"node {i} reads a later tensor")
        if any(len(shapes[j]) != 4 for j in node.inputs):
            raise ValueError(f"node {i} reads a non-4-D tensor")
        shapes.append(tuple(node_shape(node, shapes)))
    return shapes


# ------------------------------------------------------------------------- generation
class _Builder:
    def __init__(self, rng: random.Random, input_shape: Shape):
        self.rng = rng
        self.shapes: List[Shape] = [input_shape]
        self.nodes: List[Node] = []

    def add(self, op: str, inputs: List[int], **params) -> Optional[int]:
        node = Node(op, inputs, params)
        try:
            shape = node_shape(node, self.shapes)
        except ValueError:
            return None
        if math.prod(shape) > 200_000 or min(shape) < 1:
            return None
        self.nodes.append(node)
        self.shapes.append(shape)
        return len(self.shapes) - 1

    def pick(self, recent: int = 4) -> int:
        """A 4-D tensor, biased towards the most recent ones."""
        cands = [i for i, s in enumerate(self.shapes) if len(s) == 4]
        return self.rng.choice(cands[-recent:]) if self.rng.random() < 0.8 else self.rng.choice(cands)


def _conv_params(rng: random.Random, cin: int, h: int, w: int, transpose: bool = False) -> dict:
    k = rng.choice((1, 1, 2, 3, 3, 3, 5, 7) if not transpose else (2, 3, 4))
    stride = rng.choice((1, 1, 2))
    dilation = rng.choice((1, 1, 1, 2)) if not transpose else 1
    pad = rng.choice((0, k // 2, (dilation * (k - 1)) // 2))
    if transpose:
        pad = rng.choice((0, (k - 1) // 2))
    kind = rng.random()
    if kind < 0.2 and not transpose:
        groups, out = cin, cin * rng.choice((1, 1, 2))  # depthwise (multiplier 1 or 2)
    elif kind < 0.35:
        divisors = [g for g in (2, 3, 4) if cin % g == 0]
        groups = rng.choice(divisors) if divisors else 1
        out = groups * rng.choice((1, 2, 3))
    else:
        groups, out = 1, rng.choice(CHANNELS)
    params = {"kernel": k, "stride": stride, "dilation": dilation, "padding": pad, "groups": groups, "out": out, "bias": rng.random() < 0.7}
    if transpose and stride > 1:
        params["output_padding"] = rng.choice((0, 1))
    return params


def _step(b: _Builder) -> None:
    rng = b.rng
    x = b.pick()
    n, c, h, w = b.shapes[x]
    if rng.random() < 0.1 and h * w <= 1024:  # transformer pieces over the pixels as tokens
        if rng.random() < 0.6:
            b.add("attention", [x], heads=rng.choice((1, 2, 3)), head_dim=rng.choice((3, 4, 8, 15, 16)), fused=rng.random() < 0.5, causal=rng.random() < 0.3)
        else:
            b.add("ln_nhwc", [x], hidden=rng.choice((4, 6, 8, 16)))
        return
    r = rng.random()
    if r < 0.22:
        b.add("conv", [x], **_conv_params(rng, c, h, w))
    elif r < 0.27:
        b.add("conv_transpose", [x], **_conv_params(rng, c, h, w, transpose=True))
    elif r < 0.37:
        b.add("act", [x], kind=rng.choice(ACTIVATIONS))
    elif r < 0.42:
        b.add("bn", [x])
    elif r < 0.52:
        same = [i for i, s in enumerate(b.shapes) if s == b.shapes[x] and i != x]
        kind = rng.choice(("same", "same", "channel", "scalar", "spatial", "batch_channel"))
        if kind == "same" and same:
            b.add("binary", [x, rng.choice(same)], fn=rng.choice(("add", "mul", "sub")))
        elif kind != "same":
            b.add("binary", [x], fn=rng.choice(("add", "mul", "sub")), operand=kind)
    elif r < 0.56:
        b.add("se", [x], hidden=max(1, c // rng.choice((1, 2, 4))), gate=rng.choice(("sigmoid", "hardsigmoid")))
    elif r < 0.62:
        same = [i for i, s in enumerate(b.shapes) if len(s) == 4 and s[0] == n and s[2:] == (h, w) and i != x]
        if same:
            b.add("concat", [x] + rng.sample(same, min(len(same), rng.choice((1, 2)))))
    elif r < 0.66:
        if c >= 2:
            cut = sorted(rng.sample(range(1, c), min(c - 1, rng.choice((1, 2)))))
            sizes = [hi - lo for lo, hi in zip([0] + cut, cut + [c])]
            b.add("split", [x], sizes=sizes, index=rng.randrange(len(sizes)))
    elif r < 0.74:
        k = rng.choice((2, 3))
        b.add("pool", [x], kind=rng.choice(("max", "avg")), kernel=k, stride=rng.choice((1, 2, 2)), padding=rng.choice((0, k // 2)),
              ceil=rng.random() < 0.3, count_include_pad=rng.random() < 0.5)  # fmt: skip
    elif r < 0.77:
        b.add("adaptive_pool", [x], kind=rng.choice(("avg", "max")), size=[rng.choice((1, 2, 3, max(1, h // 2))), rng.choice((1, 2, 3, max(1, w // 2)))])
    elif r < 0.80:
        b.add("global_mean", [x])
    elif r < 0.85:
        mode = rng.choice(("nearest", "bilinear"))
        if rng.random() < 0.6:
            b.add("resize", [x], mode=mode, scale=2, align_corners=mode == "bilinear" and rng.random() < 0.5)
        else:
            b.add("resize", [x], mode=mode, size=[rng.randint(1, 2 * h + 1), rng.randint(1, 2 * w + 1)], align_corners=mode == "bilinear" and rng.random() < 0.5)
    elif r < 0.90:
        b.add("pad", [x], mode=rng.choice(("constant", "reflect", "replicate")), pads=[rng.randint(0, 2) for _ in range(4)], value=rng.choice((0.0, 0.5)))
    elif r < 0.93:
        b.add("softmax_c", [x])
    elif r < 0.95:
        b.add("mean_c", [x])
    elif r < 0.97:
        g = [g for g in (2, 3, 4) if c % g == 0 and c > g]
        if g:
            b.add("shuffle", [x], groups=rng.choice(g))
    else:
        b.add("scale_c", [x])


def random_graph(seed: int, max_nodes: Optional[int] = None) -> GraphSpec:
    """A valid random graph from ``seed`` (the same seed always gives the same graph)."""
    rng = random.Random(seed)
    shape = (rng.choice((1, 1, 1, 2)), rng.choice(CHANNELS), rng.randint(3, 33), rng.randint(3, 33))
    b = _Builder(rng, shape)
    target = max_nodes or rng.randint(2, 9)
    tries = 0
    while len(b.nodes) < target and tries < 200:
        _step(b)
        tries += 1
    if rng.random() < 0.15 and b.nodes:
        last = len(b.shapes) - 1
        if len(b.shapes[last]) == 4 and math.prod(b.shapes[last][1:]) <= 4096:
            b.add("linear", [last], out=rng.choice((1, 5, 10)))
    # every tensor nothing reads is an output (at most three, the latest first), so few nodes are dead
    read = {j for n in b.nodes for j in n.inputs}
    leaves = [i for i in range(len(b.shapes) - 1, 0, -1) if i not in read]
    outputs = leaves[:3] or [len(b.shapes) - 1]
    return GraphSpec(shape, b.nodes, outputs, seed)


# --------------------------------------------------------------------------- torch
def _randomize(module, torch, gen) -> None:
    """Weights of the transformer pieces from ``gen`` (LayerNorm affine terms away from 1 and 0)."""
    with torch.no_grad():
        for name, value in module.named_parameters():
            fan_in = value.shape[-1] if value.dim() > 1 else 1
            scale = 1 / math.sqrt(fan_in) if value.dim() > 1 else 0.3
            value.copy_(torch.randn(value.shape, generator=gen) * scale + (1.0 if name.endswith("0.weight") else 0.0))


def to_torch(spec: GraphSpec, seed: Optional[int] = None):
    """``(torch.nn.Module in eval mode, example input)`` for ``spec``; weights from ``seed``."""
    from ...core.extras import require

    torch = require("torch", "torch")
    return _build_module(torch, spec, spec.seed if seed is None else seed)


def _build_module(torch, spec: GraphSpec, seed: int):
    nn, F = torch.nn, torch.nn.functional
    shapes = infer_shapes(spec)
    gen = torch.Generator().manual_seed(int(seed or 0) & 0x7FFFFFFF)

    def param(*shape, scale=1.0, offset=0.0):
        return nn.Parameter(torch.randn(*shape, generator=gen) * scale + offset, requires_grad=False)

    class Graph(nn.Module):
        def __init__(self):
            super().__init__()
            self.mods = nn.ModuleDict()
            self.extra = nn.ParameterDict()
            for i, node in enumerate(spec.nodes):
                self._make(i, node, shapes[node.inputs[0]])

        def _make(self, i, node, x):
            p, key = node.params, f"n{i}"
            if node.op in ("conv", "conv_transpose"):
                cls = nn.Conv2d if node.op == "conv" else nn.ConvTranspose2d
                kw = {"output_padding": p.get("output_padding", 0)} if node.op == "conv_transpose" else {}
                m = cls(x[1], p["out"], p["kernel"], p["stride"], p["padding"], dilation=p["dilation"], groups=p["groups"], bias=p["bias"], **kw)
                fan_in = x[1] // p["groups"] * p["kernel"] ** 2
                with torch.no_grad():
                    m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / math.sqrt(max(fan_in, 1)))
                    if m.bias is not None:
                        m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
                self.mods[key] = m
            elif node.op == "bn":
                m = nn.BatchNorm2d(x[1])
                with torch.no_grad():
                    m.running_mean.copy_(torch.randn(x[1], generator=gen) * 0.1)
                    m.running_var.copy_(torch.rand(x[1], generator=gen) + 0.5)
                    m.weight.copy_(torch.rand(x[1], generator=gen) + 0.5)
                    m.bias.copy_(torch.randn(x[1], generator=gen) * 0.1)
                self.mods[key] = m
            elif node.op == "binary" and len(node.inputs) == 1:
                operand = {"channel": (1, x[1], 1, 1), "scalar": (1,), "spatial": (1, 1, x[2], x[3]), "batch_channel": (x[0], x[1], 1, 1)}[p["operand"]]
                self.extra[key] = param(*operand, scale=0.5, offset=1.0 if p["fn"] == "mul" else 0.0)
            elif node.op == "se":
                self.mods[key] = nn.Sequential(nn.Conv2d(x[1], p["hidden"], 1), nn.ReLU(), nn.Conv2d(p["hidden"], x[1], 1))
            elif node.op == "scale_c":
                self.extra[key] = param(1, x[1], 1, 1, scale=0.5, offset=1.0)
            elif node.op == "linear":
                self.mods[key] = nn.Linear(math.prod(x[1:]), p["out"])
            elif node.op == "attention":
                inner = p["heads"] * p["head_dim"]
                self.mods[key] = nn.ModuleList([nn.LayerNorm(x[1]), nn.Linear(x[1], 3 * inner), nn.Linear(inner, x[1])])
                _randomize(self.mods[key], torch, gen)
            elif node.op == "ln_nhwc":
                self.mods[key] = nn.ModuleList([nn.LayerNorm(x[1]), nn.Linear(x[1], p["hidden"]), nn.Linear(p["hidden"], x[1])])
                _randomize(self.mods[key], torch, gen)

        def forward(self, inp):
            t = [inp]
            for i, node in enumerate(spec.nodes):
                t.append(self._run(i, node, [t[j] for j in node.inputs]))
            outs = [t[o] for o in spec.outputs]
            return outs[0] if len(outs) == 1 else tuple(outs)

        def _run(self, i, node, xs):
            p, key, x = node.params, f"n{i}", xs[0]
            op = node.op
            if op in ("conv", "conv_transpose", "bn", "linear"):
                return self.mods[key](x.flatten(1) if op == "linear" else x)
            if op == "act":
                kind = p["kind"]
                if kind == "relu6":
                    return F.relu6(x)
                if kind == "leaky_relu":
                    return F.leaky_relu(x, 0.1)
                return getattr(F, kind)(x) if kind not in ("sigmoid", "tanh") else getattr(torch, kind)(x)
            if op == "binary":
                other = xs[1] if len(xs) > 1 else self.extra[key]
                return {"add": torch.add, "mul": torch.mul, "sub": torch.sub}[p["fn"]](x, other)
            if op == "se":
                gate = self.mods[key](x.mean((2, 3), keepdim=True))
                return x * (torch.sigmoid(gate) if p["gate"] == "sigmoid" else F.hardsigmoid(gate))
            if op == "concat":
                return torch.cat(xs, 1)
            if op == "split":
                return torch.split(x, p["sizes"], 1)[p["index"]]
            if op == "pool":
                if p["kind"] == "max":
                    return F.max_pool2d(x, p["kernel"], p["stride"], p["padding"], ceil_mode=p["ceil"])
                return F.avg_pool2d(x, p["kernel"], p["stride"], p["padding"], ceil_mode=p["ceil"], count_include_pad=p["count_include_pad"])
            if op == "adaptive_pool":
                fn = F.adaptive_avg_pool2d if p["kind"] == "avg" else F.adaptive_max_pool2d
                return fn(x, tuple(p["size"]))
            if op == "global_mean":
                return x.mean((2, 3), keepdim=True)
            if op == "mean_c":
                return x.mean(1, keepdim=True)
            if op == "softmax_c":
                return torch.softmax(x, 1)
            if op == "scale_c":
                return x * self.extra[key]
            if op == "attention":
                n, c, h, w = x.shape
                norm, qkv, proj = self.mods[key]
                heads, d = p["heads"], p["head_dim"]
                tokens = x.flatten(2).transpose(1, 2)  # [N, HW, C]
                q, k, v = qkv(norm(tokens)).reshape(n, h * w, 3, heads, d).permute(2, 0, 3, 1, 4)
                if p.get("fused"):  # PyTorch's math path once exported (q, k scaled by sqrt(scale), the masked-row guard)
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=p.get("causal", False))
                else:
                    scores = (q @ k.transpose(-2, -1)) * d**-0.5
                    if p.get("causal"):
                        scores = scores + torch.full((h * w, h * w), float("-inf")).triu(1)
                    y = torch.softmax(scores, dim=-1) @ v
                out = tokens + proj(y.transpose(1, 2).reshape(n, h * w, heads * d))
                return out.transpose(1, 2).reshape(n, c, h, w)
            if op == "ln_nhwc":
                norm, up, down = self.mods[key]
                y = x.permute(0, 2, 3, 1)
                return (y + down(F.gelu(up(norm(y))))).permute(0, 3, 1, 2)
            if op == "shuffle":
                n, c, h, w = x.shape
                g = p["groups"]
                return x.reshape(n, g, c // g, h, w).transpose(1, 2).reshape(n, c, h, w)
            if op == "resize":
                kw = {"align_corners": p["align_corners"]} if p["mode"] == "bilinear" else {}
                if "size" in p:
                    return F.interpolate(x, size=tuple(p["size"]), mode=p["mode"], **kw)
                return F.interpolate(x, scale_factor=p["scale"], mode=p["mode"], **kw)
            if op == "pad":
                kw = {"value": p["value"]} if p["mode"] == "constant" else {}
                return F.pad(x, tuple(p["pads"]), mode=p["mode"], **kw)
            raise ValueError(op)

    model = Graph().eval()
    example = torch.randn(*spec.input_shape, generator=gen)
    return model, example
