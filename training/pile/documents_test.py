import pytest

from pile.documents import Skip, parse_json_line, parse_record, parse_text_document


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"text": "hello", "meta": {"pile_set_name": "Github"}}', "hello"),
        (b'{"text": "caf\xc3\xa9"}\r', "café"),
        (None, Skip.TOO_LONG),
        (b"", Skip.BLANK_LINE),
        (b"  \r", Skip.BLANK_LINE),
        (b'{"text": "x"', Skip.NOT_JSON),
        (b"not json at all", Skip.NOT_JSON),
        (b'["text"]', Skip.NOT_OBJECT),
        (b'{"meta": {}}', Skip.NO_TEXT),
        (b'{"text": 42}', Skip.TEXT_NOT_STRING),
        (b'{"text": null}', Skip.TEXT_NOT_STRING),
        (b'{"text": "bad \xff byte"}', Skip.INVALID_UTF8),
        (b'{"text": "lone \\ud800 surrogate"}', Skip.INVALID_UTF8),
        (b'{"text": ""}', Skip.EMPTY),
        (b'{"text": " \\n\\t"}', Skip.EMPTY),
    ],
)
def test_json_lines(raw, expected):
    assert parse_json_line(raw) == expected


def test_pile_set_name_filter():
    wanted = frozenset({"Github", "ArXiv"})
    assert parse_json_line(b'{"text": "a", "meta": {"pile_set_name": "ArXiv"}}', wanted) == "a"
    assert parse_json_line(b'{"text": "a", "meta": {"pile_set_name": "Pile-CC"}}', wanted) is Skip.FILTERED
    assert parse_json_line(b'{"text": "a"}', wanted) is Skip.FILTERED
    assert parse_json_line(b'{"text": "a", "meta": "Github"}', wanted) is Skip.FILTERED


def test_text_documents():
    assert parse_text_document(b"line\n") == "line\n"
    assert parse_text_document(b"\xc3(") is Skip.INVALID_UTF8
    assert parse_text_document(b"\n\n") is Skip.EMPTY
    assert parse_text_document(None) is Skip.TOO_LONG
    assert parse_text_document(b"text", frozenset({"Github"})) is Skip.FILTERED


def test_parse_record_dispatches_on_kind():
    assert parse_record("txt", b'{"text": "a"}') == '{"text": "a"}'
    assert parse_record("jsonl", b'{"text": "a"}') == "a"
    assert Skip.NOT_JSON.value == "not_json"
