/* uroce-sysfs-tree ROOT: write the sysfs and /dev files of every uroce device
 * under ROOT, as the kernel would show them for an RDMA device, with the
 * values ibv_query_device/port/gid report.  `uroce run` runs it (on uroce's
 * libibverbs) and liburoce-sysfs.so serves the tree to the program.
 *
 *   ROOT/sys/class/infiniband/<dev>/{node_type,node_guid,sys_image_guid,fw_ver,
 *        hw_rev,board_id,node_desc}
 *   ROOT/sys/class/infiniband/<dev>/ports/1/{state,phys_state,rate,link_layer,
 *        lid,lid_mask_count,sm_lid,sm_sl,cap_mask,gids/K,gid_attrs/types/K,
 *        gid_attrs/ndevs/K,pkeys/K}
 *   ROOT/sys/class/infiniband/<dev>/device/{numa_node,local_cpus,driver ->}
 *   ROOT/sys/class/infiniband/<dev>/device/infiniband_verbs/uverbsN/ (empty)
 *   ROOT/sys/class/infiniband_verbs/{abi_version,uverbsN/{ibdev,abi_version,dev}}
 *   ROOT/dev/infiniband/uverbsN -> /dev/null
 *
 * Only entries of the GID table that hold a GID get files (the kernel's
 * unused entries read as zeros or fail with EINVAL; here they are absent).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* rdma-core's uverbs ABI version (include/rdma/ib_user_verbs.h). */
#define TREE_UVERBS_ABI 6

static const char *tree_root;

