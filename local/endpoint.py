"""The SageMaker TensorFlow Serving container and InvokeEndpoint, emulated in-process for the local run.

An unpacked model.tar.gz is served the way the real endpoint serves it, with the model's own hooks:

    POST /invocations body
      -> code/inference.py input_handler(data, context)   imported from the archive, code/ and code/lib on the path
      -> TF Serving REST predict: {"signature_name", "inputs"} -> the SavedModel signature -> {"outputs"}
      -> output_handler(response, context) -> (body, content type), HTTP 200
    any exception in the hooks -> HTTP 500 {"error": message}       (the container's python service)
    InvokeEndpoint: 200 -> the body; otherwise ModelError (HTTP 424) with OriginalStatusCode and OriginalMessage

Run as a process (it imports TensorFlow): ``python -m local.endpoint [--weights-only] MODEL_DIR REQUEST_JSON``
prints the InvokeEndpoint answer as one JSON line and exits 0 when the model answered 200, 1 otherwise. With
``--weights-only`` (an archive received from elsewhere: ``cli generate --model``) nothing of the archive runs: its
weights go into this checkout's model (``training/export/received.py``), whose own export is served.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import tempfile
from collections import namedtuple
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

# The request context the container passes to the hooks (its tfs_utils.Context).
Context = namedtuple(
    "Context",
    "model_name model_version method rest_uri grpc_port channel custom_attributes request_content_type "
    "accept_header content_length",
)
REST_URI = "http://localhost:8501/v1/models/model:predict"


def import_hooks(code_dir: Path) -> ModuleType:
    """Imports code/inference.py as the container does, with code/ and code/lib/ on the module path."""
    for path in (code_dir / "lib", code_dir):
        if path.is_dir() and str(path) not in sys.path:
            sys.path.insert(0, str(path))
    spec = importlib.util.spec_from_file_location("inference", code_dir / "inference.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


class LocalEndpoint:
    """One model archive's endpoint: TF Serving's REST predict and the container's handler chain, in-process.

    Args:
        model_dir: the unpacked model.tar.gz (``<n>/saved_model.pb``, ``code/inference.py``, ...).

    Usage (a trained model's unpacked archive; ``endpoint_test.py`` serves one)::

        endpoint = LocalEndpoint(Path("runs/model"))
        endpoint.invoke_endpoint(b'{"inputs": "def main(", "parameters": {"max_new_tokens": 8}}')["StatusCode"]  # 200
    """

    def __init__(self, model_dir: Path):
        import tensorflow as tf

        self.model_dir = Path(model_dir)
        versions = [p.parent for p in self.model_dir.glob("*/saved_model.pb") if p.parent.name.isdigit()]
        if not versions:
            raise FileNotFoundError(f"no <version>/saved_model.pb in {self.model_dir}")
        self.version_dir = max(versions, key=lambda p: int(p.name))  # TF Serving serves the newest version
        if not (self.model_dir / "code" / "inference.py").is_file():
            raise FileNotFoundError(f"no code/inference.py in {self.model_dir}")
        self.hooks = import_hooks(self.model_dir / "code")
        self.saved_model = tf.saved_model.load(str(self.version_dir))

    def predict(self, body: str | bytes) -> SimpleNamespace:
        """TF Serving's REST predict, columnar ("inputs") format: a response with ``status_code`` and ``content``."""
        import tensorflow as tf

        def answer(status: int, payload: Any) -> SimpleNamespace:
            return SimpleNamespace(status_code=status, content=json.dumps(payload).encode())

        try:
            request = json.loads(body)
            name = request.get("signature_name", "serving_default")
            if name not in self.saved_model.signatures:
                return answer(400, {"error": f'Serving signature name: "{name}" not found in signature def'})
            if "inputs" not in request:
                return answer(400, {"error": 'this emulation reads the columnar "inputs" format only'})
            signature = self.saved_model.signatures[name]
            specs = signature.structured_input_signature[1]
            missing = sorted(set(specs) - set(request["inputs"]))
            if missing:
                return answer(400, {"error": f"Missing inputs: {', '.join(missing)}"})
            inputs = {key: tf.constant(request["inputs"][key], spec.dtype) for key, spec in specs.items()}
            outputs = {key: value.numpy().tolist() for key, value in signature(**inputs).items()}
        except (ValueError, TypeError, OverflowError, AttributeError, tf.errors.InvalidArgumentError) as error:
            return answer(400, {"error": str(error)})
        # One output: TF Serving answers {"outputs": value} without the output's name.
        return answer(200, {"outputs": next(iter(outputs.values())) if len(outputs) == 1 else outputs})

    def invocations(self, body: bytes, content_type: str = "application/json", accept: str = "application/json"):
        """The container's POST /invocations: ``(status, body bytes, content type)``."""
        context = Context("model", None, None, REST_URI, 9000, None, None, content_type, accept, len(body))
        try:
            tfs_body = self.hooks.input_handler(io.BytesIO(body), context)
            reply, reply_type = self.hooks.output_handler(self.predict(tfs_body), context)
        except Exception as error:  # the python service answers every hook error with a 500
            return 500, json.dumps({"error": str(error)}).encode(), "application/json"
        return 200, reply.encode() if isinstance(reply, str) else reply, reply_type

    def invoke_endpoint(self, body: bytes, content_type: str = "application/json") -> dict:
        """InvokeEndpoint: the body when the model answered 200, else the ModelError the caller gets (HTTP 424)."""
        status, reply, reply_type = self.invocations(body, content_type)
        if status == 200:
            return {"StatusCode": 200, "ContentType": reply_type, "Body": reply.decode()}
        message = reply.decode(errors="replace")
        return {
            "StatusCode": 424,
            "Error": {
                "Code": "ModelError",
                "Message": f'Received server error ({status}) from primary with message "{message}"',
            },
            "OriginalStatusCode": status,
            "OriginalMessage": message,
        }


def main(argv: list[str]) -> int:
    weights_only = argv[:1] == ["--weights-only"]
    model_dir, request = Path(argv[weights_only]), argv[weights_only + 1]
    with tempfile.TemporaryDirectory() as folder:
        if weights_only:
            model_dir = reexported(model_dir, Path(folder))
            if model_dir is None:
                return 1
        answer = LocalEndpoint(model_dir).invoke_endpoint(request.encode())
    print(json.dumps(answer), flush=True)
    if answer["StatusCode"] != 200:
        print(answer["Error"]["Message"], file=sys.stderr)
        return 1
    return 0


def reexported(model_dir: Path, folder: Path) -> Path | None:
    """This checkout's export of the archive's weights in ``folder`` (None, the reason on stderr, when they do not
    make this checkout's model)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))  # the training package's import root
    from export.received import NotOurModel, reexport

    try:
        return reexport(model_dir, folder / "model")
    except NotOurModel as error:
        print(f"refused: not a model of this checkout: {error}", file=sys.stderr)
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
