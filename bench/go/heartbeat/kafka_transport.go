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
	queue  chan *pending
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
			fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("groupcoord-bench-%d", i))),
			queue: make(chan *pending, 1<<12), closed: make(chan struct{})}
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

func (c *kafkaConn) read() {
	var size [4]byte
	fail := func(err error) {
		for {
			select {
			case p := <-c.queue:
				p.done <- result{err: err}
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
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		resp.Version = 1
		if err := resp.ReadFrom(rd.Src); err != nil {
			p.done <- result{err: fmt.Errorf("decoding ConsumerGroupHeartbeat response: %w", err)}
			continue
		}
		p.done <- result{a: fromKafka(resp)}
	}
}

func (t *kafkaTransport) heartbeat(ctx context.Context, m *member, r request) (answer, error) {
	c := t.conns[m.conn%len(t.conns)]
	p := &pending{done: make(chan result, 1)}
	c.mu.Lock()
	c.corr++
	c.buf = c.fmt.AppendRequest(c.buf[:0], toKafka(r), c.corr)
	c.queue <- p
	_, err := c.w.Write(c.buf)
	if err == nil {
		err = c.w.Flush()
	}
	c.mu.Unlock()
	if err != nil {
		return answer{}, err
	}
	select {
	case res := <-p.done:
		return res.a, res.err
	case <-ctx.Done():
		return answer{}, ctx.Err()
	}
}

func (t *kafkaTransport) close() {
	for _, c := range t.conns {
		close(c.closed)
		_ = c.conn.Close()
	}
}
