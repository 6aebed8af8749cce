// Command routeload drives a name server with GET_ROUTEINFO_BY_TOPIC as hard as one core allows.
//
// The official Java client spends more CPU per route query than a fast name server does to answer it,
// so on a two-core machine it cannot saturate ours. This client replays the exact request frame the
// Java client encoded (ROCKETMQ binary header; the Java generator dumps it with --dump-frame), only
// patching the opaque, over a few pipelined connections with a bounded number of requests in flight,
// and checks every response's code and body. Standard library only.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	serializeRocketMQ = 1
	opaqueOffset      = 13 // length(4) + header length(4) + code(2) + language(1) + version(2)
	ringMask          = 1<<16 - 1
)

type phase int32

const (
	warming phase = iota
	measuring
	stopped
)

type conn struct {
	c       net.Conn
	tokens  chan struct{}
	sentAt  [ringMask + 1]int64 // send time (ns) by opaque; the window keeps live opaques far apart
	samples []uint32            // latencies (µs) of responses received while measuring
}

var (
	state    atomic.Int32
	ok       atomic.Int64
	failed   atomic.Int64
	errMu    sync.Mutex
	errCount = map[string]int64{}
	started  = time.Now()
)

func main() {
	addr := flag.String("addr", "", "name server host:port")
	framePath := flag.String("frame", "", "request frame written by the Java generator (--dump-frame)")
	conns := flag.Int("conns", 2, "connections")
	window := flag.Int("window", 256, "requests in flight per connection")
	warmup := flag.Duration("warmup", 5*time.Second, "not measured")
	duration := flag.Duration("duration", 20*time.Second, "measured")
	serverPid := flag.Int("server-pid", 0, "the name server's pid, for its CPU time and memory")
	clkTck := flag.Float64("clk-tck", 100, "getconf CLK_TCK")
	serverCPU := flag.Int("server-cpu", 0, "the server's core")
	clientCPU := flag.Int("client-cpu", 1, "this client's core")
	out := flag.String("out", "", "result JSON")
	flag.Parse()

	frame, err := os.ReadFile(*framePath)
	if err != nil || len(frame) < opaqueOffset+4 || frame[4] != serializeRocketMQ {
		fail("need a ROCKETMQ-encoded request frame in -frame (%v)", err)
	}
	var all []*conn
	for i := 0; i < *conns; i++ {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			fail("dial %s: %v", *addr, err)
		}
		k := &conn{c: c, tokens: make(chan struct{}, *window)}
		for j := 0; j < *window; j++ {
			k.tokens <- struct{}{}
		}
		all = append(all, k)
		go k.write(frame)
		go k.read()
	}
	logf("warm-up %s (%d connections x %d in flight)", *warmup, *conns, *window)
	time.Sleep(*warmup)

	ok0, failed0 := ok.Load(), failed.Load()
	cpu0, self0 := cpuSeconds(*serverPid, *clkTck), cpuSeconds(os.Getpid(), *clkTck)
	sc0, cc0 := coreJiffies(*serverCPU), coreJiffies(*clientCPU)
	t0 := time.Now()
	state.Store(int32(measuring))
	time.Sleep(*duration)
	state.Store(int32(stopped))
	secs := time.Since(t0).Seconds()
	ok1, failed1 := ok.Load(), failed.Load()
	cpu1, self1 := cpuSeconds(*serverPid, *clkTck), cpuSeconds(os.Getpid(), *clkTck)
	sc1, cc1 := coreJiffies(*serverCPU), coreJiffies(*clientCPU)
	time.Sleep(100 * time.Millisecond) // let readers finish appending

	var lat []uint32
	for _, k := range all {
		lat = append(lat, k.samples...)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	n := ok1 - ok0
	res := map[string]any{
		"client":                   "routeload (replayed Java client frame)",
		"conns":                    *conns,
		"inflight":                 *conns * *window,
		"window_s":                 secs,
		"queries_ok":               n,
		"queries_failed":           failed1 - failed0,
		"qps":                      float64(n) / secs,
		"latency_ms":               percentiles(lat),
		"server_cpu_s":             cpu1 - cpu0,
		"server_cpu_util":          (cpu1 - cpu0) / secs,
		"server_cpu_s_per_million": (cpu1 - cpu0) / float64(max(n, 1)) * 1e6,
		"loadgen_cpu_util":         (self1 - self0) / secs,
		"server_core_busy":         busy(sc0, sc1),
		"client_core_busy":         busy(cc0, cc1),
		"server_vmhwm_kb":          statusKb(*serverPid, "VmHWM"),
		"errors":                   errCount,
	}
	errMu.Lock()
	b, _ := json.Marshal(res)
	errMu.Unlock()
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		fail("write %s: %v", *out, err)
	}
	logf("%.0f queries/s, p99 %.2f ms, name server %.2f core, loadgen %.2f core, %d failed",
		float64(n)/secs, res["latency_ms"].(map[string]any)["p99"], (cpu1-cpu0)/secs, (self1-self0)/secs, failed1-failed0)
	os.Exit(0)
}

