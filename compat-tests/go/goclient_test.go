package compat

// The official Go client (rocketmq-client-go/v2) producing and consuming through the
// name server under test, with a real Java broker registered there.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	messageCount   = 1000
	topicQueues    = 6 // not the client's or broker's default, so the route must carry it
	routeTimeout   = 45 * time.Second
	consumeTimeout = 60 * time.Second
	propIndex      = "GoCompatIndex"
)

func init() {
	rlog.SetLogLevel("error")
}

func TestGoClientBroker5(t *testing.T) {
	runGoClientScenario(t, javaVersion(t, "RMQ_JAVA_5"))
}

func TestGoClientBroker49(t *testing.T) {
	runGoClientScenario(t, javaVersion(t, "RMQ_JAVA_49"))
}

func runGoClientScenario(t *testing.T, brokerVersion string) {
	ns := startNameServer(t)
	br := startBroker(t, brokerVersion, ns.addr)
	t.Logf("scenario: Go client %s, name server %s (%s), Java broker %s at %s",
		"v2", ns.kind, ns.addr, brokerVersion, br.addr)

	runID := fmt.Sprintf("%d%04d", time.Now().Unix()%100000, rand.Intn(10000))
	topic := "GoCompatTopic_" + runID
	group := "GoCompatGroup_" + runID

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"RouteViaNameServer", func(t *testing.T) { createTopicAndWaitForRoute(t, ns.addr, br, topic) }},
		{"AllTopicListViaNameServer", func(t *testing.T) { checkAllTopicList(t, ns.addr, topic) }},
		{"Produce1000", func(t *testing.T) { produceAll(t, ns.addr, br, topic, runID) }},
		{"Consume1000", func(t *testing.T) { consumeAll(t, ns.addr, topic, group, runID) }},
		{"AutoCreateViaTBW102", func(t *testing.T) { autoCreateTopic(t, ns.addr, br, "GoCompatAuto_"+runID) }},
		{"DeleteTopic", func(t *testing.T) { deleteTopic(t, ns.addr, br, "GoCompatAuto_"+runID) }},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			t.Fatalf("step %s failed; later steps depend on it", s.name)
		}
	}
}

// ---------------------------------------------------------------------------

type goAdmin interface {
	CreateTopic(ctx context.Context, opts ...admin.OptionCreate) error
	DeleteTopic(ctx context.Context, opts ...admin.OptionDelete) error
	FetchAllTopicList(ctx context.Context) (*admin.TopicList, error)
	FetchPublishMessageQueues(ctx context.Context, topic string) ([]*primitive.MessageQueue, error)
	Close() error
}

