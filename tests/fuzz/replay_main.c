/* replay_main.c - a main() for libFuzzer harnesses without libFuzzer: runs
 * LLVMFuzzerTestOneInput() once on every file named on the command line, or in the directories
 * named there (sorted, not recursive: their subdirectories are skipped, e.g. examples/embed). ctest
 * runs every harness this way over its committed seed corpus, so the normal (and the ASan) suite
 * exercises each harness and its oracles. Exits non-zero when no input was found: a missing corpus
 * must not pass silently. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest corpus file replayed; seeds are small, a bigger file is a mistake. */
#define REPLAY_MAX_INPUT (16u << 20)

static int replay_file(const char *path)
{
    FILE *fh = fopen(path, "rb");
    if (fh == NULL) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(fh), &st) != 0 || st.st_size < 0 || st.st_size > REPLAY_MAX_INPUT) {
        fprintf(stderr, "replay: %s is not a regular file below %u bytes\n", path,
                REPLAY_MAX_INPUT);
        fclose(fh);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    /* An allocation of exactly the input's size, as libFuzzer gives: ASan sees any overread. */
    uint8_t *data = malloc(size > 0 ? size : 1);
    if (data == NULL || fread(data, 1, size, fh) != size) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(data);
        fclose(fh);
        return -1;
    }
    fclose(fh);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 1;
}

static int select_entry(const struct dirent *de)
{
    return de->d_name[0] != '.';
}

int main(int argc, char **argv)
{
    long inputs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) < 0)
                return 1;
            inputs++;
            continue;
        }
        struct dirent **names = NULL;
        int n = scandir(argv[i], &names, select_entry, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: cannot list %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        int failed = 0;
        for (int j = 0; j < n; j++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], names[j]->d_name);
            struct stat est;
            if (stat(path, &est) == 0 && S_ISDIR(est.st_mode)) { /* not recursive: skip */
                free(names[j]);
                continue;
            }
            if (!failed) {
                if (replay_file(path) < 0)
                    failed = 1;
                else
                    inputs++;
            }
            free(names[j]);
        }
        free(names);
        if (failed)
            return 1;
    }
    if (inputs == 0) {
        fprintf(stderr, "replay: no input files given (usage: %s CORPUS_DIR|FILE...)\n", argv[0]);
        return 1;
    }
    printf("replay: %ld inputs ran without a finding\n", inputs);
    return 0;
}
