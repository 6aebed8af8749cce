#!/usr/bin/env python3
"""A client that never reads its socket, against a running broker: it fills a topic, then sends
N pull requests (each answered with up to 32 messages) without reading one answer, and prints the
broker's resident memory (VmRSS) before, while it is connected, and after it leaves.

    scripts/probe/slow_reader.py --broker 127.0.0.1:10911 --pid $(cat run/broker.pid) [--pulls 10000]
"""
import argparse, json, socket, struct, time


def frame(code, ext, opaque, body=b""):
    header = json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque,
                         "serializeTypeCurrentRPC": "JSON", "version": 409}).encode()
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def read_frame(sock):
    def exact(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out
    total, = struct.unpack(">I", exact(4))
    exact(total)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--broker", default="127.0.0.1:10911")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--pulls", type=int, default=10000)
    p.add_argument("--topic", default="SlowReaderTopic")
    a = p.parse_args()
    host, port = a.broker.split(":")
    send = socket.create_connection((host, int(port)))
    for i in range(200):
        ext = {"a": "pg", "b": a.topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0"}
        send.sendall(frame(310, ext, i, b"x" * 1024))
        read_frame(send)
    send.close()
    time.sleep(1)
    before = rss_kib(a.pid)
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect((host, int(port)))
    slow.setblocking(False)
    pull = {"consumerGroup": "slow", "topic": a.topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}
    pending = b"".join(frame(11, pull, 1000 + i) for i in range(a.pulls))
    sent, peak = 0, before
    deadline = time.time() + 60
    while sent < len(pending) and time.time() < deadline:
        try:
            sent += slow.send(pending[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            break
        peak = max(peak, rss_kib(a.pid))
    for _ in range(40):
        peak = max(peak, rss_kib(a.pid))
        time.sleep(0.05)
    during = rss_kib(a.pid)
    slow.close()
    time.sleep(3)
    after = rss_kib(a.pid)
    print(json.dumps({"pulls_sent_bytes": sent, "pulls_total_bytes": len(pending), "rss_kib_before": before,
                      "rss_kib_peak": peak, "rss_kib_connected": during, "rss_kib_after_leaving": after}))


if __name__ == "__main__":
    main()
