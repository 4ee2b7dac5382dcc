#!/usr/bin/env python3
"""Copy the format spec comment at the top of src/format.h into docs/FORMAT.md
(the first ``` block).  t_format_doc checks that the two agree."""
import re, sys, os
root = os.path.join(os.path.dirname(__file__), '..')
h = open(os.path.join(root, 'src/format.h')).read()
a = h.index('/*\n') + 3
e = h.index('*/')
lines = []
for l in h[a:e].split('\n'):
    if l.startswith(' * '):
        l = l[3:]
    elif l.startswith(' *'):
        l = l[2:]
    lines.append(l)
text = '\n'.join(lines).rstrip()
p = os.path.join(root, 'docs/FORMAT.md')
md = open(p).read()
s = md.index('```\n') + 4
t = md.index('\n```', s)
open(p, 'w').write(md[:s] + text + md[t:])
