"""Pipeline parallelism: a GPT's blocks split into stages on several devices, micro-batches overlapped (GPipe).

    partition.py   which blocks each stage holds (balanced by parameter count, embeddings included)
    model.py       PipelinedGPT: a GPT whose stages' weights and compute live on their own devices
    gpipe.py       the GPipe schedule: forward and backward of M micro-batches, gradients summed

The training step around it (data parallelism over pipeline replicas, AdamW) is ``run/pipeline_trainer.py``.
"""
