#!/usr/bin/python3
"""RoCEv2 conformance check of a packet capture (tests/integration/conformance.sh,
tests/integration/interop_mode.sh).

    roce_conform.py CAPTURE [--mode native|standard] [--expect NAME,...]
                    [--expect-aeth ACK,RNR_NAK,NAK_PSN_SEQ,...] [--expect-mtu 256,...]
                    [--sport PORT] [--no-decode-as] [--min-packets N]

Every UDP packet of the capture (pcap or pcapng, Ethernet or Linux cooked) is
checked three ways:

1. Wireshark's InfiniBand dissector (tshark): decoded as InfiniBand with the
   same opcode, destination QP and PSN as below, no malformed packet, no
   expert info.  Native mode uses ephemeral ports, so every UDP port is
   decoded as InfiniBand (-d); standard mode relies on Wireshark's own
   RoCEv2 port 4791 (--no-decode-as proves it).
2. scapy's RoCE layer (scapy.contrib.roce) recomputes the ICRC over the IP
   and UDP headers as captured (real IPv4 ID, lengths, addresses, ports).
3. This script's own decoder, written from IBTA Vol. 1 ch. 9 and Annex A17:
   IPv4 without options, DF set, not fragmented; UDP length; destination
   port (native: QPN >> 8, standard: 4791, multicast: 4791); BTH TVer 0,
   P_Key 0xFFFF, FECN/BECN/resv6 and resv7 zero, SE only where a message
   can be solicited, AckReq never on responses; the extended headers each
   opcode carries and so the header length; payload and pad: pad 0..3,
   payload + pad a multiple of 4, pad bytes zero, no payload (and no pad)
   where the opcode has none, FIRST/MIDDLE carrying exactly one path MTU
   (256..4096, the same within a message) and LAST at most that, ONLY at
   most 4096,
   LAST at least one byte; RETH DMA length (ONLY: equal to the payload,
   FIRST: larger than it, at most 2^31); AETH syndrome (ACK, RNR NAK, NAK
   codes 0..4, reserved patterns rejected); AtomicETH address 8-byte
   aligned; DETH and XRCETH reserved bytes zero.

Prints the packets per opcode and per AETH kind and every violation (the
first 30 of each check), and exits 1 on any violation or when an expected
opcode or AETH kind is missing.
"""
import argparse
import collections
import re
import subprocess
import sys

try:
    from scapy.all import rdpcap, IP, UDP, Raw, conf
    from scapy.contrib.roce import BTH
except ImportError as e:  # pragma: no cover
    print("SKIP: scapy with scapy.contrib.roce is needed (python3-scapy): %s" % e)
    sys.exit(77)

conf.verb = 0

ROCE_PORT = 4791
MCAST_QPN = 0xFFFFFF

# Header lengths (IBTA 9.2-9.3)
BTH_LEN, DETH_LEN, XRCETH_LEN, RETH_LEN, ATOMIC_LEN, AETH_LEN, ATOMICACK_LEN, IMM_LEN, IETH_LEN = (
    12, 8, 4, 16, 28, 4, 8, 4, 4)
ICRC_LEN = 4

