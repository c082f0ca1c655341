"""outputs, upload and generate: the stack's outputs and S3 stubbed (botocore's Stubber), a real model archive."""

from __future__ import annotations

import io
import json
import shutil
import tarfile

from botocore.stub import ANY

from cli.__main__ import main
from local.endpoint_test import model_dir  # noqa: F401  (the fixture: a tiny exported model and its model.tar.gz)

BUCKETS = {"StateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:W", "RawBucket": "gpt-dev-raw-1a2b"}


def test_outputs_lists_the_buckets_as_uris(aws, capsys):
    aws.stack(**BUCKETS)
    assert main(["outputs"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "RawBucket        s3://gpt-dev-raw-1a2b/",
        "StateMachineArn  arn:aws:states:us-east-1:1:stateMachine:W",
    ]


def test_upload_puts_each_corpus_file_under_the_prefix_and_prints_the_input_to_use(aws, tmp_path, capsys):
    (tmp_path / "corpus" / "part").mkdir(parents=True)
    (tmp_path / "corpus" / "a.jsonl.zst").write_bytes(b"x")
    (tmp_path / "corpus" / "part" / "b.txt").write_text("text")
    aws.stack(**BUCKETS)
    for key in ("pile/a.jsonl.zst", "pile/part/b.txt"):
        expected = {"Bucket": "gpt-dev-raw-1a2b", "Key": key, "Body": ANY, "ChecksumAlgorithm": ANY}
        aws.stub("s3").add_response("put_object", {"ETag": '"e"'}, expected)
    assert main(["upload", str(tmp_path / "corpus"), "--prefix", "pile"]) == 0
    out = capsys.readouterr().out
    assert 'Start a run on it with {"corpus": {"s3_uri": "s3://gpt-dev-raw-1a2b/pile/"}}' in out
    aws.assert_done()


def test_upload_refuses_what_preprocessing_cannot_read_naming_the_formats(aws, tmp_path, capsys):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.csv").write_bytes(b"x")
    assert main(["upload", str(tmp_path / "corpus")]) == 1
    err = capsys.readouterr().err
    assert (
        "a.csv: not a corpus file; preprocessing reads .jsonl.zstd, .jsonl.zst, .jsonl.gz, .json.zst, .json.gz, " in err
    )
    assert ".parquet, .jsonl, .txt" in err


def test_generate_from_a_local_model_archive(model_dir, capsys):  # noqa: F811
    archive = model_dir.parent / "model.tar.gz"
    assert main(["generate", "def main(", "--model", str(archive), "--max-new-tokens", "4", "--seed", "1"]) == 0
    assert capsys.readouterr().out.startswith("def main(")
    assert main(["generate", "def", "--model", str(archive), "--max-new-tokens", "100"]) == 1
    refused = "the model refused the request: ModelError (500): 400 Bad Request: parameters.max_new_tokens must be"
    assert refused in capsys.readouterr().err
    assert main(["generate", "def", "--model", str(archive.parent / "none.tar.gz")]) == 1
    assert json.dumps("no such model archive")[1:-1] in capsys.readouterr().err


def archive_with_hooks(folder, path, hooks: str):
    """The model archive of ``folder`` with ``hooks`` as its code/inference.py."""
    with tarfile.open(path, "w:gz") as tar:
        for file in sorted(folder.rglob("*")):
            if file.relative_to(folder).as_posix() != "code/inference.py":
                tar.add(file, arcname=file.relative_to(folder).as_posix(), recursive=False)
        data = hooks.encode()
        info = tarfile.TarInfo("code/inference.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_generate_runs_an_archive_s_own_code_only_when_asked(model_dir, tmp_path, capsys):  # noqa: F811
    marker = tmp_path / "the archive's code ran"
    real = (model_dir / "code" / "inference.py").read_text()
    future = "from __future__ import annotations\n"
    hooks = f"{future}open({str(marker)!r}, 'w').close()\n{real.replace(future, '')}"
    archive = archive_with_hooks(model_dir, tmp_path / "model.tar.gz", hooks)
    argv = ["generate", "def main(", "--model", str(archive), "--max-new-tokens", "2", "--seed", "1"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("def main(") and not marker.exists()
    assert "nothing of" in captured.err and "its weights are read into this checkout's model" in captured.err
    assert main([*argv, "--run-archive-code"]) == 0
    assert marker.exists()
    assert "running" in capsys.readouterr().err


def archive_whose_graph_copies(model_dir, path, secret, copy):  # noqa: F811
    """The model archive of ``model_dir`` with a SavedModel whose serving_default also copies ``secret`` to ``copy``
    (tf.io.read_file, tf.io.write_file): the same weights, a hostile graph."""
    import tensorflow as tf
    from export.received import rebuild
    from export.saved_model import GPTServing
    from gpt.generate import generate

    class Copying(GPTServing):
        @tf.function(input_signature=GPTServing.generate.input_signature)
        def generate(self, prompt_ids, max_new_tokens, temperature, seed, top_k=0):
            with tf.control_dependencies([tf.io.write_file(str(copy), tf.io.read_file(str(secret)))]):
                return {"token_ids": generate(self.model, prompt_ids, max_new_tokens, temperature, seed, top_k)}

    serving = Copying(rebuild(model_dir))
    folder = path.parent / "hostile"
    signatures = {"serving_default": serving.generate, "logits": serving.logits}
    tf.saved_model.save(serving, str(folder / "1"), signatures=signatures)
    with tarfile.open(path, "w:gz") as tar:
        for file in sorted((*folder.rglob("*"), *model_dir.glob("*.json"), *model_dir.glob("code/*.*"))):
            base = folder if file.is_relative_to(folder) else model_dir
            tar.add(file, arcname=file.relative_to(base).as_posix(), recursive=False)
    return path


def test_generate_never_runs_a_received_archive_s_graph_unless_asked(model_dir, tmp_path, capsys):  # noqa: F811
    """Issue 50, item 1: a SavedModel is a program; its weights are data. Without --run-archive-code only the
    weights are read, into this checkout's model."""
    secret, copy = tmp_path / "secret.txt", tmp_path / "copied.txt"
    secret.write_text("the user's private key")
    archive = archive_whose_graph_copies(model_dir, tmp_path / "model.tar.gz", secret, copy)
    argv = ["generate", "def main(", "--model", str(archive), "--max-new-tokens", "3", "--seed", "1"]
    assert main(argv) == 0
    hostile_reply = capsys.readouterr().out
    assert hostile_reply.startswith("def main(")
    assert not copy.exists(), "the archive's graph ran: it copied the file"
    reference = ["generate", "def main(", "--model", str(model_dir.parent / "model.tar.gz"), *argv[4:]]
    assert main(reference) == 0
    assert capsys.readouterr().out == hostile_reply  # its weights, served by this checkout's model
    assert main([*argv, "--run-archive-code"]) == 0
    assert copy.read_text() == "the user's private key"  # as asked, for an archive one trusts


def test_generate_refuses_weights_that_are_not_this_checkout_s_model_in_one_line(model_dir, tmp_path, capsys):  # noqa: F811
    config = json.loads((model_dir / "model_config.json").read_text())
    folder = tmp_path / "changed"
    shutil.copytree(model_dir, folder)
    (folder / "model_config.json").write_text(json.dumps({**config, "d_model": 65_536}))
    with tarfile.open(tmp_path / "model.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname=".")
    assert main(["generate", "def", "--model", str(tmp_path / "model.tar.gz")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: the model archive could not be served: refused: not a model of this checkout: ")
    assert "model_config.json's shape needs 412,412,280,832 bytes of float32 weights; the archive's variables" in err


def test_generate_refuses_an_archive_with_an_unsafe_member_in_one_line(tmp_path, capsys):
    with tarfile.open(tmp_path / "model.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("code/lib/evil")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    assert main(["generate", "def", "--model", str(tmp_path / "model.tar.gz")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: refused: ") and "'code/lib/evil' is a link" in err[-1]
    assert "Traceback" not in "".join(err)


def test_upload_refuses_symbolic_links_rather_than_send_their_targets(aws, tmp_path, capsys):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "secret").write_text("root:x:0:0")
    (tmp_path / "corpus" / "a.jsonl").write_text('{"text": "x"}')
    (tmp_path / "corpus" / "passwd.txt").symlink_to(tmp_path / "secret")
    aws.stack(**BUCKETS)
    assert main(["upload", str(tmp_path / "corpus")]) == 1
    assert "passwd.txt: a symbolic link; links are not followed" in capsys.readouterr().err
    (tmp_path / "link.txt").symlink_to(tmp_path / "secret")
    assert main(["upload", str(tmp_path / "link.txt")]) == 1
    assert "link.txt: a symbolic link" in capsys.readouterr().err


def test_an_empty_prefix_puts_the_files_at_the_bucket_root_not_under_a_slash(aws, tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}')
    aws.stack(**BUCKETS)
    expected = {"Bucket": "gpt-dev-raw-1a2b", "Key": "a.jsonl", "Body": ANY, "ChecksumAlgorithm": ANY}
    aws.stub("s3").add_response("put_object", {"ETag": '"e"'}, expected)
    assert main(["upload", str(tmp_path / "a.jsonl"), "--prefix", ""]) == 0
    assert 's3://gpt-dev-raw-1a2b/"}}' in capsys.readouterr().out
    aws.assert_done()
