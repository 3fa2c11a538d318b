import pytest

from relax_vk.core.compat import REQUIRED_FFI, IncompatibleToolchain, check_ffi_version


@pytest.mark.parametrize("version", ["0.1.15", "0.1.15.post1", "0.1.15.post2"])
def test_known_bad_ffi_is_refused_with_the_fix(version):
    with pytest.raises(IncompatibleToolchain, match=f"apache-tvm-ffi=={REQUIRED_FFI}"):
        check_ffi_version(version)


@pytest.mark.parametrize("version", ["0.1.14.post0", "0.1.14.post1"])
def test_pinned_ffi_is_accepted(version):
    check_ffi_version(version)


def test_import_refuses_bad_ffi_in_a_fresh_process(tmp_path):
    """The check runs at ``import relax_vk``: fake a 0.1.15 metadata entry ahead of the real one."""
    import subprocess
    import sys

    dist = tmp_path / "apache_tvm_ffi-0.1.15.post1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: apache-tvm-ffi\nVersion: 0.1.15.post1\n")
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import relax_vk"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "0.1.15.post1" in proc.stderr and f"apache-tvm-ffi=={REQUIRED_FFI}" in proc.stderr
