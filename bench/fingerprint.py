"""Environment fingerprint of the parent process, gathered without importing TensorFlow.

TensorFlow's and Keras's versions come from package metadata here; each worker adds what only a
live TensorFlow can tell (devices, the versions it really imported) to its own record.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import entrypoints
from bench.child_env import ChildEnv

_PACKAGES = ("tensorflow", "tensorflow-cpu", "tf-keras", "keras", "numpy", "pandas", "bench")


def _cpuinfo_field(name: str) -> str | None:
    """The first `name : value` of /proc/cpuinfo, or None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":", 1)[0].strip() == name:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _cpuinfo_field("model name") or platform.processor() or platform.machine()


# The CPU flags that set how fast a matmul runs (vector width, bf16 and int8 units). A VM often
# names its CPU by family alone ("AMD EPYC"): CPUs of one name can differ in these.
MATMUL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")


def cpu_flags() -> list[str]:
    """The MATMUL_FLAGS this CPU has (empty where /proc/cpuinfo has no flags)."""
    present = set((_cpuinfo_field("flags") or "").split())
    return [flag for flag in MATMUL_FLAGS if flag in present]


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or a VM slice's share, not the host's;
    all of them where the platform cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_identity() -> str:
    """The CPU as far as its speed goes: model, matmul flags and usable CPUs,
    e.g. "AMD EPYC [avx2 fma] x2"."""
    return f"{cpu_model()} [{' '.join(cpu_flags())}] x{usable_cpus()}"


def machine(env: Mapping[str, Any]) -> dict[str, Any]:
    """A run's machine as far as its speed goes, from its environment.json: CPU model, matmul
    flags, CPU count and GPUs by name; only the fields the run recorded. Not the hostname: a
    pool's identical machines share one baseline, and a VM keeps its name when its CPU changes."""
    found = {k: env[k] for k in ("cpu_model", "cpu_flags", "cpu_count") if env.get(k) is not None}
    if isinstance(env.get("gpus"), list):
        found["gpus"] = sorted(str(gpu.get("name")) for gpu in env["gpus"] if isinstance(gpu, dict))
    return found


