import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def pocl():
    """The pocl OpenCL device (a CPU with a real OpenCL compiler and images), as the native library opens it."""
    from relax_vk.runtime import select_device

    device = select_device("opencl", "pocl")
    assert "pocl" in device.row["platform"].lower() or "portable" in device.row["platform"].lower(), device.row
    return device


@pytest.fixture(scope="session")
def lavapipe():
    """Mesa's lavapipe Vulkan adapter (a CPU Vulkan driver), through wgpu-native."""
    from relax_vk.runtime import select_device

    device = select_device("vulkan", "lavapipe")
    assert device.type == "CPU", device.row
    return device


@pytest.fixture
def db_dir(tmp_path, monkeypatch):
    """An empty tuning-database folder searched before the package's ($RELAX_VK_TUNING_DB)."""
    from relax_vk.schedules.tuning import ENV, clear_cache

    monkeypatch.setenv(ENV, str(tmp_path / "db"))
    clear_cache()
    yield tmp_path / "db"
    clear_cache()


@pytest.fixture(autouse=True, scope="session")
def _no_program_binaries():
    """No OpenCL program binaries stored by the suite's sessions ($RELAX_VK_NO_CACHE=1; the tests
    of the caches set their own). On pocl a binary is not a by-product of the build: asking for
    CL_PROGRAM_BINARIES makes pocl compile every kernel of the program once more, for a generic
    work-group size (PP-OCR's classifier: 3.4 s to build, 20 s more for its binary, 17 s at the
    first run), and pocl keeps its own cache of both. With empty caches the binaries were half of
    the suite's time on pocl. Vulkan then uses the drivers' own cache folders."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RELAX_VK_NO_CACHE", "1")
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_pocl_warm_up():
    """No warm-up runs when the suite's sessions load on pocl ($RVK_POCL_WARM_UP=0). A session of a
    run-time-dims program on pocl otherwise runs once at each extreme of its dims, so that a user's
    first run at a new size compiles nothing (tests/runtime/native/test_pocl_warm_up.py checks that,
    with the variable unset, in processes of its own). In the suite those runs were work no test
    looks at: PP-OCR's detector run at 960x960 and its recognizer at width 1280 when the OCR
    example loads them (11 of its 48 s of CPU, caches warm), and pocl's compiles of the wide grids'
    work-group functions with empty caches."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RVK_POCL_WARM_UP", "0")
        yield


def pytest_configure(config):
    from helpers_build import FULL_ENV

    config.addinivalue_line(
        "markers",
        "one_api(argname): a matrix of cases by API whose cases each run on one API, the APIs alternating "
        f"over the cases in order (every case on both with ${FULL_ENV}=1)",
    )
    config.addinivalue_line(
        "markers",
        f"full_only(why): a case `make test` leaves to `make test-full` (${FULL_ENV}=1): a real model's "
        "build and driver compile whose property a smaller case of the suite also checks; `why` names that case",
    )


def pytest_collection_modifyitems(config, items):
    """Leave the cases marked ``full_only`` to ``make test-full``, and keep one API a case for the
    tests marked ``one_api(argname)``: the items of one test
    function are grouped by their parameters other than ``argname`` (the API: ``opencl`` or
    ``vulkan``) and ``device``; the groups, in collection order, take the APIs by the parity of
    their index's bits (the Thue-Morse sequence: a parameter that alternates with the groups,
    texture or buffer say, still meets both APIs, as it would not if the APIs simply alternated). Both APIs
    still run every kind of case, and a case's build and the driver's compile of its kernels (most
    of such a test's time, twice that with empty caches) are paid once. The conformance table and
    ``make test-full`` run the whole matrix."""
    from helpers_build import FULL

    if FULL:
        return
    full_only = {id(item) for item in items if item.get_closest_marker("full_only") is not None}
    if full_only:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in full_only])
        items[:] = [item for item in items if id(item) not in full_only]
    groups: dict = {}
    for item in items:
        marker = item.get_closest_marker("one_api")
        if marker is None or not hasattr(item, "callspec"):
            continue
        argname = marker.args[0]
        params = item.callspec.params
        key = tuple((k, repr(v)) for k, v in sorted(params.items()) if k not in (argname, "device"))
        cases = groups.setdefault((item.module.__name__, item.originalname), {})
        cases.setdefault(key, []).append((str(params[argname]), item))
    drop = set()
    for cases in groups.values():
        for i, entries in enumerate(cases.values()):
            apis = sorted({api for api, _ in entries})
            keep = apis[bin(i).count("1") % len(apis)]  # (Thue-Morse: no other parameter's period picks the API)
            drop.update(id(item) for api, item in entries if api != keep)
    if drop:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in drop])
        items[:] = [item for item in items if id(item) not in drop]
