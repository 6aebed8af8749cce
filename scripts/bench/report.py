#!/usr/bin/env python3
"""Collects the per-workload results of one scripts/bench.sh run into one JSON file and prints the
side-by-side table with the ratio ours/Java and the issue's goals.

A master/slave result (f) or a DLedger-mode group (h) that the load generator found invalid (the slave does not hold the
master's data, a send answered other than SEND_OK, a failed send) is marked INVALID in the table, gets
no ratios, and makes this script exit with status 1 after everything is written.

usage: report.py RUN_DIR RESULTS_JSON SYSTEMS   (SYSTEMS: comma list, the first is ours)
"""
import json
import os
import sys

run_dir, results_path, systems = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
ours, others = systems[0], systems[1:]

WORKLOADS = {
    "a": "a  sync 128 B x64 thr",
    "b": "b  async 1 KiB max rate",
    "a-lean": "a' sync 128 B x64, broker-load",
    "b-lean": "b' async 1 KiB, broker-load",
    "m": "m  fixed rate 1 KiB, broker-load",
    "n": "n  1,000 connections, broker-load",
    "o": "o  1,000 topics x 8 queues, broker-load",
    "p": "p  8 consumer groups, broker-load",
    "q": "q  catch-up from disk, broker-load",
    "c": "c  batch 16x1 KiB x64 thr",
    "c-lean": "c' batch 16x1 KiB x64, broker-load",
    "d": "d  SYNC_FLUSH 1 KiB x64",
    "f0": "f0 ASYNC_MASTER 1 KiB x64",
    "f0-lean": "f0' ASYNC_MASTER 1 KiB x64, broker-load",
    "f": "f  SYNC_MASTER+slave 1 KiB x64",
    "e": "e  name server, Java client",
    "e-lean": "e' name server, routeload",
    "g": "g  DLedger 3 members 1 KiB x64",
    "h": "h  DLedger-mode brokers 1 KiB x64",
    "i": "i  gRPC local proxy 1 KiB async",
    "j": "j  pop via Java cluster proxy 1 KiB",
    "k": "k  timer messages 128 B",
}


def get(d, path):
    for key in path.split("."):
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def kb_to_mib(v):
    return None if v is None or v < 0 else v / 1024.0


def other(r, own):
    """How busy the server's core was with anything but the server (other processes, interrupts), in
    cores: near 0 on a quiet machine; large values mean the run was disturbed."""
    busy, mine = get(r, "server_core_busy"), get(r, own)
    return None if busy is None or mine is None else max(0.0, busy - mine)


# The single-broker rows by label: BROKER_ROWS, FIXED_RATE_ROWS and CATCH_UP_ROWS pick from them.
ROW = {
    "rate asked (msg/s)": lambda r: get(r, "rate"),
    "backlog (messages)": lambda r: get(r, "backlog_messages"),
    "caught up after (s)": lambda r: get(r, "caught_up_s"),
    "backlog left at window end": lambda r: get(r, "backlog_left_at_window_end"),
    "send TPS (msg/s)": lambda r: get(r, "send_tps"),
    "consume TPS (msg/s)": lambda r: get(r, "consume_tps"),
    "send p50 (ms)": lambda r: get(r, "send_latency_ms.p50"),
    "send p99 (ms)": lambda r: get(r, "send_latency_ms.p99"),
    "send p99.9 (ms)": lambda r: get(r, "send_latency_ms.p999"),
    "send p99.99 (ms)": lambda r: get(r, "send_latency_ms.p9999"),
    "send max (ms)": lambda r: get(r, "send_latency_ms.max"),
    "send p99.9 uncorrected (ms)": lambda r: get(r, "send_service_ms.p999"),
    "e2e p50 (ms)": lambda r: get(r, "e2e_ms.p50"),
    "e2e p99 (ms)": lambda r: get(r, "e2e_ms.p99"),
    "e2e p99.9 (ms)": lambda r: get(r, "e2e_ms.p999"),
    "e2e p99.99 (ms)": lambda r: get(r, "e2e_ms.p9999"),
    "broker CPU s / 1M msg": lambda r: get(r, "broker_cpu_s_per_million"),
    "broker CPU (cores)": lambda r: get(r, "broker_cpu_util"),
    "loadgen CPU (cores)": lambda r: get(r, "loadgen_cpu_util"),
    "other work on server core": lambda r: other(r, "broker_cpu_util"),
    "broker peak RSS (MiB)": lambda r: kb_to_mib(get(r, "broker_vmhwm_kb")),
    "broker peak anon RSS (MiB)": lambda r: kb_to_mib(get(r, "broker_peak_anon_kb")),
    "send failed / not OK": lambda r: None if r is None else f"{r['send_failed']}/{r['send_not_ok']}",
    "missing after drain": lambda r: get(r, "missing_after_drain"),
}
AT_MOST_THIRD, AT_MOST_TENTH = ("<=", 1 / 3), ("<=", 0.1)


def pick(*labels):
    """(label, extractor, goal) rows from ROW; a label may come as (label, goal), where goal =
    (">=", 3) or ("<=", 1/3) on ours/java."""
    out = []
    for item in labels:
        label, goal = item if isinstance(item, tuple) else (item, None)
        out.append((label, ROW[label], goal))
    return out


