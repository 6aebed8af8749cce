package compat

// Test harness: locating Java, the classpath files and our binaries, picking free
// ports, and starting/stopping the name server and Java brokers as child processes.

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	nameServerGrace  = 10 * time.Second // SIGTERM -> SIGKILL
	brokerGrace      = 20 * time.Second // a 5.x broker takes ~11 s to stop cleanly
	nameServerReady  = 30 * time.Second
	brokerPortReady  = 90 * time.Second
	logTailLines     = 60
	javaNameServerMs = "-Xms128m"
	javaNameServerMx = "-Xmx256m"
)

// JDK 17 module flags the Java RocketMQ start classes need.
var javaModuleFlags = []string{
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/java.nio=ALL-UNNAMED",
	"--add-opens", "java.base/java.util=ALL-UNNAMED",
	"--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang=ALL-UNNAMED",
}

// ---------------------------------------------------------------------------
// Environment: versions, classpaths, java, binaries

// compatDir is compat-tests/ (the parent of this package's directory).
func compatDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("..")
	if err != nil {
		t.Fatalf("cannot resolve compat-tests directory: %v", err)
	}
	return d
}

// javaVersions reads compat-tests/versions.env (KEY=VALUE lines).
func javaVersions(t *testing.T) map[string]string {
	t.Helper()
	path := filepath.Join(compatDir(t), "versions.env")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read %s (the Java RocketMQ versions to test against): %v", path, err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return out
}

func javaVersion(t *testing.T, key string) string {
	t.Helper()
	v := javaVersions(t)[key]
	if v == "" {
		t.Fatalf("%s is not set in %s", key, filepath.Join(compatDir(t), "versions.env"))
	}
	return v
}

// runtimeDir is $RMQ_RUNTIME_DIR or compat-tests/.runtime.
func runtimeDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("RMQ_RUNTIME_DIR"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			t.Fatalf("bad RMQ_RUNTIME_DIR %q: %v", d, err)
		}
		return abs
	}
	return filepath.Join(compatDir(t), ".runtime")
}

// classpath returns the contents of <runtime>/cp/<artifact>-<version>.cp after checking
// that every entry exists.
func classpath(t *testing.T, artifact, version string) string {
	t.Helper()
	path := filepath.Join(runtimeDir(t), "cp", artifact+"-"+version+".cp")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("classpath file for %s %s is missing (%v); run compat-tests/resolve-runtime.sh "+
			"(or point RMQ_RUNTIME_DIR at a directory holding cp/%s-%s.cp)", artifact, version, err, artifact, version)
	}
	cp := strings.TrimSpace(string(data))
	if cp == "" {
		t.Fatalf("classpath file %s is empty; delete it and rerun compat-tests/resolve-runtime.sh", path)
	}
	var missing []string
	for _, e := range strings.Split(cp, string(os.PathListSeparator)) {
		if _, err := os.Stat(e); err != nil {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("classpath file %s names %d missing jar(s), e.g. %s; rerun compat-tests/resolve-runtime.sh "+
			"after deleting the .cp file", path, len(missing), missing[0])
	}
	return cp
}

// javaBin finds the java launcher ($JAVA_HOME/bin/java, else java on PATH).
func javaBin(t *testing.T) string {
	t.Helper()
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java not found (JAVA_HOME unset or invalid, and no java on PATH): the Java broker " +
			"needs a JDK 17, e.g. apt-get install openjdk-17-jdk-headless")
	}
	return p
}

// binDir is $RMQ_BIN_DIR or <workspace>/target/debug.
func binDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("RMQ_BIN_DIR")
	if d == "" {
		d = filepath.Join(compatDir(t), "..", "target", "debug")
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		t.Fatalf("bad RMQ_BIN_DIR %q: %v", d, err)
	}
	return abs
}

// ---------------------------------------------------------------------------
// Ports

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
	portRand  = rand.New(rand.NewSource(time.Now().UnixNano() ^ int64(os.Getpid())))
)

