"""The names of the metrics every run logs, declared once: the training loops fill them (sift_bench.recorder's
`EvalPoint` and `TrainResult` have a field of each name), tracking logs them, the report reads them. No torch and
no MLflow here, so the report can import it."""

# Logged at every evaluation, at step 0, 1, 2, ...: the fields of an EvalPoint.
EVAL_METRICS = ("train_loss", "val_accuracy", "test_accuracy", "pct_accepted", "epoch", "train_time_s",
                "samples_seen", "samples_trained", "lr_multiplier")
# Logged once at the end, at the last evaluation's step, so each metric's latest value is the run's final figure:
# the fields of a TrainResult (cost_usd is the harness's: train time at the configured price).
FINAL_METRICS = ("val_accuracy", "test_accuracy", "train_time_s", "sift_time_s", "eval_time_s", "cost_usd",
                 "pct_accepted", "samples_seen", "samples_trained", "time_to_target_s", "other_cpu_s",
                 "work_trained", "other_cpu_fraction",
                 # Under DDP: sums over the ranks (steps: each rank's batches, the same on every rank).
                 "samples_left_over", "sift_sync_time_s", "steps",
                 # What the scoring passes scored (this rank's): with sift_time_s, the cost of a scoring forward.
                 "samples_scored")
