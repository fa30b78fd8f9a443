import sys,re,statistics as st
d={}
for f in sys.argv[1:]:
  for l in open(f):
    m=re.match(r'(\w+) (\w+) typ ([\d.]+) srv: req p10/p50/p90 (\d+)/(\d+)/(\d+) ack p10/p50/p90 (\d+)/(\d+)/(\d+) ticks cli: req p10/p50/p90 (\d+)/(\d+)/(\d+) ack p10/p50/p90 (\d+)/(\d+)/(\d+)',l)
    if not m: continue
    t,test=m.group(1),m.group(2); v=[float(x) for x in m.groups()[2:]]
    e=d.setdefault((test,t),{'typ':[],'req':[],'ack':[],'tot':[]})
    e['typ'].append(v[0]); e['req']+= [v[2],v[8]]; e['ack']+=[v[5],v[11]]; e['tot']+=[v[2]+v[5],v[8]+v[11]]
ghz=2.445
for k in sorted(d):
  e=d[k]
  print('%-13s %s n=%d typ %.2f | responder p50 %4.0f ticks (%3.0f ns) | completer p50 %4.0f (%3.0f ns) | sum %4.0f (%3.0f ns)'%(k[0],k[1],len(e['typ']),st.median(e['typ']),st.median(e['req']),st.median(e['req'])/ghz,st.median(e['ack']),st.median(e['ack'])/ghz,st.median(e['tot']),st.median(e['tot'])/ghz))
