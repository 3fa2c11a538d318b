"""The CI slice of ``benchmarks/unseen_transformers.py``: transformer blocks the zoo does not have,
as PyTorch writes them (fused causal attention with batch 2, attention masked by a bool input,
``nn.MultiheadAttention`` with a key padding mask), compiled under both plans, run on pocl or
lavapipe (each block on one API; ``make test-full``: both) against PyTorch, and most of each in
textures with no copies."""

import importlib.util
import os

import pytest

from helpers_build import BACKENDS

pytest.importorskip("torch", reason="the blocks are torch.nn modules")

SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "unseen_transformers.py")


@pytest.mark.one_api("api")
@pytest.mark.parametrize("block", ["sdpa_causal_batch2", "masked_attention", "key_padding_mask"])
@pytest.mark.parametrize("api, device", BACKENDS)
def test_unseen_transformer_blocks_run_right_and_stay_in_textures(block, api, device, capsys, request):
    request.getfixturevalue(device)
    spec = importlib.util.spec_from_file_location("unseen_transformers", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([block, "--apis", api]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert len(rows) == 2 and all(r[3] == "OK" and r[1] == api for r in rows), rows
    for name, api, plan, result, err, share, copies, *_ in rows:
        assert int(copies) == 0
        # (78.9-85.5% now: the share fell when attention's matmuls began reading q, k and v
        # through their tables, whose gathered copies were textures too)
        assert (float(share.rstrip("%")) >= 75.0) == (plan == "texture"), (name, api, plan, share)
