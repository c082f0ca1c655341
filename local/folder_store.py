"""The local run's stand-in for S3: a folder that implements the Plan step's ``ObjectStore``."""

from __future__ import annotations

from pathlib import Path

from infra.plan_step.object_store import split_uri


class FolderStore:
    """``s3://bucket/key`` is the file ``<root>/bucket/key``: the local run's stand-in for S3."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, uri: str) -> Path:
        """The file of ``uri``; a ValueError for a bucket or key segment of ``.`` or ``..``, which S3 keeps as
        text but a folder would follow out of the store (an execution named ``..`` once made
        ``s3://checkpoints/../``)."""
        bucket, key = split_uri(uri)
        if {".", ".."} & {bucket, *key.split("/")}:
            raise ValueError(f"{uri}: '.' and '..' are not names in the local store")
        return self.root / bucket / key

    def list(self, prefix_uri: str) -> list[tuple[str, int]]:
        bucket, prefix = split_uri(prefix_uri)
        base = self.path(f"s3://{bucket}/")
        if not base.is_dir():
            return []
        found = (p for p in base.rglob("*") if p.is_file() and p.relative_to(base).as_posix().startswith(prefix))
        return sorted((f"s3://{bucket}/{p.relative_to(base).as_posix()}", p.stat().st_size) for p in found)

    def put_text(self, uri: str, text: str) -> None:
        path = self.path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def read_bytes(self, uri: str) -> bytes:
        return self.path(uri).read_bytes()

    def encryption_key(self, uri: str) -> str | None:
        """Reads the file's first byte; a folder encrypts nothing."""
        with self.path(uri).open("rb") as file:
            file.read(1)
        return None

    def delete(self, uris: list[str]) -> None:
        for uri in uris:
            self.path(uri).unlink(missing_ok=True)
