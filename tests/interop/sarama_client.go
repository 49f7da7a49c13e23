// A Sarama (Go) client for tests/interop/test_sarama.py: produce COUNT records to partition 0 of
// TOPIC and print each acknowledged offset, consume COUNT records from its start and print each
// as a JSON line, or consume COUNT records of every partition as a member of the consumer group
// "sarama-group" (offsets committed as they are marked, and on the way out). Built against
// Debian's golang-github-shopify-sarama-dev (Sarama 1.22), in GOPATH mode, by the test.
//
//	sarama_client produce|idempotent|consume|group|admin BOOTSTRAP TOPIC COUNT VERSION CODEC
//
// With SARAMA_USER and SARAMA_PASSWORD set it authenticates with SASL/PLAIN: below 1.0 with
// SaslHandshake v0 and the bare token Kafka 0.10 read, from 1.0 with SaslAuthenticate; with
// SARAMA_MECHANISM=SCRAM-SHA-256 or SCRAM-SHA-512 too, it runs SCRAM (Debian's xdg-go/scram).
//
// idempotent is produce with Sarama's idempotent producer (InitProducerId, sequence numbers);
// admin creates TOPIC with COUNT partitions, lists the topics, then creates, lists and deletes a
// literal ACL on it (Sarama 1.22 sends the ACL requests at v0), printing a JSON line per step.
//
// VERSION is the Kafka protocol Sarama speaks (it sends no ApiVersions: 0.8.2.0, Sarama's own
// default, means Produce v0 and Fetch v0); CODEC is none, gzip, snappy or lz4.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
	"github.com/xdg-go/scram"
)

var codecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4,
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 7 {
		fail(fmt.Errorf("usage: sarama_client produce|consume BOOTSTRAP TOPIC COUNT VERSION CODEC"))
	}
	mode, bootstrap, topic := os.Args[1], []string{os.Args[2]}, os.Args[3]
	count, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail(err)
	}
	config := sarama.NewConfig()
	if config.Version, err = sarama.ParseKafkaVersion(os.Args[5]); err != nil {
		fail(err)
	}
	codec, known := codecs[os.Args[6]]
	if !known {
		fail(fmt.Errorf("unknown codec %q", os.Args[6]))
	}
	config.Producer.Compression = codec
	if user := os.Getenv("SARAMA_USER"); user != "" {
		config.Net.SASL.Enable = true
		config.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		config.Net.SASL.User, config.Net.SASL.Password = user, os.Getenv("SARAMA_PASSWORD")
		if hash, scram := scramHashes[os.Getenv("SARAMA_MECHANISM")]; scram {
			config.Net.SASL.Mechanism = sarama.SASLMechanism(os.Getenv("SARAMA_MECHANISM"))
			config.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: hash} }
		}
	}
	config.Producer.Return.Successes = true
	config.Consumer.Return.Errors = true // a record it cannot read fails the run, not a retry loop
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Metadata.Retry.Backoff = 50 * time.Millisecond // the first produce auto-creates the topic
	if mode == "idempotent" {
		config.Producer.Idempotent = true
		config.Producer.RequiredAcks = sarama.WaitForAll
		config.Net.MaxOpenRequests = 1
		mode = "produce"
	}
	switch mode {
	case "produce":
		producer, err := sarama.NewSyncProducer(bootstrap, config)
		if err != nil {
			fail(err)
		}
		defer producer.Close()
		for i := 0; i < count; i++ {
			message := &sarama.ProducerMessage{Topic: topic, Partition: 0,
				Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}
			if _, offset, err := producer.SendMessage(message); err != nil {
				fail(err)
			} else {
				fmt.Println(offset)
			}
		}
	case "consume":
		consumer, err := sarama.NewConsumer(bootstrap, config)
		if err != nil {
			fail(err)
		}
		defer consumer.Close()
		partition, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			fail(err)
		}
		defer partition.Close()
		for i := 0; i < count; i++ {
			select {
			case message := <-partition.Messages():
				line, _ := json.Marshal(map[string]interface{}{
					"offset": message.Offset, "key": string(message.Key), "value": string(message.Value)})
				fmt.Println(string(line))
			case consumeErr := <-partition.Errors():
				fail(consumeErr)
			case <-time.After(15 * time.Second):
				fail(fmt.Errorf("no record %d within 15 s", i))
			}
		}
	case "group":
		config.Consumer.Offsets.Initial = sarama.OffsetOldest
		group, err := sarama.NewConsumerGroup(bootstrap, "sarama-group", config)
		if err != nil {
			fail(err)
		}
		member := &member{want: count, done: make(chan struct{})}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		go func() {
			for ctx.Err() == nil { // Consume returns at each rebalance
				if err := group.Consume(ctx, []string{topic}, member); err != nil && ctx.Err() == nil {
					fail(err)
				}
			}
		}()
		select {
		case <-member.done:
		case <-ctx.Done():
			fail(fmt.Errorf("the group did not read %d records within 30 s", count))
		}
		cancel()
		if err := group.Close(); err != nil { // leaves the group, committing what was marked
			fail(err)
		}
	case "admin":
		admin, err := sarama.NewClusterAdmin(bootstrap, config)
		if err != nil {
			fail(err)
		}
		defer admin.Close()
		detail := &sarama.TopicDetail{NumPartitions: int32(count), ReplicationFactor: 1}
		if err := admin.CreateTopic(topic, detail, false); err != nil {
			fail(err)
		}
		topics, err := admin.ListTopics()
		if err != nil {
			fail(err)
		}
		report("topic", map[string]interface{}{"partitions": topics[topic].NumPartitions})
		resource := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic,
			ResoucePatternType: sarama.AclPatternLiteral}
		acl := sarama.Acl{Principal: "User:alice", Host: "*", Operation: sarama.AclOperationRead,
			PermissionType: sarama.AclPermissionAllow}
		if err := admin.CreateACL(resource, acl); err != nil {
			fail(err)
		}
		any := sarama.AclFilter{ResourceType: sarama.AclResourceAny, Operation: sarama.AclOperationAny,
			PermissionType: sarama.AclPermissionAny, ResourcePatternTypeFilter: sarama.AclPatternAny}
		listed, err := admin.ListAcls(any)
		if err != nil {
			fail(err)
		}
		for _, resourceAcls := range listed {
			for _, acl := range resourceAcls.Acls {
				report("acl", map[string]interface{}{"resource": resourceAcls.ResourceName, "principal": acl.Principal})
			}
		}
		deleted, err := admin.DeleteACL(any, false)
		if err != nil {
			fail(err)
		}
		report("deleted", map[string]interface{}{"count": len(deleted)})
	default:
		fail(fmt.Errorf("unknown mode %q", mode))
	}
}

var scramHashes = map[string]scram.HashGeneratorFcn{"SCRAM-SHA-256": scram.SHA256, "SCRAM-SHA-512": scram.SHA512}

// scramClient is Sarama's SCRAMClient over xdg-go/scram's client conversation.
type scramClient struct {
	hash         scram.HashGeneratorFcn
	conversation *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conversation = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conversation.Step(challenge) }
func (c *scramClient) Done() bool                            { return c.conversation.Done() }

func report(step string, fields map[string]interface{}) {
	fields["step"] = step
	line, _ := json.Marshal(fields)
	fmt.Println(string(line))
}

// member prints each record it is given, marks it for commit, and says when it has seen want.
// Its partitions' claims run in goroutines of their own, hence the lock.
type member struct {
	lock       sync.Mutex
	want, seen int
	done       chan struct{}
}

func (m *member) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		line, _ := json.Marshal(map[string]interface{}{
			"partition": message.Partition, "offset": message.Offset, "value": string(message.Value)})
		m.lock.Lock()
		fmt.Println(string(line))
		session.MarkMessage(message, "")
		if m.seen++; m.seen == m.want {
			close(m.done)
		}
		m.lock.Unlock()
	}
	return nil
}
