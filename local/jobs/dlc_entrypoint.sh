#!/bin/bash
# The TensorFlow DLC's /usr/local/bin/entrypoint.sh (aws/deep-learning-containers,
# scripts/docker/tensorflow/entrypoint.sh) as this machine runs it: its telemetry and CUDA
# forward-compatibility steps have nothing to do here; the rest is the same.
set -e
exec "$@"
