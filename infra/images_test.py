"""Image keys and the ECR repository an image URI names."""

from infra.images import image_key, repository_arn


def test_image_keys():
    assert image_key("training", gpu=True) == "training-gpu"
    assert image_key("inference", gpu=False) == "inference-cpu"


def test_repository_arn_of_commercial_and_china_regions():
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.21-gpu-py312"
    assert repository_arn(uri) == "arn:aws:ecr:us-east-1:763104351884:repository/tensorflow-training"
    cn = "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/tensorflow-inference:2.20-cpu"
    assert repository_arn(cn) == "arn:aws-cn:ecr:cn-north-1:727897471807:repository/tensorflow-inference"
