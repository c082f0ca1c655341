#!/usr/bin/env bash
# The one prepared device run (docs/benchmarks.md, "The one prepared device run"): the trainer's compiled micro-step
# from the HLO exported here, run by jax on the lent GPU (it has jax, no TensorFlow). One JSON line per case
# (bench/hlo_run.py): the tiny step on TensorFlow's inputs (its loss against TensorFlow's), then gpt3-1.3b for 20
# steps, then gpt3-125m and gpt3-350m: step time, MFU on the stated peak, the compiler's peak memory against the
# estimate's (memory.py's Memory.micro_step, in the JSON), the allocator's peak.
#
#   bash bench/device_run.sh           # on the GPU machine: carry build/hlo (about 14 MiB), run's timeout_s 590
#   bash bench/device_run.sh --smoke   # here: the tiny case through the same code, on this CPU (.venv-jax)
#
# build/hlo comes from (here, TensorFlow):
#   .venv/bin/python bench/hlo_export.py --preset tiny --micro-batch 2 --sequence-length 128 --values
#   for p in gpt3-125m gpt3-350m gpt3-1.3b; do .venv/bin/python bench/hlo_export.py --preset $p --micro-batch 4; done
#
# Each case has its own timeout and starts only while the budget (BUDGET_S, 570 s) holds that much: the script
# ends within it. PEAK_TFLOPS: the GPU's dense bf16 peak (H200 989, the datasheet's: not measured).
set -u
cd "$(dirname "$0")/.."
hlo=${HLO:-build/hlo}
budget=${BUDGET_S:-570}
peak=${PEAK_TFLOPS:-989}
smoke=0
[ "${1:-}" = "--smoke" ] && smoke=1
if [ $smoke = 1 ]; then python=${PYTHON:-.venv-jax/bin/python}; else python=${PYTHON:-python3}; fi

step() { # step NAME TIMEOUT_S HLO_RUN_ARGS...: one case, skipped when the budget has less than its timeout left
	local name=$1 limit=$2
	shift 2
	local left=$((budget - SECONDS))
	if [ "$left" -lt "$limit" ]; then
		echo "{\"case\": \"$name\", \"skipped\": \"${left} s of the budget left, the case may take ${limit}\"}"
		return
	fi
	timeout "$limit" "$python" bench/hlo_run.py "$@" || echo "{\"case\": \"$name\", \"failed\": \"exit $?\"}"
}

if [ $smoke = 1 ]; then
	"$python" -c 'import jax; print(jax.__version__, jax.devices())'
	step tiny 120 "$hlo/tiny-bf16-b2-s128.json" --values --steps 3
	step tiny-as-1.3b 120 "$hlo/tiny-bf16-b2-s128.json" --warmup 3 --steps 20 --peak-tflops "$peak"
	exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$python" -c 'import jax; print(jax.__version__, jax.devices())'
step tiny 60 "$hlo/tiny-bf16-b2-s128.json" --values --steps 3
step gpt3-1.3b 240 "$hlo/gpt3-1.3b-bf16-b4-s2048.json" --warmup 3 --steps 20 --peak-tflops "$peak"
step gpt3-125m 110 "$hlo/gpt3-125m-bf16-b4-s2048.json" --warmup 3 --steps 10 --peak-tflops "$peak"
step gpt3-350m 130 "$hlo/gpt3-350m-bf16-b4-s2048.json" --warmup 3 --steps 10 --peak-tflops "$peak"
echo "{\"seconds\": $SECONDS}"
