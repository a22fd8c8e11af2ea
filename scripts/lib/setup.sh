# shellcheck shell=bash
# Sourced by scripts/bench, scripts/test and scripts/profile: installs whatever is missing
# (Debian packages with apt-get, LibTorch with pip), then configures and builds ddpbench.
# Idempotent and silent when there is nothing to do; a failing step prints its log.
#
# Environment:
#   DDPBENCH_BUILD_DIR     build folder (default: build/ in the checkout)
#   DDPBENCH_CACHE_DIR     where pip's torch is installed (default: ~/.cache/ddpbench)
#   DDPBENCH_TORCH_PREFIX  use this LibTorch (a CMake prefix: an unpacked libtorch zip, or
#                          a torch package's share/cmake) instead of the pinned PyPI torch
#   DDPBENCH_PYTHON        a Python whose torch to use, when its version is the pinned one
#   DDPBENCH_WERROR        ON (default) turns warnings in ddpbench's code into errors
#   DDPBENCH_BUILD_TARGETS the ninja targets to build (default: all; scripts/ci-bench --against
#                          builds its baseline's `ddpbench` alone)
set -euo pipefail

DDPBENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../versions.env
source "$DDPBENCH_ROOT/scripts/versions.env"
DDPBENCH_BUILD_DIR=${DDPBENCH_BUILD_DIR:-$DDPBENCH_ROOT/build}
DDPBENCH_CACHE_DIR=${DDPBENCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ddpbench}
mkdir -p "$DDPBENCH_CACHE_DIR" "$DDPBENCH_BUILD_DIR"

setup_log() { echo "ddpbench setup: $*" >&2; }

# Runs "$@" with its output in a log file; on failure shows the log's tail and stops.
setup_quietly() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    setup_log "failed: $* (log: $log)"
    tail -n 40 "$log" >&2
    return 1
  fi
}

setup_debian_packages() {
  local missing=() pkg
  for pkg in "${DDPBENCH_DEBIAN_PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || missing+=("$pkg")
  done
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then missing+=(python3-venv); fi
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null; then
    setup_log "missing packages and no apt-get to install them: ${missing[*]}"
    return 1
  fi
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  setup_log "installing Debian packages: ${missing[*]}"
  local log=$DDPBENCH_CACHE_DIR/apt.log
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${missing[@]}" >"$log" 2>&1; then
    setup_quietly "$log" "${sudo[@]}" apt-get update -q
    setup_quietly "$log" "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends "${missing[@]}"
  fi
}

# PyTorch's reference rows (torch-*) import torchvision beside torch: the pinned release,
# installed into `python`'s environment when it is missing.
setup_torchvision() {
  local python=$1 version
  version=$("$python" -c 'import torchvision; print(torchvision.__version__.split("+")[0])' 2>/dev/null) || true
  [ "$version" = "$DDPBENCH_TORCHVISION_VERSION" ] && return 0
  setup_log "installing torchvision==$DDPBENCH_TORCHVISION_VERSION beside torch for $python"
  setup_quietly "$DDPBENCH_CACHE_DIR/pip-torchvision.log" "$python" -m pip install -q --disable-pip-version-check \
    "torch==$DDPBENCH_TORCH_VERSION" "torchvision==$DDPBENCH_TORCHVISION_VERSION"
}

