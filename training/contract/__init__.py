"""The contract shared with deploy time: standard-library modules that infra loads by path.

    hparams.py    the hyperparameter schema train.py's parser is built from (names, kinds, ranges)
    batch.py      the batch arithmetic (accumulation steps, divisibility, pipeline passes)
    recipe.py     the learning-rate recipe of a run and its departures from the preset's
    presets.py    the model presets (presets.json) and the per-block parameter formula
    health.py     the training health rules, their thresholds and defaults
    balance.py    the split of a model's blocks into pipeline stages
    preprocess_options.py  preprocess.py's options, which its parser and the Plan step's job arguments are built from

They import nothing but the standard library, and each other not at all: infra loads each file on its own
(``infra/training_code.py``), for synthesis and the Plan step, where TensorFlow is not installed.
"""
