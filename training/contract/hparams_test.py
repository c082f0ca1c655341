import json

import pytest

from contract.hparams import (
    SCHEMA,
    SHOWN_CHARS,
    HyperparameterError,
    _decode,
    check_hyperparameters,
    parse_args,
    source_weights,
    str2bool,
)


def test_defaults_come_from_the_sagemaker_environment():
    env = {"SM_CHANNEL_TRAIN": "/opt/ml/input/data/train", "SM_MODEL_DIR": "/opt/ml/model", "SM_OUTPUT_DIR": "/o"}
    args = parse_args([], env)
    assert args.train_dir == "/opt/ml/input/data/train" and args.validation_dir is None
    assert args.export_dir == "/opt/ml/model" and args.output_dir == "/o"
    assert args.model_preset == "gpt3-125m" and args.use_xla == "auto" and args.checkpoint_dir == "/opt/ml/checkpoints"


def test_sm_hps_json_encoded_strings_and_boolean_strings():
    hps = {
        "model_preset": '"tiny"',
        "use_xla": "False",
        "recompute": "True",
        "max_steps": "7",
        "dropout": 0.1,
        "async_checkpoint": False,
        "model_dir": '"s3://bucket/job/model"',
    }
    args = parse_args([], {"SM_HPS": json.dumps(hps)})
    assert args.model_preset == "tiny"
    assert args.use_xla is False and args.recompute == "full" and args.async_checkpoint is False
    assert args.max_steps == 7 and args.dropout == 0.1
    assert args.ignored == ["--model_dir"]


def test_command_line_wins_and_false_is_false():
    env = {"SM_HPS": json.dumps({"use_xla": "True", "max_steps": "7"})}
    args = parse_args(["--use_xla", "False", "--max_steps", "9", "--model_preset", '"small"'], env)
    assert args.use_xla is False and args.max_steps == 9 and args.model_preset == "small"


@pytest.mark.parametrize(("text", "value"), [("True", True), ("false", False), ("1", True), ("0", False)])
def test_str2bool(text, value):
    assert str2bool(text) is value


def test_a_non_boolean_is_an_error():
    with pytest.raises(SystemExit):
        parse_args(["--use_xla", "maybe"], {})


def test_pipeline_hyperparameters_default_to_no_pipeline():
    args = parse_args([], env={})
    assert (args.model_parallel_degree, args.microbatches) == (1, 0)
    args = parse_args([], env={"SM_HPS": '{"model_parallel_degree": 4, "microbatches": 8}'})
    assert (args.model_parallel_degree, args.microbatches) == (4, 8)


@pytest.mark.parametrize(
    "hps",
    [{"lerning_rate": 0.001}, {"warmup": 7}, {"learning": 0.5}, {"warmup_steps": "many"}, {"dropout": 1.5}],
)
def test_unknown_names_abbreviations_and_bad_values_are_refused(hps, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args([], {"SM_HPS": json.dumps({k: json.dumps(v) for k, v in hps.items()})})
    assert exit_info.value.code == 2
    assert next(iter(hps)) in capsys.readouterr().err


def test_sagemaker_names_are_set_aside_on_the_command_line_too():
    argv = ["--sagemaker_mpi_custom_mpi_options", "-x NCCL_DEBUG=WARN", "--model_dir", "/opt/ml/model"]
    args = parse_args([*argv, "--max_steps", "3"], {"SM_HPS": '{"sagemaker_program": "\\"train.py\\""}'})
    assert args.max_steps == 3
    assert args.ignored == ["--sagemaker_program", "--sagemaker_mpi_custom_mpi_options", "--model_dir"]


def test_check_hyperparameters_names_the_field_and_what_is_expected():
    assert check_hyperparameters({"warmup_steps": 7, "use_xla": False, "sagemaker_region": "x"}) == {
        "warmup_steps": 7,
        "use_xla": False,
    }
    with pytest.raises(HyperparameterError, match=r"lerning_rate: .*did you mean 'learning_rate'"):
        check_hyperparameters({"lerning_rate": 0.001})
    with pytest.raises(HyperparameterError, match=r"warmup_steps: 'many' is not valid; expected an integer from 0 to "):
        check_hyperparameters({"warmup_steps": "many"})
    with pytest.raises(HyperparameterError, match=r"precision: 'fp8' .* one of fp32, bf16, fp16"):
        check_hyperparameters({"precision": "fp8"})


def test_every_schema_default_is_a_value_of_its_kind():
    for h in SCHEMA:
        if h.default is not None:
            assert h.kind(_decode(json.dumps(h.default))) == h.default, h.name


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("learning_rate", "NaN"),
        ("learning_rate", float("nan")),
        ("dropout", "nan"),
        ("weight_decay", "Infinity"),
        ("sample_temperature", float("inf")),
        ("grad_clip", "-Infinity"),
        ("sample_tokens", 10**9),
        ("eval_batches", 10**9),
        ("shuffle_buffer", 10**12),
        ("keep_checkpoints", 10**9),
        ("vocab_size", 2**33),
        pytest.param("seed", 10**5000, id="seed-5000-digits"),
        pytest.param("seed", "9" * 5000, id="seed-5000-digit-string"),
        ("sample_prompt", "--export_dir=/tmp/x"),
        ("health_rules", "-h"),
    ],
)
def test_non_finite_huge_and_option_like_values_are_refused(name, value):
    with pytest.raises(HyperparameterError) as error:
        check_hyperparameters({name: value})
    assert str(error.value).startswith(f"{name}: ") and len(str(error.value)) < 2 * SHOWN_CHARS + 200