BROKER_ROWS = pick(
    "send TPS (msg/s)", "send p50 (ms)", "send p99 (ms)", ("send p99.9 (ms)", AT_MOST_TENTH),
    "e2e p50 (ms)", "e2e p99 (ms)", "consume TPS (msg/s)", ("broker CPU s / 1M msg", AT_MOST_THIRD),
    "broker CPU (cores)", "loadgen CPU (cores)", "other work on server core",
    ("broker peak RSS (MiB)", AT_MOST_TENTH), "broker peak anon RSS (MiB)", "send failed / not OK",
    "missing after drain")
# m: one fixed rate for both; latencies from each send's scheduled time (coordinated omission corrected)
FIXED_RATE_ROWS = pick(
    "rate asked (msg/s)", "send TPS (msg/s)", "consume TPS (msg/s)", "send p50 (ms)", "send p99 (ms)",
    ("send p99.9 (ms)", AT_MOST_TENTH), "send p99.99 (ms)", "send max (ms)", "send p99.9 uncorrected (ms)",
    "e2e p50 (ms)", "e2e p99 (ms)", "e2e p99.9 (ms)", "e2e p99.99 (ms)", "broker CPU s / 1M msg",
    "broker CPU (cores)", "loadgen CPU (cores)", "other work on server core", "broker peak RSS (MiB)",
    "send failed / not OK", "missing after drain")
# q: a consumer catching up a backlog evicted from the page cache while senders go on at m's rate
CATCH_UP_ROWS = pick(
    "backlog (messages)", "consume TPS (msg/s)", "caught up after (s)", "backlog left at window end",
    "rate asked (msg/s)", "send TPS (msg/s)", "send p50 (ms)", "send p99 (ms)", ("send p99.9 (ms)", AT_MOST_TENTH),
    "broker CPU (cores)", "loadgen CPU (cores)", "broker peak RSS (MiB)", "send failed / not OK")
NO_RATIO_FIXED_RATE = {"rate asked (msg/s)", "send failed / not OK"}
SATURATION = {"b", "c", "f", "h", "a-lean", "b-lean", "c-lean", "f0-lean", "n", "o", "p"}  # the workloads where "throughput at least 3x" applies
REPLICATED = {"f": "f0"}  # master/slave workloads and their ASYNC_MASTER baseline (same load, no slave)
SYNC_VS_ASYNC_GOAL = 0.8  # our SYNC_MASTER throughput within 20 % of our ASYNC_MASTER


def not_ok_whole_run(r):
    if r is None or "send_not_ok_whole_run" not in r:
        return None
    by = r.get("send_not_ok_by_status_whole_run") or {}
    return str(r["send_not_ok_whole_run"]) + ("" if not by else " (" + ", ".join(f"{k} {v}" for k, v in by.items()) + ")")


def lag_kib(v):
    return None if v is None or v < 0 else v / 1024.0  # -1: a broker did not answer


def slave_check(r):
    rep = get(r, "replication")
    if rep is None:
        return None
    m, s = rep.get("master_commitlog_max_offset"), rep.get("slave_commitlog_max_offset")
    return f"= master ({m:,} B)" if rep.get("slave_holds_master_data") else f"MISMATCH {s} vs {m}"


def validity(r):
    if r is None:
        return None
    if r.get("valid", True):
        return "yes"
    return "INVALID"


# the master/slave workload: the slave's costs next to the master's; CPU and RSS goals on the pair
REPLICATED_ROWS = [
    ("valid (slave verified, all SEND_OK)", validity, None),
    ("send TPS (msg/s)", lambda r: get(r, "send_tps"), (">=", 3)),
    ("send p50 (ms)", lambda r: get(r, "send_latency_ms.p50"), None),
    ("send p99 (ms)", lambda r: get(r, "send_latency_ms.p99"), None),
    ("send p99.9 (ms)", lambda r: get(r, "send_latency_ms.p999"), ("<=", 0.1)),
    ("e2e p50 (ms)", lambda r: get(r, "e2e_ms.p50"), None),
    ("e2e p99 (ms)", lambda r: get(r, "e2e_ms.p99"), None),
    ("consume TPS (msg/s)", lambda r: get(r, "consume_tps"), None),
    ("master CPU s / 1M msg", lambda r: get(r, "broker_cpu_s_per_million"), None),
    ("slave CPU s / 1M msg", lambda r: get(r, "slave_cpu_s_per_million"), None),
    ("master+slave CPU s / 1M msg", lambda r: get(r, "pair_cpu_s_per_million"), ("<=", 1 / 3)),
    ("master+slave CPU (cores)", lambda r: get(r, "pair_cpu_util"), None),
    ("loadgen CPU (cores)", lambda r: get(r, "loadgen_cpu_util"), None),
    ("other work on server core", lambda r: other(r, "pair_cpu_util"), None),
    ("master peak RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_vmhwm_kb")), ("<=", 0.1)),
    ("slave peak RSS (MiB)", lambda r: kb_to_mib(get(r, "slave_vmhwm_kb")), ("<=", 0.1)),
    ("master peak anon RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_peak_anon_kb")), None),
    ("slave peak anon RSS (MiB)", lambda r: kb_to_mib(get(r, "slave_peak_anon_kb")), None),
    ("send failed / not OK", lambda r: None if r is None or "send_failed" not in r else f"{r['send_failed']}/{r['send_not_ok']}", None),
    ("not SEND_OK, whole run", not_ok_whole_run, None),
    ("slave behind at window end (KiB, <=)", lambda r: lag_kib(get(r, "replication.slave_lag_bytes_at_window_end")), None),
    ("slave commit log at the end", slave_check, None),
    ("missing after drain", lambda r: get(r, "missing_after_drain"), None),
]
# rows whose ratio ours/Java means nothing
NO_RATIO = {"slave behind at window end (KiB, <=)"}
# what SYNC_MASTER adds over the same load on an ASYNC_MASTER without a slave, per system
SYNC_VS_ASYNC_ROWS = [
    ("TPS SYNC/ASYNC_MASTER", lambda f, b: ratio(get(f, "send_tps"), get(b, "send_tps"))),
    ("send p50 added (ms)", lambda f, b: diff(get(f, "send_latency_ms.p50"), get(b, "send_latency_ms.p50"))),
    ("send p99 added (ms)", lambda f, b: diff(get(f, "send_latency_ms.p99"), get(b, "send_latency_ms.p99"))),
    ("send p99.9 added (ms)", lambda f, b: diff(get(f, "send_latency_ms.p999"), get(b, "send_latency_ms.p999"))),
    ("CPU s / 1M added (pair - lone)", lambda f, b: diff(get(f, "pair_cpu_s_per_million"), get(b, "broker_cpu_s_per_million"))),
]


