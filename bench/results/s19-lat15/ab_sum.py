import sys,re,statistics as st
# ab_sum.py FILE [A B]: per test: medians, per-rep ratio to that rep's floor, B lower in k of n
for f in sys.argv[1:]:
    reps={}; fl={}; hdr=[]
    for l in open(f):
        if l.startswith('#'): hdr.append(l.strip()); continue
        m=re.match(r'rep (\d+) floor ([\d.]+)',l)
        if m: fl[int(m.group(1))]=float(m.group(2)); continue
        p=l.split(); r=int(p[1]); t=p[2]
        for kv in p[3:]:
            k,v=kv.split('=')
            try: reps.setdefault(t,{}).setdefault(k,{})[r]=float(v)
            except: pass
    print(f); [print(' ',h) for h in hdr]
    fv=list(fl.values()); print('  floor one-way median %.2f (%.2f-%.2f), %d reps'%(st.median(fv),min(fv),max(fv),len(fv)))
    for t,d in reps.items():
        names=sorted(d)
        out='  %-10s'%t
        for k in names:
            v=list(d[k].values()); rr=[d[k][r]/fl[r] for r in d[k] if r in fl]
            den = 1 if t.startswith('send') or t.startswith('write') else 2
            out+=' %s %.2f (%.2f-%.2f) %.2fx |'%(k,st.median(v),min(v),max(v),st.median(rr)/den)
        if len(names)==2:
            a,b=names; common=[r for r in d[a] if r in d[b]]
            out+=' %s<%s in %d of %d'%(b,a,sum(d[b][r]<d[a][r] for r in common),len(common))
        print(out)
