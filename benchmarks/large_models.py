"""Classic ImageNet CNNs whose fully-connected layers exceed one buffer binding, run for real.

VGG-16 (fc6: 25088 x 4096 float32 = 411 MB), AlexNet (fc6: 9216 x 4096 = 151 MB) and ZFNet-style
variants hold weights larger than the 128 MiB storage-buffer binding of lavapipe and many phone
GPUs. relax_vk splits those weights along their output features (passes.layout.SplitLargeWeights)
and folds over-long grids, so the models build and run on lavapipe with its own limits and match
PyTorch. Random weights from fixed seeds (torchvision is not importable here); batch 1 at 224x224.

    python benchmarks/large_models.py                  # vgg16 and alexnet on lavapipe (minutes)
    python benchmarks/large_models.py alexnet --backend opencl --device pocl
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np


def _models():
    import torch
    from torch import nn

    def vgg16():
        cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
        layers, c = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU()]
                c = v
        return nn.Sequential(*layers, nn.Flatten(), nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))

    def alexnet():
        return nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2), nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(), nn.Conv2d(256, 256, 3, padding=1),
            nn.ReLU(), nn.MaxPool2d(3, 2), nn.AdaptiveAvgPool2d(6), nn.Flatten(), nn.Linear(256 * 36, 4096), nn.ReLU(), nn.Linear(4096, 4096),
            nn.ReLU(), nn.Linear(4096, 1000),
        )  # fmt: skip

    def build(make, seed=0):
        torch.manual_seed(seed)
        model = make().eval()
        with torch.no_grad():  # He-scaled weights keep the activations O(1) through the depth
            for m in model.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    fan_in = m.weight[0].numel()
                    m.weight.normal_(0, (2.0 / fan_in) ** 0.5)
                    m.bias.normal_(0, 0.01)
        return model, torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(seed + 1))

    return {"vgg16": lambda: build(vgg16), "alexnet": lambda: build(alexnet)}


def main(argv=None) -> int:
    import torch

    import relax_vk
    from relax_vk.frontends import from_torch
    from relax_vk.runtime import load, select_device

    models = _models()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=sorted(models))
    p.add_argument("--backend", choices=("opencl", "vulkan"), default="vulkan")
    p.add_argument("--device", default=None, help="lavapipe / pocl / gpu (default: lavapipe for Vulkan, pocl for OpenCL)")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.backend == "vulkan":
        device = select_device("vulkan", args.device or "lavapipe")
        limits = device.limits
        target = relax_vk.target.vulkan(adapter=device)
    else:
        device = select_device("opencl", args.device or "pocl")
        limits = device.limits
        target = relax_vk.target.opencl(opencl_device=device)
    print(f"device limits: {limits.max_buffer_bytes} bytes per buffer binding ({limits.source})")
    print(f"{'model':<8} {'largest weight MB':>17} {'parts':>5} {'compile s':>9} {'run s':>7} {'max abs err':>11} {'top-1 agrees':>12}")
    failures = 0
    for name in args.models:
        model, x = models[name]()
        biggest = max(m.weight.numel() * 4 for m in model.modules() if hasattr(m, "weight") and m.weight is not None)
        t0 = time.perf_counter()
        compiled = relax_vk.build(from_torch(model, (x,)), target)
        artifact = compiled.artifact()
        compile_s = time.perf_counter() - t0
        constants = [t for t in artifact.program["tensors"] if t["kind"] == "constant"]
        parts = sum(1 for t in constants if t["bytes"] > limits.max_buffer_bytes // 2)
        t0 = time.perf_counter()
        out = load(artifact, device=device).run([x.numpy()])[0]
        run_s = time.perf_counter() - t0
        with torch.no_grad():
            ref = model(x).numpy()
        err = float(np.abs(out - ref).max())
        agree = int(out.argmax()) == int(ref.argmax())
        ok = agree and np.allclose(out, ref, rtol=1e-3, atol=1e-3 * float(np.abs(ref).max()))
        failures += not ok
        print(f"{name:<8} {biggest / 1e6:>17.1f} {parts:>5} {compile_s:>9.1f} {run_s:>7.1f} {err:>11.2e} {str(agree):>12}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
