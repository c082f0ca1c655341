from compiled_memory_bench import CASES, estimate_bytes, out_of_bounds

from infra.estimate.memory import device_memory
from infra.training_code import model_presets


def test_the_estimate_is_the_micro_steps_tensors_without_the_optimizer_or_the_running_sum():
    case = ("gpt3-1.3b", 50_257, 2_048, 4, "bf16", True)  # prod's micro-step, the last case
    assert case == CASES[-1]
    shape = model_presets()["gpt3-1.3b"]
    n = shape.parameters(50_257, 2_048)
    args = {"vocab_size": 50_257, "sequence_length": 2_048, "micro_batch": 4, "precision": "bf16", "optimizer": "adamw"}
    prod = device_memory(shape, recompute=True, model_parallel_degree=1, accumulation_steps=4, xla=True, **args)
    assert prod.weights == 4 * n and prod.gradients == 4 * n  # compiled: no 16-bit copies of the weights
    assert estimate_bytes(case) == prod.total - prod.overhead - 8 * n - 4 * n  # less Adam's m, v and the sum


def test_an_estimate_more_than_ten_percent_off_the_compilers_figure_is_out_of_bounds():
    assert not out_of_bounds(109_900, 100_000) and not out_of_bounds(90_100, 100_000)
    assert out_of_bounds(110_100, 100_000) and out_of_bounds(89_900, 100_000)
