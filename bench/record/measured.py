"""The record's measurement sections: the timed steps' statistics, throughput, timing, how the
windows were run, the observer effect, the samples and the loss (`bench.worker` fills them)."""

from __future__ import annotations

from bench.record.section import Number, Section, field


class Effective(Section):
    """The replicas and batches that really ran, beside the planned ones in `variant`."""

    replicas: int | None = field("replicas in sync, as the strategy reports them")
    per_replica_batch: int | None = field("examples per replica per step")
    global_batch: int | None = field("examples per step over all replicas")


class StepTime(Section):
    """Statistics of step times, in seconds."""

    n: int | None = field("steps")
    mean: Number | None = field("mean step time")
    median: Number | None = field("median step time")
    stdev: Number | None = field("standard deviation")
    stderr: Number | None = field("standard error of the mean")
    mad: Number | None = field("median absolute deviation")
    p5: Number | None = field("5th percentile")
    p95: Number | None = field("95th percentile")
    min: Number | None = field("fastest step")
    max: Number | None = field("slowest step")


class Throughput(Section):
    """Examples per second of the timed windows, two ways."""

    headline: Number | None = field(
        "THE throughput: examples of the unobserved timed windows ÷ their wall clock "
        "(`measurement.window_s`); a record of schema 1 from before it reads its `median`")
    median: Number | None = field(
        "the typical-step rate: global batch ÷ the median observed step (robust to a stray slow "
        "step, higher than the headline whenever steps vary)")
    mean_rate: Number | None = field("examples ÷ the sum of the observed per-step times")
    spread_pct: Number | None = field("robust coefficient of variation of the step time, in %")
    per_repeat: list[Number] | None = field("examples/s of each timed window, in order")


class ParentTiming(Section):
    """The runner's own time for the variant."""

    analysis_s: Number | None = field("trace analysis and checks in the parent")
    total_s: Number | None = field("the variant's whole time as the runner saw it")


class Timing(Section):
    """Where the worker's time went."""

    import_s: Number | None = field("importing TensorFlow and Keras")
    build_s: Number | None = field("building the strategy, data and model")
    startup_s: Number | None = field("process start to the end of the first step")
    first_step_s: Number | None = field("the first (tracing, compiling) step")
    warmup_s: Number | None = field("all warmup steps")
    warmup_steps: int | None = field("warmup steps")
    timed_steps: int | None = field("timed steps per window")
    steps_per_sample: int | None = field("steps behind each sample (steps_per_execution or a "
                                         "parameter-server block)")
    repeats: int | None = field("timed windows (rounds)")
    phases: dict[str, Number] | None = field("seconds per named phase of the worker")
    harness_s: Number | None = field("CPU seconds of bench's own per-step code (hooks, timer, "
                                     "progress), its waits left out")
    harness_share: Number | None = field("its mean per step as a share of the median step")
    worker_s: Number | None = field("process start to the record written")
    start_s: Number | None = field("`[fault]` attempts: process start to the worker's code")
    spawn_time: Number | None = field("`[fault]` attempts: the parent's clock at the spawn")
    parent: ParentTiming | None = field("the runner's own time for the variant")


class SpeedMode(Section):
    mode: str | None = field("`fast` or `slow`")
    rate: Number | None = field("examples/s over its iterators' windows")
    iterators: int | None = field("input iterators in this mode")
    share: Number | None = field("their share of the iterators")


class Speeds(Section):
    """Examples/s of each fresh input iterator and the modes they fall into."""

    per_iterator: list[Number] | None = field("examples/s over each iterator's windows")
    modes: list[SpeedMode] | None = field("one mode, or a fast and a slow one")
    bimodal: bool | None = field("the iterators ran at two speeds")


class EpochEnd(Section):
    """One short epoch at the variant's finish: its steps on a fresh input iterator, then its
    end, as a loop with a fresh iterator every epoch ends each epoch."""

    steps: int | None = field("its steps")
    steps_s: Number | None = field("their time, to the last step's result on the host")
    end_s: Number | None = field("destroying the iterator (at least this, where it had not "
                                 "finished within the cap)")
    finished: bool | None = field("the end finished within the cap")
    waited: bool | None = field("the end took 0.1 s or more: it waited for tf.data's autotune "
                                "thread")


class FirstPass(Section):
    """A cached pipeline's first pass against the timed steps: tf.data's cache fills while the
    first pass over the training set runs its map work, which later passes skip. bench's
    pipeline normalises in blocks, which leaves that pass within a few percent of the cached
    passes' speed (measurements.md#first-pass); the figures place a short plan's headline."""

    train_examples: int | None = field("examples in one pass over the training set")
    pass_steps: int | None = field("steps of the global batch in that pass")
    timed_steps_inside: int | None = field(
        "unobserved (headline) steps that ran inside the first pass")
    timed_steps: int | None = field("unobserved steps in all")


class Measurement(Section):
    """How the timed windows were run."""

    interleaved: bool | None = field("the windows were interleaved with other variants'")
    settle_steps: int | None = field(
        "untimed steps after each release at the gate, as run: [measure] settle_steps, or more "
        "to last settle_s (the A/A pair: as the first of the two sized them)")
    settling_s: Number | None = field("their time")
    window_steps: int | None = field(
        "steps per unobserved window as run: [measure] steps, or more to last min_window_s "
        "(the A/A pair: as the first of the two sized them)")
    observed_window_steps: int | None = field(
        "steps per observed window: [measure] steps (absent: as many as `window_steps`)")
    gate_wait_s: Number | None = field("time waiting at the gate")
    gate_wait_by_segment: dict[str, Number] | None = field("that time per segment")
    window_s: list[Number] | None = field(
        "wall clock of each window the headline counts: the unobserved windows (a `[fault]` "
        "attempt: its one window of steps timed one by one)")
    observed_window_s: list[Number] | None = field(
        "wall clock of each observed window (the per-step samples' windows)")
    trace_base_s: Number | None = field("the untraced window beside the traced one")
    order: list[list[str]] | None = field("each turn's windows in the order they ran")
    speeds: Speeds | None = field("examples/s of each fresh input iterator and their modes")
    window_started_at: list[Number] | None = field("each window's start (Unix time)")
    epoch_ends: list[EpochEnd] | None = field(
        "the short epochs at the finish: what an epoch's end costs a loop that starts a fresh "
        "input iterator every epoch")
    first_pass: FirstPass | None = field(
        "where the timed steps fell against a cached pipeline's first pass (absent: not cached, "
        "or its size unknown)")


class Observer(Section):
    """The observer effect: observed ÷ unobserved windows of the same turns."""

    status: str | None = field("`ok` or `skipped`")
    reason: str | None = field("why it was skipped")
    ratio: Number | None = field("median observed ÷ unobserved time per step of the turns")
    interval: list[Number] | None = field("its 95% interval (of a median, over the turns)")
    confidence: Number | None = field("the interval's confidence")
    turns: int | None = field("turns that ran both windows")
    flagged: bool | None = field("the whole interval lies above the limit (1.02)")


class Samples(Section):
    """Every step time, in seconds."""

    warmup: list[Number] | None = field("the warmup steps")
    timed: list[list[Number]] | None = field("the observed windows' steps, one list per window")
    traced: list[Number] | None = field("the traced window's steps")
    trace_base: list[Number] | None = field("the untraced steps just before the traced ones")


class Loss(Section):
    """The loss of a fixed batch."""

    initial: Number | None = field("before training")
    final: Number | None = field("after training")
