package compat

// The RocketMQ 5 Go client (github.com/apache/rocketmq-clients/golang/v5, gRPC) against our
// broker's own gRPC port (mqbroker --enable-proxy, Java's local proxy mode): a producer's
// normal messages, and a SimpleConsumer that receives and acks each once; a message left
// unacked comes back after its invisible duration.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rmq5 "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

func TestGoGrpcClientRustBrokerLocalProxy(t *testing.T) {
	if !brokerSelected(t, "rust") {
		t.Skip("RMQ_BROKER selects the Java brokers only")
	}
	// The client writes its log under $HOME/logs; keep it in the test's directory.
	home := testDir(t, "grpc-client-home")
	t.Setenv("HOME", home)
	os.Setenv("mq.consoleAppender.enabled", "false")
	rmq5.ResetLogger()

	ns := startNameServer(t)
	grpcPort := freePortBlock(t, 0, 0)
	remotingPort := freePortBlock(t, 0, 0)
	proxyConf := filepath.Join(testDir(t, "grpc-proxy-conf"), "rmq-proxy.json")
	writeFile(t, proxyConf, fmt.Sprintf("{\"grpcServerPort\": %d, \"remotingListenPort\": %d}\n", grpcPort, remotingPort))
	br := startRustBroker(t, ns.addr, "--enable-proxy", "-pc", proxyConf)
	endpoint := fmt.Sprintf("127.0.0.1:%d", grpcPort)
	waitTCP(t, br.proc, endpoint, nameServerReady)

	runID := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
	topic := "GoGrpcTopic_" + runID
	group := "GoGrpcGroup_" + runID
	createTopicAndWaitForRoute(t, ns.addr, br, topic)

	producer, err := rmq5.NewProducer(&rmq5.Config{Endpoint: endpoint, Credentials: &credentials.SessionCredentials{}},
		rmq5.WithTopics(topic))
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	if err := producer.Start(); err != nil {
		t.Fatalf("producer Start: %v", err)
	}
	defer producer.GracefulStop()
	const count = 50
	for i := 0; i < count; i++ {
		m := &rmq5.Message{Topic: topic, Body: []byte(fmt.Sprintf("grpc-%s-%d", runID, i))}
		m.SetTag("G")
		m.SetKeys(fmt.Sprintf("k%d", i))
		receipts, err := producer.Send(context.Background(), m)
		if err != nil || len(receipts) != 1 || receipts[0].MessageID == "" {
			t.Fatalf("send %d: %v %v", i, receipts, err)
		}
	}

	consumer, err := rmq5.NewSimpleConsumer(
		&rmq5.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}},
		rmq5.WithAwaitDuration(5*time.Second),
		rmq5.WithSubscriptionExpressions(map[string]*rmq5.FilterExpression{topic: rmq5.NewFilterExpression("G")}))
	if err != nil {
		t.Fatalf("NewSimpleConsumer: %v", err)
	}
	if err := consumer.Start(); err != nil {
		t.Fatalf("consumer Start: %v", err)
	}
	defer consumer.GracefulStop()

	// Each message once; the first one is left unacked and must come back, once, after its
	// 10 s invisible duration (not before), with its delivery attempt moved on.
	seen := map[string]int{}
	var heldBody string
	var heldAt time.Time
	acked := 0
	deadline := time.Now().Add(90 * time.Second)
	for (acked < count) && time.Now().Before(deadline) {
		views, err := consumer.Receive(context.Background(), 16, 10*time.Second)
		if err != nil {
			continue // no message within the long-polling time
		}
		for _, v := range views {
			body := string(v.GetBody())
			seen[body]++
			if heldBody == "" {
				heldBody, heldAt = body, time.Now()
				continue
			}
			if body == heldBody {
				if since := time.Since(heldAt); since < 9*time.Second {
					t.Fatalf("%s came back after %v, before its 10 s invisible duration", body, since)
				}
				if v.GetDeliveryAttempt() < 2 {
					t.Fatalf("%s came back with delivery attempt %d", body, v.GetDeliveryAttempt())
				}
			}
			if err := consumer.Ack(context.Background(), v); err != nil {
				t.Fatalf("ack %s: %v", body, err)
			}
			acked++
		}
	}
	if acked != count {
		t.Fatalf("acked %d of %d messages within the deadline (seen %d distinct)", acked, count, len(seen))
	}
	for body, n := range seen {
		want := 1
		if body == heldBody {
			want = 2
		}
		if n != want {
			t.Fatalf("%s received %d times, want %d", body, n, want)
		}
	}
	t.Logf("Go gRPC client: %d messages sent and acked through %s, %s redelivered once after its invisible time", count, endpoint, heldBody)
}
