"""Correctness checks beside the measurement.

`verdicts` is parent side (no TensorFlow); `suite`, `train_copy`, `parity` and `accuracy` run in
the worker.
"""
