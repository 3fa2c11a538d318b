"""relax_vk's Winograd conv schedule: one fused kernel per conv, a thread per output tile.

For the kernel of :func:`relax_vk.legalize.winograd.winograd_conv2d_compute` (blocks
``winograd_data_pad -> winograd_input -> winograd_gemm -> winograd_output``), fused with the conv's
elementwise epilogue (bias, batch norm, activations, residual add), in textures and buffers alike.
One thread computes ``tiles`` ``m x m`` output tiles along the row for ``oc`` output texels (4
channels each):

* per input texel chunk (4 input channels) it loads the ``a x a`` input tile (``a = m + 2``) into
  registers, padding folded into those loads (the pad block is computed in registers with its
  guard), and transforms it (``V = B^T d B``, 4 lanes at a time);
* per input channel of the chunk, per output texel and per tile position it loads one weight
  texel of the transformed weight (4 output channels) and accumulates ``M[o, t, e] += V[t, e].lane(i)
  * U[o, i, e]`` for each of its tiles ``t``: ``a^2 * 4 * oc * tiles`` accumulators in registers (all inner loops unrolled, so every
  index is a constant);
* the write-back computes ``Y = A^T M A`` and the fused epilogue per output pixel and stores whole
  texels; pixels of the last tile row or column past the output's edge are not stored (the split's
  guard), so any output size works.

:class:`WinogradConfig` holds the tunables (the tile size is fixed by the transformed weight the
kernel reads, which :mod:`relax_vk.passes.scope.choose_conv_algorithm` chose); the tuning
database's record for the conv workload, when it names this tile size, overrides the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from tvm import s_tir, tirx

from ..legalize.winograd import GEMM, INPUT, INVERSE, KERNEL, OUTPUT, PAD, TILES, tile_count
from .conv2d import CONFIG_ATTR, MEMORY_ATTR, SOURCE_ATTR, WORKLOAD_ATTR, Conv2dWorkload, operand_memory
from .register_tile import cache_texels, loop_depth, loop_extent, texel_loops, unroll_constant
from .unchecked import new_schedule

TILE_ATTR = "relax_vk.winograd_tile"  # on the scheduled kernel: m of F(m, 3)


@dataclass(frozen=True)
class WinogradConfig:
    """Tunables: the output tile (F(m, 3)), output texels per thread, threads per workgroup, and
    tiles per thread along the row (each weight texel then feeds ``4 * tiles`` multiply-adds)."""

    m: int = 2
    oc: int = 1
    threads: int = 64
    tiles: int = 1

    def key(self) -> str:
        return f"wino{self.m}_oc{self.oc}_t{self.threads}" + (f"_x{self.tiles}" if self.tiles != 1 else "")

    def to_record(self) -> dict:
        """The configuration as a tuning record holds it (``winograd`` marks the algorithm)."""
        record = {"winograd": self.m, "oc": self.oc, "threads": self.threads}
        return {**record, "tiles": self.tiles} if self.tiles != 1 else record

    @staticmethod
    def from_key(key: str) -> "WinogradConfig":
        from ..runtime.measure import parse_config

        config = parse_config(key) if is_winograd_key(key) else {}
        if "winograd" not in config:
            raise ValueError(f"not a Winograd configuration: {key!r} (expected e.g. wino2_oc1_t64)")
        return WinogradConfig.from_record(config)

    @staticmethod
    def from_record(config: dict) -> "WinogradConfig":
        return WinogradConfig(int(config["winograd"]), int(config["oc"]), int(config["threads"]), int(config.get("tiles", 1)))


def is_winograd_key(key: str) -> bool:
    return str(key).startswith("wino")


def find_winograd(sch: s_tir.Schedule):
    """``(pad, input, gemm, inverse, output, epilogue blocks)`` of a fused Winograd kernel, or None."""
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    if names[:5] != [PAD, INPUT, GEMM, INVERSE, OUTPUT]:
        return None
    return (*blocks[:5], blocks[5:])


def workload(sch: s_tir.Schedule, found) -> Optional[Tuple[Conv2dWorkload, int]]:
    """``(the conv's workload, m)`` of a Winograd kernel: the key the tuning database has for the
    conv it replaces, and its tile size."""
    _, _, gemm, _, output, _ = found
    n, oc4, _, _, a, a2, ocb, ic = (loop_extent(sch.get(lp)) for lp in sch.get_loops(gemm))
    _, _, oh, ow, _ = (loop_extent(sch.get(lp)) for lp in sch.get_loops(output))
    if a != a2 or ocb != 4 or a - KERNEL + 1 not in TILES or min(n, oc4, oh, ow, ic) < 1:
        return None
    return Conv2dWorkload(n, oc4, oh, ow, ic, KERNEL, KERNEL, False), a - KERNEL + 1


def default_config(w: Conv2dWorkload, m: int) -> WinogradConfig:
    """Two output texels per thread for F(2,3) (128 accumulators), one for F(4,3) (144)."""
    oc = 2 if m == 2 and w.oc_chunks % 2 == 0 else 1
    return WinogradConfig(m, oc, 64)


def candidate_configs(w: Conv2dWorkload, tiles=TILES, threads=(32, 64, 128)) -> List[WinogradConfig]:
    """The Winograd part of a 3x3 stride-1 conv's tuning space: each tile size; for F(2,3) one
    tile and 1 or 2 output texels per thread (those dividing the output texels), or two tiles
    along the row (where the row has an even number of tiles: no partial pair) and one texel; for
    F(4,3), whose accumulators would not fit registers twice, one tile and one texel; ``threads``
    per workgroup."""
    out = []
    for m in tiles:
        blocks = [(1, 1), (2, 1), (1, 2)] if m == 2 else [(1, 1)]
        for oc, row in blocks:
            if w.oc_chunks % oc == 0 and tile_count(w.out_w, m) % row == 0:
                out += [WinogradConfig(m, oc, t, row) for t in threads]
    return out


def memory_kind(sch: s_tir.Schedule, found) -> str:
    """Where the kernel's operands live, as the tuning database keys the conv
    (:func:`relax_vk.schedules.conv2d.memory_kind`)."""
    pad, input_, gemm, _, _, _ = found
    return operand_memory(sch.get(pad).reads[0].source, _weight_buffer(sch, input_, gemm))


def _weight_buffer(sch: s_tir.Schedule, input_, gemm):
    """The transformed weight the GEMM reads (its other operand is the input transform's output)."""
    v = sch.get(input_).writes[0].source
    return [r.source for r in sch.get(gemm).reads if not r.source.same_as(v)][0]


def choose_config(func: tirx.PrimFunc, target) -> tuple:
    """``(config, source, workload)`` for a Winograd kernel: the one set on it (:data:`CONFIG_ATTR`,
    "forced"), else the tuning database's record for the conv workload when it names this tile
    size ("tuned"), else :func:`default_config` ("default"); ``(None, None, None)`` when the kernel
    is not one this rule handles."""
    sch = new_schedule(func)
    found = find_winograd(sch)
    got = workload(sch, found) if found is not None else None
    if got is None:
        return None, None, None
    w, m = got
    if func.attrs is not None and CONFIG_ATTR in func.attrs and is_winograd_key(str(func.attrs[CONFIG_ATTR])):
        forced = WinogradConfig.from_key(str(func.attrs[CONFIG_ATTR]))
        if forced.m == m:
            return forced, "forced", w
    from ..core.target import target_api, target_device
    from .tuning import lookup

    device = target_device(target) if target is not None else None
    config = lookup(device, target_api(target), memory_kind(sch, found), w.key()) if device else None
    if config and int(config.get("winograd", 0)) == m:
        return WinogradConfig.from_record(config), "tuned", w
    return default_config(w, m), "default", w


def winograd_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """The schedule rule: :func:`schedule_winograd` with :func:`choose_config`'s configuration; the
    result records the conv's workload, the configuration and its source (as the direct conv
    schedule does, so profiles and the tuner see both algorithms alike)."""
    config, source, w = choose_config(func, target)
    if config is None:
        return None
    sch = new_schedule(func)
    memory = memory_kind(sch, find_winograd(sch))
    scheduled = schedule_winograd(func, config)
    if scheduled is None:
        return None
    return (scheduled.with_attr(WORKLOAD_ATTR, w.key()).with_attr(CONFIG_ATTR, config.key()).with_attr(SOURCE_ATTR, source)
            .with_attr(MEMORY_ATTR, memory).with_attr(TILE_ATTR, config.m).with_attr("relax_vk.flops", w.flops))  # fmt: skip


def schedule_winograd(func: tirx.PrimFunc, config: WinogradConfig) -> Optional[tirx.PrimFunc]:
    """``func`` scheduled (module docstring), or None when it is not a kernel this rule handles
    or ``config`` does not fit it."""
    sch = new_schedule(func)
    found = find_winograd(sch)
    got = workload(sch, found) if found is not None else None
    if got is None:
        return None
    w, m = got
    pad, input_, gemm, inverse, output, epilogue = found
    if config.m != m or config.oc < 1 or w.oc_chunks % config.oc or config.threads < 1 or config.tiles < 1:
        return None
    if tile_count(w.out_w, m) % config.tiles:
        return None  # (no partial group of tiles: its input window would run past the padded input)
    weight_buf = _weight_buffer(sch, input_, gemm)
    # the epilogue folded into the output transform: one block computes and stores the result
    for b in epilogue[:-1]:
        sch.compute_inline(b)
    if epilogue:
        sch.reverse_compute_inline(epilogue[-1])
    n, oc, y, x, ocb = sch.get_loops(output)
    oc_o, oc_i = sch.split(oc, [None, config.oc])
    y_o, y_i = sch.split(y, [None, m])  # (a guarded split where the output is not whole tiles)
    x_o, x_t, x_i = sch.split(x, [None, config.tiles, m])
    sch.reorder(oc_o, n, y_o, x_o, oc_i, y_i, x_t, x_i, ocb)
    tiles = sch.fuse(n, y_o, x_o)
    threads = min(config.threads, w.n * tile_count(w.out_h, m) * (tile_count(w.out_w, m) // config.tiles))
    bx, tx = sch.split(tiles, [None, threads])
    sch.bind(oc_o, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    unroll_constant(sch, [oc_i, y_i, x_t, x_i])
    sch.vectorize(ocb)
    # the output transform of the thread's tiles, then the GEMM's accumulators (every position),
    # in registers; position loops unrolled, never vectorized (their selects fold to constants)
    sch.compute_at(inverse, tx, preserve_unit_loops=True)
    sch.set_scope(inverse, 0, "local")
    unroll_constant(sch, sch.get_loops(inverse)[loop_depth(sch, inverse, tx) :])
    sch.compute_at(gemm, tx, preserve_unit_loops=True)
    sch.set_scope(gemm, 0, "local")
    g_loops = sch.get_loops(gemm)
    g_oc, g_tw, g_e1, g_e2, g_ob, g_ic = g_loops[-7], g_loops[-5], g_loops[-4], g_loops[-3], g_loops[-2], g_loops[-1]
    c4, cl = sch.split(g_ic, [None, 4])
    sch.reorder(c4, cl, g_oc, g_e1, g_e2, g_tw, g_ob)  # (a weight texel serves the thread's tiles)
    # the input tile of one texel chunk, padding folded into the loads, and its transform
    sch.compute_at(input_, c4, preserve_unit_loops=True)
    sch.set_scope(input_, 0, "local")
    sch.compute_at(pad, c4, preserve_unit_loops=True)
    sch.set_scope(pad, 0, "local")
    texel_loops(sch, pad, loop_depth(sch, gemm, c4))  # (whole texels loaded)
    unroll_constant(sch, sch.get_loops(input_)[loop_depth(sch, gemm, c4) :])
    # one weight texel per (input channel, output texel, position), loaded where it is used
    cache_texels(sch, gemm, weight_buf, g_e2)
    init = sch.decompose_reduction(gemm, c4)
    texel_loops(sch, init, 3)
    unroll_constant(sch, sch.get_loops(gemm)[loop_depth(sch, gemm, c4) :])
    return sch.mod["main"].with_attrs(func.attrs) if func.attrs is not None else sch.mod["main"]
