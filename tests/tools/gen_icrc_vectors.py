#!/usr/bin/python3
"""Generate RoCEv2 ICRC test vectors with scapy.

Each output line is one packet:

    family src dst sport dport hex

family is ipv4 or ipv6, sport/dport are decimal UDP ports and hex is the UDP
payload: BTH, extended headers, payload, pad and the 4-byte ICRC as it goes
on the wire.  Lines starting with '#' are comments.

IPv4 packets are built and their ICRC computed by scapy.contrib.roce (the
reference).  The IPv4 header uses ID 0 and DF, as uroce sends it; TOS and
TTL are random because the ICRC masks them.  scapy has no IPv6 ICRC, so for
IPv6 this script builds the masked pseudo packet the same way scapy does
for IPv4, with the IPv6 masks of IBTA Annex A17.3.3 (traffic class, flow
label and hop limit all ones); the same pseudo-packet code is checked
against scapy on every IPv4 packet.

Run with /usr/bin/python3 (the interpreter that has scapy):
    gen_icrc_vectors.py [--count N] [--seed S] [--out FILE]
"""
import argparse
import random
import socket
import struct
import sys
import zlib

from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw
from scapy.contrib.roce import BTH

ROCE_PORT = 4791

# Extended header bytes after the BTH per the IBTA OpCode table (Vol 1
# 9.2.1) and Annex A14 (XRC), and
# whether a payload follows.  Written independently of src/transport/opcode.c.
RETH, AETH, ATMETH, ATMACK, IMM, IETH, DETH, XRCETH = 16, 4, 28, 8, 4, 4, 8, 4
_OPS = {
    # op: (name, extended header bytes, carries payload)
    0x00: ('SEND_FIRST', 0, True),
    0x01: ('SEND_MIDDLE', 0, True),
    0x02: ('SEND_LAST', 0, True),
    0x03: ('SEND_LAST_IMM', IMM, True),
    0x04: ('SEND_ONLY', 0, True),
    0x05: ('SEND_ONLY_IMM', IMM, True),
    0x06: ('WRITE_FIRST', RETH, True),
    0x07: ('WRITE_MIDDLE', 0, True),
    0x08: ('WRITE_LAST', 0, True),
    0x09: ('WRITE_LAST_IMM', IMM, True),
    0x0a: ('WRITE_ONLY', RETH, True),
    0x0b: ('WRITE_ONLY_IMM', RETH + IMM, True),
    0x0c: ('READ_REQ', RETH, False),
    0x0d: ('READ_RESP_FIRST', AETH, True),
    0x0e: ('READ_RESP_MIDDLE', 0, True),
    0x0f: ('READ_RESP_LAST', AETH, True),
    0x10: ('READ_RESP_ONLY', AETH, True),
    0x11: ('ACK', AETH, False),
    0x12: ('ATOMIC_ACK', AETH + ATMACK, False),
    0x13: ('CMP_SWAP', ATMETH, False),
    0x14: ('FETCH_ADD', ATMETH, False),
    0x16: ('SEND_LAST_INV', IETH, True),
    0x17: ('SEND_ONLY_INV', IETH, True),
}
_RESPONSES = {0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12}


def opcode_layout(opcode):
    """(extended header bytes, has payload) of a supported opcode."""
    tr, op = opcode & 0xe0, opcode & 0x1f
    if tr == 0x60:  # UD
        assert op in (0x04, 0x05)
        return DETH + _OPS[op][1], True
    if tr == 0x20:  # UC
        assert op <= 0x0b
        return _OPS[op][1], _OPS[op][2]
    ext, pay = _OPS[op][1], _OPS[op][2]
    if tr == 0xa0 and op not in _RESPONSES:  # XRC request
        ext += XRCETH
    return ext, pay


# Opcodes to draw from, weighted towards the interesting layouts.
OPCODES = ([0x04, 0x06, 0x11, 0x0d, 0x0e, 0x0f, 0x10, 0x13, 0x14, 0x12,
            0x64, 0x65] * 3 +
           [0x00, 0x01, 0x02, 0x03, 0x05, 0x07, 0x08, 0x09, 0x0a, 0x0b,
            0x0c, 0x16, 0x17,
            0x20, 0x24, 0x26, 0x2b,
            0xa0, 0xa4, 0xa6, 0xab, 0xac, 0xad, 0xb1, 0xb2, 0xb3, 0xb7])

PAYLOAD_SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 63, 64, 255, 256, 257, 1024, 1499,
                 1500]


