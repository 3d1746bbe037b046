"""Input data for the worker.

Sources (arrays, TFRecord, tfds), the tf.data pipeline tail, host-side preprocessing.
"""
