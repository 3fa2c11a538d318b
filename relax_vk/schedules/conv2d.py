"""relax_vk's NCHW4c conv2d schedule: register-blocked, broadcast-FMA, padding folded into reads.

For the ``conv2d_NCHWc_OIHWo`` block of :func:`relax_vk.legalize.conv2d.conv2d_nchw4c_compute`
(plain convs and depthwise convs; textures and packed buffers alike), fused with its pad and any
elementwise epilogue (bias, batch norm, activations, residual add). One thread computes
``px`` output pixels along the row times ``oc`` output texels (4 channels each):

* the reduction runs ``ic4 -> kh -> kw -> ic lane``; per (ic4, kh) the thread loads the input row
  segment it needs once (``(px - 1) * stride + (kw - 1) * dilation + 1`` texels: a sliding window
  across kw) into registers, padding folded into those loads (the pad block is computed in
  registers with its guard, so a padded conv is one kernel);
* per (ic4, kh, kw) it loads ``oc * 4`` weight texels (OIHW4o: a texel holds 4 output channels of
  one input channel) and accumulates ``acc[o, p] += in[p].lane(i) * w[o, i]``: every weight texel
  feeds ``4 * px`` FMAs, every input texel ``16 * oc`` (MNN's and TFLite's broadcast form; TVM's
  adreno rule feeds one lane per fetch);
* accumulators live in registers (all inner loops unrolled, so every index is a constant), the
  write-back stores whole texels and computes the fused epilogue on the way out.

:class:`Conv2dConfig` holds the tunables; :func:`default_config` picks them from the workload (what
the tuning database overrides). Grouped convs whose groups split a texel are left to other rules.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from tvm import s_tir, tirx

from .conv1x1 import gemm_applies, schedule_conv1x1_gemm
from .cross_thread import texel_per_workgroup
from .register_tile import accumulate_in_registers, cache_texels, loop_depth, loop_extent, texel_loops, unroll_constant
from .unchecked import new_schedule

BLOCK = "conv2d_NCHWc_OIHWo"
PAD = "conv2d_data_pad"

# on a PrimFunc before scheduling: the configuration to use (``Conv2dConfig.key()``; the tuner
# sets it on each candidate); after scheduling: the workload, the configuration used and where it
# came from ("forced", "tuned", "learned" or "default")
CONFIG_ATTR = "relax_vk.conv2d_config"
WORKLOAD_ATTR = "relax_vk.conv2d_workload"
SOURCE_ATTR = "relax_vk.conv2d_config_source"
MEMORY_ATTR = "relax_vk.conv2d_memory"  # what :func:`memory_kind` says, as the database keys it


@dataclass(frozen=True)
class Conv2dConfig:
    """Tunables: output pixels per thread along the row, output texels per thread, threads per
    workgroup (along the fused pixel axis). ``split``: instead, one workgroup per output texel
    whose ``threads`` split the reduction (:func:`_schedule_split_reduction`; ``px`` and ``oc``
    are 1), or per block of ``px`` pixels x ``oc`` texels whose threads split the input channels
    (:func:`_schedule_split_block`): for convs with few outputs and long sums. ``gemm``: a 1x1 conv as a packed GEMM
    (:mod:`.conv1x1`), ``px`` pixels of the flattened map (not of one row) x ``oc`` texels."""

    px: int = 4
    oc: int = 2
    threads: int = 64
    split: bool = False
    gemm: bool = False

    def key(self) -> str:
        return f"px{self.px}_oc{self.oc}_t{self.threads}" + ("_split" if self.split else "") + ("_gemm" if self.gemm else "")

    @staticmethod
    def from_key(key: str) -> "Conv2dConfig":
        """The configuration :meth:`key` describes (``px4_oc2_t64``, ``px1_oc1_t64_split``,
        ``px4_oc4_t64_gemm``; the runtime's parser, which the tuner's device half uses without TVM)."""
        from ..runtime.measure import parse_config

        return Conv2dConfig(**parse_config(key))


@dataclass(frozen=True)
class Conv2dWorkload:
    """What a conv kernel computes, as the tuning database keys it."""

    n: int
    oc_chunks: int
    out_h: int
    out_w: int
    ic: int  # reduction channels per output channel (input channels per group)
    kh: int
    kw: int
    depthwise: bool
    stride: int = 1
    dilation: int = 1
    groups: int = 1  # of a grouped (not depthwise) conv; not part of the key

    @property
    def group_texels(self) -> int:
        """Output texels per group: an output-channel tile that divides it never straddles two
        groups (a straddling tile reads the input channels of both, over a region TVM can bound
        only per thread)."""
        return self.oc_chunks // self.groups if self.groups > 1 and self.oc_chunks % self.groups == 0 else self.oc_chunks

    def key(self) -> str:
        kind = "dw" if self.depthwise else "conv"
        return (f"{kind}_n{self.n}_oc{self.oc_chunks * 4}_h{self.out_h}_w{self.out_w}_ic{self.ic}_k{self.kh}x{self.kw}"
                f"_s{self.stride}_d{self.dilation}")  # fmt: skip

    @property
    def output_texels(self) -> int:
        return self.n * self.oc_chunks * self.out_h * self.out_w

    @property
    def reduction(self) -> int:
        """Terms of one output's sum."""
        return self.ic * self.kh * self.kw

    @property
    def flops(self) -> int:
        """Multiply-adds times two (channel padding to whole texels included)."""
        return 2 * self.n * self.oc_chunks * 4 * self.out_h * self.out_w * self.ic * self.kh * self.kw