func portFree(p int) bool {
	for _, addr := range []string{fmt.Sprintf(":%d", p), fmt.Sprintf("127.0.0.1:%d", p)} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// freePortBlock returns a port p such that p-below .. p+above are all free right now
// and were not handed out before by this process. Ports come from below the Linux
// ephemeral range so outgoing connections do not take them meanwhile.
func freePortBlock(t *testing.T, below, above int) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for attempt := 0; attempt < 500; attempt++ {
		p := 20000 + below + portRand.Intn(12000)
		ok := true
		for q := p - below; q <= p+above && ok; q++ {
			ok = !portsUsed[q] && portFree(q)
		}
		if ok {
			for q := p - below; q <= p+above; q++ {
				portsUsed[q] = true
			}
			return p
		}
	}
	t.Fatalf("no free block of %d ports found on 127.0.0.1", below+above+1)
	return 0
}

// ---------------------------------------------------------------------------
// Child processes

type proc struct {
	name     string
	cmd      *exec.Cmd
	logPath  string   // stdout+stderr
	extraLog []string // glob patterns of further log files to show on failure
	grace    time.Duration
	done     chan struct{}
	waitErr  error

	mu       sync.Mutex
	stopping bool
}

// startProc starts cmd with stdout/stderr going to logPath and registers a cleanup that
// stops it (SIGTERM, then SIGKILL after grace) and, if the test failed or the
// process died on its own, prints the tail of its logs.
func startProc(t *testing.T, name string, cmd *exec.Cmd, logPath string, grace time.Duration, extraLog ...string) *proc {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("%s: cannot create log file: %v", name, err)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Stdin = nil
	setChildAttrs(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("%s: cannot start %s: %v", name, cmd.Path, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, extraLog: extraLog, grace: grace, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Logf("%s: started pid %d, log %s", name, cmd.Process.Pid, logPath)
	t.Cleanup(func() {
		died := p.exited()
		p.stop(t)
		if died {
			t.Errorf("%s exited on its own before the test stopped it: %v", name, p.waitErr)
		}
		if died || t.Failed() {
			p.dumpLogs(t)
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.stopping
	default:
		return false
	}
}

func (p *proc) stop(t *testing.T) {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		t.Logf("%s: stopped by SIGTERM in %v (%v)", p.name, time.Since(start).Round(time.Millisecond), exitStatus(p.waitErr))
	case <-time.After(p.grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Logf("%s: did not exit within %v of SIGTERM; killed", p.name, p.grace)
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (p *proc) dumpLogs(t *testing.T) {
	files := []string{p.logPath}
	for _, pat := range p.extraLog {
		m, _ := filepath.Glob(pat)
		sort.Strings(m)
		files = append(files, m...)
	}
	for _, f := range files {
		t.Logf("----- %s: last %d lines of %s -----\n%s", p.name, logTailLines, f, tailLines(f, logTailLines))
	}
}

func tailLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitTCP polls addr until it accepts a TCP connection, failing if p exits or the
// deadline passes.
func waitTCP(t *testing.T, p *proc, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before accepting connections on %s: %v", p.name, addr, p.waitErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not accept TCP connections on %s within %v (last error: %v)", p.name, addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testDir is t.TempDir(), or a directory that is kept after the test when RMQ_KEEP_TMP
// is set (to read the processes' logs afterwards).
func testDir(t *testing.T, what string) string {
	t.Helper()
	if os.Getenv("RMQ_KEEP_TMP") == "" {
		return t.TempDir()
	}
	d, err := os.MkdirTemp("", "gocompat-"+what+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RMQ_KEEP_TMP: keeping %s", d)
	return d
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func childEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "ROCKETMQ_HOME=") ||
			strings.HasPrefix(kv, "NAMESRV_ADDR=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "ROCKETMQ_HOME="+home)
}

// ---------------------------------------------------------------------------
// Name server

type nameServer struct {
	addr string
	kind string
	proc *proc
}

// startNameServer starts our mqnamesrv, or the Java name server when RMQ_NAMESRV=java.
func startNameServer(t *testing.T) *nameServer {
	t.Helper()
	kind := os.Getenv("RMQ_NAMESRV")
	switch kind {
	case "", "rust", "ours":
		kind = "rust"
	case "java":
	default:
		t.Fatalf("RMQ_NAMESRV=%q: use java (the Java name server) or leave it unset (our mqnamesrv)", kind)
	}

	dir := testDir(t, "namesrv")
	port := freePortBlock(t, 0, 0)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	conf := filepath.Join(dir, "namesrv.conf")
	writeFile(t, conf, fmt.Sprintf("listenPort=%d\nbindAddress=127.0.0.1\nkvConfigPath=%s\nconfigStorePath=%s\n",
		port, filepath.Join(dir, "kvConfig.json"), filepath.Join(dir, "namesrv.properties")))

	var cmd *exec.Cmd
	var extra []string
	if kind == "java" {
		v := javaVersion(t, "RMQ_JAVA_5")
		cp := classpath(t, "rocketmq-namesrv", v)
		args := []string{javaNameServerMs, javaNameServerMx}
		args = append(args, javaModuleFlags...)
		args = append(args, "-Drocketmq.home.dir="+dir, "-Duser.home="+dir,
			"-cp", cp, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", conf)
		cmd = exec.Command(javaBin(t), args...)
		extra = []string{filepath.Join(dir, "logs", "rocketmqlogs", "namesrv*.log")}
	} else {
		bin := filepath.Join(binDir(t), "mqnamesrv")
		if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
			t.Fatalf("name server binary %s not found: build it (cargo build) or set RMQ_BIN_DIR; "+
				"RMQ_NAMESRV=java runs the Java name server instead", bin)
		}
		cmd = exec.Command(bin, "-c", conf)
	}
	cmd.Dir = dir
	cmd.Env = childEnv(dir)
	name := "namesrv(" + kind + ")"
	p := startProc(t, name, cmd, filepath.Join(dir, "namesrv.out.log"), nameServerGrace, extra...)
	waitTCP(t, p, addr, nameServerReady)
	t.Logf("%s listening on %s", name, addr)
	return &nameServer{addr: addr, kind: kind, proc: p}
}

// ---------------------------------------------------------------------------
// Java broker

type broker struct {
	addr    string
	name    string
	cluster string
	version string
	proc    *proc
}

// Minimal logback configuration for the 4.9 broker, which insists on reading
// $ROCKETMQ_HOME/conf/logback_broker.xml.
const logbackBroker49 = `<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${user.home}/logs/rocketmqlogs/broker.log</file>
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{0} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
`

// startBroker starts a Java master broker of the given version registered with nsAddr.
func startBroker(t *testing.T, version, nsAddr string) *broker {
	t.Helper()
	cp := classpath(t, "rocketmq-broker", version)
	java := javaBin(t)
	dir := testDir(t, "broker")
	// The broker binds listenPort-2 (fast/VIP channel), listenPort and listenPort+1 (HA).
	port := freePortBlock(t, 2, 1)
	b := &broker{
		addr:    fmt.Sprintf("127.0.0.1:%d", port),
		name:    "broker-go-" + strings.ReplaceAll(version, ".", ""),
		cluster: "GoCompatCluster",
		version: version,
	}
	store := filepath.Join(dir, "store")
	var conf strings.Builder
	fmt.Fprintf(&conf, "brokerClusterName=%s\nbrokerName=%s\nbrokerId=0\n", b.cluster, b.name)
	fmt.Fprintf(&conf, "brokerIP1=127.0.0.1\nlistenPort=%d\n", port)
	if !strings.HasPrefix(version, "4.") {
		conf.WriteString("bindAddress=127.0.0.1\n")
	}
	fmt.Fprintf(&conf, "storePathRootDir=%s\nstorePathCommitLog=%s\n", store, filepath.Join(store, "commitlog"))
	conf.WriteString("autoCreateTopicEnable=true\nautoCreateSubscriptionGroup=true\n")
	conf.WriteString("mapedFileSizeCommitLog=67108864\n")
	confPath := filepath.Join(dir, "broker.conf")
	writeFile(t, confPath, conf.String())
	if strings.HasPrefix(version, "4.") {
		writeFile(t, filepath.Join(dir, "conf", "logback_broker.xml"), logbackBroker49)
	}

	args := []string{"-Xms256m", "-Xmx512m"}
	args = append(args, javaModuleFlags...)
	args = append(args, "-Drocketmq.home.dir="+dir, "-Duser.home="+dir,
		"-cp", cp, "org.apache.rocketmq.broker.BrokerStartup", "-c", confPath, "-n", nsAddr)
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	cmd.Env = childEnv(dir)
	b.proc = startProc(t, "broker("+version+")", cmd, filepath.Join(dir, "broker.out.log"), brokerGrace,
		filepath.Join(dir, "logs", "rocketmqlogs", "broker*.log"))
	waitTCP(t, b.proc, b.addr, brokerPortReady)
	t.Logf("broker %s (%s) listening on %s", b.name, version, b.addr)
	return b
}

// ---------------------------------------------------------------------------
// Our broker

const rustBrokerGrace = 10 * time.Second // it unregisters and flushes in about a second

// brokerSelected tells whether RMQ_BROKER selects brokers of this kind ("java" or "rust"):
// unset or "all" runs both kinds.
func brokerSelected(t *testing.T, kind string) bool {
	t.Helper()
	switch v := os.Getenv("RMQ_BROKER"); v {
	case "", "all":
		return true
	case "java", "rust":
		return v == kind
	default:
		t.Fatalf("RMQ_BROKER=%q: use java (the Java brokers), rust (our mqbroker) or all (default)", v)
		return false
	}
}

// startRustBroker starts our mqbroker (RMQ_BIN_DIR) as a master registered with nsAddr,
// with args added to its command line, and waits until it printed "boot success" and
// accepts TCP connections.
func startRustBroker(t *testing.T, nsAddr string, args ...string) *broker {
	t.Helper()
	bin := filepath.Join(binDir(t), "mqbroker")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		t.Fatalf("broker binary %s not found: build it (cargo build --workspace --bins) or set RMQ_BIN_DIR", bin)
	}
	dir := testDir(t, "rustbroker")
	// listenPort, and listenPort+1 that Java's config derives the HA port from
	port := freePortBlock(t, 0, 1)
	b := &broker{
		addr:    fmt.Sprintf("127.0.0.1:%d", port),
		name:    "broker-go-rust",
		cluster: "GoCompatCluster",
		version: "rust",
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "brokerClusterName=%s\nbrokerName=%s\nbrokerId=0\n", b.cluster, b.name)
	fmt.Fprintf(&conf, "brokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nlistenPort=%d\nbindAddress=127.0.0.1\n", port)
	fmt.Fprintf(&conf, "namesrvAddr=%s\nstorePathRootDir=%s\n", nsAddr, filepath.Join(dir, "store"))
	conf.WriteString("mappedFileSizeCommitLog=67108864\nautoCreateTopicEnable=true\nautoCreateSubscriptionGroup=true\n")
	confPath := filepath.Join(dir, "broker.conf")
	writeFile(t, confPath, conf.String())

	cmd := exec.Command(bin, append([]string{"-c", confPath}, args...)...)
	cmd.Dir = dir
	cmd.Env = childEnv(dir)
	logPath := filepath.Join(dir, "broker.out.log")
	b.proc = startProc(t, "broker(rust)", cmd, logPath, rustBrokerGrace)
	waitTCP(t, b.proc, b.addr, nameServerReady)
	deadline := time.Now().Add(nameServerReady)
	for {
		data, _ := os.ReadFile(logPath)
		if bytes.Contains(data, []byte("boot success")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("our broker listens on %s but printed no \"boot success\" within %v", b.addr, nameServerReady)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("broker %s (ours) listening on %s", b.name, b.addr)
	return b
}
