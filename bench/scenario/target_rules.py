"""What a `[target]` must meet before anything runs: a metric the model computes, a value it can
take, a split to judge on, an evaluation interval inside the budget and at the same examples for
every variant, and labels with something to learn. Each problem is one ScenarioError line
naming the field."""

from __future__ import annotations

import math

from bench.errors import ScenarioError
from bench.scenario.rules import eval_split_problem
from bench.scenario.schema import Scenario, Variant
from bench.scenario.target import TargetConfig, value_problem

# Examples in the training split of the in-memory datasets (synthetic: data.num_examples).
TRAIN_EXAMPLES = {"mnist": 60_000, "fashion_mnist": 60_000}


def budget_examples(target: TargetConfig, train_examples: int | None) -> int | None:
    """The budget in examples seen: max_examples, or max_epochs of the training split (the
    smaller where both are given); None when only epochs are given and the size is unknown."""
    budgets = [target.max_examples] if target.max_examples is not None else []
    if target.max_epochs is not None and train_examples:
        budgets.append(math.ceil(target.max_epochs * train_examples))
    return min(budgets) if budgets else None


def train_examples(scenario: Scenario) -> int | None:
    """How many examples the training split holds, where bench knows before it runs."""
    data = scenario.data
    if data.name == "synthetic":
        return data.num_examples
    return TRAIN_EXAMPLES.get(data.name)


def _metric_problem(scenario: Scenario, metric: str) -> str | None:
    """Why the variants' models do not compute `metric` (None: they do, or only a compiled
    model's builder can tell, which the worker then checks)."""
    if metric == "loss":
        return None
    if metric == "accuracy":
        if scenario.data.label_kind == "regression":
            return ("counts correctly predicted classes; data.labels = \"regression\" has none "
                    "(judge \"loss\" or a regression metric of [train] metrics)")
        return None
    names = [m.name for m in scenario.train.metrics or []]
    if metric in names:
        return None
    own_builder = any(":" in name for name in
                      [scenario.model.name] + [s.model.name for s in scenario.strategies if s.model])
    if scenario.train.metrics is None and own_builder:
        return None  # a compiled model may bring it: the worker checks
    listed = ", ".join(repr(n) for n in ["accuracy", "loss", *names])
    return f"'{metric}' is not computed by the model (it computes {listed})"


def _nothing_to_learn(scenario: Scenario) -> tuple[str, str] | None:
    """(field, why) when the labels the target would be judged on carry nothing to learn."""
    data = scenario.data
    if data.fallback == "synthetic" and data.name != "synthetic":
        return "data.fallback", ("a target would be judged on the synthetic stand-in whenever "
                                 f"'{data.name}' is missing, whose labels say nothing of "
                                 f"'{data.name}': set fallback = \"none\"")
    # bench's synthetic labels are learnable by construction (bench.data.synthetic: examples
    # around one prototype per class, targets a fixed map of the features), given examples
    held = data.num_examples // 5  # bench.data.synthetic.SYNTHETIC_HELD_OUT
    if data.name == "synthetic" and data.label_kind != "regression" and held < data.num_classes:
        return "data.num_examples", (f"{data.num_examples:,} synthetic examples hold "
                                     f"{held:,} held out for {data.num_classes} classes: fewer "
                                     "than one of each, no target can be judged on them")
    return None


def check_target(scenario: Scenario, source: str) -> None:
    """Every rule of the `[target]` table, the first broken one named."""
    target = scenario.target
    if target is None:
        return
    if target.max_examples is None and target.max_epochs is None:
        raise ScenarioError(source, "target.max_examples", "give a budget: max_examples or "
                            "max_epochs")
    if problem := _metric_problem(scenario, target.metric):
        raise ScenarioError(source, "target.metric", problem)
    if problem := value_problem(target.metric, target.value):
        raise ScenarioError(source, "target.value", problem)
    if problem := eval_split_problem(scenario.data, target.eval_split, "target"):
        raise ScenarioError(source, *problem)
    size = train_examples(scenario)
    if target.max_epochs is not None and target.max_examples is None and size is None:
        raise ScenarioError(source, "target.max_epochs", f"data '{scenario.data.name}' is read "
                            "from its source: bench cannot tell an epoch's examples before it "
                            "runs; give max_examples")
    budget = budget_examples(target, size)
    if budget is not None and target.every_examples > budget:
        raise ScenarioError(source, "target.every_examples", f"{target.every_examples:,} is "
                            f"beyond the budget of {budget:,} examples: no evaluation would run")
    if problem := _nothing_to_learn(scenario):
        raise ScenarioError(source, *problem)
    if target.seeds * target.max_seconds >= scenario.measure.timeout_s:
        raise ScenarioError(source, "target.max_seconds", f"{target.seeds} seed(s) × "
                            f"{target.max_seconds:g} s reach measure.timeout_s "
                            f"({scenario.measure.timeout_s:g} s), the variant's whole budget: "
                            "its process would be killed before its seeds end; raise "
                            "measure.timeout_s or lower max_seconds")
    if scenario.fault is not None:
        raise ScenarioError(source, "target", "[fault] variants measure a recovery, not a "
                            "training to a target: use one or the other")


def check_target_batches(variants: list[Variant], source: str) -> None:
    """Every variant is evaluated at the same examples seen: the interval is a whole number of
    each one's steps."""
    for v in variants:
        target = v.target
        if target is not None and target.every_examples % v.global_batch:
            step = math.lcm(*(w.global_batch for w in variants))
            nearest = max(step, round(target.every_examples / step) * step)
            raise ScenarioError(source, "target.every_examples", f"{target.every_examples:,} is "
                                f"not a multiple of the global batch {v.global_batch} of {v.id}:"
                                " every variant must be evaluated at the same examples seen "
                                f"(e.g. {nearest:,})")
