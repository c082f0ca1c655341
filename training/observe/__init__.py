"""Watching a run: what the chief prints and writes besides the training itself.

metrics.py          the [train], [valid] and [health] log lines (SageMaker's metric definitions parse them), MFU
observer.py         per window a [health] line, TensorBoard and the heartbeat; at the end the verdicts and report
step_timer.py       step time split into input wait, compute and synchronisation
device_memory.py    peak device memory
heartbeat.py        a [heartbeat] line every minute, however long a step takes
report.py           the HTML report (inline SVG charts)
tb_log.py           TensorBoard scalars and the profiler window
"""
