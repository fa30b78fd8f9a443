#!/usr/bin/env python3
"""Turn bench/run.sh's OUT/points.tsv into OUT/results.md, OUT/results.json
and OUT/bench.png.

    report.py OUT_DIR

points.tsv has one row per measurement: tool, test, variant, size, rep,
metric, value, status (ok / fail / n/a), note. Rep 0 is the size sweep; reps
1..N are the interleaved repetitions of the key points, whose medians are the
numbers the targets are judged on.
"""
import csv
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out")
KEY_BW, KEY_LAT, ATOMIC = 65536, 2, 8


def load():
    rows = []
    with open(OUT / "points.tsv", newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            r["size"] = int(r["size"])
            r["rep"] = int(r["rep"])
            r["value"] = float(r["value"]) if r["value"] not in ("", None) else None
            rows.append(r)
    meta = {}
    mf = OUT / "meta.txt"
    if mf.exists():
        for line in mf.read_text().splitlines():
            if ": " in line:
                k, v = line.split(": ", 1)
                meta[k.strip()] = v.strip()
    return rows, meta


ROWS, META = load()
IDX = defaultdict(list)
for r in ROWS:
    IDX[(r["tool"], r["test"], r["variant"], r["size"], r["metric"])].append(r)
# The busy-poll ping-pong's round trip (twice its one-way median, the same
# measurement): the like-for-like peer of ib_read_lat and ib_atomic_lat,
# which perftest reports as round trips.
for r in [r for r in ROWS if (r["tool"], r["test"]) == ("udp_pingpong", "busy_poll")
          and r["variant"] in ("lo", "veth") and r["metric"] == "lat_us"]:
    rtt = dict(r, test="busy_poll_rtt", value=None if r["value"] is None else 2 * r["value"])
    IDX[(rtt["tool"], rtt["test"], rtt["variant"], rtt["size"], rtt["metric"])].append(rtt)


class Point:
    """A measured point: the median of its ok values, or why it has none."""

    def __init__(self, rows):
        self.values = [r["value"] for r in rows if r["status"] == "ok" and r["value"] is not None]
        self.statuses = [r["status"] for r in rows]
        self.notes = sorted({r["note"] for r in rows if r["note"]})

    @property
    def ok(self):
        return bool(self.values)

    @property
    def median(self):
        return statistics.median(self.values) if self.values else None

    @property
    def status(self):
        if self.values:
            return "ok"
        if not self.statuses:
            return "missing"
        return "n/a" if "n/a" in self.statuses else "fail"

    def json(self):
        return {
            "median": self.median,
            "values": self.values,
            "status": self.status,
            "n": len(self.statuses),
            "notes": self.notes,
        }


def point(tool, test, variant, size, metric, key=True):
    """key=True: the repetitions (reps >= 1), or the sweep if there are none.
    key=False: the sweep (rep 0), or the repetitions if the sweep lacks it."""
    rows = IDX.get((tool, test, variant, size, metric), [])
    reps = [r for r in rows if r["rep"] >= 1]
    sweep = [r for r in rows if r["rep"] == 0]
    first, second = (reps, sweep) if key else (sweep, reps)
    return Point(first if first else second)


def fmt(v, metric):
    if v is None:
        return "-"
    if metric == "bw_MBps":
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3g}"
    if metric == "cpu_s_per_GB":
        return f"{v:.2f}"
    if metric == "cpu_pct":
        return f"{v:.3f}"
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}"


def cell(p, metric, spread=False):
    if not p.ok:
        return p.status
    s = fmt(p.median, metric)
    if spread and len(p.values) > 1:
        s += f" ({fmt(min(p.values), metric)}-{fmt(max(p.values), metric)})"
    return s


def size_label(s):
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return f"{s >> 20} MiB"
    if s >= 1024 and s % 1024 == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


# ---- targets ---------------------------------------------------------------------

