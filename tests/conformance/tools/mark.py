# Adds marks to cases: tools/mark.py differs|oxenstored|xen-4.20 < lines of
#   <reason> | <file-stem/case> <file-stem/case> ...
# replacing that key's existing marks on the named cases.
import sys, re, glob, os
key = sys.argv[1]
marks = {}
for line in sys.stdin:
    line = line.rstrip('\n')
    if not line.strip() or line.startswith('#'): continue
    reason, names = line.split('|', 1)
    for n in names.split():
        marks[n] = reason.strip()
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'cases'))
seen = set()
for f in sorted(glob.glob('*.xs')):
    stem = f[:-3]
    out = []
    lines = open(f).read().split('\n')
    i = 0
    while i < len(lines):
        l = lines[i]
        out.append(l)
        if l.startswith('case '):
            name = stem + '/' + l[5:].strip()
            # drop an existing mark of this key
            kept = []
            while i + 1 < len(lines) and lines[i+1].strip().startswith(('differs:', 'oxenstored:', 'xen-4.20:')):
                i += 1
                if name not in marks or not lines[i].strip().startswith(key + ':'):
                    kept.append(lines[i])
            if name in marks:
                kept.append('  %s: %s' % (key, marks[name]))
                seen.add(name)
            out.extend(sorted(kept))
        i += 1
    open(f, 'w').write('\n'.join(out))
missing = set(marks) - seen
if missing: print('unknown cases:', missing)
