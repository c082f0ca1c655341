"""The container hooks, loaded from an exported model's code/inference.py as the container loads them, around
the exported serving_default signature called in-process (what TF Serving's REST predict does)."""

import importlib.util
import io
import json
from collections import namedtuple
from types import SimpleNamespace

import pytest
import tensorflow as tf
from export.saved_model import export
from gpt.model import GPT

# The fields of the container's tfs_utils.Context.
Context = namedtuple(
    "Context",
    "model_name model_version method rest_uri grpc_port channel custom_attributes request_content_type "
    "accept_header content_length",
)


def context(content_type="application/json"):
    return Context("model", None, None, "http://localhost:8501/v1/models/model:predict", 9000, None, None,
                   content_type, "application/json", 0)  # fmt: skip


@pytest.fixture(scope="module")
def served(dataset_dir, tmp_path_factory):
    """(hooks module, predict(body) -> TF Serving-like response, tokenizer) for a tiny exported model."""
    model = GPT.from_preset("tiny", vocab_size=384, sequence_length=32, seed=3)
    export_dir = tmp_path_factory.mktemp("export") / "model"
    export(model, export_dir, dataset_dir / "tokenizer.json")
    spec = importlib.util.spec_from_file_location("inference", export_dir / "code" / "inference.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    signature = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"]

    def predict(body: str):
        request = json.loads(body)
        assert request["signature_name"] == "serving_default"
        dtypes = {name: spec.dtype for name, spec in signature.structured_input_signature[1].items()}
        inputs = {name: tf.constant(value, dtypes[name]) for name, value in request["inputs"].items()}
        outputs = {name: value.numpy().tolist() for name, value in signature(**inputs).items()}
        # TF Serving's columnar ("inputs") format answers {"outputs": value} for a signature with one output.
        return SimpleNamespace(status_code=200, content=json.dumps({"outputs": outputs["token_ids"]}).encode())

    return hooks, predict, hooks.load()[0]


def invoke(served, request, ctx=None):
    hooks, predict, _ = served
    ctx = ctx or context()
    body = request if isinstance(request, bytes) else json.dumps(request).encode()
    text, content_type = hooks.output_handler(predict(hooks.input_handler(io.BytesIO(body), ctx)), ctx)
    assert content_type == "application/json"
    return json.loads(text)


def continuation(reply: list, prompt: str) -> str:
    """The text generated after ``prompt``; never empty (the prompt alone is no answer)."""
    text = reply[0]["generated_text"]
    assert text.startswith(prompt) and len(text) > len(prompt), f"no new text after {prompt!r}: {text!r}"
    return text[len(prompt) :]


def test_text_in_text_out_greedy_sampled_and_with_client_defaults(served):
    hooks, _, tokenizer = served
    greedy = invoke(served, {"inputs": "def main(", "parameters": {"max_new_tokens": 8}})
    assert isinstance(greedy, list) and continuation(greedy, "def main(")
    assert greedy == invoke(served, {"inputs": "def main(", "parameters": {"max_new_tokens": 8, "do_sample": False}})

    sampling = {"max_new_tokens": 10, "temperature": 1.5, "top_k": 50, "seed": 11}
    one = invoke(served, {"inputs": "import json", "parameters": sampling})
    assert one == invoke(served, {"inputs": "import json", "parameters": sampling})
    only_new = invoke(served, {"inputs": "import json", "parameters": {**sampling, "return_full_text": False}})
    assert continuation(one, "import json") == only_new[0]["generated_text"] != ""

    # What huggingface_hub's InferenceClient.text_generation sends: every parameter, unset ones null/false/empty.
    client = {"max_new_tokens": 4, "temperature": None, "top_p": None, "stop": [], "details": False, "seed": None}
    reply = invoke(served, {"inputs": "x = ", "parameters": client, "stream": False})
    assert continuation(reply, "x = ")
    # An empty prompt starts after <|endoftext|>.
    assert isinstance(invoke(served, {"inputs": ""})[0]["generated_text"], str)

    # The TF Serving body: max_new_tokens defaults to what fits the context (at most 64); greedy unless sampling.
    tfs_body = json.loads(hooks.input_handler(io.BytesIO(b'{"inputs": "def main("}'), context()))
    assert tfs_body["inputs"]["max_new_tokens"] == min(64, 32 - len(tokenizer.encode("def main(").ids))
    assert tfs_body["inputs"]["temperature"] == 0.0 and tfs_body["inputs"]["top_k"] == 0
    for parameters, temperature, top_k in [
        ({"top_k": 5}, 1.0, 5),
        ({"temperature": 0, "top_k": 5}, 0.0, 0),
        ({"do_sample": True}, 1.0, 0),
        ({"do_sample": False, "temperature": 0.7}, 0.0, 0),
    ]:
        body = json.dumps({"inputs": "a", "parameters": parameters}).encode()
        inputs = json.loads(hooks.input_handler(io.BytesIO(body), context()))["inputs"]
        assert (inputs["temperature"], inputs["top_k"]) == (temperature, top_k), parameters