def diff(a, b):
    return a - b if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
NAMESRV_ROWS = [
    ("queries/s", lambda r: get(r, "qps"), None),
    ("query p50 (ms)", lambda r: get(r, "latency_ms.p50"), None),
    ("query p99 (ms)", lambda r: get(r, "latency_ms.p99"), None),
    ("name server CPU s / 1M", lambda r: get(r, "server_cpu_s_per_million"), None),
    ("name server CPU (cores)", lambda r: get(r, "server_cpu_util"), None),
    ("loadgen CPU (cores)", lambda r: get(r, "loadgen_cpu_util"), None),
    ("other work on server core", lambda r: other(r, "server_cpu_util"), None),
    ("name server peak RSS (MiB)", lambda r: kb_to_mib(get(r, "server_vmhwm_kb")), None),
    ("failed queries", lambda r: get(r, "queries_failed"), None),
]


# the gRPC front (i): one process (ours: mqbroker --enable-proxy; Java: broker + proxy in one JVM)
GRPC_ROWS = [
    ("send TPS (msg/s)", lambda r: get(r, "send_tps"), None),
    ("send p50 (ms)", lambda r: get(r, "send_latency_ms.p50"), None),
    ("send p99 (ms)", lambda r: get(r, "send_latency_ms.p99"), None),
    ("send p99.9 (ms)", lambda r: get(r, "send_latency_ms.p999"), ("<=", 0.1)),
    ("receive+ack TPS (msg/s)", lambda r: get(r, "consume_tps"), None),
    ("e2e p50 (ms)", lambda r: get(r, "e2e_ms.p50"), None),
    ("e2e p99 (ms)", lambda r: get(r, "e2e_ms.p99"), None),
    ("consumed / sent, whole run", lambda r: None if r is None or "received_total" not in r
     else f"{r['received_total']:,}/{r['expected_total']:,}", None),
    ("redelivered / ack failed", lambda r: None if r is None or "redelivered_total" not in r
     else f"{r['redelivered_total']}/{r['ack_failed_total']}", None),
    ("server CPU us / msg sent or consumed", lambda r: get(r, "broker_cpu_us_per_op"), ("<=", 1 / 3)),
    ("server CPU us / msg sent", lambda r: get(r, "broker_cpu_s_per_million"), None),
    ("server CPU (cores)", lambda r: get(r, "broker_cpu_util"), None),
    ("loadgen CPU (cores)", lambda r: get(r, "loadgen_cpu_util"), None),
    ("other work on server core", lambda r: other(r, "broker_cpu_util"), None),
    ("server peak RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_vmhwm_kb")), ("<=", 0.1)),
    ("server peak anon RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_peak_anon_kb")), None),
    ("send failed", lambda r: get(r, "send_failed"), None),
    ("missing after drain", lambda r: get(r, "missing_after_drain"), None),
]
NO_RATIO_GRPC = {"consumed / sent, whole run", "redelivered / ack failed", "other work on server core"}

# j: pop through Java's proxy in cluster mode; the goal for it, printed with the table
POP_GOAL = ("Pop receive/ack throughput and end-to-end latency through the same Java proxy, ours against Java 5.3.3"
            " (broker on the server core, proxy and clients on the other); goals: throughput >= 3x, CPU per message <= 1/3")
