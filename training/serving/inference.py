"""Pre/post-processing hooks of the SageMaker TensorFlow Serving container: text in, text out.

``export/saved_model.py`` copies this file to ``code/inference.py`` beside the SavedModel; SageMaker unpacks
model.tar.gz into /opt/ml/model and the container runs, for each POST /invocations,
``input_handler`` -> TensorFlow Serving's REST predict -> ``output_handler``:

    /opt/ml/model/1/                   SavedModel (TF Serving model "model", version 1)
    /opt/ml/model/tokenizer.json       found from this file's location: ../tokenizer.json
    /opt/ml/model/model_config.json    sequence_length and vocab_size, for the checks
    /opt/ml/model/code/inference.py    this file; code/requirements.txt and code/lib/ (tokenizers)

Request (application/json), the Hugging Face text-generation shape::

    {"inputs": "def main(", "parameters": {"max_new_tokens": 32, "temperature": 0.8, "top_k": 40, "seed": 1}}

Response: ``[{"generated_text": "def main(..."}]`` (the prompt + continuation; the continuation only
with ``"return_full_text": false``), cut at the first <|endoftext|>.

Parameters (all optional; null = unset): ``max_new_tokens`` 1 .. context - prompt tokens (default 64, or
what fits); ``do_sample`` (default: a given temperature decides, 0 = greedy; else sampling when top_k > 0
is given, greedy otherwise); ``temperature`` 0 .. 100 (1.0 when sampling without one); ``top_k``
0 .. vocabulary (0 = all tokens); ``seed`` 0 .. 2^31-1 (default: a random one per request);
``return_full_text`` (default true). Other Hugging Face parameters are refused unless unset (null, false
or empty), so a client sending its defaults works.

Generation never goes past the model's context (prompt + max_new_tokens <= sequence_length): longer
requests are refused, not slid. A prompt is refused by its length in bytes before it is tokenized: no more
than the context's tokens times the vocabulary's longest token can fit (a 6 MB prompt is refused at once,
not after seconds of tokenizing). A bad request raises ``BadRequest`` (a ValueError) whose message
starts with "400 Bad Request:"; the container catches it and answers HTTP 500 ``{"error": message}``,
which InvokeEndpoint reports to the caller as ModelError (HTTP 424) with that message. The server
keeps running.
"""

from __future__ import annotations

import functools
import json
import math
import random
from pathlib import Path
from typing import Any

MODEL_DIR = Path(__file__).resolve().parent.parent
END_OF_TEXT = "<|endoftext|>"
DEFAULT_MAX_NEW_TOKENS = 64
MAX_TEMPERATURE = 100.0
MAX_SEED = 2**31 - 1
SUPPORTED = ("max_new_tokens", "do_sample", "temperature", "top_k", "seed", "return_full_text")

# input_handler -> output_handler of one request: the container passes both the same context object.
_pending: dict[int, tuple[str, bool]] = {}


class BadRequest(ValueError):
    """A request the model cannot serve; the message says why."""

    def __init__(self, message: str):
        super().__init__(f"400 Bad Request: {message}")


@functools.lru_cache(maxsize=1)
def load(model_dir: Path = MODEL_DIR) -> tuple[Any, dict]:
    """The tokenizer and model_config.json beside the SavedModel (read once per worker)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    config = json.loads((model_dir / "model_config.json").read_text())
    config["longest_token_bytes"] = max(len(token.encode()) for token in tokenizer.get_vocab())
    return tokenizer, config


def parse_request(body: bytes | str) -> tuple[str, dict]:
    """The prompt and the parameters of a JSON request body; BadRequest when it is not one."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise BadRequest(f"the body is not JSON ({str(error)[:200]})") from None
    except RecursionError:
        raise BadRequest('the body is nested too deep; send {"inputs": ..., "parameters": {...}}') from None
    if not isinstance(request, dict) or "inputs" not in request:
        raise BadRequest('the body must be a JSON object with "inputs" (the prompt text)')
    if not isinstance(request["inputs"], str):
        raise BadRequest('"inputs" must be one string (the prompt)')
    if request.get("stream"):
        raise BadRequest("streaming is not supported")
    parameters = request.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise BadRequest('"parameters" must be a JSON object')
    return request["inputs"], {name: value for name, value in parameters.items() if value is not None}


def _unset(value: Any) -> bool:
    """false, "", [] or {}: what a client sends for a parameter it does not use (not 0, which equals False)."""
    return value is False or (isinstance(value, (str, list, dict)) and not value)


def _prompt_bytes(prompt: str, sequence_length: int, longest_token_bytes: int) -> None:
    """BadRequest for a prompt that is no UTF-8 text, or too long in bytes to be at most sequence_length - 1
    tokens (each token is at most the vocabulary's longest)."""
    try:
        size = len(prompt.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise BadRequest(f'"inputs" is not valid Unicode ({error.reason} at character {error.start})') from None
    limit = (sequence_length - 1) * longest_token_bytes  # input_handler's bound on the body, too
    if size > limit:
        raise BadRequest(
            f"the prompt is {size:,} bytes; this model's context is {sequence_length} tokens of at most "
            f"{longest_token_bytes} bytes, so a prompt may have at most {limit:,} bytes"
        )


def _integer(parameters: dict, name: str, default: int, low: int, high: int) -> int:
    value = parameters.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"parameters.{name} must be an integer from {low} to {high}, got {value!r}")
    return value