/* mkdir -p: one mkdir when the parent exists (the usual case here). */
static int tree_mkdirs(const char *path)
{
	char buf[PATH_MAX];
	char *slash;
	int ret;

	if (!mkdir(path, 0755) || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -errno;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return -ENOENT;
	*slash = '\0';
	ret = tree_mkdirs(buf);
	if (ret)
		return ret;
	return mkdir(path, 0755) && errno != EEXIST ? -errno : 0;
}

/* path = ROOT/<dir>/<name>, ROOT/<dir> created. */
static int tree_path(char path[PATH_MAX], const char *dir, const char *name)
{
	int ret;

	if (snprintf(path, PATH_MAX, "%s/%s", tree_root, dir) >= PATH_MAX)
		return -ENAMETOOLONG;
	ret = tree_mkdirs(path);
	if (ret)
		return ret;
	if (snprintf(path, PATH_MAX, "%s/%s/%s", tree_root, dir, name) >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* Write ROOT/<dir>/<name> with the printf-formatted text and a newline. */
static int __attribute__((format(printf, 3, 4)))
tree_file(const char *dir, const char *name, const char *fmt, ...)
{
	char path[PATH_MAX], text[512];
	va_list ap;
	int len, fd, ret;
	ssize_t n;

	ret = tree_path(path, dir, name);
	if (ret)
		return ret;
	va_start(ap, fmt);
	len = vsnprintf(text, sizeof(text) - 1, fmt, ap);
	va_end(ap);
	if (len < 0 || len >= (int)sizeof(text) - 1)
		return -EOVERFLOW;
	text[len++] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	n = write(fd, text, (size_t)len);
	ret = n == len ? 0 : n < 0 ? -errno : -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

static int tree_link(const char *dir, const char *name, const char *target)
{
	char path[PATH_MAX];
	int ret;

	ret = tree_path(path, dir, name);
	if (ret)
		return ret;
	if (unlink(path) && errno != ENOENT)
		return -errno;
	return symlink(target, path) ? -errno : 0;
}

static void tree_guid(char *buf, size_t size, __be64 be)
{
	uint64_t g = be64toh(be);

	snprintf(buf, size, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

static void tree_gid(char *buf, size_t size, const union ibv_gid *gid)
{
	const uint8_t *r = gid->raw;

	snprintf(buf, size,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", r[0],
		 r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
		 r[14], r[15]);
}

/* The kernel's "rate" attribute: "<Gb/s> Gb/sec (<width>X <speed name>)". */
static void tree_rate(char *buf, size_t size, const struct ibv_port_attr *pa)
{
	static const struct {
		int speed, tenths;
		const char *name;
	} speeds[] = {{1, 25, "SDR"},	{2, 50, "DDR"},	  {4, 100, "QDR"},  {8, 100, "FDR10"},
		      {16, 140, "FDR"}, {32, 250, "EDR"}, {64, 500, "HDR"}, {128, 1000, "NDR"}};
	static const struct {
		int width, lanes;
	} widths[] = {{1, 1}, {2, 4}, {4, 8}, {8, 12}, {16, 2}};
	int tenths = 25, lanes = 1;
	const char *name = "SDR";
	size_t i;

	for (i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].speed == pa->active_speed) {
			tenths = speeds[i].tenths;
			name = speeds[i].name;
		}
	for (i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
		if (widths[i].width == pa->active_width)
			lanes = widths[i].lanes;
	tenths *= lanes;
	if (tenths % 10)
		snprintf(buf, size, "%d.%d Gb/sec (%dX %s)", tenths / 10, tenths % 10, lanes, name);
	else
		snprintf(buf, size, "%d Gb/sec (%dX %s)", tenths / 10, lanes, name);
}

/* A cpumask as the kernel prints it: 32-bit hex groups, high first. */
static void tree_cpumask(char *buf, size_t size)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int groups, g, bits;
	size_t off = 0;

	if (ncpu < 1)
		ncpu = 1;
	if (ncpu > 1024)
		ncpu = 1024;
	groups = (int)((ncpu + 31) / 32);
	for (g = groups - 1; g >= 0 && off < size; g--) {
		bits = (int)(ncpu - 32L * g);
		bits = bits > 32 ? 32 : bits;
		off += (size_t)snprintf(buf + off, size - off, "%s%08x", g == groups - 1 ? "" : ",",
					bits == 32 ? 0xffffffffu : (1u << bits) - 1);
	}
}

static const char *const port_states[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};

static int tree_port(struct ibv_context *ctx, const char *dev, uint8_t port)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge;
	char dir[256], buf[128], ifname[IF_NAMESIZE];
	int ret, i;

	if (ibv_query_port(ctx, port, &pa))
		return -errno;
	snprintf(dir, sizeof(dir), "sys/class/infiniband/%s/ports/%u", dev, port);
	tree_rate(buf, sizeof(buf), &pa);
	ret = tree_file(dir, "state", "%d: %s", pa.state,
			pa.state <= IBV_PORT_ACTIVE_DEFER ? port_states[pa.state] : "UNKNOWN");
	ret = ret
		  ?: tree_file(dir, "phys_state", "%u: %s", pa.phys_state,
			       pa.phys_state == 5 ? "LinkUp" : "Disabled");
	ret = ret ?: tree_file(dir, "rate", "%s", buf);
	ret =
	    ret
		?: tree_file(dir, "link_layer", "%s",
			     pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	ret = ret ?: tree_file(dir, "lid", "0x%x", pa.lid);
	ret = ret ?: tree_file(dir, "lid_mask_count", "%u", pa.lmc);
	ret = ret ?: tree_file(dir, "sm_lid", "0x%x", pa.sm_lid);
	ret = ret ?: tree_file(dir, "sm_sl", "%u", pa.sm_sl);
	ret = ret ?: tree_file(dir, "cap_mask", "0x%08x", pa.port_cap_flags);
	for (i = 0; !ret && i < pa.pkey_tbl_len; i++) {
		__be16 pkey;
		char pdir[PATH_MAX];

		if (ibv_query_pkey(ctx, port, i, &pkey))
			break;
		snprintf(pdir, sizeof(pdir), "%s/pkeys", dir);
		snprintf(buf, sizeof(buf), "%d", i);
		ret = tree_file(pdir, buf, "0x%04x", be16toh(pkey));
	}
	for (i = 0; !ret && i < pa.gid_tbl_len; i++) {
		char sub[PATH_MAX], name[16];

		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &ge, 0))
			continue; /* an empty entry */
		snprintf(name, sizeof(name), "%d", i);
		tree_gid(buf, sizeof(buf), &ge.gid);
		snprintf(sub, sizeof(sub), "%s/gids", dir);
		ret = tree_file(sub, name, "%s", buf);
		snprintf(sub, sizeof(sub), "%s/gid_attrs/types", dir);
		ret = ret
			  ?: tree_file(sub, name, "%s",
				       ge.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2"
									   : "IB/RoCE v1");
		snprintf(sub, sizeof(sub), "%s/gid_attrs/ndevs", dir);
		if (!ret && if_indextoname(ge.ndev_ifindex, ifname))
			ret = tree_file(sub, name, "%s", ifname);
	}
	return ret;
}

static int tree_device(struct ibv_device *ibdev)
{
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	const char *dev = ibv_get_device_name(ibdev);
	char dir[PATH_MAX], buf[256], host[64] = "localhost";
	int ret;
	uint8_t port;

	ctx = ibv_open_device(ibdev);
	if (!ctx)
		return -errno;
	if (ibv_query_device(ctx, &da)) {
		ret = -errno;
		goto out;
	}
	gethostname(host, sizeof(host) - 1);
	snprintf(dir, sizeof(dir), "sys/class/infiniband/%s", dev);
	ret = tree_file(dir, "node_type", "%d: %s", ibdev->node_type,
			ibdev->node_type == IBV_NODE_CA ? "CA" : "RNIC");
	tree_guid(buf, sizeof(buf), da.node_guid);
	ret = ret ?: tree_file(dir, "node_guid", "%s", buf);
	tree_guid(buf, sizeof(buf), da.sys_image_guid);
	ret = ret ?: tree_file(dir, "sys_image_guid", "%s", buf);
	ret = ret ?: tree_file(dir, "fw_ver", "%s", da.fw_ver);
	ret = ret ?: tree_file(dir, "hw_rev", "0x%x", da.hw_ver);
	ret = ret ?: tree_file(dir, "board_id", "uroce");
	ret = ret ?: tree_file(dir, "hca_type", "uroce");
	ret = ret ?: tree_file(dir, "node_desc", "%s %s", host, dev);
	ret = ret ?: tree_file(dir, "uroce", "1"); /* marks a tree written by uroce */
	for (port = 1; !ret && port <= da.phys_port_cnt; port++)
		ret = tree_port(ctx, dev, port);

	snprintf(dir, sizeof(dir), "sys/class/infiniband/%s/device", dev);
	tree_cpumask(buf, sizeof(buf));
	ret = ret ?: tree_file(dir, "numa_node", "-1");
	ret = ret ?: tree_file(dir, "local_cpus", "%s", buf);
	ret = ret ?: tree_file(dir, "vendor", "0x%04x", da.vendor_id & 0xffff);
	ret = ret ?: tree_file(dir, "device", "0x%04x", da.vendor_part_id & 0xffff);
	/* device/driver -> ROOT/sys/bus/uroce/drivers/uroce: its basename is the
	 * driver name Open MPI's device filter matches (opal_common_ucx_devices). */
	ret = ret ?: tree_link(dir, "driver", "../../../../bus/uroce/drivers/uroce");
	ret = ret ?: tree_file("sys/bus/uroce/drivers/uroce", "uevent", "DRIVER=uroce");
	snprintf(dir, sizeof(dir), "sys/class/infiniband/%s/device/infiniband_verbs/%s/", dev,
		 ibdev->dev_name);
	ret = ret ?: tree_file(dir, "ibdev", "%s", dev);

	snprintf(dir, sizeof(dir), "sys/class/infiniband_verbs/%s", ibdev->dev_name);
	ret = ret ?: tree_file(dir, "ibdev", "%s", dev);
	ret = ret ?: tree_file(dir, "abi_version", "%d", TREE_UVERBS_ABI);
	ret = ret ?: tree_file(dir, "dev", "231:%d", 192 + atoi(ibdev->dev_name + 6));
	ret = ret ?: tree_link("dev/infiniband", ibdev->dev_name, "/dev/null");
out:
	ibv_close_device(ctx);
	return ret;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	int n, i, ret = 0;

	if (argc != 2 || argv[1][0] != '/') {
		fprintf(stderr, "usage: %s ROOT (an absolute directory)\n", argv[0]);
		return 2;
	}
	tree_root = argv[1];
	ret = tree_mkdirs(tree_root);
	if (!ret) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/sys/class/infiniband", tree_root);
		ret = tree_mkdirs(dir);
		ret = ret
			  ?: tree_file("sys/class/infiniband_verbs", "abi_version", "%d",
				       TREE_UVERBS_ABI);
		snprintf(dir, sizeof(dir), "%s/dev/infiniband", tree_root);
		ret = ret ?: tree_mkdirs(dir);
	}
	if (ret) {
		fprintf(stderr, "uroce-sysfs-tree: %s: %s\n", tree_root, strerror(-ret));
		return 1;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "uroce-sysfs-tree: no device list: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < n && !ret; i++) {
		ret = tree_device(list[i]);
		if (ret)
			fprintf(stderr, "uroce-sysfs-tree: %s: %s\n", ibv_get_device_name(list[i]),
				strerror(-ret));
	}
	ibv_free_device_list(list);
	return ret ? 1 : 0;
}
