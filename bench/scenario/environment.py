"""The `[environment]` table: which TensorFlow, Keras, tf-keras and other packages variants run with.

Its lists are a matrix axis like the others: `tensorflow = ["2.20.*", "2.21.*"]` runs every variant
under both. Each combination is an `EnvironmentPoint`; `bench.launch.environments` resolves it
against the package index, builds one virtualenv per resolved point and starts every process of
the variant with that virtualenv's interpreter. Without the table a variant runs with the
interpreter that runs bench, as it always did.

Pure and offline: validating a scenario checks the specifiers' syntax, never the index (that is
`bench.launch.env_index`, when a run or `bench env build` needs the versions).
"""

from __future__ import annotations

import itertools
import re
import sys
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from bench.scenario.fields import STRICT

# The oldest TensorFlow bench runs (Keras 3 as tf.keras), and the newest it is tested with; newer
# releases and previews run too, as upgrade candidates.
OLDEST_TENSORFLOW = "2.16"
NEWEST_TESTED = "2.21"
SUPPORTED_RANGE = f"{OLDEST_TENSORFLOW} to {NEWEST_TESTED}, newer releases as upgrade candidates"
# `tensorflow = "current"`: the interpreter running bench is that point's environment (asv's
# "existing" environment), nothing is built for it.
CURRENT = "current"
# Which TensorFlow distribution to install: "auto" is tensorflow-cpu on a host without GPUs and
# tensorflow[and-cuda] where nvidia-smi lists GPUs.
TensorflowPackage = Literal["auto", "tensorflow-cpu", "tensorflow", "tensorflow[and-cuda]",
                            "tf-nightly-cpu", "tf-nightly", "tf-nightly[and-cuda]"]
TENSORFLOW_DISTRIBUTIONS = ("tensorflow-cpu", "tensorflow", "tf-nightly-cpu", "tf-nightly",
                            "tensorflow-macos", "tensorflow-intel")
# Words a specifier list may hold besides specifiers; each field says which it takes.
KEYWORDS = (CURRENT, "auto", "none")
_BARE_VERSION = re.compile(r"^\d+(\.\d+)*$")
# What a version specifier is written with. pip's "===" takes any text, but a specifier also
# names the variants' ids and the environment's cache folder, so nothing else gets in.
_SPECIFIER_TEXT = re.compile(r"[A-Za-z0-9.*!=<>~,+ _-]+")
_LABEL_OPERATORS = {"===": "", "==": "", "~=": "", ">=": "ge", "<=": "le", "!=": "ne", ">": "gt",
                    "<": "lt"}


def specifier(text: str) -> str:
    """A pip version specifier from what a scenario writes: "2.20" means the 2.20 series
    ("==2.20.*"), "2.20.1" exactly that release, anything else is taken as pip takes it."""
    text = text.strip()
    if _BARE_VERSION.match(text):
        return f"=={text}.*" if text.count(".") == 1 else f"=={text}"
    if re.match(r"^\d", text):  # "2.20.*"
        return f"=={text}"
    return text


def _specifier_list(value: Any) -> Any:
    # imported here, as in _requirements and installed_tensorflow: a scenario without an
    # [environment] table, and `bench validate` of it, never pays for packaging's parser
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("an empty list: give one version specifier, or a list of them to compare")
    for text in values:
        if not isinstance(text, str):
            raise ValueError(f"a pip version specifier such as \"2.20.*\" (a string); got {text!r}")
        if text in KEYWORDS:
            continue
        if not _SPECIFIER_TEXT.fullmatch(text):
            raise ValueError(f"{text!r} is not a pip version specifier: it holds characters no "
                             "version has (a specifier is letters, digits and . * ! = < > ~ , + "
                             "_ -)")
        try:
            SpecifierSet(specifier(text))
        except InvalidSpecifier:
            raise ValueError(f"'{text}' is not a pip version specifier (e.g. \"2.20.*\", "
                             "\"==2.21.0\", \">=2.20,<2.22\")") from None
    if len(set(values)) != len(values):
        raise ValueError(f"a version is listed twice: {values}")
    return values


