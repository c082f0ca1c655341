"""The decoder block: pre-norm causal self-attention and a GELU feed-forward network.

    x = x + Dropout(Attention(LayerNorm(x)))      first residual
    x = x + Dropout(MLP(LayerNorm(x)))            second residual

Dropout draws its randomness from one Keras ``SeedGenerator`` per block: the block takes one seed per
call and derives a seed per dropout site from it. Inside a recomputed block (activation
checkpointing) the same seed is reused, so the recomputed forward pass drops the same units.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from contract.hparams import recompute_mode
from tensorflow.compiler.tf2xla.python import xla
from tensorflow.python.ops import control_flow_util

_GELU_C = math.sqrt(2 / math.pi)


@tf.function(jit_compile=True)
def _gelu_and_slope(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One fused pass (XLA), in float32: y = x/2 (1 + t) and its derivative
    dy/dx = (1 + t)/2 + x/2 (1 - t²) c (1 + 3 · 0.044715 x²), t = tanh(c (x + 0.044715 x³)), c = sqrt(2 / pi)."""
    x32 = tf.cast(x, tf.float32)
    t = tf.tanh(_GELU_C * (x32 + 0.044715 * x32 * x32 * x32))
    slope = 0.5 * (1 + t) + 0.5 * x32 * (1 - t * t) * _GELU_C * (1 + 3 * 0.044715 * x32 * x32)
    return tf.cast(0.5 * x32 * (1 + t), x.dtype), tf.cast(slope, x.dtype)


@tf.custom_gradient
def gelu(x: tf.Tensor):
    """GELU, tanh approximation (GPT-2's; ``keras.activations.gelu(x, approximate=True)`` to rounding).

    Keras composes it of eight elementwise operations forward and more backward, each a pass over the
    [B·T, 4d] activations. Here the forward pass is one XLA-fused pass (a GPU runs it as one kernel too) that
    writes the output and its derivative, both in ``x``'s dtype, and the gradient is one product, dy · dy/dx.
    The derivative is kept in place of ``x``, which nothing else needs (the next matmul's gradient reads the
    output): the same memory, and the tanh is taken once (timings: training/README.md, "Measurements"). Traced for
    XLA, the output and the slope pass through an optimization barrier, so that they are what the backward pass
    reads: without it XLA's GPU fusion kept the float32 tanh and the matmul's output instead, 32 bytes per element
    in bf16 where these are 16 (docs/benchmarks.md, "The compiled micro-step's memory").

    Example:
        >>> x = tf.constant([-2.0, 0.0, 1.0])
        >>> float(tf.reduce_max(abs(gelu(x) - keras.activations.gelu(x, approximate=True)))) < 1e-6
        True
    """
    y, slope = _gelu_and_slope(x)
    if in_xla():  # else XLA keeps the float32 tanh and the matmul's output, and makes the slope in the backward pass
        y, slope = xla.optimization_barrier(y, slope)
    return y, lambda dy: dy * slope


