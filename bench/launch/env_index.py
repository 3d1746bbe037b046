"""What the package index offers: an `[environment]` point's specifiers resolved to releases.

`bench run` asks pip which releases exist (`pip index versions`, so the user's own pip
configuration applies: indexes, proxies, certificates), once per distribution, and takes the
newest release each specifier admits. A specifier that admits none is bad input: one line naming
the field, with the releases the index offers. A TensorFlow older than bench supports is refused
with the supported range. When the index cannot be asked (no network), a point stays unresolved:
its specifiers go to pip as written, and a cached environment built for the same request serves.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bench.errors import ScenarioError, one_line
from bench.scenario.environment import (
    OLDEST_TENSORFLOW,
    TENSORFLOW_DISTRIBUTIONS,
    EnvironmentPoint,
    installed_tensorflow,
    too_old,
)

QUERY_TIMEOUT_S = 60.0
SHOWN_RELEASES = 12  # at most this many of the index's releases in an error line
_UNREACHABLE = ("Retrying", "NewConnectionError", "Failed to establish", "Max retries",
                "ConnectionError", "timed out", "Temporary failure in name resolution",
                "No module named pip", "unknown command")


class IndexUnreachable(Exception):
    """The index could not be asked (no network, no pip): versions stay unresolved."""


@dataclass(frozen=True)
class Request:
    """What one environment installs, pinned to exact releases where the index answered."""

    tensorflow: str  # a requirement: "tensorflow-cpu==2.20.0" ("...==2.20.*" unresolved)
    keras: str | None = None
    tf_keras: str | None = None  # installed with --no-deps (it declares the full tensorflow wheel)
    packages: tuple[str, ...] = ()
    jax: str | None = None  # "jax==0.10.2": pip brings the jaxlib that release requires
    resolved: dict[str, str] = field(default_factory=dict)  # distribution -> exact version
    unresolved_because: str | None = None  # why the index was not asked, when it was not

    def requirements(self) -> list[str]:
        """What the main `pip install` gets (tf-keras comes after, without dependencies)."""
        return [self.tensorflow, *([self.keras] if self.keras else []),
                *([self.jax] if self.jax else []), *self.packages]


def index_versions(dist: str) -> list[Version]:
    """Every release of `dist` the index offers this Python and platform (pre-releases too),
    newest first; [] when it has none. IndexUnreachable when pip could not ask."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", dist, "--pre",
           "--disable-pip-version-check", "--retries", "1", "--timeout", "20"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IndexUnreachable(f"pip index versions {dist}: {one_line(exc)}") from None
    text = out.stdout + out.stderr
    if match := re.search(r"^Available versions: (.*)$", text, re.MULTILINE):
        versions = []
        for raw in match[1].split(","):
            try:
                versions.append(Version(raw.strip()))
            except InvalidVersion:
                continue
        return sorted(versions, reverse=True)
    if any(word in text for word in _UNREACHABLE) or "No matching distribution" not in text:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "experimental" not in ln]
        telling = [ln for ln in lines if any(word in ln for word in _UNREACHABLE)] or lines
        why = re.search(r"Failed to establish a new connection: (.*?)\)?\"?\)'?:", telling[0]) \
            if telling else None
        raise IndexUnreachable(f"pip index versions {dist}: " + (
            why[1] if why else telling[0][:300] if telling else f"exit code {out.returncode}"))
    return []


def tensorflow_distribution(point: EnvironmentPoint, gpus: bool) -> str:
    """The TensorFlow requirement's name: the table's, or tensorflow-cpu on a host without GPUs
    and tensorflow[and-cuda] where there are (never the 572 MB GPU wheel onto a CPU machine)."""
    if point.tensorflow_package != "auto":
        return point.tensorflow_package
    return "tensorflow[and-cuda]" if gpus else "tensorflow-cpu"


def _bare(dist: str) -> str:
    return dist.split("[", 1)[0]


def _shown(versions: list[Version], floor: str | None = None) -> str:
    finals = sorted(v for v in versions if not v.is_prerelease
                    and (floor is None or v >= Version(floor)))
    names = [str(v) for v in finals]
    if len(names) > SHOWN_RELEASES:
        names = [names[0], "...", *names[-(SHOWN_RELEASES - 2):]]
    return ", ".join(names) or "none"


def newest(versions: list[Version], spec: str) -> Version | None:
    """The newest release `spec` admits (pre-releases only when it admits no final release, or
    names one itself, as pip does)."""
    chosen = list(SpecifierSet(spec).filter(versions))
    return max(chosen) if chosen else None


def _pick(versions: list[Version], spec: str, dist: str, source: str, field_name: str,
          floor: str | None = None) -> Version:
    found = newest(versions, spec)
    if found is None:
        raise ScenarioError(source, f"environment.{field_name}",
                            f"no release of {dist} matches '{spec.removeprefix('==')}' "
                            f"(available: {_shown(versions, floor)})")
    return found