def find_conv(sch: s_tir.Schedule):
    """``(conv block, pad block or None, epilogue blocks)`` of a fused conv kernel, or None."""
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    if names.count(BLOCK) != 1:
        return None
    index = names.index(BLOCK)
    before = blocks[:index]
    pad = None
    for b in before:
        if sch.get(b).name_hint == PAD:
            pad = b
        else:
            return None  # a producer other than the pad: not this rule's kernel
    return blocks[index], pad, blocks[index + 1 :]


def workload(sch: s_tir.Schedule, conv) -> Optional[Conv2dWorkload]:
    loops = sch.get_loops(conv)
    if len(loops) != 8:
        return None
    n, occ, oh, ow, ocb, ic, kh, kw = (loop_extent(sch.get(lp)) for lp in loops)
    if min(n, occ, oh, ow, ocb, ic, kh, kw) < 1 or ocb != 4:
        return None
    block = sch.get(conv)
    data = block.reads[0]
    # the data channel index: plain convs read channel ic (lane ic % 4), depthwise ones channel oc
    depthwise = ic == 1 and _reads_lane_of(block, data, ocb_var=block.iter_vars[4].var)
    if not depthwise and ic % 4:
        return None
    stride, dilation = _window(block, data)
    channels = int(getattr(data.source.shape[1], "value", 0)) * 4  # the data's (packed) channels
    groups = channels // ic if not depthwise and channels > ic and channels % ic == 0 else 1
    return Conv2dWorkload(n, occ, oh, ow, ic, kh, kw, depthwise, stride, dilation, groups)


def _window(block, region) -> tuple:
    """``(stride, dilation)`` along the rows: the coefficients of the output row and the kernel
    row in the data read's row index (``y * stride + kh * dilation``); ``(1, 1)`` if not linear."""
    from tvm.sym.pattern import detect_linear_equation

    y, kh = block.iter_vars[2].var, block.iter_vars[6].var
    coeffs = detect_linear_equation(region.region[2].min, [y, kh])
    if len(coeffs) != 3:
        return 1, 1
    return max(1, int(getattr(coeffs[0], "value", 1))), max(1, int(getattr(coeffs[1], "value", 1)))


def _reads_lane_of(block, region, ocb_var) -> bool:
    from ..core.ir_utils import tir_uses_any

    return tir_uses_any(region.region[-1].min, [ocb_var])


def row_tiles(out_w: int, most: int = 4):
    """Pixels-per-thread choices that divide the row exactly (largest first). Partial tiles are
    never used: TVM's reverse_compute_at does not guard a write-back that runs past the row, and a
    buffer written past its end corrupts memory. Short rows (up to 8) may be one tile."""
    found = [p for p in range(min(most, out_w), 0, -1) if out_w % p == 0]
    if out_w <= 8 and out_w not in found:
        found.insert(0, out_w)
    return found


# a conv splits its sums across a workgroup's threads (when untuned) if it has at most this many
# output texels and at least this many terms per sum: a squeeze-excite's 1x1 conv on a pooled
# vector (30 texels, 480 terms) or an SVTR conv on a 1x40 map (600 texels, 2880 terms) otherwise
# has a few hundred threads, each summing thousands of terms
SPLIT_MAX_TEXELS = 1024
SPLIT_MIN_TERMS = 256


