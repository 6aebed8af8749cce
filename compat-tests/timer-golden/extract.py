#!/usr/bin/env python3
"""Cuts the golden timer files out of a stopped Java 5.3.3 broker's store and decodes them (see README.md).

Usage: extract.py <storePathRootDir> <outDir>

Writes to outDir:
  timercheck        config/timercheck, whole (the mapped checkpoint page)
  timermetrics      config/timermetrics, whole (fastjson, pretty)
  timerlog.head     timerlog/00000000000000000000 up to the end of the last unit written (a multiple of 52 bytes)
  commitlog.head    commitlog/00000000000000000000 up to the end of the last message written
  timerwheel.slots  every slot of timerwheel that is not all zero: index, decoded fields, the 32 raw bytes in hex
  decoded.txt       every field of the above, decoded, and the cross-checks that hold between them
Fails (exit 1) if a cross-check does not hold.
"""
import json
import os
import struct
import sys

UNIT = 52
SLOT = 32
SLOTS_TOTAL = 7 * 24 * 3600  # TimerMessageStore: TIMER_WHEEL_TTL_DAY * DAY_SECS, at timerPrecisionMs 1000
WHEEL_BYTES = SLOTS_TOTAL * 2 * SLOT
PRECISION_MS = 1000
MAGIC_NAMES = {1: "DEFAULT", 2: "ROLL", 4: "DELETE"}
MSG_MAGIC_V1 = 0xDAA320A7 - (1 << 32)
MSG_MAGIC_V2 = 0xDAA320A8 - (1 << 32)
BLANK_MAGIC = 0xCBD43194 - (1 << 32)


def java_hash(s):
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def magic_name(m):
    return "|".join(n for bit, n in sorted(MAGIC_NAMES.items()) if m & bit) or str(m)


def read_messages(data):
    """Walks a commit-log segment from 0: [(offset, size, fields)] until the data end."""
    out = []
    pos = 0
    while pos + 8 <= len(data):
        size, magic = struct.unpack_from(">ii", data, pos)
        if size <= 0 or magic == BLANK_MAGIC or magic not in (MSG_MAGIC_V1, MSG_MAGIC_V2):
            break
        p = pos + 8
        body_crc, queue_id, flag, queue_offset, phys_offset, sys_flag, born_ts = struct.unpack_from(">iiiqqiq", data, p)
        p += 4 + 4 + 4 + 8 + 8 + 4 + 8
        born_len = 20 if sys_flag & (1 << 4) else 8
        born_host = data[p:p + born_len]
        p += born_len
        (store_ts,) = struct.unpack_from(">q", data, p)
        p += 8
        store_len = 20 if sys_flag & (1 << 5) else 8
        store_host = data[p:p + store_len]
        p += store_len
        reconsume, prepared, body_len = struct.unpack_from(">iqi", data, p)
        p += 4 + 8 + 4
        body = data[p:p + body_len]
        p += body_len
        if magic == MSG_MAGIC_V2:
            (topic_len,) = struct.unpack_from(">h", data, p)
            p += 2
        else:
            topic_len = data[p]
            p += 1
        topic = data[p:p + topic_len].decode("utf-8")
        p += topic_len
        (props_len,) = struct.unpack_from(">h", data, p)
        p += 2
        props_raw = data[p:p + props_len].decode("utf-8")
        props = {}
        for pair in props_raw.split("\x02"):
            if "\x01" in pair:
                k, v = pair.split("\x01", 1)
                props[k] = v
        out.append((pos, size, {
            "queueId": queue_id, "queueOffset": queue_offset, "physicalOffset": phys_offset, "sysFlag": sys_flag,
            "bornTimestamp": born_ts, "storeTimestamp": store_ts, "bornHost": born_host.hex(),
            "storeHost": store_host.hex(), "body": body.decode("utf-8", "replace"), "topic": topic, "properties": props,
        }))
        pos += size
    return out, pos


