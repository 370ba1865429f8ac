#!/bin/bash
# Counts the identical runs of six or more lines shared between different server crates, or a
# server crate and `service` (issue 17's measure), with the `duplicates` tool of the
# developers' library: each row's runs, "+N more" included.
cd "${1:-.}"
duplicates --most 200 --seconds 120 | grep -v ' shape' | python3 -c '
import sys,re
tot=0
for l in sys.stdin:
    m=re.match(r"D\d+ (\S+):\S+ ~ (\S+):\S+(?: \(both added\))?(?: \(\+(\d+) more runs?\))?",l.strip())
    if not m: continue
    def crate(p):
        m=re.match(r"crates/([^/]+)/",p); return m.group(1) if m else None
    ca,cb=crate(m.group(1)),crate(m.group(2))
    srv=lambda c: c is not None and c.startswith("server-")
    if ca==cb: continue
    if not ((srv(ca) and srv(cb)) or (srv(ca) and cb=="service") or (srv(cb) and ca=="service")): continue
    n=1+int(m.group(3) or 0); tot+=n
    print(n, l.strip())
print("total runs:",tot)
'
