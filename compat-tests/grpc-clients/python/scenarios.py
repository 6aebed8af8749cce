"""RocketMQ 5 scenarios run with the official Python client (rocketmq-python-client, pinned in
requirements.txt) against a gRPC endpoint: normal, invisible, fifo, delay and transaction.

Usage: scenarios.py ENDPOINT PREFIX
  Topics PREFIX + Normal/Invisible/Fifo/Delay/Tx and groups prefix-normal/... must exist (the FIFO
  group orderly): rocketmq.compat.proxy.GrpcClientsTest creates them. The scenarios run at once, one
  thread each. Each prints one line: RESULT <step> OK <facts> or RESULT <step> FAIL <reason>; the exit
  code is 0 only when every step passed.
"""

import os
import random
import sys
import threading
import time
import traceback

from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,
                      SimpleConsumer, TransactionChecker, TransactionResolution)

ENDPOINT = sys.argv[1]
PREFIX = sys.argv[2]
RUN_ID = str(int(time.time() * 1000) % 1000000)
AWAIT_S = 3
TEXT = "ünïcødé ✓ 消息 = a&b"
print_lock = threading.Lock()


def config():
    return ClientConfiguration(ENDPOINT, Credentials(), request_timeout=10)


def now_ms():
    return int(time.time() * 1000)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def describe(m):
    return (f"{m.body[:40]!r} (id {m.message_id}, tag {m.tag}, keys {sorted(m.keys)}, group {m.message_group}, "
            f"attempt {m.delivery_attempt}, properties {m.properties})")


class Started:
    """Starts a client, waits for the server's answer to its settings, and shuts it down on leaving the
    with block. Client 5.1.2's startup returns before a Producer or SimpleConsumer has sent its settings
    (its settings scheduler first runs 1 s after the start), and a server, Java's proxy as ours, refuses a
    receive from a client whose settings it has not had (Java's with an internal error, ours with 40015
    "cannot find client settings"); the client sets _init_settings_event when the answer arrives.

    Client 5.1.2 builds its Telemetry stream from the calling thread, off its asyncio loop (grpc.aio is
    not thread-safe), and when its first settings write fails it rebuilds the stream without writing the
    settings again until its 5-minute resync. With several clients starting at once this, rarely, leaves a
    client without settings. So a client that has none after 10 s is shown (its own log's lines) and
    replaced once by a fresh one; a second one without settings fails the step."""

    def __init__(self, make):
        self.make = make
        self.client = None

    def __enter__(self):
        for attempt in (1, 2):
            self.client = self.make()
            self.client.startup()
            if self.client._init_settings_event.wait(10):
                return self.client
            what = f"{self.client}: no settings from the server within 10 s"
            excerpt = client_log_lines(self.client.client_id)
            if attempt == 2:
                raise AssertionError(f"{what} (a second client too); its log: {excerpt}")
            with print_lock:
                print(f"SETTINGS-RETRY {what}; a fresh client replaces it. Its log: {excerpt}", flush=True)
            self.__exit__()

    def __exit__(self, *exc):
        try:
            self.client.shutdown()
        except Exception as e:  # a failed shutdown is not the step's result
            print(f"shutdown of {self.client}: {e}", file=sys.stderr)
        return False


def client_log_lines(client_id, last=20):
    """The client's own log lines that name it (the client writes under $HOME/logs/rocketmq_python)."""
    path = os.path.expanduser("~/logs/rocketmq_python/rocketmq_client.log")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip() for line in f if client_id in line]
        return lines[-last:]
    except OSError as e:
        return [f"cannot read {path}: {e}"]


def producer(topic, checker=None):
    return Started(lambda: Producer(config(), topics=(topic,), checker=checker))


def consumer(group, topic, tag="*"):
    return Started(lambda: SimpleConsumer(config(), group, {topic: FilterExpression(tag)}, await_duration=AWAIT_S))


def receive(c, invisible_s, count=16):
    try:
        return c.receive(count, invisible_s)
    except Exception as e:  # no message within the long-polling time ends as an error in some versions
        if "MESSAGE_NOT_FOUND" in str(e) or "no new message" in str(e).lower():
            return []
        raise


def expect_nothing(c, what):
    """One more receive of AWAIT_S seconds must bring nothing."""
    left = receive(c, 10)
    check(not left, f"{what}: received {[describe(m) for m in left]}")