def test_interleaved_requests_keep_their_own_prompts(served):
    hooks, predict, _ = served
    a, b = context(), context()
    body_a = hooks.input_handler(io.BytesIO(b'{"inputs": "class A", "parameters": {"max_new_tokens": 2}}'), a)
    body_b = hooks.input_handler(io.BytesIO(b'{"inputs": "def b", "parameters": {"max_new_tokens": 2}}'), b)
    assert continuation(json.loads(hooks.output_handler(predict(body_b), b)[0]), "def b")
    assert continuation(json.loads(hooks.output_handler(predict(body_a), a)[0]), "class A")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b'{"parameters": {}}', '"inputs"'),
        (b'["def main("]', '"inputs"'),
        (b'{"inputs": ["a", "b"]}', "one string"),
        (b'{"inputs": "a", "parameters": [1]}', '"parameters" must be a JSON object'),
        (b'{"inputs": "a", "stream": true}', "streaming"),
        (json.dumps({"inputs": "x " * 40}).encode(), "at most 31"),
        (b'{"inputs": "a", "parameters": {"max_new_tokens": 0}}', "max_new_tokens must be an integer from 1 to"),
        (b'{"inputs": "a", "parameters": {"max_new_tokens": 32}}', "max_new_tokens must be an integer from 1 to 31"),
        (b'{"inputs": "a", "parameters": {"max_new_tokens": "8"}}', "max_new_tokens"),
        (b'{"inputs": "a", "parameters": {"max_new_tokens": true}}', "max_new_tokens"),
        (b'{"inputs": "a", "parameters": {"temperature": -1}}', "temperature must be a number from 0 to 100"),
        (b'{"inputs": "a", "parameters": {"temperature": NaN}}', "temperature"),
        (b'{"inputs": "a", "parameters": {"temperature": "hot"}}', "temperature"),
        (b'{"inputs": "a", "parameters": {"do_sample": true, "temperature": 0}}', "greater than 0"),
        (b'{"inputs": "a", "parameters": {"do_sample": "yes"}}', "do_sample must be true or false"),
        (b'{"inputs": "a", "parameters": {"top_k": 385}}', "top_k must be an integer from 0 to 384"),
        (b'{"inputs": "a", "parameters": {"seed": -1}}', "seed must be an integer from 0 to 2147483647"),
        (b'{"inputs": "a", "parameters": {"return_full_text": 1}}', "return_full_text"),
        (b'{"inputs": "a", "parameters": {"top_p": 0.9}}', "top_p are not supported"),
        (b'{"inputs": "a", "parameters": {"top_p": 0.0}}', "top_p are not supported"),
        (b'{"inputs": "a", "parameters": {"repetition_penalty": 0}}', "repetition_penalty are not supported"),
        (b'{"inputs": "\\ud800 lone"}', '"inputs" is not valid Unicode (surrogates not allowed at character 0)'),
        (b'{"inputs": "a", "parameters": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "nested too deep"),
        (json.dumps({"inputs": "x" * 6_000_000}).encode(), "the body is 6,000,014 bytes; a prompt this model"),
        (json.dumps({"inputs": "x" * 20_000}).encode(), "the prompt is 20,000 bytes; this model's context is 32"),
    ],
    ids=lambda value: value[:40].decode(errors="replace") if isinstance(value, bytes) else value[:40],
)
def test_bad_requests_are_refused_with_a_reason(served, body, message):
    hooks = served[0]
    with pytest.raises(hooks.BadRequest, match=r"^400 Bad Request: ") as error:
        hooks.input_handler(io.BytesIO(body), context())
    assert message in str(error.value)


def test_other_content_types_and_model_server_errors(served):
    hooks = served[0]
    with pytest.raises(hooks.BadRequest, match="text/csv is not supported"):
        hooks.input_handler(io.BytesIO(b"1,2"), context("text/csv"))
    ctx = context()
    hooks.input_handler(io.BytesIO(b'{"inputs": "a"}'), ctx)
    failed = SimpleNamespace(status_code=400, content=b'{"error": "Input to reshape is a tensor with 0 values"}')
    with pytest.raises(ValueError, match=r"TensorFlow Serving answered 400: .*reshape"):
        hooks.output_handler(failed, ctx)


def test_a_long_prompt_is_refused_before_it_is_tokenized(served, monkeypatch):
    hooks, _, tokenizer = served
    config = hooks.load()[1]

    class Untouchable:
        def encode(self, text):
            raise AssertionError(f"tokenized {len(text):,} characters before checking the length")

    monkeypatch.setattr(hooks, "load", lambda: (Untouchable(), config))
    for prompt in ("x" * (31 * config["longest_token_bytes"] + 1), "\u00e9" * 6_000_000):
        with pytest.raises(hooks.BadRequest, match=r"^400 Bad Request: the (prompt|body) is [\d,]+ bytes"):
            hooks.input_handler(io.BytesIO(json.dumps({"inputs": prompt}).encode()), context())
    monkeypatch.undo()
    most = 31 * config["longest_token_bytes"]  # the bound never refuses a prompt that fits
    assert len(tokenizer.encode("x" * most).ids) > 31