def same_machine(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal in every field both recorded (a run written before a field existed matches on the
    rest)."""
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def describe_machine(found: Mapping[str, Any]) -> str:
    """One line for a `machine()`, e.g. "AMD EPYC [avx2 fma] x2" or "... x64 + 8 NVIDIA A100"."""
    text = str(found.get("cpu_model") or "unknown CPU")
    if "cpu_flags" in found:
        text += f" [{' '.join(found['cpu_flags'])}]"
    if "cpu_count" in found:
        text += f" x{found['cpu_count']}"
    for name in sorted(set(found.get("gpus", []))):
        text += f" + {found['gpus'].count(name)} {name}"
    return text


GPU_FIELDS = ("index", "uuid", "name", "memory.total", "driver_version", "compute_cap")
_NO_VALUE = {"", "n/a", "[n/a]", "[not supported]", "[unknown error]"}


def _value(text: str) -> str | None:
    return None if text.lower() in _NO_VALUE else text


def parse_nvidia_smi(text: str, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """GPUs from `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` output.

    Pure so that tests can feed it real hosts' output. Lines that are not a GPU (a driver's error
    text, "No devices were found") are skipped, not guessed at; a name holding commas stays whole.
    """
    found = []
    name_at = fields.index("name")
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        extra = len(parts) - len(fields)
        if extra < 0:
            continue
        parts[name_at:name_at + extra + 1] = [", ".join(parts[name_at:name_at + extra + 1])]
        row = dict(zip(fields, parts, strict=True))
        uuid, memory = _value(row["uuid"]), _value(row["memory.total"]) or ""
        if not row["index"].isdigit() or not (uuid is None or uuid.startswith("GPU-")):
            continue
        cap = _value(row.get("compute_cap", "")) or ""
        found.append({
            "index": int(row["index"]),
            "uuid": uuid,
            "name": _value(row["name"]),
            "memory_mb": int(memory) if memory.isdigit() else None,
            "driver": _value(row["driver_version"]),
            "compute_capability": cap if re.fullmatch(r"\d+\.\d+", cap) else None,
        })
    return found


def gpus(timeout_s: float = 15.0) -> list[dict[str, Any]]:
    """The host's NVIDIA GPUs from nvidia-smi, [] without one (no driver, no nvidia-smi, no GPU).

    Drivers older than 510 reject the `compute_cap` field, so the query is retried without it
    (compute_capability None). No retry after a timeout: a hung driver would only hang twice.
    A worker reads what its launcher already asked (`ChildEnv.host_gpus`) instead: an
    nvidia-smi call while other variants are in their timed windows would disturb them.
    """
    if (known := ChildEnv.from_env().host_gpus) is not None:
        return list(known)
    for fields in (GPU_FIELDS, GPU_FIELDS[:-1]):
        try:
            out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                                  "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return []
        if out.returncode == 0:
            return parse_nvidia_smi(out.stdout, fields)
    return []


def cuda_visible_gpus(host: list[dict[str, Any]], cuda_visible: str | None
                      ) -> list[tuple[str, dict[str, Any]]]:
    """The host's GPUs in the order CUDA numbers them for a process, each with the
    CUDA_VISIBLE_DEVICES entry that names it (its index when the variable is unset).

    CUDA_VISIBLE_DEVICES lists indices or UUID prefixes; CUDA ignores the list from its first
    entry that names no GPU (a MIG id, "-1", a repeat), so that entry and the rest are dropped
    here too ("" and "-1" hide every GPU).
    """
    if cuda_visible is None:
        return [(str(g["index"]), g) for g in sorted(host, key=lambda g: g["index"])]
    order: list[tuple[str, dict[str, Any]]] = []
    for token in (t.strip() for t in cuda_visible.split(",")):
        match = next((g for g in host if (token.isdigit() and g["index"] == int(token))
                      or (token.startswith("GPU-") and (g["uuid"] or "").startswith(token))),
                     None)
        if match is None or any(match is seen for _, seen in order):
            break
        order.append((token, match))
    return order


def merge_gpu_views(host: list[dict[str, Any]], visible: list[tuple[str, dict[str, Any]]],
                    cuda_visible: str | None) -> list[dict[str, Any]]:
    """nvidia-smi's GPUs (fingerprint.gpus()), each with the TensorFlow device it is, if any.

    `visible` is TensorFlow's (physical device name, get_device_details) per GPU. CUDA's order
    is the fastest GPU first, not nvidia-smi's bus order, so a TensorFlow GPU takes the host GPU
    at its CUDA position only when the model names agree, else the first free visible one of its
    model. TensorFlow GPUs nvidia-smi does not list (no nvidia-smi, MIG) keep None host facts.
    """
    order = [gpu for _, gpu in cuda_visible_gpus(host, cuda_visible)]
    taken: dict[int, tuple[str, dict[str, Any]]] = {}
    unmatched = []
    for position, (device, details) in enumerate(visible):
        model = details.get("device_name")
        candidates = order[position:position + 1] + order
        match = next((g for g in candidates if id(g) not in taken
                      and (model is None or g["name"] == model)), None)
        if match is None:
            unmatched.append((device, details))
        else:
            taken[id(match)] = (device, details)

    def cap(details: dict[str, Any]) -> str | None:
        value = details.get("compute_capability")
        return ".".join(str(v) for v in value) if value else None

    merged = []
    for gpu in host:
        device, details = taken.get(id(gpu), (None, {}))
        merged.append({**gpu, "compute_capability": gpu["compute_capability"] or cap(details),
                       "tf_device": device})
    for device, details in unmatched:
        merged.append({"index": None, "uuid": None, "name": details.get("device_name"),
                       "memory_mb": None, "driver": None, "compute_capability": cap(details),
                       "tf_device": device})
    return merged


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


# What a record names of the packages it ran with; the digest covers every installed one.
KEY_PACKAGES = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu", "keras", "tf-keras",
                "numpy", "protobuf", "ml-dtypes", "jax", "jaxlib")


def canonical_name(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503): "Google_Pasta" -> "google-pasta"."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions() -> dict[str, str]:
    """Every distribution this interpreter has, by canonical name (bench itself left out: its
    code is the checkout's, the same in every environment)."""
    found = {canonical_name(d.metadata["Name"] or ""): d.version for d in metadata.distributions()}
    found.pop("bench", None)
    found.pop("", None)
    return dict(sorted(found.items()))


def packages_digest(packages: dict[str, str]) -> str:
    """A short hash of a resolved package set ("name==version" lines, canonical names): two
    environments with equal digests installed the same releases (what `pip freeze` lists)."""
    lines = "".join(sorted(f"{canonical_name(n)}=={v}\n" for n, v in packages.items()
                           if canonical_name(n) != "bench"))
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


def installed_environment(gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """The environment a worker really ran in: its interpreter, the versions of the packages that
    matter, CUDA/cuDNN when its TensorFlow is a CUDA build (`gpu`: the worker's gpu facts), and the
    digest of everything installed."""
    every = installed_distributions()
    found = {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "packages": {name: every[name] for name in KEY_PACKAGES if name in every},
        "digest": packages_digest(every),
        "distributions": len(every),
    }
    if gpu and gpu.get("built_with_cuda"):
        found["cuda"] = gpu.get("cuda_build")
    return found


def git_commit(path: Path) -> str | None:
    """The commit of the checkout holding `path`, with '+dirty' when it has local changes."""
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def environment(scenario_digest: str | None = None) -> dict[str, Any]:
    return {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "gpus": gpus(),
        "packages": package_versions(),
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "scenario_digest": scenario_digest,
    }


def probe_in_subprocess(timeout_s: float = 120.0) -> dict[str, Any]:
    """Probe devices in a child; on failure return the reason instead of raising."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        out = subprocess.run(entrypoints.command(entrypoints.DEVICE_PROBE), capture_output=True,
                             text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"device probe timed out after {timeout_s:g} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"device probe failed: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])
