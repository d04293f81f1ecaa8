# Nsight Compute's source page (CSV, SASS) of the named kernels as compact text: for each SASS line
# in address order, how often it ran, its stall samples and the largest stall reason. Lines that ran
# once a row a warp are marked R, once a tile T.
# Usage: python3 sass_lines.py source.csv ROWS_TIMES_WARPS name-prefix ...
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
per_row = int(sys.argv[2])
for name in sys.argv[3:]:
    start = next(k for k, r in enumerate(rows) if r and r[0] == 'Kernel Name' and r[1].split('(')[0] == name.split('(')[0]
                 and r[1].startswith(name))
    header = rows[start + 1]
    col = {h: k for k, h in enumerate(header)}
    stalls = [h for h in header if h.startswith('stall_') and '(Not' not in h]
    print(f'== {rows[start][1]}')
    for r in rows[start + 2:]:
        if r and r[0] == 'Kernel Name':
            break
        if len(r) < len(header):
            continue
        number = lambda c: float(r[col[c]].replace(',', '') or 0)
        count = int(number('Instructions Executed'))
        samples = number('Warp Stall Sampling (All Samples)')
        top = max(((s[6:], number(s)) for s in stalls), key=lambda kv: kv[1])
        mark = 'R' if count == per_row else ('T' if count in (2 * per_row, 2 * per_row - 16384, 2 * per_row - 8192) else ' ')
        print(f'{mark} {count:9d} {samples:7.0f} {top[0][:10]:10s} {r[1].strip()}')
