"""How an OpenCL session binds its arenas, side by side in one process: two sessions of one artifact,
one passing its arena tensors to kernels by their shared-virtual-memory address (the default where
the device has coarse-grained buffer SVM) and one as sub-buffers (``RVK_OPENCL_SVM=0``), their runs
interleaved round by round so that the machine's drift falls on both.

* ``--decoder DIR``: a decoder bundle that ``benchmarks/llm_decode.py --build DIR`` wrote (its OpenCL
  artifact): greedy decodes of ``--new-tokens`` after a random prompt of each ``--contexts`` length,
  decode tokens/s per round, and whether both sessions made the same tokens;
* ``--artifact FILE.rvk`` (any number): a model's median latency (ms) over ``--repeat`` runs per round on
  random inputs of its declared shapes, and the largest difference of the two sessions' outputs.

Prints a table (per model or context: each binding's per-round figures and median, the ratio of
the medians) and, with ``--json``, the rows. Needs numpy and the native library only (no TVM)::

    python3 benchmarks/opencl_buffer_binding.py --decoder .gpu/llm --device gpu --rounds 6   # e.g. the GPU machine
    python3 benchmarks/opencl_buffer_binding.py --artifact model.rvk --device pocl
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from contextlib import contextmanager

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

BINDINGS = ("svm", "memory objects")


@contextmanager
def _svm(on: bool):
    """``RVK_OPENCL_SVM`` as a session made inside reads it (unset: the default)."""
    before = os.environ.get("RVK_OPENCL_SVM")
    if on:
        os.environ.pop("RVK_OPENCL_SVM", None)
    else:
        os.environ["RVK_OPENCL_SVM"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RVK_OPENCL_SVM", None)
        else:
            os.environ["RVK_OPENCL_SVM"] = before


def _sessions(artifact, device: str) -> dict:
    from relax_vk.runtime import load

    sessions = {}
    for binding in BINDINGS:
        with _svm(binding == "svm"):
            sessions[binding] = load(artifact, device=device)
    got = {b: s.buffer_binding for b, s in sessions.items()}
    if got["svm"] != "svm":
        raise SystemExit(f"the device does not bind arenas by address (buffer_binding {got['svm']!r}): nothing to compare")
    return sessions


def _orders(rounds: int):
    """The bindings' order in each round: alternated, so neither always runs first."""
    return [BINDINGS if r % 2 == 0 else BINDINGS[::-1] for r in range(rounds)]


def decoder_rows(folder: str, device: str, rounds: int, contexts, new_tokens: int) -> list:
    from backend_latency import load_artifact

    from relax_vk.runtime.generate import Generator

    with gzip.open(os.path.join(folder, "bundle.json.gz"), "rt") as f:
        bundle = json.load(f)
    if "opencl" not in bundle["artifacts"]:
        raise SystemExit(f"{folder} holds no OpenCL artifact (llm_decode.py --build ... --apis opencl)")
    sessions = _sessions(load_artifact(folder, bundle["artifacts"]["opencl"]), device)
    generators = {b: Generator(s) for b, s in sessions.items()}
    for g in generators.values():  # (first runs at a new size are not what is measured)
        g.generate([1, 2, 3], 2)
    rng = np.random.default_rng(1)
    rows = []
    for context in contexts:
        rates = {b: [] for b in BINDINGS}
        same = True
        for order in _orders(rounds):
            prompt = [int(v) for v in rng.integers(0, generators["svm"].vocab, context)]
            tokens = {}
            for b in order:
                result = generators[b].generate(prompt, new_tokens)
                rates[b].append(result.decode_tokens_per_s)
                tokens[b] = result.tokens
            same = same and tokens["svm"] == tokens["memory objects"]
        rows.append({"what": f"decode @{context}", "unit": "tokens/s", "rounds": rates, "same_tokens": same,
                     "device_bytes": {b: s.device_bytes for b, s in sessions.items()}})  # fmt: skip
    return rows


def artifact_rows(paths, device: str, rounds: int, repeat: int) -> list:
    from relax_vk.runtime import load  # noqa: F401  (the library, before the sessions)

    rows = []
    for path in paths:
        sessions = _sessions(path, device)
        if any(d < 0 for i in sessions["svm"].inputs for d in i["shape"]):
            raise SystemExit(f"{path} has run-time dims: give a model of fixed shapes")
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(i["shape"]).astype(i["dtype"]) for i in sessions["svm"].inputs]
        outputs = {b: s.run(inputs) for b, s in sessions.items()}
        diff = max(float(np.max(np.abs(a.astype("float64") - b.astype("float64")))) if a.size else 0.0
                   for a, b in zip(outputs["svm"], outputs["memory objects"]))  # fmt: skip
        ms = {b: [] for b in BINDINGS}
        for order in _orders(rounds):
            for b in order:
                ms[b].append(sessions[b].time(inputs, repeat=repeat)["median"])
        rows.append({"what": os.path.basename(path), "unit": "ms", "rounds": ms, "max_output_difference": diff,
                     "device_bytes": {b: s.device_bytes for b, s in sessions.items()}})  # fmt: skip
    return rows


def print_table(rows) -> None:
    print(f"{'what':<24} {'binding':<15} {'median':>9}  rounds")
    for row in rows:
        medians = {b: float(np.median(v)) for b, v in row["rounds"].items()}
        for b in BINDINGS:
            print(f"{row['what']:<24} {b:<15} {medians[b]:>9.3f}  {', '.join(f'{v:.3f}' for v in row['rounds'][b])} {row['unit']}")
        ratio = medians["svm"] / medians["memory objects"]
        check = f"same tokens: {row['same_tokens']}" if "same_tokens" in row else f"outputs differ by {row['max_output_difference']:.1e}"
        print(f"{'':<24} {'svm / objects':<15} {ratio:>9.2f}  ({check}; device bytes {row['device_bytes']['svm']:,} / {row['device_bytes']['memory objects']:,})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoder", metavar="DIR", help="a bundle of benchmarks/llm_decode.py --build")
    parser.add_argument("--artifact", nargs="*", default=[], metavar="FILE", help=".rvk files for OpenCL")
    parser.add_argument("--device", default="pocl")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--contexts", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=50, help="runs timed per round (--artifact)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.decoder and not args.artifact:
        parser.error("give --decoder DIR and/or --artifact FILE")
    rows = []
    if args.decoder:
        rows += decoder_rows(args.decoder, args.device, args.rounds, args.contexts, args.new_tokens)
    rows += artifact_rows(args.artifact, args.device, args.rounds, args.repeat)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
