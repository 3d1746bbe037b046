"""The record's sections about what the steps did beyond their time: the profiler trace and its
analysis, FLOPs and MFU, the checkpoint cost, and the `[check]` verdicts."""

from __future__ import annotations

from bench.record.measured import StepTime
from bench.record.section import Number, Section, field

# Tracing that slowed the traced steps by more than this is named beside the breakdown (and,
# for records from before the profiler's interval, flagged the profiler's cost).
TRACE_INFLATION_LIMIT = 1.5


class TopOp(Section):
    name: str | None = field("the op")
    type: str | None = field("its type")
    occurrences: int | None = field("how often it ran in the traced steps")
    self_time_ms_total: Number | None = field("its self time over the traced steps, in ms")
    pct: Number | None = field("its share of the ops' self time, in %")


class CrossCheck(Section):
    """The trace's step time against bench's own median step."""

    trace_mean_step_ms: Number | None = field("the traced steps' mean, in ms")
    trace_median_step_ms: Number | None = field("their median, in ms")
    bench_median_step_ms: Number | None = field("bench's median observed step, in ms")
    ratio: Number | None = field("the trace's mean ÷ bench's median")
    agrees: bool | None = field("the ratio is within the agreement bounds")


class TraceAnalysis(Section):
    """xprof's analysis of a trace (bench.trace.analysis), attached by the runner."""

    status: str | None = field("`ok`, `error` or `warnings`")
    error: str | None = field("why the analysis failed, in one line")
    breakdown_ms: dict[str, Number | None] | None = field(
        "the traced step split into input, compute, collective and other, in ms")
    input_bound_pct: Number | None = field("xprof's share of the step spent waiting for input")
    top_ops: list[TopOp] | None = field("the ops with the most self time")
    warnings: list[str] | None = field("parts of the analysis that failed, one line each")
    logdir: str | None = field("the logdir analysed")
    run: str | None = field("the profiler run analysed (its folder under plugins/profile)")
    files: list[str] | None = field("its XSpace files")
    steps_analyzed: int | None = field("steps in xprof's overview (it drops the first and last)")
    traced_steps: int | None = field("steps in the whole trace")
    step_time_ms: dict[str, Number | None] | None = field(
        "the analysed steps' mean, median, stdev, min and max, in ms")
    input_conclusion: str | None = field("xprof's conclusion on the input")
    input_recommendation: str | None = field("xprof's next step for the input")
    top_ops_side: str | None = field("`host` or `device`: the side `top_ops` lists")
    tf_data_self_time_ms_total: Number | None = field("tf.data ops' self time over the trace")
    peak_memory_mb: Number | None = field("the largest allocator's peak memory in use, MiB")
    peak_memory_mb_by_allocator: dict[str, Number] | None = field("each allocator's peak")
    peak_memory_unavailable: str | None = field("why no peak memory was found")
    cross_check: CrossCheck | None = field("the trace's step time against bench's")
    method: str | None = field("how each figure was computed")


class Trace(Section):
    """The profiler trace of the traced window."""

    status: str | None = field("`captured`, or `off` with the reason")
    reason: str | None = field("why there is no trace")
    error: str | None = field("why capturing it failed")
    dir: str | None = field("its TensorBoard logdir")
    steps: int | None = field("traced steps")
    step_time: StepTime | None = field("the traced steps' statistics")
    overhead_ratio: Number | None = field("traced ÷ untraced time per step, side by side")
    overhead_interval: list[Number] | None = field("its 95% interval (of a median, over the steps)")
    overhead_flagged: bool | None = field(
        "the whole interval lies above the limit (schema 1, from before the interval: the ratio "
        "is over 1.5)")
    untraced_median_s: Number | None = field("the untraced steps' median")
    start_s: Number | None = field("starting the profiler")
    stop_s: Number | None = field("stopping it and writing the trace")
    analysis: TraceAnalysis | None = field("xprof's analysis, attached by the runner")


class Peak(Section):
    """The measured matmul peak of one device (bench.utilization.peak)."""

    flops_per_s: Number | None = field("the best FLOP/s measured")
    samples: list[Number] | None = field("each measurement's")
    device: str | None = field("the device measured")
    model: str | None = field("its model: the GPU's name, or the CPU's name, matmul flags and usable CPUs")
    dtype: str | None = field("the compute dtype")
    method: str | None = field("how it was measured")
    measured_at: Number | None = field("when (Unix time)")
    key: str | None = field("its key in the cache")
    cache: str | None = field("the cache file it was read from or written to")