def _boolean(parameters: dict, name: str, default: bool | None) -> bool | None:
    value = parameters.get(name, default)
    if value is not None and not isinstance(value, bool):
        raise BadRequest(f"parameters.{name} must be true or false, got {value!r}")
    return value


def generation_inputs(prompt_ids: list[int], parameters: dict, sequence_length: int, vocab_size: int) -> dict:
    """The serving_default signature's inputs for one prompt, after checking every parameter.

    Args:
        prompt_ids: the prompt's token ids (at least one).
        parameters: the request's parameters, nulls removed.
        sequence_length: the model's context in tokens.
        vocab_size: the model's vocabulary (the largest top_k).

    Example:
        >>> generation_inputs([5, 6], {"max_new_tokens": 4}, 32, 384)["max_new_tokens"]
        4
    """
    unsupported = [k for k, v in parameters.items() if k not in SUPPORTED and not _unset(v)]
    if unsupported:
        raise BadRequest(f"parameters {', '.join(sorted(unsupported))} are not supported; use {', '.join(SUPPORTED)}")
    room = sequence_length - len(prompt_ids)
    if room < 1:
        raise BadRequest(
            f"the prompt is {len(prompt_ids)} tokens; this model's context is {sequence_length} tokens, "
            f"so a prompt may have at most {sequence_length - 1}"
        )
    max_new_tokens = _integer(parameters, "max_new_tokens", min(DEFAULT_MAX_NEW_TOKENS, room), 1, room)
    top_k = _integer(parameters, "top_k", 0, 0, vocab_size)
    temperature = parameters.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not (math.isfinite(temperature) and 0 <= temperature <= MAX_TEMPERATURE)
    ):
        raise BadRequest(f"parameters.temperature must be a number from 0 to {MAX_TEMPERATURE:g}, got {temperature!r}")
    do_sample = _boolean(parameters, "do_sample", None)
    if do_sample is None:  # temperature decides when given (0 = greedy); else top_k > 0 asks for sampling
        do_sample = temperature > 0 if temperature is not None else top_k > 0
    elif do_sample and temperature == 0:
        raise BadRequest("parameters.temperature must be greater than 0 when do_sample is true")
    seed = _integer(parameters, "seed", random.randint(0, MAX_SEED) if do_sample else 0, 0, MAX_SEED)
    return {
        "prompt_ids": [prompt_ids],
        "max_new_tokens": max_new_tokens,
        "temperature": float(temperature or 1.0) if do_sample else 0.0,
        "top_k": top_k if do_sample else 0,
        "seed": seed,
    }


def input_handler(data, context) -> str:
    """Request body (a stream) -> the TensorFlow Serving REST predict body for the serving_default signature."""
    content_type = (getattr(context, "request_content_type", None) or "application/json").split(";")[0].strip()
    if content_type.lower() != "application/json":
        raise BadRequest(f"Content-Type {content_type} is not supported; send application/json")
    tokenizer, config = load()
    body = data.read()
    most = (config["sequence_length"] - 1) * config["longest_token_bytes"]
    if len(body) > 6 * most + 65_536:  # a prompt byte is at most 6 bytes of JSON (\u00e9); room for parameters
        raise BadRequest(f"the body is {len(body):,} bytes; a prompt this model can take is at most {most:,} bytes")
    prompt, parameters = parse_request(body)
    _prompt_bytes(prompt, config["sequence_length"], config["longest_token_bytes"])
    prompt_ids = tokenizer.encode(prompt).ids or [tokenizer.token_to_id(END_OF_TEXT)]
    inputs = generation_inputs(prompt_ids, parameters, config["sequence_length"], config["vocab_size"])
    return_full_text = _boolean(parameters, "return_full_text", True)
    while len(_pending) >= 1024:  # requests whose predict call failed never reach output_handler
        _pending.pop(next(iter(_pending)))
    _pending[id(context)] = (prompt, return_full_text)
    return json.dumps({"signature_name": "serving_default", "inputs": inputs})


def output_handler(response, context) -> tuple[str, str]:
    """TensorFlow Serving's predict response -> ``([{"generated_text": ...}] as JSON, content type)``."""
    prompt, return_full_text = _pending.pop(id(context), ("", False))
    if response.status_code != 200:
        raise ValueError(
            f"TensorFlow Serving answered {response.status_code}: {response.content.decode(errors='replace')}"
        )
    outputs = json.loads(response.content)["outputs"]
    token_ids = outputs["token_ids"] if isinstance(outputs, dict) else outputs  # one output: TFS drops the name
    tokenizer, _ = load()
    eot = tokenizer.token_to_id(END_OF_TEXT)
    continuation = token_ids[0]
    if eot in continuation:
        continuation = continuation[: continuation.index(eot)]
    text = tokenizer.decode(continuation)
    return json.dumps([{"generated_text": prompt + text if return_full_text else text}]), "application/json"
