# sum21.py FILE...: ab.sh series with FLOORS="none all,thread": uroce's ratios to both floors
import sys, re, statistics as st
for f in sys.argv[1:]:
    fl={}; u={}
    hdr=[l.strip() for l in open(f) if l.startswith('#')]
    for l in open(f):
        m=re.match(r'rep (\d+) floor none=([\d.]+) all,thread=([\d.]+)|rep (\d+) floor all,thread=([\d.]+) none=([\d.]+)', l)
        if m and m.group(1): fl[int(m.group(1))]=(float(m.group(2)),float(m.group(3))); continue
        if m: fl[int(m.group(4))]=(float(m.group(6)),float(m.group(5))); continue
        m=re.match(r'rep (\d+) (\w+) A=([\d.]+)', l)
        if m: u.setdefault(m.group(2),{})[int(m.group(1))]=float(m.group(3))
    print(f); [print(' ',h) for h in hdr]
    n=[v[0] for v in fl.values()]; a=[v[1] for v in fl.values()]
    print(f"  floor none {st.median(n):.3f}  floor all,thread {st.median(a):.3f}  all,thread higher in {sum(1 for v in fl.values() if v[1]>v[0])}/{len(fl)}, per-rep diff med {st.median([v[1]-v[0] for v in fl.values()]):+.3f}")
    for t,d in u.items():
        r1=[d[r]/fl[r][0] for r in d if r in fl]; r2=[d[r]/fl[r][1] for r in d if r in fl]
        print(f"  {t:6s} med {st.median(d.values()):.2f}  ratio vs none {st.median(r1):.2f}x  vs all,thread {st.median(r2):.2f}x")