def normal(facts):
    topic, group = PREFIX + "Normal", PREFIX.lower() + "-normal"
    sent = {}
    with producer(topic) as p:
        for i in range(10):
            m = Message()
            m.topic = topic
            name = f"py-{RUN_ID}-normal-{i}".encode()
            # the first one with 256 KiB of binary after its name (the client sends it uncompressed)
            m.body = name + (b"\0" + bytes(random.Random(i).getrandbits(8) for _ in range(256 * 1024)) if i == 0 else b"")
            m.tag = "TagA"
            m.keys = f"key-{i}"
            m.keys = "common"
            m.add_property("index", str(i))
            m.add_property("lang", "python")
            m.add_property("text", TEXT)
            sent[name] = (i, p.send(m).message_id, m.body)
        for i in range(2):  # filtered out by the consumer's tag
            m = Message()
            m.topic = topic
            m.body = f"py-{RUN_ID}-other-{i}".encode()
            m.tag = "TagB"
            p.send(m)
    got = {}
    with consumer(group, topic, "TagA") as c:
        deadline = time.time() + 30
        while len(got) < len(sent) and time.time() < deadline:
            for m in receive(c, 15):
                name = m.body.split(b"\0", 1)[0]
                check(name in sent, f"unexpected {describe(m)}")
                check(name not in got, f"twice: {describe(m)}")
                i, msg_id, body = sent[name]
                check(m.body == body, f"{describe(m)}: body of {len(m.body)} bytes, sent {len(body)}")
                check(m.message_id == msg_id, f"{describe(m)}: message id, sent as {msg_id}")
                check(m.topic == topic, f"{describe(m)}: topic")
                check(m.tag == "TagA", f"{describe(m)}: tag")
                check(set(m.keys) == {f"key-{i}", "common"}, f"{describe(m)}: keys")
                check(m.properties == {"index": str(i), "lang": "python", "text": TEXT}, f"{describe(m)}: properties")
                check(m.delivery_attempt == 1, f"{describe(m)}: delivery attempt")
                check(m.born_timestamp and m.born_timestamp <= now_ms(), f"{describe(m)}: born timestamp")
                check(not m.corrupted, f"{describe(m)}: body digest")
                c.ack(m)
                got[name] = m
        check(len(got) == len(sent), f"received {len(got)} of {len(sent)} within 30 s")
        expect_nothing(c, "after the acks (TagB filtered out)")
    facts["sentAcked"] = len(got)


def invisible(facts):
    """Both received with a 3 s invisible time; A's is changed to 8 s. B comes back after 3 s, A not
    before 8 s from the change, each with its delivery attempt at 2."""
    topic, group = PREFIX + "Invisible", PREFIX.lower() + "-invisible"
    bodies = [f"py-{RUN_ID}-inv-a".encode(), f"py-{RUN_ID}-inv-b".encode()]
    with producer(topic) as p:
        for b in bodies:
            m = Message()
            m.topic = topic
            m.body = b
            p.send(m)
    with consumer(group, topic) as c:
        first = {}
        deadline = time.time() + 30
        while len(first) < 2 and time.time() < deadline:
            for m in receive(c, 3):
                check(m.body in bodies and m.body not in first, f"unexpected {describe(m)}")
                first[m.body] = (time.time(), m)
        check(len(first) == 2, f"received {len(first)} of 2 within 30 s")
        a = first[bodies[0]][1]
        old_handle = a.receipt_handle
        c.change_invisible_duration(a, 8)
        changed_at = time.time()
        check(a.receipt_handle and a.receipt_handle != old_handle, "changeInvisibleDuration gave no new handle")
        back = {}
        deadline = time.time() + 40
        while len(back) < 2 and time.time() < deadline:
            for m in receive(c, 20):
                check(m.body in bodies and m.body not in back, f"unexpected {describe(m)}")
                since = time.time() - (changed_at if m.body == bodies[0] else first[m.body][0])
                wait = 8 if m.body == bodies[0] else 3
                check(since >= wait - 0.2, f"{describe(m)} back after {since:.1f} s, before its {wait} s")
                check(m.delivery_attempt == 2, f"{describe(m)}: delivery attempt")
                c.ack(m)
                back[m.body] = round(since, 1)
        check(len(back) == 2, f"came back {len(back)} of 2 within 40 s")
        expect_nothing(c, "after the acks")
    facts["backAfterS"] = back[bodies[0]], back[bodies[1]]


def fifo(facts):
    topic, group = PREFIX + "Fifo", PREFIX.lower() + "-fifo"
    groups, per = 3, 4
    with producer(topic) as p:
        for s in range(per):
            for g in range(groups):
                m = Message()
                m.topic = topic
                m.body = f"py-{RUN_ID}-g{g}-{s}".encode()
                m.message_group = f"py-group-{g}"
                m.tag = "Fifo"
                p.send(m)
    nxt = [0] * groups
    with consumer(group, topic) as c:
        deadline = time.time() + 40
        while sum(nxt) < groups * per and time.time() < deadline:
            for m in receive(c, 10):
                g = int(m.message_group.rsplit("-", 1)[1]) if m.message_group else -1
                check(0 <= g < groups, f"{describe(m)}: message group")
                check(m.body == f"py-{RUN_ID}-g{g}-{nxt[g]}".encode(), f"{describe(m)}: expected #{nxt[g]} of its group")
                check(m.tag == "Fifo", f"{describe(m)}: tag")
                c.ack(m)
                nxt[g] += 1
        check(sum(nxt) == groups * per, f"received {nxt} of {per} per group within 40 s")
        expect_nothing(c, "after the acks")
    facts["inOrder"] = sum(nxt)


