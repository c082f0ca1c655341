import numpy as np
import pytest
import tensorflow as tf

from gpt.model import GPT
from gpt.pipeline.model import PipelinedGPT, same_device, stage_of

pytestmark = pytest.mark.usefixtures("two_logical_cpus")
DEVICES = ["/CPU:0", "/CPU:1"]
VOCAB, LENGTH = 97, 16


def pipelined(**kwargs) -> PipelinedGPT:
    return PipelinedGPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, seed=3, devices=DEVICES, **kwargs)


def test_each_stages_variables_live_on_its_device():
    model = pipelined(dropout=0.1)
    assert model.stage_blocks == [range(0, 1), range(1, 2)]
    first, second = (tf.DeviceSpec.from_string(d) for d in DEVICES)
    on_first = [model.token_embedding, model.position_embedding, model.blocks[0]]
    on_second = [model.blocks[1], model.ln_f]
    for layer in on_first:
        assert layer.weights and all(same_device(v, first) for v in layer.weights), layer.name
    for layer in on_second:
        assert layer.weights and all(same_device(v, second) for v in layer.weights), layer.name
    # The dropout seed states (created at construction, not at build) follow their blocks.
    assert same_device(model.seed_generator.state, first) and same_device(model.blocks[0].seed_generator.state, first)
    assert same_device(model.blocks[1].seed_generator.state, second)
    # Stage 1 holds block 1 (12 weights), its seed state and the final LayerNorm (2).
    assert [stage_of(v, DEVICES) for v in model.variables].count(1) == 12 + 1 + 2
    # The last stage reads the tied embedding; only the first holds it.
    embeddings = model.token_embedding.embeddings
    assert any(v is embeddings for v in model.stage_inputs(1))
    assert not any(v is embeddings for v in model.stage_variables(1))


def test_same_variables_and_outputs_as_the_single_device_model():
    model = pipelined()
    single = GPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, seed=3)
    # Same paths below the model's own name (a second model in a process is named gpt_1).
    assert [v.path.split("/", 1)[-1] for v in model.variables] == [v.path.split("/", 1)[-1] for v in single.variables]
    assert model.get_config() == {**single.get_config(), "name": "gpt"}  # serialised as a plain GPT
    single.set_weights(model.get_weights())
    ids = tf.constant(np.random.default_rng(0).integers(0, VOCAB, [2, LENGTH]), tf.int32)
    np.testing.assert_array_equal(model(ids).numpy(), single(ids).numpy())  # same ops, same order: bit-identical


def test_more_stages_than_blocks_is_refused():
    with pytest.raises(ValueError, match="cannot split 2 blocks into 3 non-empty stages"):
        PipelinedGPT.from_preset("tiny", vocab_size=VOCAB, sequence_length=LENGTH, devices=["/CPU:0"] * 3)
