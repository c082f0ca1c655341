import json
from collections import Counter

import pytest
from data.token_shards import SPLITS, read_manifest, verify_dataset

from pile.bpe import encoder_from_json
from pile.inputs import NoDocumentsError, Source
from pile.roundtrip import decode_dataset
from pile.sample_corpus import PILE_SET_NAMES, compress_flushed, pile_line, write_jsonl, write_parquet, write_pile
from pile.shards_job import ShardsConfig, run_shards

BAD_LINES = [b"not json", b'{"meta": {}}', b'{"text": 7}', b'{"text": "\xff\xfe"}', b'{"text": ""}', b"", b"[1]"]
BAD_REASONS = {
    "not_json": 1, "no_text": 1, "text_not_string": 1, "invalid_utf8": 1, "empty": 1, "blank_line": 1, "not_object": 1
}  # fmt: skip


def make_inputs(folder, corpus):
    """Four inputs, one of each format; returns the documents that should come out."""
    docs = [d[:1500] for d in corpus[:40]]
    lines = [pile_line(d, "Github") for d in docs[:10]]
    write_jsonl(folder / "a.jsonl", [*lines[:5], *(line + b"\n" for line in BAD_LINES), *lines[5:]])
    write_pile(folder / "b.jsonl.zst", docs[10:20])
    write_pile(folder / "sub" / "c.jsonl.gz", docs[20:30])
    (folder / "d.txt").write_text("\n<|endoftext|>\n".join(docs[30:40]))
    return docs


def config(tmp_path, tokenizer_json, **overrides):
    tokenizer = tmp_path / "tokenizer" / "tokenizer.json"
    tokenizer.parent.mkdir(exist_ok=True)
    tokenizer.write_text(tokenizer_json)
    settings = dict(input_dir=tmp_path / "raw", tokenizer=tokenizer.parent, output_dir=tmp_path / "out", host="algo-1",
                    sequence_length=63, shard_size_mb=0.01, validation_fraction=0.2, workers=1)  # fmt: skip
    return ShardsConfig(**{**settings, **overrides})


def test_every_format_round_trips_and_bad_lines_are_counted(tmp_path, corpus, tokenizer_json):
    docs = make_inputs(tmp_path / "raw", corpus)
    manifest = run_shards(config(tmp_path, tokenizer_json))
    out = tmp_path / "out"
    assert read_manifest(out) == manifest
    verify_dataset(out, manifest, checksums=True)
    assert Counter(decode_dataset(out)) == Counter(docs)
    assert 0 < len(decode_dataset(out, "validation")) < len(docs) / 2
    assert manifest.documents_read == 40 + len(BAD_LINES)
    assert manifest.documents_written == 40
    assert manifest.documents_skipped == BAD_REASONS
    assert manifest.files_failed == {}
    assert (manifest.dtype, manifest.vocab_size, manifest.eot_token_id, manifest.record_tokens) == (
        "uint16",
        400,
        0,
        64,
    )
    names = [s.file for s in manifest.shards]
    assert "train/algo-1-sub_c-00000.tfrecord" in names and "train/algo-1-d-00000.tfrecord" in names
    assert all(s.tokens + s.padding_tokens == s.sequences * 64 for s in manifest.shards)
    assert (out / "tokenizer.json").read_text() == tokenizer_json
    assert not list(out.rglob("*.tmp"))


def test_pool_output_is_identical_to_serial(tmp_path, corpus, tokenizer_json):
    make_inputs(tmp_path / "raw", corpus)
    serial = run_shards(config(tmp_path, tokenizer_json, chunk_bytes=3000))
    pooled = run_shards(config(tmp_path, tokenizer_json, chunk_bytes=3000, workers=2, output_dir=tmp_path / "pool"))
    assert pooled.shards == serial.shards


