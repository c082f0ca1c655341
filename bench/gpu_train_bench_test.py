import sys

from gpu_train_bench import TENSORFLOW_VERSION, tensorflow_gpu_problem


def test_a_tensorflow_without_a_gpu_is_named_with_the_fix():
    problem = tensorflow_gpu_problem()  # this machine's tensorflow-cpu
    assert problem is not None and "sees no GPU" in problem
    assert TENSORFLOW_VERSION == "2.21.0"  # read from requirements-dev.txt
    assert f"tensorflow[and-cuda]=={TENSORFLOW_VERSION}" in problem and sys.executable in problem


def test_a_python_without_tensorflow_is_named_with_the_fix(tmp_path):
    python = tmp_path / "python"  # this Python without its site-packages, as on a machine without TensorFlow
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    problem = tensorflow_gpu_problem(str(python))
    assert problem is not None
    assert "cannot import TensorFlow (ModuleNotFoundError: No module named 'tensorflow')" in problem