def resolve(points: list[EnvironmentPoint], source: str, gpus: bool) -> dict[str, Request]:
    """Each point's request by label; ScenarioError (one line naming the field) for a specifier
    no release matches, a TensorFlow older than bench supports, or a tf-keras of another
    TensorFlow. "current" points need no request: they are this interpreter."""
    wanted = [p for p in points if not p.is_current]
    dists = sorted({_bare(tensorflow_distribution(p, gpus)) for p in wanted}
                   | ({"keras"} if any(p.keras for p in wanted) else set())
                   | ({"jax"} if any(p.jax for p in wanted) else set())
                   | ({"tf-keras"} if any(p.tf_keras != "none" for p in wanted) else set()))
    with ThreadPoolExecutor(max_workers=max(1, len(dists))) as pool:
        answers = dict(zip(dists, pool.map(_ask, dists), strict=True))
    return {p.label: _request(p, source, gpus, answers) for p in wanted}


def _ask(dist: str) -> list[Version] | IndexUnreachable:
    try:
        return index_versions(dist)
    except IndexUnreachable as exc:
        return exc


def _request(point: EnvironmentPoint, source: str, gpus: bool,
             answers: dict[str, list[Version] | IndexUnreachable]) -> Request:
    tf_dist = tensorflow_distribution(point, gpus)
    packages = tuple(point.packages)
    offered = answers[_bare(tf_dist)]
    if isinstance(offered, IndexUnreachable):
        tf_keras = None if point.tf_keras in ("auto", "none") else f"tf-keras{point.tf_keras}"
        return Request(f"{tf_dist}{point.tensorflow}",
                       f"keras{point.keras}" if point.keras else None, tf_keras, packages,
                       jax=f"jax{point.jax}" if point.jax else None,
                       unresolved_because=str(offered))
    tf = _pick(offered, point.tensorflow, _bare(tf_dist), source, "tensorflow",
               floor=None if point.tensorflow_package.startswith("tf-nightly") else OLDEST_TENSORFLOW)
    if problem := too_old(str(tf)):
        raise ScenarioError(source, "environment.tensorflow",
                            f"'{point.tensorflow.removeprefix('==')}' resolves to {problem}")
    resolved = {_bare(tf_dist): str(tf)}
    keras, jax = (_pinned(dist, spec, answers, resolved, source)
                  for dist, spec in (("keras", point.keras), ("jax", point.jax)))
    tf_keras = _tf_keras(point, tf, answers.get("tf-keras"), source)
    if tf_keras is not None:
        resolved["tf-keras"] = str(tf_keras)
    return Request(f"{tf_dist}=={tf}", keras,
                   f"tf-keras=={tf_keras}" if tf_keras is not None else None, packages, jax,
                   resolved)


def _pinned(dist: str, spec: str | None, answers: dict[str, list[Version] | IndexUnreachable],
            resolved: dict[str, str], source: str) -> str | None:
    """The requirement for a package the point pins (keras, jax): its newest matching release
    where the index answered (noted in `resolved`), else the specifier as given."""
    if not spec:
        return None
    versions = answers[dist]
    if isinstance(versions, IndexUnreachable):
        return f"{dist}{spec}"
    resolved[dist] = str(_pick(versions, spec, dist, source, dist))
    return f"{dist}=={resolved[dist]}"


def _tf_keras(point: EnvironmentPoint, tf: Version,
              offered: list[Version] | IndexUnreachable | None, source: str) -> Version | None:
    """The tf-keras release for this TensorFlow: "auto" takes the newest of its minor version
    (none where the index has none, e.g. a TensorFlow preview); a given specifier must name one
    of that minor version, the only TensorFlow tf-keras accepts."""
    if point.tf_keras == "none" or offered is None or isinstance(offered, IndexUnreachable):
        return None
    series = f"=={tf.major}.{tf.minor}.*"
    if point.tf_keras == "auto":
        return newest([v for v in offered if not v.is_prerelease], series)
    chosen = _pick(offered, point.tf_keras, "tf-keras", source, "tf_keras")
    if (chosen.major, chosen.minor) != (tf.major, tf.minor):
        raise ScenarioError(source, "environment.tf_keras",
                            f"tf-keras {chosen} goes with TensorFlow {chosen.major}.{chosen.minor} "
                            f"only, and this environment has TensorFlow {tf} (leave tf_keras out "
                            "for the matching release)")
    return chosen


def installed(names: tuple[str, ...] = ("keras", "tf-keras")) -> dict[str, str]:
    """This interpreter's TensorFlow and the named packages, by distribution name (metadata)."""
    found = {}
    for dist in (*TENSORFLOW_DISTRIBUTIONS, *names):
        try:
            found[str(canonicalize_name(dist))] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    if not any(d in found for d in TENSORFLOW_DISTRIBUTIONS):
        installed_tensorflow()  # raises, naming this interpreter
    return found