@pytest.mark.parametrize("suffix", [".zst", ".gz"])
def test_truncated_file_keeps_every_complete_document_and_the_rest_continues(tmp_path, corpus, tokenizer_json, suffix):
    docs = corpus  # 300 kB of distinct text
    write_pile(tmp_path / "raw" / "good.jsonl", docs[:10])
    data, ends = compress_flushed([pile_line(d, "Github") for d in docs[10:]], suffix)
    cut = 30  # the cut falls inside document 30 of the file, in the middle of a 50 kB chunk
    (tmp_path / "raw" / f"cut.jsonl{suffix}").write_bytes(data[: (ends[cut - 1] + ends[cut]) // 2])
    manifest = run_shards(config(tmp_path, tokenizer_json, chunk_bytes=50_000))
    assert list(manifest.files_failed) == [f"cut.jsonl{suffix}"]
    assert "EOFError" in manifest.files_failed[f"cut.jsonl{suffix}"]
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(docs[: 10 + cut])
    assert manifest.documents_read == manifest.documents_written == 10 + cut


def test_rerun_skips_done_inputs_and_redoes_changed_or_damaged_ones(tmp_path, corpus, tokenizer_json):
    make_inputs(tmp_path / "raw", corpus)
    first = run_shards(config(tmp_path, tokenizer_json))
    out = tmp_path / "out"
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.tfrecord")}
    (out / "train" / "algo-1-b-00000.tfrecord").unlink()  # input b must be redone
    (out / "train" / "algo-1-a-00099.tfrecord.tmp").write_bytes(b"left by a killed run")
    (out / "progress" / "algo-1" / "a.json").unlink()
    second = run_shards(config(tmp_path, tokenizer_json))
    assert second == first
    assert not (out / "train" / "algo-1-a-00099.tfrecord.tmp").exists()
    redone = {p.name.rsplit("-", 1)[0] for p in stamps if p.exists() and p.stat().st_mtime_ns != stamps[p]}
    assert redone == {"algo-1-a", "algo-1-b"}
    third = run_shards(config(tmp_path, tokenizer_json, sequence_length=31))
    assert third.record_tokens == 32 and third.shards != first.shards
    assert json.loads((out / "progress" / "algo-1" / "d.json").read_text())["settings"]["sequence_length"] == 31


def test_pile_set_name_filter(tmp_path, corpus, tokenizer_json):
    docs = [d[:500] for d in corpus[:9]]
    write_pile(tmp_path / "raw" / "x.jsonl", docs)  # sets alternate Github, Pile-CC, ArXiv
    manifest = run_shards(config(tmp_path, tokenizer_json, pile_set_names=frozenset({"ArXiv", "Github"})))
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(d for i, d in enumerate(docs) if i % 3 != 1)
    assert manifest.documents_skipped == {"filtered_pile_set_name": 3}


def test_no_usable_documents_fails_and_writes_nothing(tmp_path, tokenizer_json):
    write_jsonl(tmp_path / "raw" / "bad.jsonl", [line + b"\n" for line in BAD_LINES])
    (tmp_path / "raw" / "empty.txt").write_text("")
    with pytest.raises(NoDocumentsError, match=r"no usable documents .* 7 read, skipped \{'blank_line': 1"):
        run_shards(config(tmp_path, tokenizer_json))
    assert not (tmp_path / "out").exists()


def test_output_made_with_another_tokenizer_is_refused(tmp_path, corpus, tokenizer_json):
    make_inputs(tmp_path / "raw", corpus)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match="holds another dataset"):
        run_shards(config(tmp_path, tokenizer_json))


MIX = (Source("code", 1.0, pile_set_names=frozenset({"Github", "ArXiv"})), Source("web", 3.0, "content"))


def write_mix(tmp_path, corpus):
    """Two hosts' inputs of a two-source mix (``raw1``, ``raw2``); returns each source's documents written and read."""
    docs = [text[start : start + 800] for text in corpus for start in range(0, len(text), 800)][:60]
    assert len(docs) == len(set(docs)) == 60
    web, code = docs[:30], docs[30:]  # code's pile_set_names alternate Github, Pile-CC, ArXiv: Pile-CC is filtered
    lines = [pile_line(d, PILE_SET_NAMES[i % 3]) for i, d in enumerate(code)]
    write_parquet(tmp_path / "raw1" / "web" / "00.parquet", web[:12], text_field="content")
    write_parquet(tmp_path / "raw2" / "web" / "01.parquet", web[12:], text_field="content")
    write_jsonl(tmp_path / "raw1" / "code" / "00.jsonl", [*lines[:15], b"not json\n"])
    write_jsonl(tmp_path / "raw2" / "code" / "sub" / "01.jsonl.zst", lines[15:])
    written = {"web": web, "code": [d for i, d in enumerate(code) if i % 3 != 1]}
    return written, {"web": 30, "code": 31}


def test_a_mix_on_two_hosts_shards_each_source_apart_and_counts_it(tmp_path, corpus, tokenizer_json):
    written, read = write_mix(tmp_path, corpus)
    for host in ("1", "2"):
        run_shards(
            config(tmp_path, tokenizer_json, input_dir=tmp_path / f"raw{host}", host=f"algo-{host}", sources=MIX)
        )
    out = tmp_path / "out"
    manifest = read_manifest(out)
    verify_dataset(out, manifest, checksums=True)
    assert {s.source for s in manifest.shards} == {"code", "web"}
    for shard in manifest.shards:  # the file names: unique per host and source
        assert shard.file.split("/")[1].startswith((f"algo-1-{shard.source}_", f"algo-2-{shard.source}_"))
    assert len({s.file for s in manifest.shards}) == len(manifest.shards)
    encoder = encoder_from_json(tokenizer_json)
    for name, docs in written.items():
        assert Counter(decode_dataset(out, source=name)) == Counter(docs)  # every shard holds its source's text
        assert decode_dataset(out, "validation", source=name)  # each source its own validation shards
        tokens = {split: sum(s.tokens for s in manifest.split_shards(split) if s.source == name) for split in SPLITS}
        assert manifest.sources[name] == {
            "files": 2,
            "documents_read": read[name],
            "documents_written": len(docs),
            "bytes": sum(len(d.encode()) for d in docs),
            "tokens": sum(len(encoder.encode(d, add_special_tokens=False).ids) + 1 for d in docs),
            "train_tokens": tokens["train"],
            "valid_tokens": tokens["validation"],
        }
    assert manifest.documents_skipped == {"filtered_pile_set_name": 10, "not_json": 1}


def test_a_done_record_counts_for_its_own_source_and_path_only(tmp_path, corpus, tokenizer_json):
    """``web_00.jsonl`` of a one-source run and ``web/00.jsonl`` of source web share a record name: neither is
    taken for the other."""
    write_pile(tmp_path / "one" / "web_00.jsonl", corpus[:3])
    run_shards(config(tmp_path, tokenizer_json, input_dir=tmp_path / "one"))
    write_pile(tmp_path / "mix" / "web" / "00.jsonl", corpus[3:6])
    manifest = run_shards(config(tmp_path, tokenizer_json, input_dir=tmp_path / "mix", sources=(Source("web"),)))
    assert {s.source for s in manifest.shards} == {"web"} and manifest.sources["web"]["files"] == 1
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(corpus[3:6])
