#!/usr/bin/env python3
"""Compare two StoreInterop manifests (see README.md).

Usage: compare.py A.json B.json [--ignore field,field,...] [--no-keys] [--max-report N]

Messages are matched by position (both lists are sorted by physicalOffset) and compared field by field;
`properties` maps are compared as maps. keyQueries are matched by (topic, key). Exit code 0 if equal
(apart from ignored fields), 1 otherwise. --ignore applies to message fields and to property names given
as properties.NAME (e.g. --ignore storeTimestamp,physicalOffset,msgId,storeSize).
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--ignore", default="")
    ap.add_argument("--no-keys", action="store_true", help="do not compare keyQueries")
    ap.add_argument("--max-report", type=int, default=10)
    args = ap.parse_args()
    ignore = {f for f in args.ignore.split(",") if f}
    ignore_props = {f.split(".", 1)[1] for f in ignore if f.startswith("properties.")}

    with open(args.a) as f:
        a = json.load(f)
    with open(args.b) as f:
        b = json.load(f)

    diffs = []

    def report(msg):
        diffs.append(msg)
        if len(diffs) <= args.max_report:
            print(msg)

    ma, mb = a["messages"], b["messages"]
    if len(ma) != len(mb):
        report(f"message count: {len(ma)} vs {len(mb)}")
    for n, (x, y) in enumerate(zip(ma, mb)):
        for k in sorted(set(x) | set(y)):
            if k in ignore:
                continue
            vx, vy = x.get(k), y.get(k)
            if k == "properties":
                vx = {p: v for p, v in (vx or {}).items() if p not in ignore_props}
                vy = {p: v for p, v in (vy or {}).items() if p not in ignore_props}
            if vx != vy:
                report(f"message #{n} ({x.get('topic')}/{x.get('queueId')}@{x.get('queueOffset')}) {k}: {vx!r} vs {vy!r}")

    if not args.no_keys:
        qa = {(q["topic"], q["key"]): q["physicalOffsets"] for q in a["keyQueries"]}
        qb = {(q["topic"], q["key"]): q["physicalOffsets"] for q in b["keyQueries"]}
        for tk in sorted(set(qa) | set(qb)):
            if qa.get(tk) != qb.get(tk):
                report(f"keyQuery {tk}: {qa.get(tk)} vs {qb.get(tk)}")

    print(f"{args.a} ({a.get('javaVersion')}, {len(ma)} messages, {len(a['keyQueries'])} key queries) vs "
          f"{args.b} ({b.get('javaVersion')}, {len(mb)} messages, {len(b['keyQueries'])} key queries): "
          + ("EQUAL" if not diffs else f"{len(diffs)} difference(s)")
          + (f" ignoring {sorted(ignore)}" if ignore else ""))
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