def delay(facts):
    topic, group = PREFIX + "Delay", PREFIX.lower() + "-delay"
    at = {}
    with producer(topic) as p:
        for i in range(3):
            m = Message()
            m.topic = topic
            m.body = f"py-{RUN_ID}-delay-{i}".encode()
            # Client 5.1.2 sends delivery_timestamp as whole seconds (Timestamp.seconds), and gives the
            # received one in milliseconds.
            m.delivery_timestamp = now_ms() // 1000 + 4 + i
            at[m.body] = m.delivery_timestamp * 1000
            p.send(m)
    got = {}
    with consumer(group, topic) as c:
        deadline = time.time() + 40
        while len(got) < len(at) and time.time() < deadline:
            for m in receive(c, 15):
                arrived = now_ms()
                check(m.body in at and m.body not in got, f"unexpected {describe(m)}")
                check(arrived >= at[m.body], f"{describe(m)} arrived {at[m.body] - arrived} ms early")
                check(m.delivery_timestamp == at[m.body],
                      f"{describe(m)}: delivery timestamp {m.delivery_timestamp}, sent {at[m.body]}")
                c.ack(m)
                got[m.body] = arrived - at[m.body]
        check(len(got) == len(at), f"received {len(got)} of {len(at)} within 40 s")
    facts["lateMs"] = sorted(got.values())


class Checker(TransactionChecker):
    """The server's check of a half message left open: commit the one meant to be checked, roll back any other
    (the committed and rolled back ones should not be asked about)."""

    def __init__(self):
        self.asked = []

    def check(self, message):
        self.asked.append(message.body)
        return TransactionResolution.COMMIT if b"-tx-check" in message.body else TransactionResolution.ROLLBACK


def transaction(facts):
    """Three half messages: one rolled back, one committed, one left open that the server's check (over the
    telemetry stream) has the producer's checker commit. Only the committed and the checked one arrive."""
    topic, group = PREFIX + "Tx", PREFIX.lower() + "-tx"
    bodies = {}
    checker = Checker()
    with producer(topic, checker) as p:
        for what in ("rollback", "commit", "check"):
            tx = p.begin_transaction()
            m = Message()
            m.topic = topic
            m.body = f"py-{RUN_ID}-tx-{what}".encode()
            m.tag = "Tx"
            m.keys = f"tx-{what}"
            m.add_property("outcome", what)
            receipt = p.send(m, transaction=tx)
            check(receipt.transaction_id, f"{what}: send receipt has no transaction id")
            if what == "commit":
                tx.commit()
            elif what == "rollback":
                tx.rollback()
            bodies[m.body] = what
        sent_at = time.time()
        got = {}
        with consumer(group, topic) as c:
            deadline = time.time() + 40
            while len(got) < 2 and time.time() < deadline:
                for m in receive(c, 15):
                    what = bodies.get(m.body)
                    check(what in ("commit", "check") and m.body not in got, f"unexpected {describe(m)}")
                    check(m.tag == "Tx" and set(m.keys) == {f"tx-{what}"} and m.properties.get("outcome") == what,
                          f"{describe(m)}: tag, keys or properties")
                    c.ack(m)
                    got[m.body] = round(time.time() - sent_at, 1)
            check(len(got) == 2, f"received {sorted(bodies[b] for b in got)} of commit and check within 40 s")
            expect_nothing(c, "after the committed and the checked one (the rolled back one)")
    asked = [bodies.get(b, b) for b in checker.asked]
    check(asked and set(asked) == {"check"}, f"the checker was asked about {asked}, want the open one only")
    facts["arrivedAfterS"] = {bodies[b]: t for b, t in got.items()}


STEPS = {"normal": normal, "invisible": invisible, "fifo": fifo, "delay": delay, "transaction": transaction}


def run(name, results):
    facts = {}
    start = time.time()
    try:
        STEPS[name](facts)
        line = f"RESULT {name} OK {facts} in {time.time() - start:.1f} s"
        results[name] = True
    except Exception as e:
        traceback.print_exc()
        line = f"RESULT {name} FAIL {type(e).__name__}: {e} (facts {facts}, after {time.time() - start:.1f} s)"
        results[name] = False
    with print_lock:
        print(line.replace("\n", " "), flush=True)


def main():
    only = sys.argv[3].split(",") if len(sys.argv) > 3 else list(STEPS)
    results = {}
    threads = [threading.Thread(target=run, args=(n, results), name=n) for n in only]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(0 if all(results.get(n) for n in only) else 1)


if __name__ == "__main__":
    main()
