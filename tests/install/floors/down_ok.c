/* Control: compiles with every floor's include directories (core/ is below all). */
#include "ert_internal.h"
int ert_floors_probe;
