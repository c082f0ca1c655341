import numpy as np
from data.token_shards import Manifest, sha256_of, write_manifest_part
from tokenizers import Tokenizer

from pile.packing import SplitWriter
from pile.roundtrip import dataset_tokens, decode_dataset


def test_decodes_documents_across_shards_and_drops_padding(tmp_path, tokenizer_json):
    (tmp_path / "tokenizer.json").write_text(tokenizer_json)
    tokenizer = Tokenizer.from_str(tokenizer_json)
    documents = ["alpha beta", "gamma\n", "delta"]
    stream = [t for d in documents for t in [*tokenizer.encode(d).ids, 0]]
    writer = SplitWriter(tmp_path, "train", "h-x", record_tokens=3, dtype="uint16", records_per_shard=2, eot_id=0)
    writer.add(np.array(stream, dtype=np.uint16))
    manifest = Manifest(2, "uint16", 400, 0, sha256_of(tmp_path / "tokenizer.json"), shards=writer.finish())
    write_manifest_part(tmp_path, "h", manifest)
    assert decode_dataset(tmp_path) == documents
    assert decode_dataset(tmp_path, "validation") == []
    tokens = dataset_tokens(tmp_path)
    assert tokens[: len(stream)].tolist() == stream and not tokens[len(stream) :].any()
