"""One generation request against an exported model, as the endpoint would answer it.

Run as a process (it imports TensorFlow): ``python -m local.endpoint MODEL_DIR PROMPT [MAX_NEW_TOKENS]``.
Prints ``[{"generated_text": ...}]``, the response shape of Hugging Face text-generation endpoints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def generate(model_dir: Path, prompt: str, max_new_tokens: int = 32) -> list[dict[str, str]]:
    import tensorflow as tf
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    serving = tf.saved_model.load(str(model_dir / "1")).signatures["serving_default"]
    prompt_ids = tokenizer.encode(prompt).ids or [tokenizer.token_to_id("<|endoftext|>")]
    out = serving(
        prompt_ids=tf.constant([prompt_ids], tf.int32),
        max_new_tokens=tf.constant(max_new_tokens, tf.int32),
        temperature=tf.constant(0.0, tf.float32),
        seed=tf.constant(0, tf.int32),
    )
    continuation = out["token_ids"].numpy()[0].tolist()
    return [{"generated_text": prompt + tokenizer.decode(continuation)}]


if __name__ == "__main__":
    tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    print(json.dumps(generate(Path(sys.argv[1]), sys.argv[2], tokens)))
