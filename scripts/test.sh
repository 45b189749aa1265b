#!/usr/bin/env bash
# Install what is missing, build and run edgert's whole test suite:
#
#   bash scripts/test.sh
#
# Phases (each in its own build dir, build/test-<phase>, all run even if one
# fails; build/release is left to scripts/demo.sh so the two never fight over
# cached options):
#   release  native x86_64, Release, warnings are errors, CPU only   -> ctest
#   asan     native, RelWithDebInfo, ASan + UBSan, CPU only          -> ctest
#   aarch64  cross-built for Jetson (CPU only), tests run under qemu-aarch64
#   fuzz     scripts/fuzz.sh with a short budget, when that script exists
#   cuda     compile check of the CUDA backend, when nvcc and kernels/cuda/*.cu
#            exist (no GPU needed: GPU tests report SKIPPED)
#   python   the Python package: a venv in build/test-python (sharing .deps/venv's
#            numpy/onnx/onnxruntime), `pip install .` (CPU; ERT_PY_CUDA=AUTO
#            builds CUDA in), pytest python/tests (GPU tests report SKIPPED)
#   py39     the same cp39-abi3 wheel under Debian 11's python3.9 (scripts/
#            python_py39_check.sh: python/tests; skipped when offline)
#   pyarm    the aarch64 wheel cross-built (scripts/python_cross_wheel.sh:
#            Debian's arm64 python3.11 + numpy fetched into build/py-aarch64),
#            imported and run under qemu-aarch64; skipped when offline
#   cuda12   the same backend built with CUDA 12.4 (scripts/check_cuda12.sh:
#            ~1.2 GB downloaded into .deps/cuda12, ~2 min on 2 cores) + the
#            CPU ctest of that build. Runs in CI (CI=true) or when named in
#            ERT_TEST_PHASES; skipped otherwise, and skipped (not failed) when
#            the download is impossible (offline)
#   cuda-aarch64  the Jetson build itself (scripts/check_cuda_aarch64.sh):
#            aarch64 + CUDA for sm_87/sm_110 from NVIDIA's aarch64 CUDA 13
#            wheels (~1 GB, cached in .deps/cuda-aarch64) and the host nvcc;
#            checks the binaries (aarch64, SASS for both chips, no CUDA shared
#            library linked), then the whole ctest under qemu-aarch64 (gpu
#            tests SKIPPED: no driver). Like cuda12: in CI or when named
# Each ctest phase prints ctest's own summary and a line
# "<phase>: N passed, N failed, N skipped"; the last line is the total.
# Exit status: non-zero if any phase failed.
#
# Knobs (environment):
#   ERT_TEST_PHASES="release aarch64"  run only these phases
#   ERT_JOBS=2          parallel build/test jobs (the CI machine has 2 cores)
#   ERT_SKIP_SETUP=1    don't run scripts/setup.sh first
#   FUZZ_SECONDS=30     per fuzz target
#   ERT_CI_CUDA_ARCHS   chips for the CUDA compile check (default: the oldest
#                       and the newest x86 ones, to keep CI short)
#   ERT_PRUNE=1         delete each phase's build tree (and the downloaded
#                       toolkit archives) once no later phase needs it; on by
#                       default in CI (CI=true), where all phases together
#                       would need ~11 GB of disk and the machine's disk is
#                       not ours to size (peak is ~4 GB pruned). Logs and
#                       JUnit reports in build/logs/ are always kept.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${ERT_JOBS:-2}
prune=${ERT_PRUNE:-$([[ "${CI:-}" == true ]] && echo 1 || echo 0)}
export ERT_PRUNE=$prune   # scripts/check_cuda_aarch64.sh drops its wheels once unpacked
phases=${ERT_TEST_PHASES:-release asan aarch64 fuzz cuda python py39 pyarm cuda12 cuda-aarch64}
logs="$root/build/logs"
t_start=$SECONDS

if [[ "${ERT_SKIP_SETUP:-0}" != 1 ]]; then
    bash scripts/setup.sh
fi
mkdir -p "$logs"

# ccache makes a second run (a developer re-running, or CI on a warm machine)
# cost seconds per phase instead of a full rebuild.
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
              -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

