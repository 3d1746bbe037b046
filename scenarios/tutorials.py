"""The TensorFlow tutorials' workloads, written as the tutorials write them.

The `tutorial_*.toml` scenarios beside this file name these functions ("tutorials:regression"):
a scenario's folder is on every worker's import path, so a module beside it imports as it is.
Each builder compiles its model with the tutorial's own loss, optimizer and metrics, and bench
trains with them (through Keras `fit` and through its custom loop alike). They use `tf.keras`,
which is Keras 3, or tf-keras in a variant with `keras = "tf_keras"`.
"""

import tensorflow as tf


def ones():
    """The distributed-training guide's toy data: the input 1.0 with the target 1.0, 10,000
    times (unbatched: bench batches by the scenario's rule, 10 a step)."""
    inputs = tf.data.Dataset.from_tensors([1.0]).repeat(10000)
    targets = tf.data.Dataset.from_tensors([1.0]).repeat(10000)
    return tf.data.Dataset.zip((inputs, targets))


def regression():
    """One dense unit on one input, mean squared error, plain SGD at 0.2."""
    model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer=tf.keras.optimizers.SGD(learning_rate=0.2))
    return model


def transfer_head(input_shape):
    """The transfer-learning guide's model: a frozen ResNet50 base (weights=None here: nothing
    can be downloaded; the compute is the same), global average pooling and one sigmoid unit for
    two classes, trained with binary crossentropy."""
    base = tf.keras.applications.ResNet50(weights=None, include_top=False,
                                          input_shape=input_shape)
    base.trainable = False
    inputs = tf.keras.Input(shape=input_shape)
    x = base(inputs, training=False)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    outputs = tf.keras.layers.Dense(1, activation="sigmoid")(x)
    model = tf.keras.Model(inputs, outputs)
    model.compile(optimizer=tf.keras.optimizers.Adam(), loss="binary_crossentropy",
                  metrics=["accuracy"])
    return model


def softmax_cnn(input_shape, num_classes):
    """The custom-training tutorial's CNN: one convolution, pooling, a softmax over the classes,
    trained on one-hot labels with categorical crossentropy."""
    model = tf.keras.Sequential([
        tf.keras.Input(shape=input_shape),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(num_classes, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss=tf.keras.losses.CategoricalCrossentropy(),
                  metrics=["accuracy"])
    return model


def softmax_mlp(input_shape, num_classes):
    """The strategy guides' small MLP: 128 ReLU units and a softmax over 10 classes."""
    model = tf.keras.Sequential([
        tf.keras.Input(shape=input_shape),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(num_classes, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss=tf.keras.losses.CategoricalCrossentropy(),
                  metrics=["accuracy"])
    return model
