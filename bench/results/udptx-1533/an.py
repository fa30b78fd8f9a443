import re,sys,statistics as st
rows={}
import collections; qp=collections.defaultdict(list)
lines=open(sys.argv[1]).read().split('\n')
for i,l in enumerate(lines):
    m=re.match(r'p(\d+) (main|udptx) (\S+) (\S+) bw_MBps=(\S+) cpu_s_per_GB=(\S+)',l)
    if m:
        p,lab,t,w,bw,cpu=m.groups(); rows[(int(p),lab,t,w)]=(float(bw),float(cpu))
    m=re.match(r'p\d+ qperf (\S+)',l)
    if m:
        v=lines[i+1].split(); x=float(v[0])*(1000 if v[1].startswith('GB') else 1); qp[m.group(1)].append(x)
P=sorted({k[0] for k in rows})
for w in sys.argv[2].split(','):
  for t in ('ib_write_bw','ib_send_bw'):
    for j,name in ((0,'MB/s'),(1,'cpu s/GB')):
      a=[rows[(p,'main',t,w)][j] for p in P]; b=[rows[(p,'udptx',t,w)][j] for p in P]
      wins=sum((y>x) if j==0 else (y<x) for x,y in zip(a,b))
      rat=[y/x for x,y in zip(a,b)]
      print(f"{w:4} {t:11} {name:8} main {st.median(a):7.3f} [{min(a):.3f}-{max(a):.3f}]  udptx {st.median(b):7.3f} [{min(b):.3f}-{max(b):.3f}]  paired ratio med {st.median(rat):.3f} [{min(rat):.2f}-{max(rat):.2f}] udptx better {wins}/{len(P)}")
for w in qp: print('qperf',w,'median MB/s',st.median(qp[w]),'range',min(qp[w]),max(qp[w]))
