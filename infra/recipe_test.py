from infra.recipe import recipe_for, recipe_summary


def test_the_prod_stage_trains_at_the_papers_peak():
    # gpt3-1.3b, 1 M tokens a step, 300 B tokens (cdk.json's prod): Table 2.1's 2.0e-4, no departure
    recipe = recipe_for("gpt3-1.3b", 1_048_576, 300_000_000_000)
    assert recipe_summary(recipe) == {"peak_lr": 2.0e-4, "warmup_steps": 358, "decay_steps": 247_955, "departures": []}


def test_given_hyperparameters_are_departures():
    recipe = recipe_for("gpt3-125m", 524_288, 10**9, {"learning_rate": 1e-3, "checkpoint_every": 5})
    assert recipe.peak_lr == 1e-3
    assert recipe.departures[0] == "peak learning rate 0.001 (gpt3-125m's recipe: 0.0006)"
    assert recipe.departures[1].startswith("decay over the run's 1,908 steps")