@keras.saving.register_keras_serializable(package="gpt")
class LayerNorm(keras.layers.LayerNormalization):
    """Keras' LayerNormalization over the last axis (same weights, same values), with its gradient written out.

        x̂ = (x - mean) · r,  r = 1 / sqrt(var + ε);  y = γ x̂ + β
        dL/dx = r (g - mean(g) - x̂ · mean(g x̂)),  g = γ · dL/dy

    Autodiff through Keras' formula takes about 25 small operations per normalisation; this, about 15 (timings:
    training/README.md, "Measurements"). Computed in float32 whatever the input's dtype, as Keras does.
    The custom gradient is for training only (``training=True``, which Keras passes down from the model's call):
    inference, where no gradient is taken, runs the same formula without the two identity operations a custom
    gradient adds, which a cached generation step (all small operations) would pay for.

    Example:
        >>> norm = LayerNorm(epsilon=1e-5)
        >>> norm(tf.constant([[1.0, 2.0, 3.0]])).numpy().round(3)
        array([[-1.225,  0.   ,  1.225]], dtype=float32)
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.axis not in (-1, [-1]) or self.rms_scaling or not (self.center and self.scale):
            raise ValueError("LayerNorm supports GPT's normalisation only: the last axis, centred and scaled")

    def call(self, inputs: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        epsilon = self.epsilon

        def normalize(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            centred = x - tf.reduce_mean(x, -1, keepdims=True)
            r = tf.math.rsqrt(tf.reduce_mean(tf.square(centred), -1, keepdims=True) + epsilon)
            return centred * r, r

        @tf.custom_gradient
        def normalized(x: tf.Tensor):
            x_hat, r = normalize(x)

            def grad(g: tf.Tensor) -> tf.Tensor:
                mean_g = tf.reduce_mean(g, -1, keepdims=True)
                return r * (g - mean_g - x_hat * tf.reduce_mean(g * x_hat, -1, keepdims=True))

            return x_hat, grad

        x = tf.cast(inputs, tf.float32)
        x_hat = normalized(x) if training else normalize(x)[0]
        outputs = x_hat * tf.cast(self.gamma, tf.float32) + tf.cast(self.beta, tf.float32)
        return tf.cast(outputs, self.compute_dtype)


# Replica r's dropout seeds are the shared seed state's plus r x this in its first part: the blocks' seeds sit 16
# apart from the model's (``GPT``), so the replicas' streams never meet below 65,536 blocks.
REPLICA_SEED_STRIDE = 2**20


def next_seed(generator: keras.random.SeedGenerator, stream: tf.Tensor | None) -> tf.Tensor:
    """The generator's next dropout seed for data-parallel replica ``stream`` (None: the shared stream).

    The seed state is one variable mirrored on every replica, so without ``stream`` every replica would drop the
    same units of different data. A pure function of the state: a recomputation that saved the seed reuses it.
    """
    seed = generator.next()
    if stream is None:
        return seed
    return seed + tf.stack([tf.cast(stream, seed.dtype) * REPLICA_SEED_STRIDE, tf.zeros([], seed.dtype)])


def _dropout(x: tf.Tensor, rate: float, seed: tf.Tensor | None, site: int) -> tf.Tensor:
    """Stateless dropout keyed by (block seed + site, call counter), so recomputation reproduces the mask."""
    if seed is None or rate == 0.0:
        return x
    return tf.nn.experimental.stateless_dropout(x, rate=rate, seed=seed + tf.constant([site, 0], seed.dtype))


def future_mask(length: tf.Tensor) -> tf.Tensor:
    """[T, T] bool, True where key j is after query i (masked).

    Traced for XLA, the positions pass through an optimization barrier: T is static there, and the bridge's
    constant folding would otherwise write the [T, T] result into the program as a constant (a pred[2048, 2048],
    4 MiB, per block and twice with recompute: 195 MiB of gpt3-1.3b's HLO). Through the barrier the comparison is
    made from an iota in the compiled step, which XLA fuses into the select that reads it (nothing [T, T] is
    written). Uncompiled, TensorFlow's grappler folds it once per graph, as before.
    """
    positions = tf.range(length)
    if in_xla():
        (positions,) = xla.optimization_barrier(positions)
    return positions[tf.newaxis, :] > positions[:, tf.newaxis]


def _softmax(scores: tf.Tensor) -> tf.Tensor:
    """Softmax over the last axis: TensorFlow's one-pass kernel, or, traced for XLA, exp(s - logsumexp(s)).

    XLA fuses the second form's reductions with their producers and its last exponential with the cast that
    follows, so nothing float32 and score-sized is written (``tf.nn.softmax`` lowers to a float32 exponential
    kept for the sum and the division); without XLA it is five passes where the kernel is one.
    """
    if not in_xla():
        return tf.nn.softmax(scores, axis=-1)
    top = tf.reduce_max(scores, -1, keepdims=True)
    return tf.exp(scores - top - tf.math.log(tf.reduce_sum(tf.exp(scores - top), -1, keepdims=True)))


def in_xla() -> bool:
    """Whether the graph being traced is compiled by XLA (``jit_compile``). ``GraphOrParentsInXlaContext`` is
    TensorFlow's own test for it (its while_v2 and gradients use it; not a public API)."""
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def recompute_grad(f):
    """``f`` of one tensor, its forward pass run again in the backward pass instead of its activations kept.

    The recomputation cannot start before the incoming gradient reaches it: uncompiled, a control edge; under XLA,
    which merges a second forward pass with the inputs of the first (``tf.recompute_grad``'s form) and keeps
    every activation, the input read through an optimization barrier together with the gradient, as
    ``jax.checkpoint`` does (``prevent_cse``), so the recomputation is a new value (the matmul counts:
    training/README.md, "Attention: score-sized tensors"). The input's gradient waits for the weights': a bias's
    gradient feeds nothing downstream, and TensorFlow's executor took it after later blocks' backward passes,
    keeping its input, [b·s, 4d], alive until then (docs/benchmarks.md).
    """

    @tf.custom_gradient
    def recomputed(x: tf.Tensor):
        y = f(x)

        def grad(dy: tf.Tensor, variables=None):
            if in_xla():
                x_again, dy = xla.optimization_barrier(x, dy)
            else:
                with tf.control_dependencies([dy]):
                    x_again = tf.identity(x)
            with tf.GradientTape() as tape:
                tape.watch(x_again)
                y_again = f(x_again)
            dx, *dvariables = tape.gradient(y_again, [x_again, *(variables or [])], output_gradients=dy)
            with tf.control_dependencies(dvariables):
                return tf.identity(dx), dvariables

        return y, grad

    return recomputed


def causal_attention(
    q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, rate: float = 0.0, seed: tf.Tensor | None = None
) -> tf.Tensor:
    """softmax(q kᵀ + causal mask) v over [B, H, T, head_dim] each (q already scaled), with a lean gradient.

    Forward: the scores in float32, masked by one select, the softmax in float32, and only the probabilities P
    kept, in the compute dtype (bf16 under mixed precision); the float32 scores die with the forward pass. With
    dropout, P' = dropout(P) (stateless, keyed by ``seed``) and the backward pass draws the same mask again.
    Backward, from P, the output O and dO (q already holds 1 / sqrt(head_dim); ``dS`` in float32 from P):

        dV = P'ᵀ dO;  dP' = dO Vᵀ;  dP = dropout(dP');  dS = P (dP - rowsum(dO · O));  dQ = dS K;  dK = dSᵀ Q

    rowsum(dO · O) = rowsum(dP · P) (FlashAttention's D), taken on [B, H, T, head_dim] instead of the scores.
    Kept for the backward pass per score element: 2 bytes in bf16 (autodiff kept the float32 softmax and its
    bf16 copy, 6). Traced for XLA, P passes through an optimization barrier: without it XLA's GPU fusion also
    kept the bf16 scores to make P again where it is read, 4 bytes per score element (docs/benchmarks.md, "The
    compiled micro-step's memory"). The score-sized tensors it writes, counted by ``layers_test.py``:
    training/README.md, "Attention: score-sized tensors". Fewer needs a blockwise kernel that never writes [T, T].

    Example:
        >>> q = k = v = tf.ones([1, 1, 3, 2])
        >>> causal_attention(q, k, v).shape
        TensorShape([1, 1, 3, 2])
    """

    @tf.custom_gradient
    def core(q, k, v):
        scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)
        scores = tf.where(future_mask(tf.shape(q)[2]), tf.float32.min, scores)
        probs = tf.cast(_softmax(scores), q.dtype)
        if in_xla():  # else XLA keeps the scores too, to make P again where the backward pass reads it
            (probs,) = xla.optimization_barrier(probs)
        out = tf.matmul(_dropout(probs, rate, seed, site=1), v)

        def grad(d_out):
            d_v = tf.matmul(_dropout(probs, rate, seed, site=1), d_out, transpose_a=True)
            d_probs = _dropout(tf.matmul(d_out, v, transpose_b=True), rate, seed, site=1)
            # The float32 casts of P and O need only the forward pass: without an edge from d_out the executor may
            # run them during it, a float32 copy of every layer's P alive at the loss (docs/benchmarks.md).
            with tf.control_dependencies([d_out]):
                probs32, out32 = tf.cast(probs, tf.float32), tf.cast(out, tf.float32)
            rows = tf.reduce_sum(tf.cast(d_out, tf.float32) * out32, -1, keepdims=True)
            d_scores = tf.cast(probs32 * (tf.cast(d_probs, tf.float32) - rows), q.dtype)
            return tf.matmul(d_scores, k), tf.matmul(d_scores, q, transpose_a=True), d_v

        return out, grad

    return core(q, k, v)


