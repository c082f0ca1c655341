"""local/run_state_machine.mjs evaluates intrinsic functions as Step Functions does (no tasks: Pass states only)."""

from __future__ import annotations

import json
import subprocess

from local.run import NODE, ROOT

CAUSE = json.dumps(
    {"errorMessage": 'bad "value"', "stackTrace": ['  File "x.py", line 149, in main\n    answer = 1\n']}
)


def test_a_cause_passed_through_format_and_json_to_string_keeps_its_escapes(tmp_path):
    definition = {
        "StartAt": "Message",
        "States": {
            "Message": {
                "Type": "Pass",
                "Parameters": {
                    "formatted.$": "States.Format('Execution {} failed. Cause: {}', $$.Execution.Name, $.Cause)",
                    "encoded.$": "States.JsonToString($.detail)",
                },
                "End": True,
            }
        },
    }
    paths = {name: tmp_path / f"{name}.json" for name in ("definition", "input", "context", "result")}
    paths["definition"].write_text(json.dumps(definition))
    paths["input"].write_text(json.dumps({"Cause": CAUSE, "detail": {"text": 'a "quoted"\\path\nline'}}))
    paths["context"].write_text("{}")
    argv = [str(NODE), str(ROOT / "local" / "run_state_machine.mjs")]
    argv += [str(paths[n]) for n in ("definition", "input", "context")] + ["exec-1", str(paths["result"])]
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, timeout=60)
    output = json.loads(paths["result"].read_text())["output"]
    assert output["formatted"] == f"Execution exec-1 failed. Cause: {CAUSE}"
    assert json.loads(output["formatted"].split("Cause: ", 1)[1])["stackTrace"][0].endswith("in main\n    answer = 1\n")
    assert json.loads(output["encoded"]) == {"text": 'a "quoted"\\path\nline'}
