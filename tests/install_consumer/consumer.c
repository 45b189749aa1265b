/* A program of a user of the installed package: only <edgert.h>. */
#include <edgert.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    ert_context *ctx = NULL;
    if (ert_context_create(NULL, &ctx) != ERT_OK) return 1;
    int ok = strcmp(ert_version(), ERT_VERSION_STRING) == 0;
    ert_context_free(ctx);
    if (!ok) return 1;
    printf("consumer: ok (edgert %s)\n", ert_version());
    return 0;
}
