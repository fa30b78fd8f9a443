import sys, re, statistics as st
from collections import defaultdict
floors=[]; d=defaultdict(lambda: defaultdict(list)); pairs=defaultdict(list)
for fn in sys.argv[1:]:
    for l in open(fn):
        if l.startswith('#'): print(l.strip()); continue
        w=l.split()
        if len(w)>=4 and w[2]=='floor':
            try: floors.append(float(w[3]))
            except: pass
            continue
        t=w[2]; row={}
        for kv in w[3:]:
            k,v=kv.split('=',1)
            try: row[k]=float(v); d[t][k].append(float(v))
            except: pass
        pairs[t].append(row)
fm=st.median(floors) if floors else float('nan')
print("floor one-way median %.2f (%s)"%(fm, " ".join("%.2f"%f for f in floors)))
for t in d:
    rt = 2*fm if t.startswith(('read','atomic')) else fm
    s=[]
    for k in sorted(d[t]):
        v=d[t][k]; s.append("%s med %.2f (%.2f-%.2f) n=%d ratio %.2fx"%(k,st.median(v),min(v),max(v),len(v),st.median(v)/rt))
    ks=sorted(d[t])
    if len(ks)==2:
        a,b=ks; lo=sum(1 for r in pairs[t] if a in r and b in r and r[b]<r[a]); tot=sum(1 for r in pairs[t] if a in r and b in r)
        s.append("%s<%s in %d/%d"%(b,a,lo,tot))
    print(t+": "+"; ".join(s))
