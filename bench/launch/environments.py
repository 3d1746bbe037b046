"""The environment cache: one virtualenv per resolved `[environment]` point, built once, reused.

The cache folder is `bench run --env-cache DIR`, else $BENCH_ENV_CACHE, else
$BENCH_CACHE_DIR/envs, else ~/.cache/bench/envs. Each environment is `<cache>/<name>/` (the
TensorFlow it holds and its key), and `bench-env.json` in it is written last, once everything is
installed: a folder without it is an interrupted or failed build, removed before the next try.
Beside it, `<name>.log` keeps pip's output and `<name>.lock` serialises builds across runs.

A build installs, with the environment's own pip: bench itself, editable, from the checkout the
parent runs (bench's code is the same in every environment; only the packages differ), with the
requested TensorFlow, Keras and packages; then tf-keras without its dependencies (it declares the
full `tensorflow` wheel, which next to tensorflow-cpu would add the 572 MB GPU build).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.child_env import ChildEnv
from bench.errors import one_line
from bench.fingerprint import KEY_PACKAGES, canonical_name, packages_digest
from bench.launch.env_index import Request
from bench.results import write_json

MANIFEST = "bench-env.json"
LAST_USED = "last-used"
CHECKOUT = Path(__file__).resolve().parents[2]  # bench/launch/environments.py -> the checkout


def cache_root(override: Path | None = None) -> Path:
    """Where environments are cached (see the module's docstring for the order)."""
    if override is not None:
        return override.expanduser()
    told = ChildEnv.from_env()
    if told.env_cache:
        return Path(told.env_cache).expanduser()
    if told.cache_dir:
        return Path(told.cache_dir).expanduser() / "envs"
    return Path.home() / ".cache" / "bench" / "envs"


def checkout_problem() -> str | None:
    """Why environments cannot install this bench (it is not run from a source checkout)."""
    pyproject = CHECKOUT / "pyproject.toml"
    try:
        name = tomllib.loads(pyproject.read_text())["project"]["name"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        name = None
    if name != "bench":
        return (f"[environment] installs bench editable from its source checkout, and this bench "
                f"({CHECKOUT}) is not one (no pyproject.toml of project 'bench'): run bench from "
                "a clone (pip install -e .)")
    return None


def _bench_dependencies() -> list[str]:
    try:
        return sorted(tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
                      ["dependencies"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return []


def key(request: Request) -> str:
    """What makes two environments the same: the pinned request, this Python and machine, and
    the checkout installed into it with its dependencies (a changed dependency builds anew)."""
    facts = {"request": [request.tensorflow, request.keras, request.tf_keras,
                         list(request.packages), *([request.jax] if request.jax else [])],
             "python": list(sys.version_info[:2]), "machine": platform.machine(),
             "checkout": str(CHECKOUT), "bench_dependencies": _bench_dependencies()}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]


def env_name(request: Request) -> str:
    """The folder name: the TensorFlow requirement, readable, and the key."""
    tf = request.tensorflow.replace("[and-cuda]", "-cuda")
    for op in ("===", "==", "~=", ">=", "<=", "!=", ">", "<", ",", "*"):
        tf = tf.replace(op, "-")
    return f"{'-'.join(p.strip('.') for p in tf.split('-') if p.strip('.'))}-{key(request)}"


def python_of(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def read_manifest(env_dir: Path) -> dict[str, Any] | None:
    """The manifest of a complete environment, or None (an interrupted or failed build)."""
    try:
        manifest: dict[str, Any] = json.loads((env_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if python_of(env_dir).exists() else None


def cached(root: Path) -> list[tuple[Path, dict[str, Any] | None]]:
    """Every environment folder of the cache, with its manifest (None: incomplete)."""
    if not root.is_dir():
        return []
    return [(d, read_manifest(d)) for d in sorted(root.iterdir()) if d.is_dir()]


def touch(env_dir: Path) -> None:
    """Note that a run used the environment (`bench env list`, `bench env prune --unused-days`)."""
    (env_dir / LAST_USED).touch()


def last_used(env_dir: Path) -> float:
    stamp = env_dir / LAST_USED
    return (stamp if stamp.exists() else env_dir / MANIFEST).stat().st_mtime


def size_bytes(path: Path) -> int:
    """Disk used under `path` (allocated blocks)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue
    return total


@contextmanager
def locked(root: Path, name: str) -> Iterator[None]:
    """One build of an environment at a time, across runs and processes (it waits for runs
    using it too, see `hold`: only an incomplete environment is built, which none uses)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def hold(root: Path, name: str) -> Any:
    """A shared lock on an environment for as long as a run uses it (close the returned file to
    let go): `bench env prune` leaves an environment alone while any run holds one."""
    lock = open(root / f"{name}.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_SH)
    return lock


def in_use(root: Path, name: str) -> bool:
    """Whether a run holds the environment (or is building it)."""
    path = root / f"{name}.lock"
    if not path.exists():
        return False
    with open(path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
    return False


@dataclass
class Built:
    """An environment ready to run, or why it is not (`reason`: pip's error, one line)."""

    label: str
    name: str
    dir: Path
    manifest: dict[str, Any] | None
    reused: bool = False
    seconds: float = 0.0
    reason: str | None = None
    log: Path | None = None

    @property
    def python(self) -> str:
        return str(python_of(self.dir))

    def summary(self) -> dict[str, Any]:
        """What a run's environment.json says of it."""
        return {"label": self.label, "name": self.name, "dir": str(self.dir),
                "status": "ok" if self.reason is None else "failed", "reason": self.reason,
                "reused": self.reused, "build_s": None if self.reused else self.seconds,
                **{k: (self.manifest or {}).get(k) for k in (
                    "key", "resolved", "packages", "digest", "size_mb", "python_version")}}


StepFn = Callable[[str], None]  # a step's or pip's latest line, for a progress display


def build(root: Path, request: Request, label: str, step: StepFn) -> Built:
    """The environment of `request`: reused from the cache, or built now (one pip line at a
    time to `step`). A failed build is returned with pip's last error line, never raised."""
    name = env_name(request)
    env_dir, log = root / name, root / f"{name}.log"
    started = time.monotonic()
    if (manifest := read_manifest(env_dir)) is not None:  # complete: nothing to wait for
        touch(env_dir)
        return Built(label, name, env_dir, manifest, reused=True, log=log)
    with locked(root, name):
        if (manifest := read_manifest(env_dir)) is not None:  # another run just built it
            touch(env_dir)
            return Built(label, name, env_dir, manifest, reused=True, log=log)
        shutil.rmtree(env_dir, ignore_errors=True)
        try:
            manifest = _install(env_dir, request, log, step)
        except _BuildFailed as failed:
            shutil.rmtree(env_dir, ignore_errors=True)
            return Built(label, name, env_dir, None, seconds=time.monotonic() - started,
                         reason=str(failed), log=log)
        manifest["build_s"] = round(time.monotonic() - started, 1)
        write_json(env_dir / MANIFEST, manifest)  # last: the environment is complete
        touch(env_dir)
    return Built(label, name, env_dir, manifest, seconds=time.monotonic() - started, log=log)


class _BuildFailed(Exception):
    pass


def _run(cmd: list[str], log: Path, step: StepFn) -> str:
    """Run one build step, its output appended to `log` and each line shown; its stdout."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise _BuildFailed(f"{cmd[0]}: {one_line(exc)}") from None
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            lines.append(line)
            if line.strip():
                step(line.strip())
        code = proc.wait()
    if code != 0:
        errors = [ln.strip() for ln in lines if ln.strip().startswith("ERROR")]
        tail = errors or [ln.strip() for ln in lines if ln.strip()] or [f"exit code {code}"]
        raise _BuildFailed(tail[-1])
    return "".join(lines)


def _install(env_dir: Path, request: Request, log: Path, step: StepFn) -> dict[str, Any]:
    log.write_text("")
    step("creating the virtualenv")
    _run([sys.executable, "-m", "venv", str(env_dir)], log, step)
    pip = [str(python_of(env_dir)), "-m", "pip", "--disable-pip-version-check", "--no-input"]
    _run([*pip, "install", "--progress-bar", "off", "-e", str(CHECKOUT),
          *request.requirements()], log, step)
    if request.tf_keras:
        _run([*pip, "install", "--progress-bar", "off", "--no-deps", request.tf_keras], log, step)
    step("listing what was installed")
    frozen = _run([*pip, "freeze", "--all"], log, lambda _: None)
    (env_dir / "freeze.txt").write_text(frozen)
    packages = dict(line.split("==", 1) for line in frozen.splitlines() if "==" in line
                    and not line.startswith(("-e", "#")))
    canonical = {canonical_name(n): v for n, v in packages.items()}
    return {"key": key(request), "name": env_dir.name, "request": asdict(request),
            "resolved": request.resolved, "python": str(python_of(env_dir)),
            "python_version": platform.python_version(), "checkout": str(CHECKOUT),
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "packages": {n: canonical[n] for n in KEY_PACKAGES if n in canonical},
            "digest": packages_digest(packages), "distributions": len(packages),
            "size_mb": round(size_bytes(env_dir) / 2**20)}


def matching_cached(root: Path, request: Request) -> Path | None:
    """For a request the index could not resolve (offline): the newest complete environment
    whose pinned versions its specifiers admit, built from this checkout."""
    from packaging.requirements import Requirement

    wanted = [Requirement(r) for r in (request.tensorflow, request.keras, request.tf_keras,
                                       request.jax) if r]
    best: tuple[str, Path] | None = None
    for env_dir, manifest in cached(root):
        if manifest is None or manifest.get("checkout") != str(CHECKOUT) or \
                sorted(manifest["request"].get("packages") or []) != sorted(request.packages):
            continue
        pins = manifest.get("resolved") or {}
        if all(req.name in pins and req.specifier.contains(pins[req.name], prereleases=True)
               for req in wanted) and (best is None or manifest["built_at"] > best[0]):
            best = (manifest["built_at"], env_dir)
    return best[1] if best else None


def prune(root: Path, names: tuple[str, ...] = (), everything: bool = False,
          unused_days: float | None = None) -> tuple[list[tuple[str, int, str]], list[str]]:
    """Remove cached environments: those named (folder names or key prefixes), every one, the
    ones no run used for `unused_days`, and always the incomplete builds and those of checkouts
    that no longer exist. Environments a run holds are kept. Returns ((name, bytes, why)
    removed, names kept because in use)."""
    removed, busy = [], []
    now = time.time()
    for env_dir, manifest in cached(root):
        why = None
        if manifest is None:
            why = "incomplete build"
        elif not Path(manifest.get("checkout") or "/").joinpath("pyproject.toml").exists():
            why = f"its checkout {manifest.get('checkout')} is gone"
        elif everything:
            why = "--all"
        elif any(env_dir.name == n or (manifest.get("key") or "").startswith(n) for n in names):
            why = "named"
        elif unused_days is not None and now - last_used(env_dir) > unused_days * 86400:
            why = f"unused for {(now - last_used(env_dir)) / 86400:.0f} days"
        if why is None:
            continue
        if in_use(root, env_dir.name):
            busy.append(env_dir.name)
            continue
        size = size_bytes(env_dir)
        shutil.rmtree(env_dir, ignore_errors=True)
        (root / f"{env_dir.name}.log").unlink(missing_ok=True)
        removed.append((env_dir.name, size, why))
    for stray in [*root.glob("*.log"), *root.glob("*.lock")] if root.is_dir() else []:
        if not (root / stray.stem).exists() and not in_use(root, stray.stem):
            stray.unlink(missing_ok=True)  # a failed build's log, a removed one's lock
    return removed, busy
