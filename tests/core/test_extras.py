"""Every ``require(module, extra)`` in the package names an extra that pyproject.toml defines and
that lists the module's distribution: the message a user gets (``pip install 'relax_vk[EXTRA]'``)
installs what was missing."""

import os
import re
import tomllib

import pytest

from relax_vk.core.extras import MissingExtra, require

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
# import name -> distribution name, where they differ
DISTRIBUTION = {"matplotlib.pyplot": "matplotlib"}


def _requires():
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "relax_vk")):
        for name in files:
            if name.endswith(".py"):
                text = open(os.path.join(folder, name), encoding="utf-8").read()
                found += [(name, m, e) for m, e in re.findall(r'require\("([\w.]+)", "(\w+)"\)', text)]
    return found


def test_every_required_module_is_in_the_extra_it_names():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    found = _requires()
    assert len(found) >= 10 and {"torch", "onnx", "quantize", "notebook"} <= {e for _, _, e in found}
    for where, module, extra in found:
        assert extra in extras, f"{where}: require({module!r}, {extra!r}): pyproject.toml has no extra {extra!r}"
        listed = {re.split(r"[=<>\[ ]", d)[0] for d in extras[extra]}
        assert DISTRIBUTION.get(module, module) in listed, f"{where}: extra {extra!r} does not list {module}"


def test_a_missing_module_names_its_extra():
    with pytest.raises(MissingExtra, match=r"pip install 'relax_vk\[quantize\]'"):
        require("relax_vk_no_such_module", "quantize")