def splits_reduction(w: Conv2dWorkload) -> bool:
    """Whether a workload is one for the split-reduction schedule (see :data:`SPLIT_MAX_TEXELS`)."""
    return not w.depthwise and w.output_texels <= SPLIT_MAX_TEXELS and w.reduction >= SPLIT_MIN_TERMS


# the tuner also tries the split reduction on convs with up to this many output texels and at least
# this many terms per sum: a deep 3x3 layer at a low resolution (ResNet's 512 channels at 7x7: 6272
# texels of 4608-term sums) fills a desktop GPU with too few threads, and only a measurement says
# whether a workgroup per texel pays for its cross-thread sums
SPLIT_TUNE_MAX_TEXELS = 16384
SPLIT_TUNE_MIN_TERMS = 512


def may_split_reduction(w: Conv2dWorkload) -> bool:
    """Whether the tuning space of a workload holds split-reduction configurations."""
    return splits_reduction(w) or (not w.depthwise and w.output_texels <= SPLIT_TUNE_MAX_TEXELS and w.reduction >= SPLIT_TUNE_MIN_TERMS)


def _direct_default(w: Conv2dWorkload) -> Conv2dConfig:
    px = row_tiles(w.out_w)[0]
    if w.depthwise:
        return Conv2dConfig(px=px, oc=1, threads=64)
    oc = 2 if w.group_texels % 2 == 0 else 1
    return Conv2dConfig(px=px, oc=oc, threads=64)


#: the GEMM block of an untuned 1x1 conv: 4 pixels x 2 output texels (32 accumulators, the
#: register budget MNN's c8w4 and TFLite's NVIDIA blocks use); 1 texel where the output texels
#: are odd (:func:`gemm_default`)
GEMM_DEFAULT = Conv2dConfig(px=4, oc=2, threads=64, gemm=True)


def gemm_default(w: Conv2dWorkload) -> Conv2dConfig:
    """:data:`GEMM_DEFAULT`, with one output texel per thread where two do not divide the
    output texels (the GEMM takes no output-texel tail: :func:`~.conv1x1.schedule_conv1x1_gemm`)."""
    return GEMM_DEFAULT if w.oc_chunks % GEMM_DEFAULT.oc == 0 else Conv2dConfig(GEMM_DEFAULT.px, 1, GEMM_DEFAULT.threads, gemm=True)


def fmas_per_fetch(w: Conv2dWorkload, c: Conv2dConfig) -> float:
    """FMAs a thread's block feeds per texel it fetches, per (input channel texel, kernel row):
    the direct schedule loads a row segment (``(px - 1) * stride + (kw - 1) * dilation + 1``
    input texels), the GEMM exactly its ``px`` pixels; both load ``kw * oc * 4`` weight texels.
    A GEMM block is capped at the output it covers (a block past the map computes nothing)."""
    px = min(c.px, w.out_h * w.out_w) if c.gemm else c.px
    oc = min(c.oc, w.oc_chunks)
    inputs = px if c.gemm else (px - 1) * w.stride + (w.kw - 1) * w.dilation + 1
    return px * oc * 16 * w.kw / (inputs + w.kw * oc * 4)


def default_config(w: Conv2dWorkload) -> Conv2dConfig:
    """An untuned configuration that is good on most GPUs (blocks of TFLite's and MNN's size;
    the split reduction for convs with few outputs and long sums). A 1x1 conv the GEMM takes
    (:func:`~relax_vk.schedules.conv1x1.gemm_applies`) gets :data:`GEMM_DEFAULT` where that block
    feeds more FMAs per fetched texel than the direct block (:func:`fmas_per_fetch`): rows the
    4-pixel tile does not divide (14x14 maps: 2 pixels per thread there) and stride 2 (the direct
    row segment loads ``2 * px - 1`` texels for ``px`` pixels); elsewhere the two blocks fetch the
    same, and the direct schedule stays."""
    if splits_reduction(w):
        return Conv2dConfig(px=1, oc=1, threads=64, split=True)
    direct = _direct_default(w)
    if gemm_applies(w) and fmas_per_fetch(w, gemm_default(w)) > fmas_per_fetch(w, direct):
        return gemm_default(w)
    return direct


def _is_texture(buffer) -> bool:
    return str(buffer.scope()).startswith("global.texture")


