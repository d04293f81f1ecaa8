# The basic blocks of one function of nvdisasm's output between two addresses: each block's label,
# address, instruction count, memory / MUFU / barrier / double-precision operations and branches.
# Usage: python3 sass_blocks.py FILE.sass FUNCTION FROM_HEX TO_HEX
import collections, re, sys

lines = open(sys.argv[1]).read().split("\n")
func, lo, hi = sys.argv[2], int(sys.argv[3], 16), int(sys.argv[4], 16)
start = next(i for i, l in enumerate(lines) if l.startswith(func + ":"))
end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("//----")), len(lines))
blocks, cur = [], None
for l in lines[start:end]:
    label = re.match(r"^(\.L_x_\d+):", l)
    if label:
        cur = {"label": label.group(1), "ins": []}
        blocks.append(cur)
        continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", l)
    if m:
        if cur is None:
            cur = {"label": "entry", "ins": []}
            blocks.append(cur)
        cur["ins"].append((int(m.group(1), 16), m.group(2).strip()))
keys = ("LDG", "STG", "LDS", "STS", "MUFU", "BAR", "SHFL", "DADD", "DMUL", "DFMA", "F2F")
for b in blocks:
    if not b["ins"] or b["ins"][-1][0] < lo or b["ins"][0][0] > hi:
        continue
    counts, branches = collections.Counter(), []
    for _, text in b["ins"]:
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]
        if op.split(".")[0] in keys:
            counts[op] += 1
        if op.startswith("BRA"):
            branches.append(text)
    print(f"{b['label']:>8} {b['ins'][0][0]:05x} n={len(b['ins']):4d} " + " ".join(f"{k}:{v}" for k, v in counts.items())
          + ("  -> " + "; ".join(branches) if branches else ""))