echo "test: $(uname -m), $(nproc) cores, $(gcc --version | head -n1), $(cmake --version | head -n1)"
echo "test: phases: $phases (logs in build/logs/)"
echo "test: disk: $(df -h --output=avail . | tail -n1 | tr -d ' ') free here; ERT_PRUNE=$prune"

summary=()   # one line per phase, printed at the end
failed=0
n_pass=0 n_fail=0 n_skip=0

# configure_build NAME DIR CMAKE_ARGS... : configure + build, output to a log
# (printed on failure only: the build itself is not the interesting part).
configure_build() {
    local name=$1 dir=$2; shift 2
    local log="$logs/$name-build.log" t0=$SECONDS
    if cmake -S "$root" -B "$dir" -G Ninja "${launcher[@]}" "$@" >"$log" 2>&1 &&
        cmake --build "$dir" -j "$jobs" >>"$log" 2>&1; then
        echo "[$name] configure + build: ok ($((SECONDS - t0)) s)"
        return 0
    fi
    echo "[$name] configure + build: FAILED ($((SECONDS - t0)) s); from $log:"
    # The errors themselves, not the configure chatter before them.
    if grep -qE "FAILED:|error:|Error" "$log"; then
        grep -E -A12 "FAILED:|CMake Error" "$log" | head -n 80 | sed 's/^/    /'
    else
        tail -n 40 "$log" | sed 's/^/    /'
    fi
    return 1
}

# run_ctest NAME DIR [CTEST_ARGS...] : run the suite, print ctest's output and a one-line
# count; adds to the totals. Counts come from ctest's JUnit report
# (CMake >= 3.21), which tells skipped and disabled tests apart from passes.
run_ctest() {
    local name=$1 dir=$2 xml="$logs/$name-ctest.xml" t0=$SECONDS rc=0
    shift 2   # the rest: extra ctest arguments
    rm -f "$xml"
    ctest --test-dir "$dir" -j "$jobs" --output-on-failure --no-tests=error \
          --output-junit "$xml" "$@" || rc=$?
    local tests=0 failures=0 skipped=0 disabled=0
    if [[ -f "$xml" ]]; then
        local head
        # the attributes of <testsuite> span several lines
        head=$(tr '\n\t' '  ' <"$xml" | grep -o '<testsuite [^>]*>' | head -n1 || true)
        tests=$(sed -n 's/.* tests="\([0-9]*\)".*/\1/p' <<<"$head")
        failures=$(sed -n 's/.* failures="\([0-9]*\)".*/\1/p' <<<"$head")
        skipped=$(sed -n 's/.* skipped="\([0-9]*\)".*/\1/p' <<<"$head")
        disabled=$(sed -n 's/.* disabled="\([0-9]*\)".*/\1/p' <<<"$head")
    fi
    tests=${tests:-0} failures=${failures:-0} skipped=${skipped:-0} disabled=${disabled:-0}
    skipped=$((skipped + disabled))
    local passed=$((tests - failures - skipped))
    # ctest failing without a failed test (no tests, a crash of ctest itself)
    # still fails the phase.
    if [[ $rc -ne 0 && $failures -eq 0 ]]; then failures=1; fi
    ((passed < 0)) && passed=0
    echo "$name: $passed passed, $failures failed, $skipped skipped"
    n_pass=$((n_pass + passed)) n_fail=$((n_fail + failures)) n_skip=$((n_skip + skipped))
    [[ $rc -eq 0 ]]
}

# count_pytest NAME XML RC : one count line from pytest's JUnit report, added to
# the totals; returns RC's verdict. rc 5 (no tests collected) or any other
# non-zero rc without a failed test (the interpreter crashed) still fails.
count_pytest() {
    local name=$1 xml=$2 rc=$3 tests=0 failures=0 errors=0 skipped=0 head
    if [[ -f "$xml" ]]; then
        head=$(tr '\n\t' '  ' <"$xml" | grep -o '<testsuite [^>]*>' | head -n1 || true)
        tests=$(sed -n 's/.* tests="\([0-9]*\)".*/\1/p' <<<"$head")
        failures=$(sed -n 's/.* failures="\([0-9]*\)".*/\1/p' <<<"$head")
        errors=$(sed -n 's/.* errors="\([0-9]*\)".*/\1/p' <<<"$head")
        skipped=$(sed -n 's/.* skipped="\([0-9]*\)".*/\1/p' <<<"$head")
    fi
    tests=${tests:-0} failures=$((${failures:-0} + ${errors:-0})) skipped=${skipped:-0}
    if [[ $rc -ne 0 && $rc -ne 77 && $failures -eq 0 ]]; then failures=1; fi
    local passed=$((tests - (failures > tests ? tests : failures) - skipped))
    ((passed < 0)) && passed=0
    echo "$name: $passed passed, $failures failed, $skipped skipped"
    n_pass=$((n_pass + passed)) n_fail=$((n_fail + failures)) n_skip=$((n_skip + skipped))
    return "$rc"
}

