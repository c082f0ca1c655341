"""Packs ``training/`` into the ``sourcedir.tar.gz`` that SageMaker script mode downloads and unpacks.

A CDK directory asset is uploaded as a zip, which SageMaker cannot use, so the archive is built here,
deterministically (sorted names, zero timestamps and owners), and uploaded as a file asset: the same
source gives the same bytes and so the same asset hash, and an unchanged package is never re-uploaded.

Jobs ``pip install requirements.txt`` when they start. With no route to PyPI (an isolated stage) they
install from a wheelhouse instead: ``make wheelhouse`` downloads the wheels for the container's Python
into ``training/wheels/``; the archive then carries them, and its requirements.txt points pip there.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

from aws_cdk import Annotations, CfnOutput
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parent.parent
TRAINING_DIR = REPO_ROOT / "training"
BUILD_DIR = REPO_ROOT / "build"
EXCLUDED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
FIXTURES = {"pile/sample_corpus.py"}  # written for tests and the local run; no job imports them
WHEELS_DIR = "wheels"
OFFLINE_OPTIONS = f"--no-index\n--find-links {WHEELS_DIR}\n"  # pip runs in the unpacked folder


def has_wheelhouse(source_dir: Path = TRAINING_DIR) -> bool:
    return any((source_dir / WHEELS_DIR).glob("*.whl"))


def _shipped(path: Path) -> bool:
    """Tests, their fixtures and caches stay home; everything else under training/ is part of the package."""
    return not (
        path.name.endswith("_test.py")
        or path.name == "conftest.py"
        or path.as_posix() in FIXTURES
        or path.suffix == ".pyc"
        or EXCLUDED_DIRS & set(path.parts)
    )


def source_files(source_dir: Path = TRAINING_DIR) -> list[Path]:
    """The files that go into the archive, relative to ``source_dir``, sorted."""
    return sorted(
        p.relative_to(source_dir) for p in source_dir.rglob("*") if p.is_file() and _shipped(p.relative_to(source_dir))
    )


def build_source_archive(source_dir: Path = TRAINING_DIR, out_dir: Path = BUILD_DIR) -> Path:
    """Writes ``<out_dir>/sourcedir.tar.gz`` with the entry points at its root; returns its path."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        offline = has_wheelhouse(source_dir)
        for rel in source_files(source_dir):
            info = tarfile.TarInfo(rel.as_posix())
            data = (source_dir / rel).read_bytes()
            if offline and rel == Path("requirements.txt"):
                data = OFFLINE_OPTIONS.encode() + data
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "sourcedir.tar.gz"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(buffer.getvalue())
    os.replace(tmp, path)
    return path


class TrainingPackage(Construct):
    """The training package as a CDK file asset; its S3 URI is what ``sagemaker_submit_directory`` names.

    Attributes:
        s3_uri: ``s3://<assets bucket>/<hash>.gz``, a tar.gz despite the short extension.
    """

    def __init__(self, scope: Construct, id: str, *, isolated: bool = False) -> None:
        super().__init__(scope, id)
        if isolated and not has_wheelhouse():
            Annotations.of(self).add_warning_v2(
                "gpt:no-wheelhouse",
                "network.isolated: the jobs cannot reach PyPI to install training/requirements.txt; "
                "run `make wheelhouse` before deploying this stage",
            )
        self.asset = s3_assets.Asset(self, "SourceDir", path=str(build_source_archive()))
        self.s3_uri = self.asset.s3_object_url
        CfnOutput(self, "SourceDirUri", value=self.s3_uri, description="sourcedir.tar.gz of the training package")

    def grant_read(self, role: iam.IRole) -> None:
        """Read access to exactly this object (not the whole assets bucket), and the listing of it that a
        processing job's ``S3Prefix`` input makes first (a listing limited to keys that start with its key)."""
        key = self.asset.s3_object_key
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{self.asset.bucket.bucket_arn}/{key}"])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.asset.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": f"{key}*"}},
            )
        )
