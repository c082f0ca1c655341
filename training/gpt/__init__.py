"""A GPT decoder in TensorFlow/Keras 3: the model, its presets and text generation."""