# Issue 15's targets (the UDP path: loopback with UROCE_SHM=0, and veth).
# The short-run rows (variant rc_n100: -n 100, a fresh target idle before
# it) are judged like the steady state (-n LAT_STEADY).
PP = ("udp_pingpong", "busy_poll", "lo", KEY_LAT)
RTT = ("udp_pingpong", "busy_poll_rtt", "lo", KEY_LAT)
VPP = ("udp_pingpong", "busy_poll", "veth", KEY_LAT)
VRTT = ("udp_pingpong", "busy_poll_rtt", "veth", KEY_LAT)


def lat_targets(where, variant, short, pp, rtt):
    """The latency targets of one path (loopback, veth): one-way tests
    against the busy-poll one-way floor, perftest's round trips (READ,
    atomic) against the ping-pong's round trip, steady state and short run."""
    rows = [(f"{where}{t} 2 B t_typical / busy-poll UDP one-way 2 B",
             ("uroce", t, variant, KEY_LAT), pp, "<=", 1.3, "lat_us") for t in ("ib_send_lat", "ib_write_lat")]
    for t, size in (("ib_read_lat", KEY_LAT), ("ib_atomic_lat", ATOMIC)):
        for v, what in ((variant, "t_typical"), (short, "-n 100 (idle target)")):
            rows.append((f"{where}{t} {size} B {what} (a round trip) / busy-poll UDP round trip 2 B",
                         ("uroce", t, v, size), rtt, "<=", 1.5, "lat_us"))
    return rows


TARGETS = [
    # name, numerator, denominator, op, goal, metric
    ("ib_write_bw 64 KiB / qperf tcp_bw 64 KiB",
     ("uroce", "ib_write_bw", "rc", KEY_BW), ("qperf", "tcp_bw", "lo", KEY_BW), ">=", 1.5, "bw_MBps"),
    ("ib_send_bw 64 KiB / qperf tcp_bw 64 KiB",
     ("uroce", "ib_send_bw", "rc", KEY_BW), ("qperf", "tcp_bw", "lo", KEY_BW), ">=", 1.5, "bw_MBps"),
    *lat_targets("", "rc", "rc_n100", PP, RTT),
    ("idle: ibv_rc_pingpong server, open QP, no traffic [% of a core]",
     ("uroce", "idle", "rc_pingpong", 0), None, "<=", 1.0, "cpu_pct"),
    ("CPU s/GB: uroce ib_write_bw / qperf tcp_bw, 64 KiB",
     ("uroce", "cpu_per_GB", "write_bw", KEY_BW), ("qperf", "cpu_per_GB", "tcp_bw", KEY_BW), "<=", 1.5,
     "cpu_s_per_GB"),
    ("ib_write_bw 64 KiB: 8 QPs / 1 QP",
     ("uroce", "ib_write_bw", "rc_q8", KEY_BW), ("uroce", "ib_write_bw", "rc", KEY_BW), ">=", 0.9, "bw_MBps"),
    # "1,024 QPs do not collapse": at least half of what one QP moves
    ("ib_write_bw 64 KiB: 1,024 QPs / 1 QP",
     ("uroce", "ib_write_bw", "rc_q1024", KEY_BW), ("uroce", "ib_write_bw", "rc", KEY_BW), ">=", 0.5, "bw_MBps"),
    # middleware (issue 13): the same UCX and the same Open MPI, on uroce and on TCP
    ("UCX tag_lat 8 B: rc_verbs on uroce / UCX tcp",
     ("ucx", "tag_lat", "rc_verbs", 8), ("ucx", "tag_lat", "tcp", 8), "<=", 1.0, "lat_us"),
    ("UCX tag_bw 1 MiB: rc_verbs on uroce / UCX tcp",
     ("ucx", "tag_bw", "rc_verbs", 1048576), ("ucx", "tag_bw", "tcp", 1048576), ">=", 1.0, "bw_MBps"),
    ("UCX rc_verbs tag_lat 8 B / ib_send_lat 8 B t_typical",
     ("ucx", "tag_lat", "rc_verbs", 8), ("uroce", "ib_send_lat", "rc", 8), "<=", 1.3, "lat_us"),
    ("Open MPI ping-pong 8 B latency: uroce / TCP (both pml ucx)",
     ("mpi", "pingpong", "uroce", 8), ("mpi", "pingpong", "tcp", 8), "<=", 1.0, "lat_us"),
    ("Open MPI ping-pong 1 MiB bandwidth: uroce / TCP (both pml ucx)",
     ("mpi", "pingpong", "uroce", 1048576), ("mpi", "pingpong", "tcp", 1048576), ">=", 1.0, "bw_MBps"),
    ("veth: ib_write_bw 64 KiB / qperf tcp_bw 64 KiB",
     ("uroce", "ib_write_bw", "veth", KEY_BW), ("qperf", "tcp_bw", "veth", KEY_BW), ">=", 1.5, "bw_MBps"),
    *lat_targets("veth: ", "veth", "veth_n100", VPP, VRTT),
]

