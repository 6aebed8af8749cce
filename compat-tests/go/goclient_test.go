package compat

// The official Go client (rocketmq-client-go/v2) producing and consuming through the
// name server under test, with a real Java broker or our broker registered there.

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
	if !brokerSelected(t, "java") {
		t.Skip("RMQ_BROKER selects our broker only")
	}
	ns := startNameServer(t)
	runGoClientScenario(t, ns, startBroker(t, javaVersion(t, "RMQ_JAVA_5"), ns.addr))
}

func TestGoClientBroker49(t *testing.T) {
	if !brokerSelected(t, "java") {
		t.Skip("RMQ_BROKER selects our broker only")
	}
	ns := startNameServer(t)
	runGoClientScenario(t, ns, startBroker(t, javaVersion(t, "RMQ_JAVA_49"), ns.addr))
}

// TestGoClientRustBroker runs the same steps against our broker (mqbroker).
func TestGoClientRustBroker(t *testing.T) {
	if !brokerSelected(t, "rust") {
		t.Skip("RMQ_BROKER selects the Java brokers only")
	}
	ns := startNameServer(t)
	runGoClientScenario(t, ns, startRustBroker(t, ns.addr))
}

func runGoClientScenario(t *testing.T, ns *nameServer, br *broker) {
	t.Logf("scenario: Go client %s, name server %s (%s), broker %s (%s) at %s",
		"v2", ns.kind, ns.addr, br.name, br.version, br.addr)

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
		{"ConsumeRetryLater", func(t *testing.T) { consumeRetryLater(t, ns.addr, br, topic, "GoCompatRetryGroup_"+runID, runID) }},
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

// ---------------------------------------------------------------------------

const (
	retryMessages = 5
	retryFailures = 2 // the listener fails the chosen message this many times, then succeeds
	retryTimeout  = 60 * time.Second
)

type retryDelivery struct {
	reconsumeTimes int32
	fromTopic      string // the queue's topic the message was pulled from
	retryTopicProp string
	topic          string
	body           string
}

// consumeRetryLater: a push consumer's listener returns ConsumeRetryLater for one message the
// first 2 times, then succeeds. The Go client sends the message back to the broker
// (CONSUMER_SEND_MSG_BACK, 36, delay level 1 = 1 s; it has no fallback send), the broker
// stores it in %RETRY%<group> with reconsumeTimes+1 after the delay, and the consumer, which
// subscribes to that topic too, gets it again: 3 deliveries with reconsumeTimes 0, 1, 2, the
// later ones pulled from %RETRY%<group> with RETRY_TOPIC naming the original topic (which the
// client restores), body intact. The other messages arrive once.
//
// The group's %RETRY% topic appears when the broker gets the group's first heartbeat (it
// creates the topic and registers it with the name server). A consumer learns a new route only
// on its 30 s name-server poll, and then takes the queue on its 20 s rebalance; so a first
// consumer of the group is started (its heartbeat creates the topic) and stopped once the name
// server routes %RETRY%<group>, and the consumer that does the work knows the route at start.
func consumeRetryLater(t *testing.T, nsAddr string, br *broker, topic, group, runID string) {
	const tag = "TagRetry"
	awaitRetryTopic(t, nsAddr, br, topic, group, tag, runID)

	p := newProducer(t, nsAddr, "GoCompatRetryProducer_"+runID, "GoCompatRetryProducer_"+runID)
	keys := make([]string, retryMessages)
	for i := range keys {
		keys[i] = fmt.Sprintf("retry-%s-%d", runID, i)
		msg := primitive.NewMessage(topic, []byte("retry body "+keys[i]))
		msg.WithTag(tag)
		msg.WithKeys([]string{keys[i]})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		res, err := p.SendSync(ctx, msg)
		cancel()
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync of %s: res=%v err=%v", keys[i], res, err)
		}
	}
	failing := keys[retryMessages/2]

	var mu sync.Mutex
	got := map[string][]retryDelivery{}
	done := make(chan struct{})
	closed := false
	c, err := consumer.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		consumer.WithGroupName(group),
		consumer.WithInstance("GoCompatRetryConsumer_"+runID),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumeMessageBatchMaxSize(1),
	)
	if err != nil {
		t.Fatalf("consumer.NewPushConsumer: %v", err)
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: tag}
	err = c.Subscribe(topic, sel, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		from := ""
		if mctx, ok := primitive.GetConsumerCtx(ctx); ok && mctx.MQ != nil {
			from = mctx.MQ.Topic
		}
		mu.Lock()
		defer mu.Unlock()
		result := consumer.ConsumeSuccess
		for _, m := range msgs {
			key := m.GetKeys()
			got[key] = append(got[key], retryDelivery{
				reconsumeTimes: m.ReconsumeTimes,
				fromTopic:      from,
				retryTopicProp: m.GetProperty(primitive.PropertyRetryTopic),
				topic:          m.Topic,
				body:           string(m.Body),
			})
			if key == failing && len(got[key]) <= retryFailures {
				result = consumer.ConsumeRetryLater
			}
		}
		if result == consumer.ConsumeRetryLater {
			if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
				cc.DelayLevelWhenNextConsume = 1 // 1 s instead of the default 10 s, 30 s
			}
		}
		complete := len(got[failing]) >= retryFailures+1
		for _, k := range keys {
			complete = complete && len(got[k]) > 0
		}
		if complete && !closed {
			closed = true
			close(done)
		}
		return result, nil
	})
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", topic, err)
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatalf("push consumer Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })

	select {
	case <-done:
		time.Sleep(2 * time.Second) // a further, unwanted redelivery would show up here
	case <-time.After(retryTimeout):
	}
	mu.Lock()
	defer mu.Unlock()
	summary := fmt.Sprintf("deliveries of %s: %+v", failing, got[failing])
	deliveries := got[failing]
	if len(deliveries) != retryFailures+1 {
		t.Fatalf("the message failed %d times was delivered %d times within %v, want %d (the broker must put it "+
			"into %%RETRY%%%s on CONSUMER_SEND_MSG_BACK and deliver it after the delay); %s",
			retryFailures, len(deliveries), retryTimeout, retryFailures+1, group, summary)
	}
	for i, d := range deliveries {
		if d.reconsumeTimes != int32(i) {
			t.Errorf("delivery %d: reconsumeTimes %d, want %d; %s", i, d.reconsumeTimes, i, summary)
		}
		if d.body != "retry body "+failing || d.topic != topic {
			t.Errorf("delivery %d: topic %q body %q, want %q %q", i, d.topic, d.body, topic, "retry body "+failing)
		}
		wantFrom, wantProp := topic, ""
		if i > 0 {
			wantFrom, wantProp = "%RETRY%"+group, topic
		}
		if d.fromTopic != wantFrom || d.retryTopicProp != wantProp {
			t.Errorf("delivery %d: pulled from %q with RETRY_TOPIC %q, want %q and %q", i, d.fromTopic, d.retryTopicProp, wantFrom, wantProp)
		}
	}
	for _, k := range keys {
		if k != failing && len(got[k]) != 1 {
			t.Errorf("message %s (consumed fine) was delivered %d times, want 1: %+v", k, len(got[k]), got[k])
		}
	}
	t.Logf("retry: %s delivered %d times (reconsumeTimes 0..%d, via %%RETRY%%%s) in %v", failing, len(deliveries),
		retryFailures, group, time.Since(start).Round(time.Millisecond))
}

