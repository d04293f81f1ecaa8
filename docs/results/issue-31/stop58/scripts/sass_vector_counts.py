import re,sys,collections
text=open(sys.argv[1]).read()
for sec in re.split(r'^== ',text,flags=re.M)[1:]:
    name=sec.split('\n',1)[0]
    ins=[(int(m.group(1),16),m.group(2).strip()) for m in re.finditer(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);',sec)]
    idx=[i for i,(a,t) in enumerate(ins) if 'MUFU.RCP' in t]
    k=8 if 'old' in name else 4
    # vector 2 (steady): from the BRA before its first RCP to the first BRA after its last RCP
    first,last=idx[k],idx[2*k-1]
    s=max(i for i in range(first) if 'BRA' in ins[i][1])
    e=min(i for i in range(last,len(ins)) if 'BRA' in ins[i][1])
    body=[t for a,t in ins[s+1:e+1]]
    ops=collections.Counter(re.sub(r'^@!?U?P\w+\s+','',t).split()[0].split('.')[0] for t in body)
    print(name,'second vector, common path:',len(body),'instructions,',len(body)/4,'an element')
    print('  ',' '.join(f'{k}:{v}' for k,v in ops.most_common()))
