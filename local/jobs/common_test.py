"""Hosts as processes: started and stopped the way SageMaker starts and stops a job's containers."""

import signal
import sys
import textwrap

import pytest

from infra.plan_step.container import IMAGE_ENTRYPOINT, processing_entrypoint, training_container
from local.jobs import namespaces
from local.jobs.common import Host, container_command, run_hosts

needs_namespaces = pytest.mark.skipif(namespaces.isolation()[0] is None, reason=namespaces.isolation()[1])

# The toolkit's `train` as far as a stop goes: no SIGTERM handler; it runs the training script, relays its output
# (as the real one does, through a pipe) and exits with its status. The script, on SIGTERM, says so, notes it in a
# file and exits 143, as train.py does after its checkpoint: a script whose relay died fails on that line.
TOOLKIT = """
import pathlib, signal, subprocess, sys, time
folder = pathlib.Path(sys.argv[-1] if len(sys.argv) > 1 else ".").resolve()
if sys.argv[1:2] == ["script"]:
    def noted(signum, frame):
        time.sleep(0.5)  # the checkpoint
        print("[stopped]", flush=True)
        (folder / "script").write_text("SIGTERM")
        sys.exit(143)
    signal.signal(signal.SIGTERM, noted)
    (folder / "script-ready").touch()
    time.sleep(60)
script = subprocess.Popen([sys.executable, __file__, "script", str(folder)], stdout=subprocess.PIPE, text=True)
for line in script.stdout:
    print(line, end="", flush=True)
sys.exit(script.wait())
"""
STUBBORN = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
(pathlib.Path(sys.argv[1]) / "stubborn-ready").touch()
time.sleep(60)
"""
FAILING = """
import pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
while not all((folder / f"{name}-ready").exists() for name in ("script", "stubborn")):
    time.sleep(0.02)
sys.exit(3)
"""


def stop_a_job(tmp_path, command: list[str]) -> dict[str, int]:
    """Runs ``command`` (the container's, ``train`` on PATH being TOOLKIT) next to a host that fails once the others
    are up, so the job stops them: SIGTERM, and SIGKILL a second later."""
    (tmp_path / "bin").mkdir()
    train = tmp_path / "bin" / "train"
    train.write_text(f"#!{sys.executable}\n{textwrap.dedent(TOOLKIT)}")
    train.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    hosts = [Host("algo-1", command, env, tmp_path)]
    for name, source in (("failing", FAILING), ("stubborn", STUBBORN)):
        script = tmp_path / f"{name}.py"
        script.write_text(textwrap.dedent(source))
        hosts.append(Host(name, [sys.executable, str(script), str(tmp_path)], env, tmp_path))
    return run_hosts(hosts, tmp_path / "logs", echo="none", grace_seconds=1.0)


@needs_namespaces
def test_the_init_passes_a_stop_on_to_the_training_script_and_exits_with_its_status(tmp_path):
    container = training_container(image_forwards_signals=False)
    codes = stop_a_job(tmp_path, container_command(container["ContainerEntrypoint"], container["ContainerArguments"]))
    assert codes == {"algo-1": 143, "failing": 3, "stubborn": -signal.SIGKILL}
    assert (tmp_path / "script").read_text() == "SIGTERM"


@needs_namespaces
def test_without_the_init_the_toolkit_is_pid_1_and_the_stop_is_lost(tmp_path):
    codes = stop_a_job(tmp_path, container_command(IMAGE_ENTRYPOINT, ["train"]))  # the image as SageMaker starts it
    assert codes["algo-1"] == -signal.SIGKILL
    assert not (tmp_path / "script").exists()


@needs_namespaces
def test_a_processing_container_gets_the_same_init_which_signals_a_lone_command_itself(tmp_path):
    command = processing_entrypoint(["train", "script"])  # the script alone, as preprocess.py is
    codes = stop_a_job(tmp_path, container_command(command, [str(tmp_path)]))
    assert codes["algo-1"] == 143 and (tmp_path / "script").read_text() == "SIGTERM"


# A script that, on SIGTERM, leaves its last write to a process of its own and exits at once.
HANDS_OVER = """
import pathlib, signal, subprocess, sys, time
folder = pathlib.Path(sys.argv[1])
def hand_over(signum, frame):
    subprocess.Popen(["sh", "-c", "sleep 0.2; echo written > $0", str(folder / "script")])
    sys.exit(143)
signal.signal(signal.SIGTERM, hand_over)
(folder / "script-ready").touch()
time.sleep(60)
"""


@needs_namespaces
def test_after_a_stop_the_init_waits_for_every_process_before_the_container_ends(tmp_path):
    (tmp_path / "hands_over.py").write_text(HANDS_OVER)
    container = training_container(image_forwards_signals=False)
    command = container_command(container["ContainerEntrypoint"], [sys.executable, str(tmp_path / "hands_over.py")])
    codes = stop_a_job(tmp_path, [*command, str(tmp_path)])  # its PID 1 leaving would kill the writer
    assert codes["algo-1"] == 143 and (tmp_path / "script").read_text() == "written\n"


def test_without_namespaces_a_stop_reaches_the_script_as_the_init_would_pass_it_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(namespaces, "isolation", lambda: (None, "no namespaces for this test"))
    container = training_container(image_forwards_signals=False)
    codes = stop_a_job(tmp_path, container_command(container["ContainerEntrypoint"], container["ContainerArguments"]))
    assert codes == {"algo-1": 143, "failing": 3, "stubborn": -signal.SIGKILL}
    assert (tmp_path / "script").read_text() == "SIGTERM"
    (notice,) = capsys.readouterr().out.splitlines()
    assert notice.startswith("  note: no namespaces for this test, so hosts are plain processes here")
