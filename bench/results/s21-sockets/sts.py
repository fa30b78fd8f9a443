import sys, re, glob, statistics as st, collections
d=sys.argv[1]
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(d+'/*')):
    m=re.match(r'.*/(.*)-(\d+)\.(cli|srv)$', f)
    if not m: continue
    key=m.group(1)+'.'+m.group(3)
    txt=open(f).read()
    for name,med in re.findall(r'^\s+(\w+)\s+n=\s*\d+\s+p10=\s*[\d.]+\s+med=\s*([\d.]+)', txt, re.M):
        res[key][name].append(float(med))
    mm=re.search(r'median_us=([\d.]+)', txt)
    if mm: res[key]['oneway'].append(float(mm.group(1)))
    mm=re.search(r'^\s*2\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)', txt, re.M)
    if mm and m.group(3)=='cli': res[key]['t_typ'].append(float(mm.group(1)))
for k in res:
    print(f"{k:22s}", "  ".join(f"{n}={st.median(v):.3f}({len(v)})" for n,v in res[k].items() if n!='yield'))