# the broker's figures as i's, the goals on pop throughput and the broker's CPU per message; then the proxy's
# (the same program in front of both, on the client core: when it or the client core is saturated, the
# broker's throughput is not what limited the run)
POP_ROWS = [
    ("send TPS (msg/s)", lambda r: get(r, "send_tps"), None),
    ("send p50 (ms)", lambda r: get(r, "send_latency_ms.p50"), None),
    ("send p99 (ms)", lambda r: get(r, "send_latency_ms.p99"), None),
    ("receive+ack TPS (msg/s)", lambda r: get(r, "consume_tps"), (">=", 3)),
    ("e2e p50 (ms)", lambda r: get(r, "e2e_ms.p50"), None),
    ("e2e p99 (ms)", lambda r: get(r, "e2e_ms.p99"), None),
    ("consumed / sent, whole run", lambda r: None if r is None or "received_total" not in r
     else f"{r['received_total']:,}/{r['expected_total']:,}", None),
    ("redelivered / ack failed", lambda r: None if r is None or "redelivered_total" not in r
     else f"{r['redelivered_total']}/{r['ack_failed_total']}", None),
    ("broker CPU us / msg sent or consumed", lambda r: get(r, "broker_cpu_us_per_op"), ("<=", 1 / 3)),
    ("broker CPU (cores)", lambda r: get(r, "broker_cpu_util"), None),
    ("other work on server core", lambda r: other(r, "broker_cpu_util"), None),
    ("broker peak RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_vmhwm_kb")), ("<=", 0.1)),
    ("broker peak anon RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_peak_anon_kb")), None),
    ("proxy CPU (cores, client core)", lambda r: get(r, "proxy_cpu_util"), None),
    ("proxy CPU us / msg sent or consumed", lambda r: get(r, "proxy_cpu_us_per_op"), None),
    ("loadgen CPU (cores, client core)", lambda r: get(r, "loadgen_cpu_util"), None),
    ("client core busy (of 1)", lambda r: get(r, "client_core_busy"), None),
    ("proxy peak RSS (MiB)", lambda r: kb_to_mib(get(r, "proxy_vmhwm_kb")), None),
    ("send failed", lambda r: get(r, "send_failed"), None),
    ("missing after drain", lambda r: get(r, "missing_after_drain"), None),
]
NO_RATIO_POP = NO_RATIO_GRPC | {"client core busy (of 1)"}


def pair(r, a, b):
    """Two counts as "a / b" (no ratio is taken of it)."""
    if r is None or get(r, a) is None or get(r, b) is None:
        return None
    return f"{get(r, a):,} / {get(r, b):,}"


def tenth(r, i, key):
    """Lateness of the timers due in the i-th tenth of the window (does it grow with the backlog?)."""
    t = get(r, "lateness_by_tenth_of_window")
    return None if not t or len(t) <= i else t[i].get(key)


def anon_rss_steps(r):
    """k: anonymous RSS when the measured sends start, when every timer is pending, at the end (MiB)."""
    vals = [kb_to_mib(get(r, k)) for k in ("broker_anon_send_start_kb", "broker_anon_first_due_kb", "broker_anon_end_kb")]
    return None if all(v is None for v in vals) else " / ".join("-" if v is None else f"{v:,.0f}" for v in vals)


# k: timer messages. Goals as for the other saturating workloads: enqueue rate >= 3x, CPU <= 1/3, peak RSS <= 1/10
TIMER_ROWS = [
    ("enqueue rate (msg/s, send phase)", lambda r: get(r, "enqueue_tps"), (">=", 3)),
    ("send phase (s)", lambda r: get(r, "send_s"), None),
    ("send p99 (ms)", lambda r: get(r, "send_latency_ms.p99"), None),
    ("lateness p50 (ms)", lambda r: get(r, "lateness_ms.p50"), None),
    ("lateness p99 (ms)", lambda r: get(r, "lateness_ms.p99"), None),
    ("lateness p99.9 (ms)", lambda r: get(r, "lateness_ms.p999"), None),
    ("lateness max (ms)", lambda r: get(r, "lateness_ms.max"), None),
    ("lateness min (ms, < 0: early)", lambda r: get(r, "lateness_ms.min"), None),
    ("lateness p99, first/last tenth (ms)", lambda r: None if tenth(r, 0, "p99") is None or tenth(r, 9, "p99") is None
     else f"{tenth(r, 0, 'p99'):,} / {tenth(r, 9, 'p99'):,}", None),
    ("peak overdue timers (at s of window)", lambda r: None if get(r, "peak_overdue_timers") is None
     else f"{get(r, 'peak_overdue_timers'):,} ({get(r, 'peak_overdue_at_s')} s)", None),
    ("longest gap, none delivered, some due (s)", lambda r: get(r, "longest_delivery_gap_s"), None),
    ("early / beyond precision", lambda r: pair(r, "early", "early_beyond_precision"), None),
    ("late by over precision + 100 ms", lambda r: get(r, "late_beyond_precision"), None),
    ("delivered / sent OK", lambda r: pair(r, "received_unique", "send_ok"), None),
    ("missing / duplicates", lambda r: pair(r, "missing", "duplicates"), None),
    ("sends failed+retried / given up", lambda r: pair(r, "send_failed", "send_given_up"), None),
    ("timers sent after their due time", lambda r: get(r, "sent_after_due"), None),
    ("broker CPU us / timer (whole run)", lambda r: get(r, "broker_cpu_us_per_timer"), ("<=", 1 / 3)),
    ("broker CPU us / timer, send phase", lambda r: get(r, "broker_cpu_us_per_timer_send"), None),
    ("broker CPU s, after the send phase", lambda r: get(r, "broker_cpu_delivery_s"), None),
    ("broker CPU (cores), send phase", lambda r: get(r, "broker_cpu_util_send"), None),
    ("loadgen CPU (cores), send phase", lambda r: get(r, "loadgen_cpu_util_send"), None),
    ("client core busy, send phase (of 1)", lambda r: get(r, "client_core_busy_send"), None),
    ("other work on server core", lambda r: other(r, "broker_cpu_util"), None),
    ("broker peak RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_vmhwm_kb")), ("<=", 0.1)),
    ("broker peak anon RSS (MiB)", lambda r: kb_to_mib(get(r, "broker_peak_anon_kb")), None),
    ("RSS at the first send (MiB)", lambda r: kb_to_mib(get(r, "broker_rss_send_start_kb")), None),
    ("RSS at send end, all pending (MiB)", lambda r: kb_to_mib(get(r, "broker_rss_send_end_kb")), None),
    ("RSS before the first due (MiB)", lambda r: kb_to_mib(get(r, "broker_rss_first_due_kb")), None),
    ("RSS at the end (MiB)", lambda r: kb_to_mib(get(r, "broker_rss_end_kb")), None),
    ("anon RSS first send / first due / end (MiB)", anon_rss_steps, None),
]
# counts and signed lateness: a ratio of them means nothing
NO_RATIO_TIMER = {"lateness p99, first/last tenth (ms)", "early / beyond precision", "peak overdue timers (at s of window)", "longest gap, none delivered, some due (s)", "late by over precision + 100 ms", "client core busy, send phase (of 1)", "delivered / sent OK", "missing / duplicates",
                  "sends failed+retried / given up", "timers sent after their due time", "lateness min (ms, < 0: early)", "other work on server core",
                  "anon RSS first send / first due / end (MiB)"}


