#!/usr/bin/env python3
"""bench-sqlite-modes: the journal modes as an application asks for them, through
Debian's SQLite as a new user meets it (make bench-sqlite-modes; issue 25's table).

Each mode is one database of ROWS rows (about 100 bytes each) and one
connection; a transaction updates 8 random rows (BEGIN, 8 UPDATEs, COMMIT),
synchronous=FULL.  Rounds interleave the modes (rotating their order), each mode
running SECS seconds a round; the table gives the median tx/s and the journal
mode SQLite reports.  Modes:

  atomio            vfs=atomio, no pragma
  atomio+MEMORY     vfs=atomio, PRAGMA journal_mode=MEMORY
  atomio+WAL        vfs=atomio, PRAGMA journal_mode=WAL
  unix WAL          the default VFS, PRAGMA journal_mode=WAL
  unix default      the default VFS, no pragma

Two clients, chosen with --client:
  python  Python's sqlite3 module.  Debian's python3 is built without
          enable_load_extension, so the extension is loaded through a
          connection of SQLite's own C API (ctypes, the same libsqlite3 the
          module uses): it registers the VFS for the whole process.
  cli     Debian's sqlite3 shell, fed TX transactions per run on its standard
          input (.load, then .open file:DB?vfs=atomio); tx/s over the shell's
          whole run, its start included.

Usage: bench-sqlite-modes.py [--client python|cli] [--dir DIR] [--rows N]
                             [--secs S] [--rounds R] [--tx N] [--ext PATH]
                             [--modes a,b,...]
"""
import argparse
import ctypes
import ctypes.util
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

MODES = [
    # name, vfs, pragma
    ("atomio", "atomio", None),
    ("atomio+MEMORY", "atomio", "MEMORY"),
    ("atomio+WAL", "atomio", "WAL"),
    ("unix WAL", None, "WAL"),
    ("unix default", None, None),
]


def load_extension(ext):
    """Register the atomio VFS in this process's libsqlite3 (the one _sqlite3 uses)."""
    lib = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    db = ctypes.c_void_p()
    if lib.sqlite3_open(b":memory:", ctypes.byref(db)) != 0:
        sys.exit("bench-sqlite-modes: sqlite3_open failed")
    lib.sqlite3_enable_load_extension(db, 1)
    err = ctypes.c_char_p()
    if lib.sqlite3_load_extension(db, ext.encode(), None, ctypes.byref(err)) != 0:
        sys.exit("bench-sqlite-modes: loading %s: %s" % (ext, err.value))
    lib.sqlite3_close(db)


def uri(path, vfs):
    return "file:%s%s" % (path, "?vfs=" + vfs if vfs else "")


def create(path, rows):
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, pad BLOB)")
    c.execute("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<?) "
              "INSERT INTO t SELECT i, 0, randomblob(100) FROM c", (rows,))
    c.commit()
    c.close()


class PyMode:
    def __init__(self, path, vfs, pragma, rows):
        self.rows = rows
        self.c = sqlite3.connect(uri(path, vfs), uri=True, isolation_level=None)
        if pragma:
            self.c.execute("PRAGMA journal_mode=%s" % pragma)
        self.c.execute("PRAGMA synchronous=FULL")
        self.reported = self.c.execute("PRAGMA journal_mode").fetchone()[0]

    def run(self, secs, rng):
        c, n = self.c, 0
        t0 = time.monotonic()
        while True:
            c.execute("BEGIN")
            for _ in range(8):
                c.execute("UPDATE t SET v = v + 1 WHERE id = ?", (rng.randrange(self.rows) + 1,))
            c.execute("COMMIT")
            n += 1
            t = time.monotonic()
            if t - t0 >= secs:
                return n / (t - t0)


