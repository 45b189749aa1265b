/* Must NOT compile with kernels/cpu's include directories: loaders/ is a sibling floor. */
#include "loaders.h"
int ert_floors_probe;
