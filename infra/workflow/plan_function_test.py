"""The Plan function's code bundle holds every module its handler imports, and needs nothing but the stdlib."""

import subprocess
import sys

from infra.workflow.plan_function import build_plan_code


def test_bundle_imports_with_the_standard_library_only(tmp_path):
    code = build_plan_code({"job_prefix": "gpt-test"}, tmp_path / "plan")
    probe = (
        "import sys, json; sys.path.insert(0, '.');"
        "import infra.plan_step.plan as p, infra.training_code as training_code, infra.aws_limits as limits;"
        "from infra.plan_step.settings import SETTINGS_FILE;"
        "assert 'aws_cdk' not in sys.modules and 'boto3' not in sys.modules;"
        "print(sorted(training_code.model_presets()), limits.aws_limits().processing_instance_count);"
        "print(json.load(open(SETTINGS_FILE)));"
        "assert 'botocore' not in sys.modules"
    )
    # -S: no site-packages (as in Lambda, apart from boto3, which the handler imports only when called)
    result = subprocess.run([sys.executable, "-S", "-c", probe], cwd=code, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "gpt3-1.3b" in result.stdout and "(1, 100)" in result.stdout  # the limits botocore had at synth
    assert "{'job_prefix': 'gpt-test'}" in result.stdout  # the settings known at synth, beside the code
