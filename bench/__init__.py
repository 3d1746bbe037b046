"""bench: a benchmarking and profiling harness for TensorFlow distribution strategies."""

__version__ = "0.1.0"
