import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hi = next(i for i,r in enumerate(rows) if r and r[0]=='Address')
h = rows[hi]; data = rows[hi+1:]
ix = {n:i for i,n in enumerate(h)}
base = int(data[0][0],16)
out = open(sys.argv[2],'w')
for r in data:
    ex = int(float(r[ix['Instructions Executed']] or 0)); s = int(float(r[ix['Warp Stall Sampling (All Samples)']] or 0))
    if ex == 0 and s == 0: continue
    out.write(f"{int(r[0],16)-base:6x} {s:6d} {ex:9d} {r[ix['Source']].strip()}\n")
out.close()
lines=[l.split(None,3) for l in open(sys.argv[2])]
runs=[]
for off,s,ex,src in lines:
    s=int(s); ex=int(ex)
    if runs and runs[-1][2]==ex: runs[-1][1]+=s; runs[-1][3]+=1; runs[-1][5]=off
    else: runs.append([off,s,ex,1,src.strip()[:50],off])
tot=sum(int(l[1]) for l in lines)
print('total samples', tot)
stalls = [c for c in h if c.startswith('stall_') and 'Not Issued' not in c]
agg = {s: sum(float(r[ix[s]] or 0) for r in data) for s in stalls}
print(sorted([(round(100*v/tot,1), s) for s,v in agg.items()], reverse=True)[:8])
for r in runs:
    if r[3]>3 or r[1]>500: print(r[0], r[5], 'samples', r[1], f'{100*r[1]/tot:.1f}%', 'exec', r[2], 'n', r[3], r[4])
