/* Replay of a libFuzzer corpus in an ordinary build, without libFuzzer
 * (tests/unit/test_fuzz_replay.c, test_cm_fuzz_replay.c): include it after
 * the target's source, which defines LLVMFuzzerTestOneInput.  A failed check
 * of the target aborts; in the UROCE_SANITIZE build ASan and UBSan check
 * every input too.
 */
#ifndef UROCE_FUZZ_REPLAY_H
#define UROCE_FUZZ_REPLAY_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every file of tests/fuzz/CORPUS through LLVMFuzzerTestOneInput;
 * NAME for the summary line; at least MIN inputs must be there. */
static int fuzz_replay(const char *corpus, const char *name, size_t min)
{
	const char *src = getenv("UROCE_SRC_DIR");
	char dir[PATH_MAX], path[PATH_MAX + 256];
	char **names = NULL;
	size_t n = 0, cap = 0;
	unsigned int passed = 0, failed = 0;
	struct dirent *e;
	DIR *d;

	if (src) {
		snprintf(dir, sizeof(dir), "%s/tests/fuzz/%s", src, corpus);
	} else { /* next to this file */
		const char *slash = strrchr(__FILE__, '/');

		snprintf(dir, sizeof(dir), "%.*s/../fuzz/%s", slash ? (int)(slash - __FILE__) : 1,
			 slash ? __FILE__ : ".", corpus);
	}
	d = opendir(dir);
	if (!d) {
		printf("%s: %s\n", dir, strerror(errno));
		printf("%s: 0 passed, 1 failed\n", name);
		return 1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				return 1;
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), by_name);

	for (size_t i = 0; i < n; i++) {
		static uint8_t data[1 << 20];
		size_t len;
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "rb");
		if (!f) {
			printf("FAIL %s: %s\n", path, strerror(errno));
			failed++;
			continue;
		}
		len = fread(data, 1, sizeof(data), f);
		fclose(f);
		LLVMFuzzerTestOneInput(data, len); /* aborts on a failed check */
		passed++;
		free(names[i]);
	}
	free(names);
	if (n < min) {
		printf("FAIL: only %zu inputs in %s\n", n, dir);
		failed++;
	}
	printf("%s: %u passed, %u failed\n", name, passed, failed);
	return failed ? 1 : 0;
}

#endif
