#!/usr/bin/env bash
# Times the README's test command on fresh clones of the given commits, one
# after the other on this machine, each beside the same fixed TensorFlow
# workload, and writes one results file a commit:
#   tools/time_suite.sh OUT_DIR COMMIT [COMMIT ...]
# OUT_DIR/suite_<date>_<commit>.txt holds the machine, the workload's
# seconds (which put machines on one scale), the suite's wall and CPU time
# (every process it started included), and pytest's summary and 40 slowest
# phases, then the fast tier's time. Nothing else should run meanwhile: stop
# or pause other work first.
set -euo pipefail
out_dir=$(realpath "$1"); shift
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
mkdir -p "$out_dir"
# The fixed workload: 300 float32 512x512 matmuls and a 10k-element softmax
# chain, eager, after TensorFlow's start.
workload='
import os, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
x = tf.random.stateless_normal([512, 512], seed=[1, 2])
wall, cpu = time.time(), time.process_time()
for _ in range(300):
  x = tf.nn.softmax(tf.linalg.matmul(x, x), axis=-1) * 512.0
float(tf.reduce_sum(x))
print(f"workload: {time.time() - wall:.2f} s wall, {time.process_time() - cpu:.2f} CPU-s")
'
for commit in "$@"; do
  clone=$(mktemp -d /tmp/suite_clone.XXXX)
  git clone -q "$repo" "$clone/electra-tf"
  git -C "$clone/electra-tf" checkout -q "$commit"
  cp -r "$(realpath "$repo/../shared")" "$clone/shared"  # a copy: older commits fail on a link
  short=$(git -C "$clone/electra-tf" rev-parse --short HEAD)
  file="$out_dir/suite_$(date -u +%Y-%m-%d)_$short.txt"
  {
    echo "# The README's test command on a fresh clone of $short ($(git -C "$clone/electra-tf" log -1 --format=%cs)),"
    echo "# CI=true, $(python3 --version), $(date -u '+%Y-%m-%d %H:%M') UTC start,"
    echo "# $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), nothing else running."
    python3 -c "$workload" 2>/dev/null
  } > "$file"
  (cd "$clone/electra-tf" && python3 -m pip install -q -r requirements.txt >/dev/null 2>&1)
  start=$(date +%s)
  set +e
  (cd "$clone/electra-tf" && CI=true /usr/bin/time -f "suite CPU: %U s user + %S s sys" \
      python3 -m pytest -q tests --durations=40) > "$clone/pytest.log" 2>&1
  status=$?
  end=$(date +%s)
  (cd "$clone/electra-tf" && CI=true /usr/bin/time -f "fast tier CPU: %U s user + %S s sys, %e s wall" \
      python3 -m pytest -q -m "not slow" tests) > "$clone/fast.log" 2>&1
  set -e
  [ "$status" -eq 0 ] || cp "$clone/pytest.log" "/tmp/suite_${short}_pytest.log"  # the failures
  {
    echo "suite wall: $((end - start)) s ($(( (end - start) / 60 )) min $(( (end - start) % 60 )) s), exit status $status"
    grep "suite CPU" "$clone/pytest.log"
    python3 -c "$workload" 2>/dev/null | sed 's/^workload/workload after/'
    echo "fast tier (-m \"not slow\", after the suite): $(grep -E "passed|failed" "$clone/fast.log" | tail -1)"
    grep "fast tier CPU" "$clone/fast.log"
    grep -v "suite CPU" "$clone/pytest.log" | grep -E "passed|failed|error|documented commands|^  |slowest|s (call|setup|teardown) " || true
  } >> "$file"
  rm -rf "$clone"
  echo "$file"
done
(cd "$repo" && python3 -m pip install -q -r requirements.txt >/dev/null 2>&1)  # back to this checkout
