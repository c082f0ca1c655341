"""A GPT decoder in TensorFlow/Keras 3: the model and text generation (its presets: ``contract/presets.py``)."""