# Per RC/UC/XRC opcode (low 5 bits): name, extended headers in order, payload?
OPS = {
    0x00: ("SEND_FIRST", [], True),
    0x01: ("SEND_MIDDLE", [], True),
    0x02: ("SEND_LAST", [], True),
    0x03: ("SEND_LAST_IMM", ["IMM"], True),
    0x04: ("SEND_ONLY", [], True),
    0x05: ("SEND_ONLY_IMM", ["IMM"], True),
    0x06: ("WRITE_FIRST", ["RETH"], True),
    0x07: ("WRITE_MIDDLE", [], True),
    0x08: ("WRITE_LAST", [], True),
    0x09: ("WRITE_LAST_IMM", ["IMM"], True),
    0x0A: ("WRITE_ONLY", ["RETH"], True),
    0x0B: ("WRITE_ONLY_IMM", ["RETH", "IMM"], True),
    0x0C: ("READ_REQ", ["RETH"], False),
    0x0D: ("READ_RESP_FIRST", ["AETH"], True),
    0x0E: ("READ_RESP_MIDDLE", [], True),
    0x0F: ("READ_RESP_LAST", ["AETH"], True),
    0x10: ("READ_RESP_ONLY", ["AETH"], True),
    0x11: ("ACK", ["AETH"], False),
    0x12: ("ATOMIC_ACK", ["AETH", "ATOMICACK"], False),
    0x13: ("CMP_SWAP", ["ATOMIC"], False),
    0x14: ("FETCH_ADD", ["ATOMIC"], False),
    0x16: ("SEND_LAST_INV", ["IETH"], True),
    0x17: ("SEND_ONLY_INV", ["IETH"], True),
}
HLEN = {"RETH": RETH_LEN, "IMM": IMM_LEN, "AETH": AETH_LEN, "ATOMICACK": ATOMICACK_LEN,
        "ATOMIC": ATOMIC_LEN, "IETH": IETH_LEN, "DETH": DETH_LEN, "XRCETH": XRCETH_LEN}
RESPONSES = {0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12}
FIRST_MIDDLE = {0x00, 0x01, 0x06, 0x07, 0x0D, 0x0E}
LAST = {0x02, 0x03, 0x08, 0x09, 0x0F, 0x16}
ONLY = {0x04, 0x05, 0x0A, 0x0B, 0x10, 0x17}
# SE may be set only on the last packet of a SEND or of a WRITE with immediate
SE_OK = {0x02, 0x03, 0x04, 0x05, 0x09, 0x0B, 0x16, 0x17}
UC_OPS = set(range(0x00, 0x0C))
XRC_OPS = set(OPS)
MTUS = (256, 512, 1024, 2048, 4096)
NAK_CODES = {0: "NAK_PSN_SEQ", 1: "NAK_INV_REQ", 2: "NAK_REM_ACCESS", 3: "NAK_REM_OP",
             4: "NAK_INV_RD_REQ"}


# uroce's selective repeat between uroce peers (docs/selective-repeat.md),
# native mode only: BTH byte 4 bit 0 offers it (any RC packet), bits 1-5 and
# resv7 carry the requester's incarnation (requests offering it), and the
# selective ACK is opcode 0xD1: AETH, then the first missing PSN (4 bytes)
# and a 1,024-bit map.
UROCE_SACK = 0xD1
SACK_BIT = 0x01
SACK_PAYLOAD = 4 + 128
# The piggy-backed ACK between uroce peers (docs/latency.md, "Session 11"),
# native mode only: byte 4 bit 1 on an RC response says the QP takes them;
# byte 4 bit 7 on an RC SEND or WRITE request says it carries one: 8 bytes
# after its headers, the ACK's PSN (after a zero byte) and an ACK's AETH.
PIGGY_OK = 0x02
PIGGY = 0x80
PIGGY_LEN = 8
PIGGY_OPS = set(range(0x00, 0x0C)) | {0x16, 0x17}


def opcode_info(opc):
    """(name, headers, has_payload) or None for an opcode uroce must not send."""
    tr, op = opc & 0xE0, opc & 0x1F
    if tr == 0x00 and op in OPS:
        n, h, p = OPS[op]
        return "RC_" + n, h, p
    if tr == 0x20 and op in UC_OPS:
        n, h, p = OPS[op]
        return "UC_" + n, h, p
    if tr == 0x60 and op in (0x04, 0x05):
        n, h, p = OPS[op]
        return "UD_" + n, ["DETH"] + h, p
    if tr == 0xA0 and op in XRC_OPS:
        n, h, p = OPS[op]
        return "XRC_" + n, (h if op in RESPONSES else ["XRCETH"] + h), p
    if opc == UROCE_SACK:
        return "UROCE_SACK", ["AETH"], True
    return None


