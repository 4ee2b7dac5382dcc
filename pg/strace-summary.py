#!/usr/bin/env python3
"""pg/strace-summary.py DIR DATADIR: summarize pg/strace.sh's traces.

DIR holds trace.PID (strace -ff -y -s 16 output, one file per process) and
roles.raw (ps samples: "PID ARGS").  Every call on a path under
DATADIR/base/ or DATADIR/global/ is counted by (call, detail, kind of file)
and by the role of the process that made it; printed as a Markdown table.
Kinds: main, fsm, vm, init (relation forks), map (pg_filenode.map),
relcache (pg_internal.init*), control (pg_control), dir (a directory),
other.  Details: write sizes (and "zeros" when the data shown starts with
16 zero bytes: an extension page), open flags, lseek whence,
sync_file_range flags, fallocate mode, mmap protection.
"""
import collections
import os
import re
import sys

d, data = sys.argv[1], os.path.realpath(sys.argv[2])
roles = {}


KNOWN = ('checkpointer', 'background writer', 'walwriter', 'autovacuum launcher', 'autovacuum worker',
         'startup', 'logical replication launcher', 'archiver', 'parallel worker')


def role_of(args):
    """ps's args of a PostgreSQL process: its role, or None."""
    a = args.strip()
    if a.startswith('/usr/lib/postgresql/15/bin/postgres') or re.match(r'^\S*postgres -D', a):
        return 'postmaster?'  # the postmaster, or a child that has not set its title yet
    if not a.startswith('postgres: '):
        return None
    r = a[len('postgres: '):]
    for k in KNOWN:
        if r.startswith(k):
            return k
    return 'backend'


# 1. the server's log: log_line_prefix '%m [%p] %b ' names every process
#    that logged a line (log_connections, log_autovacuum_min_duration=0)
LOGTYPES = {'client backend': 'backend', 'postmaster': 'postmaster'}
with open(os.path.join(d, 'server.log'), errors='replace') as f:
    for line in f:
        m = re.search(r'\[(\d+)\] ([a-z][a-z ]*?) (?:LOG|WARNING|ERROR|FATAL|PANIC|DEBUG\d|NOTICE):', line)
        if m:
            t = m.group(2)
            roles[m.group(1)] = LOGTYPES.get(t, t)
# 2. ps samples every 0.1 s, for the processes that logged nothing
with open(os.path.join(d, 'roles.raw'), errors='replace') as f:
    for line in f:
        parts = line.strip().split(None, 1)
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        r = role_of(parts[1])
        if not r:
            continue
        old = roles.get(parts[0])
        if old is None or old == 'postmaster?' and r != 'postmaster?':
            roles[parts[0]] = r
for pid, r in roles.items():
    if r == 'postmaster?':
        roles[pid] = 'child?'  # never seen with a title of its own: a short-lived child

under = (data + '/base', data + '/global')


def kind(path):
    p = path
    if p.startswith(data + '/'):
        p = p[len(data) + 1:]
    if not (p.startswith('base') or p.startswith('global')):
        return None
    name = p.rsplit('/', 1)[-1]
    if p in ('base', 'global') or re.fullmatch(r'base/\d+', p):
        return 'dir'
    m = re.fullmatch(r'\d+(_fsm|_vm|_init)?(\.\d+)?', name)
    if m:
        return {None: 'main', '_fsm': 'fsm', '_vm': 'vm', '_init': 'init'}[m.group(1)]
    if name == 'pg_filenode.map':
        return 'map'
    if name.startswith('pg_internal.init'):
        return 'relcache'
    if name == 'pg_control':
        return 'control'
    if name.startswith('t') and re.fullmatch(r't\d+_\d+.*', name):
        return 'temp-rel'
    return 'other'


call_re = re.compile(r'^(?:\d\d:\d\d:\d\d\.\d+ )?(\w+)\((.*)\) += (.*)$')
fdpath_re = re.compile(r'^-?\d+<([^>]*)>')
count = collections.Counter()
by_role = collections.defaultdict(collections.Counter)
seen_roles = set()

