"""The tuning database: the measured best schedule per (device, API, memory kind, workload).

Records are measured on real devices by ``relax-vk tune`` (candidate kernels built here, timed on
the device with relax_vk's own runtime, each checked against the CPU reference before it counts;
see :mod:`relax_vk.tools.tune`). The database ships in the package, one JSON file per device under
``relax_vk/schedules/tuning_db/``::

    {"format": "relax_vk.tuning", "version": 1, "device": "nvidia-h100-80gb-hbm3",
     "records": [{"api": "opencl", "memory": "texture", "workload": "conv_n1_oc64_h56_w56_ic64_k3x3",
                  "config": {"px": 4, "oc": 2, "threads": 64}, "ms": 0.021, "gflops": 1234.5,
                  "default_ms": 0.034, "candidates": 12}]}

An optional ``"plans"`` list holds whole-model measurements of the two uniform plans, which the
memory-kind decision prefers to summed conv times where a model matches (a conv's time depends on
what ran before it, which isolated candidates do not see): ``{"api": "opencl", "model":
"<fingerprint of the model's conv workloads>", "name": "resnet18", "texture_ms": 3.36,
"buffer_ms": 2.84, "evidence": "..."}`` (:meth:`Database.plan`,
:func:`relax_vk.tools.tune.import_plan_timings`).

An optional ``"storage"`` object holds measured facts about the device's memory per API, which
storage planning follows (:func:`storage_policy`): ``{"opencl": {"reuse_buffers": false,
"evidence": "..."}}`` keeps every buffer in its own allocation on that API (images still share);
``"snorm8_images": false`` says the runtime cannot hold snorm8 texels at one byte a channel with
the API on that device (no signed normalized 8-bit images, nor, on OpenCL, signed 8-bit ones that
it reads as integers), so int8 conv weights stay in buffers there (:func:`snorm8_images`).

``memory`` is ``texture`` or ``buffer`` (what the conv reads and writes), ``workload`` the kernel's
:meth:`~relax_vk.schedules.conv2d.Conv2dWorkload.key`. :func:`lookup` is what the conv schedule
asks at build time, for the device the target names (``relax_vk.target.opencl(device_name=...)``,
or the local device given with ``--device``); a workload with no record gets the schedule's
untuned default. ``$RELAX_VK_TUNING_DB`` names a folder searched before the package's (for
databases a user measured).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

FORMAT, VERSION = "relax_vk.tuning", 1
HERE = os.path.join(os.path.dirname(__file__), "tuning_db")


@dataclass
class Record:
    api: str
    memory: str
    workload: str
    config: Dict[str, int]
    ms: float
    gflops: float = 0.0
    default_ms: float = 0.0
    candidates: int = 0


@dataclass
class PlanRecord:
    """Whole-model wall times of a model's texture and buffer plans on one API."""

    api: str
    model: str  # the fingerprint of the model's conv workloads (workloads.model_fingerprint)
    texture_ms: float
    buffer_ms: float
    name: str = ""
    evidence: str = ""


