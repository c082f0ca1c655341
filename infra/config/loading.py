"""Building a stage's configuration: cdk.json's stage over the defaults, an override file over that, typed."""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from pathlib import Path
from typing import Any

from infra.config.sections import PLACEHOLDER_ACCOUNT, ConfigError, StageConfig
from infra.config.validation import validate
from infra.training_code import training_module

COUNT_FIELDS = ("train_tokens", "global_batch_tokens")  # counts that may be written as amounts: "300B", "1M"
# '300B' -> 300,000,000,000; '1.5T', '6M', '4k', '300e9' and '524_288' too: training/contract/sizes.py's one grammar
# of amounts, which preprocess.py's sizes also take; ValueError otherwise.
parse_count = training_module("sizes").parse_amount


def load_stage_config(context: dict[str, Any], default_account: str | None = None) -> StageConfig:
    """Builds and validates the stage chosen by the CDK context (``stage``, ``stages``, ``config``).

    Args:
        context: the CDK context (cdk.json, cdk.context.json and ``-c`` values).
        default_account: the account of the caller's credentials (the CLI's ``CDK_DEFAULT_ACCOUNT``),
            used when the stage names none; without either, a placeholder lets synth run offline.
    """
    config = build_stage_config(context, default_account)
    validate(config)
    return config


def build_stage_config(context: dict[str, Any], default_account: str | None = None) -> StageConfig:
    """``load_stage_config`` without the checks: the stage's typed values, e.g. for an estimate of a plan that
    does not fit yet."""
    stages: dict[str, Any] = context.get("stages") or {}
    name = context.get("stage") or "dev"
    if name not in stages:
        raise ConfigError("stage", name, f"one of the stages in cdk.json: {', '.join(sorted(stages)) or '(none)'}")
    layers = [stages[name], _read_override_file(context["config"]) if context.get("config") else {}]
    for where, layer in zip((f"stages.{name}", "config"), layers, strict=True):
        if isinstance(layer, dict) and "name" in layer:  # a second name would write another stage's stack
            raise ConfigError(
                f"{where}.name", layer["name"], f"no name: the stage's name comes from -c stage ({name!r})"
            )
    merged = {"name": name, "account": default_account or PLACEHOLDER_ACCOUNT}
    for layer in layers:
        merged = deep_merge(merged, layer)
    return build_dataclass(StageConfig, merged, "")


def _read_override_file(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError("config", path, "the path of a JSON file with configuration overrides")
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError("config", path, f"valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError("config", path, "a JSON object at the top level")
    return data


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def build_dataclass(cls: type, data: Any, prefix: str) -> Any:
    """Builds a config dataclass from a dict, rejecting unknown keys and values of the wrong type."""
    if not isinstance(data, dict):
        raise ConfigError(prefix.rstrip("."), data, "a JSON object")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"{prefix}{key}", data[key], f"a known field ({hint}valid: {', '.join(names)})")
    for field in dataclasses.fields(cls):
        if field.name not in data and field.default is field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{field.name}", None, "a value: the field is required")
    values = {}
    for key, value in data.items():
        hint = hints[key]
        if typing.get_origin(hint) is dict:
            values[key] = _check_mapping(f"{prefix}{key}", value)
        elif typing.get_origin(hint) is tuple and dataclasses.is_dataclass(typing.get_args(hint)[0]):
            values[key] = _build_items(typing.get_args(hint)[0], value, f"{prefix}{key}")
        elif typing.get_origin(hint) is tuple:
            values[key] = _check_strings(f"{prefix}{key}", value)
        elif dataclasses.is_dataclass(hint):
            values[key] = build_dataclass(hint, value, f"{prefix}{key}.")
        elif key in COUNT_FIELDS and isinstance(value, str):
            values[key] = _count(f"{prefix}{key}", value)
        else:
            values[key] = _check_type(f"{prefix}{key}", value, hint)
    return cls(**values)


def _count(field: str, text: str) -> int:
    try:
        return parse_count(text)
    except ValueError:
        raise ConfigError(field, text, training_module("sizes").AMOUNT_RULE) from None


def _check_mapping(field: str, value: Any) -> dict[str, Any]:
    """A flat JSON object of names to numbers, strings or booleans (e.g. extra hyperparameters)."""
    if not isinstance(value, dict):
        raise ConfigError(field, value, "a JSON object of names to values")
    for key, item in value.items():
        if not isinstance(item, int | float | str | bool):
            raise ConfigError(f"{field}.{key}", item, "a number, string or boolean")
    return dict(value)


def _build_items(cls: type, value: Any, field: str) -> tuple[Any, ...]:
    """A JSON array of objects, each built as ``cls`` and named by its index: ``corpus.sources[1].weight``."""
    if not isinstance(value, list | tuple):
        raise ConfigError(field, value, "a JSON array of objects")
    return tuple(build_dataclass(cls, item, f"{field}[{i}].") for i, item in enumerate(value))


def _check_strings(field: str, value: Any) -> tuple[str, ...]:
    """A JSON array of strings (e.g. pack or bucket names)."""
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ConfigError(field, value, "a JSON array of strings")
    return tuple(value)


def _check_type(field: str, value: Any, hint: Any) -> Any:
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in allowed:
        return None
    for kind in allowed:
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind in (bool, str) and isinstance(value, kind):
            return value
    names = " or ".join("null" if k is type(None) else k.__name__ for k in allowed)
    raise ConfigError(field, value, f"a value of type {names}")