// newAdmin returns a Go admin client. Each one caches the routes it fetched, so a
// fresh one is needed to see a route change. Its client id is ip@pid, so only one may
// be open at a time per process: it is closed as soon as the caller's test ends.
func newAdmin(t *testing.T, nsAddr string) goAdmin {
	t.Helper()
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{nsAddr})))
	if err != nil {
		t.Fatalf("admin.NewAdmin: %v", err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	return adm
}

// createTopicAndWaitForRoute creates the topic on the broker with the Go admin client and
// polls the name server (request 105 through the Go client's route code) until the route
// names this broker with the expected queues. CreateTopic is repeated while waiting because
// the Go admin ignores the broker's response code (a broker still starting up may refuse it).
func createTopicAndWaitForRoute(t *testing.T, nsAddr string, br *broker, topic string) {
	adm := newAdmin(t, nsAddr)
	deadline := time.Now().Add(routeTimeout)
	var lastCreate time.Time
	var lastErr error
	for {
		if time.Since(lastCreate) > 2*time.Second {
			lastCreate = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := adm.CreateTopic(ctx,
				admin.WithTopicCreate(topic),
				admin.WithBrokerAddrCreate(br.addr),
				admin.WithReadQueueNums(topicQueues),
				admin.WithWriteQueueNums(topicQueues))
			cancel()
			if err != nil {
				lastErr = fmt.Errorf("CreateTopic on %s: %w", br.addr, err)
			}
		}
		mqs, err := adm.FetchPublishMessageQueues(context.Background(), topic)
		if err == nil && len(mqs) > 0 {
			checkQueues(t, mqs, topic, br.name)
			t.Logf("route of %s from the name server: %d write queues on %s", topic, len(mqs), br.name)
			return
		}
		if err != nil {
			lastErr = err
		} else {
			lastErr = fmt.Errorf("route of %s has no writable queue on a broker with a master address", topic)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no usable route for topic %s from name server %s within %v: %v", topic, nsAddr, routeTimeout, lastErr)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func checkQueues(t *testing.T, mqs []*primitive.MessageQueue, topic, brokerName string) {
	t.Helper()
	ids := map[int]bool{}
	for _, mq := range mqs {
		if mq.Topic != topic || mq.BrokerName != brokerName {
			t.Fatalf("route queue %v: want topic %s on broker %s", mq, topic, brokerName)
		}
		ids[mq.QueueId] = true
	}
	if len(mqs) != topicQueues || len(ids) != topicQueues {
		t.Fatalf("route of %s: got %d write queues (%d distinct ids), want %d", topic, len(mqs), len(ids), topicQueues)
	}
}

// ---------------------------------------------------------------------------

func msgKey(runID string, i int) string { return fmt.Sprintf("key-%s-%04d", runID, i) }
func msgTag(i int) string               { return [...]string{"TagA", "TagB"}[i%2] }
func msgBody(runID string, i int) string {
	return fmt.Sprintf("go-compat %s #%04d %s", runID, i, strings.Repeat("x", i%97))
}

func newProducer(t *testing.T, nsAddr, group, instance string) rocketmq.Producer {
	t.Helper()
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		producer.WithGroupName(group),
		producer.WithInstanceName(instance),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatalf("producer.NewDefaultProducer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("producer.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(); err != nil {
			t.Logf("producer.Shutdown: %v", err)
		}
	})
	return p
}

func produceAll(t *testing.T, nsAddr string, br *broker, topic, runID string) {
	p := newProducer(t, nsAddr, "GoCompatProducer_"+runID, "GoCompatProducer_"+runID)
	queuesUsed := map[int]int{}
	start := time.Now()
	for i := 0; i < messageCount; i++ {
		msg := primitive.NewMessage(topic, []byte(msgBody(runID, i)))
		msg.WithTag(msgTag(i))
		msg.WithKeys([]string{msgKey(runID, i)})
		msg.WithProperty(propIndex, strconv.Itoa(i))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		res, err := p.SendSync(ctx, msg)
		cancel()
		if err != nil {
			t.Fatalf("SendSync #%d: %v", i, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("SendSync #%d: status %d, want SendOK (%s)", i, res.Status, res.String())
		}
		if res.MsgID == "" || res.OffsetMsgID == "" || res.MessageQueue == nil {
			t.Fatalf("SendSync #%d: incomplete result %s", i, res.String())
		}
		if res.MessageQueue.Topic != topic || res.MessageQueue.BrokerName != br.name {
			t.Fatalf("SendSync #%d went to %v, want topic %s on %s", i, res.MessageQueue, topic, br.name)
		}
		queuesUsed[res.MessageQueue.QueueId]++
	}
	t.Logf("sent %d messages in %v; per queue %v", messageCount, time.Since(start).Round(time.Millisecond), queuesUsed)
	// The producer round-robins over the write queues it learned from the name server's route.
	if len(queuesUsed) != topicQueues {
		t.Fatalf("messages went to %d queues %v, want all %d queues of the route", len(queuesUsed), queuesUsed, topicQueues)
	}
}

// ---------------------------------------------------------------------------

type received struct {
	mu       sync.Mutex
	got      map[int]bool
	dups     int
	problems []string
	done     chan struct{}
	closed   bool
}

func (r *received) add(i int, problem string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if problem != "" {
		if len(r.problems) < 20 {
			r.problems = append(r.problems, problem)
		}
		return
	}
	if r.got[i] {
		r.dups++
		return
	}
	r.got[i] = true
	if len(r.got) == messageCount && !r.closed {
		r.closed = true
		close(r.done)
	}
}

func checkMessage(m *primitive.MessageExt, topic, runID string) (int, string) {
	i, err := strconv.Atoi(m.GetProperty(propIndex))
	if err != nil || i < 0 || i >= messageCount {
		return -1, fmt.Sprintf("msg %s: bad %s property %q", m.MsgId, propIndex, m.GetProperty(propIndex))
	}
	switch {
	case m.Topic != topic:
		return i, fmt.Sprintf("#%d: topic %q, want %q", i, m.Topic, topic)
	case string(m.Body) != msgBody(runID, i):
		return i, fmt.Sprintf("#%d: body %q, want %q", i, m.Body, msgBody(runID, i))
	case m.GetKeys() != msgKey(runID, i):
		return i, fmt.Sprintf("#%d: keys %q, want %q", i, m.GetKeys(), msgKey(runID, i))
	case m.GetTags() != msgTag(i):
		return i, fmt.Sprintf("#%d: tag %q, want %q", i, m.GetTags(), msgTag(i))
	case m.MsgId == "":
		return i, fmt.Sprintf("#%d: empty message id", i)
	}
	return i, ""
}

func consumeAll(t *testing.T, nsAddr, topic, group, runID string) {
	r := &received{got: map[int]bool{}, done: make(chan struct{})}
	c, err := consumer.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		consumer.WithGroupName(group),
		consumer.WithInstance("GoCompatConsumer_"+runID),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatalf("consumer.NewPushConsumer: %v", err)
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagB"}
	err = c.Subscribe(topic, sel, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			r.add(checkMessage(m, topic, runID))
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", topic, err)
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatalf("push consumer Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Shutdown(); err != nil {
			t.Logf("consumer.Shutdown: %v", err)
		}
	})

	select {
	case <-r.done:
	case <-time.After(consumeTimeout):
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Errorf("wrong message: %s", p)
	}
	if len(r.got) != messageCount {
		var missing []int
		for i := 0; i < messageCount && len(missing) < 20; i++ {
			if !r.got[i] {
				missing = append(missing, i)
			}
		}
		sort.Ints(missing)
		t.Fatalf("received %d of %d distinct messages within %v; first missing: %v",
			len(r.got), messageCount, consumeTimeout, missing)
	}
	t.Logf("received all %d messages in %v (%d redeliveries)", messageCount, time.Since(start).Round(time.Millisecond), r.dups)
}

// ---------------------------------------------------------------------------

// autoCreateTopic sends to a topic nobody created: the Go producer falls back to the
// route of TBW102 from the name server (defaultTopic in the send header), the broker
// creates the topic and registers it, and the name server must then serve its route.
func autoCreateTopic(t *testing.T, nsAddr string, br *broker, topic string) {
	p := newProducer(t, nsAddr, "GoCompatAutoProducer", "GoCompatAutoProducer_"+topic)
	deadline := time.Now().Add(routeTimeout)
	const n = 10
	for i := 0; i < n; i++ {
		for {
			msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("auto %d", i)))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := p.SendSync(ctx, msg)
			cancel()
			if err == nil && res.Status == primitive.SendOK {
				if res.MessageQueue.BrokerName != br.name {
					t.Fatalf("auto-created topic message went to broker %q, want %q", res.MessageQueue.BrokerName, br.name)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("send #%d to not-yet-existing topic %s (via TBW102) failed until the deadline: res=%v err=%v",
					i, topic, res, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// The broker registers the new topic with the name server; the route must appear.
	adm := newAdmin(t, nsAddr)
	for {
		mqs, err := adm.FetchPublishMessageQueues(context.Background(), topic)
		if err == nil && len(mqs) > 0 {
			for _, mq := range mqs {
				if mq.BrokerName != br.name {
					t.Fatalf("route of auto-created %s names broker %q, want %q", topic, mq.BrokerName, br.name)
				}
			}
			t.Logf("auto-created topic %s: route with %d write queues", topic, len(mqs))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("route of auto-created topic %s never appeared on the name server: %v (%d queues)", topic, err, len(mqs))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------

// checkAllTopicList: the Go admin's request 206 (GET_ALL_TOPIC_LIST_FROM_NAMESERVER).
func checkAllTopicList(t *testing.T, nsAddr, topic string) {
	adm := newAdmin(t, nsAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatalf("FetchAllTopicList: %v", err)
	}
	have := map[string]bool{}
	for _, name := range list.TopicList {
		have[name] = true
	}
	for _, want := range []string{topic, "TBW102"} {
		if !have[want] {
			t.Errorf("topic list from the name server (%d topics) lacks %s: %v", len(list.TopicList), want, list.TopicList)
		}
	}
}

// deleteTopic: the Go admin deletes the topic on the broker (215) and on the name server
// (216); afterwards the route request must answer TOPIC_NOT_EXIST.
func deleteTopic(t *testing.T, nsAddr string, br *broker, topic string) {
	func() {
		adm := newAdmin(t, nsAddr)
		defer adm.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := adm.DeleteTopic(ctx,
			admin.WithTopicDelete(topic),
			admin.WithBrokerAddrDelete(br.addr),
			admin.WithNameSrvAddr([]string{nsAddr}))
		if err != nil {
			t.Fatalf("DeleteTopic(%s): %v", topic, err)
		}
	}()
	adm := newAdmin(t, nsAddr)
	mqs, err := adm.FetchPublishMessageQueues(context.Background(), topic)
	if !errors.Is(err, rmqerrors.ErrTopicNotExist) {
		t.Fatalf("route of deleted topic %s: got %d queues, err %v; want %v", topic, len(mqs), err, rmqerrors.ErrTopicNotExist)
	}
}