# Sets DDPBENCH_TORCH_CMAKE_ARGS: a given LibTorch, a Python's matching torch, or the
# pinned torch installed once into a virtual environment under the cache folder.
setup_torch() {
  if [ -n "${DDPBENCH_TORCH_PREFIX:-}" ]; then
    DDPBENCH_TORCH_CMAKE_ARGS=(-DCMAKE_PREFIX_PATH="$DDPBENCH_TORCH_PREFIX")
    return 0
  fi
  local py version
  for py in ${DDPBENCH_PYTHON:-} python3; do
    version=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) || continue
    if [ "$version" = "$DDPBENCH_TORCH_VERSION" ]; then
      setup_torchvision "$(command -v "$py")"
      DDPBENCH_TORCH_CMAKE_ARGS=(-DDDPBENCH_PYTHON="$(command -v "$py")")
      return 0
    fi
  done
  local venv=$DDPBENCH_CACHE_DIR/torch-$DDPBENCH_TORCH_VERSION
  if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    setup_log "installing torch==$DDPBENCH_TORCH_VERSION (a CUDA build, ~5 GB) into $venv"
    rm -rf "$venv"
    setup_quietly "$DDPBENCH_CACHE_DIR/venv.log" python3 -m venv "$venv"
    setup_quietly "$DDPBENCH_CACHE_DIR/pip.log" "$venv/bin/pip" install -q --disable-pip-version-check \
      "torch==$DDPBENCH_TORCH_VERSION" "torchvision==$DDPBENCH_TORCHVISION_VERSION"
  fi
  setup_torchvision "$venv/bin/python"
  DDPBENCH_TORCH_CMAKE_ARGS=(-DDDPBENCH_PYTHON="$venv/bin/python")
}

# Sets DDPBENCH_HTA_PYTHON: a Python with Holistic Trace Analysis (scripts/trace-report),
# installed once into its own environment under the cache folder.
setup_hta() {
  local venv=$DDPBENCH_CACHE_DIR/hta-$DDPBENCH_HTA_VERSION
  if ! "$venv/bin/python" -c 'import hta.trace_analysis' 2>/dev/null; then
    setup_log "installing HolisticTraceAnalysis==$DDPBENCH_HTA_VERSION into $venv"
    rm -rf "$venv"
    setup_quietly "$DDPBENCH_CACHE_DIR/hta-venv.log" python3 -m venv "$venv"
    setup_quietly "$DDPBENCH_CACHE_DIR/hta-pip.log" "$venv/bin/pip" install -q --disable-pip-version-check \
      --no-deps "HolisticTraceAnalysis==$DDPBENCH_HTA_VERSION"
    setup_quietly "$DDPBENCH_CACHE_DIR/hta-pip.log" "$venv/bin/pip" install -q --disable-pip-version-check \
      "${DDPBENCH_HTA_PACKAGES[@]}"
  fi
  export DDPBENCH_HTA_PYTHON=$venv/bin/python
}

setup_build() {
  local args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPBENCH_WERROR="${DDPBENCH_WERROR:-ON}"
              "${DDPBENCH_TORCH_CMAKE_ARGS[@]}")
  # Reconfigure only when the arguments change, so a second run builds nothing; then from a
  # fresh cache, since LibTorch's config caches library paths of the LibTorch it found.
  local stamp=$DDPBENCH_BUILD_DIR/.ddpbench-configure-args
  if [ ! -f "$DDPBENCH_BUILD_DIR/build.ninja" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${args[*]}" ]; then
    rm -f "$DDPBENCH_BUILD_DIR/CMakeCache.txt"
    setup_quietly "$DDPBENCH_BUILD_DIR/configure.log" cmake -S "$DDPBENCH_ROOT" -B "$DDPBENCH_BUILD_DIR" "${args[@]}"
    echo "${args[*]}" >"$stamp"
  fi
  local targets
  read -r -a targets <<<"${DDPBENCH_BUILD_TARGETS:-}"
  if [ "$(ninja -C "$DDPBENCH_BUILD_DIR" -n "${targets[@]}" 2>/dev/null | grep -c '^\[')" -gt 0 ]; then
    setup_log "building ${targets[*]:-everything} in $DDPBENCH_BUILD_DIR (a first build takes ~15 min on 2 cores)"
  fi
  setup_quietly "$DDPBENCH_BUILD_DIR/build.log" ninja -C "$DDPBENCH_BUILD_DIR" --quiet "${targets[@]}"
}

ddpbench_setup() {
  setup_debian_packages
  setup_torch
  setup_hta
  setup_build
}
