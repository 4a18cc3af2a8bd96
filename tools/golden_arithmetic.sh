#!/usr/bin/env bash
# Does the pinned arithmetic (bench/harness/arithmetic.py) hold the goldens' bits under every
# ISA setting this machine can reach? Captures the smoke goldens again (or those of the
# experiments named) under each setting, into a scratch folder, and lists every value that is
# not bit-identical to tests/golden/ (one line per setting: "same bits" or the count).
#
# Two kinds of setting:
#   caller: the variable set in the environment that starts the capture, as a user's shell or
#           CI might; the pinned arithmetic overrides it, so the bits must not move.
#   with:   the variable set on top of the pinned arithmetic (capture --with): the kernels
#           that variable selects really run. A mask that hides more of the CPU (an older
#           CPU's glibc) must not move the bits; a knob moved off its pinned value shows why
#           that knob is pinned.
# Usage: tools/golden_arithmetic.sh [experiment...]   (PY=... the interpreter, JOBS=2 two
# captures at a time, ONLY=<regex> the settings whose names match)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/golden-arithmetic-XXXX")
run() {  # run NAME KIND ASSIGNMENTS...
    local name=$1 kind=$2; shift 2
    local args=()
    if [ "$kind" = with ]; then
        for assignment in "$@"; do args+=(--with "$assignment"); done
        set --
    fi
    local out
    out=$(env "$@" "$PY" -m tests.golden.capture --into "$SCRATCH/$name" --same-bits-as tests/golden \
          "${args[@]}" "${EXPERIMENTS[@]}" 2>&1 | tail -n +1)
    local differ
    differ=$(grep -c '\.json: ' <<<"$out")
    if grep -q "every value bit-identical" <<<"$out"; then
        echo "$kind $name: same bits"
    elif [ "$differ" = 0 ]; then
        echo "$kind $name: capture failed: $(tail -n 1 <<<"$out")"
    else
        echo "$kind $name: $differ values differ (e.g. $(grep -m1 '\.json: ' <<<"$out"))"
    fi
}
EXPERIMENTS=("$@")
JOBS=${JOBS:-1}
SETTINGS=$(cat <<'LIST'
aten-avx2 caller ATEN_CPU_CAPABILITY=avx2
onednn-avx2 caller ONEDNN_MAX_CPU_ISA=AVX2
onednn-avx caller ONEDNN_MAX_CPU_ISA=AVX
mkl-auto caller MKL_CBWR=AUTO
mkl-avx2 caller MKL_CBWR=AVX2
mkl-sse42 caller MKL_CBWR=SSE4_2
all-native caller ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_CBWR=AUTO GLIBC_TUNABLES= NPY_DISABLE_CPU_FEATURES= OMP_NUM_THREADS=2
glibc-no-avx with GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX,-AVX_Fast_Unaligned_Load
glibc-no-sse42 with GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX,-SSE4_2,-POPCNT
with-aten-avx2 with ATEN_CPU_CAPABILITY=avx2
with-onednn-avx2 with ONEDNN_MAX_CPU_ISA=AVX2
with-mkl-avx2 with MKL_CBWR=AVX2
with-glibc-native with GLIBC_TUNABLES=
LIST
)
export -f run
export PY SCRATCH
EXPERIMENTS_TEXT="${EXPERIMENTS[*]}"
export EXPERIMENTS_TEXT
# shellcheck disable=SC2016
grep -E "^(${ONLY:-.*}) " <<<"$SETTINGS" |
    xargs -P "$JOBS" -L 1 bash -c 'read -ra EXPERIMENTS <<<"$EXPERIMENTS_TEXT"; run "$@"' _
echo "captures kept in $SCRATCH"
exit 0
