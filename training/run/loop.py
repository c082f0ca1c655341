"""The training run: builds everything from the hyperparameters, trains, evaluates, checkpoints, exports.

Only the chief (worker 0) prints metric lines, writes checkpoints and exports; every worker trains.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from contract.batch import accumulation_steps, global_batch
from contract.hparams import metric_key, source_weights
from contract.presets import Preset, flops_per_token, get_shape
from contract.recipe import Recipe, RecipeError, run_recipe
from data import token_shards
from data.channel import Channel, evaluation_dataset, token_dataset
from data.source_mix import mix_plan
from export.hugging_face import HF_DIR, export_hf
from export.saved_model import export, float32_copy
from gpt.model import padded_vocab
from observe.metrics import (
    Evaluation,
    device_peak_tflops,
    emit,
    model_flops_utilisation,
    train_line,
    valid_line,
)
from observe.observer import RunObserver
from pile.bpe import token_byte_lengths

from run import parallelism
from run.checkpoint import Checkpointer
from run.engines import Engine, any_worker
from run.job import JobError, check_inputs, cluster
from run.schedule import WarmupCosine
from run.stop_signal import StopSignal
from run.trainer import PRECISIONS, Trainer


class NonFiniteLoss(FloatingPointError):
    """More steps than the health rule allows had a NaN or infinite loss or gradient; none reached the weights."""


def configure_tensorflow(args) -> None:
    """Threads and determinism; both must be set before TensorFlow starts its runtime."""
    try:
        if args.cpu_threads > 0:
            tf.config.threading.set_intra_op_parallelism_threads(args.cpu_threads)
            tf.config.threading.set_inter_op_parallelism_threads(min(args.cpu_threads, 2))
    except RuntimeError:  # already initialised (a second run in one process, e.g. tests)
        pass
    if args.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(args.seed)  # identical initial weights on every worker and every rerun


def weights_digest(model) -> str:
    """SHA-256 of every weight's bytes: equal digests on two workers mean bit-identical weights."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()[:16]


