# Round 188's Nsight Compute source page (`ncu -i r188.ncu-rep --page source --csv --print-source sass`,
# source.csv) summed by how often each SASS line ran: once a row a warp (524288 = 16384 rows x 32
# warps), once a tile, ...; per kernel the instructions and stall samples of each class and the
# stall reasons of the once-a-row code, then the lines with the most samples.
# Usage: python3 ncu_rows.py source.csv [kernel-name-prefix ...]
import collections
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
names = sys.argv[2:] or ['lossjit_kernel', 'lossjit_kernel_p6', 'lossjit_kernel_p7', 'void early_kernel<(int)4>']


def section(name):
    start = next(k for k, r in enumerate(rows) if r and r[0] == 'Kernel Name' and r[1].split('(')[0] == name.split('(')[0]
                 and r[1].startswith(name))
    header = rows[start + 1]
    col = {h: k for k, h in enumerate(header)}
    stalls = [h for h in header if h.startswith('stall_') and '(Not' not in h]
    lines = []
    for r in rows[start + 2:]:
        if r and r[0] == 'Kernel Name':
            break
        if len(r) < len(header):
            continue
        number = lambda c: float(r[col[c]].replace(',', '') or 0)
        lines.append((r[1].strip(), int(number('Instructions Executed')), number('Warp Stall Sampling (All Samples)'),
                      {s[6:]: number(s) for s in stalls}))
    return lines


for name in names:
    lines = section(name)
    total = sum(l[2] for l in lines)
    print(f'== {name}: {sum(l[1] for l in lines) / 1e6:.1f}M warp instructions, {total:.0f} stall samples')
    by_count = collections.defaultdict(lambda: [0, 0, 0.0])
    for text, count, samples, _ in lines:
        by_count[count][0] += 1
        by_count[count][1] += count
        by_count[count][2] += samples
    for count, (n, executed, samples) in sorted(by_count.items(), key=lambda kv: -kv[1][2])[:5]:
        print(f'   ran {count:8d} times: {n:4d} lines, {executed / 1e6:6.1f}M instructions, {samples:6.0f} samples')
    per_row = collections.Counter()
    for text, count, samples, reasons in lines:
        if count == 524288:
            per_row.update(reasons)
    print('   once a row a warp, by stall reason: ' + ', '.join(f'{k} {v:.0f}' for k, v in per_row.most_common(6)))
    for text, count, samples, reasons in sorted(lines, key=lambda l: -l[2])[:6]:
        top = max(reasons.items(), key=lambda kv: kv[1])
        print(f'   {samples:6.0f} samples ({top[0]} {top[1]:.0f}), ran {count:8d}: {text[:70]}')
