/* Replays the fuzz_rx corpus (tests/fuzz/corpus) through the fuzz target's
 * own code in an ordinary build, without libFuzzer: every seed, and every
 * input that once crashed (they are added to the corpus), must pass the
 * target's checks (guard bytes, frozen MRs, receive lengths) and, in the
 * UROCE_SANITIZE build, ASan and UBSan.  A failure aborts.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_rx.c"

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	const char *src = getenv("UROCE_SRC_DIR");
	char dir[PATH_MAX], path[PATH_MAX + 256];
	char **names = NULL;
	size_t n = 0, cap = 0;
	unsigned int passed = 0, failed = 0;
	struct dirent *e;
	DIR *d;

	if (src) {
		snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus", src);
	} else { /* next to this file */
		const char *slash = strrchr(__FILE__, '/');

		snprintf(dir, sizeof(dir), "%.*s/../fuzz/corpus",
			 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
	}
	d = opendir(dir);
	if (!d) {
		printf("%s: %s\n", dir, strerror(errno));
		printf("test_fuzz_replay: 0 passed, 1 failed\n");
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

	LLVMFuzzerInitialize(NULL, NULL);
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
	if (n < 100) {
		printf("FAIL: only %zu inputs in %s\n", n, dir);
		failed++;
	}
	printf("test_fuzz_replay: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