class TrainingRun:
    """One training job, from checked inputs to exported model.

    Args:
        args: the parsed hyperparameters (``hparams.parse_args``).
        env: the process environment (SM_HOSTS, SM_CURRENT_HOST, SM_NUM_GPUS, TF_CONFIG).

    Usage (a dataset in /data; ``loop_test.py`` runs it)::

        run = TrainingRun(parse_args(["--train_dir", "/data", "--model_preset", "tiny"]), os.environ)
        run.train()
        run.finish()
    """

    def __init__(self, args, env):
        self.args = args
        self.inputs = check_inputs(args)  # before any compute
        self.source_weights = source_weights(args.source_weights)  # {} = no mix
        configure_tensorflow(args)
        self.parallelism = parallelism.for_run(args)  # data parallel or pipelined: all that differs is there
        self.engine = self._engine(env)
        self.is_chief = self.engine.is_chief
        self.sequence_length = self.inputs.sequence_length
        self.shape, self.accumulation = self._shape_and_accumulation()
        self.global_batch_tokens = global_batch(
            args.micro_batch_size, self.sequence_length, self.engine.num_replicas, self.accumulation
        )
        self.recipe = self._recipe()
        self.schedule = WarmupCosine(
            self.recipe.peak_lr, self.recipe.warmup_steps, self.recipe.decay_steps, args.min_lr_ratio
        )
        self.model, self.trainer = self._model_and_trainer()
        self.checkpointer = Checkpointer(
            args.checkpoint_dir,
            self.model,
            self.trainer,
            keep=args.keep_checkpoints,
            is_chief=self.is_chief,
            run_config=self.run_config(),
            async_save=args.async_checkpoint,
            sequences_per_step=self.global_batch_tokens // self.sequence_length,
            host=self.engine.worker,
            hosts=self.engine.workers,  # every host writes its share of each checkpoint
            all_done=lambda written: not any_worker(self.engine, not written),
        )
        self.start_step = self.checkpointer.restore_latest()
        self.stopped_at: int | None = None  # the step a SIGTERM stopped training at
        self.flops_per_token = flops_per_token(
            self.shape, n_params=self.model.count_params(), sequence_length=self.sequence_length
        )
        self.peak_tflops = args.peak_tflops or device_peak_tflops()

    def _engine(self, env) -> Engine:
        hosts, current_host, num_gpus = cluster(env)
        if num_gpus is None:
            num_gpus = len(tf.config.list_physical_devices("GPU"))
        return self.parallelism.make_engine(hosts, current_host, num_gpus, env)

    def _shape_and_accumulation(self) -> tuple[Preset, int]:
        """The model's shape and the micro-batches accumulated per step; JobError if they do not fit together."""
        a = self.args
        try:
            shape = get_shape(a.model_preset, a.n_layer, a.d_model, a.n_head)
            if shape.architecture != "gpt":
                raise ValueError(
                    f"model_preset {a.model_preset}: train.py trains the gpt presets only (this is a "
                    f"{shape.architecture} shape: gpt/architectures.py builds it, the job does not yet)"
                )
            steps = accumulation_steps(
                a.global_batch_tokens, a.micro_batch_size, self.sequence_length, self.engine.num_replicas
            )
            return shape, self.parallelism.accumulation_steps(steps)
        except ValueError as error:  # BatchError, or heads that do not divide the width
            raise JobError(str(error)) from error

    def _recipe(self) -> Recipe:
        a = self.args
        try:
            return run_recipe(
                self.shape,
                global_batch_tokens=self.global_batch_tokens,
                max_steps=a.max_steps,
                learning_rate=a.learning_rate,
                lr_reference_tokens=a.lr_reference_tokens,
                warmup_steps=a.warmup_steps,
                decay_steps=a.decay_steps,
            )
        except RecipeError as error:
            raise JobError(str(error)) from error

    def _model_and_trainer(self) -> tuple[keras.Model, Trainer]:
        a = self.args
        return self.parallelism.build(
            self.engine,
            self.schedule,
            self._model_arguments(),
            accumulation_steps=self.accumulation,
            micro_batch_size=a.micro_batch_size,
            sequence_length=self.sequence_length,
            precision=a.precision,
            grad_clip=a.grad_clip,
            initial_loss_scale=a.initial_loss_scale,
            token_bytes=token_byte_lengths(self.inputs.tokenizer, self.inputs.vocab_size),
        )

    def _model_arguments(self) -> dict:
        a = self.args
        return {
            "vocab_size": self.inputs.vocab_size,
            "sequence_length": self.sequence_length,
            "n_layer": self.shape.n_layer,
            "d_model": self.shape.d_model,
            "n_head": self.shape.n_head,
            "dropout": a.dropout,
            "recompute": a.recompute,
            "seed": a.seed,
            "dtype": PRECISIONS[a.precision],
        }

    @property
    def devices(self) -> int:
        """Devices training over all workers: replicas x pipeline stages."""
        return self.engine.num_replicas * self.args.model_parallel_degree

    def run_config(self) -> dict:
        """What a checkpoint must agree with ("model") or should agree with ("data") to be resumed."""
        p = self.shape
        model = {"n_layer": p.n_layer, "d_model": p.d_model, "n_head": p.n_head}
        model.update(vocab_size=self.inputs.vocab_size, sequence_length=self.sequence_length)
        rows = padded_vocab(self.inputs.vocab_size)
        if rows != self.inputs.vocab_size:  # checkpoints from before the padding hold vocab_size rows: refused
            model["embedding_rows"] = rows
        # The data order depends on these, not on the number of workers (data/channel.py).
        data = {"order": self.args.data_order, "seed": self.args.seed, "shuffle_buffer": self.args.shuffle_buffer}
        data.update(global_batch_sequences=self.global_batch_tokens // self.sequence_length)
        if self.source_weights:
            data["source_weights"] = self.source_weights
        return {"model": model, "data": data}

    def log(self, line: str) -> None:
        if self.is_chief:
            emit(line)

    def train_dataset(self) -> tf.data.Dataset:
        return token_dataset(
            self.inputs.train,
            sequence_length=self.sequence_length,
            batch_shape=(self.engine.local_replicas, self.accumulation, self.args.micro_batch_size),
            worker=self.engine.worker,
            workers=self.engine.workers,
            order=self.args.data_order,
            seed=self.args.seed,
            shuffle_buffer=self.args.shuffle_buffer,
            start_sequence=self.checkpointer.start_sequence,
            source_weights=self.source_weights,
        )

    def mix_fields(self) -> str:
        """The [config] line's mix: each source's weight, sequences over the run and epochs of its train split."""
        if not self.source_weights:
            return ""
        shards = sorted(self.inputs.train.shards, key=lambda shard: shard.file)
        run = self.args.max_steps * (self.global_batch_tokens // self.sequence_length)
        plan = mix_plan([s.source for s in shards], [s.sequences for s in shards], self.source_weights, run)
        return "".join(
            f" weight_{metric_key(name)}={weight:.4f} sequences_{metric_key(name)}={sequences} "
            f"epochs_{metric_key(name)}={epochs:.3f}"
            for name, weight, sequences, epochs in plan
        )

    def validation_dataset(self, batches: int | None, channel: Channel | None = None) -> tf.data.Dataset:
        """``batches`` batches per replica of the split's (or ``channel``'s) fixed sample; None: all of it."""
        return evaluation_dataset(
            channel or self.inputs.validation,
            sequence_length=self.sequence_length,
            batch_shape=(self.engine.local_replicas, self.args.micro_batch_size),
            worker=self.engine.worker,
            workers=self.engine.workers,
            batches=batches,
        )

    def validation_datasets(self, batches: int | None) -> dict[str, tf.data.Dataset]:
        """The split's (key "") and, when its shards are of several sources, each source's apart, ``batches``
        batches per replica of each one's sample; None: every sequence once, the split's then the sources' together.
        A split (or source) smaller than its sample is read whole, each sequence once, and a line says so.
        """
        channel = self.inputs.validation
        sources = channel.sources if len(channel.sources) > 1 and "" not in channel.sources else []
        sample = (batches or 0) * self.engine.workers * self.engine.local_replicas * self.args.micro_batch_size
        parts = {"": channel, **{name: channel.of_source(name) for name in sources}}
        for name, part in parts.items():
            if part.sequences < sample:
                split = f"the validation split{f' of {name}' if name else ''}"
                self.log(f"[valid_sample] {split} holds {part.sequences} sequences, fewer than the sample of {sample}: "
                         "each evaluation reads every one once")  # fmt: skip
        datasets = {} if batches is None and sources else {"": self.validation_dataset(batches)}
        datasets.update({name: self.validation_dataset(batches, parts[name]) for name in sources})
        return datasets

    def evaluate(self, datasets: dict[str, tf.data.Dataset]) -> Evaluation:
        """The figures of ``validation_datasets``: the split's (from its sources' sums when not read apart) with
        each source's; a split of one named source is that source's."""
        sums = {name: self.trainer.evaluation_sums(dataset) for name, dataset in datasets.items()}
        whole = sums.pop("") if "" in sums else np.sum(list(sums.values()), axis=0)
        evaluation = Evaluation.from_sums(*whole)
        sources = {name: Evaluation.from_sums(*s) for name, s in sums.items()}
        if not sources and self.inputs.validation.sources != [""]:
            sources = {self.inputs.validation.sources[0]: evaluation}
        return dataclasses.replace(evaluation, sources=sources)

    def train(self) -> None:
        a, trainer = self.args, self.trainer
        self.log(
            f"[config] engine={self.engine.name} workers={self.engine.workers} replicas={self.engine.num_replicas} "
            f"params={self.model.count_params()} global_batch_tokens={self.global_batch_tokens} "
            f"accumulation_steps={self.accumulation} peak_lr={self.recipe.peak_lr:.3e} precision={a.precision} "
            f"start_step={self.start_step} max_steps={a.max_steps} warmup_steps={self.recipe.warmup_steps} "
            f'decay_steps={self.recipe.decay_steps} departs_from_recipe="{self.recipe.describe()}"'
            + self.parallelism.describe(self.model, trainer)
            + self.mix_fields()
        )
        batches = iter(self.train_dataset())
        validation = self.validation_datasets(a.eval_batches) if self.inputs.validation else None
        last_saved = self.start_step
        observer = RunObserver(a, self.engine, self.model.trainable_variables, self.is_chief, trainer.tokens_per_step)
        stop = StopSignal(self.engine)
        try:
            observer.start()
            for step in range(self.start_step + 1, a.max_steps + 1):
                result = observer.step(step, trainer.train_step, observer.next_batch(batches))  # launched, not read
                if step == self.start_step + 1:
                    self.engine.after_first_step(self.model.variables + trainer.optimizer.variables)
                    result.wait()  # the first step compiles: the time left is timed from its end
                    first_done = time.perf_counter()
                if step % a.log_every == 0 or step == a.max_steps:
                    self.log_window(step, result, observer, first_done)
                pause = time.perf_counter()  # evaluation and checkpoints do not count against tokens_per_sec
                if validation is not None and (step % a.eval_every == 0 or step == a.max_steps):
                    evaluation = self.evaluate(validation)
                    self.log(valid_line(step, evaluation))
                    observer.validated(step, evaluation)
                if (a.checkpoint_every and step % a.checkpoint_every == 0) or step == a.max_steps:
                    self.checkpointer.save()
                    last_saved = step
                if stop.agreed():  # SIGTERM on any worker: all checkpoint this step and leave
                    if last_saved != step:
                        self.checkpointer.save()
                    self.stopped_at = step
                    break
                observer.pause(time.perf_counter() - pause)
            if validation is not None and self.stopped_at is None and a.max_steps > self.start_step:
                whole = self.evaluate(self.validation_datasets(None))  # the figure to quote: every sequence once
                self.log(valid_line(a.max_steps, whole, "valid_split"))
                observer.validated_split(a.max_steps, whole)
        finally:
            self.checkpointer.wait()  # a save in flight holds good weights: let it finish
            observer.close()  # stops the heartbeat and profiler; the chief writes the report
            stop.restore()
        if self.stopped_at is not None:
            self.log(f"[stopped] step={self.stopped_at} checkpointed {stop.seconds_since():.2f} s after SIGTERM")
        # Every worker prints its weights' digest: equal digests mean the workers stayed in sync.
        step, digest = int(trainer.step.read_value()), weights_digest(self.model)
        print(f"[final] worker={self.engine.worker} step={step} weights={digest}", flush=True)

    def log_window(self, step: int, result, observer: RunObserver, first_done: float) -> None:
        """The logging window ending at ``step``: its one read of a step's figures, the [train] and [health] lines;
        NonFiniteLoss once more steps were skipped in the rule's window than it allows."""
        a = self.args
        loss = result.loss  # the window's one host read: it waits for the device to finish the window's steps
        times = observer.times()
        tokens_per_sec = self.trainer.tokens_per_step / times.step_s
        mfu = model_flops_utilisation(tokens_per_sec, self.flops_per_token, self.devices, self.peak_tflops)
        taken = step - self.start_step - 1  # every step since the first, pauses included, at this pace
        left = (time.perf_counter() - first_done) / taken * (a.max_steps - step) if taken else -1
        self.log(train_line(step, loss, result.learning_rate, tokens_per_sec, mfu, a.max_steps, left))
        observer.window(step, result, tokens_per_sec, mfu, times)
        skipped, rules = observer.recently_skipped(), observer.rules
        if skipped > rules.max_skipped_steps:
            raise NonFiniteLoss(
                f"{skipped} steps skipped for a non-finite loss or gradient in the {rules.skipped_window_steps} steps "
                f"to step {step} (health_rules max_skipped_steps {rules.max_skipped_steps}): the weights hold none "
                f"of them, and the newest checkpoint is intact; lower the learning rate or raise its warm-up"
            )

    def leave_together(self) -> None:
        """Every worker waits here for the others (the chief exports first), so none sees another vanish."""
        any_worker(self.engine, False)

    def finish(self) -> None:
        """Chief: export the SavedModel and tokenizer (and the Hugging Face checkpoint), then print a sample."""
        if not self.is_chief:
            return
        with self.parallelism.export_device():
            copy = float32_copy(self.model)
        serving = export(copy, self.args.export_dir, self.inputs.train.tokenizer_path)
        self.log(f"[export] {serving.path}")
        if self.args.hf_checkpoint:
            hf = export_hf(
                copy, Path(self.args.export_dir) / HF_DIR, self.inputs.train.tokenizer_path, self.args.dropout
            )
            self.log(f"[export] {hf} (Hugging Face GPT-2)")
        if self.args.sample_tokens > 0:
            tokenizer = self.inputs.tokenizer
            eot = tokenizer.token_to_id(token_shards.END_OF_TEXT)
            prompt = tokenizer.encode(self.args.sample_prompt).ids if self.args.sample_prompt else [eot]
            ids = serving.generate(  # the exported signature's function, already traced
                tf.constant([prompt[-self.sequence_length :]], tf.int32),
                tf.constant(self.args.sample_tokens),
                tf.constant(self.args.sample_temperature, tf.float32),
                tf.constant(self.args.seed),
            )["token_ids"]
            text = self.args.sample_prompt + tokenizer.decode(ids[0].numpy().tolist())
            self.log("[sample] " + text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r"))
