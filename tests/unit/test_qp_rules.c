/* Unit test for src/verbs/qp_rules.c: the ibv_modify_qp() transition and
 * attribute-mask table, and the attribute value checks.
 *
 * The expected table below is a second, independent transcription of the
 * kernel's qp_state_table (drivers/infiniband/core/verbs.c), written out bit
 * by bit per QP type, so a slip in the implementation's grouped masks shows
 * up here.  Every (type, cur, next) combination is exercised.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "verbs/qp_rules.h"

static int n_pass, n_fail;

__attribute__((format(printf, 3, 4))) static void check(bool ok, int line, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		n_pass++;
		return;
	}
	n_fail++;
	fprintf(stderr, "FAIL line %d: ", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define CHECK(cond, ...) check((cond), __LINE__, __VA_ARGS__)

#define RESET IBV_QPS_RESET
#define INIT  IBV_QPS_INIT
#define RTR   IBV_QPS_RTR
#define RTS   IBV_QPS_RTS
#define SQD   IBV_QPS_SQD
#define SQE   IBV_QPS_SQE
#define ERR   IBV_QPS_ERR

#define RC  IBV_QPT_RC
#define UC  IBV_QPT_UC
#define UD  IBV_QPT_UD
#define XRS IBV_QPT_XRC_SEND
#define XRR IBV_QPT_XRC_RECV

static const enum ibv_qp_type types[] = {RC, UC, UD, XRS, XRR};
static const enum ibv_qp_state states[] = {RESET, INIT, RTR, RTS, SQD, SQE, ERR};

struct expect {
	enum ibv_qp_type type;
	enum ibv_qp_state cur, next;
	unsigned int req, opt;
};

/* Everything except X->RESET and X->ERR, which are checked separately. */
static const struct expect expected[] = {
    /* RESET -> INIT */
    {RC, RESET, INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {UC, RESET, INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {UD, RESET, INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0},
    {XRS, RESET, INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {XRR, RESET, INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    /* INIT -> INIT */
    {RC, INIT, INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {UC, INIT, INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {UD, INIT, INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY},
    {XRS, INIT, INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {XRR, INIT, INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    /* INIT -> RTR */
    {RC, INIT, RTR,
     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
	 IBV_QP_MIN_RNR_TIMER,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {UC, INIT, RTR, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {UD, INIT, RTR, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
    {XRS, INIT, RTR, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {XRR, INIT, RTR,
     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
	 IBV_QP_MIN_RNR_TIMER,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    /* RTR -> RTS */
    {RC, RTR, RTS,
     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	 IBV_QP_PATH_MIG_STATE},
    {UC, RTR, RTS, IBV_QP_SQ_PSN,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE},
    {UD, RTR, RTS, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY},
    {XRS, RTR, RTS,
     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE},
    {XRR, RTR, RTS, IBV_QP_TIMEOUT | IBV_QP_SQ_PSN,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	 IBV_QP_PATH_MIG_STATE},
    /* RTS -> RTS */
    {RC, RTS, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
	 IBV_QP_MIN_RNR_TIMER},
    {UC, RTS, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE},
    {UD, RTS, RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY},
    {XRS, RTS, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE},
    {XRR, RTS, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
	 IBV_QP_MIN_RNR_TIMER},
    /* RTS -> SQD */
    {RC, RTS, SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
    {UC, RTS, SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
    {UD, RTS, SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
    {XRS, RTS, SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
    {XRR, RTS, SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
    /* SQD -> RTS */
    {RC, SQD, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	 IBV_QP_PATH_MIG_STATE},
    {UC, SQD, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE},
    {UD, SQD, RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY},
    {XRS, SQD, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE},
    {XRR, SQD, RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
	 IBV_QP_PATH_MIG_STATE},
    /* SQD -> SQD */
    {RC, SQD, SQD, 0,
     IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	 IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
	 IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE},
    {UC, SQD, SQD, 0,
     IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE},
    {UD, SQD, SQD, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
    {XRS, SQD, SQD, 0,
     IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	 IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
	 IBV_QP_PATH_MIG_STATE},
    {XRR, SQD, SQD, 0,
     IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
	 IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE},
    /* SQE -> RTS (RC/XRC never reach SQE; the kernel allows it bare) */
    {RC, SQE, RTS, 0, 0},
    {UC, SQE, RTS, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS},
    {UD, SQE, RTS, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY},
    {XRS, SQE, RTS, 0, 0},
    {XRR, SQE, RTS, 0, 0},
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Every defined IBV_QP_* bit except IBV_QP_STATE, plus some undefined ones. */
static const unsigned int all_bits[] = {
    IBV_QP_CUR_STATE,
    IBV_QP_EN_SQD_ASYNC_NOTIFY,
    IBV_QP_ACCESS_FLAGS,
    IBV_QP_PKEY_INDEX,
    IBV_QP_PORT,
    IBV_QP_QKEY,
    IBV_QP_AV,
    IBV_QP_PATH_MTU,
    IBV_QP_TIMEOUT,
    IBV_QP_RETRY_CNT,
    IBV_QP_RNR_RETRY,
    IBV_QP_RQ_PSN,
    IBV_QP_MAX_QP_RD_ATOMIC,
    IBV_QP_ALT_PATH,
    IBV_QP_MIN_RNR_TIMER,
    IBV_QP_SQ_PSN,
    IBV_QP_MAX_DEST_RD_ATOMIC,
    IBV_QP_PATH_MIG_STATE,
    IBV_QP_CAP,
    IBV_QP_DEST_QPN,
    IBV_QP_RATE_LIMIT,
    1u << 21,
    1u << 24,
    1u << 31,
};

static const char *tname(enum ibv_qp_type t)
{
	switch (t) {
	case RC:
		return "RC";
	case UC:
		return "UC";
	case UD:
		return "UD";
	case XRS:
		return "XRC_SEND";
	case XRR:
		return "XRC_RECV";
	default:
		return "?";
	}
}

static const char *bitname(unsigned int bit, char *buf, size_t len)
{
	return uroce_qp_attr_mask_str((int)bit, buf, len);
}

static const struct expect *find_expect(enum ibv_qp_type t, enum ibv_qp_state c,
					enum ibv_qp_state n)
{
	size_t i;

	for (i = 0; i < NELEM(expected); i++)
		if (expected[i].type == t && expected[i].cur == c && expected[i].next == n)
			return &expected[i];
	return NULL;
}

static int mc(enum ibv_qp_type t, enum ibv_qp_state c, enum ibv_qp_state n, unsigned int mask,
	      char *why, size_t len)
{
	why[0] = '\0';
	return uroce_qp_modify_check(t, c, n, (int)mask, why, len);
}

/* One legal transition: required mask passes, each required bit missing and
 * each foreign bit present fails with a reason naming it. */
static void check_legal(const struct expect *e)
{
	const char *cn = uroce_qp_state_name(e->cur), *nn = uroce_qp_state_name(e->next);
	const char *tn = tname(e->type);
	char why[512], want[512], bn[64];
	size_t i;
	int rc;

	rc = mc(e->type, e->cur, e->next, e->req, why, sizeof(why));
	CHECK(rc == 0, "%s %s->%s req mask: %s", tn, cn, nn, why);
	rc = mc(e->type, e->cur, e->next, IBV_QP_STATE | e->req, why, sizeof(why));
	CHECK(rc == 0, "%s %s->%s STATE|req mask: %s", tn, cn, nn, why);
	rc = mc(e->type, e->cur, e->next, IBV_QP_STATE | e->req | (e->opt & ~IBV_QP_ALT_PATH), why,
		sizeof(why));
	CHECK(rc == 0, "%s %s->%s req|opt: %s", tn, cn, nn, why);

	for (i = 0; i < NELEM(all_bits); i++) {
		unsigned int bit = all_bits[i];

		bitname(bit, bn, sizeof(bn));
		if (e->req & bit) {
			rc = mc(e->type, e->cur, e->next, IBV_QP_STATE | (e->req & ~bit), why,
				sizeof(why));
			snprintf(want, sizeof(want), "modify_qp %s->%s: missing %s", cn, nn, bn);
			CHECK(rc == EINVAL && !strcmp(why, want), "%s: got rc %d '%s', want '%s'",
			      tn, rc, why, want);
		} else if (e->opt & bit) {
			rc = mc(e->type, e->cur, e->next, IBV_QP_STATE | e->req | bit, why,
				sizeof(why));
			if (bit == IBV_QP_ALT_PATH)
				CHECK(rc == EINVAL && strstr(why, "IBV_QP_ALT_PATH") &&
					  strstr(why, "RoCE"),
				      "%s %s->%s ALT_PATH on RoCE: rc %d '%s'", tn, cn, nn, rc,
				      why);
			else
				CHECK(rc == 0, "%s %s->%s optional %s: rc %d '%s'", tn, cn, nn, bn,
				      rc, why);
		} else {
			rc = mc(e->type, e->cur, e->next, IBV_QP_STATE | e->req | bit, why,
				sizeof(why));
			snprintf(want, sizeof(want),
				 "modify_qp %s->%s: %s not allowed in this transition", cn, nn, bn);
			CHECK(rc == EINVAL && !strcmp(why, want), "%s: got rc %d '%s', want '%s'",
			      tn, rc, why, want);
		}
	}
}

static void test_table_exhaustive(void)
{
	char why[512], want[512];
	size_t t, c, n;
	int rc;

	for (t = 0; t < NELEM(types); t++) {
		for (c = 0; c < NELEM(states); c++) {
			for (n = 0; n < NELEM(states); n++) {
				enum ibv_qp_state cur = states[c], next = states[n];
				const struct expect *e = find_expect(types[t], cur, next);

				if (e) {
					check_legal(e);
					continue;
				}
				if (next == RESET || (next == ERR && cur != RESET))
					continue; /* test_to_reset_err() */
				rc = mc(types[t], cur, next, IBV_QP_STATE, why, sizeof(why));
				snprintf(want, sizeof(want), "modify_qp %s->%s: illegal transition",
					 uroce_qp_state_name(cur), uroce_qp_state_name(next));
				CHECK(rc == EINVAL && !strncmp(why, want, strlen(want)),
				      "%s %s->%s should be illegal: rc %d '%s'", tname(types[t]),
				      uroce_qp_state_name(cur), uroce_qp_state_name(next), rc, why);
				rc = mc(types[t], cur, next, 0, why, sizeof(why));
				CHECK(rc == EINVAL, "%s %s->%s mask 0 should be illegal",
				      tname(types[t]), uroce_qp_state_name(cur),
				      uroce_qp_state_name(next));
			}
		}
	}
}

static void test_to_reset_err(void)
{
	char why[512], bn[64];
	size_t t, c, i;
	int rc;

	for (t = 0; t < NELEM(types); t++) {
		for (c = 0; c < NELEM(states); c++) {
			enum ibv_qp_state cur = states[c];
			const char *cn = uroce_qp_state_name(cur);

			rc = mc(types[t], cur, RESET, IBV_QP_STATE, why, sizeof(why));
			CHECK(rc == 0, "%s %s->RESET: %s", tname(types[t]), cn, why);
			rc = mc(types[t], cur, RESET, 0, why, sizeof(why));
			CHECK(rc == 0, "%s %s->RESET (mask 0): %s", tname(types[t]), cn, why);
			if (cur != RESET) {
				rc = mc(types[t], cur, ERR, IBV_QP_STATE, why, sizeof(why));
				CHECK(rc == 0, "%s %s->ERR: %s", tname(types[t]), cn, why);
			}
			/* ... and with no other bit, not even IBV_QP_CUR_STATE. */
			for (i = 0; i < NELEM(all_bits); i++) {
				bitname(all_bits[i], bn, sizeof(bn));
				rc = mc(types[t], cur, RESET, IBV_QP_STATE | all_bits[i], why,
					sizeof(why));
				CHECK(rc == EINVAL && strstr(why, bn) && strstr(why, "not allowed"),
				      "%s %s->RESET with %s: rc %d '%s'", tname(types[t]), cn, bn,
				      rc, why);
				if (cur == RESET)
					continue;
				rc = mc(types[t], cur, ERR, IBV_QP_STATE | all_bits[i], why,
					sizeof(why));
				CHECK(rc == EINVAL && strstr(why, bn) && strstr(why, "not allowed"),
				      "%s %s->ERR with %s: rc %d '%s'", tname(types[t]), cn, bn, rc,
				      why);
			}
		}
		/* The kernel table has no RESET->ERR: real devices say EINVAL. */
		rc = mc(types[t], RESET, ERR, IBV_QP_STATE, why, sizeof(why));
		CHECK(rc == EINVAL && strstr(why, "modify_qp RESET->ERR: illegal transition"),
		      "%s RESET->ERR should be illegal: rc %d '%s'", tname(types[t]), rc, why);
	}
}

static void test_reason_strings(void)
{
	char why[256];
	int rc;

	rc =
	    mc(RC, RESET, INIT, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, why, sizeof(why));
	CHECK(rc == EINVAL && !strcmp(why, "modify_qp RESET->INIT: missing IBV_QP_PKEY_INDEX"),
	      "reason 1: '%s'", why);

	rc = mc(RC, INIT, RTR,
		IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN,
		why, sizeof(why));
	CHECK(rc == EINVAL &&
		  !strcmp(why, "modify_qp INIT->RTR: IBV_QP_SQ_PSN not allowed in this transition"),
	      "reason 2: '%s'", why);

	rc = mc(RC, RESET, RTS, IBV_QP_STATE, why, sizeof(why));
	CHECK(rc == EINVAL && !strcmp(why, "modify_qp RESET->RTS: illegal transition"),
	      "reason 3: '%s'", why);

	/* Several missing bits are all named, in bit order. */
	rc = mc(RC, RESET, INIT, IBV_QP_STATE, why, sizeof(why));
	CHECK(rc == EINVAL && !strcmp(why, "modify_qp RESET->INIT: missing IBV_QP_ACCESS_FLAGS|"
					   "IBV_QP_PKEY_INDEX|IBV_QP_PORT"),
	      "multi missing: '%s'", why);

	/* RTS->SQE is the device's, not the consumer's. */
	rc = mc(UD, RTS, SQE, IBV_QP_STATE, why, sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "modify_qp RTS->SQE: illegal transition") &&
		  strstr(why, "device"),
	      "RTS->SQE: '%s'", why);
}

static void test_named_illegal(void)
{
	static const struct {
		enum ibv_qp_state c, n;
	} bad[] = {
	    {RESET, RTR}, {RESET, RTS}, {RESET, SQD}, {RESET, SQE}, {RESET, ERR}, {INIT, RTS},
	    {INIT, SQD},  {INIT, SQE},	{RTR, INIT},  {RTR, RTR},   {RTR, SQD},	  {RTR, SQE},
	    {RTS, INIT},  {RTS, RTR},	{RTS, SQE},   {SQD, INIT},  {SQD, RTR},	  {SQD, SQE},
	    {SQE, INIT},  {SQE, RTR},	{SQE, SQD},   {SQE, SQE},   {ERR, INIT},  {ERR, RTR},
	    {ERR, RTS},	  {ERR, SQD},	{ERR, SQE},
	};
	char why[256];
	size_t i, t;

	for (t = 0; t < NELEM(types); t++)
		for (i = 0; i < NELEM(bad); i++) {
			int rc = mc(types[t], bad[i].c, bad[i].n, IBV_QP_STATE, why, sizeof(why));

			CHECK(rc == EINVAL && strstr(why, "illegal transition"),
			      "%s %s->%s should be illegal: rc %d '%s'", tname(types[t]),
			      uroce_qp_state_name(bad[i].c), uroce_qp_state_name(bad[i].n), rc,
			      why);
		}
}

/* Rules that are easy to get wrong, spelled out. */
static void test_subtle_rules(void)
{
	char why[256];

	/* IBV_QP_CUR_STATE only on RTR->RTS, RTS->RTS, SQD->RTS, SQE->RTS. */
	CHECK(!mc(RC, RTS, RTS, IBV_QP_STATE | IBV_QP_CUR_STATE, why, sizeof(why)), "%s", why);
	CHECK(!mc(UD, SQE, RTS, IBV_QP_STATE | IBV_QP_CUR_STATE, why, sizeof(why)), "%s", why);
	CHECK(!mc(UC, SQD, RTS, IBV_QP_CUR_STATE, why, sizeof(why)), "%s", why);
	CHECK(mc(RC, INIT, INIT, IBV_QP_STATE | IBV_QP_CUR_STATE, why, sizeof(why)) == EINVAL,
	      "CUR_STATE INIT->INIT");
	CHECK(mc(RC, SQD, SQD, IBV_QP_CUR_STATE, why, sizeof(why)) == EINVAL, "CUR_STATE SQD->SQD");
	CHECK(mc(UD, RTS, SQD, IBV_QP_CUR_STATE, why, sizeof(why)) == EINVAL, "CUR_STATE RTS->SQD");

	/* RC may update its RNR timer at RTR->RTS; UC has no RNR NAKs. */
	CHECK(!mc(RC, RTR, RTS,
		  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		  why, sizeof(why)),
	      "%s", why);
	CHECK(mc(UC, RTR, RTS, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_MIN_RNR_TIMER, why,
		 sizeof(why)) == EINVAL &&
		  strstr(why, "IBV_QP_MIN_RNR_TIMER not allowed"),
	      "UC MIN_RNR_TIMER: %s", why);
	/* The P_Key may not change at RTR->RTS; Q_Key is UD-only. */
	CHECK(mc(UD, RTR, RTS, IBV_QP_SQ_PSN | IBV_QP_PKEY_INDEX, why, sizeof(why)) == EINVAL,
	      "UD PKEY at RTR->RTS");
	CHECK(mc(RC, INIT, INIT, IBV_QP_QKEY, why, sizeof(why)) == EINVAL, "RC QKEY");
	CHECK(!mc(UD, INIT, INIT, IBV_QP_QKEY, why, sizeof(why)), "%s", why);
	/* UD: nothing needed for RTR, and no address vector or remote QPN. */
	CHECK(!mc(UD, INIT, RTR, IBV_QP_STATE, why, sizeof(why)), "%s", why);
	CHECK(mc(UD, INIT, RTR, IBV_QP_STATE | IBV_QP_AV, why, sizeof(why)) == EINVAL, "UD AV");
	CHECK(mc(UD, INIT, RTR, IBV_QP_STATE | IBV_QP_DEST_QPN, why, sizeof(why)) == EINVAL,
	      "UD DEST_QPN");
	/* UC INIT->RTR: no responder resources. */
	CHECK(mc(UC, INIT, RTR,
		 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		     IBV_QP_MAX_DEST_RD_ATOMIC,
		 why, sizeof(why)) == EINVAL,
	      "UC MAX_DEST_RD_ATOMIC");
	/* PATH_MTU / PSNs / DEST_QPN cannot change in SQD->SQD. */
	CHECK(mc(RC, SQD, SQD, IBV_QP_PATH_MTU, why, sizeof(why)) == EINVAL, "SQD PATH_MTU");
	CHECK(mc(RC, SQD, SQD, IBV_QP_SQ_PSN, why, sizeof(why)) == EINVAL, "SQD SQ_PSN");
	CHECK(!mc(RC, SQD, SQD, IBV_QP_TIMEOUT | IBV_QP_AV | IBV_QP_PORT, why, sizeof(why)), "%s",
	      why);
	/* IBV_QP_CAP (resize) and RATE_LIMIT (raw packet) are never allowed. */
	CHECK(mc(RC, RTS, RTS, IBV_QP_CAP, why, sizeof(why)) == EINVAL, "CAP");
	CHECK(mc(UD, RTS, RTS, IBV_QP_RATE_LIMIT, why, sizeof(why)) == EINVAL, "RATE_LIMIT");
	/* ALT_PATH passes the table but RoCE has no APM. */
	CHECK(mc(RC, RTS, RTS, IBV_QP_ALT_PATH, why, sizeof(why)) == EINVAL && strstr(why, "RoCE"),
	      "ALT_PATH: %s", why);
	CHECK(!mc(RC, RTS, RTS, IBV_QP_PATH_MIG_STATE, why, sizeof(why)), "%s", why);
}

static void test_bad_inputs(void)
{
	char why[256];
	int rc;

	rc = mc(IBV_QPT_RAW_PACKET, RESET, INIT, IBV_QP_STATE | IBV_QP_PORT, why, sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "unsupported QP type RAW_PACKET"), "raw: '%s'", why);
	rc = mc(IBV_QPT_DRIVER, INIT, RESET, IBV_QP_STATE, why, sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "unsupported QP type"), "driver: '%s'", why);
	rc = mc((enum ibv_qp_type)0, INIT, RESET, IBV_QP_STATE, why, sizeof(why));
	CHECK(rc == EINVAL, "type 0");
	rc = mc(RC, IBV_QPS_UNKNOWN, RESET, IBV_QP_STATE, why, sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "modify_qp UNKNOWN->RESET: invalid QP state"),
	      "unknown state: '%s'", why);
	rc = mc(RC, INIT, (enum ibv_qp_state)42, IBV_QP_STATE, why, sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "invalid QP state"), "state 42: '%s'", why);

	/* why may be NULL or short. */
	CHECK(uroce_qp_modify_check(RC, RESET, RTS, IBV_QP_STATE, NULL, 0) == EINVAL, "NULL why");
	CHECK(uroce_qp_modify_check(RC, RESET, INIT, IBV_QP_STATE, NULL, 100) == EINVAL,
	      "NULL why 2");
	memset(why, 'x', sizeof(why));
	rc = uroce_qp_modify_check(RC, RESET, RTS, IBV_QP_STATE, why, 8);
	CHECK(rc == EINVAL && strlen(why) == 7 && !strcmp(why, "modify_"), "short why: '%s'", why);
	memset(why, 'x', sizeof(why));
	rc = uroce_qp_modify_check(RC, RESET, INIT, IBV_QP_STATE, why, 30);
	CHECK(rc == EINVAL && strlen(why) == 29, "short why 2: '%s'", why);
	memset(why, 'x', sizeof(why));
	rc = uroce_qp_modify_check(RC, RESET, INIT, IBV_QP_STATE, why, 0);
	CHECK(rc == EINVAL && why[0] == 'x', "why_len 0 must not write");
}

static void test_names(void)
{
	char buf[512];

	CHECK(!strcmp(uroce_qp_state_name(RESET), "RESET"), "RESET");
	CHECK(!strcmp(uroce_qp_state_name(INIT), "INIT"), "INIT");
	CHECK(!strcmp(uroce_qp_state_name(RTR), "RTR"), "RTR");
	CHECK(!strcmp(uroce_qp_state_name(RTS), "RTS"), "RTS");
	CHECK(!strcmp(uroce_qp_state_name(SQD), "SQD"), "SQD");
	CHECK(!strcmp(uroce_qp_state_name(SQE), "SQE"), "SQE");
	CHECK(!strcmp(uroce_qp_state_name(ERR), "ERR"), "ERR");
	CHECK(!strcmp(uroce_qp_state_name(IBV_QPS_UNKNOWN), "UNKNOWN"), "UNKNOWN");
	CHECK(!strcmp(uroce_qp_state_name((enum ibv_qp_state) - 1), "UNKNOWN"), "-1");

	CHECK(!strcmp(uroce_qp_attr_mask_str(0, buf, sizeof(buf)), "0"), "empty: '%s'", buf);
	CHECK(!strcmp(uroce_qp_attr_mask_str(IBV_QP_STATE | IBV_QP_PORT, buf, sizeof(buf)),
		      "IBV_QP_STATE|IBV_QP_PORT"),
	      "two: '%s'", buf);
	CHECK(!strcmp(uroce_qp_attr_mask_str(IBV_QP_DEST_QPN | IBV_QP_RATE_LIMIT | IBV_QP_CAP, buf,
					     sizeof(buf)),
		      "IBV_QP_CAP|IBV_QP_DEST_QPN|IBV_QP_RATE_LIMIT"),
	      "three: '%s'", buf);
	CHECK(!strcmp(uroce_qp_attr_mask_str(IBV_QP_AV | (1 << 21) | (1 << 30), buf, sizeof(buf)),
		      "IBV_QP_AV|0x40200000"),
	      "unknown: '%s'", buf);
	CHECK(!strcmp(uroce_qp_attr_mask_str(1 << 22, buf, sizeof(buf)), "0x400000"),
	      "only unknown: '%s'", buf);
	CHECK(!strcmp(uroce_qp_attr_mask_str((int)(1u << 31), buf, sizeof(buf)), "0x80000000"),
	      "bit 31: '%s'", buf);
	memset(buf, 'x', sizeof(buf));
	uroce_qp_attr_mask_str(IBV_QP_STATE | IBV_QP_PORT | IBV_QP_AV, buf, 10);
	CHECK(strlen(buf) == 9 && !strcmp(buf, "IBV_QP_ST"), "truncated: '%s'", buf);
	memset(buf, 'x', sizeof(buf));
	uroce_qp_attr_mask_str(IBV_QP_STATE | IBV_QP_PORT | IBV_QP_AV | (1 << 23), buf, 26);
	CHECK(strlen(buf) == 25, "truncated 2: '%s'", buf);
	CHECK(!strcmp(uroce_qp_attr_mask_str(IBV_QP_STATE, NULL, 0), ""), "NULL buf");
	/* Every bit at once fits a 512-byte buffer. */
	uroce_qp_attr_mask_str(-1, buf, sizeof(buf));
	CHECK(strstr(buf, "IBV_QP_STATE|IBV_QP_CUR_STATE|") && strstr(buf, "IBV_QP_RATE_LIMIT|0x"),
	      "all: '%s'", buf);
}

/* ---- value checks --------------------------------------------------------- */

static const struct uroce_qp_limits lim = {
    .active_mtu = IBV_MTU_1024,
    .max_rd_atomic = 16,
    .max_dest_rd_atomic = 16,
    .gid_tbl_len = 4,
};

static struct ibv_qp_attr good_attr(enum ibv_qp_state next)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = next;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qkey = 0x11111111;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x123456;
	a.rq_psn = 0xabcdef;
	a.sq_psn = 0x000001;
	a.max_dest_rd_atomic = 16;
	a.max_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 3;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	a.ah_attr.sl = 0;
	return a;
}

#define RTR_MASK                                                                                   \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |            \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_MASK                                                                                   \
	(IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |     \
	 IBV_QP_MAX_QP_RD_ATOMIC)
#define INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)

/* The masks ibv_rc_pingpong / ibv_ud_pingpong / perftest use, end to end. */
static void test_app_sequences(void)
{
	static const struct {
		enum ibv_qp_type t;
		enum ibv_qp_state c, n;
		unsigned int mask;
	} seq[] = {
	    {RC, RESET, INIT, INIT_MASK},
	    {RC, INIT, RTR, RTR_MASK},
	    {RC, RTR, RTS, RTS_MASK},
	    {UC, RESET, INIT, INIT_MASK},
	    {UC, INIT, RTR,
	     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN},
	    {UC, RTR, RTS, IBV_QP_STATE | IBV_QP_SQ_PSN},
	    {UD, RESET, INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY},
	    {UD, INIT, RTR, IBV_QP_STATE},
	    {UD, RTR, RTS, IBV_QP_STATE | IBV_QP_SQ_PSN},
	    {RC, RTS, SQD, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY},
	    {RC, SQD, SQD, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT},
	    {RC, SQD, RTS, IBV_QP_STATE},
	    {RC, RTS, ERR, IBV_QP_STATE},
	    {RC, ERR, RESET, IBV_QP_STATE},
	};
	char why[256];
	size_t i;

	for (i = 0; i < NELEM(seq); i++) {
		struct ibv_qp_attr a = good_attr(seq[i].n);
		int rc = mc(seq[i].t, seq[i].c, seq[i].n, seq[i].mask, why, sizeof(why));

		CHECK(rc == 0, "app seq %zu modify_check: %s", i, why);
		rc = uroce_qp_attr_check(seq[i].t, seq[i].c, seq[i].n, &a, (int)seq[i].mask, &lim,
					 why, sizeof(why));
		CHECK(rc == 0, "app seq %zu attr_check: %s", i, why);
	}
}

static int ac(const struct ibv_qp_attr *a, enum ibv_qp_state c, enum ibv_qp_state n,
	      unsigned int mask, char *why, size_t len)
{
	why[0] = '\0';
	return uroce_qp_attr_check(RC, c, n, a, (int)mask, &lim, why, len);
}

#define BAD(field, value, c, n, mask, substr)                                                      \
	do {                                                                                       \
		struct ibv_qp_attr a_ = good_attr(n);                                              \
		int rc_;                                                                           \
		a_.field = (value);                                                                \
		rc_ = ac(&a_, c, n, mask, why, sizeof(why));                                       \
		CHECK(rc_ == EINVAL && strstr(why, substr), #field "=" #value ": rc %d '%s'", rc_, \
		      why);                                                                        \
		rc_ = ac(&a_, c, n, 0, why, sizeof(why));                                          \
		CHECK(rc_ == 0, #field "=" #value " unchecked without its bit: '%s'", why);        \
	} while (0)

#define GOOD(field, value, c, n, mask)                                                             \
	do {                                                                                       \
		struct ibv_qp_attr a_ = good_attr(n);                                              \
		int rc_;                                                                           \
		a_.field = (value);                                                                \
		rc_ = ac(&a_, c, n, mask, why, sizeof(why));                                       \
		CHECK(rc_ == 0, #field "=" #value ": '%s'", why);                                  \
	} while (0)

static void test_values(void)
{
	char why[512];
	struct ibv_qp_attr a;
	int rc;

	/* Ranges, boundary values inclusive. */
	BAD(path_mtu, (enum ibv_mtu)0, INIT, RTR, RTR_MASK, "path_mtu 0 invalid");
	BAD(path_mtu, (enum ibv_mtu)6, INIT, RTR, RTR_MASK, "path_mtu 6 invalid");
	BAD(path_mtu, IBV_MTU_2048, INIT, RTR, RTR_MASK,
	    "modify_qp INIT->RTR: path_mtu 2048 exceeds the port's active MTU 1024");
	BAD(path_mtu, IBV_MTU_4096, INIT, RTR, RTR_MASK, "exceeds the port's active MTU");
	GOOD(path_mtu, IBV_MTU_256, INIT, RTR, RTR_MASK);
	GOOD(path_mtu, IBV_MTU_1024, INIT, RTR, RTR_MASK);

	BAD(timeout, 32, RTR, RTS, RTS_MASK, "timeout 32 out of range");
	GOOD(timeout, 31, RTR, RTS, RTS_MASK);
	GOOD(timeout, 0, RTR, RTS, RTS_MASK);
	BAD(retry_cnt, 8, RTR, RTS, RTS_MASK, "retry_cnt 8 out of range");
	GOOD(retry_cnt, 0, RTR, RTS, RTS_MASK);
	BAD(rnr_retry, 8, RTR, RTS, RTS_MASK, "rnr_retry 8 out of range");
	BAD(rnr_retry, 255, RTR, RTS, RTS_MASK, "rnr_retry 255 out of range");
	BAD(min_rnr_timer, 32, INIT, RTR, RTR_MASK, "min_rnr_timer 32 out of range");
	GOOD(min_rnr_timer, 31, INIT, RTR, RTR_MASK);
	GOOD(min_rnr_timer, 0, INIT, RTR, RTR_MASK);

	BAD(pkey_index, 1, RESET, INIT, INIT_MASK, "pkey_index 1 out of range");
	BAD(port_num, 0, RESET, INIT, INIT_MASK, "port_num 0 invalid");
	BAD(port_num, 2, RESET, INIT, INIT_MASK, "port_num 2 invalid");
	BAD(qp_access_flags, IBV_ACCESS_ZERO_BASED, RESET, INIT, INIT_MASK,
	    "qp_access_flags 0x20 has unsupported bits 0x20");
	BAD(qp_access_flags, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND, RESET, INIT, INIT_MASK,
	    "unsupported bits 0x40");
	BAD(qp_access_flags, 1u << 31, RESET, INIT, INIT_MASK, "unsupported bits 0x80000000");
	GOOD(qp_access_flags, 0, RESET, INIT, INIT_MASK);

	BAD(rq_psn, 0x1000000, INIT, RTR, RTR_MASK, "rq_psn 0x1000000 exceeds 24 bits");
	GOOD(rq_psn, 0xffffff, INIT, RTR, RTR_MASK);
	BAD(sq_psn, 0xffffffff, RTR, RTS, RTS_MASK, "sq_psn 0xffffffff exceeds 24 bits");
	GOOD(sq_psn, 0xffffff, RTR, RTS, RTS_MASK);
	BAD(dest_qp_num, 0x1000000, INIT, RTR, RTR_MASK, "dest_qp_num 0x1000000 exceeds 24 bits");
	GOOD(dest_qp_num, 0xffffff, INIT, RTR, RTR_MASK);

	BAD(max_rd_atomic, 17, RTR, RTS, RTS_MASK, "max_rd_atomic 17 exceeds the device limit 16");
	GOOD(max_rd_atomic, 0, RTR, RTS, RTS_MASK);
	BAD(max_dest_rd_atomic, 17, INIT, RTR, RTR_MASK,
	    "max_dest_rd_atomic 17 exceeds the device limit 16");
	GOOD(max_dest_rd_atomic, 0, INIT, RTR, RTR_MASK);

	BAD(path_mig_state, (enum ibv_mig_state)3, RTS, RTS, IBV_QP_PATH_MIG_STATE,
	    "path_mig_state 3 invalid");
	GOOD(path_mig_state, IBV_MIG_ARMED, RTS, RTS, IBV_QP_PATH_MIG_STATE);

	/* RoCE: the address vector needs a GRH with a valid source GID. */
	BAD(ah_attr.is_global, 0, INIT, RTR, RTR_MASK,
	    "modify_qp INIT->RTR: RoCE needs a GRH: set ah_attr.is_global=1 and "
	    "ah_attr.grh.sgid_index (e.g. -g 0 / -x 0 in the tools)");
	{
		struct ibv_qp_attr g = good_attr(RTR);

		g.ah_attr.is_global = 0;
		rc = ac(&g, INIT, RTR, RTR_MASK, why, sizeof(why));
		CHECK(rc == EINVAL &&
			  !strcmp(why, "modify_qp INIT->RTR: RoCE needs a GRH: set "
				       "ah_attr.is_global=1 and ah_attr.grh.sgid_index (e.g. "
				       "-g 0 / -x 0 in the tools)"),
		      "GRH exact: '%s'", why);
		/* Same rule when the AV changes in SQD->SQD. */
		g.qp_state = SQD;
		rc = ac(&g, SQD, SQD, IBV_QP_STATE | IBV_QP_AV, why, sizeof(why));
		CHECK(rc == EINVAL && strstr(why, "modify_qp SQD->SQD: RoCE needs a GRH"),
		      "GRH SQD: '%s'", why);
	}
	BAD(ah_attr.grh.sgid_index, 4, INIT, RTR, RTR_MASK,
	    "ah_attr.grh.sgid_index 4 out of range (GID table has 4 entries)");
	BAD(ah_attr.grh.sgid_index, 255, INIT, RTR, RTR_MASK, "sgid_index 255 out of range");
	GOOD(ah_attr.grh.sgid_index, 0, INIT, RTR, RTR_MASK);
	BAD(ah_attr.port_num, 0, INIT, RTR, RTR_MASK, "ah_attr.port_num 0 invalid");
	BAD(ah_attr.port_num, 2, INIT, RTR, RTR_MASK, "ah_attr.port_num 2 invalid");

	/* An empty GID table rejects every index. */
	a = good_attr(RTR);
	a.ah_attr.grh.sgid_index = 0;
	{
		struct uroce_qp_limits l0 = lim;

		l0.gid_tbl_len = 0;
		rc = uroce_qp_attr_check(RC, INIT, RTR, &a, RTR_MASK, &l0, why, sizeof(why));
		CHECK(rc == EINVAL && strstr(why, "sgid_index 0 out of range"), "empty gid: '%s'",
		      why);
		/* A smaller active MTU moves the limit. */
		l0 = lim;
		l0.active_mtu = IBV_MTU_4096;
		a.path_mtu = IBV_MTU_4096;
		rc = uroce_qp_attr_check(RC, INIT, RTR, &a, RTR_MASK, &l0, why, sizeof(why));
		CHECK(rc == 0, "mtu 4096 on 4096 port: '%s'", why);
	}

	/* State fields must agree with the transition being checked. */
	a = good_attr(RTS);
	a.qp_state = RTR;
	rc = ac(&a, RTR, RTS, RTS_MASK, why, sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "qp_state RTR does not match"), "qp_state: '%s'", why);
	a = good_attr(RTS);
	a.cur_qp_state = RTR;
	rc = ac(&a, RTS, RTS, IBV_QP_STATE | IBV_QP_CUR_STATE, why, sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "cur_qp_state RTR does not match"), "cur: '%s'", why);
	a.cur_qp_state = RTS;
	rc = ac(&a, RTS, RTS, IBV_QP_STATE | IBV_QP_CUR_STATE, why, sizeof(why));
	CHECK(rc == 0, "cur ok: '%s'", why);

	/* NULLs and types. */
	a = good_attr(INIT);
	rc = uroce_qp_attr_check(RC, RESET, INIT, NULL, INIT_MASK, &lim, why, sizeof(why));
	CHECK(rc == EINVAL, "NULL attr");
	rc = uroce_qp_attr_check(RC, RESET, INIT, &a, INIT_MASK, NULL, why, sizeof(why));
	CHECK(rc == EINVAL, "NULL lim");
	rc = uroce_qp_attr_check(IBV_QPT_RAW_PACKET, RESET, INIT, &a, INIT_MASK, &lim, why,
				 sizeof(why));
	CHECK(rc == EINVAL && strstr(why, "unsupported QP type"), "raw attr: '%s'", why);
	rc = uroce_qp_attr_check(UD, RESET, INIT, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, &lim,
				 NULL, 0);
	CHECK(rc == 0, "UD init with NULL why");
	a.port_num = 3;
	rc = uroce_qp_attr_check(UD, RESET, INIT, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, &lim,
				 NULL, 0);
	CHECK(rc == EINVAL, "UD init bad port with NULL why");
}

int main(void)
{
	test_names();
	test_table_exhaustive();
	test_to_reset_err();
	test_reason_strings();
	test_named_illegal();
	test_subtle_rules();
	test_bad_inputs();
	test_app_sequences();
	test_values();

	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