# Context rows: no target, but they belong next to the targets.
CONTEXT = [
    ("ib_send_lat 2 B -n 100 (fresh pair) / busy-poll UDP one-way 2 B",
     ("uroce", "ib_send_lat", "rc_n100", KEY_LAT), PP, "lat_us"),
    ("UD ib_send_lat 2 B / busy-poll UDP 2 B",
     ("uroce", "ib_send_lat", "ud", KEY_LAT), ("udp_pingpong", "busy_poll", "lo", KEY_LAT), "lat_us"),
    ("ib_write_bw 64 KiB / ucx_perftest tag_bw (UCX tcp) 64 KiB",
     ("uroce", "ib_write_bw", "rc", KEY_BW), ("ucx", "tag_bw", "tcp", KEY_BW), "bw_MBps"),
    ("ib_send_lat 2 B / ucx_perftest tag_lat (UCX tcp) 2 B",
     ("uroce", "ib_send_lat", "rc", KEY_LAT), ("ucx", "tag_lat", "tcp", KEY_LAT), "lat_us"),
    ("UDP path (UROCE_SHM=0): UCX tag_lat 8 B rc_verbs / UCX tcp",
     ("ucx", "tag_lat", "rc_verbs_udp", 8), ("ucx", "tag_lat", "tcp", 8), "lat_us"),
    ("UCX ucp_get 8 B (one-sided READ, target polls in bursts): rc_verbs on uroce / UCX tcp",
     ("ucx", "ucp_get", "rc_verbs", 8), ("ucx", "ucp_get", "tcp", 8), "lat_us"),
    ("UDP path (UROCE_SHM=0): UCX ucp_get 8 B rc_verbs / UCX tcp",
     ("ucx", "ucp_get", "rc_verbs_udp", 8), ("ucx", "ucp_get", "tcp", 8), "lat_us"),
    ("UDP path (UROCE_SHM=0): Open MPI ping-pong 8 B uroce / TCP",
     ("mpi", "pingpong", "uroce_udp", 8), ("mpi", "pingpong", "tcp", 8), "lat_us"),
    ("UDP path (UROCE_SHM=0): Open MPI ping-pong 1 MiB uroce / TCP",
     ("mpi", "pingpong", "uroce_udp", 1048576), ("mpi", "pingpong", "tcp", 1048576), "bw_MBps"),
    ("ib_send_lat 2 B / qperf udp_lat 2 B (blocking sockets)",
     ("uroce", "ib_send_lat", "rc", KEY_LAT), ("qperf", "udp_lat", "lo", KEY_LAT), "lat_us"),
    ("ib_write_bw 64 KiB / memcpy 64 KiB (in cache)",
     ("uroce", "ib_write_bw", "rc", KEY_BW), ("memcpy", "memcpy", "hot", KEY_BW), "bw_MBps"),
]

