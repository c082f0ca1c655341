import pytest
from job import JobError, accumulation_steps, cluster


def test_accumulation_reaches_the_global_batch():
    # 524,288 tokens = 8 sequences x 2,048 tokens x 8 replicas x 4 micro-batches
    assert accumulation_steps(524_288, 8, 2_048, 8) == 4
    assert accumulation_steps(0, 8, 2_048, 8) == 1  # 0: one micro-batch per replica
    with pytest.raises(JobError, match=r"not a multiple of .* = 131072"):
        accumulation_steps(500_000, 8, 2_048, 8)


def test_cluster_from_the_sagemaker_environment():
    env = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "8"}
    assert cluster(env) == (["algo-1", "algo-2"], "algo-2", 8)
    assert cluster({}) == (["localhost"], "localhost", None)