def operand_memory(data, weight) -> str:
    """The memory kind of a conv whose input is ``data`` and weight ``weight`` (buffers), as the
    tuning database keys it: ``"texture"``, ``"texture+wbuf"`` or ``"buffer"``."""
    if not _is_texture(data):
        return "buffer"
    return "texture" if _is_texture(weight) else "texture+wbuf"


def memory_kind(func: tirx.PrimFunc) -> str:
    """Where the conv's operands live: ``"texture"`` (data and weights in textures, the RFC's
    plan), ``"texture+wbuf"`` (data in a texture, weights in a buffer) or ``"buffer"``."""
    sch = new_schedule(func)
    found = find_conv(sch)
    if found is None:
        return "buffer"
    conv, pad, _ = found
    data = sch.get(pad).reads[0].source if pad is not None else sch.get(conv).reads[0].source
    return operand_memory(data, sch.get(conv).reads[1].source)


#: the GEMM blocks the tuner tries on a 1x1 conv, (pixels, output texels): up to 8 pixels and
#: 4 texels, at most 16 accumulator texels (AMD's limit in TFLite; NVIDIA's blocks hold 8)
GEMM_BLOCKS = ((4, 1), (4, 2), (2, 4), (4, 4), (8, 2))


def candidate_configs(w: Conv2dWorkload, threads=(32, 64, 128)) -> List[Conv2dConfig]:
    """The tuning space of a workload: every exact row tile up to 4 pixels, 1, 2 or 4 output
    texels per thread (those that divide the output channels of a group; depthwise convs take 1), and
    ``threads`` per workgroup, plus a workgroup per output texel splitting the sum where
    :func:`may_split_reduction`; a grouped conv's tiles stay inside one group. A 1x1 conv the
    GEMM takes also gets the :data:`GEMM_BLOCKS` whose output texels divide the conv's (pixel
    tails are masked; blocks larger than the output are left out). The default configuration is always
    among them."""
    ocs = [1] if w.depthwise else [o for o in (1, 2, 4) if w.group_texels % o == 0]
    found = [Conv2dConfig(px, oc, t) for px in row_tiles(w.out_w) for oc in ocs for t in threads]
    if may_split_reduction(w):
        found += [Conv2dConfig(1, 1, t, split=True) for t in threads]
    if may_split_block(w):
        found += split_block_configs(w)
    if gemm_applies(w):
        pixels = w.out_h * w.out_w
        found += [Conv2dConfig(px, oc, t, gemm=True) for px, oc in GEMM_BLOCKS if px <= pixels and w.oc_chunks % oc == 0 for t in threads]
    default = default_config(w)
    return found if default in found else [default] + found


#: ``$RELAX_VK_CONV1X1``: ``gemm`` or ``direct`` forces that kernel on every 1x1 conv the GEMM
#: takes (what :func:`conv1x1_kernel` sets in code; unset or ``auto``: the database, then the default)
CONV1X1_ENV = "RELAX_VK_CONV1X1"
CONV1X1_KINDS = ("auto", "gemm", "direct")
_CONV1X1: "contextvars.ContextVar[Optional[str]]" = contextvars.ContextVar("relax_vk_conv1x1", default=None)


@contextlib.contextmanager
def conv1x1_kernel(kind: str):
    """Within the block, builds schedule the 1x1 convs the GEMM takes (except those with few
    outputs and long sums, which keep the split reduction) with ``kind``: ``"gemm"``
    (the tuned GEMM block if the database has one, else :data:`GEMM_DEFAULT`), ``"direct"`` (the
    tuned direct configuration, else the direct default) or ``"auto"`` (the database, then
    :func:`default_config`). For side-by-side comparisons (``benchmarks/conv1x1_gemm.py``) and
    tests; overrides :data:`CONV1X1_ENV`."""
    if kind not in CONV1X1_KINDS:
        raise ValueError(f"conv1x1_kernel: {kind!r} is not one of {', '.join(CONV1X1_KINDS)}")
    token = _CONV1X1.set(kind)
    try:
        yield
    finally:
        _CONV1X1.reset(token)


def forced_conv1x1() -> str:
    """The 1x1 policy in force: :func:`conv1x1_kernel`'s, else :data:`CONV1X1_ENV`'s, else ``auto``."""
    kind = _CONV1X1.get() or os.environ.get(CONV1X1_ENV, "").strip().lower() or "auto"
    if kind not in CONV1X1_KINDS:
        raise ValueError(f"${CONV1X1_ENV}={kind!r} is not one of {', '.join(CONV1X1_KINDS)}")
    return kind