NAMES = {
    ("uroce", "ib_write_bw", "rc"): "uroce ib_write_bw",
    ("uroce", "ib_write_bw", "shm"): "uroce ib_write_bw, same-host wire (shm)",
    ("uroce", "ib_write_bw", "rc_q8"): "uroce ib_write_bw -q 8",
    ("uroce", "ib_write_bw", "rc_q1024"): "uroce ib_write_bw -q 1024",
    ("uroce", "ib_send_bw", "rc"): "uroce ib_send_bw",
    ("uroce", "ib_read_bw", "rc"): "uroce ib_read_bw",
    ("uroce", "ib_send_bw", "ud"): "uroce ib_send_bw -c UD",
    ("uroce", "ib_write_bw", "veth"): "uroce ib_write_bw (veth)",
    ("qperf", "tcp_bw", "lo"): "qperf tcp_bw",
    ("qperf", "tcp_bw", "veth"): "qperf tcp_bw (veth)",
    ("ucx", "tag_bw", "tcp"): "ucx_perftest tag_bw (tcp)",
    ("memcpy", "memcpy", "hot"): "memcpy (in cache)",
    ("memcpy", "memcpy", "stream"): "memcpy (DRAM)",
    ("uroce", "ib_send_lat", "rc"): "uroce ib_send_lat",
    ("uroce", "ib_send_lat", "shm"): "uroce ib_send_lat, same-host wire (shm)",
    ("uroce", "ib_write_lat", "rc"): "uroce ib_write_lat",
    ("uroce", "ib_read_lat", "rc"): "uroce ib_read_lat (RTT)",
    ("uroce", "ib_atomic_lat", "rc"): "uroce ib_atomic_lat (RTT)",
    ("uroce", "ib_read_lat", "rc_n100"): "uroce ib_read_lat -n 100, idle target (RTT)",
    ("uroce", "ib_atomic_lat", "rc_n100"): "uroce ib_atomic_lat -n 100, idle target (RTT)",
    ("uroce", "ib_send_lat", "rc_n100"): "uroce ib_send_lat -n 100",
    ("uroce", "ib_send_lat", "veth"): "uroce ib_send_lat (veth)",
    ("uroce", "ib_write_lat", "veth"): "uroce ib_write_lat (veth)",
    ("uroce", "ib_read_lat", "veth"): "uroce ib_read_lat (veth, RTT)",
    ("uroce", "ib_atomic_lat", "veth"): "uroce ib_atomic_lat (veth, RTT)",
    ("uroce", "ib_read_lat", "veth_n100"): "uroce ib_read_lat -n 100 (veth, idle target, RTT)",
    ("uroce", "idle", "rc_pingpong"): "uroce idle process (open QP, no traffic)",
    ("uroce", "ib_send_lat", "ud"): "uroce ib_send_lat -c UD",
    ("udp_pingpong", "busy_poll", "lo"): "busy-poll UDP (udp_pingpong)",
    ("udp_pingpong", "busy_poll", "veth"): "busy-poll UDP (veth)",
    ("qperf", "udp_lat", "lo"): "qperf udp_lat",
    ("qperf", "tcp_lat", "lo"): "qperf tcp_lat",
    ("ucx", "tag_lat", "tcp"): "ucx_perftest tag_lat (tcp)",
}


def machine_line():
    """The kind of machine the tables come from: system-call cost, memcpy
    bandwidth and load, at the start (rep 1) and at the end (rep 2)."""
    def at(test, variant, size, metric, rep):
        v = [r["value"] for r in IDX.get(("machine", test, variant, size, metric), [])
             if r["rep"] == rep and r["status"] == "ok" and r["value"] is not None]
        return v[0] if v else None

    def both(test, variant, size, metric, f):
        a, b = at(test, variant, size, metric, 1), at(test, variant, size, metric, 2)
        if a is None and b is None:
            return "?"
        if b is None or a is None:
            return f(a if b is None else b)
        return f"{f(a)} / {f(b)}"

    us = lambda v: f"{v / 1000:.2f} us"
    gbs = lambda v: f"{v / 1000:.1f} GB/s"
    return ("Machine (start / end of the run): system call getppid "
            f"{both('syscall', 'getppid', 0, 'ns', us)}, empty non-blocking recv "
            f"{both('syscall', 'recv_eagain', 0, 'ns', us)}, sched_yield "
            f"{both('syscall', 'sched_yield', 0, 'ns', us)}; memcpy 64 KiB in cache "
            f"{both('memcpy', 'hot', KEY_BW, 'bw_MBps', gbs)}, from DRAM "
            f"{both('memcpy', 'stream', KEY_BW, 'bw_MBps', gbs)}; load average "
            f"{both('loadavg', '1min', 0, 'load', lambda v: f'{v:.2f}')}.")


