import ast

from infra.training_code import SHARED_FILES, SHARED_MODULES, TRAINING_ROOT, training_module


def test_shared_modules_import_only_the_standard_library():
    for relative in SHARED_MODULES.values():
        tree = ast.parse((TRAINING_ROOT / relative).read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for name in names:
                assert name.split(".")[0] in {*__import__("sys").stdlib_module_names, "__future__"}, (relative, name)


def test_loaded_modules_are_the_training_files():
    assert training_module("presets").block_parameters(768) == 12 * 768 * 768 + 13 * 768
    assert "learning_rate" in training_module("hparams").BY_NAME
    assert all((TRAINING_ROOT / f).is_file() for f in SHARED_FILES)


def test_the_contract_package_holds_exactly_the_shared_files():
    contract = TRAINING_ROOT / "contract"
    files = {p.relative_to(TRAINING_ROOT).as_posix() for p in contract.iterdir() if p.is_file()}
    assert {f for f in files if not f.endswith(("_test.py", "__init__.py"))} == set(SHARED_FILES)
