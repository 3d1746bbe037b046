"""The variant record: one typed model (`model.VariantRecord`) that every writer fills and every
reader loads, its sections (`measured`, `profiled`, `provenance`, `cluster`, `variant`), and how a
failure is told in it (`failure`). No TensorFlow: the parent and the worker share it."""
