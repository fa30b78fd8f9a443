import sys,re,statistics as st
for f in sys.argv[1:]:
    d={}; fl=[]
    for l in open(f):
        if l.startswith('#'): print(l.strip()); continue
        m=re.match(r'rep (\d+) floor ([\d.]+)',l)
        if m: fl.append(float(m.group(2))); continue
        p=l.split()
        t=p[2]
        for kv in p[3:]:
            k,v=kv.split('=')
            try: d.setdefault((t,k),[]).append(float(v))
            except: pass
    fm=st.median(fl) if fl else 0
    print(f, 'floor median %.2f (%.2f-%.2f)'%(fm,min(fl),max(fl)))
    for (t,k),v in sorted(d.items()):
        print('  %-8s %s n=%d median %.2f (%.2f-%.2f) ratio %.2fx'%(t,k,len(v),st.median(v),min(v),max(v),st.median(v)/fm))
