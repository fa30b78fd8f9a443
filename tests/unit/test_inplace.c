/* The UDP data path's in-place send and receive (docs/design.md, "Send and
 * receive paths"): with the same-host wire off, a data packet's payload
 * leaves from its MR (sent_in_place) and a packet continuing a WRITE or
 * SEND lands in its destination while its ICRC is checked (rcvd_in_place);
 * every transfer still arrives exactly (rc_harness.h compares the whole
 * destination span, guards included).  Under corruption the ICRC still
 * catches the damaged packets (corrupted after their ICRC was computed
 * over the MR, in a copy), and what they placed is overwritten by the
 * packets sent again: the data is still exact.  RDMA WRITEs of several
 * packets leave as one WRITE ONLY per packet (sent_write_split, req.c),
 * or with UROCE_WRITE_SPLIT=0 as FIRST, MIDDLE... LAST; each part that
 * continues the one before is placed while checked (rcvd_write_next).
 * The packets of a SEND or WRITE go out in runs (sent_in_runs, req.c
 * send_data_run: one header template, SGE map and batch lock per run),
 * under the fault injector too, which still decides per packet; none
 * with UROCE_TX_RUN=0. */
#include "rc_harness.h"

static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					 IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ};

static void run(const char *what, const char *fault, bool want_icrc)
{
	struct pair_opts o = default_opts(IBV_MTU_1024);
	static const uint32_t sizes[] = {1, 1024, 1025, 4096 + 3, 65536, 1u << 20};
	unsigned long tx0, rx0, icrc, split, next, runs;
	const char *sp = getenv("UROCE_WRITE_SPLIT"), *rp = getenv("UROCE_TX_RUN");
	bool want_split = !(sp && !strcmp(sp, "0")), want_runs = !(rp && !strcmp(rp, "0"));
	struct harness h;
	uint64_t seed = 900;

	if (fault)
		setenv("UROCE_FAULT", fault, 1);
	else
		unsetenv("UROCE_FAULT");
	if (harness_open(&h) || pair_create(&h, &o)) {
		CHECK(0, "%s: harness", what);
		harness_close(&h);
		return;
	}
	tx0 = CNT(&h, 0, tx_in_place) + CNT(&h, 1, tx_in_place);
	rx0 = CNT(&h, 0, rx_in_place) + CNT(&h, 1, rx_in_place);
	split = CNT(&h, 0, tx_write_split) + CNT(&h, 1, tx_write_split);
	next = CNT(&h, 0, rx_write_next) + CNT(&h, 1, rx_write_next);
	runs = CNT(&h, 0, tx_run) + CNT(&h, 1, tx_run);
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			struct xfer x = {.op = ops[k],
					 .size = sizes[i],
					 .lsge = 1 + (int)(i % 3),
					 .rsge = 1 + (int)(i % 2),
					 .rslack = 3};

			if (!do_xfer(&h, &x, ++seed)) {
				CHECK(0, "%s: %s of %u bytes", what, op_name(ops[k]), sizes[i]);
				pair_recover(&h);
			}
		}
	tx0 = CNT(&h, 0, tx_in_place) + CNT(&h, 1, tx_in_place) - tx0;
	rx0 = CNT(&h, 0, rx_in_place) + CNT(&h, 1, rx_in_place) - rx0;
	icrc = CNT(&h, 0, rx_drop_icrc) + CNT(&h, 1, rx_drop_icrc);
	split = CNT(&h, 0, tx_write_split) + CNT(&h, 1, tx_write_split) - split;
	next = CNT(&h, 0, rx_write_next) + CNT(&h, 1, rx_write_next) - next;
	runs = CNT(&h, 0, tx_run) + CNT(&h, 1, tx_run) - runs;
	printf("%s: sent in place %lu, placed on receipt %lu, bad ICRC %lu, WRITE ONLY parts %lu "
	       "(%lu placed as the next part), sent in runs %lu\n",
	       what, tx0, rx0, icrc, split, next, runs);
	/* the SENDs and WRITEs of 64 KiB and 1 MiB are runs; READs never */
	CHECK(want_runs ? runs > 0 && runs <= tx0 : runs == 0,
	      "%s: %lu packets sent in runs of %lu", what, runs, tx0);
	/* the WRITEs of 1025 B and more are several packets at MTU 1024 */
	CHECK(want_split ? split > 0 : split == 0, "%s: %lu WRITE packets sent as WRITE ONLY", what,
	      split);
	/* every part but a WRITE's first goes on from the one before (a
	 * WRITE that starts where the one before ended may count too) */
	CHECK(!want_split || (next > 0 && next <= split),
	      "%s: %lu WRITE ONLY parts placed as the next part of %lu", what, next, split);
	if (want_split && !fault)
		CHECK(next + 8 > split,
		      "%s: only %lu of %lu WRITE ONLY parts placed as the next part", what, next,
		      split);
	/* with faults too: a packet fault.c passes untouched is not copied
	 * (uroce_fault_tx_gather); a corrupted one is */
	CHECK(tx0 > 0, "%s: no packet left from its MR", what);
	CHECK(rx0 > 0, "%s: no packet was placed on receipt", what);
	if (want_icrc)
		CHECK(icrc > 0, "%s: no corrupted packet was caught", what);
	harness_close(&h);
	unsetenv("UROCE_FAULT");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* the same-host wire would carry everything */
	setenv("UROCE_SHM", "0", 1);
	run("clean", NULL, false);
	run("corrupt", "corrupt=0.02,seed=5", true);
	return finish("test_inplace");
}
