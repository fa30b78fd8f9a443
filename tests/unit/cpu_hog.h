/* A CPU hog for tests: a thread that never yields, pinned to one CPU,
 * started and stopped around a test. */
#ifndef CPU_HOG_H
#define CPU_HOG_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

struct cpu_hog {
	pthread_t th;
	int cpu;
	atomic_bool stop;
};

/* Pin the calling thread to cpu. */
static inline void cpu_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static inline void *cpu_hog_run(void *arg)
{
	struct cpu_hog *h = arg;

	cpu_pin(h->cpu);
	while (!atomic_load_explicit(&h->stop, memory_order_relaxed))
		;
	return NULL;
}

static inline int cpu_hog_start(struct cpu_hog *h, int cpu)
{
	h->cpu = cpu;
	atomic_store(&h->stop, false);
	return pthread_create(&h->th, NULL, cpu_hog_run, h);
}

static inline void cpu_hog_stop(struct cpu_hog *h)
{
	atomic_store(&h->stop, true);
	pthread_join(h->th, NULL);
}

#endif
