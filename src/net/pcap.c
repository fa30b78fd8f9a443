/* Packet capture to a pcap file (UROCE_PCAP, see pcap.h).
 *
 * Records are assembled in a 64 KiB buffer under the capture's mutex and
 * written out when the buffer fills, when 100 ms have passed since the last
 * write (checked as packets arrive), at ibv_close_device and at exit.  The
 * IPv4 and UDP headers are rebuilt from the addresses, ports and IPv4 ID of
 * the packet, exactly as the kernel sends them for an unconnected uroce
 * socket (see the ICRC notes in docs/design.md and src/net/gso.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"
#include "net/pcap.h"

#define PCAP_MAGIC_NS	   0xa1b23c4du /* classic pcap, nanosecond timestamps */
#define PCAP_SNAPLEN	   65535u
#define LINKTYPE_LINUX_SLL 113u
#define SLL_HDR		   16
#define IP_HDR		   20
#define UDP_HDR		   8
#define REC_HDR		   16
#define PCAP_BUFSZ	   (64u << 10)
#define FLUSH_NS	   100000000ull /* 100 ms */
#define ARPHRD_NONE_	   0xfffe

struct uroce_pcap {
	pthread_mutex_t lock;
	int fd;
	pid_t owner; /* a forked child must not write the parent's buffer */
	bool failed; /* a write failed: capture stopped (logged once) */
	uint64_t last_flush_ns;
	uint64_t npkts;
	size_t len;
	char path[PATH_MAX];
	struct uroce_pcap *next; /* open captures, flushed at exit */
	uint8_t buf[PCAP_BUFSZ];
};

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_pcap *open_list;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static atomic_uint ctx_seq;
static atomic_bool warned;

/* Append "%s" + what follows to the output, before a trailing ".pcap". */
static int insert_tag(char *out, size_t outlen, const char *tag)
{
	size_t len = strlen(out), tl = strlen(tag), at = len;
	static const char ext[] = ".pcap";

	if (len >= sizeof(ext) - 1 && !strcmp(out + len - (sizeof(ext) - 1), ext))
		at = len - (sizeof(ext) - 1);
	if (len + tl + 1 > outlen)
		return -ENAMETOOLONG;
	memmove(out + at + tl, out + at, len - at + 1);
	memcpy(out + at, tag, tl);
	return 0;
}

int uroce_pcap_path(const char *spec, int pid, unsigned int seq, char *out, size_t outlen)
{
	char tag[32];
	bool have_pid = false;
	size_t o = 0;

	for (const char *s = spec; *s; s++) {
		char piece[16] = {*s, 0};
		size_t pl;

		if (s[0] == '%' && s[1] == 'p') {
			snprintf(piece, sizeof(piece), "%d", pid);
			have_pid = true;
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			s++;
		}
		pl = strlen(piece);
		if (o + pl + 1 > outlen)
			return -ENAMETOOLONG;
		memcpy(out + o, piece, pl);
		o += pl;
	}
	if (o + 1 > outlen)
		return -ENAMETOOLONG;
	out[o] = 0;
	if (!have_pid) {
		snprintf(tag, sizeof(tag), ".%d", pid);
		if (insert_tag(out, outlen, tag))
			return -ENAMETOOLONG;
	}
	if (seq) {
		snprintf(tag, sizeof(tag), "-%u", seq);
		if (insert_tag(out, outlen, tag))
			return -ENAMETOOLONG;
	}
	return 0;
}

static void put16(uint8_t *p, uint16_t v)
{
	v = htons(v);
	memcpy(p, &v, 2);
}

static void put32h(uint8_t *p, uint32_t v) /* pcap headers are in host order */
{
	memcpy(p, &v, 4);
}

/* One's-complement sum of len bytes (network order) added to sum. */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	for (; len > 1; p += 2, len -= 2)
		sum += (uint32_t)p[0] << 8 | p[1];
	if (len)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Write the buffer out (lock held). */
