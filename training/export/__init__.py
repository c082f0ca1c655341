"""The trained model in the forms it leaves the job in.

saved_model.py    the float32 SavedModel TensorFlow Serving loads, with the serving hooks and the tokenizer
hugging_face.py   the same weights as a Hugging Face GPT-2 checkpoint (``<export_dir>/hf``)
"""
