/* Regression runner without libFuzzer: feeds every file under CORPUS_ROOT/<sub>/ (the
 * committed corpora and crash reproducers, tests/fuzz/corpus/<target>) to the fuzz
 * entry point it is linked with. A crash fails the test (ctest sees the
 * signal); under ASan/UBSan builds so do memory errors. */
#define _DEFAULT_SOURCE /* d_type, opendir */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0) break;
        n += r;
    }
    fclose(f);
    /* Exactly-sized copy so sanitizers see over-reads. */
    uint8_t *exact = malloc(n ? n : 1);
    if (exact && buf) memcpy(exact, buf, n);
    free(buf);
    if (!exact) return 0;
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_ROOT (runs CORPUS_ROOT/*/*)\n", argv[0]);
        return 2;
    }
    int files = 0;
    DIR *root = opendir(argv[1]);
    if (!root) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 1;
    }
    for (struct dirent *d; (d = readdir(root));) {
        if (d->d_name[0] == '.') continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", argv[1], d->d_name);
        DIR *s = opendir(sub);
        if (!s) continue;
        for (struct dirent *e; (e = readdir(s));) {
            if (e->d_name[0] == '.') continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
            struct stat st;
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) files += run_file(path);
        }
        closedir(s);
    }
    closedir(root);
    printf("fuzz_regress: %d inputs ran without a crash\n", files);
    return 0;
}