# prune_after NAME : with ERT_PRUNE=1, remove what phase NAME built and no
# later phase reads (build/test-release and build/test-python stay: py39 and
# pyarm use the release CLI and the python phase's venv).
prune_after() {
    [[ "$prune" == 1 ]] || return 0
    local dirs=()
    case $1 in
        asan) dirs=(build/test-asan) ;;
        aarch64) dirs=(build/test-aarch64) ;;
        fuzz) dirs=(build/test-fuzz) ;;
        cuda) dirs=(build/test-cuda) ;;
        py39) dirs=(build/py39) ;;
        pyarm) dirs=(build/py-aarch64) ;;
        cuda12) dirs=(build/test-cuda12 .deps/cuda12) ;;
        cuda-aarch64) dirs=(build/test-cuda-aarch64 build/test-cuda-aarch64-sysroot-*) ;;
    esac
    ((${#dirs[@]})) || return 0
    local d
    for d in "${dirs[@]}"; do [[ -e $d ]] && rm -rf -- "$d"; done
    echo "[$1] pruned ${dirs[*]} (ERT_PRUNE=1); $(df -h --output=avail . | tail -n1 | tr -d ' ') free"
}

# phase NAME DESCRIPTION FUNCTION : run one phase, record its result.
phase() {
    local name=$1 what=$2 fn=$3 t0=$SECONDS rc=0 fails_before=$n_fail
    echo
    echo "==================== [$name] $what"
    "$fn" || rc=$?
    prune_after "$name"
    # A phase that failed without a failing test (build error, fuzz crash)
    # still counts as one failure in the total.
    if [[ $rc -ne 0 && $rc -ne 77 && $n_fail -eq $fails_before ]]; then
        n_fail=$((n_fail + 1))
    fi
    local dt=$((SECONDS - t0))
    case $rc in
        0) summary+=("$(printf '%-12s ok       %4d s  %s' "$name" "$dt" "$what")") ;;
        77) summary+=("$(printf '%-12s skipped  %4d s  %s' "$name" "$dt" "$what")") ;;
        *) summary+=("$(printf '%-12s FAILED   %4d s  %s' "$name" "$dt" "$what")"); failed=1 ;;
    esac
}

# ------------------------------------------------------------ phases
phase_release() {
    # CUDA is built (once) by the cuda phase, not here: CI has 2 cores.
    configure_build release build/test-release -DCMAKE_BUILD_TYPE=Release -DERT_WERROR=ON \
        -DERT_CUDA=OFF || return 1
    run_ctest release build/test-release
}

phase_asan() {
    # CPU only: the CUDA runtime and ASan's shadow memory don't mix well.
    configure_build asan build/test-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DERT_WERROR=ON \
        -DERT_SANITIZE=address,undefined -DERT_CUDA=OFF || return 1
    # halt on the first UB report; leaks are errors (LeakSanitizer is on by
    # default with ASan on x86_64 Linux).
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        run_ctest asan build/test-asan
}

phase_aarch64() {
    local tc=toolchains/aarch64-jetson.cmake
    if [[ $(uname -m) != aarch64 ]] && ! command -v qemu-aarch64 >/dev/null &&
        ! command -v qemu-aarch64-static >/dev/null; then
        echo "[aarch64] no qemu-aarch64 (Debian: qemu-user): cannot run the cross-built tests"
        return 1
    fi
    # CPU only: the CUDA cross build needs a JetPack CUDA target tree, and
    # TurboJPEG an arm64 libjpeg-turbo (both come with a real sysroot).
    configure_build aarch64 build/test-aarch64 -DCMAKE_TOOLCHAIN_FILE="$root/$tc" \
        -DCMAKE_BUILD_TYPE=Release -DERT_WERROR=ON -DERT_CUDA=OFF -DERT_JPEG=OFF || return 1
    run_ctest aarch64 build/test-aarch64
}