def masked_icrc(ip_hdr, udp_hdr, udp_payload_no_icrc):
    """ICRC of a packet from its pseudo packet, as scapy does it for IPv4:
    8 bytes of ones, the masked IP and UDP headers, the BTH with byte 4
    set to ones, the rest up to the ICRC; CRC32 little-endian on the wire."""
    bth = bytearray(udp_payload_no_icrc)
    bth[4] = 0xff
    pseudo = ip_hdr / udp_hdr / Raw(bytes(bth) + b'\xff' * 4)
    data = b'\xff' * 8 + raw(pseudo)[:-4]
    return struct.pack('<I', zlib.crc32(data) & 0xffffffff)


def rand_ipv4(rng):
    return socket.inet_ntop(socket.AF_INET, bytes(rng.getrandbits(8) for _ in range(4)))


def rand_ipv6(rng):
    return socket.inet_ntop(socket.AF_INET6, bytes(rng.getrandbits(8) for _ in range(16)))


def make_vector(rng, family, opcode):
    ext, has_payload = opcode_layout(opcode)
    paylen = rng.choice(PAYLOAD_SIZES) if has_payload else 0
    if has_payload and rng.random() < 0.3:
        paylen = rng.randint(0, 1500)
    pad = (-paylen) & 3
    body = (bytes(rng.getrandbits(8) for _ in range(ext)) +
            bytes(rng.getrandbits(8) for _ in range(paylen)) + b'\x00' * pad)
    bth = BTH(opcode=opcode, solicited=rng.getrandbits(1), migreq=rng.getrandbits(1),
              padcount=pad, version=0,
              pkey=rng.choice([0xffff, rng.getrandbits(16)]),
              fecn=rng.getrandbits(1), becn=rng.getrandbits(1), resv6=rng.getrandbits(6),
              dqpn=rng.getrandbits(24), ackreq=rng.getrandbits(1), resv7=0,
              psn=rng.getrandbits(24))
    sport = rng.randint(49152, 65535)
    dport = ROCE_PORT if rng.random() < 0.8 else rng.randint(1, 65535)

    if family == 'ipv4':
        src, dst = rand_ipv4(rng), rand_ipv4(rng)
        pkt = (IP(src=src, dst=dst, id=0, flags='DF', tos=rng.getrandbits(8),
                  ttl=rng.randint(1, 255)) /
               UDP(sport=sport, dport=dport) / bth / Raw(body))
        wire = raw(pkt)
        assert wire[0] == 0x45 and wire[9] == 17
        udp_payload = wire[28:]
        # The pseudo-packet builder used for IPv6 must agree with scapy.
        mine = masked_icrc(IP(src=src, dst=dst, id=0, flags='DF', tos=0xff, ttl=0xff,
                              chksum=0xffff),
                           UDP(sport=sport, dport=dport, chksum=0xffff),
                           udp_payload[:-4])
        if mine != udp_payload[-4:]:
            sys.exit('pseudo-packet ICRC disagrees with scapy for %s' % udp_payload.hex())
    else:
        src, dst = rand_ipv6(rng), rand_ipv6(rng)
        bth.icrc = 0  # scapy cannot compute an IPv6 ICRC; filled in below
        no_icrc = raw(bth / Raw(body))[:-4]
        icrc = masked_icrc(IPv6(src=src, dst=dst, tc=0xff, fl=0xfffff, hlim=0xff),
                           UDP(sport=sport, dport=dport, chksum=0xffff), no_icrc)
        udp_payload = no_icrc + icrc

    assert len(udp_payload) == 12 + ext + paylen + pad + 4
    return '%s %s %s %d %d %s' % (family, src, dst, sport, dport, udp_payload.hex())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--count', type=int, default=64)
    ap.add_argument('--seed', type=int, default=None,
                    help='random seed (default: a fresh random one)')
    ap.add_argument('--out', default='-')
    args = ap.parse_args()

    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    rng = random.Random(seed)
    lines = ['# RoCEv2 ICRC vectors generated by tests/tools/gen_icrc_vectors.py '
             '--count %d --seed %d' % (args.count, seed),
             '# family src dst sport dport hex(BTH..ICRC); IPv4 ICRCs computed by '
             'scapy.contrib.roce']
    for i in range(args.count):
        family = 'ipv4' if i % 2 == 0 else 'ipv6'
        # Walk every opcode once before drawing at random.
        opcode = OPCODES[i] if i < len(OPCODES) else rng.choice(OPCODES)
        lines.append(make_vector(rng, family, opcode))
    text = '\n'.join(lines) + '\n'
    if args.out == '-':
        sys.stdout.write(text)
    else:
        with open(args.out, 'w') as f:
            f.write(text)


if __name__ == '__main__':
    main()