// awaitRetryTopic starts a consumer of the group, waits until the name server routes the group's
// %RETRY% topic to the broker, and stops the consumer. No message with the tag exists yet, so the
// offsets it may commit are before every message the group is meant to get.
func awaitRetryTopic(t *testing.T, nsAddr string, br *broker, topic, group, tag, runID string) {
	c, err := consumer.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		consumer.WithGroupName(group),
		consumer.WithInstance("GoCompatRetryWarmup_"+runID),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatalf("consumer.NewPushConsumer: %v", err)
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: tag}
	err = c.Subscribe(topic, sel, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", topic, err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("push consumer Start: %v", err)
	}
	defer func() { _ = c.Shutdown() }()
	retryTopic := "%RETRY%" + group
	adm := newAdmin(t, nsAddr)
	defer adm.Close()
	deadline := time.Now().Add(routeTimeout)
	for {
		mqs, err := adm.FetchPublishMessageQueues(context.Background(), retryTopic)
		if err == nil && len(mqs) > 0 {
			for _, mq := range mqs {
				if mq.BrokerName != br.name {
					t.Fatalf("route of %s names broker %q, want %q", retryTopic, mq.BrokerName, br.name)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the name server has no route of %s within %v of the group's first heartbeat "+
				"(the broker creates it on HEART_BEAT and registers it): %v", retryTopic, routeTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
