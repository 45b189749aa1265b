/* Must NOT compile with core/'s include directories: runtime/ is above core/. */
#include "runtime_internal.h"
int ert_floors_probe;