class CliMode:
    def __init__(self, path, vfs, pragma, rows, ext, ntx):
        self.path, self.vfs, self.pragma, self.rows, self.ext, self.ntx = path, vfs, pragma, rows, ext, ntx
        self.reported = self.shell(["PRAGMA journal_mode;"]).strip().splitlines()[-1]

    def shell(self, sql):
        head = []
        if self.vfs:
            head += [".load %s" % os.path.splitext(self.ext)[0], ".open '%s'" % uri(self.path, self.vfs)]
        else:
            head += [".open '%s'" % self.path]
        if self.pragma:
            head.append("PRAGMA journal_mode=%s;" % self.pragma)
        head.append("PRAGMA synchronous=FULL;")
        p = subprocess.run(["sqlite3", ":memory:"], input="\n".join(head + sql) + "\n",
                           capture_output=True, text=True)
        if p.returncode or p.stderr:
            sys.exit("bench-sqlite-modes: sqlite3: %s" % p.stderr)
        return p.stdout

    def run(self, secs, rng):
        sql = []
        for _ in range(self.ntx):
            sql.append("BEGIN;")
            for _ in range(8):
                sql.append("UPDATE t SET v = v + 1 WHERE id = %d;" % (rng.randrange(self.rows) + 1))
            sql.append("COMMIT;")
        t0 = time.monotonic()
        self.shell(sql)
        return self.ntx / (time.monotonic() - t0)


def fs_of(path):
    best, typ = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, t = line.split()[:3]
            if path.startswith(mnt) and len(mnt) >= len(best):
                best, typ = mnt, t
    return "%s on %s" % (typ, best)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", default="python", choices=["python", "cli"])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--secs", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tx", type=int, default=3000, help="transactions per cli run")
    ap.add_argument("--ext", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "build", "atomio_sqlite.so"))
    ap.add_argument("--modes", default=",".join(m[0] for m in MODES))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    ext = os.path.abspath(a.ext)
    names = a.modes.split(",")
    modes = [m for m in MODES if m[0] in names]
    if a.client == "python":
        load_extension(ext)
    wd = tempfile.mkdtemp(prefix="atomio-bench-modes-", dir=a.dir)
    rng = random.Random(a.seed)
    try:
        runs = []
        for i, (name, vfs, pragma) in enumerate(modes):
            path = os.path.join(wd, "m%d.db" % i)
            create(path, a.rows)
            if a.client == "python":
                runs.append(PyMode(path, vfs, pragma, a.rows))
            else:
                runs.append(CliMode(path, vfs, pragma, a.rows, ext, a.tx))
        print("bench-sqlite-modes: %s client, SQLite %s, %d rows, 8-row update transactions, "
              "synchronous=FULL, one connection per mode, %s, %d rounds x %s, load %s"
              % (a.client, sqlite3.sqlite_version, a.rows, fs_of(wd), a.rounds,
                 "%.1f s" % a.secs if a.client == "python" else "%d tx" % a.tx,
                 open("/proc/loadavg").read().split()[0]), flush=True)
        tps = [[] for _ in modes]
        for r in range(a.rounds):
            for k in range(len(modes)):
                i = (k + r) % len(modes)
                x = runs[i].run(a.secs, rng)
                tps[i].append(x)
                print("  round %d %-14s %7.0f tx/s   (load %s)" % (r + 1, modes[i][0], x,
                      open("/proc/loadavg").read().split()[0]), flush=True)
        unix_wal = None
        for i, m in enumerate(modes):
            if m[0] == "unix WAL":
                unix_wal = statistics.median(tps[i])
        print("\n| opened as | journal mode SQLite reports | tx/s (median) | min-max | vs unix WAL |")
        print("|---|---|---|---|---|")
        for i, m in enumerate(modes):
            med = statistics.median(tps[i])
            print("| %s | %s | %.0f | %.0f-%.0f | %s |" % (m[0], runs[i].reported, med, min(tps[i]),
                  max(tps[i]), "%.2fx" % (med / unix_wal) if unix_wal else "-"))
        print("load average after the run: %s" % open("/proc/loadavg").read().strip())
    finally:
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
