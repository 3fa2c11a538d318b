"""``relax-vk show`` prints the stages ``plan`` and ``build`` run: its last module is ``plan``'s
scoped module, for any model, target and device limits (issue 34: a hand-copied stage list had
drifted, leaving out ChooseMemoryKind and the target-dependent layout passes)."""

import json

import pytest
import tvm

from relax_vk.core.limits import PRESETS
from relax_vk.pipeline import STAGES
from relax_vk.tools.cli import _scoped_with_decision, _shown_stages, build_parser, main


def _args(argv):
    args = build_parser().parse_args(argv)
    args.target = args.target or "opencl"
    return args


def assert_show_ends_at_plans_module(argv):
    shown = list(_shown_stages(_args(["show", *argv])))
    assert [stage for stage, _ in shown] == [s for s in STAGES if s.group in ("layout", "scope")]
    plan_args = _args(["plan", *argv])
    tvm.ir.assert_structural_equal(shown[-1][1], _scoped_with_decision(plan_args, plan_args.model)[0])


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("model", ["residual", "rgb-stem", "mixed-consumers"])
def test_show_ends_at_plans_module_for_every_preset(model, preset):
    assert_show_ends_at_plans_module([model, "--preset", preset])


# (a model a configuration: the stages and their modules do not depend on which model meets which)
@pytest.mark.parametrize("argv", [["mobilenet_v3", "--preset", "adreno6xx"], ["swin_tiny", "--target", "vulkan", "--preset", "lavapipe", "--fp16"]],
                         ids=["mobilenet_v3", "swin_tiny"])  # fmt: skip
def test_show_ends_at_plans_module_for_zoo_models(argv):
    assert_show_ends_at_plans_module(argv)


@pytest.mark.parametrize("target", ["opencl", "vulkan"])
def test_show_splits_weights_plan_splits(target, capsys):
    """The review's case: with a 20000-byte buffer binding, ``plan`` lists residual's two 36 KiB
    conv weights as four split weights; ``show`` must print four convs on them too."""
    argv = ["residual", "--target", target, "--max-buffer-bytes", "20000"]
    assert_show_ends_at_plans_module(argv)
    assert main(["plan", *argv, "--json"]) == 0

    weights = [t for t in json.loads(capsys.readouterr().out)["tensors"] if t["scope"] == "global.texture-weight"]
    assert len(weights) == 4 and all(t["bytes"] <= 20000 for t in weights)
    assert main(["show", *argv]) == 0
    last = capsys.readouterr().out.split("# ===== after")[-1]
    assert last.count("R.nn.conv2d(") == 4


def test_show_lowering_ends_at_builds_lowered_module():
    """``show --lowering`` goes on through the lowering stages ``build`` runs: its last module is
    the build's (Vulkan: retargeted, kernels named for Vulkan)."""
    from relax_vk.tools.cli import _compile

    argv = ["conv-relu-pool", "--target", "vulkan", "--preset", "lavapipe"]
    shown = list(_shown_stages(_args(["show", *argv, "--lowering"])))
    assert [stage for stage, _ in shown] == list(STAGES)
    build_args = _args(["build", *argv, "-o", "unused.rvk"])
    compiled = _compile(build_args, "conv-relu-pool")
    tvm.ir.assert_structural_equal(shown[-1][1], compiled.lowered)
    assert not any("opencl" in gv.name_hint for gv in shown[-1][1].get_global_vars())