// write sends a burst of requests whenever responses have freed slots, one flush per burst.
func (k *conn) write(frame []byte) {
	w := bufio.NewWriterSize(k.c, 64<<10)
	buf := append([]byte(nil), frame...)
	var opaque uint32
	for phase(state.Load()) != stopped {
		<-k.tokens
		burst := 1 + len(k.tokens)
		for i := 1; i < burst; i++ {
			<-k.tokens
		}
		now := time.Now().UnixNano()
		for i := 0; i < burst; i++ {
			opaque++
			binary.BigEndian.PutUint32(buf[opaqueOffset:], opaque)
			k.sentAt[opaque&ringMask] = now
			w.Write(buf)
		}
		if err := w.Flush(); err != nil {
			fail("write: %v", err)
		}
	}
}

// read takes responses, checks them and frees their slots.
func (k *conn) read() {
	r := bufio.NewReaderSize(k.c, 256<<10)
	var lenBuf [4]byte
	frame := make([]byte, 0, 4096)
	for {
		if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
			if phase(state.Load()) != stopped {
				fail("read: %v", err)
			}
			return
		}
		size := int(binary.BigEndian.Uint32(lenBuf[:]))
		if cap(frame) < size {
			frame = make([]byte, size)
		}
		frame = frame[:size]
		if _, err := io.ReadFull(r, frame); err != nil {
			fail("read: %v", err)
		}
		code, opaque, remark := parse(frame)
		hlen := int(binary.BigEndian.Uint32(frame[:4]) & 0xFFFFFF)
		if code == 0 && size-4-hlen > 0 {
			ok.Add(1)
			if phase(state.Load()) == measuring {
				k.samples = append(k.samples, uint32((time.Now().UnixNano()-k.sentAt[opaque&ringMask])/1000))
			}
		} else {
			failed.Add(1)
			errMu.Lock()
			errCount["code "+strconv.Itoa(code)+": "+remark]++
			errMu.Unlock()
		}
		k.tokens <- struct{}{}
	}
}

// parse returns code and opaque of a response in either header encoding.
func parse(frame []byte) (code int, opaque uint32, remark string) {
	hdr := binary.BigEndian.Uint32(frame[:4])
	h := frame[4 : 4+int(hdr&0xFFFFFF)]
	if hdr>>24 == serializeRocketMQ {
		code = int(int16(binary.BigEndian.Uint16(h[0:2])))
		opaque = binary.BigEndian.Uint32(h[5:9])
		if rl := int(binary.BigEndian.Uint32(h[13:17])); rl > 0 {
			remark = string(h[17 : 17+rl])
		}
		return
	}
	var j struct {
		Code   int    `json:"code"`
		Opaque uint32 `json:"opaque"`
		Remark string `json:"remark"`
	}
	_ = json.Unmarshal(h, &j)
	return j.Code, j.Opaque, j.Remark
}

func percentiles(v []uint32) map[string]any {
	m := map[string]any{"count": len(v)}
	if len(v) == 0 {
		return m
	}
	at := func(p float64) float64 { return float64(v[min(len(v)-1, int(p*float64(len(v))))]) / 1000 }
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	m["p50"], m["p99"], m["p999"] = at(0.50), at(0.99), at(0.999)
	m["max"], m["mean"] = float64(v[len(v)-1])/1000, sum/float64(len(v))/1000
	return m
}

// cpuSeconds is utime + stime of every thread of a process.
func cpuSeconds(pid int, clkTck float64) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clkTck
}

func statusKb(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			v, _ := strconv.ParseInt(strings.Fields(line[len(field)+1:])[0], 10, 64)
			return v
		}
	}
	return -1
}

// coreJiffies is {busy, total} of one core from /proc/stat.
func coreJiffies(cpu int) [2]int64 {
	b, _ := os.ReadFile("/proc/stat")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && f[0] == "cpu"+strconv.Itoa(cpu) {
			var v [9]int64
			for i := 1; i <= 8; i++ {
				v[i], _ = strconv.ParseInt(f[i], 10, 64)
			}
			busy := v[1] + v[2] + v[3] + v[6] + v[7] + v[8]
			return [2]int64{busy, busy + v[4] + v[5]}
		}
	}
	return [2]int64{}
}

func busy(a, b [2]int64) any {
	if b[1] <= a[1] {
		return nil
	}
	return float64(b[0]-a[0]) / float64(b[1]-a[1])
}

func logf(format string, args ...any) {
	fmt.Printf("[loadgen] %5.1fs "+format+"\n", append([]any{time.Since(started).Seconds()}, args...)...)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "routeload: "+format+"\n", args...)
	os.Exit(1)
}