MACHINE = machine_line()


def judge(num, den, op, goal):
    if not num.ok:
        return None, num.status
    if den is None:  # an absolute target
        r = num.median
    elif not den.ok:
        return None, f"peer {den.status}"
    else:
        r = num.median / den.median
    ok = r >= goal if op == ">=" else r <= goal
    verdict = "PASS" if ok else "MISS"
    # a rep that failed is part of the verdict, not silently left out
    sts = num.statuses + (den.statuses if den is not None else [])
    bad = [st for st in sts if st != "ok"]
    if bad:
        verdict += f" ({len(bad)} of {len(sts)} runs failed)"
    return r, verdict


def main():
    md, js = [], {"meta": META, "targets": [], "context": [], "sweeps": {}, "points": []}
    md.append("# uroce benchmark results\n")
    md.append(
        f"{META.get('date', '?')} - {META.get('mode', '?')} run, {META.get('reps', '?')} reps of the key points "
        f"(medians; min-max in parentheses), {META.get('duration_s', '?')} s. "
        f"uroce source tree {META.get('uroce_commit', '?')}, library built {META.get('uroce_library', '?').split('built ')[-1]}; kernel {META.get('kernel', '?')}; {META.get('cpu', '?')}; "
        f"load average {META.get('loadavg_start', '?')} at the start, {META.get('loadavg_end', '?')} at the end "
        "(shared machine: compare ratios, not absolute numbers, across runs).\n"
    )
    md.append(MACHINE + "\n")
    md.append("Bandwidth in MB/s (10^6 B/s; perftest's and UCX's MiB/s converted). Latency in microseconds, "
              "one-way (half a round trip) except ib_read_lat and ib_atomic_lat, which perftest reports as the full "
              "round trip an RDMA READ or atomic is.\n")

    md.append("## Targets\n")
    md.append(MACHINE + "\n")
    md.append("| ratio | uroce | peer | ratio | target | verdict |")
    md.append("|---|---:|---:|---:|---:|---|")
    for name, a, b, op, goal, metric in TARGETS:
        num, den = point(*a, metric), (point(*b, metric) if b else None)
        r, verdict = judge(num, den, op, goal)
        md.append(f"| {name} | {cell(num, metric, True)} | {cell(den, metric, True) if den else '-'} | "
                  f"{'-' if r is None else f'{r:.2f}'} | {op} {goal} | {verdict} |")
        js["targets"].append({"name": name, "metric": metric, "uroce": num.json(),
                              "peer": den.json() if den else None,
                              "ratio": r, "op": op, "target": goal, "verdict": verdict})
    md.append("")
    md.append("Context (no target):\n")
    md.append("| ratio | uroce | peer | ratio |")
    md.append("|---|---:|---:|---:|")
    for name, a, b, metric in CONTEXT:
        num, den = point(*a, metric), point(*b, metric)
        r = num.median / den.median if num.ok and den.ok else None
        md.append(f"| {name} | {cell(num, metric, True)} | {cell(den, metric, True)} | "
                  f"{'-' if r is None else f'{r:.2f}'} |")
        js["context"].append({"name": name, "metric": metric, "uroce": num.json(), "peer": den.json(), "ratio": r})
    md.append("")

    # key absolute numbers with tails
    md.append("## Key points (medians of the reps)\n")
    md.append(MACHINE + "\n")
    md.append("| measurement | median | p99 (latency) | all reps |")
    md.append("|---|---:|---:|---|")
    key_rows = [
        (("uroce", "ib_write_bw", "rc", KEY_BW), "bw_MBps"),
        (("uroce", "ib_write_bw", "rc_q8", KEY_BW), "bw_MBps"),
        (("uroce", "ib_write_bw", "rc_q1024", KEY_BW), "bw_MBps"),
        (("uroce", "ib_send_bw", "rc", KEY_BW), "bw_MBps"),
        (("qperf", "tcp_bw", "lo", KEY_BW), "bw_MBps"),
        (("uroce", "ib_send_bw", "ud", KEY_LAT), "bw_MBps"),
        (("uroce", "ib_write_bw", "veth", KEY_BW), "bw_MBps"),
        (("qperf", "tcp_bw", "veth", KEY_BW), "bw_MBps"),
        (("uroce", "ib_send_lat", "rc", KEY_LAT), "lat_us"),
        (("uroce", "ib_write_lat", "rc", KEY_LAT), "lat_us"),
        (("uroce", "ib_read_lat", "rc", KEY_LAT), "lat_us"),
        (("uroce", "ib_atomic_lat", "rc", ATOMIC), "lat_us"),
        (("uroce", "ib_read_lat", "rc_n100", KEY_LAT), "lat_us"),
        (("uroce", "ib_atomic_lat", "rc_n100", ATOMIC), "lat_us"),
        (("uroce", "ib_send_lat", "rc_n100", KEY_LAT), "lat_us"),
        (("uroce", "ib_send_lat", "ud", KEY_LAT), "lat_us"),
        (("udp_pingpong", "busy_poll", "lo", KEY_LAT), "lat_us"),
        (("qperf", "udp_lat", "lo", KEY_LAT), "lat_us"),
        (("qperf", "tcp_lat", "lo", KEY_LAT), "lat_us"),
        (("udp_pingpong", "busy_poll", "veth", KEY_LAT), "lat_us"),
        (("uroce", "ib_send_lat", "veth", KEY_LAT), "lat_us"),
        (("uroce", "ib_write_lat", "veth", KEY_LAT), "lat_us"),
        (("uroce", "ib_read_lat", "veth", KEY_LAT), "lat_us"),
        (("uroce", "ib_atomic_lat", "veth", ATOMIC), "lat_us"),
        (("uroce", "ib_read_lat", "veth_n100", KEY_LAT), "lat_us"),
        (("uroce", "ib_atomic_lat", "veth_n100", ATOMIC), "lat_us"),
        (("uroce", "idle", "rc_pingpong", 0), "cpu_pct"),
        (("uroce", "cpu_per_GB", "write_bw", KEY_BW), "cpu_s_per_GB"),
        (("qperf", "cpu_per_GB", "tcp_bw", KEY_BW), "cpu_s_per_GB"),
    ]
    for k, metric in key_rows:
        p = point(*k, metric)
        unit = {"bw_MBps": "MB/s", "lat_us": "us", "cpu_s_per_GB": "CPU s/GB", "cpu_pct": "% of a core"}[metric]
        name = NAMES.get(k[:3], f"{k[0]} {k[1]} {k[2]}") + (f" {size_label(k[3])}" if k[3] else "") + f" [{unit}]"
        p99 = point(*k, "p99_us") if metric == "lat_us" else None
        allv = ", ".join(fmt(v, metric) for v in p.values) if p.ok else p.status
        md.append(f"| {name} | {cell(p, metric)} | {cell(p99, 'lat_us') if p99 and p99.ok else '-'} | {allv} |")
        js["points"].append({"key": list(k), "metric": metric, **p.json()})
    md.append("")

    # sweeps
    def sweep_table(title, metric, series, sizes):
        md.append(f"## {title}\n")
        md.append(MACHINE + "\n")
        cols = [s for s in series if any(point(*s, z, metric, key=False).statuses for z in sizes)]
        md.append("| size | " + " | ".join(NAMES.get(c, " ".join(c)) for c in cols) + " |")
        md.append("|---:|" + "---:|" * len(cols))
        data = {}
        for z in sizes:
            cells = []
            for c in cols:
                p = point(*c, z, metric, key=False)
                cells.append(cell(p, metric) if p.statuses else "")
                data.setdefault(" ".join(c), {})[z] = p.median if p.ok else p.status
            md.append(f"| {size_label(z)} | " + " | ".join(cells) + " |")
        md.append("")
        js["sweeps"][title] = data
        return cols

    def sizes_of(metric, tools):
        return sorted({r["size"] for r in ROWS if r["metric"] == metric and r["tool"] in tools and r["rep"] == 0})

    BW_SERIES = [("uroce", "ib_write_bw", "rc"), ("uroce", "ib_write_bw", "shm"), ("uroce", "ib_write_bw", "rc_q8"), ("uroce", "ib_send_bw", "rc"),
                 ("uroce", "ib_read_bw", "rc"), ("uroce", "ib_send_bw", "ud"), ("qperf", "tcp_bw", "lo"),
                 ("ucx", "tag_bw", "tcp"), ("memcpy", "memcpy", "hot"), ("memcpy", "memcpy", "stream")]
    LAT_SERIES = [("uroce", "ib_send_lat", "rc"), ("uroce", "ib_send_lat", "shm"), ("uroce", "ib_write_lat", "rc"), ("uroce", "ib_read_lat", "rc"),
                  ("uroce", "ib_atomic_lat", "rc"), ("uroce", "ib_send_lat", "ud"),
                  ("udp_pingpong", "busy_poll", "lo"), ("qperf", "udp_lat", "lo"), ("qperf", "tcp_lat", "lo"),
                  ("ucx", "tag_lat", "tcp")]
    bw_sizes = sizes_of("bw_MBps", {"uroce", "qperf", "ucx", "memcpy"})
    lat_sizes = sizes_of("lat_us", {"uroce", "qperf", "ucx", "udp_pingpong"})
    sweep_table("Bandwidth vs size (MB/s, one run per point)", "bw_MBps", BW_SERIES, bw_sizes)
    sweep_table("Latency vs size (us, t_typical / median, one run per point)", "lat_us", LAT_SERIES, lat_sizes)
    sweep_table("Latency tail vs size (us, p99)", "p99_us",
                [s for s in LAT_SERIES if s[0] in ("uroce", "udp_pingpong")], lat_sizes)

    samehost(md)
    md.append("Raw outputs of every run: `raw/`; every number: `points.tsv`; plot: `bench.png`.\n")
    (OUT / "results.md").write_text("\n".join(md))
    js["all_points"] = [{k: r[k] for k in ("tool", "test", "variant", "size", "rep", "metric", "value", "status", "note")}
                        for r in ROWS]
    (OUT / "results.json").write_text(json.dumps(js, indent=1))
    plot(BW_SERIES, LAT_SERIES, bw_sizes, lat_sizes)