class CausalSelfAttention(keras.layers.Layer):
    """Multi-head self-attention where position t sees positions 0..t only.

    Args:
        d_model: width of the residual stream.
        n_head: number of heads; d_model / n_head is each head's width.
        dropout: dropout rate on the attention probabilities and on the output.
        output_init_std: standard deviation of the output projection's initial weights.

    Example:
        >>> attention = CausalSelfAttention(d_model=64, n_head=2)
        >>> attention(tf.zeros([1, 8, 64])).shape
        TensorShape([1, 8, 64])
    """

    def __init__(self, d_model: int, n_head: int, dropout: float = 0.0, output_init_std: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if d_model % n_head:
            raise ValueError(f"d_model {d_model} is not divisible by n_head {n_head}")
        self.d_model, self.n_head, self.dropout, self.output_init_std = d_model, n_head, dropout, output_init_std
        init = keras.initializers.RandomNormal(stddev=0.02)
        out_init = keras.initializers.RandomNormal(stddev=output_init_std)
        self.qkv = keras.layers.Dense(3 * d_model, kernel_initializer=init, dtype=self.dtype_policy, name="qkv")
        self.proj = keras.layers.Dense(d_model, kernel_initializer=out_init, dtype=self.dtype_policy, name="proj")

    def build(self, input_shape):
        self.qkv.build(input_shape)
        self.proj.build(input_shape)

    def heads(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """[B, T, d] -> q (scaled by 1 / sqrt(head_dim)), k, v, each [B, n_head, T, head_dim]."""
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        head_dim = self.d_model // self.n_head
        # Dense layers on [B·T, d] rows, here and for the output: a MatMul and a BiasAdd, where a 3-D input adds a
        # Tensordot's seven shape operations, which a generation step (all small operations) pays for.
        qkv = self.qkv(tf.reshape(x, [-1, self.d_model]))
        if x.shape[1] == 1:  # one position (a generation step): [B, 3d] is [B, 3, n_head, 1, head_dim] as it lies
            q, k, v = tf.unstack(tf.reshape(qkv, [-1, 3, self.n_head, 1, head_dim]), axis=1)
        else:
            qkv = tf.reshape(qkv, [batch, length, 3, self.n_head, head_dim])
            q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))
        return q * tf.cast(1 / math.sqrt(head_dim), q.dtype), k, v  # scaling q costs T·d, the scores T²

    def merge_heads(self, out: tf.Tensor) -> tf.Tensor:
        """The heads' outputs [B, n_head, T, head_dim] side by side, through the output projection -> [B, T, d]."""
        batch, length = tf.shape(out)[0], tf.shape(out)[2]
        out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [-1, self.d_model])
        return tf.reshape(self.proj(out), [batch, length, self.d_model])

    def call(self, x: tf.Tensor, seed: tf.Tensor | None = None) -> tf.Tensor:
        q, k, v = self.heads(x)
        return self.merge_heads(causal_attention(q, k, v, self.dropout, seed))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "d_model": self.d_model,
            "n_head": self.n_head,
            "dropout": self.dropout,
            "output_init_std": self.output_init_std,
        }


