"""Send a prompt to a deployed endpoint and print the generated text.

    python -m cli invoke --stage dev --endpoint NAME "def main(" \
        [--max-new-tokens 64] [--temperature 0.8] [--top-k 40] [--seed 1]

The request is the Hugging Face text-generation shape that the model's serving hooks read
(``{"inputs": ..., "parameters": {...}}``); the reply is ``[{"generated_text": ...}]``. A request the model
refuses comes back as a ModelError whose message says why (e.g. "400 Bad Request: the prompt is ...").
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from cli.stage import stage_session


def request_body(
    prompt: str,
    max_new_tokens: int | None = None,
    temperature: float | None = None,
    top_k: int | None = None,
    seed: int | None = None,
) -> dict:
    """The JSON request; parameters left None are not sent (the endpoint's defaults apply).

    Example:
        >>> request_body("def main(", max_new_tokens=8)
        {'inputs': 'def main(', 'parameters': {'max_new_tokens': 8}}
    """
    parameters = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_k": top_k, "seed": seed}
    return {"inputs": prompt, "parameters": {k: v for k, v in parameters.items() if v is not None}}


def invoke(stage: str, endpoint: str, body: dict, session: Any = None) -> list[dict]:
    """Calls InvokeEndpoint in the stage's region and returns the decoded reply.

    Raises botocore's ClientError (``ModelError`` for a refused request) as is.
    """
    response = (
        (session or stage_session(stage))
        .client("sagemaker-runtime")
        .invoke_endpoint(
            EndpointName=endpoint, ContentType="application/json", Accept="application/json", Body=json.dumps(body)
        )
    )
    return json.loads(response["Body"].read())


def error_message(error: Exception) -> str:
    """What to print for a failed call: the model's own message for a ModelError, else the error."""
    response = getattr(error, "response", {})
    original = response.get("OriginalMessage")
    if original:
        with contextlib.suppress(ValueError, AttributeError):  # the container's {"error": ...} body
            original = json.loads(original).get("error", original)
        return f"{response['Error']['Code']} ({response.get('OriginalStatusCode')}): {original}"
    return str(error)
