"""The console shows a job's progress; TensorFlow's and the toolkit's start-up logging stay in the log file."""

from local.jobs.console import ConsoleFilter

# A training host's output as the toolkit and train.py print it (abridged): "+" shown on the console, "-" not.
OUTPUT = """\
-bash: cannot set terminal process group (-1): Inappropriate ioctl for device
-bash: no job control in this shell
-WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
-I0000 00:00:1796118857.026586   28725 port.cc:153] oneDNN custom operations are on.
-I0000 00:00:1796118857.099233   28725 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use ...
-To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.
-2026-12-01 09:00:00.000000: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.
-2026-12-01 09:54:21,027 sagemaker-training-toolkit INFO     Imported framework sagemaker_tensorflow_container
-2026-12-01 09:54:21,046 sagemaker_tensorflow_container.training INFO     Running distributed training job
-2026-12-01 09:54:21,078 sagemaker-training-toolkit INFO     Installing dependencies from requirements.txt
-Looking in links: /opt/wheels
-Requirement already satisfied: tokenizers==0.23.3 in /venv/lib/python3.11/site-packages (0.23.3)
-Collecting zstandard==0.25.0
-Installing collected packages: zstandard
-Successfully installed zstandard-0.25.0
+ERROR: No matching distribution found for crc32c==2.9.post0
-2026-12-01 09:54:21,957 sagemaker-training-toolkit INFO     Invoking user script
-
-Training Env:
-{
-    "current_host": "algo-1",
-}
-Environment variables:
-SM_HOSTS=["algo-1","algo-2"]
-Invoking script with the following command:
-
-/venv/bin/python -- train.py --checkpoint_every 10
-
-I0000 00:00:1796116649.317464   31282 coordination_service.cc:221] Initializing CoordinationService
-I0000 00:00:1796116649.317890   31282 grpc_server_lib.cc:467] Started server with target: grpc://127.0.0.1:5
-I0000 00:00:1796116649.406996   31947 coordination_service.cc:505] Example stragglers:
-/job:worker/replica:0/task:1
-W0000 00:00:1796116651.748865   32072 tf_record_dataset_op.cc:396] The default buffer size is 262144
+[config] engine=multi_worker workers=2 replicas=2 params=235264
+[train] step=5 loss=7.5425 ppl=1886.60 lr=1.000e-03 tokens_per_sec=2980.1 mfu=0.0070
+[health] step=5 input_wait_pct=1.213 compute_pct=96.12 sync_pct=2.67 step_s=0.5871 grad_norm=1.207
+[valid] step=15 val_loss=7.1248 val_ppl=1242.44
+E0000 00:00:1796116545.652462   28861 base_collective_executor.cc:252] StartAbort UNAVAILABLE: task 1
+Traceback (most recent call last):
+  File "train.py", line 3, in <module>
+ValueError: bad shard
-2026-12-01 09:54:43,982 sagemaker_tensorflow_container.training WARNING  No model artifact is saved
-For details of how to construct your training script see:
-https://sagemaker.readthedocs.io/en/stable/using_tf.html#adapting-your-local-tensorflow-script
+2026-12-01 09:54:44,001 sagemaker-training-toolkit ERROR    Reporting training FAILURE
+2026-12-01 09:54:11,126 INFO training a 2048-token BPE vocabulary on up to 2097152 bytes
"""  # noqa: E501
LINES = [line[1:] + "\n" for line in OUTPUT.splitlines()]


def test_progress_shows_the_jobs_own_lines_and_errors_only():
    console = ConsoleFilter()
    assert "".join(("+" if console.shows(line) else "-") + line for line in LINES) == OUTPUT


def test_all_and_none():
    assert all(ConsoleFilter("all").shows(line) for line in LINES)
    assert not any(ConsoleFilter("none").shows(line) for line in LINES)


def test_a_stopped_host_s_exit_report_is_not_shown_but_its_own_lines_are():
    report = [
        "2026-12-02 06:38:56,134 sagemaker-training-toolkit ERROR    Reporting training FAILURE",
        "2026-12-02 06:38:56,134 sagemaker-training-toolkit ERROR    ExecuteUserScriptError:",
        "ExitCode 143",
        'ErrorMessage ""',
        'Command "/usr/bin/python3 -- train.py --max_steps 250"',
        "2026-12-02 06:38:56,134 sagemaker-training-toolkit ERROR    Encountered exit_code 1",
    ]
    console = ConsoleFilter()
    assert all(console.shows(line) for line in report)  # a failure while running: every line of it
    console.stopping = True
    assert not any(console.shows(line) for line in report)
    assert console.shows("[stopped] step=110 checkpointed 0.74 s after SIGTERM")
    assert console.shows("Traceback (most recent call last):")
