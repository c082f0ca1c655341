import ast

from infra.training_code import SHARED_FILES, SHARED_MODULES, TRAINING_ROOT, recipe_for, recipe_summary, training_module


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


def test_the_prod_stage_trains_at_the_papers_peak():
    # gpt3-1.3b, 1 M tokens a step, 300 B tokens (cdk.json's prod): Table 2.1's 2.0e-4, no departure
    recipe = recipe_for("gpt3-1.3b", 1_048_576, 300_000_000_000)
    assert recipe_summary(recipe) == {"peak_lr": 2.0e-4, "warmup_steps": 358, "decay_steps": 247_955, "departures": []}


def test_given_hyperparameters_are_departures():
    recipe = recipe_for("gpt3-125m", 524_288, 10**9, {"learning_rate": 1e-3, "checkpoint_every": 5})
    assert recipe.peak_lr == 1e-3
    assert recipe.departures[0] == "peak learning rate 0.001 (gpt3-125m's recipe: 0.0006)"
    assert recipe.departures[1].startswith("decay over the run's 1,908 steps")
