"""Training input: the token shards preprocessing writes, read as one global stream of sequences.

token_shards.py     the on-disk format (TFRecord shards, the manifest) shared with preprocessing
sequence_order.py   the global order of the sequences (a seeded permutation per epoch, or shuffled blocks)
channel.py          a SageMaker input channel read with ``tf.data``: training stream and evaluation set
"""
