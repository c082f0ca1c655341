"""``make run`` refuses a bad stage or input file in one line, before it synthesizes anything."""

import pytest

from local.run import main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--stage", "qa"], "error: invalid configuration: stage: 'qa' is not valid"),
        (["--input", "{missing}"], "error: cannot read "),
        (["--input", "{bad}"], "error: the input is not valid JSON"),
        (["--corpus", "{missing}"], "none.json: no such file or folder"),
        (["--corpus", "{bad}"], "bad.json: not a corpus file; preprocessing reads .jsonl"),
    ],
)
def test_bad_arguments_are_one_line_before_the_synth(tmp_path, capsys, argv, expected):
    (tmp_path / "bad.json").write_text("{not json")
    argv = [
        a.replace("{missing}", str(tmp_path / "none.json")).replace("{bad}", str(tmp_path / "bad.json")) for a in argv
    ]
    assert main([*argv, "--runs", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err
    assert not (tmp_path / "runs").exists()