static void flush_locked(struct uroce_pcap *pc, uint64_t now)
{
	size_t off = 0;

	pc->last_flush_ns = now;
	if (pc->owner != getpid()) { /* forked child: the parent writes this */
		pc->len = 0;
		return;
	}
	while (off < pc->len && !pc->failed) {
		ssize_t n = write(pc->fd, pc->buf + off, pc->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ur_err("packet capture to %s stops: write: %s", pc->path,
			       n < 0 ? strerror(errno) : "no progress");
			pc->failed = true;
			break;
		}
		off += (size_t)n;
	}
	pc->len = 0;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void uroce_pcap_write(struct uroce_ctx *ctx, enum uroce_pcap_dir dir, const struct uroce_ipinfo *ip,
		      const void *pkt, size_t len)
{
	struct uroce_pcap *pc = ctx->pcap;
	size_t ulen = UDP_HDR + len, iplen = IP_HDR + ulen;
	size_t caplen = SLL_HDR + iplen;
	uint8_t hdr[SLL_HDR + IP_HDR + UDP_HDR], *sll = hdr, *iph = hdr + SLL_HDR,
						 *udp = iph + IP_HDR;
	uint64_t now;
	uint32_t sum;
	uint8_t *r;

	if (ip->family != AF_INET || iplen > 0xffff)
		return;
	/* Linux cooked header: packet type, ARPHRD, no link address, IPv4 */
	memset(hdr, 0, sizeof(hdr));
	put16(sll, (uint16_t)dir);
	put16(sll + 2, ARPHRD_NONE_);
	put16(sll + 14, 0x0800);
	/* IPv4 as an unconnected IP_PMTUDISC_DO socket sends it */
	iph[0] = 0x45;
	iph[1] = ip->tos; /* grh.traffic_class (IP_TOS), or what arrived (IP_RECVTOS) */
	put16(iph + 2, (uint16_t)iplen);
	put16(iph + 4, ip->ipid); /* 0, or k for segment k of a GSO batch */
	put16(iph + 6, 0x4000);	  /* DF */
	iph[8] = 64;
	iph[9] = IPPROTO_UDP;
	memcpy(iph + 12, &ip->src.v4, 4);
	memcpy(iph + 16, &ip->dst.v4, 4);
	put16(iph + 10, csum_fold(csum_add(0, iph, IP_HDR)));
	put16(udp, ip->sport);
	put16(udp + 2, ip->dport);
	put16(udp + 4, (uint16_t)ulen);
	/* UDP checksum over the pseudo header, the UDP header and the data */
	sum = csum_add(0, iph + 12, 8) + IPPROTO_UDP + (uint32_t)ulen;
	sum = csum_add(sum, udp, UDP_HDR);
	sum = csum_fold(csum_add(sum, pkt, len));
	put16(udp + 6, sum ? (uint16_t)sum : 0xffff);

	now = realtime_ns();
	pthread_mutex_lock(&pc->lock);
	if (pc->failed)
		goto out;
	if (pc->len + REC_HDR + caplen > sizeof(pc->buf))
		flush_locked(pc, now);
	if (REC_HDR + caplen > sizeof(pc->buf))
		goto out; /* cannot happen: packets are at most a few KiB */
	r = pc->buf + pc->len;
	put32h(r, (uint32_t)(now / 1000000000ull));
	put32h(r + 4, (uint32_t)(now % 1000000000ull));
	put32h(r + 8, (uint32_t)caplen);
	put32h(r + 12, (uint32_t)caplen);
	memcpy(r + REC_HDR, hdr, sizeof(hdr));
	memcpy(r + REC_HDR + sizeof(hdr), pkt, len);
	pc->len += REC_HDR + caplen;
	pc->npkts++;
	if (now - pc->last_flush_ns >= FLUSH_NS)
		flush_locked(pc, now);
out:
	pthread_mutex_unlock(&pc->lock);
}

static void pcap_exit(void)
{
	uint64_t now = realtime_ns();

	pthread_mutex_lock(&open_lock);
	for (struct uroce_pcap *pc = open_list; pc; pc = pc->next) {
		pthread_mutex_lock(&pc->lock);
		flush_locked(pc, now);
		pthread_mutex_unlock(&pc->lock);
	}
	pthread_mutex_unlock(&open_lock);
}

static void pcap_register_exit(void)
{
	if (atexit(pcap_exit))
		ur_warn("atexit failed: a program that exits without ibv_close_device "
			"loses the last 100 ms of its capture");
}

void uroce_pcap_open(struct uroce_ctx *ctx)
{
	const char *spec = getenv("UROCE_PCAP");
	uint8_t gh[24];
	struct uroce_pcap *pc;
	unsigned int seq;
	int err;

	if (!spec || !*spec)
		return;
	pc = calloc(1, sizeof(*pc));
	if (!pc) {
		ur_err("packet capture off: no memory");
		return;
	}
	seq = atomic_fetch_add(&ctx_seq, 1);
	err = uroce_pcap_path(spec, (int)getpid(), seq, pc->path, sizeof(pc->path));
	if (err) {
		ur_err("packet capture off: UROCE_PCAP=%s makes a path that is too long", spec);
		free(pc);
		return;
	}
	pc->fd = open(pc->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (pc->fd < 0) {
		if (!atomic_exchange(&warned, true))
			ur_err("packet capture off: cannot create %s (UROCE_PCAP): %s", pc->path,
			       strerror(errno));
		free(pc);
		return;
	}
	put32h(gh, PCAP_MAGIC_NS);
	memcpy(gh + 4, &(uint16_t){2}, 2); /* version 2.4 */
	memcpy(gh + 6, &(uint16_t){4}, 2);
	put32h(gh + 8, 0);  /* thiszone */
	put32h(gh + 12, 0); /* sigfigs */
	put32h(gh + 16, PCAP_SNAPLEN);
	put32h(gh + 20, LINKTYPE_LINUX_SLL);
	memcpy(pc->buf, gh, sizeof(gh));
	pc->len = sizeof(gh);
	pc->owner = getpid();
	pthread_mutex_init(&pc->lock, NULL);
	pthread_mutex_lock(&pc->lock);
	flush_locked(pc, realtime_ns()); /* a valid (empty) file right away */
	pthread_mutex_unlock(&pc->lock);
	pthread_once(&exit_once, pcap_register_exit);
	pthread_mutex_lock(&open_lock);
	pc->next = open_list;
	open_list = pc;
	pthread_mutex_unlock(&open_lock);
	ur_info("%s: capturing packets to %s", ctx->vctx.context.device->name, pc->path);
	ctx->pcap = pc;
}

void uroce_pcap_close(struct uroce_ctx *ctx)
{
	struct uroce_pcap *pc = ctx->pcap;

	if (!pc)
		return;
	ctx->pcap = NULL;
	pthread_mutex_lock(&open_lock);
	for (struct uroce_pcap **pp = &open_list; *pp; pp = &(*pp)->next)
		if (*pp == pc) {
			*pp = pc->next;
			break;
		}
	pthread_mutex_unlock(&open_lock);
	pthread_mutex_lock(&pc->lock);
	flush_locked(pc, realtime_ns());
	pthread_mutex_unlock(&pc->lock);
	ur_info("%s: %llu packets captured to %s", ctx->vctx.context.device->name,
		(unsigned long long)pc->npkts, pc->path);
	close(pc->fd);
	pthread_mutex_destroy(&pc->lock);
	free(pc);
}