def main():
    store, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    lines = []
    problems = []

    def check(cond, what):
        if not cond:
            problems.append(what)

    # -- config/timercheck
    with open(os.path.join(store, "config", "timercheck"), "rb") as f:
        check_bytes = f.read()
    with open(os.path.join(out, "timercheck"), "wb") as f:
        f.write(check_bytes)
    names = ["lastReadTimeMs", "lastTimerLogFlushPos", "lastTimerQueueOffset", "masterTimerQueueOffset",
             "dataVersion.stateVersion", "dataVersion.timestamp", "dataVersion.counter"]
    cp = dict(zip(names, struct.unpack_from(">7q", check_bytes, 0)))
    lines.append("== timercheck (%d bytes; the rest is zero: %s)" % (len(check_bytes), not any(check_bytes[56:])))
    for n in names:
        lines.append("  %-26s %d" % (n, cp[n]))

    # -- config/timermetrics
    with open(os.path.join(store, "config", "timermetrics"), "rb") as f:
        metrics_bytes = f.read()
    with open(os.path.join(out, "timermetrics"), "wb") as f:
        f.write(metrics_bytes)
    metrics = json.loads(metrics_bytes)
    lines.append("== timermetrics (%d bytes)" % len(metrics_bytes))
    lines.append("  " + json.dumps(metrics, sort_keys=True))

    # -- commitlog
    with open(os.path.join(store, "commitlog", "00000000000000000000"), "rb") as f:
        commit = f.read()
    messages, commit_end = read_messages(commit)
    with open(os.path.join(out, "commitlog.head"), "wb") as f:
        f.write(commit[:commit_end])
    by_offset = {m[0]: m for m in messages}
    lines.append("== commitlog.head (%d bytes, %d messages)" % (commit_end, len(messages)))
    for off, size, m in messages:
        p = m["properties"]
        lines.append("  @%d size=%d topic=%s queueId=%d queueOffset=%d storeTimestamp=%d keys=%s props=%s" % (
            off, size, m["topic"], m["queueId"], m["queueOffset"], m["storeTimestamp"], p.get("KEYS"),
            json.dumps(p, sort_keys=True, ensure_ascii=False)))

    # -- timerlog
    with open(os.path.join(store, "timerlog", "00000000000000000000"), "rb") as f:
        tl = f.read()
    units = []
    pos = 0
    while pos + UNIT <= len(tl):
        fields = struct.unpack_from(">iqiqiqiiq", tl, pos)
        if fields[0] == 0:
            break
        check(fields[0] == UNIT, "timerlog unit at %d has size %d" % (pos, fields[0]))
        units.append((pos, fields))
        pos += UNIT
    check(not any(tl[pos:]), "timerlog has bytes after its last unit at %d" % pos)
    with open(os.path.join(out, "timerlog.head"), "wb") as f:
        f.write(tl[:pos])
    lines.append("== timerlog.head (%d bytes, %d units of 52: size i32, prevPos i64, magic i32, enqueueTimeMs i64, "
                 "delayMs i32, commitLogOffset i64, commitLogSize i32, realTopicHash i32, reserved i64)" % (pos, len(units)))
    for pos_u, (size, prev, magic, enq, delay, off, sz, th, res) in units:
        m = by_offset.get(off)
        desc = "no message at that offset"
        if m is not None:
            p = m[2]["properties"]
            real = p.get("REAL_TOPIC")
            desc = "-> %s key=%s TIMER_OUT_MS=%s REAL_TOPIC=%s REAL_QID=%s%s" % (
                m[2]["topic"], p.get("KEYS"), p.get("TIMER_OUT_MS"), real, p.get("REAL_QID"),
                " TIMER_DEL_UNIQKEY=" + p["TIMER_DEL_UNIQKEY"] if "TIMER_DEL_UNIQKEY" in p else "")
            check(m[1] == sz, "unit @%d: size %d, the message's is %d" % (pos_u, sz, m[1]))
            check(java_hash(real) == th, "unit @%d: topic hash %d, hashCode(%s)=%d" % (pos_u, th, real, java_hash(real)))
            if not magic & 2:
                check(int(p["TIMER_OUT_MS"]) == enq + delay,
                      "unit @%d: enqueue+delay %d, TIMER_OUT_MS %s" % (pos_u, enq + delay, p["TIMER_OUT_MS"]))
        else:
            problems.append("unit @%d points at %d, where no message starts" % (pos_u, off))
        check(res == 0, "unit @%d: reserved %d" % (pos_u, res))
        lines.append("  @%-4d prevPos=%d magic=%d(%s) enqueueTimeMs=%d delayMs=%d (slot %d) commitLogOffset=%d size=%d "
                     "realTopicHash=%d reserved=%d %s" % (pos_u, prev, magic, magic_name(magic), enq, delay,
                                                          (enq + delay) // PRECISION_MS, off, sz, th, res, desc))

    # -- timerwheel
    with open(os.path.join(store, "timerwheel"), "rb") as f:
        wheel = f.read()
    check(len(wheel) == WHEEL_BYTES, "timerwheel has %d bytes, expected %d" % (len(wheel), WHEEL_BYTES))
    slot_lines = ["# non-zero slots of timerwheel (%d bytes = %d slots of 32 bytes: timeSec i64 (timeMs / "
                  "timerPrecisionMs), firstPos i64, lastPos i64, num i32, magic i32); slot index = timeSec %% %d"
                  % (len(wheel), len(wheel) // SLOT, SLOTS_TOTAL * 2),
                  "# index timeSec firstPos lastPos num magic raw32hex"]
    lines.append("== timerwheel.slots (non-zero slots)")
    unit_at = {u[0]: u[1] for u in units}
    zero = bytes(SLOT)
    for i in range(len(wheel) // SLOT):
        raw = wheel[i * SLOT:(i + 1) * SLOT]
        if raw == zero:
            continue
        t, first, last, num, magic = struct.unpack(">qqqii", raw)
        slot_lines.append("%d %d %d %d %d %d %s" % (i, t, first, last, num, magic, raw.hex()))
        lines.append("  slot %d: timeSec=%d firstPos=%d lastPos=%d num=%d magic=%d" % (i, t, first, last, num, magic))
        check(t % (SLOTS_TOTAL * 2) == i, "slot %d holds timeSec %d" % (i, t))
        # walk the chain from lastPos back through prevPos: every unit of the slot, newest first
        chain = []
        p = last
        while p != -1 and p in unit_at and len(chain) <= len(units):
            chain.append(p)
            p = unit_at[p][1]
        check(p == -1, "slot %d: chain from lastPos %d ends at %d" % (i, last, p))
        check(chain and chain[-1] == first, "slot %d: chain %s does not end at firstPos %d" % (i, chain, first))
        for up in chain:
            u = unit_at[up]
            check((u[3] + u[4]) // PRECISION_MS == t, "slot %d: unit @%d is due in second %d" % (i, up, (u[3] + u[4]) // 1000))
        net = sum(-1 if unit_at[up][2] & 4 else 1 for up in chain)
        check(net == num, "slot %d: num %d, its units count %d" % (i, num, net))
        lines.append("    units, newest first: %s (net count %d)" % (chain, net))
    with open(os.path.join(out, "timerwheel.slots"), "w") as f:
        f.write("\n".join(slot_lines) + "\n")

    if problems:
        lines.append("== PROBLEMS")
        lines.extend("  " + p for p in problems)
    with open(os.path.join(out, "decoded.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
