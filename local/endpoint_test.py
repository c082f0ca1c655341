"""The local endpoint serves an unpacked model archive through the archive's own hooks, as the container does."""

import json
import tarfile

import pytest

from infra.archives import extract
from local.endpoint import LocalEndpoint, main


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny exported model, packed as SageMaker packs /opt/ml/model and unpacked as CreateModel does."""
    from export.saved_model import export
    from gpt.model import GPT
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("endpoint")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(["def main(argv):\n    return 0\n"] * 20, trainer)
    tokenizer.save(str(root / "tokenizer.json"))
    model = GPT.from_preset("tiny", vocab_size=tokenizer.get_vocab_size(), sequence_length=16, seed=5)
    export(model, root / "export", root / "tokenizer.json")
    with tarfile.open(root / "model.tar.gz", "w:gz") as tar:
        for path in sorted((root / "export").rglob("*")):
            tar.add(path, arcname=path.relative_to(root / "export").as_posix(), recursive=False)
    extract(root / "model.tar.gz", root / "model")
    return root / "model"


@pytest.fixture(scope="module")
def endpoint(model_dir):
    return LocalEndpoint(model_dir)


def test_text_in_text_out_through_the_archives_hooks(endpoint, model_dir):
    assert endpoint.hooks.__file__ == str(model_dir / "code" / "inference.py")
    answer = endpoint.invoke_endpoint(b'{"inputs": "def main(", "parameters": {"max_new_tokens": 6}}')
    assert answer["StatusCode"] == 200 and answer["ContentType"] == "application/json"
    text = json.loads(answer["Body"])[0]["generated_text"]
    assert text.startswith("def main(") and len(text) > len("def main("), f"no new text: {text!r}"
    only_new = endpoint.invoke_endpoint(b'{"inputs": "def main(", "parameters": {"return_full_text": false}}')
    assert json.loads(only_new["Body"])[0]["generated_text"] != ""


def test_bad_requests_are_model_errors_with_the_reason_and_the_server_keeps_serving(endpoint):
    for body, reason in [
        (b"def main(", "400 Bad Request: the body is not JSON"),
        (b'{"prompt": "def main("}', '400 Bad Request: the body must be a JSON object with \\"inputs\\"'),
        (json.dumps({"inputs": "main " * 20}).encode(), "400 Bad Request: the prompt is"),
        (b'{"inputs": "def", "parameters": {"max_new_tokens": 100}}', "max_new_tokens must be an integer from 1 to"),
    ]:
        answer = endpoint.invoke_endpoint(body)
        assert answer["StatusCode"] == 424 and answer["Error"]["Code"] == "ModelError"
        assert answer["OriginalStatusCode"] == 500 and reason in answer["OriginalMessage"]
    assert endpoint.invoke_endpoint(b'{"inputs": "def"}')["StatusCode"] == 200


def test_tf_serving_predict_answers_400_for_what_it_cannot_run(endpoint):
    assert endpoint.predict('{"signature_name": "nope", "inputs": {}}').status_code == 400
    missing = endpoint.predict('{"inputs": {"prompt_ids": [[1]]}}')
    assert missing.status_code == 400 and b"max_new_tokens" in missing.content
    inputs = {"prompt_ids": [[1, 2]], "max_new_tokens": 3, "temperature": 0.0, "top_k": 0, "seed": 0}
    ok = endpoint.predict(json.dumps({"inputs": inputs}))
    assert ok.status_code == 200 and len(json.loads(ok.content)["outputs"][0]) == 3


def test_command_prints_the_answer_and_fails_on_a_model_error(model_dir, capsys):
    assert main([str(model_dir), '{"inputs": "def", "parameters": {"max_new_tokens": 2}}']) == 0
    assert json.loads(capsys.readouterr().out)["StatusCode"] == 200
    assert main([str(model_dir), '{"inputs": 1}']) == 1
    assert "400 Bad Request" in capsys.readouterr().err
