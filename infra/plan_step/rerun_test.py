"""A dataset made anew starts from an empty folder: a rerun with fewer hosts keeps no old host's shards."""

from __future__ import annotations

from infra.plan_step.plan import plan_execution
from local.folder_store import FolderStore

DATASET = "s3://datasets-bucket/datasets/pile/"


def test_a_forced_rerun_deletes_the_earlier_runs_shards_and_manifests_first(settings, tmp_path):
    store = FolderStore(tmp_path)
    for i in range(2):
        store.put_text(f"s3://raw-bucket/pile/{i:02d}.jsonl.zst", "x")
    for host in ("algo-1", "algo-2", "algo-3", "algo-4"):  # an earlier run with four hosts
        store.put_text(f"{DATASET}manifests/{host}.json", "{}")
        store.put_text(f"{DATASET}train/{host}-00000.bin", "tokens")
    store.put_text("s3://datasets-bucket/datasets/pile-other/manifests/algo-1.json", "{}")  # another dataset
    raw = {
        "force_preprocess": True,
        "corpus": {"s3_uri": "s3://raw-bucket/pile/"},
        "preprocessing": {"instance_count": 2},
    }
    plan = plan_execution(raw, "rerun", settings, store)
    assert plan["preprocess"]["run"] is True
    assert store.list(DATASET) == []  # the two new hosts write into an empty folder
    assert store.list("s3://datasets-bucket/datasets/pile-other/") != []  # only this dataset's folder


def test_a_dataset_reused_is_left_as_it_is(settings, tmp_path):
    store = FolderStore(tmp_path)
    store.put_text(f"{DATASET}manifests/algo-1.json", "{}")
    job = "gpt-dev-a-abc123-trn"
    store.put_text(f"s3://models-bucket/training/{job}/output/model.tar.gz", "archive")
    plan_execution({"deploy_from": job}, "redeploy", settings, store)  # nothing preprocessed: nothing deleted
    assert store.list(DATASET) == [(f"{DATASET}manifests/algo-1.json", 2)]
