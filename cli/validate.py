"""Check an execution input offline, as the Plan step would, and report every error at once.

    python -m cli validate --stage prod --input my-input.json

No credentials and no network: the input is merged over the stage's configuration (cdk.json, as synthesized)
and put through the Plan step's own checks: every field's type and range, the model's fit in the devices'
memory and the run's fit in its ``max_run_hours`` (the pre-flight estimate), the sources' buckets against the
stage's ``source_buckets``, and every hyperparameter the training job would get, as train.py and SageMaker take
it. What needs the deployed stack is left to the Plan step: that the corpus files exist, and that an existing
dataset was made for this request.

The Plan step stops at its first error; here, each bad field is reported and then left out (the stage's value
takes its place) so that the next one shows, until the input passes or an error names no field of the input.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from cli.errors import CommandError
from infra.config import StageConfig
from infra.estimate import estimate_for_config
from infra.plan_step.execution_input import parse_input
from infra.plan_step.object_store import split_uri
from infra.plan_step.plan import InputError, check_input
from infra.plan_step.settings import StackSettings

MAX_ERRORS = 50


def offline_settings(config: StageConfig, corpus_uri: str | None) -> StackSettings:
    """The Plan function's settings as synthesis makes them (``StackSettings.offline``).

    The raw bucket's name is CloudFormation's to choose; the corpus's bucket (a mix's first source's) stands in for
    it, so only a tokenizer or another source outside it and the stage's ``source_buckets`` is refused here.
    """
    return StackSettings.offline(config, **({"raw_bucket": split_uri(corpus_uri)[0]} if corpus_uri else {}))


class DuplicateKey(ValueError):
    """A JSON object with a key twice: JSON parsers keep one of the two (Python's and Step Functions' the last)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    twice = next((key for i, key in enumerate(keys) if key in keys[:i]), None)
    if twice is not None:
        raise DuplicateKey(
            f"the key {twice!r} appears twice in one object (of its keys {', '.join(dict.fromkeys(keys))})"
        )
    return dict(pairs)


def read_input(path: Path) -> Any:
    """The execution input in ``path``, as JSON; a CommandError, in one line, for what is not (as Step Functions
    would refuse it: not UTF-8, not JSON, nested too deep, numbers Python will not read) or means two things (a key
    given twice: the last would win)."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"), object_pairs_hook=_unique_keys)
    except DuplicateKey as error:
        raise CommandError(f"{path}: {error}: JSON keeps only the last; give it once") from None
    except UnicodeDecodeError as error:
        raise CommandError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}): save it as UTF-8") from None
    except RecursionError:
        raise CommandError(f"{path}: nested too deep to read; an execution input is a few levels of fields") from None
    except ValueError as error:  # json.JSONDecodeError, and integers of over 4,300 digits
        raise CommandError(f"{path}: not valid JSON ({str(error)[:200]}): fix the file and try again") from None


def corpus_bucket(raw: Any) -> str | None:
    """The bucket of ``corpus.s3_uri`` (of a mix's first source) when it is an s3:// URI, else None."""
    corpus = raw.get("corpus") if isinstance(raw, dict) else None
    uri = corpus.get("s3_uri") if isinstance(corpus, dict) else None
    sources = corpus.get("sources") if isinstance(corpus, dict) else None
    if uri is None and isinstance(sources, list) and sources and isinstance(sources[0], dict):
        uri = sources[0].get("s3_uri")
    return split_uri(uri)[0] or None if isinstance(uri, str) and uri.startswith("s3://") else None


def input_errors(raw: Any, config: StageConfig) -> list[str]:
    """Every error of ``raw`` against the stage, one message each; an empty list when the Plan step would accept it
    (as far as can be told offline)."""
    # A URI that is not s3:// names no bucket: the checks below say what is wrong with it, naming the field.
    bucket = corpus_bucket(raw)
    settings = offline_settings(config, f"s3://{bucket}/" if bucket else None)
    raw, errors = copy.deepcopy(raw), []
    while len(errors) < MAX_ERRORS:
        try:
            check_input(raw, settings)  # the Plan step's checks that need no object store
            return errors
        except InputError as error:
            message = str(error)
            if message in errors:
                return errors
            errors.append(message)
            if not _drop(raw, message.split(":", 1)[0]):
                return errors  # about the combination or the stage's own values: the checks after it need it fixed
    return errors


def modelled_speed(raw: Any, config: StageConfig) -> str:
    """The estimate's modelled MFU and throughput for a valid input (``Estimate.speed_line``), as the Plan step's
    summary and the success e-mail give it."""
    inp = parse_input(raw, config)
    return estimate_for_config(inp.training, inp.preprocessing.vocab_size).speed_line()


def _drop(raw: Any, field: str) -> bool:
    """Removes ``field`` (a dotted path, e.g. ``training.instance_count`` or ``corpus.sources[1].weight``) from
    ``raw``; False when it is not there."""
    *parents, name = field.split(".")
    node = raw
    for part in parents:
        key, _, index = part.partition("[")
        node = node.get(key) if isinstance(node, dict) else None
        if index and isinstance(node, list) and int(index.rstrip("]")) < len(node):
            node = node[int(index.rstrip("]"))]
    if not isinstance(node, dict) or name not in node:
        return False
    del node[name]
    return True
