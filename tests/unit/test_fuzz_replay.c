/* Replays the fuzz_rx corpus (tests/fuzz/corpus) through the fuzz target's
 * own code in an ordinary build, without libFuzzer: every seed, and every
 * input that once crashed (they are added to the corpus), must pass the
 * target's checks (guard bytes, frozen MRs, receive lengths) and, in the
 * UROCE_SANITIZE build, ASan and UBSan.  A failure aborts.
 */
#include "../fuzz/fuzz_rx.c"
#include "fuzz_replay.h"

int main(void)
{
	LLVMFuzzerInitialize(NULL, NULL);
	return fuzz_replay("corpus", "test_fuzz_replay", 100);
}
