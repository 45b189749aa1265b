/* Must NOT compile with loaders/'s include directories: kernels/ is a sibling floor. */
#include "cpu_backend.h"
int ert_floors_probe;
