"""The annotations a job says its checkpoints by (issue 48), apart from their parser
(checkpoint_options.py) so that modules the parser's imports reach (tide.py) may name them."""

CHECKPOINT_EVERY = "jobdash.io/checkpoint-every"
CHECKPOINT_ON_NOTICE = "jobdash.io/checkpoint-on-notice"
MIN_RUNTIME = "jobdash.io/min-runtime"
CHECKPOINTED_AT = "jobdash.io/checkpointed-at"
