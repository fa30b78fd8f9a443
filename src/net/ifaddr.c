/* Device discovery: one uroce device per network interface that is up and
 * has an address.  The port's GID table is the interface's addresses as
 * RoCEv2 GIDs: IPv4 addresses first (IPv4-mapped, ::ffff:a.b.c.d, so GID
 * index 0 is the IPv4 address and `-g 0` works), then IPv6 addresses.
 *
 * UROCE_IFACES=if[=name][,if[=name]...] selects interfaces (and names the
 * devices); default: every interface that is up and has an address, the
 * loopback first, named "uroce_<ifname>".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uroce.h"

/* Bytes a RoCEv2 packet adds around its payload at most: IPv6 40, UDP 8,
 * BTH 12, largest extended headers 28 (AtomicETH), ICRC 4. */
#define UROCE_MAX_OVERHEAD (40 + 8 + 12 + 28 + 4)

static enum ibv_mtu mtu_for_iface(unsigned int if_mtu)
{
	enum ibv_mtu m;

	for (m = IBV_MTU_4096; m > IBV_MTU_256; m--)
		if (uroce_mtu_bytes(m) + UROCE_MAX_OVERHEAD <= if_mtu)
			return m;
	return IBV_MTU_256;
}

static void gid_from_v4(union ibv_gid *gid, struct in_addr a)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], &a, 4);
}

/* Parses UROCE_IFACES; returns the device name for ifname, or NULL when the
 * interface is not selected. */
static const char *select_iface(const char *spec, const char *ifname, char *name, size_t len)
{
	char buf[512], *save = NULL, *tok;

	if (!spec || !*spec) {
		snprintf(name, len, "uroce_%s", ifname);
		return name;
	}
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');

		if (eq)
			*eq = '\0';
		if (strcmp(tok, ifname))
			continue;
		if (eq && eq[1])
			snprintf(name, len, "%s", eq + 1);
		else
			snprintf(name, len, "uroce_%s", ifname);
		return name;
	}
	return NULL;
}

static struct uroce_dev *find_or_add(struct uroce_dev **devs, int *n, int max, const char *ifname,
				     const char *spec)
{
	char name[IBV_SYSFS_NAME_MAX];
	struct uroce_dev *d;

	for (int i = 0; i < *n; i++)
		if (!strcmp(devs[i]->ifname, ifname))
			return devs[i];
	if (*n >= max || !select_iface(spec, ifname, name, sizeof(name)))
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	snprintf(d->ifname, sizeof(d->ifname), "%s", ifname);
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", name);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", *n);
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path), "/sys/class/infiniband_verbs/%s",
		 d->ibdev.dev_name);
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "/sys/class/infiniband/%s",
		 name);
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	d->ifindex = (int)if_nametoindex(ifname);
	devs[(*n)++] = d;
	return d;
}

static void add_gid(struct uroce_dev *d, const struct sockaddr *sa)
{
	struct uroce_gid_entry *e;

	if (d->ngid >= UROCE_MAX_GID)
		return;
	e = &d->gid[d->ngid];
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		e->family = AF_INET;
		e->addr.v4 = sin->sin_addr;
		gid_from_v4(&e->gid, sin->sin_addr);
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		e->family = AF_INET6;
		e->addr.v6 = sin6->sin6_addr;
		memcpy(e->gid.raw, &sin6->sin6_addr, 16);
	}
	d->ngid++;
}

static void finish_dev(struct uroce_dev *d, int sock)
{
	struct ifreq ifr;
	uint64_t g = 0;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", d->ifname);
	d->if_mtu = 1500;
	if (sock >= 0 && ioctl(sock, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
		d->if_mtu = (unsigned int)ifr.ifr_mtu;
	d->max_mtu = IBV_MTU_4096;
	d->active_mtu = mtu_for_iface(d->if_mtu);

	/* Node GUID: the EUI-64 of the MAC; interfaces without a MAC (lo)
	 * get one derived from their first address. */
	if (d->mac[0] | d->mac[1] | d->mac[2] | d->mac[3] | d->mac[4] | d->mac[5]) {
		uint8_t e[8] = {(uint8_t)(d->mac[0] ^ 2),
				d->mac[1],
				d->mac[2],
				0xff,
				0xfe,
				d->mac[3],
				d->mac[4],
				d->mac[5]};
		memcpy(&g, e, 8);
	} else {
		uint8_t e[8] = {0x02, 0x00, 'u', 'r', 0, 0, 0, (uint8_t)d->ifindex};

		if (d->ngid)
			memcpy(&e[4], &d->gid[0].gid.raw[12], 4);
		memcpy(&g, e, 8);
	}
	d->guid = g;
}

int uroce_discover(struct uroce_dev **devs, int max)
{
	const char *spec = getenv("UROCE_IFACES");
	struct ifaddrs *ifa, *i;
	int n = 0, sock, pass;

	if (getifaddrs(&ifa)) {
		ur_err("getifaddrs failed: %s", strerror(errno));
		return 0;
	}
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	/* Loopback first, so the default device is the one every test and
	 * example on one machine can use; then IPv4 before IPv6 addresses. */
	for (pass = 0; pass < 4; pass++) {
		for (i = ifa; i; i = i->ifa_next) {
			bool lo = i->ifa_flags & IFF_LOOPBACK;
			int fam;

			if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
				continue;
			if ((pass < 2) != lo)
				continue;
			fam = i->ifa_addr->sa_family;
			if (fam != ((pass & 1) ? AF_INET6 : AF_INET))
				continue;
			struct uroce_dev *d = find_or_add(devs, &n, max, i->ifa_name, spec);
			if (d)
				add_gid(d, i->ifa_addr);
		}
	}
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_PACKET)
			continue;
		for (int k = 0; k < n; k++) {
			const struct sockaddr_ll *ll = (const struct sockaddr_ll *)i->ifa_addr;

			if (strcmp(devs[k]->ifname, i->ifa_name) || ll->sll_halen != 6)
				continue;
			memcpy(devs[k]->mac, ll->sll_addr, 6);
		}
	}
	for (int k = 0; k < n; k++) {
		devs[k]->index = k;
		finish_dev(devs[k], sock);
	}
	if (sock >= 0)
		close(sock);
	freeifaddrs(ifa);
	if (!n)
		ur_warn("no usable network interface%s%s: uroce exposes no device (an interface "
			"must be up and have an IP address)",
			spec ? " matches UROCE_IFACES=" : "", spec ? spec : "");
	return n;
}