def test_every_number_has_a_stated_range():
    for h in SCHEMA:
        if h.kind.parse in (int, float) or h.kind.expected.startswith(("an integer", "a finite number")):
            assert h.kind.low is not None and h.kind.high is not None, h.name


def test_recompute_takes_a_mode_or_a_boolean():
    modes = {text: parse_args(["--recompute", text], {}).recompute for text in ("attention", "MLP", "false", "True")}
    assert modes == {"attention": "attention", "MLP": "mlp", "false": "none", "True": "full"}
    assert parse_args([], {}).recompute == "none"
    with pytest.raises(SystemExit):
        parse_args(["--recompute", "layers"], {})


def test_use_xla_is_auto_or_a_boolean():
    assert [parse_args(["--use_xla", t], {}).use_xla for t in ("auto", '"auto"', "True", "false")] == [
        "auto",
        "auto",
        True,
        False,
    ]


def test_source_weights_parse_sorted_by_name_and_empty_is_no_mix():
    assert source_weights(parse_args(["--source_weights", "web=0.7, code-2=0.3"], {}).source_weights) == {
        "code-2": 0.3,
        "web": 0.7,
    }
    assert source_weights(parse_args([], {}).source_weights) == {}
    assert check_hyperparameters({"source_weights": "a=1,b=3"}) == {"source_weights": "a=1,b=3"}


@pytest.mark.parametrize(
    "value",
    ["web", "web=", "web=0", "web=-1", "web=nan", "web=inf", "Web=1", "-web=1", "a=1,a=2", "se=1", "se-x=1",
     "a" * 33 + "=1", "web=x"],
)  # fmt: skip
def test_bad_source_weights_are_refused_in_one_line_naming_the_field(value):
    with pytest.raises(HyperparameterError) as error:
        check_hyperparameters({"source_weights": value})
    message = str(error.value)
    assert message.startswith("source_weights: ") and "name=weight pairs" in message and "\n" not in message


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("adam_beta1", 1, "a finite number at least 0 and less than 1"),  # NaN weights after one step
        ("adam_beta2", 1.0, "a finite number at least 0 and less than 1"),  # nothing trains
        ("learning_rate", 0, "a finite number greater than 0 and at most 1"),  # nothing trains
        ("dropout", 1, "a finite number at least 0 and less than 1"),  # keeps nothing
    ],
)
def test_a_range_s_end_that_the_maths_cannot_take_is_out_and_said_so(name, value, expected):
    """Issue 50, item 4: each end of a range says whether it is included."""
    with pytest.raises(HyperparameterError) as refused:
        check_hyperparameters({name: value})
    assert str(refused.value) == f"{name}: {value!r} is not valid; expected {expected}"
    closed = {"adam_beta1": 0, "adam_beta2": 0.999, "learning_rate": 1, "dropout": 0.5}[name]
    assert check_hyperparameters({name: closed}) == {name: closed}
