"""The CLI run as the Processing container runs it: ``python preprocess.py MODE --arg value ...``."""

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from data.token_shards import read_manifest, verify_dataset
from pile.inputs import Source
from pile.roundtrip import decode_dataset
from pile.sample_corpus import (
    PILE_SET_NAMES,
    damage_row_group,
    pile_line,
    stdlib_documents,
    write_jsonl,
    write_mix_corpus,
    write_parquet,
    write_pile,
)
from preprocess import build_parser, current_host, main, mix_sources

SCRIPT = Path(__file__).with_name("preprocess.py")
SMALL = [
    "--sequence_length",
    "63",
    "--shard_size_mb",
    "0.02",
    "--validation_fraction",
    "0.1",
    "--progress_seconds",
    "0",
]


def run(mode, *args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), mode, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=SCRIPT.parent, timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def documents():
    return stdlib_documents(300_000, max_document_bytes=3_000)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, documents):
    raw = tmp_path_factory.mktemp("sample")
    write_pile(raw / "a.jsonl.zst", documents[:60])
    write_pile(raw / "b.jsonl.gz", documents[60:])
    out = tmp_path_factory.mktemp("tokenizer")
    result = run("tokenizer", "--input_dir", raw, "--output_dir", out, "--vocab_size", "500", "--sample_bytes", "200K")
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout and (out / "tokenizer.json").is_file()
    return out


def write_inputs(folder, documents):
    """Six inputs of every format (plus a bad line); returns the documents they hold."""
    kept = documents[:90]
    assert len(kept) == 90
    write_pile(folder / "0.jsonl", kept[:15])
    write_jsonl(folder / "1.jsonl", [pile_line(d, "Github") for d in kept[15:30]] + [b"{broken\n"])
    write_pile(folder / "2.jsonl.zst", kept[30:45])
    write_pile(folder / "3.jsonl.gz", kept[45:60])
    (folder / "4.txt").write_text("\n<|endoftext|>\n".join(kept[60:75]))
    write_pile(folder / "nested" / "5.jsonl.zst", kept[75:90])
    return kept


def dataset_files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_shards_mode_every_format_with_a_pool(tmp_path, tokenizer_dir, documents):
    expected = write_inputs(tmp_path / "raw", documents)
    args = ["--input_dir", tmp_path / "raw", "--tokenizer_dir", tokenizer_dir, "--output_dir", tmp_path / "out"]
    result = run("shards", *args, *SMALL, "--workers", "2", "--host", "algo-3")
    assert result.returncode == 0, result.stderr
    assert "algo-3: 91 documents" in result.stdout and '"not_json": 1' in result.stdout
    manifest = read_manifest(tmp_path / "out")
    verify_dataset(tmp_path / "out", manifest, checksums=True)
    assert manifest.hosts == ["algo-3"] and all(s.file.split("/")[1].startswith("algo-3-") for s in manifest.shards)
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(expected)
    assert manifest.documents_skipped == {"not_json": 1}


def test_todays_corpus_formats_are_all_read_and_an_unknown_one_named(tmp_path, tokenizer_dir):
    """The issue's corpus: FineWeb-like Parquet, DCLM-like .jsonl.zstd, Dolma-like .json.gz and a .jsonl.zst, 200
    documents each; before, only the .jsonl.zst was read (200 of 800) and the other three passed over unnamed."""
    docs = [f"Document {i}: the {i % 13}th of its kind, with words enough to pack." for i in range(800)]
    raw = tmp_path / "raw"
    write_parquet(raw / "fineweb" / "000_00000.parquet", docs[:200], row_group_rows=50)
    lines = [json.dumps({"id": i, "text": d}).encode() + b"\n" for i, d in enumerate(docs)]
    write_jsonl(raw / "dclm" / "shard_00.jsonl.zstd", lines[200:400])
    write_jsonl(raw / "dolma" / "v1-0000.json.gz", lines[400:600])
    write_pile(raw / "pile" / "00.jsonl.zst", docs[600:])
    (raw / "README.md").write_text("not a corpus file")
    args = ["--input_dir", raw, "--tokenizer_dir", tokenizer_dir, "--output_dir", tmp_path / "out"]
    result = run("shards", *args, *SMALL)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.split("summary: ", 1)[1].splitlines()[0])
    assert (summary["documents_read"], summary["documents_written"]) == (800, 800)
    assert summary["files_failed"] == {} and summary["files_unsupported"] == ["README.md"]
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(docs)


