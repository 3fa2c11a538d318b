import json

from tvm import relax

import relax_vk
from relax_vk.models import build_example
from relax_vk.passes.scope.scope_info import CONSUMER_ATTR, PRODUCER_ATTR

from helpers import TARGET, call_scopes, const, copies, module, scoped, tensor


def decide(mod):
    mod = relax_vk.passes.PartialLegalize()(relax_vk.layout_stage()(mod))
    seq = [relax_vk.passes.CollectConsumerScopeInfo(TARGET), relax_vk.passes.CollectProducerScopeInfo(TARGET)]
    for p in seq:
        mod = p(mod)
    return mod, json.loads(str(mod["main"].attrs[PRODUCER_ATTR]))["sites"]


def test_two_texture_consumers_and_one_buffer_consumer():
    """Under the RFC's registry the softmax's unpacking transform reads a buffer. Upstream: the
    producer becomes a buffer and each texture consumer gets a copy (2 copies). relax_vk: the
    producer stays a texture and only the buffer consumer gets one copy. With relax_vk's default
    registry the unpacking transform reads the texture itself: no copy at all."""
    mod = build_example("mixed-consumers")
    out = scoped(mod, registry=relax_vk.rfc_registry())
    rows = call_scopes(out)
    producer = [r for r in rows if r[0] == "relax.nn.conv2d"][0]
    assert producer[2] == ["global.texture"]
    assert copies(out) == [("global.texture", "global")]
    default = scoped(mod)
    assert [r for r in call_scopes(default) if r[0] == "relax.nn.conv2d"][0][2] == ["global.texture"]
    assert copies(default) == []


def test_buffer_producer_with_two_texture_consumers_shares_one_copy():
    x = tensor("x", (1, 8, 8, 8))

    def body(bb, x):
        m = bb.emit(relax.op.nn.softmax(x, axis=1))  # NCHW-only producer: its packed form is a buffer
        a = bb.emit(relax.op.nn.conv2d(m, const((8, 8, 3, 3), 1), padding=(1, 1)))
        b = bb.emit(relax.op.nn.conv2d(m, const((8, 8, 1, 1), 2)))
        return relax.op.concat([a, b], axis=1)

    out = scoped(module([x], body))
    # the packing transform of m can write a texture itself: no copy at all
    assert copies(out) == []


def test_outputs_escaping_the_block_are_buffers():
    x = tensor("x", (1, 8, 8, 8, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit_output(relax.op.nn.relu(x))  # a block output: escapes
        bb.emit_func_output(a)
    _, sites = decide(bb.get())
    assert [s["outs"] for s in sites.values()] == [["global"]]


def test_tuple_producing_call_receives_demands():
    x = tensor("x", (1, 8, 8, 8))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((16, 8, 3, 3), 1), padding=(1, 1)))
        parts = bb.emit(relax.op.split(c, 2, axis=1))
        p0 = bb.emit(relax.TupleGetItem(parts, 0))
        p1 = bb.emit(relax.TupleGetItem(parts, 1))
        a = bb.emit(relax.op.nn.conv2d(p0, const((8, 8, 3, 3), 2), padding=(1, 1)))
        b = bb.emit(relax.op.nn.conv2d(p1, const((8, 8, 3, 3), 3), padding=(1, 1)))
        return relax.op.add(a, b)

    out = scoped(module([x], body))
    split = [r for r in call_scopes(out) if r[0].startswith("split")][0]
    # both fields reach the convs that read them: upstream leaves split outputs in buffers
    assert split[2] == ["global.texture", "global.texture"]
    assert copies(out) == []


def test_stale_analysis_is_recomputed():
    mod = relax_vk.passes.PartialLegalize()(relax_vk.layout_stage()(build_example("conv-relu-pool")))
    mod = relax_vk.passes.CollectConsumerScopeInfo(TARGET)(mod)
    fresh = relax_vk.passes.CollectProducerScopeInfo(TARGET)(mod)["main"].attrs[PRODUCER_ATTR]
    payload = json.loads(str(mod["main"].attrs[CONSUMER_ATTR]))
    payload["fingerprint"] = "not-this-function"
    for site in payload["sites"].values():  # poison: would make everything a buffer if trusted
        site["arg_allowed"] = [["global"] for _ in site["arg_allowed"]]
        site["out_allowed"] = [["global"] for _ in site["out_allowed"]]
    poisoned = mod
    poisoned["main"] = mod["main"].with_attr(CONSUMER_ATTR, json.dumps(payload))
    again = relax_vk.passes.CollectProducerScopeInfo(TARGET)(poisoned)["main"].attrs[PRODUCER_ATTR]
    assert json.loads(str(again))["sites"] == json.loads(str(fresh))["sites"]