def choose_config(func: tirx.PrimFunc, target) -> tuple:
    """``(config, source)`` for a conv kernel: the one set on it (:data:`CONFIG_ATTR`, "forced"),
    else the tuning database's for the target's device ("tuned"), else what that database's
    records of the same conv in a related memory kind or its nearest records say (:func:`_learned`,
    "learned"), else the default ("default");
    ``(None, None)`` when the kernel is not one this rule handles. Under a 1x1 policy
    (:func:`conv1x1_kernel`), a 1x1 conv the GEMM takes gets that policy's kernel: the tuned
    configuration if it is of that kind ("tuned"), else that kind's default ("forced"); convs
    whose default splits the sum across a workgroup (few outputs, long sums) keep it."""
    sch = new_schedule(func)
    found = find_conv(sch)
    w = workload(sch, found[0]) if found is not None else None
    if w is None:
        return None, None
    if func.attrs is not None and CONFIG_ATTR in func.attrs:
        return Conv2dConfig.from_key(str(func.attrs[CONFIG_ATTR])), "forced"
    from ..core.target import target_api, target_device

    device = target_device(target) if target is not None else None
    api, memory = target_api(target), memory_kind(func)
    config = _record(device, api, memory, w) if device else None
    policy = forced_conv1x1()
    if policy != "auto" and gemm_applies(w) and not splits_reduction(w):
        if config is not None and config.gemm == (policy == "gemm"):
            return config, "tuned"
        return (gemm_default(w) if policy == "gemm" else _direct_default(w)), "forced"
    if config is not None:
        return config, "tuned"
    learned = _learned(device, api, memory, w) if device else None
    if learned is not None:
        return learned, "learned"
    return default_config(w), "default"


#: memory kinds whose tuning records stand in for another's when the database has none of it: a
#: conv reading its data from a texture and its weights from a buffer (integer weights, or weights
#: past the texture limit) walks its data as the all-texture conv does; only the weights' loads
#: differ. (On the H200 the default configuration left int8 ResNet-18 convs, which have no record
#: of their own, behind the fp16 build's tuned ones.)
RELATED_MEMORY: Dict[str, Tuple[str, ...]] = {"texture+wbuf": ("texture",)}


def _record(device: str, api: str, memory: str, w: Conv2dWorkload) -> Optional[Conv2dConfig]:
    """The database's direct configuration for workload ``w`` in ``memory``; None when it has no
    record, or a Winograd one (that conv was kept direct anyway)."""
    from .tuning import lookup

    config = lookup(device, api, memory, w.key())
    return Conv2dConfig(**config) if config and "winograd" not in config else None


def _learned(device: str, api: str, memory: str, w: Conv2dWorkload) -> Optional[Conv2dConfig]:
    """For a workload without a record of its own memory kind, in this order: the database's record
    of the same workload in a :data:`RELATED_MEMORY` kind (when among ``w``'s candidates), the
    nearest records of its own memory kind (:func:`learned_config`), those of a related kind; else
    None."""
    related = RELATED_MEMORY.get(memory, ())
    for other in related:
        config = _record(device, api, other, w)
        if config is not None and config in candidate_configs(w):
            return config
    for kind in (memory, *related):
        config = learned_config(device, api, kind, w)
        if config is not None:
            return config
    return None


#: how many of a device's tuned workloads nearest an untuned one vote on its configuration
NEIGHBOURS = 5
_WORKLOAD_KEY = re.compile(r"^(conv|dw)_n(\d+)_oc(\d+)_h(\d+)_w(\d+)_ic(\d+)_k(\d+)x(\d+)_s(\d+)_d(\d+)$")


