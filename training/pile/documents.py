"""Turning one raw record into document text, or into the reason it is skipped."""

from __future__ import annotations

import enum
import json

from contract.formats import DEFAULT_TEXT_FIELD


class Skip(enum.StrEnum):
    """Why a record was not tokenized; the values are the keys of the manifest's ``documents_skipped``."""

    BLANK_LINE = "blank_line"
    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    NO_TEXT = "no_text"
    TEXT_NOT_STRING = "text_not_string"
    INVALID_UTF8 = "invalid_utf8"
    EMPTY = "empty"
    TOO_LONG = "too_long"
    FILTERED = "filtered_pile_set_name"


def _checked_text(text: str) -> str | Skip:
    if not text or text.isspace():
        return Skip.EMPTY
    if not text.isascii():
        try:
            text.encode("utf-8")  # JSON escapes can smuggle in lone surrogates
        except UnicodeEncodeError:
            return Skip.INVALID_UTF8
    return text


def parse_json_line(
    raw: bytes | None, pile_set_names: frozenset[str] = frozenset(), text_field: str = DEFAULT_TEXT_FIELD
) -> str | Skip:
    """The ``text_field`` of a JSON line, when ``meta.pile_set_name`` is wanted (empty set: all)."""
    if raw is None:
        return Skip.TOO_LONG
    if not raw.strip():
        return Skip.BLANK_LINE
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Skip.INVALID_UTF8
    try:
        body = json.loads(line)
    except ValueError:
        return Skip.NOT_JSON
    if not isinstance(body, dict):
        return Skip.NOT_OBJECT
    if text_field not in body:
        return Skip.NO_TEXT
    text = body[text_field]
    if not isinstance(text, str):
        return Skip.TEXT_NOT_STRING
    if pile_set_names:
        meta = body.get("meta")
        if not isinstance(meta, dict) or meta.get("pile_set_name") not in pile_set_names:
            return Skip.FILTERED
    return _checked_text(text)


def parse_text_document(raw: bytes | None, pile_set_names: frozenset[str] = frozenset()) -> str | Skip:
    """A plain-text document; it has no ``pile_set_name``, so any such filter skips it."""
    if raw is None:
        return Skip.TOO_LONG
    if pile_set_names:
        return Skip.FILTERED
    try:
        return _checked_text(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return Skip.INVALID_UTF8


def parse_record(
    kind: str, raw: bytes | None, pile_set_names: frozenset[str] = frozenset(), text_field: str = DEFAULT_TEXT_FIELD
) -> str | Skip:
    """Dispatches on the input kind: ``jsonl`` lines are JSON, ``txt`` documents and ``parquet`` values text."""
    if kind == "jsonl":
        return parse_json_line(raw, pile_set_names, text_field)
    return parse_text_document(raw, pile_set_names)