class Utilization(Section):
    """FLOPs per step and the model FLOPs utilisation (an extra figure: reported, never fatal)."""

    status: str | None = field("`ok`, `skipped` or `failed`")
    reason: str | None = field("why it was skipped")
    error: str | None = field("why it failed")
    flops_per_step: Number | None = field("FLOPs of one training step")
    flops_source: str | None = field("how they were counted")
    achieved_flops_per_s: Number | None = field("FLOPs per step ÷ the median step")
    peak_flops_per_s: Number | None = field("the measured matmul peak of the devices used")
    peak_devices: int | None = field("devices the peak counts")
    peak: Peak | None = field("the peak's measurement")
    peak_measured_here: list[Number] | None = field(
        "[start, end] (Unix time) of the measurement this variant added to the peak, taken "
        "while it held the machine alone; none when the cached peak was settled")
    mfu: Number | None = field("achieved ÷ peak FLOP/s")

    @property
    def above_peak(self) -> bool:
        """The step ran faster than the measured peak: that peak read low (measured in someone
        else's burst of load, or by a kernel slower than the step's), so this MFU is not one."""
        return self.status == "ok" and self.mfu is not None and self.mfu > 1.0


class SaveTimes(StepTime):
    """A checkpoint save's blocking time, in ms."""


class Restore(Section):
    ms: Number | None = field("restoring the newest save into a fresh model")
    save: str | None = field("the save restored")
    weights_match: bool | None = field("the restore gave back the saved weights")
    max_abs_diff: Number | None = field("the largest weight difference")


class Save(Section):
    """One save of the checkpoint cost's blocks."""

    step: int | None = field("the block's step it saved at")
    ms: Number | None = field("its blocking time")
    bytes: int | None = field("what it wrote (the chief's; null on the other workers)")


class Checkpoint(Section):
    """The checkpoint cost (`measure.checkpoint`), from alternating blocks saving and not."""

    status: str | None = field("`ok`, `skipped` or `failed`")
    reason: str | None = field("why it was skipped")
    error: str | None = field("why it failed")
    api: str | None = field("what saved: CheckpointManager, ModelCheckpoint, ...")
    every: int | None = field("steps between saves")
    keep: int | None = field("the newest saves kept")
    dir: str | None = field("where it saved")
    chief: bool | None = field("this task wrote the saves (the others write temporary ones)")
    block_steps: int | None = field("steps per block")
    pattern: list[str] | None = field("each block, `on` (saving) or `off`, in order")
    on_s: list[Number] | None = field("the saving blocks' times")
    off_s: list[Number] | None = field("the other blocks' times")
    throughput_on: Number | None = field("examples/s of the median saving block")
    throughput_off: Number | None = field("examples/s of the median block not saving")
    throughput_ratio: Number | None = field("examples/s saving ÷ not saving")
    blocked_share: Number | None = field("the saving blocks' time spent waiting for saves")
    saves: list[Save] | None = field("every save")
    save_count: int | None = field("saves")
    expected_saves: int | None = field("the saves the blocks should have made")
    save_ms: SaveTimes | None = field("each save's blocking time")
    size_bytes: Number | None = field("a save's median size on disk")
    kept: list[str] | None = field("the saves left in `dir`, oldest first")
    restore: Restore | None = field("one restore into a fresh model")
    notes: list[str] | None = field("what else to know about the figures")


class CheckVerdict(Section):
    """A `[check]` verdict: the worker measures, the runner judges."""

    status: str | None = field("ok / diverged / below / baseline / no-baseline / measured / "
                               "skipped / failed")
    reason: str | None = field("why there is no verdict")
    error: str | None = field("why the check failed")
    steps: int | None = field("training steps of the check's copy")
    batch: int | None = field("its global batch")
    learning_rate: Number | None = field("its learning rate")


class LossParity(CheckVerdict):
    loss: Number | None = field("the copy's loss on a fixed batch after its steps")
    baseline: str | None = field("the baseline variant it was judged against")
    backend: str | None = field("the Keras backend it trained on (tensorflow or jax)")
    baseline_backend: str | None = field("the baseline's Keras backend")
    baseline_loss: Number | None = field("the baseline's loss")
    relative_difference: Number | None = field("|loss - baseline's| ÷ baseline's")
    tolerance: Number | None = field("the largest difference that holds")


class Accuracy(CheckVerdict):
    accuracy: Number | None = field("accuracy on the held-out split")
    min: Number | None = field("the bound it must reach")
    eval_split: str | None = field("the split evaluated")
    eval_examples: int | None = field("examples evaluated")
    eval_source: str | None = field("the data evaluated")
    eval_fallback_reason: str | None = field("why synthetic data replaced it")


class Checks(Section):
    """The verdicts of `[check]`."""

    loss_parity: LossParity | None = field("loss parity with the single-device baseline")
    accuracy: Accuracy | None = field("accuracy on a held-out split")
