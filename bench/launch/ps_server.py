"""`python -m bench.launch.ps_server`: a standard tf.distribute.Server for the task TF_CONFIG names.

Parameter-server clusters need plain servers for their `ps` and `worker` tasks: the coordinator
(chief) sends them work. The server runs until its process is killed; that is how TensorFlow's
servers end (they cannot be stopped from Python).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import tensorflow as tf

    from bench.protocol import EventLog
    from bench.training.devices import enable_memory_growth

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if not resolver.task_type:
        print("TF_CONFIG names no task for this process", file=sys.stderr)
        return 2
    # Before the server starts TensorFlow's context: a ps task left to the default would take
    # nearly all of every GPU it sees, starving the workers on the same GPUs.
    gpus = enable_memory_growth()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    EventLog().write("ready")  # a [fault] variant's restarted worker is back (bench.protocol)
    print(f"serving {resolver.task_type}:{resolver.task_id} at {server.target} "
          f"(memory growth on {gpus} GPU(s))", file=sys.stderr, flush=True)
    server.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