phase_fuzz() {
    if [[ ! -f scripts/fuzz.sh ]]; then
        echo "[fuzz] scripts/fuzz.sh not there yet: skipped"
        return 77
    fi
    mkdir -p "$logs"
    # kept in a log: the summary repeats a failure's report (CI shows the end)
    FUZZ_SECONDS=${FUZZ_SECONDS:-30} ERT_JOBS=$jobs bash scripts/fuzz.sh 2>&1 | tee "$logs/fuzz.log"
}

phase_cuda() {
    local nvcc
    nvcc=$(command -v nvcc || true)
    [[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
    if [[ -z "$nvcc" ]]; then
        echo "[cuda] no nvcc: skipped"; return 77
    fi
    if ! compgen -G "kernels/cuda/*.cu" >/dev/null; then
        echo "[cuda] no CUDA backend yet (kernels/cuda/*.cu): skipped"; return 77
    fi
    # Compile check only (CI has no GPU): a short chip list keeps it quick;
    # the oldest and the newest catch most arch-specific breakage.
    configure_build cuda build/test-cuda -DCMAKE_BUILD_TYPE=Release -DERT_WERROR=ON \
        -DCMAKE_TOOLCHAIN_FILE="$root/toolchains/x86_64-dgpu.cmake" \
        -DCMAKE_CUDA_COMPILER="$nvcc" -DERT_CUDA=ON \
        -DERT_CUDA_ARCHS="${ERT_CI_CUDA_ARCHS:-75-real;120}" || return 1
    run_ctest cuda build/test-cuda || return 1
    # The Jetson chips: every .cu compiles for sm_87 (Orin) and sm_110 (Thor)
    # and cuobjdump lists SASS for both. Required in CI; a developer without
    # cuobjdump (offline) gets the warning from setup.sh and this skip.
    local cuobj
    cuobj=$(compgen -G "$root/.deps/venv/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump" | head -1 || true)
    [[ -z "$cuobj" ]] && cuobj=$(command -v cuobjdump || true)
    [[ -z "$cuobj" && -x /usr/local/cuda/bin/cuobjdump ]] && cuobj=/usr/local/cuda/bin/cuobjdump
    if [[ -n "$cuobj" ]]; then
        echo "[cuda] Jetson device code (sm_87, sm_110) with $cuobj"
        CUOBJDUMP="$cuobj" bash scripts/check_cuda_archs.sh "$nvcc" || return 1
    elif [[ "${CI:-}" == true ]]; then
        echo "[cuda] no cuobjdump in CI: cannot prove sm_87/sm_110 SASS" >&2; return 1
    else
        echo "[cuda] no cuobjdump: sm_87/sm_110 SASS listing skipped"
    fi
}

# fetched_build NAME SCRIPT BUILD_ONLY_VAR WHAT : the phases that fetch a
# toolkit first (cuda12, cuda-aarch64) run in CI or when named; SCRIPT builds
# (BUILD_ONLY_VAR=1: ctest is left to run_ctest, to count it), its "[NAME]"
# lines are shown. 77 (skipped) when WHAT cannot be downloaded.
fetched_build() {
    local name=$1 script=$2 only=$3 what=$4
    if [[ "${CI:-}" != true && -z "${ERT_TEST_PHASES:-}" ]]; then
        echo "[$name] not in CI: skipped (ERT_TEST_PHASES=$name bash scripts/test.sh runs it)"
        return 77
    fi
    if ! compgen -G "kernels/cuda/*.cu" >/dev/null; then
        echo "[$name] no CUDA backend yet (kernels/cuda/*.cu): skipped"; return 77
    fi
    local rc=0 log="$logs/$name-build.log"
    env ERT_JOBS="$jobs" "$only=1" bash "$script" >"$log" 2>&1 || rc=$?
    grep -E "^\[$name\]" "$log" | sed 's/^/    /'
    case $rc in
        0) ;;
        2) echo "[$name] could not download $what (offline?): skipped"; return 77 ;;
        *) echo "[$name] FAILED; from $log:"; tail -n 60 "$log" | sed 's/^/    /'; return 1 ;;
    esac
}

