"""Which of a job's output lines the local run's console shows: the job's progress, not its libraries' chatter.

Hidden by what they are: TensorFlow's C++ logging at INFO and WARNING (cpu_feature_guard, oneDNN, gRPC, the
coordination service), the SageMaker training toolkit's INFO/WARNING lines, its dump of the training
environment, pip's report of the requirements it installed, the image entrypoint's `bash -m` finding no
terminal, and blank lines. Errors, tracebacks and every
line the entry points print are shown. Each host's log file keeps every line; ``local.run --verbose``
echoes them all.
"""

from __future__ import annotations

import re
from typing import Literal

Echo = Literal["all", "progress", "none"]

NOISE = re.compile(
    "|".join(
        [
            r"[IW]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w./-]+:\d+\] ",  # absl: I0000 00:00:1796.026586  28725 port.cc:153]
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}: [IW] ",  # TF's own: 2026-12-01 09:00:00.000000: I tensorflow/
            r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
            r"To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$",
            r"/job:\w+/replica:\d+/task:\d+$",  # the task list under a coordination-service line
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} sagemaker[\w.-]* +(INFO|WARNING) ",  # the toolkit's logger
            r"For details of how to construct your training script see:$",  # the toolkit's no-model warning, cont.
            r"https://sagemaker\.readthedocs\.io/\S+$",
            r"(Requirement already satisfied|Looking in (links|indexes)|Processing|Collecting|Installing collected "
            r"packages|Successfully installed):? ",  # pip, installing requirements.txt
            r"bash: (cannot set terminal process group \(-1\)|no job control in this shell)",  # the image's `bash -m`
            r"$",  # blank
        ]
    )
)
# Once a host is being stopped (SIGTERM, as a stop does on AWS), the toolkit reports the exit that follows (143)
# as a failure of the user script: expected, so not shown; the job's own lines, [stopped] included, still are.
STOP_REPORT = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} sagemaker[\w.-]* +ERROR |ExecuteUserScriptError:$|ExitCode 143$"
    r'|ErrorMessage ""$|Command "'
)
DUMP_START = "Training Env:"  # the toolkit's "Invoking user script" message: its environment, then the command
DUMP_COMMAND = "Invoking script with the following command:"


class ConsoleFilter:
    """Decides line by line whether one host's output line is echoed (one filter per host: it tracks the dump)."""

    def __init__(self, echo: Echo = "progress") -> None:
        self.echo = echo
        self.stopping = False  # set when the host is sent SIGTERM
        self._in_dump = False
        self._command_next = False

    def shows(self, line: str) -> bool:
        if self.echo != "progress":
            return self.echo == "all"
        text = line.rstrip("\n")
        if text == DUMP_START:
            self._in_dump, self._command_next = True, False
        if self._in_dump:
            if self._command_next and text.strip():
                self._in_dump = False  # the command: the dump's last line
            elif text == DUMP_COMMAND:
                self._command_next = True
            return False
        return not NOISE.match(text) and not (self.stopping and STOP_REPORT.match(text))