def _requirements(value: Any) -> Any:
    from packaging.requirements import InvalidRequirement, Requirement

    for text in value if isinstance(value, list) else []:
        try:
            Requirement(str(text))
        except InvalidRequirement as exc:
            why = str(exc).splitlines()[0]
            raise ValueError(f"'{text}' is not a pip requirement ({why})") from None
    return value


SpecifierAxis = Annotated[list[str], BeforeValidator(_specifier_list)]


class EnvironmentConfig(BaseModel):
    """The scenario's `[environment]` table. `tensorflow`, `keras` and `tf_keras` are pip version
    specifiers, each a matrix axis when a list; `packages` are pip requirements every environment
    gets."""

    model_config = STRICT

    tensorflow: SpecifierAxis = Field(description=(
        "pip version specifiers (\"2.20\" = the 2.20 series, \"2.20.1\" that release), or \"current\" (the "
        "interpreter running bench: nothing is built)."))
    keras: SpecifierAxis | None = Field(None, description=(
        "Keras version specifiers (None: the Keras the TensorFlow release pulls in)."))
    jax: SpecifierAxis | None = Field(None, description=(
        "JAX version specifiers for the JAX backend's variants (jax, with the jaxlib it "
        "requires); None: no JAX in the environment, so its JAX variants are skipped."))
    tf_keras: SpecifierAxis = Field(["auto"], description=(
        "\"auto\": the tf-keras release of the TensorFlow's minor version, where the index has one "
        "(installed without dependencies: tf-keras declares the full `tensorflow` wheel); \"none\": no "
        "tf-keras (tf_keras variants are then skipped with the reason); or a specifier."))
    packages: Annotated[list[str], BeforeValidator(_requirements)] = Field([], description=(
        "pip requirements every environment gets (not an axis)."))
    tensorflow_package: TensorflowPackage = Field("auto", description=(
        "Which TensorFlow distribution: \"auto\" is tensorflow-cpu on a host without GPUs and "
        "tensorflow[and-cuda] where nvidia-smi lists GPUs."))

    @field_validator("tensorflow")
    @classmethod
    def _tensorflow(cls, values: list[str]) -> list[str]:
        for text in values:
            if text in ("auto", "none"):
                raise ValueError(f"'{text}': give a version specifier (e.g. \"2.20.*\"), or "
                                 f"'{CURRENT}' for this interpreter's own TensorFlow")
            if text == CURRENT and (problem := too_old(installed_tensorflow())):
                raise ValueError(f"'{CURRENT}' is this interpreter's {problem}")
        return values

    @field_validator("keras", "jax")
    @classmethod
    def _pinned(cls, values: list[str] | None, info: ValidationInfo) -> list[str] | None:
        example, left_out = {"keras": ("3.15.*", "the Keras the TensorFlow release brings"),
                             "jax": ("0.10.*", "an environment without JAX")}[info.field_name]
        for text in values or []:
            if text in KEYWORDS:
                raise ValueError(f"'{text}': give a version specifier (e.g. \"{example}\"), or "
                                 f"leave {info.field_name} out for {left_out}")
        return values

    @field_validator("tf_keras")
    @classmethod
    def _tf_keras(cls, values: list[str]) -> list[str]:
        if CURRENT in values:
            raise ValueError(f"'{CURRENT}' applies to 'tensorflow' only (this interpreter's "
                             "whole environment)")
        return values

    def points(self) -> list[EnvironmentPoint]:
        """One point per combination of the axes, in file order; labels name every axis given
        as a list or beyond its default, so ids never change with their siblings."""
        points = []
        for tf, keras, jax, tf_keras in itertools.product(
                self.tensorflow, self.keras or [None], self.jax or [None], self.tf_keras):
            current = tf == CURRENT
            parts = [f"tf{installed_tensorflow() if current else short(tf)}"]
            if keras is not None and not current:
                parts.append(f"keras{short(keras)}")
            if jax is not None and not current:
                parts.append(f"jax{short(jax)}")
            if tf_keras not in ("auto", "none") and not current:
                parts.append(f"tfk{short(tf_keras)}")
            elif tf_keras == "none" and not current:
                parts.append("notfk")
            points.append(EnvironmentPoint(
                label="-".join(parts), tensorflow=tf if current else specifier(tf),
                keras=None if keras is None or current else specifier(keras),
                jax=None if jax is None or current else specifier(jax),
                tf_keras=tf_keras if tf_keras in ("auto", "none") else specifier(tf_keras),
                packages=[] if current else list(self.packages),
                tensorflow_package=self.tensorflow_package))
        return points