def plot(bw_series, lat_series, bw_sizes, lat_sizes):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # the tables matter more than the picture
        print(f"report.py: no matplotlib ({e}); bench.png not written", file=sys.stderr)
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6))

    def draw(ax, series, sizes, metric):
        for s in series:
            xs, ys = [], []
            for z in sizes:
                p = point(*s, z, metric, key=False)
                if p.ok and p.median > 0:
                    xs.append(z)
                    ys.append(p.median)
            if not xs:
                continue
            name = NAMES.get(s, " ".join(s))
            style = "-o" if s[0] == "uroce" else "--s" if s[0] in ("qperf", "ucx") else ":^"
            ax.plot(xs, ys, style, label=name, markersize=4, linewidth=2 if s[0] == "uroce" else 1.3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_xlabel("message size (bytes)")

    draw(ax1, bw_series, bw_sizes, "bw_MBps")
    ax1.set_ylabel("bandwidth (MB/s, 10^6 B/s)")
    ax1.set_title("Bandwidth vs size (loopback; uroce over UDP unless marked shm)")
    draw(ax2, lat_series, lat_sizes, "lat_us")
    ax2.set_ylabel("latency (us): one-way; READ/atomic: round trip")
    ax2.set_title("Latency vs size (loopback, t_typical / median; UDP unless shm)")
    fig.suptitle(f"uroce vs peers - {META.get('date', '')} ({META.get('mode', '')}), "
                 f"load {META.get('loadavg_start', '?')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(OUT / "bench.png", dpi=110)


SAMEHOST_ROWS = [("send_lat", "ib_send_lat 2 B (us)", "lat_us"), ("write_lat", "ib_write_lat 2 B (us)", "lat_us"),
                 ("read_lat", "ib_read_lat 2 B, round trip (us)", "lat_us"),
                 ("atomic_lat", "ib_atomic_lat, round trip (us)", "lat_us"),
                 ("write_bw", "ib_write_bw 64 KiB (MB/s)", "bw_MBps"), ("send_bw", "ib_send_bw 64 KiB (MB/s)", "bw_MBps"),
                 ("read_bw", "ib_read_bw 64 KiB (MB/s)", "bw_MBps"), ("write_bw_q8", "ib_write_bw 64 KiB -q 8 (MB/s)", "bw_MBps"),
                 ("write_bw_1M", "ib_write_bw 1 MiB (MB/s)", "bw_MBps"), ("cpu", "CPU s/GB, 64 KiB", "cpu_s_per_GB")]


def samehost(md):
    """bench/shm.sh's rows (section samehost): shm vs UDP vs TCP, quiet and under a CPU hog."""
    rows = [r for r in ROWS if r["tool"] == "samehost" and r["status"] == "ok" and r["value"] is not None]
    if not rows:
        return
    vals = defaultdict(list)
    for r in rows:
        vals[(r["test"], r["variant"])].append(r["value"])
    med = {k: statistics.median(v) for k, v in vals.items()}
    md.append("## Same-host wire: shared memory vs UDP (UROCE_SHM=0) vs kernel TCP\n")
    md.append("bench/shm.sh, medians; TCP: qperf tcp_lat 2 B (send_lat row), tcp_bw 64 KiB (write_bw row). "
              "Hog: a spinning process pinned to every core for the whole measurement. "
              "Detail: samehost_quiet.md, samehost_hog.md.\n")
    cols = [(p + h, f"{n}{' (hog)' if h else ''}") for h in ("", "_hog") for p, n in
            (("shm", "shm"), ("udp", "UDP"), ("tcp", "TCP"))]
    md.append("| point | " + " | ".join(n for _, n in cols) + " |")
    md.append("|---|" + "---:|" * len(cols))
    for test, name, metric in SAMEHOST_ROWS:
        cells = [fmt(med[(test, c)], metric) if (test, c) in med else "" for c, _ in cols]
        if any(cells):
            md.append(f"| {name} | " + " | ".join(cells) + " |")
    floors = [("floor", "shm", "cache-line ping-pong one-way (us)"), ("floor", "udp", "busy-poll UDP one-way (us)"),
              ("ucx", "tag_lat", "UCX posix tag_lat 8 B (us)"), ("ucx", "tag_bw", "UCX posix tag_bw 1 MiB (MB/s)"),
              ("memcpy", "64K", "memcpy 64 KiB hot (MB/s)")]
    md.append("")
    md.append("| floor | quiet | hog |")
    md.append("|---|---:|---:|")
    for t, v, name in floors:
        q, h = med.get((t, v)), med.get((t, v + "_hog"))
        md.append(f"| {name} | {'' if q is None else f'{q:g}'} | {'' if h is None else f'{h:g}'} |")
    md.append("")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 5))
    for ax, metric, title in zip(axes, ("lat_us", "bw_MBps", "cpu_s_per_GB"),
                                 ("latency (us; READ/atomic: round trip)", "bandwidth (MB/s)", "CPU s per GB")):
        tests = [(t, n) for t, n, m in SAMEHOST_ROWS if m == metric and any((t, c) in med for c, _ in cols)]
        width = 0.8 / len(cols)
        for i, (c, n) in enumerate(cols):
            ys = [med.get((t, c), 0) for t, _ in tests]
            ax.bar([x + i * width for x in range(len(tests))], ys, width, label=n,
                   hatch="//" if c.endswith("_hog") else None)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(tests))])
        ax.set_xticklabels([n.split(" (")[0] for _, n in tests], rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
        if metric == "lat_us":
            ax.set_yscale("log")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Same-host wire: shared memory vs UDP vs kernel TCP, quiet and under a CPU hog", fontsize=10)
    fig.tight_layout()
    fig.savefig(OUT / "samehost.png", dpi=110)
    md.append("Plot: `samehost.png`.\n")


if __name__ == "__main__":
    main()
