/* Replays the fuzz_cm corpus (tests/fuzz/corpus_cm) through the CM fuzz
 * target's own code (tests/fuzz/fuzz_cm.c: QP1 packet parser, MAD parser,
 * the CM's receive path with the CM thread running) in an ordinary build,
 * without libFuzzer: every input must be dropped or handled without a crash
 * and, in the UROCE_SANITIZE build, without an ASan or UBSan report.
 */
#include "../fuzz/fuzz_cm.c"
#include "fuzz_replay.h"

int main(void)
{
	return fuzz_replay("corpus_cm", "test_cm_fuzz_replay", 20);
}
