"""One line for each way a terminal command can fail before AWS does its work.

A user who types ``python -m cli start`` without credentials, against a stack that is not deployed, or with an
input file that is not JSON should read what to do, not a botocore traceback. ``user_message`` turns the errors
we know into that line; anything else is one line too, with its type (``python -m cli --traceback`` shows where).
"""

from __future__ import annotations

import json

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    TokenRetrievalError,
)

from infra.config import ConfigError

CREDENTIALS_HINT = (
    "configure AWS credentials (aws configure, AWS_PROFILE, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and try again"
)


class CommandError(Exception):
    """A failure the command explains itself, e.g. a stack without the output it needs."""


def user_message(error: BaseException) -> str | None:
    """The line to print for a known failure, or None for an unexpected one.

    Example:
        >>> user_message(NoCredentialsError())  # doctest: +ELLIPSIS
        'no usable AWS credentials (Unable to locate credentials): configure AWS credentials (...) and try again'
    """
    if isinstance(error, (NoCredentialsError, PartialCredentialsError, TokenRetrievalError)):
        return f"no usable AWS credentials ({error}): {CREDENTIALS_HINT}"
    if isinstance(error, ProfileNotFound):
        return f"{error}: set AWS_PROFILE to a profile in ~/.aws/config, or unset it"
    if isinstance(error, NoRegionError):
        return "no AWS region: set the stage's `region` in cdk.json or AWS_DEFAULT_REGION"
    if isinstance(error, EndpointConnectionError):
        return f"cannot reach AWS ({error}): check the network and the stage's region"
    if isinstance(error, ClientError):
        return _client_error(error)
    if isinstance(error, BotoCoreError):
        return f"AWS SDK error: {error}"
    if isinstance(error, ConfigError):
        return f"invalid configuration: {error}"
    if isinstance(error, UnicodeDecodeError):
        return f"the input is not UTF-8 text ({error}): save it as UTF-8 and try again"
    if isinstance(error, json.JSONDecodeError):
        return f"the input is not valid JSON ({error}): fix the file and try again"
    if isinstance(error, OSError) and error.filename:
        return f"cannot read {error.filename}: {error.strerror}"
    if isinstance(error, CommandError):
        return str(error)
    return None


def _client_error(error: ClientError) -> str:
    code = error.response.get("Error", {}).get("Code", "")
    message = error.response.get("Error", {}).get("Message", str(error))
    operation = error.operation_name
    if operation == "DescribeStacks" and code == "ValidationError" and "does not exist" in message:
        return f"{message}: deploy the stage first (make deploy STAGE=...) or pass --stage with a deployed one"
    if code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
        return f"the AWS credentials have expired ({message}): {CREDENTIALS_HINT}"
    if code in ("UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException"):
        return f"AWS does not accept these credentials ({message}): {CREDENTIALS_HINT}"
    if code in ("AccessDenied", "AccessDeniedException"):
        return f"access denied for {operation} ({message}): use credentials allowed to call it"
    return f"{operation} failed: {code}: {message}"