class ResidualBlock(keras.layers.Layer):
    """A pre-norm block's residuals, dropout and recomputation; a subclass makes ``ln_1``, ``attn`` (called on
    [B, T, d] with ``seed``), ``mlp(x, training)`` (its own norm inside), ``dropout``, ``recompute`` and
    ``seed_generator``: GPT's ``DecoderBlock``, Llama's ``LlamaBlock``."""

    def _forward(self, x: tf.Tensor, seed: tf.Tensor | None, training: bool, recompute: str = "none") -> tf.Tensor:
        def attention(h: tf.Tensor) -> tf.Tensor:
            # training passed on: a recomputation runs outside Keras' call context, where it would be unset and the
            # LayerNorm would take autodiff's gradient of its formula instead of its own
            return _dropout(self.attn(self.ln_1(h, training=training), seed=seed), self.dropout, seed, site=2)

        def mlp(h: tf.Tensor) -> tf.Tensor:
            return _dropout(self.mlp(h, training), self.dropout, seed, site=3)

        x = x + (recompute_grad(attention) if recompute == "attention" else attention)(x)
        return x + (recompute_grad(mlp) if recompute == "mlp" else mlp)(x)

    def call(self, x: tf.Tensor, training: bool = False, stream: tf.Tensor | None = None) -> tf.Tensor:
        """``stream``: the data-parallel replica drawing the dropout masks (``next_seed``)."""
        seed = next_seed(self.seed_generator, stream) if training and self.dropout > 0 else None
        recompute = self.recompute if training else "none"
        if recompute == "full":
            return recompute_grad(lambda h: self._forward(h, seed, training=True))(x)
        return self._forward(x, seed, training, recompute)