for fn in sorted(os.listdir(d)):
    if not fn.startswith('trace.'):
        continue
    pid = fn.split('.', 1)[1]
    role = roles.get(pid, 'child?')
    with open(os.path.join(d, fn), errors='replace') as f:
        for line in f:
            m = call_re.match(line.rstrip('\n'))
            if not m:
                continue
            call, args, ret = m.groups()
            path = None
            detail = ''
            fm = fdpath_re.match(args)
            if call in ('openat', 'open', 'unlink', 'unlinkat', 'rename', 'renameat', 'renameat2', 'truncate',
                        'newfstatat', 'stat', 'lstat', 'statx', 'access', 'faccessat2', 'mkdir', 'mkdirat',
                        'rmdir', 'link', 'symlink', 'readlink', 'chmod', 'fchmodat'):
                strs = re.findall(r'"((?:[^"\\]|\\.)*)"', args)
                if not strs:
                    continue
                p = strs[0]
                base_m = fdpath_re.match(args) if call.endswith('at') or call in ('statx', 'newfstatat', 'faccessat2') else None
                if not p.startswith('/'):
                    cwd = base_m.group(1) if base_m else data
                    p = os.path.normpath(os.path.join(cwd, p))
                path = p
                if call in ('openat', 'open'):
                    fl = re.search(r'(O_[A-Z_|0-9]+)', args)
                    detail = fl.group(1).replace('|O_CLOEXEC', '') if fl else ''
                    if ret.startswith('-1'):
                        detail += ' ->' + ret.split()[1]
                elif call in ('rename', 'renameat', 'renameat2'):
                    to = strs[1] if len(strs) > 1 else ''
                    detail = 'to ' + (kind(os.path.normpath(os.path.join(data, to))) or to)
                elif ret.startswith('-1'):
                    detail = '->' + ret.split()[1]
            elif fm:
                path = fm.group(1)
                rest = args[fm.end():]
                if call in ('pwrite64', 'write', 'pwritev', 'pwritev2', 'writev'):
                    size = re.findall(r', (\d+)', rest)
                    sz = size[0] if size else '?'
                    zeros = rest.startswith(', "\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0"')
                    detail = sz + (' zeros' if zeros else '')
                elif call in ('pread64', 'read', 'preadv', 'preadv2', 'readv'):
                    size = re.findall(r', (\d+)', rest)
                    detail = size[0] if size else '?'
                elif call == 'lseek':
                    detail = rest.split(',')[-1].strip()
                elif call == 'sync_file_range':
                    detail = rest.split(',')[-1].strip()
                elif call == 'fallocate':
                    detail = 'mode ' + rest.split(',')[1].strip()
                elif call == 'ftruncate':
                    detail = 'to 0' if rest.strip(', ').split(',')[0] == '0' else 'to n'
                elif call in ('fsync', 'fdatasync', 'close', 'fstat', 'newfstatat', 'fadvise64', 'flock', 'fcntl'):
                    detail = ''
            elif call == 'mmap':
                mm = re.search(r', (PROT_[A-Z_|]+), (MAP_[A-Z_|]+), (-?\d+<[^>]*>)', args)
                if not mm:
                    continue
                path = fdpath_re.match(mm.group(3)).group(1)
                detail = mm.group(1) + ' ' + mm.group(2)
            else:
                continue
            if not path:
                continue
            path = os.path.normpath(path)
            if not path.startswith(under):
                continue
            k = kind(path)
            if k is None:
                continue
            key = (call, detail, k)
            count[key] += 1
            by_role[key][role] += 1
            seen_roles.add(role)

order = ['postmaster', 'startup', 'backend', 'parallel worker', 'checkpointer', 'background writer', 'walwriter',
         'autovacuum launcher', 'autovacuum worker', 'logical replication launcher', 'child?']
cols = [r for r in order if r in seen_roles]
print('| call | detail | file | ' + ' | '.join(cols) + ' |')
print('|---|---|---|' + '---|' * len(cols))
for key in sorted(count, key=lambda k: (k[0], k[2], k[1])):
    call, detail, k = key
    print('| %s | %s | %s | %s |' % (call, detail, k, ' | '.join(str(by_role[key].get(r, '')) for r in cols)))
