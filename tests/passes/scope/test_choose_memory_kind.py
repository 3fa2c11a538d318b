"""ChooseMemoryKind: textures or buffers from measured conv times, else the RFC's rule."""

import numpy as np
import pytest

import relax_vk
from relax_vk.core.limits import device_slug
from relax_vk.models import build_example
from relax_vk.passes.scope.choose_memory_kind import decide, recorded
from relax_vk.schedules.tuning import Database, Record, clear_cache


def test_decision_without_measurements_is_the_rfc_rule(db_dir):
    mod = build_example("conv20")
    target = relax_vk.target.opencl(device_name="Nobody's GPU")
    assert recorded(relax_vk.scope_pipeline(target)(mod)) is None  # unchanged module: the RFC's listing holds
    assert decide(mod, target).rule == "consumer-priority" and decide(mod, target).kind == "texture"
    compiled = relax_vk.build(build_example("rfc-conv2d"), target)
    assert compiled.plan().scope_rule["rule"] == "consumer-priority" and "no tuning database" in compiled.plan().scope_rule["reason"]
    key = "conv_n1_oc32_h28_w28_ic32_k3x3_s1_d1"
    db = Database(device_slug("Nobody's GPU"))
    db.add(Record("opencl", "buffer", key, {"px": 4, "oc": 2, "threads": 64}, 0.01))
    db.save(str(db_dir / f"{db.device}.json"))
    clear_cache()
    assert decide(mod, target).rule == "consumer-priority" and "0 of 20" in decide(mod, target).reason  # texture side missing
    db.add(Record("opencl", "texture", key, {"px": 4, "oc": 2, "threads": 64}, 0.02))
    db.save(str(db_dir / f"{db.device}.json"))
    clear_cache()
    plan = relax_vk.plan(relax_vk.scope_pipeline(relax_vk.target.opencl(device_name="Nobody's GPU"))(mod))
    assert plan.scope_rule["rule"] == "measured" and plan.scope_rule["kind"] == "buffer" and plan.texture_bytes == 0
    assert np.isclose(plan.scope_rule["buffer_ms"], 0.2) and np.isclose(plan.scope_rule["texture_ms"], 0.4)
    assert "measured" in plan.table()
    # an explicit preference wins over the measurements
    texture = relax_vk.ScopeOptions(prefer="texture")
    forced = relax_vk.plan(relax_vk.scope_pipeline(target, options=texture)(mod), decision=decide(mod, target, texture))
    assert forced.scope_rule["rule"] == "prefer" and forced.texture_bytes > 0


def test_bad_prefer_is_refused():
    with pytest.raises(ValueError, match="prefer"):
        relax_vk.ScopeOptions(prefer="fastest")


def test_whole_model_timings_outrank_summed_conv_times(db_dir):
    """Isolated conv timings can favour one kind while the whole model runs faster in the other
    (ResNet-18 on the H100's OpenCL: convs 2.18 vs 2.20 ms, the model 3.36 vs 2.84 ms). A
    whole-model record of the model, imported from the benchmark's JSON, decides; another model
    (other shapes) still goes by its convs."""
    from relax_vk.tools.tune import import_plan_timings

    mod = build_example("conv20")
    target = relax_vk.target.opencl(device_name="Somebody's GPU")
    key = "conv_n1_oc32_h28_w28_ic32_k3x3_s1_d1"
    db = Database(device_slug("Somebody's GPU"))
    db.add(Record("opencl", "buffer", key, {"px": 4, "oc": 2, "threads": 64}, 0.02))
    db.add(Record("opencl", "texture", key, {"px": 4, "oc": 2, "threads": 64}, 0.01))
    db.save(str(db_dir / f"{db.device}.json"))
    clear_cache()
    by_convs = recorded(relax_vk.scope_pipeline(target)(mod))
    assert (by_convs.rule, by_convs.basis, by_convs.kind) == ("measured", "convs", "texture") and by_convs.model
    rows = [{"model": "conv20", "results": {
        "opencl/texture": {"wall_ms": 0.5}, "opencl/buffer": {"wall_ms": 0.4},
        "opencl/auto": {"wall_ms": 0.5, "scope_rule": {"device": by_convs.device, "model": by_convs.model}},
        "vulkan/texture": {"wall_ms": 0.5}}}]  # fmt: skip  (no Vulkan buffer plan: nothing kept for Vulkan)
    assert import_plan_timings(rows, str(db_dir)) == {by_convs.device: 1}
    scoped = relax_vk.scope_pipeline(target)(mod)
    by_model = recorded(scoped)
    assert (by_model.basis, by_model.kind) == ("model", "buffer") and by_model.texture_ms == 0.5 and by_model.buffer_ms == 0.4
    assert relax_vk.plan(scoped).texture_bytes == 0
    other = recorded(relax_vk.scope_pipeline(target)(build_example("conv-relu-pool")))
    assert other is None or other.basis != "model"
    with pytest.raises(ValueError, match="not benchmark results"):
        import_plan_timings({"records": []}, str(db_dir))


def test_a_quantized_conv_counts_as_its_workload(db_dir):
    """A conv whose weight is int8 (a quantized model's, packed by the layout stage) is the
    workload of its float form: measured conv times decide its model's memory kind as they decide
    the float model's (before, a quantized model had no convs to measure and took textures)."""
    pytest.importorskip("onnx", reason="needs the onnx extra")
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends import from_onnx
    from relax_vk.schedules.workloads import workload_counts

    q = np.random.default_rng(0).integers(-127, 128, (32, 32, 3, 3)).astype(np.int8)
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=0), helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 28, 28])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 28, 28])],
                              [numpy_helper.from_array(q, "wq"), numpy_helper.from_array(np.full(32, 0.01, np.float32), "ws")])  # fmt: skip
    mod = relax_vk.layout_stage(relax_vk.target.opencl())(from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))
    key = "conv_n1_oc32_h28_w28_ic32_k3x3_s1_d1"
    assert workload_counts(mod) == {key: 1}
    db = Database(device_slug("Quantized GPU"))
    db.add(Record("opencl", "buffer", key, {"px": 4, "oc": 2, "threads": 64}, 0.01))
    db.add(Record("opencl", "texture", key, {"px": 4, "oc": 2, "threads": 64}, 0.02))
    db.save(str(db_dir / f"{db.device}.json"))
    clear_cache()
    decision = decide(mod, relax_vk.target.opencl(device_name="Quantized GPU"))
    assert (decision.rule, decision.kind, decision.convs) == ("measured", "buffer", 1)
