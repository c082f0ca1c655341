import pytest
import tensorflow as tf
from gpt.model import GPT

from contract.presets import get_preset, load_presets, parameter_count

GPT3_VOCAB, GPT3_CONTEXT = 50_257, 2_048


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_closed_form_count_equals_a_built_model(name):
    model = GPT.from_preset(name, vocab_size=384, sequence_length=24)
    assert model.count_params() == parameter_count(get_preset(name), vocab_size=384, sequence_length=24)


@pytest.mark.parametrize("name", [n for n, p in load_presets().items() if p.paper_params])
def test_gpt3_presets_match_the_papers_rounded_counts(name):
    preset = get_preset(name)
    count = parameter_count(preset, vocab_size=GPT3_VOCAB, sequence_length=GPT3_CONTEXT)
    # The paper rounds (125M, 1.3B ...) and uses widths not divisible by the head count for two rows; 3% covers both.
    assert count == pytest.approx(preset.paper_params, rel=0.03), f"{name}: {count:,} vs {preset.paper_params:,}"


def test_gpt3_small_exact_count():
    # 50,257 x 768 + 2,048 x 768 + 12 x (12 x 768^2 + 13 x 768) + 2 x 768
    assert parameter_count(get_preset("gpt3-125m"), vocab_size=GPT3_VOCAB, sequence_length=GPT3_CONTEXT) == 125_226_240


def test_every_preset_has_heads_dividing_the_width_and_a_gpt_feed_forward_4x():
    for preset in load_presets().values():
        assert preset.d_model % preset.n_head == 0 and preset.n_head % preset.kv_heads == 0
        assert preset.d_ff == 4 * preset.d_model or preset.architecture == "llama"


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ValueError, match="gpt3-125m"):
        get_preset("gpt3-175b")


def test_tiny_model_output_shape():
    logits = GPT.from_preset("tiny", vocab_size=100, sequence_length=16)(tf.zeros([3, 10], tf.int32))
    assert logits.shape == (3, 10, 100) and logits.dtype == tf.float32
