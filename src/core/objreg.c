/* The registry of live verbs objects (objreg.h): a hash set of object
 * addresses with their kind, and a quarantine of released allocations.
 *
 * One process-wide table: objects are found by address, which is unique
 * across contexts.  The quarantine keeps the last UROCE_OBJ_QUARANTINE
 * released allocations unfreed, so their addresses are not reused by
 * malloc while a double destroy is likely (right after the first), and a
 * stale pointer still points into valid memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "objreg.h"
#include "uroce_log.h"

#define UROCE_OBJ_BUCKETS    4096u
#define UROCE_OBJ_QUARANTINE 256u

struct obj_node {
	const void *obj;
	enum uroce_obj_kind kind;
	struct obj_node *next;
};

static struct obj_node *buckets[UROCE_OBJ_BUCKETS];
static void *quarantine[UROCE_OBJ_QUARANTINE];
static unsigned int q_next;
static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const kind_name[] = {
    [UROCE_OBJ_PD] = "PD", [UROCE_OBJ_MR] = "MR",   [UROCE_OBJ_MW] = "MW", [UROCE_OBJ_CQ] = "CQ",
    [UROCE_OBJ_QP] = "QP", [UROCE_OBJ_SRQ] = "SRQ", [UROCE_OBJ_AH] = "AH",
};

static unsigned int obj_hash(const void *obj)
{
	uint64_t x = (uint64_t)(uintptr_t)obj;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (unsigned int)(x & (UROCE_OBJ_BUCKETS - 1));
}

static struct obj_node **find_locked(const void *obj)
{
	struct obj_node **pp = &buckets[obj_hash(obj)];

	while (*pp && (*pp)->obj != obj)
		pp = &(*pp)->next;
	return pp;
}

int uroce_obj_add(const void *obj, enum uroce_obj_kind kind)
{
	struct obj_node *n = malloc(sizeof(*n));

	if (!n)
		return ENOMEM;
	n->obj = obj;
	n->kind = kind;
	pthread_mutex_lock(&obj_lock);
	n->next = buckets[obj_hash(obj)];
	buckets[obj_hash(obj)] = n;
	pthread_mutex_unlock(&obj_lock);
	return 0;
}

int uroce_obj_check(const void *obj, enum uroce_obj_kind kind, const char *verb)
{
	struct obj_node *n;
	int err = 0;

	if (!obj)
		return ur_dbg("%s: the %s is NULL", verb, kind_name[kind]), EINVAL;
	pthread_mutex_lock(&obj_lock);
	n = *find_locked(obj);
	if (!n)
		err = ENOENT;
	else if (n->kind != kind)
		err = EINVAL;
	pthread_mutex_unlock(&obj_lock);
	if (err == ENOENT)
		ur_dbg("%s: %p is not a live %s (destroyed already, or a copy of one)", verb, obj,
		       kind_name[kind]);
	else if (err)
		ur_dbg("%s: %p is a %s, not a %s", verb, obj, kind_name[n->kind], kind_name[kind]);
	return err;
}

void uroce_obj_release(const void *obj, void *mem)
{
	struct obj_node **pp, *n = NULL;
	void *old;

	pthread_mutex_lock(&obj_lock);
	pp = find_locked(obj);
	if (*pp) {
		n = *pp;
		*pp = n->next;
	}
	old = quarantine[q_next];
	quarantine[q_next] = mem;
	q_next = (q_next + 1) % UROCE_OBJ_QUARANTINE;
	pthread_mutex_unlock(&obj_lock);
	free(n);
	free(old);
}