class DecoderBlock(ResidualBlock):
    """One pre-norm transformer block: attention and a 4x-wide GELU MLP, each with a residual.

    Args:
        d_model: width of the residual stream.
        n_head: attention heads.
        dropout: dropout rate (attention probabilities, attention output, MLP output).
        n_layer: depth of the whole model; residual projections start at std 0.02 / sqrt(2 n_layer)
            (GPT-2) so the residual stream's variance does not grow with depth.
        recompute: what to recompute in the backward pass instead of keeping (``contract.hparams``'
            RECOMPUTE_MODES): ``none``, ``attention`` (the attention sublayer, its score-sized tensors
            included), ``mlp`` or ``full`` (the whole block, from its input); true and false are full and none.
        seed: seed of the block's dropout SeedGenerator.

    Example:
        >>> block = DecoderBlock(d_model=64, n_head=2)
        >>> block(tf.zeros([1, 8, 64])).shape
        TensorShape([1, 8, 64])
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        dropout: float = 0.0,
        n_layer: int = 1,
        recompute: str | bool = "none",
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model, self.n_head, self.dropout, self.n_layer = d_model, n_head, dropout, n_layer
        self.recompute, self.seed = recompute_mode(recompute), seed
        residual_std = 0.02 / math.sqrt(2 * n_layer)
        init = keras.initializers.RandomNormal(stddev=0.02)
        policy = self.dtype_policy
        self.ln_1 = LayerNorm(epsilon=1e-5, dtype=policy, name="ln_1")
        self.attn = CausalSelfAttention(d_model, n_head, dropout, residual_std, dtype=policy, name="attn")
        self.ln_2 = LayerNorm(epsilon=1e-5, dtype=policy, name="ln_2")
        self.fc = keras.layers.Dense(4 * d_model, kernel_initializer=init, dtype=policy, name="fc")
        self.fc_proj = keras.layers.Dense(
            d_model, kernel_initializer=keras.initializers.RandomNormal(stddev=residual_std), dtype=policy, name="proj"
        )
        self.seed_generator = keras.random.SeedGenerator(seed, name="dropout_seed")

    def build(self, input_shape):
        self.ln_1.build(input_shape)
        self.attn.build(input_shape)
        self.ln_2.build(input_shape)
        self.fc.build(input_shape)
        self.fc_proj.build((*input_shape[:-1], 4 * self.d_model))

    def mlp(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        """LayerNorm, fc, GELU, proj on [B, T, d].

        On [B·T, d] rows: a Dense on a 2-D input is one MatMul that grappler fuses with its BiasAdd (on 3-D,
        Tensordot: reshape, MatMul, reshape, BiasAdd). In training the
        GELU is the XLA-fused one (``gelu``), which must not reach the exported model
        (``export/saved_model_test.py``). In inference fc is written as MatMul, BiasAdd and ``tf.nn.gelu``,
        which grappler fuses into one operation (oneDNN's on a CPU): Keras' Dense adds its bias with an AddV2,
        after which the GELU's eight operations stay apart, each a pass, and each a dispatch in every generation
        step.
        """
        rows = tf.reshape(self.ln_2(x, training=training), [-1, self.d_model])
        if training:
            hidden = gelu(self.fc(rows))
        else:
            kernel, bias = (tf.cast(w, self.compute_dtype) for w in (self.fc.kernel, self.fc.bias))
            hidden = tf.nn.gelu(tf.nn.bias_add(tf.matmul(rows, kernel), bias), approximate=True)
        return tf.reshape(self.fc_proj(hidden), tf.shape(x))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "d_model": self.d_model,
            "n_head": self.n_head,
            "dropout": self.dropout,
            "n_layer": self.n_layer,
            "recompute": self.recompute,
            "seed": self.seed,
        }
