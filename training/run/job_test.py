from run.job import cluster


def test_cluster_from_the_sagemaker_environment():
    env = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "8"}
    assert cluster(env) == (["algo-1", "algo-2"], "algo-2", 8)
    assert cluster({}) == (["localhost"], "localhost", None)