def group_member(r, master, key):
    """h: the master's figure (master=True) or the largest of the slaves' (False)."""
    vs = [m.get(key) for m in (get(r, "members") or {}).values() if bool(m.get("master")) == master and m.get(key) is not None]
    return None if not vs else vs[0] if master else max(vs)


def group_members(r):
    return "; ".join(f"{addr.rsplit(':', 1)[-1]} id {m.get('broker_id_at_start')}->{m.get('broker_id_at_end')}"
                     for addr, m in (get(r, "members") or {}).items()) or None


# three brokers in DLedger mode (h): the group's CPU (the three summed) and each broker's memory
DLEDGER_BROKER_ROWS = [
    ("valid (one master, slaves level)", validity, None),
    ("send TPS (msg/s)", lambda r: get(r, "send_tps"), (">=", 3)),
    ("send p50 (ms)", lambda r: get(r, "send_latency_ms.p50"), None),
    ("send p99 (ms)", lambda r: get(r, "send_latency_ms.p99"), None),
    ("send p99.9 (ms)", lambda r: get(r, "send_latency_ms.p999"), ("<=", 0.1)),
    ("send max (ms)", lambda r: get(r, "send_max_ms"), None),
    ("fewest SEND_OK in a second", lambda r: get(r, "fewest_send_ok_in_a_second"), None),
    ("e2e p50 (ms)", lambda r: get(r, "e2e_ms.p50"), None),
    ("e2e p99 (ms)", lambda r: get(r, "e2e_ms.p99"), None),
    ("consume TPS (msg/s)", lambda r: get(r, "consume_tps"), None),
    ("3 brokers CPU s / 1M msg", lambda r: get(r, "group_cpu_s_per_million"), ("<=", 1 / 3)),
    ("master CPU s / 1M msg", lambda r: group_member(r, True, "cpu_s_per_million"), None),
    ("slave CPU s / 1M msg (max)", lambda r: group_member(r, False, "cpu_s_per_million"), None),
    ("3 brokers CPU (cores)", lambda r: get(r, "group_cpu_util"), None),
    ("loadgen CPU (cores)", lambda r: get(r, "loadgen_cpu_util"), None),
    ("other work on server core", lambda r: other(r, "group_cpu_util"), None),
    ("master peak RSS (MiB)", lambda r: kb_to_mib(group_member(r, True, "vmhwm_kb")), ("<=", 0.1)),
    ("slave peak RSS (MiB, max)", lambda r: kb_to_mib(group_member(r, False, "vmhwm_kb")), ("<=", 0.1)),
    ("master peak anon RSS (MiB)", lambda r: kb_to_mib(group_member(r, True, "peak_anon_kb")), None),
    ("slave peak anon RSS (MiB, max)", lambda r: kb_to_mib(group_member(r, False, "peak_anon_kb")), None),
    ("send failed / not OK", lambda r: None if r is None or "send_failed" not in r else f"{r['send_failed']}/{r['send_not_ok']}", None),
    ("not SEND_OK, whole run", not_ok_whole_run, None),
    ("send failed, whole run", lambda r: get(r, "send_failed_whole_run"), None),
    ("master + SEND_OK after listen (s)", lambda r: get(r, "dledger.ready_since_start_s"), None),
    ("brokers: port id start->end", group_members, None),
    ("missing after drain", lambda r: get(r, "missing_after_drain"), None),
]
NO_RATIO_DLEDGER_BROKERS = {"valid (one master, slaves level)", "master + SEND_OK after listen (s)", "send failed, whole run",
                            "brokers: port id start->end", "other work on server core"}


