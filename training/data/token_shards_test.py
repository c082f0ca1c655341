from data.token_shards import SOURCE_COUNTS, Manifest, ShardInfo, merge_manifests


def part(host: str, sources: dict[str, dict]) -> Manifest:
    shard = ShardInfo(f"train/{host}-00000.tfrecord", "train", 1, 9, "0" * 64, 1)
    return Manifest(9, "uint16", 300, 0, "f" * 64, [shard], 1, 1, hosts=[host], sources=sources)


def test_merge_sums_each_sources_counts_over_the_hosts():
    one = {"web": dict.fromkeys(SOURCE_COUNTS, 1), "code": dict.fromkeys(SOURCE_COUNTS, 2)}
    two = {"web": dict.fromkeys(SOURCE_COUNTS, 10)}
    merged = merge_manifests([part("algo-1", one), part("algo-2", two)])
    assert merged.sources == {"code": dict.fromkeys(SOURCE_COUNTS, 2), "web": dict.fromkeys(SOURCE_COUNTS, 11)}
    assert list(merged.sources) == ["code", "web"]
    assert Manifest.from_json(merged.to_json()) == merged


def test_a_manifest_of_one_source_and_one_written_before_sources_read_with_none():
    body = part("algo-1", {}).to_json()
    assert body["sources"] == {}
    del body["sources"]
    assert Manifest.from_json(body).sources == {}
    assert merge_manifests([Manifest.from_json(body)]).sources == {}
