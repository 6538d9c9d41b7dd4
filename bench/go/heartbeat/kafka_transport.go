package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaTransport drives a Kafka broker's own group coordinator with ConsumerGroupHeartbeat v1 (API key 68),
// franz-go's kmsg encoding the requests and decoding the responses. Each connection is a plain TCP socket
// with Kafka's framing; a connection carries its requests in order (the broker answers one connection's
// requests in order), so a member on a shared connection pipelines behind the others, as a client
// multiplexing consumers over one socket would.
type kafkaTransport struct {
	conns []*kafkaConn
}

type kafkaConn struct {
	mu     sync.Mutex
	conn   net.Conn
	w      *bufio.Writer
	r      *bufio.Reader
	corr   int32
	fmt    *kmsg.RequestFormatter
	queue  chan *kafkaPending
	buf    []byte
	closed chan struct{}
}

func newKafka(addr string, n int) (*kafkaTransport, error) {
	t := &kafkaTransport{}
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("connection %d to %s: %w", i, addr, err)
		}
		kc := &kafkaConn{conn: c, w: bufio.NewWriter(c), r: bufio.NewReaderSize(c, 64<<10),
			fmt:   kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("groupcoord-bench-%d", i))),
			queue: make(chan *kafkaPending, 1<<12), closed: make(chan struct{})}
		go kc.read()
		t.conns = append(t.conns, kc)
	}
	return t, nil
}

func kafkaTopicID(id string) [16]byte {
	var out [16]byte
	_, _ = hex.Decode(out[:], []byte(id))
	return out
}

func toKafka(r request) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = r.group, r.memberID, r.epoch
	req.RebalanceTimeoutMillis = -1
	if r.join {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{r.topic}
		req.ServerAssignor = kmsg.StringPtr(assignor)
	}
	if r.owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range r.owned {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{
				TopicID: kafkaTopicID(t.id), Partitions: t.parts})
		}
	}
	return req
}

func fromKafka(resp *kmsg.ConsumerGroupHeartbeatResponse) answer {
	a := answer{errorCode: int(resp.ErrorCode), memberEpoch: resp.MemberEpoch}
	if resp.MemberID != nil {
		a.memberID = *resp.MemberID
	}
	if resp.Assignment != nil {
		a.hasAssignment = true
		for _, t := range resp.Assignment.Topics {
			a.assignment = append(a.assignment, topicParts{hex.EncodeToString(t.TopicID[:]), t.Partitions})
		}
	}
	return a
}

// kafkaPending is one request waiting for its response (a connection answers in request order).
type kafkaPending struct {
	resp kmsg.Response
	done chan error
}

func (c *kafkaConn) read() {
	var size [4]byte
	fail := func(err error) {
		for {
			select {
			case p := <-c.queue:
				p.done <- err
			case <-c.closed:
				return
			}
		}
	}
	for {
		if _, err := io.ReadFull(c.r, size[:]); err != nil {
			fail(err)
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c.r, body); err != nil {
			fail(err)
			return
		}
		p := <-c.queue
		// Response header v1 (flexible): correlation id, then tagged fields.
		rd := kbin.Reader{Src: body[4:]}
		for n := rd.Uvarint(); n > 0; n-- {
			rd.Uvarint()
			rd.Span(int(rd.Uvarint()))
		}
		if err := p.resp.ReadFrom(rd.Src); err != nil {
			p.done <- fmt.Errorf("decoding response to API key %d: %w", p.resp.Key(), err)
			continue
		}
		p.done <- nil
	}
}

// roundTrip sends `req` (a flexible version: header v2 out, v1 back) and decodes its response.
func (c *kafkaConn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	p := &kafkaPending{resp: req.ResponseKind(), done: make(chan error, 1)}
	c.mu.Lock()
	c.corr++
	c.buf = c.fmt.AppendRequest(c.buf[:0], req, c.corr)
	c.queue <- p
	_, err := c.w.Write(c.buf)
	if err == nil {
		err = c.w.Flush()
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case err := <-p.done:
		return p.resp, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *kafkaTransport) heartbeat(ctx context.Context, m *member, r request) (answer, error) {
	resp, err := t.conns[m.conn%len(t.conns)].roundTrip(ctx, toKafka(r))
	if err != nil {
		return answer{}, err
	}
	return fromKafka(resp.(*kmsg.ConsumerGroupHeartbeatResponse)), nil
}

// findCoordinators asks FindCoordinator (v4) for every group until each has one: the broker creates
// __consumer_offsets on the first such request and answers COORDINATOR_NOT_AVAILABLE until it exists.
// A single broker is every group's coordinator, so the answer only says when the groups can be served.
func (t *kafkaTransport) findCoordinators(groups []string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 4
		req.CoordinatorKeys = groups
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := t.conns[0].roundTrip(ctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("FindCoordinator: %w", err)
		}
		missing := 0
		for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
			if c.ErrorCode != 0 {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("FindCoordinator: %d groups without a coordinator after 60 s", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (t *kafkaTransport) close() {
	for _, c := range t.conns {
		close(c.closed)
		_ = c.conn.Close()
	}
}