def members(r, leader):
    """The members of a DLedger result: the leader's entry (leader=True) or the followers' (False)."""
    return [m for m in (get(r, "members") or {}).values() if bool(m.get("leader")) == leader]


def leader_of(r, key):
    ms = members(r, True)
    return ms[0].get(key) if ms else None


def followers_max(r, key):
    vs = [m.get(key) for m in members(r, False) if m.get(key) is not None]
    return max(vs) if vs else None


def members_sum(r, key):
    vs = [m.get(key) for m in (get(r, "members") or {}).values()]
    return None if not vs or any(v is None for v in vs) else sum(vs)


def median(vs):
    vs = sorted(v for v in vs if v is not None)
    if not vs:
        return None
    n = len(vs)
    return vs[n // 2] if n % 2 else (vs[n // 2 - 1] + vs[n // 2]) / 2


def elections(r, key, how):
    rounds = (r or {}).get("elections") or []
    vs = [e.get(key) for e in rounds if e.get("valid")]
    if not vs:
        return None
    return {"median": median, "min": min, "max": max}[how](vs)


def elections_valid(r):
    rounds = (r or {}).get("elections")
    if rounds is None:
        return None
    return f"{sum(1 for e in rounds if e.get('valid'))}/{len(rounds)}"


# the DLedger group (g): the members' costs summed, the leader's and a follower's apart; then elections
DLEDGER_ROWS = [
    ("valid (distinct indexes, read back, all SUCCESS)", validity, None),
    ("append TPS (appends/s)", lambda r: get(r, "append_tps"), None),
    ("append p50 (ms)", lambda r: get(r, "latency_ms.p50"), None),
    ("append p99 (ms)", lambda r: get(r, "latency_ms.p99"), None),
    ("append p99.9 (ms)", lambda r: get(r, "latency_ms.p999"), None),
    ("append max (ms)", lambda r: get(r, "latency_ms.max"), None),
    ("group CPU s / 1M appends", lambda r: get(r, "group_cpu_s_per_million"), None),
    ("leader CPU s / 1M appends", lambda r: leader_of(r, "cpu_s_per_million"), None),
    ("follower CPU s / 1M (max)", lambda r: followers_max(r, "cpu_s_per_million"), None),
    ("group CPU (cores)", lambda r: get(r, "group_cpu_util"), None),
    ("loadgen CPU (cores)", lambda r: get(r, "loadgen_cpu_util"), None),
    ("other work on server core", lambda r: other(r, "group_cpu_util"), None),
    ("leader peak RSS (MiB)", lambda r: kb_to_mib(leader_of(r, "vmhwm_kb")), None),
    ("follower peak RSS (MiB, max)", lambda r: kb_to_mib(followers_max(r, "vmhwm_kb")), None),
    ("3 members peak RSS (MiB, sum)", lambda r: kb_to_mib(members_sum(r, "vmhwm_kb")), None),
    ("3 members peak anon RSS (MiB, sum)", lambda r: kb_to_mib(members_sum(r, "peak_anon_kb")), None),
    ("appends failed (window)", lambda r: get(r, "appends_failed"), None),
    ("elections timed (valid/rounds)", elections_valid, None),
    ("kill -> append SUCCESS, median (ms)", lambda r: elections(r, "append_ms", "median"), None),
    ("kill -> append SUCCESS, min (ms)", lambda r: elections(r, "append_ms", "min"), None),
    ("kill -> append SUCCESS, max (ms)", lambda r: elections(r, "append_ms", "max"), None),
    ("kill -> METADATA new leader, median (ms)", lambda r: elections(r, "metadata_ms", "median"), None),
]
NO_RATIO_DLEDGER = {"valid (distinct indexes, read back, all SUCCESS)", "elections timed (valid/rounds)", "other work on server core"}


def load(sys_name, wl):
    path = os.path.join(run_dir, sys_name, wl, "result.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        r = json.load(f)
    edir = os.path.join(run_dir, sys_name, wl, "elections")
    if os.path.isdir(edir):
        rounds = []
        for name in sorted(os.listdir(edir), key=lambda n: (len(n), n)):
            if name.endswith(".json"):
                with open(os.path.join(edir, name)) as f:
                    rounds.append(json.load(f))
        r["elections"] = rounds
    return r


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return f"{v:,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}" if abs(v) < 1 else f"{v:.2f}"


def is_valid(r):
    return r is not None and r.get("valid", True)


def ratio(a, b):
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b == 0:
        return None
    return a / b


def verdict(goal, r):
    if goal is None:
        return ""
    op, x = goal
    want = f"{op}{x:.2g}x"
    if r is None:
        return want + " ?"
    ok = r >= x if op == ">=" else r <= x
    return f"{want} {'met' if ok else 'NOT met'}"


meta = {}
if os.path.exists(os.path.join(run_dir, "meta.json")):
    with open(os.path.join(run_dir, "meta.json")) as f:
        meta = json.load(f)

out = {"meta": meta, "systems": systems, "workloads": {}}
header = ["workload", "metric"] + systems + [f"{ours}/{o}" for o in others] + ["goal (vs " + (others[0] if others else "-") + ")"]
rows = []
invalid = []  # (workload, system, reasons)
for wl, title in WORKLOADS.items():
    results = {s: load(s, wl) for s in systems}
    if all(r is None for r in results.values()):
        continue
    table_rows = (NAMESRV_ROWS if wl.startswith("e") else REPLICATED_ROWS if wl in REPLICATED
                  else DLEDGER_ROWS if wl == "g" else DLEDGER_BROKER_ROWS if wl == "h"
                  else GRPC_ROWS if wl == "i" else POP_ROWS if wl == "j" else TIMER_ROWS if wl == "k"
                  else FIXED_RATE_ROWS if wl == "m" else CATCH_UP_ROWS if wl == "q" else BROKER_ROWS)
    entry = {"title": title.split(" ", 1)[1].strip(), "results": results, "ratios": {}}
    valid = {s: is_valid(results[s]) for s in systems}
    checked = wl in REPLICATED or wl in ("g", "h")  # results that can be INVALID
    if checked:
        entry["valid"] = valid
        for s in systems:
            if results[s] is not None and not valid[s]:
                invalid.append((wl, s, results[s].get("invalid_because") or []))
    first = True
    for label, extract, goal in table_rows:
        if label.startswith("send TPS") and wl in SATURATION:
            goal = (">=", 3)
        if label == "broker peak anon RSS (MiB)" and wl == "n":  # the goal on memory at 1,000 connections
            goal = ("<=", 0.1)
        if label == "queries/s" and wl == "e-lean":  # the client that can saturate either name server
            goal = (">=", 3)
        if wl not in ("e", "e-lean", "g", "k") and results.get(ours) is not None and not results[ours].get("consume") and label.startswith(("e2e", "consume", "missing")):
            continue
        vals = [extract(results[s]) if results[s] is not None else None for s in systems]
        ratios = [None if label in NO_RATIO or (wl == "g" and label in NO_RATIO_DLEDGER)
                  or (wl == "h" and label in NO_RATIO_DLEDGER_BROKERS) or (wl == "i" and label in NO_RATIO_GRPC)
                  or (wl == "j" and label in NO_RATIO_POP) or (wl == "k" and label in NO_RATIO_TIMER)
                  or (wl in ("m", "q") and label in NO_RATIO_FIXED_RATE) or (wl == "q" and label == "backlog (messages)")
                  else ratio(vals[0], v) for v in vals[1:]]
        # an invalid master/slave result is no figure to compare: no ratio, no goal, said so in every row
        spoilt = [checked and (results[ours] is not None and not valid[ours] or results[o] is not None and not valid[o]) for o in others]
        ratios = [None if bad else r for r, bad in zip(ratios, spoilt)]
        for o, r in zip(others, ratios):
            entry["ratios"].setdefault(o, {})[label] = r
        cells = [fmt(v) for v in vals]
        if (wl in REPLICATED or wl == "h") and label.startswith("send TPS"):
            cells = [c if results[s] is None or valid[s] else "INVALID " + c for s, c in zip(systems, cells)]
        rows.append([title if first else "", label] + cells
                    + [("INVALID" if bad else "-" if r is None else f"{r:.2f}") for r, bad in zip(ratios, spoilt)]
                    + [("INVALID" if goal and spoilt and spoilt[0] else verdict(goal, ratios[0] if ratios else None))])
        first = False
    base = REPLICATED.get(wl)
    if base is not None:
        # what SYNC_MASTER adds, per system, over the same load on a lone ASYNC_MASTER (workload f0)
        baseline = {s: load(s, base) for s in systems}
        entry["vs_" + base] = {}
        for label, extract in SYNC_VS_ASYNC_ROWS:
            vals = [extract(results[s], baseline[s]) if results[s] is not None and baseline[s] is not None and valid[s] else None
                    for s in systems]
            for s, v in zip(systems, vals):
                entry["vs_" + base].setdefault(s, {})[label] = v
            goal = ""
            if label.startswith("TPS"):
                v = vals[0]
                want = f"{ours} >={SYNC_VS_ASYNC_GOAL:.2g}"
                goal = (f"{want} INVALID" if results[ours] is not None and not valid[ours]
                        else f"{want} ?" if v is None else f"{want} {'met' if v >= SYNC_VS_ASYNC_GOAL else 'NOT met'}")
            rows.append(["  vs f0 (ASYNC_MASTER)" if label.startswith("TPS") else "", label] + [fmt(v) for v in vals]
                        + ["" for _ in others] + [goal])
    rows.append(None)
    out["workloads"][wl] = entry

with open(results_path, "w") as f:
    json.dump(out, f, indent=2)

widths = [max(len(header[i]), *(len(r[i]) for r in rows if r)) for i in range(len(header))]
line = "  ".join("-" * w for w in widths)
print()
print("  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
print(line)
for r in rows:
    if r is None:
        print(line)
        continue
    print("  ".join(c.ljust(w) if i < 2 or i == len(r) - 1 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
# what went wrong, if anything: the first errors of each system (whole run, warm-up included)
for wl, entry in out["workloads"].items():
    for s_name, r in entry["results"].items():
        errs = (r or {}).get("send_errors_whole_run") or (r or {}).get("errors_whole_run") or (r or {}).get("errors") or {}
        for k, v in list(errs.items())[:3]:
            print(f"{wl} {s_name}: {v} x {k}")
if meta:
    print(f"\n{meta.get('label')} run, warm-up {meta.get('warmup_s')} s + {meta.get('duration_s')} s measured per workload;"
          f" server on cpu {meta.get('server_cpu')}, load generator on cpu {meta.get('client_cpu')};"
          f" load average at start {meta.get('load_average_at_start')}")
    print("Each workload ran on a fresh name server, broker and store (e and e' share one name server): CPU and peak RSS (VmHWM) are per workload.")
    if any(w in out["workloads"] for w in REPLICATED):
        print("f: the master and its slave (same system, same brokerName, brokerId 1) both ran on the server core; f0 is the same load on a lone ASYNC_MASTER.")
    if "h" in out["workloads"]:
        print(f"h: the 3 brokers of each DLedger group (one brokerName; the leader is the master, brokerId 0) ran on the server core,"
              f" the name server on the load generator's; CPU per message is the three brokers' sum; warm-up {meta.get('h_warmup_s')} s"
              " (3x: each JVM has a third of the core to compile in); valid = one master throughout, every slave at the master's"
              " commit-log max offset after the drain; failed sends and messages not consumed are shown, TPS counts SEND_OK only.")
    if "i" in out["workloads"]:
        print("i: one server process per system with its gRPC front in local mode (ours: mqbroker --enable-proxy; Java: ProxyStartup -pm local,"
              " broker and proxy in one JVM); rocketmq-client-java drives it: sendAsync of 1 KiB, 1024 in flight (held while over 4096"
              " sent but not received), SimpleConsumers receiving batches of 32 with long polling and acking each message;"
              " CPU per message = server CPU / (messages sent + messages received and acked) in the window.")
    if "j" in out["workloads"]:
        print(f"j: {POP_GOAL}.")
        print("   Java's rocketmq-proxy 5.3.3 in cluster mode (ProxyStartup -pm cluster, its own JVM) shared the client core with the"
              " name server and the load generator, the same proxy for both systems; the broker (timerWheelEnable=true) was alone"
              " on the server core; i's load (sendAsync 1 KiB, SimpleConsumers receiving batches of 32 and acking each, i.e. pop"
              " and ack at the broker); broker CPU per message = broker CPU / (messages sent + received and acked) in the window."
              " A client core busy near 1 means the proxy and clients, not the broker, set the throughput.")
        for s_name, r in out["workloads"]["j"]["results"].items():
            busy = get(r, "client_core_busy")
            if isinstance(busy, (int, float)) and busy >= 0.95:
                print(f"   j {s_name}: the client core was {busy:.0%} busy (proxy {fmt(get(r, 'proxy_cpu_util'))} + load generator"
                      f" {fmt(get(r, 'loadgen_cpu_util'))} cores): its throughput is the proxy's and clients' limit, not the broker's;"
                      " compare the broker's CPU per message.")
    if "k" in out["workloads"]:
        t = meta.get("timer", {})
        print(f"k: {t.get('messages', 0):,} timer messages (128 B, Message.setDeliverTimeMs) due uniformly at random over"
              f" {t.get('window_s', '?')} s opening {t.get('lead_s', '?')} s after the first send, sent async (1024 in flight) as fast"
              " as the broker answers; timerWheelEnable=true, timerPrecisionMs 1000 on both. Lateness = receive time - due time at"
              " the push consumer (same JVM and clock as the sender); both brokers round a due time down to the precision"
              " (Java's HookUtils), so up to 1000 ms early is by design, earlier is not; CPU = the broker's from the first send"
              " to the last delivery, per timer; 'RSS at send end' is with every timer pending.")
        for s_name, r in out["workloads"]["k"]["results"].items():
            busy = get(r, "client_core_busy_send")
            if isinstance(busy, (int, float)) and busy >= 0.95:
                print(f"   k {s_name}: the client core was {busy:.0%} busy in the send phase (load generator"
                      f" {fmt(get(r, 'loadgen_cpu_util_send'))} cores): its enqueue rate is at least partly the load generator's"
                      " limit; compare the broker's CPU per timer.")
            if isinstance(get(r, "sent_after_due"), int) and r["sent_after_due"] > 0:
                print(f"   k {s_name}: {r['sent_after_due']:,} timers were sent after their due time (the send phase outlasted"
                      " the lead; raise --timer-lead): they were stored as plain messages.")
    if "g" in out["workloads"]:
        print("g: the 3 members of each group ran on the server core, DLedgerConfig defaults; election = SIGKILL of the leader"
              " (at a random point of a heartbeat interval) to the first append answered SUCCESS, the member restarted after each round.")
    for k, v in meta.get("jvm", {}).items():
        print(f"JVM {k}: {v}")
print(f"\nresults: {results_path}\nlogs:    {run_dir}")
if invalid:
    print()
    for wl, s_name, why in invalid:
        why = [why] if isinstance(why, str) else why
        print(f"!!! {wl} {s_name}: INVALID {'DLedger' if wl == 'g' else 'DLedger-mode' if wl == 'h' else 'master/slave'} result: {'; '.join(why) or 'see its result.json'}")
    print("!!! the figures of these results are not comparable (see above); exiting with status 1")
    sys.exit(1)