phase_cuda12() {
    fetched_build cuda12 scripts/check_cuda12.sh ERT_CUDA12_BUILD_ONLY "the CUDA 12 toolkit" || return
    # the test binaries load the CUDA 12 shared libraries of that toolkit tree
    LD_LIBRARY_PATH="$root/.deps/cuda12/toolkit/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        run_ctest cuda12 build/test-cuda12
}

phase_cuda_aarch64() {
    fetched_build cuda-aarch64 scripts/check_cuda_aarch64.sh ERT_CUDA_AARCH64_BUILD_ONLY \
        "the aarch64 CUDA wheels, or no host nvcc 13.0" || return
    if [[ $(uname -m) != aarch64 ]] && ! command -v qemu-aarch64 >/dev/null &&
        ! command -v qemu-aarch64-static >/dev/null; then
        echo "[cuda-aarch64] no qemu-aarch64 (Debian: qemu-user): cannot run the cross-built tests"
        return 1
    fi
    # zoo_cuda_selfcheck (the GPU zoo harness on CPU sessions) runs natively in
    # the cuda phase; emulated it needs more than its 600 s.
    echo "[cuda-aarch64] zoo_cuda_selfcheck left to the cuda phase (over 600 s under qemu)"
    local rc=0
    run_ctest cuda-aarch64 build/test-cuda-aarch64 -E '^zoo_cuda_selfcheck$' || rc=1
    # No driver under qemu: every gpu test must be SKIPPED, for that reason
    # (a pass would be a silent one; "no CUDA backend" would mean CUDA was lost).
    local gpu_tests
    gpu_tests=$(ctest --test-dir build/test-cuda-aarch64 -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
    # (pipefail is on: the checker's status survives the sed)
    [[ -n "$gpu_tests" ]] && python3 scripts/check_gpu_skipped.py --self-test >/dev/null &&
        python3 scripts/check_gpu_skipped.py "$logs/cuda-aarch64-ctest.xml" $gpu_tests | sed 's/^/    /' || {
            echo "[cuda-aarch64] gpu tests: not all SKIPPED for want of a driver (or none found)"; rc=1; }
    return $rc
}

# The Python package (python/, pyproject.toml): its own venv whose .pth
# shares .deps/venv's packages (numpy, onnx, onnxruntime; pytest and
# scikit-build-core are installed there if missing), `pip install .` with the
# build tree kept in build/test-python/skbuild, then pytest with a JUnit
# report. pytest's "no tests collected" (exit 5) fails the phase.
phase_python() {
    local dir=build/test-python venv=build/test-python/venv log="$logs/python-build.log" t0=$SECONDS
    local base="$root/.deps/venv/bin/python"
    [[ -x "$base" ]] || base=$(command -v python3)
    mkdir -p "$dir"
    if [[ ! -x "$venv/bin/python" ]]; then
        "$base" -m venv "$venv" >"$log" 2>&1 || { echo "[python] cannot make a venv; from $log:"; tail -n 20 "$log"; return 1; }
        local site
        site=$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        "$venv/bin/python" -c 'import sysconfig, sys; open(sysconfig.get_paths()["purelib"] + "/ert-deps.pth", "w").write(sys.argv[1] + "\n")' "$site"
    fi
    local py="$venv/bin/python"
    if ! "$py" -c 'import pytest, scikit_build_core, numpy' 2>/dev/null; then
        "$py" -m pip install -q pytest scikit-build-core numpy >>"$log" 2>&1 ||
            { echo "[python] pip cannot install pytest/scikit-build-core/numpy (offline?); from $log:"; tail -n 20 "$log"; return 1; }
    fi
    # CPU build (the cuda phase compiles the backend); ERT_PY_CUDA=ON|AUTO puts it in.
    if "$py" -m pip install -v --no-build-isolation --no-deps "$root" \
        --config-settings=build-dir="$root/$dir/skbuild" --config-settings=cmake.define.ERT_CUDA="${ERT_PY_CUDA:-OFF}" \
        --config-settings=cmake.define.ERT_WERROR=ON >>"$log" 2>&1; then
        echo "[python] pip install .: ok ($((SECONDS - t0)) s)"
    else
        echo "[python] pip install .: FAILED; from $log:"
        grep -E -A12 "FAILED:|CMake Error|error:" "$log" | head -n 60 | sed 's/^/    /'
        return 1
    fi
    # the module uses only the 3.9 stable ABI (abi3audit, when installed, reads its symbols)
    local so
    so=$(compgen -G "$venv/lib/python3*/site-packages/edgert/_edgert*.so" | head -n1 || true)
    if "$py" -c 'import abi3audit' 2>/dev/null; then
        "$py" -m abi3audit --strict --assume-minimum-abi3 3.9 "$so" >"$logs/python-abi3.log" 2>&1 ||
            { echo "[python] abi3audit: symbols outside the 3.9 stable ABI:"; cat "$logs/python-abi3.log"; return 1; }
        echo "[python] abi3audit: only the 3.9 stable ABI"
    else
        echo "[python] abi3audit not installed: stable-ABI audit skipped"
    fi
    local xml="$logs/python-pytest.xml" rc=0
    rm -f "$xml"
    # the CLI comparisons use the release phase's edgert when it is there
    local clibin="$root/build/test-release/apps/edgert"
    (cd "$root/python/tests" && ERT_CLI="${ERT_CLI:-$([[ -x $clibin ]] && echo "$clibin")}" \
        "$root/$py" -m pytest -q -rs -p no:cacheprovider --junitxml="$xml" .) || rc=$?
    count_pytest python "$xml" "$rc"
}

# the python phase's venv has scikit-build-core; else .deps/venv's python
py_builder() {
    local py="$root/build/test-python/venv/bin/python"
    [[ -x "$py" ]] || py="$root/.deps/venv/bin/python"
    echo "$py"
}
phase_pyarm() {
    local xml="$logs/pyarm-pytest.xml" rc=0
    rm -f "$xml"
    ERT_PY_JUNIT="$xml" ERT_PY_CROSS_PYTHON=$(py_builder) bash scripts/python_cross_wheel.sh || rc=$?
    [[ -f $xml ]] || return "$rc"   # no pytest run (offline: skipped or failed before it)
    count_pytest pyarm "$xml" "$rc"
}
phase_py39() {
    local clibin="$root/build/test-release/apps/edgert"
    local xml="$logs/py39-pytest.xml" rc=0
    rm -f "$xml"
    ERT_PY_JUNIT="$xml" ERT_CLI="${ERT_CLI:-$([[ -x $clibin ]] && echo "$clibin")}" ERT_PY_CROSS_PYTHON=$(py_builder) \
        bash scripts/python_py39_check.sh || rc=$?
    [[ -f $xml ]] || return "$rc"
    count_pytest py39 "$xml" "$rc"
}

for p in $phases; do
    case $p in
        release) phase release "native $(uname -m) Release -Werror" phase_release ;;
        asan) phase asan "native $(uname -m) RelWithDebInfo ASan+UBSan" phase_asan ;;
        aarch64) phase aarch64 "aarch64 cross build (CPU), tests under qemu-aarch64" phase_aarch64 ;;
        fuzz) phase fuzz "fuzzers, ${FUZZ_SECONDS:-30} s per target" phase_fuzz ;;
        cuda) phase cuda "CUDA compile check" phase_cuda ;;
        python) phase python "Python package: pip install ., pytest" phase_python ;;
        py39) phase py39 "the abi3 wheel under Python 3.9, pytest" phase_py39 ;;
        pyarm) phase pyarm "aarch64 Python wheel, imported under qemu-aarch64" phase_pyarm ;;
        cuda12) phase cuda12 "CUDA 12.4 build + CPU ctest" phase_cuda12 ;;
        cuda-aarch64) phase cuda-aarch64 "Jetson build: aarch64 + CUDA sm_87/sm_110, tests under qemu" phase_cuda_aarch64 ;;
        *) echo "test: unknown phase '$p'" >&2; exit 2 ;;
    esac
done

echo
echo "==================== summary ($((SECONDS - t_start)) s)"
printf '%s\n' "${summary[@]}"
echo "total: $n_pass passed, $n_fail failed, $n_skip skipped"
if [[ " ${summary[*]} " == *"fuzz         FAILED"* && -f "$logs/fuzz.log" ]]; then
    echo
    echo "==================== what the fuzz phase found ($logs/fuzz.log)"
    grep -E -A12 '^==[0-9]+==|^!! |^SUMMARY|^artifact_prefix|^Test unit written|^reproducer' "$logs/fuzz.log" | tail -n 80 || true
fi
if [[ $failed -ne 0 ]]; then
    exit 1
fi
