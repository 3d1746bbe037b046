"""The Keras losses, optimizers and metrics a scenario can name, with the arguments each takes.

Pure data, so the parent checks `[train] loss / optimizer / metrics` (unknown names with a
did-you-mean, arguments a class does not take, labels a loss cannot fit) without importing Keras.
The tables are Keras 3.15's own registries; `tests/test_keras_names.py` rebuilds them from the
installed Keras and fails when they differ. The worker resolves the same names to the classes of
whichever Keras flavour the variant runs (`bench.training.objectives`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

# name -> (Keras class, the constructor arguments a scenario may give; `reduction`, `name` and
# `dtype` are bench's to set)
LOSSES: dict[str, tuple[str, str]] = {
    "binary_crossentropy": ("BinaryCrossentropy", "from_logits label_smoothing axis"),
    "binary_focal_crossentropy": ("BinaryFocalCrossentropy",
                                  "apply_class_balancing alpha gamma from_logits label_smoothing "
                                  "axis"),
    "categorical_crossentropy": ("CategoricalCrossentropy", "from_logits label_smoothing axis"),
    "categorical_focal_crossentropy": ("CategoricalFocalCrossentropy",
                                       "alpha gamma from_logits label_smoothing axis"),
    "categorical_generalized_cross_entropy": ("CategoricalGeneralizedCrossEntropy", "q"),
    "categorical_hinge": ("CategoricalHinge", ""),
    "circle": ("Circle", "gamma margin remove_diagonal"),
    "cosine_similarity": ("CosineSimilarity", "axis"),
    "ctc": ("CTC", ""),
    "dice": ("Dice", "axis"),
    "hinge": ("Hinge", ""),
    "huber": ("Huber", "delta"),
    "kl_divergence": ("KLDivergence", ""),
    "log_cosh": ("LogCosh", ""),
    "mean_absolute_error": ("MeanAbsoluteError", ""),
    "mean_absolute_percentage_error": ("MeanAbsolutePercentageError", ""),
    "mean_squared_error": ("MeanSquaredError", ""),
    "mean_squared_logarithmic_error": ("MeanSquaredLogarithmicError", ""),
    "poisson": ("Poisson", ""),
    "sparse_categorical_crossentropy": ("SparseCategoricalCrossentropy",
                                        "from_logits ignore_class axis"),
    "squared_hinge": ("SquaredHinge", ""),
    "tversky": ("Tversky", "alpha beta axis"),
}
LOSS_ALIASES = {"bce": "binary_crossentropy", "kld": "kl_divergence", "mae": "mean_absolute_error",
                "mape": "mean_absolute_percentage_error", "mse": "mean_squared_error",
                "msle": "mean_squared_logarithmic_error"}

# Arguments every Keras 3 optimizer takes beside its own.
_OPTIMIZER_COMMON = ("weight_decay clipnorm clipvalue global_clipnorm use_ema ema_momentum "
                     "ema_overwrite_frequency loss_scale_factor gradient_accumulation_steps")
OPTIMIZERS: dict[str, tuple[str, str]] = {
    "adadelta": ("Adadelta", "learning_rate rho epsilon"),
    "adafactor": ("Adafactor", "learning_rate beta_2_decay epsilon_1 epsilon_2 clip_threshold "
                               "relative_step"),
    "adagrad": ("Adagrad", "learning_rate initial_accumulator_value epsilon"),
    "adam": ("Adam", "learning_rate beta_1 beta_2 epsilon amsgrad"),
    "adamax": ("Adamax", "learning_rate beta_1 beta_2 epsilon"),
    "adamw": ("AdamW", "learning_rate beta_1 beta_2 epsilon amsgrad"),
    "ftrl": ("Ftrl", "learning_rate learning_rate_power initial_accumulator_value "
                     "l1_regularization_strength l2_regularization_strength "
                     "l2_shrinkage_regularization_strength beta"),
    "lion": ("Lion", "learning_rate beta_1 beta_2"),
    "muon": ("Muon", "learning_rate adam_beta_1 adam_beta_2 adam_weight_decay epsilon "
                     "exclude_layers exclude_embeddings muon_a muon_b muon_c adam_lr_ratio "
                     "momentum ns_steps nesterov rms_rate"),
    "nadam": ("Nadam", "learning_rate beta_1 beta_2 epsilon"),
    "rmsprop": ("RMSprop", "learning_rate rho momentum epsilon centered"),
    "schedulefreeadamw": ("ScheduleFreeAdamW", "learning_rate beta_1 beta_2 epsilon warmup_steps"),
    "sgd": ("SGD", "learning_rate momentum nesterov"),
}

METRICS: dict[str, tuple[str, str]] = {
    "auc": ("AUC", "num_thresholds curve summation_method thresholds multi_label num_labels "
                   "label_weights from_logits"),
    "binary_accuracy": ("BinaryAccuracy", "threshold"),
    "binary_crossentropy": ("BinaryCrossentropy", "from_logits label_smoothing"),
    "binary_io_u": ("BinaryIoU", "target_class_ids threshold"),
    "categorical_accuracy": ("CategoricalAccuracy", ""),
    "categorical_crossentropy": ("CategoricalCrossentropy", "from_logits label_smoothing axis"),
    "categorical_hinge": ("CategoricalHinge", ""),
    "concordance_correlation": ("ConcordanceCorrelation", "axis"),
    "cosine_similarity": ("CosineSimilarity", "axis"),
    "f1_score": ("F1Score", "average threshold"),
    "f_beta_score": ("FBetaScore", "average beta threshold"),
    "false_negatives": ("FalseNegatives", "thresholds"),
    "false_positives": ("FalsePositives", "thresholds"),
    "hinge": ("Hinge", ""),
    "io_u": ("IoU", "num_classes target_class_ids ignore_class sparse_y_true sparse_y_pred axis"),
    "kl_divergence": ("KLDivergence", ""),
    "log_cosh_error": ("LogCoshError", ""),
    "mean_absolute_error": ("MeanAbsoluteError", ""),
    "mean_absolute_percentage_error": ("MeanAbsolutePercentageError", ""),
    "mean_io_u": ("MeanIoU", "num_classes ignore_class sparse_y_true sparse_y_pred axis"),
    "mean_squared_error": ("MeanSquaredError", ""),
    "mean_squared_logarithmic_error": ("MeanSquaredLogarithmicError", ""),
    "one_hot_io_u": ("OneHotIoU", "num_classes target_class_ids ignore_class sparse_y_pred axis"),
    "one_hot_mean_io_u": ("OneHotMeanIoU", "num_classes ignore_class sparse_y_pred axis"),
    "pearson_correlation": ("PearsonCorrelation", "axis"),
    "poisson": ("Poisson", ""),
    "precision": ("Precision", "thresholds top_k class_id"),
    "precision_at_recall": ("PrecisionAtRecall", "recall num_thresholds class_id"),
    "r2_score": ("R2Score", "class_aggregation num_regressors"),
    "recall": ("Recall", "thresholds top_k class_id"),
    "recall_at_precision": ("RecallAtPrecision", "precision num_thresholds class_id"),
    "root_mean_squared_error": ("RootMeanSquaredError", ""),
    "sensitivity_at_specificity": ("SensitivityAtSpecificity",
                                   "specificity num_thresholds class_id"),
    "sparse_categorical_accuracy": ("SparseCategoricalAccuracy", ""),
    "sparse_categorical_crossentropy": ("SparseCategoricalCrossentropy",
                                        "from_logits ignore_class axis"),
    "sparse_top_k_categorical_accuracy": ("SparseTopKCategoricalAccuracy", "k from_sorted_ids"),
    "specificity_at_sensitivity": ("SpecificityAtSensitivity",
                                   "sensitivity num_thresholds class_id"),
    "squared_hinge": ("SquaredHinge", ""),
    "top_k_categorical_accuracy": ("TopKCategoricalAccuracy", "k"),
    "true_negatives": ("TrueNegatives", "thresholds"),
    "true_positives": ("TruePositives", "thresholds"),
}
METRIC_ALIASES = {"bce": "binary_crossentropy", "mae": "mean_absolute_error",
                  "mape": "mean_absolute_percentage_error", "mse": "mean_squared_error",
                  "msle": "mean_squared_logarithmic_error"}
# Keras' compile picks the class of these from the shapes of the labels and the outputs
# (binary, sparse or categorical), and so does bench's custom loop.
SHAPE_DEPENDENT_METRICS = {"accuracy": "accuracy", "acc": "accuracy",
                           "crossentropy": "crossentropy", "ce": "crossentropy"}

_TABLES = {"loss": (LOSSES, LOSS_ALIASES), "optimizer": (OPTIMIZERS, {}),
           "metric": (METRICS, METRIC_ALIASES)}

# What labels each loss can fit (the rest take any): class ids, one-hot rows, 0/1 targets, or
# real-valued targets.
LABEL_KINDS = ("sparse", "one_hot", "binary", "regression")
_FLOAT_TARGETS = ("regression", "binary", "one_hot")
_LOSS_LABELS: dict[str, tuple[str, ...]] = {
    "sparse_categorical_crossentropy": ("sparse",),
    **dict.fromkeys(("categorical_crossentropy", "categorical_focal_crossentropy",
                     "categorical_hinge"), ("one_hot",)),
    **dict.fromkeys(("binary_crossentropy", "binary_focal_crossentropy", "hinge",
                     "squared_hinge"), ("binary", "one_hot")),
    **dict.fromkeys(("mean_squared_error", "mean_absolute_error",
                     "mean_absolute_percentage_error", "mean_squared_logarithmic_error",
                     "huber", "log_cosh", "poisson", "cosine_similarity"), _FLOAT_TARGETS),
}
# The loss a built-in model trains with when the scenario names none, by label kind; the
# built-in models emit logits.
DEFAULT_LOSS = {"sparse": "sparse_categorical_crossentropy", "one_hot": "categorical_crossentropy",
                "binary": "binary_crossentropy", "regression": "mean_squared_error"}


@dataclass(frozen=True)
class KerasName:
    """A name a scenario gave, resolved: its canonical name, the Keras class and its arguments."""

    kind: str  # "loss", "optimizer" or "metric"
    name: str
    class_name: str
    args: tuple[str, ...]


def lookup(kind: str, name: str) -> KerasName:
    """The Keras object `name` means, or ValueError naming the closest known names."""
    table, aliases = _TABLES[kind]
    canonical = aliases.get(name.lower(), name.lower())
    if canonical in table:
        class_name, args = table[canonical]
        common = _OPTIMIZER_COMMON if kind == "optimizer" else ""
        return KerasName(kind, canonical, class_name, tuple(f"{args} {common}".split()))
    known = sorted([*table, *aliases] + (list(SHAPE_DEPENDENT_METRICS) if kind == "metric" else []))
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(known)})"
    raise ValueError(f"unknown {kind} '{name}'{hint} Or give 'package.module:function'.")


def args_problem(entry: KerasName, given: dict[str, object]) -> str | None:
    """Why `given` are not all arguments of `entry`'s class (None: they are)."""
    for key in given:
        if key not in entry.args:
            close = difflib.get_close_matches(key, entry.args, n=1)
            hint = (f"did you mean '{close[0]}'?" if close else
                    f"it takes {', '.join(entry.args)}" if entry.args else "it takes none")
            return f"{entry.kind} '{entry.name}' ({entry.class_name}) has no argument '{key}'; {hint}"
    return None


def labels_problem(loss: str, labels: str) -> str | None:
    """Why a `labels` kind cannot train with built-in loss `loss` (None: it can)."""
    accepted = _LOSS_LABELS.get(lookup("loss", loss).name)
    if accepted is None or labels in accepted:
        return None
    fitting = sorted(name for name, kinds in _LOSS_LABELS.items() if labels in kinds)
    wanted = " or ".join(f'"{kind}"' for kind in accepted)
    return (f"'{loss}' trains on labels {wanted}, and data.labels is \"{labels}\" (losses for "
            f"it: {', '.join(fitting)})")
