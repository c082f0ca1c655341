import keras
import pytest
import tensorflow as tf

from run.versions import REQUIREMENTS, UntestedVersion, check_versions, pinned


def test_the_tests_run_the_versions_the_job_accepts():
    check_versions()  # this environment's TensorFlow and Keras: what every other test ran
    assert pinned("keras") == keras.__version__ and tf.__version__.startswith("2.21.")


def test_another_keras_or_tensorflow_is_refused_in_one_line_naming_both_versions():
    with pytest.raises(UntestedVersion, match=r"^Keras 3\.16\.0 is not the 3\.15\.1 this package was tested with"):
        check_versions(keras_version="3.16.0")
    with pytest.raises(UntestedVersion, match=r"^TensorFlow 2\.22\.0 is not the 2\.21 this package was tested with"):
        check_versions(tensorflow="2.22.0")
    with pytest.raises(UntestedVersion, match=r"^TensorFlow 2\.2\.1 is not"):
        check_versions(tensorflow="2.2.1")  # a prefix of the string is not the release


def test_the_pin_is_read_from_the_requirements_the_job_installs(tmp_path):
    assert REQUIREMENTS.name == "requirements.txt" and REQUIREMENTS.parent.name == "training"
    (tmp_path / "r.txt").write_text("tokenizers==0.23.3\n")
    with pytest.raises(UntestedVersion, match="pins no keras"):
        pinned("keras", tmp_path / "r.txt")
