"""The decoder a preset's ``architecture`` names (``contract.presets.ARCHITECTURES``): GPT or Llama.

Example:
    >>> from contract.presets import get_shape
    >>> type(build_model(get_shape("llama-tiny"), vocab_size=64, sequence_length=8)).__name__
    'Llama'
"""

from __future__ import annotations

from contract.presets import ARCHITECTURES, Preset

from gpt.llama import Llama, shape_arguments
from gpt.model import GPT, Decoder


def build_model(shape: Preset, *, vocab_size: int, sequence_length: int, **kwargs) -> Decoder:
    """The decoder of ``shape``'s architecture; ``kwargs``: dropout, recompute, seed, dtype."""
    if shape.architecture == "gpt":
        arguments = {"n_layer": shape.n_layer, "d_model": shape.d_model, "n_head": shape.n_head}
        return GPT(vocab_size=vocab_size, sequence_length=sequence_length, **arguments, **kwargs)
    if shape.architecture == "llama":
        return Llama(vocab_size=vocab_size, sequence_length=sequence_length, **shape_arguments(shape), **kwargs)
    raise ValueError(f"architecture {shape.architecture!r} is not valid; expected one of {', '.join(ARCHITECTURES)}")
