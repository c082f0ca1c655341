"""The training run: the loop and what it drives.

loop.py               the run: pre-flight checks, training, evaluation, checkpoints, the exports
job.py                the SageMaker job around it: inputs, channels and the cluster
parallelism.py        data-parallel or pipelined, chosen in one place: engine, model, trainer
engines.py            the Engine protocol, the data-parallel engines (tf.distribute, Horovod API), the cluster start-up
trainer.py            the step: accumulation, one all-reduce, loss scaling, clipping, AdamW
pipeline_trainer.py   the pipelined step (GPipe passes per replica, all-reduce per stage) and its engine
schedule.py           the learning rate: linear warm-up, cosine decay
checkpoint.py         checkpoints of weights, optimizer and data position; resume
compile_cache.py      XLA's persistent compilation cache in the checkpoint folder (set before TensorFlow starts)
stop_signal.py        SIGTERM turned into a checkpoint at the next step boundary
"""
