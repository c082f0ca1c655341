import pytest
import zstandard
from tokenizers import Tokenizer

from pile.inputs import NoDocumentsError, Source, find_inputs
from pile.sample_corpus import pile_line, write_jsonl, write_pile
from pile.tokenizer_job import SampleStats, mix_sample_texts, run_tokenizer, sample_texts


def test_sample_is_spread_over_every_input_within_the_budget(tmp_path):
    for name in "abc":
        write_pile(tmp_path / f"{name}.jsonl", [f"{name}{i} " + "x" * 80 for i in range(100)])
    (tmp_path / "tiny.txt").write_text("t0 short")  # leaves its share to the inputs after it
    stats = SampleStats()
    texts = list(sample_texts(find_inputs(tmp_path), 3_000, stats=stats))
    by_input = {name: sum(t.startswith(name) for t in texts) for name in "abct"}
    assert all(count > 0 for count in by_input.values())
    assert stats.bytes_used <= 3_000 + 4 * 140
    assert stats.documents_used == len(texts) < 300


def test_trains_and_writes_the_tokenizer(tmp_path, corpus):
    write_pile(tmp_path / "raw" / "a.jsonl.zst", corpus[:20])
    write_jsonl(tmp_path / "raw" / "b.jsonl", [b"oops\n", pile_line(corpus[20], "Github")])
    stats = run_tokenizer(tmp_path / "raw", tmp_path / "out", vocab_size=300, sample_bytes=10**6)
    tokenizer = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == 300 and tokenizer.token_to_id("<|endoftext|>") == 0
    assert (stats.documents_used, dict(stats.skipped)) == (21, {"not_json": 1})
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["tokenizer.json"]


def test_truncated_input_is_named_and_the_others_still_count(tmp_path, corpus):
    write_pile(tmp_path / "raw" / "a.jsonl", corpus[:5])
    data = zstandard.ZstdCompressor().compress(b"".join(pile_line(d, "Github") for d in corpus))
    (tmp_path / "raw" / "b.jsonl.zst").write_bytes(data[:100])
    stats = run_tokenizer(tmp_path / "raw", tmp_path / "out", vocab_size=300, sample_bytes=10**6)
    assert list(stats.files_failed) == ["b.jsonl.zst"] and stats.documents_used == 5


def test_no_usable_documents_fails_and_writes_nothing(tmp_path):
    write_jsonl(tmp_path / "raw" / "a.jsonl", [b'{"text": ""}\n', b"{}\n"])
    with pytest.raises(NoDocumentsError, match="2 read"):
        run_tokenizer(tmp_path / "raw", tmp_path / "out", vocab_size=300, sample_bytes=10**6)
    assert not (tmp_path / "out").exists()


def test_a_mix_samples_each_source_by_its_weight_and_a_small_one_gives_what_it_has(tmp_path):
    for name in ("web", "code"):
        write_pile(tmp_path / name / "a.jsonl", [f"{name}{i} " + "x" * 80 for i in range(100)])
        write_pile(tmp_path / name / "b.jsonl", [f"{name}{i} " + "y" * 80 for i in range(100)])
    write_pile(tmp_path / "tiny" / "a.jsonl", ["tiny"])
    write_pile(tmp_path / "elsewhere.jsonl", ["not of any source"])
    sources = [Source("code", 1.0), Source("tiny", 1.0), Source("web", 3.0)]
    stats = SampleStats()
    texts = list(mix_sample_texts(find_inputs(tmp_path, sources), sources, 10_000, stats=stats))
    line = len(pile_line("web0 " + "x" * 80, "Github"))  # one document's share of the budget, at most
    assert 6_000 <= stats.source_bytes["web"] < 6_000 + 2 * line  # 10,000 x 3/5, less the unsampled rounding
    assert 2_000 <= stats.source_bytes["code"] < 2_000 + 2 * line
    assert stats.source_bytes["tiny"] == len(pile_line("tiny", "Github")) - 1  # all it has, nothing more to others
    assert {t[:3] for t in texts} == {"web", "cod", "tin"}
    assert not any(t.startswith("not") for t in texts)


def test_run_tokenizer_reads_only_the_sources_folders(tmp_path, corpus):
    write_pile(tmp_path / "raw" / "web" / "a.jsonl", corpus[:10])
    write_jsonl(tmp_path / "raw" / "code" / "b.jsonl", [b'{"content": "code text"}\n'])
    write_pile(tmp_path / "raw" / "other.jsonl", corpus[10:20])
    sources = (Source("code", 1.0, "content"), Source("web", 1.0))
    stats = run_tokenizer(tmp_path / "raw", tmp_path / "out", vocab_size=300, sample_bytes=10**6, sources=sources)
    assert stats.documents_used == 11 and set(stats.source_bytes) == {"code", "web"}
