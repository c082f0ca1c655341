"""Preprocessing of Pile-format text: reading inputs, training the tokenizer, packing token shards.

The entry point is ``training/preprocess.py``; the on-disk result is described in ``token_shards``.
"""
