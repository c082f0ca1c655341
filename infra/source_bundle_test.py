"""The training package archive: what SageMaker script mode needs, nothing else, the same bytes every time."""

from __future__ import annotations

import ast
import tarfile
from pathlib import Path

from infra.plan_step.hyperparameters import ENTRY_POINTS
from infra.source_bundle import FIXTURES, TRAINING_DIR, build_source_archive, source_files


def make_package(root: Path) -> Path:
    src = root / "training"
    (src / "gpt" / "__pycache__").mkdir(parents=True)
    (src / "pile").mkdir()
    (src / "pile" / "sample_corpus.py").write_text("CORPUS = 1\n")
    (src / "train.py").write_text("print('train')\n")
    (src / "train_test.py").write_text("def test(): pass\n")
    (src / "gpt" / "model.py").write_text("MODEL = 1\n")
    (src / "gpt" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    (src / "requirements.txt").write_text("tokenizers==0.23.3\n")
    return src


def test_archive_has_entry_points_at_its_root_and_leaves_tests_fixtures_and_caches_out(tmp_path: Path):
    archive = build_source_archive(make_package(tmp_path), tmp_path / "out")
    assert archive.name == "sourcedir.tar.gz"
    with tarfile.open(archive, "r:gz") as tar:
        assert sorted(tar.getnames()) == ["gpt/model.py", "requirements.txt", "train.py"]
        assert tar.extractfile("train.py").read() == b"print('train')\n"


def test_archive_is_byte_identical_across_builds(tmp_path: Path):
    src = make_package(tmp_path)
    first = build_source_archive(src, tmp_path / "a").read_bytes()
    (src / "train.py").touch()  # a new mtime must not change the bytes
    assert build_source_archive(src, tmp_path / "b").read_bytes() == first


def test_the_real_package_ships_its_entry_points_and_requirements():
    names = {p.as_posix() for p in source_files()}
    assert set(ENTRY_POINTS.values()) <= names  # the scripts the job requests name
    assert {"requirements.txt", "data/token_shards.py", "contract/presets.json"} <= names
    assert not any(n.endswith("_test.py") for n in names)
    assert not FIXTURES & names


def test_no_shipped_module_imports_a_fixture():
    fixtures = {Path(f).stem for f in FIXTURES}
    for relative in (r for r in source_files() if r.suffix == ".py"):
        for node in ast.walk(ast.parse((TRAINING_DIR / relative).read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not fixtures & {n.rsplit(".", 1)[-1] for n in names}, relative


def test_a_wheelhouse_ships_and_pip_is_pointed_at_it(tmp_path: Path):
    src = make_package(tmp_path)
    (src / "wheels").mkdir()
    (src / "wheels" / "tokenizers-0.23.3-cp310-abi3-manylinux_2_17_x86_64.whl").write_bytes(b"wheel")
    with tarfile.open(build_source_archive(src, tmp_path / "out"), "r:gz") as tar:
        assert "wheels/tokenizers-0.23.3-cp310-abi3-manylinux_2_17_x86_64.whl" in tar.getnames()
        requirements = tar.extractfile("requirements.txt").read().decode()
    assert requirements == "--no-index\n--find-links wheels\ntokenizers==0.23.3\n"
    assert (src / "requirements.txt").read_text() == "tokenizers==0.23.3\n"  # the source is left as it was
