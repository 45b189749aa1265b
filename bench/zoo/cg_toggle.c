/* Two functions for bench/zoo/callgrind_zoo.py (loaded with ctypes): turn
 * callgrind's instrumentation and collection on and off around onnxruntime's
 * InferenceSession.run. The onnxruntime wheels are stripped (libonnxruntime
 * exports only OrtGetApiBase; the Python module nothing but PyInit), so there
 * is no session Run symbol for --toggle-collect to name; client requests do
 * the same. With --instr-atstart=no the Python start-up, the imports and the
 * session create run uninstrumented (several times faster under valgrind).
 * Outside valgrind these are no-ops. */
#include <valgrind/callgrind.h>

void cg_on(void) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_TOGGLE_COLLECT;
}

void cg_off(void) {
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_STOP_INSTRUMENTATION;
}
