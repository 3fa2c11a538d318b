"""The NCHW4c conv2d compute against a numpy reference, for every kind of grouping."""

import numpy as np
import pytest
import tvm
from tvm import te

from relax_vk.legalize import conv2d_nchw4c_compute


def reference(x, w, stride, pad, groups):
    n, cin, h, wd = x.shape
    cout, cpg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, cout, oh, ow), "float32")
    opg = cout // groups
    for oc in range(cout):
        g = oc // opg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cpg : (g + 1) * cpg, i * stride : i * stride + kh, j * stride : j * stride + kw]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out


def pack(x):
    n, c, h, w = x.shape
    return x.reshape(n, c // 4, 4, h, w).transpose(0, 1, 3, 4, 2).copy()


def pack_weight(w):
    o, i, kh, kw = w.shape
    return w.reshape(o // 4, 4, i, kh, kw).transpose(0, 2, 3, 4, 1).copy()


@pytest.mark.parametrize(
    "cin, cout, groups, stride, pad",
    [(8, 8, 1, 1, 1), (8, 12, 1, 2, 0), (8, 8, 8, 1, 1), (12, 12, 12, 2, 1), (8, 16, 2, 1, 1), (16, 8, 4, 1, 0)],
)
def test_matches_numpy(cin, cout, groups, stride, pad):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, cin, 7, 7)).astype("float32")
    w = rng.standard_normal((cout, cin // groups, 3, 3)).astype("float32")
    X = te.placeholder((1, cin // 4, 7, 7, 4), name="x")
    W = te.placeholder((cout // 4, cin // groups, 3, 3, 4), name="w")
    Y = conv2d_nchw4c_compute(X, W, [stride, stride], [pad, pad, pad, pad], [1, 1], groups, "float32")
    f = tvm.compile(te.create_prim_func([X, W, Y]), target="llvm")
    y = tvm.runtime.tensor(np.zeros([int(d) for d in Y.shape], "float32"))
    f(tvm.runtime.tensor(pack(x)), tvm.runtime.tensor(pack_weight(w)), y)
    np.testing.assert_allclose(y.numpy(), pack(reference(x, w, stride, pad, groups)), rtol=1e-4, atol=1e-4)


def test_inconsistent_groups_are_rejected():
    X = te.placeholder((1, 2, 7, 7, 4), name="x")
    W = te.placeholder((2, 3, 3, 3, 4), name="w")
    with pytest.raises(ValueError, match="do not form 2 groups of 3 inputs"):
        conv2d_nchw4c_compute(X, W, [1, 1], [0, 0, 0, 0], [1, 1], 2, "float32")