def test_text_field_names_the_json_field_and_the_parquet_column(tmp_path, tokenizer_dir):
    docs = [f"content number {i}" for i in range(40)]
    raw = tmp_path / "raw"
    write_parquet(raw / "a.parquet", docs[:20], text_field="content")
    write_jsonl(raw / "b.jsonl", [json.dumps({"content": d, "text": "other"}).encode() + b"\n" for d in docs[20:]])
    args = ["--input_dir", raw, "--tokenizer_dir", tokenizer_dir, "--output_dir", tmp_path / "out"]
    result = run("shards", *args, *SMALL, "--text_field", "content")
    assert result.returncode == 0, result.stderr
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(docs)
    tokenizer = run("tokenizer", "--input_dir", raw, "--output_dir", tmp_path / "tok", "--vocab_size", "300",
                    "--text_field", "content")  # fmt: skip
    assert tokenizer.returncode == 0 and "from 40 documents" in tokenizer.stdout, tokenizer.stderr


def test_a_corrupt_parquet_ends_that_file_only(tmp_path, tokenizer_dir):
    docs = [f"row {i} of a damaged file" for i in range(200)]
    raw = tmp_path / "raw"
    damage_row_group(write_parquet(raw / "bad.parquet", docs[:100], row_group_rows=25), 2)
    write_parquet(raw / "good.parquet", docs[100:])
    args = ["--input_dir", raw, "--tokenizer_dir", tokenizer_dir, "--output_dir", tmp_path / "out"]
    result = run("shards", *args, *SMALL)
    assert result.returncode == 0, result.stderr
    manifest = read_manifest(tmp_path / "out")
    assert list(manifest.files_failed) == ["bad.parquet"] and manifest.documents_written == 150
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(docs[:50] + docs[100:])


def test_two_hosts_on_disjoint_inputs_make_one_dataset(tmp_path, tokenizer_dir, documents):
    expected = write_inputs(tmp_path / "all", documents)
    inputs = sorted(p for p in (tmp_path / "all").rglob("*") if p.is_file())
    for number, host_inputs in enumerate((inputs[::2], inputs[1::2]), 1):
        folder = tmp_path / f"raw{number}"
        for path in host_inputs:  # what ShardedByS3Key gives each host: its files, same relative paths
            target = folder / path.relative_to(tmp_path / "all")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
        config = tmp_path / f"resourceconfig{number}.json"
        config.write_text(json.dumps({"current_host": f"algo-{number}", "hosts": ["algo-1", "algo-2"]}))
        args = [
            "--input_dir",
            folder,
            "--tokenizer_dir",
            tokenizer_dir / "tokenizer.json",
            "--output_dir",
            tmp_path / "out",
        ]
        result = run("shards", *args, *SMALL, "--host", current_host(config))
        assert result.returncode == 0, result.stderr
    manifest = read_manifest(tmp_path / "out")
    assert sorted(manifest.hosts) == ["algo-1", "algo-2"]
    files = [s.file for s in manifest.shards]
    assert len(files) == len(set(files)) == len(list((tmp_path / "out").glob("*/*.tfrecord")))
    assert {f.split("/")[1].split("-")[1] for f in files} == {"1", "2"}
    assert Counter(decode_dataset(tmp_path / "out")) == Counter(expected)


