"""A user's own workload, as bench runs it: `scenario.toml` beside this file names both functions.

`model` builds and compiles a Keras model the way you would for `model.fit`: bench trains it with
this loss, optimizer and metrics through every strategy and API in the scenario (the custom loop
uses the same loss per example, averaged over the global batch, and updates the same metrics).
`customers` is your input pipeline: a `tf.data.Dataset` of single (features, label) examples,
features as a dict; bench batches, shuffles, caches and prefetches it by the scenario's rules.
"""

from pathlib import Path

import tensorflow as tf

CSV = Path(__file__).with_name("customers.csv")
CITIES = 500


def customers(input_context=None, seed=0):
    """Rows of customers.csv as ({age, income, city, visits}, bought). With an input context
    (distribute_datasets_from_function, or one worker of a cluster), each input pipeline reads
    every n-th row."""
    lines = tf.data.TextLineDataset(str(CSV)).skip(1)
    if input_context is not None:
        lines = lines.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)

    def parse(line):
        age, income, city, visits, bought = tf.io.decode_csv(
            line, record_defaults=[0.0, 0.0, 0, 0.0, 0.0])
        features = {"age": tf.reshape(age / 100.0, [1]),
                    "income": tf.reshape(tf.math.log(income) - 10.5, [1]),
                    "city": city,
                    "visits": tf.reshape(visits / 10.0, [1])}
        return features, tf.reshape(bought, [1])

    return lines.map(parse)


def model(input_shape):
    """A city embedding beside the numeric columns, two dense layers, one logit per customer."""
    inputs = {name: tf.keras.Input(shape=shape, name=name,
                                   dtype="int32" if name == "city" else "float32")
              for name, shape in input_shape.items()}
    city = tf.keras.layers.Embedding(CITIES, 8, name="city_embedding")(inputs["city"])
    numeric = [inputs[name] for name in ("age", "income", "visits")]
    x = tf.keras.layers.Concatenate(name="columns")([city, *numeric])
    x = tf.keras.layers.Dense(64, activation="relu", name="hidden")(x)
    logit = tf.keras.layers.Dense(1, name="bought")(x)
    net = tf.keras.Model(inputs, logit)
    net.compile(optimizer=tf.keras.optimizers.AdamW(learning_rate=0.003, weight_decay=1e-4),
                loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                metrics=["accuracy", tf.keras.metrics.AUC(from_logits=True, name="auc")])
    return net
