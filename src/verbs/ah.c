/* Address handles and address vectors.
 *
 * On RoCE an address vector is a GRH: the destination GID (an IP address,
 * IPv4 as ::ffff:a.b.c.d) and the index of the source GID in our table.
 * Received UD datagrams carry a 40-byte "GRH" in front of the payload; for
 * RoCEv2 over IPv4 it holds the packet's IPv4 header in its last 20 bytes,
 * as Linux rxe and rdma-core lay it out.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/ip.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"
#include "core/objreg.h"

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int uroce_av_resolve(struct uroce_dev *d, const struct ibv_ah_attr *ah, struct uroce_ipinfo *path,
		     char *why, size_t len)
{
	const struct uroce_gid_entry *sg;

	if (!ah->is_global) {
		snprintf(why, len,
			 "RoCE needs a GRH: set ah_attr.is_global=1 and ah_attr.grh.sgid_index "
			 "(e.g. -g 0 / -x 0 in the tools)");
		return EINVAL;
	}
	if (ah->port_num != 1) {
		snprintf(why, len, "ah_attr.port_num %u: uroce devices have port 1", ah->port_num);
		return EINVAL;
	}
	if (ah->grh.sgid_index >= d->ngid) {
		snprintf(why, len, "ah_attr.grh.sgid_index %u >= GID table length %d",
			 ah->grh.sgid_index, d->ngid);
		return EINVAL;
	}
	sg = &d->gid[ah->grh.sgid_index];
	if (sg->family == AF_INET && uroce_gid_is_mcast(&ah->grh.dgid, &path->dst.v4)) {
		struct in_addr g = path->dst.v4;

		memset(path, 0, sizeof(*path));
		path->family = AF_INET;
		path->src.v4 = sg->addr.v4;
		path->dst.v4 = g;
		path->tos = ah->grh.traffic_class;
		return 0;
	}
	if (sg->family != AF_INET || memcmp(ah->grh.dgid.raw, v4_prefix, 12)) {
		snprintf(why, len,
			 "only IPv4 (IPv4-mapped, ::ffff:a.b.c.d) GIDs carry traffic yet; "
			 "use an IPv4 sgid_index and dgid");
		return EINVAL;
	}
	memset(path, 0, sizeof(*path));
	path->family = AF_INET;
	path->src.v4 = sg->addr.v4;
	memcpy(&path->dst.v4, &ah->grh.dgid.raw[12], 4);
	path->tos = ah->grh.traffic_class; /* RoCEv2: the traffic class is the IP TOS */
	return 0;
}

UROCE_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	char why[256];
	struct uroce_ah *ah;
	int err;

	if (!pd || !attr) {
		ur_dbg("create_ah: pd and attr must not be NULL");
		errno = EINVAL;
		return NULL;
	}
	if (atomic_load(&to_uctx(pd->context)->nah) >= UROCE_MAX_AH) {
		ur_dbg("create_ah: max_ah (%d) reached", UROCE_MAX_AH);
		errno = ENOMEM;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		ur_dbg("create_ah: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	err = uroce_av_resolve(to_uctx(pd->context)->dev, attr, &ah->path, why, sizeof(why));
	if (err) {
		ur_dbg("create_ah: %s", why);
		free(ah);
		errno = err;
		return NULL;
	}
	ah->attr = *attr;
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	if (uroce_obj_add(&ah->ibah, UROCE_OBJ_AH)) {
		free(ah);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&to_upd(pd)->refs, 1);
	atomic_fetch_add(&to_uctx(pd->context)->nah, 1);
	return &ah->ibah;
}

UROCE_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	int err = uroce_obj_check(ibah, UROCE_OBJ_AH, "destroy_ah");

	if (err)
		return uroce_obj_err(err);
	atomic_fetch_sub(&to_upd(ibah->pd)->refs, 1);
	atomic_fetch_sub(&to_uctx(ibah->context)->nah, 1);
	uroce_obj_release(ibah, to_uah(ibah));
	return 0;
}

UROCE_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				     struct ibv_wc *wc, struct ibv_grh *grh,
				     struct ibv_ah_attr *ah_attr)
{
	struct uroce_dev *d;
	struct iphdr ip;
	union ibv_gid dst;

	if (!context || !wc || !ah_attr) {
		ur_dbg("init_ah_from_wc: context, wc and ah_attr must not be NULL");
		errno = EINVAL;
		return -1;
	}
	d = to_uctx(context)->dev;
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
		ur_dbg("init_ah_from_wc: RoCE needs the GRH of the received datagram");
		errno = EINVAL;
		return -1;
	}
	/* RoCEv2 over IPv4: the IPv4 header sits in the GRH's last 20 bytes */
	memcpy(&ip, (const uint8_t *)grh + 20, sizeof(ip));
	if (ip.version == 4 && ip.ihl == 5) {
		memset(&dst, 0, sizeof(dst));
		memcpy(dst.raw, v4_prefix, 12);
		memcpy(&dst.raw[12], &ip.daddr, 4);
		memcpy(ah_attr->grh.dgid.raw, v4_prefix, 12);
		memcpy(&ah_attr->grh.dgid.raw[12], &ip.saddr, 4);
		ah_attr->grh.hop_limit = 0xff;
		ah_attr->grh.traffic_class = ip.tos;
	} else {
		dst = grh->dgid;
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.hop_limit = 0xff;
		ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
		ah_attr->grh.traffic_class = (be32toh(grh->version_tclass_flow) >> 20) & 0xff;
	}
	ah_attr->is_global = 1;
	for (int i = 0; i < d->ngid; i++)
		if (!memcmp(d->gid[i].gid.raw, dst.raw, 16)) {
			ah_attr->grh.sgid_index = (uint8_t)i;
			return 0;
		}
	ur_dbg("init_ah_from_wc: the datagram's destination is not one of our GIDs");
	errno = ENOENT;
	return -1;
}

UROCE_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						  struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (!pd) {
		ur_dbg("create_ah_from_wc: pd is NULL");
		errno = EINVAL;
		return NULL;
	}
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}