class Checker:
    def __init__(self, mode, sport=None):
        self.mode = mode
        self.sport = sport
        self.violations = collections.OrderedDict()
        self.per_opcode = collections.Counter()
        self.aeth = collections.Counter()
        self.ipids = collections.Counter()
        self.flow_mtu = {}  # first MTU of each multi-packet flow, for the summary
        self.msg_mtu = {}
        self.checks = 0
        self.decoded = {}  # frame number -> (opcode, dqpn, psn)
        self.sack_packets = 0  # offering selective repeat (native mode)
        self.piggy_packets = 0  # requests carrying an ACK (native mode)

    def bad(self, frame, what, detail):
        self.violations.setdefault(what, []).append("frame %d: %s" % (frame, detail))

    def expect(self, frame, cond, what, detail=""):
        self.checks += 1
        if not cond:
            self.bad(frame, what, detail)
        return cond

    def packet(self, frame, ip):
        e = self.expect
        udp = ip[UDP]
        data = bytes(udp.payload)
        e(frame, ip.version == 4 and ip.ihl == 5, "IPv4 header without options",
          "version %d ihl %d" % (ip.version, ip.ihl))
        e(frame, ip.flags.DF and not ip.flags.MF and ip.frag == 0, "IPv4 DF set, not fragmented",
          "flags %s frag %d" % (ip.flags, ip.frag))
        e(frame, ip.len == 20 + udp.len and udp.len == 8 + len(data), "IP/UDP lengths",
          "ip.len %d udp.len %d data %d" % (ip.len, udp.len, len(data)))
        self.ipids[ip.id] += 1
        if not e(frame, len(data) >= BTH_LEN + ICRC_LEN, "at least BTH + ICRC",
                 "%d bytes" % len(data)):
            return
        opc = data[0]
        info = opcode_info(opc)
        se, mig, pad, tver = data[1] >> 7, (data[1] >> 6) & 1, (data[1] >> 4) & 3, data[1] & 15
        pkey = int.from_bytes(data[2:4], "big")
        dqpn = int.from_bytes(data[5:8], "big")
        ackreq, resv7 = data[8] >> 7, data[8] & 0x7F
        psn = int.from_bytes(data[9:12], "big")
        self.decoded[frame] = (opc, dqpn, psn)
        if not e(frame, info is not None, "known opcode", "opcode 0x%02x" % opc):
            self.per_opcode["0x%02x?" % opc] += 1
            return
        name, hdrs, has_payload = info
        self.per_opcode[name] += 1
        op = opc & 0x1F

        # BTH
        e(frame, tver == 0, "BTH TVer 0", "TVer %d" % tver)
        e(frame, pkey == 0xFFFF, "BTH P_Key 0xFFFF", "P_Key 0x%04x" % pkey)
        sack = (self.mode == "native" and (opc & 0xE0) in (0x00, 0xC0) and
                data[4] & SACK_BIT != 0)
        request = opc != UROCE_SACK and op not in RESPONSES
        # byte 4 without the piggy-backed ACK's bits (native RC only)
        b4 = data[4]
        piggy = (self.mode == "native" and (opc & 0xE0) == 0x00 and request and
                 op in PIGGY_OPS and b4 & PIGGY != 0)
        if piggy:
            b4 &= ~PIGGY
            self.piggy_packets += 1
        if self.mode == "native" and (opc & 0xE0) in (0x00, 0xC0) and not request:
            b4 &= ~PIGGY_OK
        if sack:
            self.sack_packets += 1
            e(frame, b4 & 0xC0 == 0, "BTH FECN/BECN zero", "byte 4 = 0x%02x" % data[4])
            e(frame, request or b4 == SACK_BIT, "incarnation only on requests",
              "%s: byte 4 = 0x%02x" % (name, data[4]))
            e(frame, request or resv7 == 0, "BTH resv7 zero on responses",
              "resv7 0x%02x" % resv7)
        else:
            e(frame, b4 == 0, "BTH FECN/BECN/resv6 zero", "byte 4 = 0x%02x" % data[4])
            e(frame, resv7 == 0, "BTH resv7 zero", "resv7 0x%02x" % resv7)
        e(frame, opc != UROCE_SACK or sack, "selective ACKs only in native mode, offering it",
          "byte 4 = 0x%02x" % data[4])
        e(frame, dqpn not in (0, 1), "destination QPN not 0 or 1", "QPN %d" % dqpn)
        e(frame, not se or op in SE_OK, "SE only on the last packet of SEND / WRITE_IMM", name)
        e(frame, not (ackreq and op in RESPONSES), "AckReq not set on responses", name)
        e(frame, mig in (0, 1), "MigReq", "")

        # UDP ports
        if dqpn == MCAST_QPN or self.mode == "standard":
            e(frame, udp.dport == ROCE_PORT, "destination port 4791",
              "port %d QPN 0x%06x" % (udp.dport, dqpn))
        else:
            e(frame, udp.dport == dqpn >> 8, "native destination port = QPN >> 8",
              "port %d QPN 0x%06x" % (udp.dport, dqpn))
        if self.sport is not None:
            e(frame, udp.sport == self.sport, "source port %d" % self.sport, "port %d" % udp.sport)
        e(frame, (dqpn == MCAST_QPN) == (name.startswith("UD") and ip.dst.startswith("2")
                                         and 224 <= int(ip.dst.split(".")[0]) <= 239),
          "multicast QPN exactly for UD to a group", "QPN 0x%06x dst %s" % (dqpn, ip.dst))

        # headers and payload
        hlen = BTH_LEN + sum(HLEN[h] for h in hdrs)
        if not e(frame, len(data) >= hlen + ICRC_LEN, "headers of %s present" % name,
                 "%d bytes < %d" % (len(data), hlen + ICRC_LEN)):
            return
        off, fields = BTH_LEN, {}
        for h in hdrs:
            fields[h] = data[off:off + HLEN[h]]
            off += HLEN[h]
        if piggy:
            ack = data[hlen:hlen + PIGGY_LEN]
            hlen += PIGGY_LEN
            if not e(frame, len(data) >= hlen + ICRC_LEN, "piggy-backed ACK present", name):
                return
            e(frame, ack[0] == 0 and ack[4] >> 5 == 0, "piggy-backed ACK: a PSN and an ACK's AETH",
              "%s: %s" % (name, ack.hex()))
        body = len(data) - hlen - ICRC_LEN
        paylen = body - pad
        e(frame, body % 4 == 0, "payload + pad a multiple of 4", "%s: %d bytes" % (name, body))
        e(frame, paylen >= 0, "pad not larger than the payload", "pad %d body %d" % (pad, body))
        e(frame, data[hlen + paylen:hlen + body] == b"\0" * pad, "pad bytes zero", name)
        if not has_payload:
            e(frame, body == 0 and pad == 0, "no payload on %s" % name.split("_", 1)[1],
              "%d bytes, pad %d" % (body, pad))
        # a message: FIRST sets its path MTU, MIDDLE repeat it, LAST are at
        # most that (per sender, receiver, QP and message kind)
        kind = "READ_RESP" if op in RESPONSES else name.split("_")[1]
        msg = (ip.src, ip.dst, dqpn, kind)
        if op in FIRST_MIDDLE:
            e(frame, pad == 0 and paylen in MTUS, "FIRST/MIDDLE carry one path MTU",
              "%s: %d bytes, pad %d" % (name, paylen, pad))
            if op in (0x00, 0x06, 0x0D):
                self.msg_mtu[msg] = paylen
                self.flow_mtu.setdefault(msg, paylen)
            mtu = self.msg_mtu.get(msg, paylen)
            e(frame, paylen == mtu, "one path MTU per message",
              "%s: %d bytes, FIRST had %d" % (name, paylen, mtu))
        if op in LAST and msg in self.msg_mtu:
            e(frame, paylen <= self.msg_mtu[msg], "LAST at most the path MTU",
              "%s: %d > %d" % (name, paylen, self.msg_mtu[msg]))
        if op in ONLY:
            e(frame, paylen <= 4096, "ONLY at most 4096 bytes", "%s: %d" % (name, paylen))
        if op in LAST:
            e(frame, paylen >= 1, "LAST carries at least one byte", name)
        if "RETH" in fields:
            dmalen = int.from_bytes(fields["RETH"][12:16], "big")
            e(frame, dmalen <= 1 << 31, "RETH DMA length <= 2^31", "%d" % dmalen)
            if op in (0x0A, 0x0B):
                e(frame, dmalen == paylen, "WRITE ONLY: DMA length = payload",
                  "%d != %d" % (dmalen, paylen))
            if op == 0x06:
                e(frame, dmalen > paylen, "WRITE FIRST: DMA length > payload",
                  "%d <= %d" % (dmalen, paylen))
        if "AETH" in fields:
            syn = fields["AETH"][0]
            kind = syn >> 5
            if kind == 0:
                self.aeth["ACK"] += 1
            elif kind == 1:
                self.aeth["RNR_NAK"] += 1
            elif kind == 3 and (syn & 0x1F) in NAK_CODES:
                self.aeth[NAK_CODES[syn & 0x1F]] += 1
            else:
                self.aeth["reserved 0x%02x" % syn] += 1
            e(frame, kind in (0, 1) or (kind == 3 and (syn & 0x1F) in NAK_CODES),
              "AETH syndrome valid", "0x%02x" % syn)
            e(frame, kind == 0 or op == 0x11, "NAKs only in ACK packets",
              "%s syndrome 0x%02x" % (name, syn))
        if opc == UROCE_SACK:
            e(frame, paylen == SACK_PAYLOAD and data[hlen] == 0 and data[hlen + 4] & 1 == 0,
              "selective ACK: base PSN and map, bit 0 clear", "%d bytes" % paylen)
        if "ATOMIC" in fields:
            va = int.from_bytes(fields["ATOMIC"][0:8], "big")
            e(frame, va % 8 == 0, "AtomicETH address 8-byte aligned", "0x%x" % va)
        if "DETH" in fields:
            e(frame, fields["DETH"][4] == 0, "DETH reserved byte zero", "")
        if "XRCETH" in fields:
            e(frame, fields["XRCETH"][0] == 0, "XRCETH reserved byte zero", "")
            e(frame, int.from_bytes(fields["XRCETH"][1:4], "big") != 0, "XRCETH SRQ non-zero",
              "")

        # ICRC by scapy over the captured headers
        gso_like = (len(data) > 4096 + 64 or (not has_payload and body > 0) or
                    (op in FIRST_MIDDLE and paylen not in MTUS))
        pkt = ip.copy()
        pkt[UDP].remove_payload()
        pkt[UDP].add_payload(BTH(data))
        want = pkt[BTH].compute_icrc(None)
        e(frame, want == data[-4:], "ICRC (scapy, captured IP/UDP headers)",
          "%s psn %d: wire %s scapy %s%s" % (
              name, psn, data[-4:].hex(), want.hex(),
              " (several packets in one frame: a GSO batch captured before"
              " segmentation? turn tx-udp-segmentation off)" if gso_like else ""))

    def tshark(self, path, decode_as):
        heur = ["eth_over_ib", "mellanox_eoib", "sdp_infiniband", "iser_infiniband", "nvme_rdma",
                "smcr_infiniband", "fc_infiniband", "smb_direct_infiniband",
                "rpcrdma_infiniband", "lnet_ib"]
        cmd = ["tshark", "-r", path, "-n"]
        if decode_as:
            cmd += ["-d", "udp.port==1-65535,infiniband"]
        for h in heur:
            cmd += ["--disable-heuristic", h]
        cmd += ["-Y", "udp", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"]
        for f in ("frame.number", "infiniband.bth.opcode", "infiniband.bth.destqp",
                  "infiniband.bth.psn", "infiniband.bth.p_key", "infiniband.bth.tver",
                  "_ws.malformed", "_ws.expert.message"):
            cmd += ["-e", f]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=120)
        if out.returncode != 0:
            self.bad(0, "tshark runs", out.stderr.strip()[-300:])
            return 0
        n = 0
        for line in out.stdout.splitlines():
            f = line.split("\t")
            if len(f) < 8 or not f[0]:
                continue
            n += 1
            frame = int(f[0])
            mine = self.decoded.get(frame)
            e = self.expect
            if not e(frame, f[1] != "", "tshark decodes InfiniBand (BTH)", "no BTH"):
                continue
            # (Wireshark knows no manufacturer-specific opcode.)  The UDP
            # dissector's "Possible traceroute" is about the port number
            # alone (33434-33534, the traceroute range), which an ephemeral
            # native-mode port can fall into: not a property of the packet.
            expert = re.sub(r"Possible traceroute(: hop #\d+, attempt #\d+)?,?", "", f[7]).strip(",")
            e(frame, (mine and mine[0] == UROCE_SACK) or (f[6] == "" and expert == ""),
              "tshark: no malformed packet or expert info", (f[6] + " " + expert).strip())
            e(frame, f[4] in ("65535", "0xffff") and f[5] == "0", "tshark: P_Key and TVer",
              "p_key %s tver %s" % (f[4], f[5]))
            if mine:
                e(frame, (int(f[1], 0), int(f[2], 0), int(f[3], 0)) == mine,
                  "tshark: same opcode, QPN and PSN as ours",
                  "tshark %s/%s/%s ours %s" % (f[1], f[2], f[3], mine))
        return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--mode", choices=("native", "standard"), default="native")
    ap.add_argument("--expect", default="", help="opcode names that must appear")
    ap.add_argument("--expect-aeth", default="", help="AETH kinds that must appear")
    ap.add_argument("--no-decode-as", action="store_true",
                    help="let tshark find RoCEv2 by port 4791 alone")
    ap.add_argument("--expect-mtu", default="", help="path MTUs that must appear")
    ap.add_argument("--sport", type=int, help="every packet comes from this UDP port")
    ap.add_argument("--min-packets", type=int, default=1)
    a = ap.parse_args()

    c = Checker(a.mode, a.sport)
    npkt = 0
    for i, p in enumerate(rdpcap(a.capture), 1):
        if IP in p and UDP in p[IP]:
            npkt += 1
            c.packet(i, p[IP])
    nts = c.tshark(a.capture, not a.no_decode_as)
    missing = [x for x in a.expect.split(",") if x and x not in c.per_opcode]
    missing_aeth = [x for x in a.expect_aeth.split(",") if x and x not in c.aeth]
    mtus = sorted(set(c.flow_mtu.values()))
    missing_mtu = [x for x in a.expect_mtu.split(",") if x and int(x) not in mtus]

    print("%d RoCEv2 packets (%d decoded by tshark), %d checks" % (npkt, nts, c.checks))
    print("packets per opcode:")
    for name, n in sorted(c.per_opcode.items()):
        print("  %-26s %6d" % (name, n))
    print("AETH: " + ", ".join("%s %d" % kv for kv in sorted(c.aeth.items())))
    print("path MTUs of multi-packet flows: " + ", ".join(str(m) for m in mtus))
    print("IPv4 IDs: " + ", ".join("0x%04x x%d" % kv for kv in sorted(c.ipids.items())[:8]) +
          (" ..." if len(c.ipids) > 8 else ""))
    if c.sack_packets:
        print("offering selective repeat (uroce extension, native mode): %d" % c.sack_packets)
    if c.piggy_packets:
        print("requests carrying an ACK (uroce extension, native mode): %d" % c.piggy_packets)
    ok = True
    if npkt < a.min_packets:
        print("FAIL: only %d packets in %s" % (npkt, a.capture))
        ok = False
    for what, items in c.violations.items():
        ok = False
        print("VIOLATION %s: %d packet(s)" % (what, len(items)))
        for s in items[:30]:
            print("    " + s)
    if missing:
        ok = False
        print("FAIL: expected opcodes missing: " + ",".join(missing))
    if missing_aeth:
        ok = False
        print("FAIL: expected AETH kinds missing: " + ",".join(missing_aeth))
    if missing_mtu:
        ok = False
        print("FAIL: expected path MTUs missing: " + ",".join(missing_mtu))
    print("all checks passed" if ok else "conformance FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