class EnvironmentPoint(BaseModel):
    """One variant's environment: what the table asks for, and, once `bench run` has resolved
    and built it, the versions it resolved to, its cache key and its interpreter."""

    model_config = STRICT

    label: str  # what variant ids and comparisons call it, e.g. "tf2.20"
    tensorflow: str  # a pip specifier, or "current"
    keras: str | None = None
    jax: str | None = None  # a pip specifier; None: no JAX installed
    tf_keras: str = "auto"
    packages: list[str] = []
    tensorflow_package: TensorflowPackage = "auto"
    resolved: dict[str, str] = {}  # distribution -> version, as requested from pip
    key: str | None = None  # the environment cache's key (None: this interpreter)
    python: str | None = None  # the interpreter every process of the variant runs
    # an upgrade candidate `bench nightly --candidate-env` runs beside the pinned variants: the
    # nightly's store gate leaves it out, the upgrade gate judges it
    candidate: bool = False

    @property
    def is_current(self) -> bool:
        return self.tensorflow == CURRENT


def candidate_point(fields: list[str]) -> EnvironmentPoint:
    """The one environment `--candidate-env FIELD=VALUE ...` describes (fields of an
    [environment] table, one value each; `packages` may repeat). ValueError naming the problem."""
    table: dict[str, Any] = {}
    for item in fields:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not value.strip():
            raise ValueError(f"'{item}': write FIELD=VALUE, e.g. tensorflow=2.22.*")
        if name == "packages":
            table.setdefault("packages", []).append(value.strip())
        elif name in table:
            raise ValueError(f"'{name}' is given twice: the candidate is one environment")
        else:
            table[name] = value.strip()
    try:
        points = EnvironmentConfig.model_validate(table).points()
    except ValidationError as exc:
        error = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
        where = ".".join(str(part) for part in error["loc"][:1]) or "tensorflow"
        why = ("unknown field (fields: " + ", ".join(EnvironmentConfig.model_fields) + ")"
               if error["type"] == "extra_forbidden"
               else str(error["msg"]).removeprefix("Value error, "))
        raise ValueError(f"{where}: {why}") from None
    return points[0].model_copy(update={"candidate": True})


def interpreter(point: EnvironmentPoint | None) -> str:
    """The Python that runs a variant's processes: its environment's, else this one."""
    return point.python if point is not None and point.python else sys.executable


def short(spec: str) -> str:
    """A specifier as an id part: "2.20.*" -> "2.20", ">=2.20,<2.22" -> "ge2.20_lt2.22"."""
    parts = []
    for clause in sorted(specifier(spec).split(",")):
        clause = clause.strip()
        op = next(o for o in (*_LABEL_OPERATORS, "") if clause.startswith(o))
        parts.append(_LABEL_OPERATORS.get(op, "") + clause[len(op):].strip().removesuffix(".*"))
    return "_".join(parts)


def too_old(version: str) -> str | None:
    """Why bench refuses a TensorFlow release (older than it supports), or None."""
    from packaging.version import Version

    if Version(version) < Version(OLDEST_TENSORFLOW):
        return f"TensorFlow {version}, older than bench supports ({SUPPORTED_RANGE})"
    return None


def installed_tensorflow() -> str:
    """The version of the TensorFlow this interpreter has (package metadata: nothing imported)."""
    from importlib import metadata

    for dist in TENSORFLOW_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    raise ValueError(f"'{CURRENT}' names this interpreter's TensorFlow, and it has none "
                     f"installed ({sys.executable})")


def with_environment(variant_id: str, point: EnvironmentPoint | None) -> str:
    """A variant id with its environment's label (unchanged without an environment)."""
    return f"{variant_id}-{point.label}" if point is not None else variant_id