@dataclass
class Database:
    device: str
    records: Dict[Tuple[str, str, str], Record] = field(default_factory=dict)
    storage: Dict[str, dict] = field(default_factory=dict)  # api -> {"reuse_buffers": bool, "snorm8_images": bool, "evidence": str}
    plans: Dict[Tuple[str, str], PlanRecord] = field(default_factory=dict)  # (api, model fingerprint) ->

    def best(self, api: str, memory: str, workload: str) -> Optional[Record]:
        return self.records.get((api, memory, workload))

    def plan(self, api: str, model: str) -> Optional[PlanRecord]:
        """The whole-model measurement of a model (by fingerprint) on an API, if any."""
        return self.plans.get((api, model))

    def add_plan(self, record: PlanRecord) -> None:
        """Keep ``record`` (the latest measurement of a model replaces an earlier one: both plans
        were timed side by side in one run, so its ratio is the one to trust)."""
        self.plans[(record.api, record.model)] = record

    def add(self, record: Record) -> bool:
        """Keep ``record`` if it is the first or the fastest for its key; returns whether it was kept."""
        key = (record.api, record.memory, record.workload)
        old = self.records.get(key)
        if old is None or record.ms < old.ms:
            self.records[key] = record
            return True
        return False

    def to_json(self) -> dict:
        records = [asdict(r) for _, r in sorted(self.records.items())]
        out = {"format": FORMAT, "version": VERSION, "device": self.device, "records": records}
        if self.storage:
            out["storage"] = {api: dict(policy) for api, policy in self.storage.items()}
        if self.plans:
            out["plans"] = [asdict(p) for _, p in sorted(self.plans.items())]
        return out

    def save(self, path: Optional[str] = None) -> str:
        path = path or os.path.join(HERE, f"{self.device}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, indent=1, sort_keys=True)
        os.replace(tmp, path)
        return path

    @staticmethod
    def load(path: str) -> "Database":
        with open(path) as f:
            data = json.load(f)
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError(f"{path}: not a relax_vk tuning database (format {data.get('format')!r}, version {data.get('version')!r})")
        db = Database(data["device"], storage={api: dict(policy) for api, policy in data.get("storage", {}).items()})
        for r in data["records"]:
            db.add(Record(**r))
        for p in data.get("plans", []):
            db.add_plan(PlanRecord(**p))
        return db


ENV = "RELAX_VK_TUNING_DB"  # a folder of databases searched before the package's
_CACHE: Dict[Tuple[str, str], Optional[Database]] = {}


def search_path() -> List[str]:
    """Where databases are looked up, first match wins: ``$RELAX_VK_TUNING_DB``, then the package's."""
    extra = os.environ.get(ENV)
    return ([extra] if extra else []) + [HERE]


def database(device: str) -> Optional[Database]:
    """The database of ``device`` (a slug) on the :func:`search_path`, or None."""
    for folder in search_path():
        path = os.path.join(folder, f"{device}.json")
        key = (device, path)
        if key not in _CACHE:
            _CACHE[key] = Database.load(path) if os.path.exists(path) else None
        if _CACHE[key] is not None:
            return _CACHE[key]
    return None


def clear_cache() -> None:
    """Forget loaded databases (after a database file changed)."""
    _CACHE.clear()


def devices() -> List[str]:
    """The devices with a database on the :func:`search_path`."""
    found = set()
    for folder in search_path():
        if os.path.isdir(folder):
            found.update(f[:-5] for f in os.listdir(folder) if f.endswith(".json"))
    return sorted(found)


def storage_policy(device: Optional[str], api: str) -> dict:
    """What the device's database says about its memory on ``api`` (``{}``: nothing measured;
    ``{"reuse_buffers": False, "evidence": ...}``: do not share buffers there)."""
    db = database(device) if device else None
    return dict(db.storage.get(api, {})) if db is not None else {}


def private_pools(device: Optional[str], api: str) -> tuple:
    """The storage pools that must not share allocations on ``device`` (a target's
    :func:`~relax_vk.core.target.target_device`) with ``api``: ``("buffer",)`` where its database
    measured that shared buffers slow it down (:func:`storage_policy`), else none."""
    return ("buffer",) if storage_policy(device, api).get("reuse_buffers") is False else ()


def snorm8_images(device: Optional[str], api: str) -> bool:
    """Whether int8 conv weights may be held in ``snorm8`` textures on ``device`` with ``api``
    (:mod:`relax_vk.passes.scope.quantized_weight_texels`): yes unless its database says the API
    has no such images there (a device without them that the build did not know of still runs
    them, from float32 texels: the runtime's fallback)."""
    return storage_policy(device, api).get("snorm8_images", True) is not False


def lookup(device: Optional[str], api: str, memory: str, workload: str) -> Optional[Dict[str, int]]:
    """The device's best measured configuration for a workload, or None (use the default)."""
    db = database(device) if device else None
    record = db.best(api, memory, workload) if db is not None else None
    return dict(record.config) if record is not None else None
