import pytest
from tvm import relax

from relax_vk.models import EXAMPLES, build_example, conv_chain


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_build_and_are_well_formed(name):
    relax.analysis.well_formed(build_example(name))


def test_conv_chain_size():
    mod = conv_chain(5)
    n = len(mod["main"].body.blocks[0].bindings)
    assert 15 <= n <= 25


def test_unknown_example():
    with pytest.raises(ValueError, match="built-in examples"):
        build_example("nope")
