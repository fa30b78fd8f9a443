import sys,os,time,collections
# samp.py SPID CPID INTERVAL_MS: sample the last CPU of each thread until CPID exits
spid,cpid,iv=int(sys.argv[1]),int(sys.argv[2]),float(sys.argv[3])/1000
def threads(p):
    try: return sorted(int(t) for t in os.listdir('/proc/%d/task'%p))
    except: return []
def cpu(p,t):
    try:
        s=open('/proc/%d/task/%d/stat'%(p,t)).read(); f=s[s.rfind(')')+2:].split()
        return int(f[36]), f[0]
    except: return None
def sst(p,t):
    try: return open('/proc/%d/task/%d/schedstat'%(p,t)).read().split()
    except: return None
combo=collections.Counter(); last={}
while os.path.exists('/proc/%d'%cpid):
    ts=[(p,t) for p in (cpid,spid) for t in threads(p)]
    # names: c-app c-prog s-app s-prog
    row=[]
    for p,t in ts:
        c=cpu(p,t)
        if c: row.append('%s%d%s'%('c' if p==cpid else 's', 0 if t==p else 1, ':%d%s'%(c[0],c[1])))
        s=sst(p,t)
        if s: last[(p,t)]=s
    combo[' '.join(row)]+=1
    time.sleep(iv)
for k,v in combo.most_common(6): print('  place %4d  %s'%(v,k))
for (p,t),s in sorted(last.items()):
    print('  sched %s%d run_ms=%.1f wait_ms=%.1f slices=%s'%('c' if p==cpid else 's', 0 if t==p else 1, int(s[0])/1e6, int(s[1])/1e6, s[2]))
