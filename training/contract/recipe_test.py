import pytest

from contract.presets import get_preset
from contract.recipe import RecipeError, run_recipe


def test_the_paper_recipe_has_no_departures():
    # gpt3-1.3b: Table 2.1's 2.0e-4 at 1 M tokens; 375 M / 1,048,576 = 358 warm-up steps; 260 B / 1,048,576 = 247,955
    recipe = run_recipe(get_preset("gpt3-1.3b"), global_batch_tokens=1_048_576, max_steps=286_103)
    assert (recipe.peak_lr, recipe.warmup_steps, recipe.decay_steps) == (2.0e-4, 358, 247_955)
    assert recipe.departures == () and recipe.describe() == "none"


def test_a_different_batch_and_a_short_run_are_stated():
    recipe = run_recipe(get_preset("gpt3-125m"), global_batch_tokens=1_048_576, max_steps=1_000)
    assert recipe.peak_lr == 6.0e-4  # not scaled with the batch unless lr_reference_tokens is given
    assert recipe.decay_steps == 1_000
    assert recipe.departures == (
        "global batch 1,048,576 tokens (gpt3-125m's recipe: 524,288)",
        "decay over the run's 1,000 steps (gpt3-125m's recipe: 260,000,000,000 tokens = 247,955 steps)",
    )


def test_explicit_overrides_are_departures():
    recipe = run_recipe(
        get_preset("gpt3-125m"),
        global_batch_tokens=524_288,
        max_steps=10**6,
        learning_rate=3e-4,
        lr_reference_tokens=262_144,
        warmup_steps=10,
        decay_steps=1_000,
    )
    assert recipe.peak_lr == pytest.approx(6e-4)  # 3e-4 x 524,288 / 262,144
    assert [d.split(" (")[0] for d in recipe.departures] == ["warm-up 10 steps", "decay over 1,000 steps"]


def test_a_run_shorter_than_its_preset_s_warm_up_warms_up_over_half_of_it():
    # the local run with gpt3-125m: 375 M tokens / 4,096 a step = 91,553 warm-up steps, in a 250-step run
    recipe = run_recipe(get_preset("gpt3-125m"), global_batch_tokens=4_096, max_steps=250)
    assert (recipe.warmup_steps, recipe.decay_steps) == (125, 250)
    assert "warm-up 125 steps, half the run's 250 (gpt3-125m's recipe: 375,000,000 tokens = 91,553 steps" in (
        recipe.describe()
    )


def test_a_warm_up_that_fits_in_half_the_run_is_the_preset_s():
    recipe = run_recipe(get_preset("gpt3-1.3b"), global_batch_tokens=1_048_576, max_steps=716)
    assert recipe.warmup_steps == 358 and not [d for d in recipe.departures if d.startswith("warm-up")]


def test_an_explicit_warm_up_as_long_as_the_run_is_refused_naming_the_field():
    with pytest.raises(RecipeError, match=r"^warmup_steps: 250 steps is not shorter than the run's 250"):
        run_recipe(get_preset("small"), global_batch_tokens=4_096, max_steps=250, warmup_steps=250)
    assert run_recipe(get_preset("small"), global_batch_tokens=4_096, max_steps=250, warmup_steps=249).warmup_steps
