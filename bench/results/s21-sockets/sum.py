import sys, statistics as st, re
# sum.py FILE...: the floor variants of fl-style lines (rep N [floor] v=x ...): per variant the median,
# the median of the per-rep differences to 'none', and the reps above 'none'
for f in sys.argv[1:]:
    reps=[]; hdr=[]
    for l in open(f):
        if l.startswith('#'): hdr.append(l.strip()); continue
        d={}
        for kv in l.split()[2:]:
            if '=' not in kv: continue  # ab.sh's "floor"
            k,v=kv.split('=',1)
            try: d[k]=float(v)
            except: pass
        reps.append(d)
    print(f); [print(' ',h) for h in hdr]
    keys=[]
    for d in reps:
        for k in d:
            if k not in keys: keys.append(k)
    for k in keys:
        vals=[d[k] for d in reps if k in d]
        rat=[d[k]-d['none'] for d in reps if k in d and 'none' in d]
        hi=sum(1 for x in rat if x>0)
        print(f"  {k:28s} n={len(vals):2d} med {st.median(vals):6.3f}  min {min(vals):6.3f}  diff-vs-none med {st.median(rat) if rat else 0:+6.3f}  higher {hi}/{len(rat)}")