@functools.lru_cache(maxsize=None)
def parse_workload(key: str) -> Optional[Conv2dWorkload]:
    """The workload :meth:`Conv2dWorkload.key` describes, or None for another key (a Winograd one)."""
    m = _WORKLOAD_KEY.match(key)
    if m is None:
        return None
    kind, n, oc, h, w, ic, kh, kw, stride, dilation = m.groups()
    return Conv2dWorkload(int(n), int(oc) // 4, int(h), int(w), int(ic), int(kh), int(kw), kind == "dw", int(stride), int(dilation))


def learned_config(device: str, api: str, memory: str, w: Conv2dWorkload) -> Optional[Conv2dConfig]:
    """For a workload the device's tuning database has no record of: the configuration that wins
    most often among the :data:`NEIGHBOURS` records of the same API, memory kind and kernel (size,
    stride, dilation, depthwise or not) nearest to it in output texels and sum length (log scale),
    counting only configurations among the workload's own candidates (:func:`candidate_configs`).
    What the database measured on similar convs says more about the device than a default made for
    most GPUs (on an H200 the default 4x2 GEMM block left a 197-token Linear 1.6-4.7x slower than
    the 1x1 block every one of its measured neighbours chose). None: no such records."""
    from .tuning import database

    db = database(device)
    if db is None:
        return None
    valid = set(candidate_configs(w))
    scored = []
    for (r_api, r_memory, r_key), record in db.records.items():
        other = parse_workload(r_key) if r_api == api and r_memory == memory else None
        if other is None or (other.kh, other.kw, other.stride, other.dilation, other.depthwise) != (w.kh, w.kw, w.stride, w.dilation, w.depthwise):
            continue
        if "winograd" in record.config:
            continue
        config = Conv2dConfig(**record.config)
        if config not in valid:
            continue
        distance = abs(math.log(other.output_texels / w.output_texels)) + abs(math.log(other.reduction / w.reduction))
        scored.append((distance, r_key, config))
    if not scored:
        return None
    votes: Dict[Conv2dConfig, list] = {}
    for rank, (_, _, config) in enumerate(sorted(scored, key=lambda s: (s[0], s[1]))[:NEIGHBOURS]):
        votes.setdefault(config, []).append(rank)
    return max(votes, key=lambda c: (len(votes[c]), -min(votes[c])))


def conv2d_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """The schedule rule: :func:`schedule_conv2d` with :func:`choose_config`'s configuration; the
    result records the workload, the configuration and its source (module attributes above). A
    GEMM configuration the kernel does not fit (an epilogue that is not elementwise over the
    output, or one TVM's primitives refuse) gives way to the direct default (source "default")."""
    config, source = choose_config(func, target)
    if config is None:
        return None
    try:
        scheduled = schedule_conv2d(func, config)
    except Exception:  # (a GEMM the kernel does not fit gives way below; other errors go to the driver)
        if not config.gemm:
            raise
        scheduled = None
    sch = new_schedule(func)
    w = workload(sch, find_conv(sch)[0])
    if scheduled is None and config.gemm:
        config, source = _direct_default(w), "default"
        scheduled = schedule_conv2d(func, config)
    if scheduled is None:
        return None
    return (scheduled.with_attr(WORKLOAD_ATTR, w.key()).with_attr(CONFIG_ATTR, config.key()).with_attr(SOURCE_ATTR, source)
            .with_attr(MEMORY_ATTR, memory_kind(func)).with_attr("relax_vk.flops", w.flops))  # fmt: skip


def schedule_conv2d(func: tirx.PrimFunc, config: Optional[Conv2dConfig] = None) -> Optional[tirx.PrimFunc]:
    """``func`` scheduled (module docstring), or None when it is not a kernel this rule handles."""
    sch = new_schedule(func)
    found = find_conv(sch)
    if found is None:
        return None
    conv, pad, epilogue = found
    w = workload(sch, conv)
    if w is None:
        return None
    cfg = config or default_config(w)
    if cfg.gemm:
        return schedule_conv1x1_gemm(sch, conv, pad, epilogue, w, cfg.px, cfg.oc, cfg.threads)
    if cfg.split and (cfg.px, cfg.oc) != (1, 1):
        return _schedule_split_block(sch, conv, pad, epilogue, w, cfg) if split_block_fits(w, cfg) else None
    if cfg.split:
        return _schedule_split_reduction(sch, conv, pad, epilogue, cfg.threads) if not w.depthwise else None
    if w.oc_chunks % cfg.oc or cfg.px < 1 or w.out_w % cfg.px:
        return None  # (no partial tiles: see row_tiles)
    data_buf, weight_buf = (r.source for r in sch.get(conv).reads)  # (data, weight), as the compute reads them
    n, occ, oh, ow, ocb, ic, kh, kw = sch.get_loops(conv)
    occ_o, occ_i = sch.split(occ, [None, cfg.oc])
    ow_o, ow_i = sch.split(ow, [None, cfg.px])
    ic_i = None
    if not w.depthwise:
        ic, ic_i = sch.split(ic, [None, 4])
    order = [occ_o, n, oh, ow_o, ic, kh, kw] + ([ic_i] if ic_i is not None else []) + [occ_i, ow_i, ocb]
    sch.reorder(*order)
    pixels = sch.fuse(n, oh, ow_o)
    # never more threads than pixels: with a single pixel every index is a constant, and TVM then
    # puts no guard on the cache and write-back stages, so idle threads would store garbage
    threads = min(cfg.threads, w.n * w.out_h * (w.out_w // cfg.px))
    bx, tx = sch.split(pixels, [None, threads])
    sch.bind(occ_o, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    # accumulators in registers; the write-back computes the fused epilogue and stores texels
    accumulate_in_registers(sch, conv, tx, epilogue, ic)
    _load_window(sch, conv, pad, data_buf, weight_buf, kh, kw)
    # the update: every inner loop unrolled (register indices are constants; a reduction update
    # cannot be vectorised in TIR, and GPUs run the 4 lanes as scalar FMAs anyway)
    unroll_constant(sch, sch.get_loops(conv)[loop_depth(sch, conv, kw) :])
    return sch.mod["main"].with_attrs(func.attrs) if func.attrs is not None else sch.mod["main"]


def _load_window(sch: s_tir.Schedule, conv, pad, data_buf, weight_buf, kh, kw) -> None:
    """The register loads of a thread's block (the direct and block-split schedules): per kernel
    row ``kh`` the input row segment of every ``kw`` at once (a sliding window), padding folded
    into the loads (the pad block computed in registers with its guard); per ``kw`` step the
    weight texels it uses."""
    if pad is not None:
        sch.compute_at(pad, kh, preserve_unit_loops=True)
        sch.set_scope(pad, 0, "local")
        texel_loops(sch, pad, loop_depth(sch, conv, kh))
    else:
        cache_texels(sch, conv, data_buf, kh)
    cache_texels(sch, conv, weight_buf, kw)


def _schedule_split_reduction(sch: s_tir.Schedule, conv, pad, epilogue, threads: int) -> tirx.PrimFunc:
    """One workgroup per output texel, the sum over ``(ic, kh, kw)`` split across ``threads``
    threads (:func:`~relax_vk.schedules.cross_thread.texel_per_workgroup`); padding folded into
    the reads, the fused epilogue computed on the texel's way out."""
    if pad is not None:
        sch.compute_inline(pad)
    for b in epilogue[:-1]:
        sch.compute_inline(b)
    out = epilogue[-1] if epilogue else sch.cache_write(conv, 0, "local")
    texel_per_workgroup(sch, conv, out, 3, threads)
    return sch.mod["main"]


#: the most output texels a block-split thread accumulates (16 texels: 64 registers)
SPLIT_BLOCK_MAX_TEXELS = 16
#: the most workgroup memory a block split's partial sums take (``threads x texels x 16`` bytes):
#: half of what OpenCL and Vulkan guarantee (32 KiB on Adreno and Mali, 48 KiB on NVIDIA's Vulkan)
SPLIT_BLOCK_MAX_SHARED = 16384
#: block splits are tuning candidates of convs with at least SPLIT_TUNE_MIN_TERMS terms per sum and
#: at most this many output texels (ResNet's 3x3 layers down from 64 channels at 56x56): the
#: threads per output texel grow the grid where one thread per block would leave a large GPU idle
SPLIT_BLOCK_TUNE_MAX_TEXELS = 65536


def may_split_block(w: Conv2dWorkload) -> bool:
    """Whether the tuning space of a workload holds block-split configurations."""
    return not w.depthwise and w.output_texels <= SPLIT_BLOCK_TUNE_MAX_TEXELS and w.reduction >= SPLIT_TUNE_MIN_TERMS


def split_block_configs(w: Conv2dWorkload, threads=(8, 16, 32, 64, 128)) -> List[Conv2dConfig]:
    """The block-split part of a tuning space (:func:`_schedule_split_block`): a block of the
    whole row (or of a row tile whose texels the threads divide) times 1, 2 or 4 output texels,
    at most :data:`SPLIT_BLOCK_MAX_TEXELS`, for each thread count that divides the input channel
    texels, within :data:`SPLIT_BLOCK_MAX_SHARED` bytes of partial sums."""
    found = []
    for oc in (1, 2, 4):
        for px in [w.out_w] + [p for p in row_tiles(w.out_w) if p != w.out_w]:
            for t in threads:
                c = Conv2dConfig(px, oc, t, split=True)
                if ((px, oc) != (1, 1) and px * oc <= SPLIT_BLOCK_MAX_TEXELS and t * px * oc * 16 <= SPLIT_BLOCK_MAX_SHARED
                        and split_block_fits(w, c)):  # fmt: skip
                    found.append(c)
    return found


def split_block_fits(w: Conv2dWorkload, c: Conv2dConfig) -> bool:
    """Whether the block-split schedule takes ``c`` for ``w``: a plain (not depthwise, one group)
    conv whose row the ``px`` pixels divide, whose output texels the ``oc`` texels divide, and
    whose input channel texels the ``threads`` divide (each thread then takes the same number)."""
    return (not w.depthwise and w.groups == 1 and c.px >= 1 and w.out_w % c.px == 0 and w.oc_chunks % c.oc == 0
            and w.ic % 4 == 0 and c.threads >= 1 and (w.ic // 4) % c.threads == 0
            and (c.px == w.out_w or (c.px * c.oc) % c.threads == 0))  # (see _schedule_split_block)  # fmt: skip


def _schedule_split_block(sch: s_tir.Schedule, conv, pad, epilogue, w: Conv2dWorkload, c: Conv2dConfig) -> tirx.PrimFunc:
    """One workgroup per block of ``px`` pixels x ``oc`` output texels, its ``threads`` threads
    splitting the input channel texels (thread ``t`` takes texels ``t, t + threads, ...``). Each
    thread accumulates its share of the whole block in registers, as the direct schedule does
    (row segments loaded once per (texel, kernel row), padding folded into the loads, every weight
    texel feeding ``4 * px`` FMAs); the partial blocks meet in workgroup memory, and one thread
    per output texel sums its ``threads`` partials, computes the fused epilogue and stores the
    texel. For deep convs on small maps (ResNet's 512 channels at 7x7): too few output texels to
    fill a large GPU a thread each, too many for a workgroup each."""
    data_buf, weight_buf = (r.source for r in sch.get(conv).reads)
    n, occ, oh, ow, ocb, ic, kh, kw = sch.get_loops(conv)
    occ_o, occ_i = sch.split(occ, [None, c.oc])
    ow_o, ow_i = sch.split(ow, [None, c.px])
    ic4, ic_i = sch.split(ic, [None, 4])
    ic_o, ic_t = sch.split(ic4, [None, c.threads])
    sch.reorder(occ_o, n, oh, ow_o, ic_t, ic_o, kh, kw, ic_i, occ_i, ow_i, ocb)
    bx = sch.fuse(occ_o, n, oh, ow_o)
    partial = sch.rfactor(ic_t, factor_axis=0)
    sch.set_scope(partial, 0, "shared")
    # the partial blocks under the workgroup's loop of the sum (one kernel), each thread's in registers
    sch.bind(bx, "blockIdx.x")
    sch.compute_at(partial, bx, preserve_unit_loops=True)
    # (compute_at makes a loop per block iter: thread, n, occ, y, x, lane of oc; ic outer, ic lane, kh, kw)
    _, p_thread, p_n, p_occ, p_y, p_x, p_ocb, p_outer, p_lane, p_kh, p_kw = sch.get_loops(partial)
    sch.reorder(p_thread, p_n, p_y, p_outer, p_kh, p_kw, p_lane, p_occ, p_x, p_ocb)
    sch.bind(p_thread, "threadIdx.x")
    acc = sch.cache_write(partial, 0, "local")
    sch.reverse_compute_at(acc, p_thread, preserve_unit_loops=True)
    texel_loops(sch, acc, 2)
    _load_window(sch, partial, pad, data_buf, weight_buf, p_kh, p_kw)
    init = sch.decompose_reduction(partial, p_outer)
    texel_loops(sch, init, 2)
    unroll_constant(sch, sch.get_loops(partial)[loop_depth(sch, partial, p_kw) :])
    # the sum of the partials: a thread per output texel, the epilogue folded into its store. The
    # threads past the block's texels must store nothing, but a write-back placed by
    # reverse_compute_at keeps no guard of the split it sits under; texel f of the block is pixel
    # f // oc, channel texel f % oc, and the block is the whole row (or the threads divide it), so
    # those threads fall on pixels past the row, which TVM does guard
    _, t, o_i, x_i, lane = sch.get_loops(conv)
    sch.reorder(x_i, o_i, t, lane)
    texel = sch.fuse(x_i, o_i)
    _, tx = sch.split(texel, [None, c.threads])
    sch.bind(tx, "threadIdx.x")
    accumulate_in_registers(sch, conv, tx, epilogue, t, bound=3)
    return sch.mod["main"]