def test_killed_then_rerun_equals_a_clean_run(tmp_path, tokenizer_dir, documents):
    write_inputs(tmp_path / "raw", documents)
    common = ["--input_dir", tmp_path / "raw", "--tokenizer_dir", tokenizer_dir, *SMALL, "--workers", "2"]
    clean = run("shards", *common, "--output_dir", tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    killed = run("shards", *common, "--output_dir", tmp_path / "out", env={"PREPROCESS_KILL_AFTER_SHARDS": "9"})
    assert killed.returncode == -signal.SIGKILL
    left = dataset_files(tmp_path / "out")
    done = {name.split("/")[-1].removesuffix(".json") for name in left if name.startswith("progress/")}
    started = {name.split("/")[-1].split("-")[2] for name in left if name.endswith(".tfrecord")}
    assert "manifests/algo-1.json" not in left and 0 < len(done) < 6
    assert started - done  # an input was cut short: shards on disk but no "done" record
    rerun = run("shards", *common, "--output_dir", tmp_path / "out")
    assert rerun.returncode == 0, rerun.stderr
    assert "already done, skipped" in rerun.stdout
    assert dataset_files(tmp_path / "out") == dataset_files(tmp_path / "clean")


def test_no_usable_documents_exits_non_zero_and_writes_nothing(tmp_path, tokenizer_dir):
    write_jsonl(tmp_path / "raw" / "bad.jsonl", [b"nope\n", b'{"text": 1}\n'])
    for mode in ("tokenizer", "shards"):
        result = run(mode, "--input_dir", tmp_path / "raw", "--tokenizer_dir", tokenizer_dir,
                     "--output_dir", tmp_path / "out", "--vocab_size", "300")  # fmt: skip
        assert result.returncode == 1
        assert f"preprocess.py {mode}: error: no usable documents" in result.stderr
        assert not (tmp_path / "out").exists()


def test_clear_errors_for_bad_arguments_and_missing_inputs(tmp_path):
    missing = run("shards", "--input_dir", tmp_path / "nothing", "--output_dir", tmp_path / "out")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    (tmp_path / "raw").mkdir()
    write_pile(tmp_path / "raw" / "a.jsonl", ["text"])
    no_tokenizer = run("shards", "--input_dir", tmp_path / "raw", "--tokenizer_dir", tmp_path / "none")
    assert no_tokenizer.returncode == 1 and "run `preprocess.py tokenizer` first" in no_tokenizer.stderr
    bad = run("shards", "--validation_fraction", "1.5")
    assert bad.returncode == 2 and "must be in [0, 1)" in bad.stderr
    assert run("compile").returncode == 2


def test_defaults_are_the_processing_paths_and_strings_parse():
    args = build_parser().parse_args(["shards"])
    assert args.input_dir == Path("/opt/ml/processing/input/raw")
    assert args.tokenizer_dir == Path("/opt/ml/processing/input/tokenizer")
    assert args.output_dir == Path("/opt/ml/processing/output/dataset")
    assert (args.vocab_size, args.sequence_length, args.shard_size_mb) == (50257, 2048, 1024.0)
    assert (args.validation_fraction, args.pile_set_names, args.workers, args.host) == (0.0005, frozenset(), 0, None)
    parsed = build_parser().parse_args(["tokenizer", "--pile_set_names", "Github, ArXiv,", "--sample_bytes", "2G"])
    assert (
        parsed.pile_set_names == {"Github", "ArXiv"} and parsed.sample_bytes == 2 * 10**9
    )  # G is decimal (contract/sizes.py)
    repeated = build_parser().parse_args(["shards", "--pile_set_names=Gutenberg (PG-19)", "--pile_set_names", "ArXiv"])
    assert repeated.pile_set_names == {"Gutenberg (PG-19)", "ArXiv"}


def test_current_host_reads_the_resource_config(tmp_path):  # sizes: contract/sizes_test.py
    assert current_host(tmp_path / "missing.json") == "algo-1"
    (tmp_path / "rc.json").write_text('{"current_host": "algo-7"}')
    assert current_host(tmp_path / "rc.json") == "algo-7"


def write_mix(folder, documents):
    """A two-source mix: ``pile`` (.jsonl.zst, two bad lines), ``web`` (Parquet); returns what each source holds."""
    pairs = [(d, PILE_SET_NAMES[i % 3]) for i, d in enumerate(documents[:80])]
    write_mix_corpus(folder, pairs[0::2], [d for d, _ in pairs[1::2]], files=3)
    return {"pile": [d for d, _ in pairs[0::2]], "web": [d for d, _ in pairs[1::2]]}


MIX = ["--source=web:3", "--source=pile:1", "--source_pile_set_names=pile:Github", "--source_pile_set_names=pile:ArXiv"]


def test_a_mix_from_the_tokenizer_to_the_shards_killed_and_rerun_equals_a_clean_run(tmp_path, documents):
    held = write_mix(tmp_path / "raw", documents)
    (tmp_path / "raw" / "stray.jsonl").write_text('{"text": "in no source: not read"}\n')
    tokenizer = run("tokenizer", "--input_dir", tmp_path / "raw", "--output_dir", tmp_path / "tok", "--vocab_size",
                    "400", "--sample_bytes", "100K", *MIX)  # fmt: skip
    assert tokenizer.returncode == 0, tokenizer.stderr
    assert re.search(r"\(0\.1 MB, pile 0\.0[23] MB, web 0\.0[78] MB\)", tokenizer.stdout), tokenizer.stdout  # 1:3
    common = ["--input_dir", tmp_path / "raw", "--tokenizer_dir", tmp_path / "tok", *SMALL, "--workers", "2", *MIX]
    clean = run("shards", *common, "--output_dir", tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    summary = json.loads(clean.stdout.split("summary: ", 1)[1].splitlines()[0])
    pile = [d for i, d in enumerate(held["pile"]) if PILE_SET_NAMES[(2 * i) % 3] != "Pile-CC"]
    assert summary["sources"]["pile"]["documents_written"] == len(pile) and summary["sources"]["pile"]["files"] == 3
    assert summary["sources"]["web"]["bytes"] == sum(len(d.encode()) for d in held["web"])
    for name, docs in {"pile": pile, "web": held["web"]}.items():
        assert Counter(decode_dataset(tmp_path / "clean", source=name)) == Counter(docs)
    killed = run("shards", *common, "--output_dir", tmp_path / "out", env={"PREPROCESS_KILL_AFTER_SHARDS": "12"})
    assert killed.returncode == -signal.SIGKILL
    left = dataset_files(tmp_path / "out")
    done = {name.split("/")[-1].removesuffix(".json") for name in left if name.startswith("progress/")}
    started = {name.split("/")[-1].split("-")[2] for name in left if name.endswith(".tfrecord")}
    assert "web_00" in done and started - done == {"web_01"}, (done, started)  # cut in the middle of source web
    rerun = run("shards", *common, "--output_dir", tmp_path / "out")
    assert rerun.returncode == 0, rerun.stderr
    assert "already done, skipped" in rerun.stdout
    assert dataset_files(tmp_path / "out") == dataset_files(tmp_path / "clean")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--source=Web:1"], "argument --source: source name 'Web': use a name of a-z, 0-9 and '-' (at most 32"),
        (["--source=se-x:1"], "argument --source: source name 'se-x'"),
        (["--source=web"], "argument --source: give NAME:WEIGHT, not 'web'"),
        (["--source=web:0"], "argument --source: weight '0' of web: give a positive finite number"),
        (["--source=web:nan"], "argument --source: weight 'nan' of web: give a positive finite number"),
        (["--source=web:-1"], "argument --source: weight '-1' of web"),
        (["--source=web:1", "--source=web:2"], "--source: web is given twice: give each source once"),
        (["--source=web:1", "--source_text_field=code:x"], "--source_text_field: 'code' is no --source (sources: web)"),
        (["--source_text_field=web:x"], "--source_text_field: 'web' is no --source (sources: none)"),
        (["--source=web:1", "--source_text_field=web:"], "argument --source_text_field: give NAME:FIELD"),
        (["--source=web:1", "--source_text_field=web:a", "--source_text_field=web:b"], "web is given twice"),
        (["--source=web:1", "--source_pile_set_names=pile:ArXiv"], "--source_pile_set_names: 'pile' is no --source"),
        (["--source=web:1", "--pile_set_names=ArXiv"], "--pile_set_names: not with --source; give --source_pile_set"),
    ],
)
def test_a_bad_mix_argument_is_refused_in_one_line_naming_the_option(tmp_path, capsys, arguments, message):
    (tmp_path / "raw" / "web").mkdir(parents=True)
    with pytest.raises(SystemExit) as exited:
        main(["shards", "--input_dir", str(tmp_path / "raw"), *arguments])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exited.value.code == 2 and message.replace("RAW", str(tmp_path / "raw")) in error, error
    assert error.startswith("preprocess.py") and ": error: " in error


def test_mix_options_parse_into_sources_sorted_by_name(tmp_path):
    for name in ("web", "code"):
        (tmp_path / name).mkdir()
    args = build_parser().parse_args(["tokenizer", "--input_dir", str(tmp_path), "--text_field", "body",
                                      "--source=web:0.7", "--source=code:0.3", "--source_text_field=code:content",
                                      "--source_pile_set_names=web:Gutenberg (PG-19)",
                                      "--source_pile_set_names=web:ArXiv"])  # fmt: skip
    assert mix_sources(args) == (
        Source("code", 0.3, "content"),
        Source("web", 0.7, "body", frozenset({"Gutenberg (PG-19)", "ArXiv"})),
    )
    assert mix_sources(build_parser().parse_args(["shards"])) == ()
