package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "groupcoord/bench/heartbeat/gcpb"
)

const assignor = "uniform"

func toProto(r request) *pb.ConsumerGroupHeartbeatRequest {
	req := &pb.ConsumerGroupHeartbeatRequest{GroupId: r.group, MemberId: r.memberID, MemberEpoch: r.epoch}
	if r.join {
		req.RebalanceTimeoutMs = proto.Int32(30000)
		req.SubscribedTopicNames = &pb.StringList{Values: []string{r.topic}}
		req.ServerAssignor = proto.String(assignor)
	}
	if r.owned != nil {
		req.TopicPartitions = &pb.TopicPartitionsList{}
		for _, t := range r.owned {
			req.TopicPartitions.Topics = append(req.TopicPartitions.Topics,
				&pb.TopicPartitions{TopicId: t.id, Partitions: t.parts})
		}
	}
	return req
}

func fromProto(resp *pb.ConsumerGroupHeartbeatResponse) answer {
	a := answer{errorCode: int(resp.ErrorCode), memberID: resp.MemberId, memberEpoch: resp.MemberEpoch}
	if resp.Assignment != nil {
		a.hasAssignment = true
		for _, t := range resp.Assignment.TopicPartitions {
			a.assignment = append(a.assignment, topicParts{t.TopicId, t.Partitions})
		}
	}
	return a
}

// statusNames are gRPC's canonical status names (grpc-go's String() spells them "Canceled", ...).
var statusNames = map[codes.Code]string{
	codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.Unavailable: "UNAVAILABLE", codes.Internal: "INTERNAL", codes.Unimplemented: "UNIMPLEMENTED",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.Unauthenticated: "UNAUTHENTICATED",
}

// errName names a transport error by its gRPC status code (CANCELLED, RESOURCE_EXHAUSTED, ...).
func errName(err error) string {
	if s, ok := status.FromError(err); ok {
		if name, ok := statusNames[s.Code()]; ok {
			return name
		}
		return s.Code().String()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "DeadlineExceeded"
	}
	return err.Error()
}

func dialAll(addr string, n int) ([]*grpc.ClientConn, error) {
	creds, err := transportCredentials()
	if err != nil {
		return nil, err
	}
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
			// one TCP connection per ClientConn, never shared: the channels are what the row says
			grpc.WithUserAgent(fmt.Sprintf("groupcoord-bench-%d", i)))
		if err != nil {
			return nil, err
		}
		c.Connect()
		conns[i] = c
	}
	return conns, nil
}

// unaryTransport: one ConsumerGroupHeartbeat call per heartbeat, over `conns` channels.
type unaryTransport struct {
	conns []*grpc.ClientConn
	stubs []pb.GroupCoordinatorClient
}

func newUnary(addr string, n int) (*unaryTransport, error) {
	conns, err := dialAll(addr, n)
	if err != nil {
		return nil, err
	}
	t := &unaryTransport{conns: conns}
	for _, c := range conns {
		t.stubs = append(t.stubs, pb.NewGroupCoordinatorClient(c))
	}
	return t, nil
}

func (t *unaryTransport) heartbeat(ctx context.Context, m *member, r request) (answer, error) {
	resp, err := t.stubs[m.conn%len(t.stubs)].ConsumerGroupHeartbeat(ctx, toProto(r))
	if err != nil {
		return answer{}, err
	}
	return fromProto(resp), nil
}

func (t *unaryTransport) close() {
	for _, c := range t.conns {
		_ = c.Close()
	}
}

// pending is one heartbeat waiting for its answer on a stream; answers come back in request order.
type pending struct {
	done chan result
}

type result struct {
	a   answer
	err error
}

// hbStream is one ConsumerGroupHeartbeatStream: Send under a lock with the waiter queued in the same
// order, and one reader goroutine that hands each answer to the oldest waiter.
type hbStream struct {
	mu     sync.Mutex
	stream grpc.BidiStreamingClient[pb.ConsumerGroupHeartbeatRequest, pb.ConsumerGroupHeartbeatResponse]
	queue  chan *pending
}

type streamTransport struct {
	conns   []*grpc.ClientConn
	streams []*hbStream
	cancel  context.CancelFunc
}

func newStreams(addr string, n int) (*streamTransport, error) {
	conns, err := dialAll(addr, n)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &streamTransport{conns: conns, cancel: cancel}
	for _, c := range conns {
		st, err := pb.NewGroupCoordinatorClient(c).ConsumerGroupHeartbeatStream(ctx)
		if err != nil {
			cancel()
			return nil, err
		}
		s := &hbStream{stream: st, queue: make(chan *pending, 1<<16)}
		go s.read()
		t.streams = append(t.streams, s)
	}
	return t, nil
}

func (s *hbStream) read() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			for {
				select {
				case p := <-s.queue:
					p.done <- result{err: err}
				default:
					return
				}
			}
		}
		p := <-s.queue
		p.done <- result{a: fromProto(resp)}
	}
}

func (t *streamTransport) heartbeat(ctx context.Context, m *member, r request) (answer, error) {
	s := t.streams[m.conn%len(t.streams)]
	p := &pending{done: make(chan result, 1)}
	s.mu.Lock()
	s.queue <- p
	err := s.stream.Send(toProto(r))
	s.mu.Unlock()
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

func (t *streamTransport) close() {
	for _, s := range t.streams {
		_ = s.stream.CloseSend()
	}
	time.Sleep(50 * time.Millisecond)
	t.cancel()
	for _, c := range t.conns {
		_ = c.Close()
	}
}

// batchStream is one ConsumerGroupHeartbeatBatchStream: a sender takes whatever heartbeats are waiting
// (after `linger`, at most 1,000) as one message; the reader hands out answers in order, however the
// server splits them over response messages.
type batchStream struct {
	stream grpc.BidiStreamingClient[pb.ConsumerGroupHeartbeatBatchRequest, pb.ConsumerGroupHeartbeatBatchResponse]
	in     chan batchItem
	queue  chan *pending
	linger time.Duration
	msgs   atomic.Int64
	hbs    atomic.Int64
}

type batchItem struct {
	req *pb.ConsumerGroupHeartbeatRequest
	p   *pending
}

type batchTransport struct {
	conns   []*grpc.ClientConn
	streams []*batchStream
	cancel  context.CancelFunc
}

func newBatchStreams(addr string, n int, linger time.Duration) (*batchTransport, error) {
	conns, err := dialAll(addr, n)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &batchTransport{conns: conns, cancel: cancel}
	for _, c := range conns {
		st, err := pb.NewGroupCoordinatorClient(c).ConsumerGroupHeartbeatBatchStream(ctx)
		if err != nil {
			cancel()
			return nil, err
		}
		s := &batchStream{stream: st, in: make(chan batchItem, 1<<16), queue: make(chan *pending, 1<<16),
			linger: linger}
		go s.send()
		go s.read()
		t.streams = append(t.streams, s)
	}
	return t, nil
}

func (s *batchStream) send() {
	for first := range s.in {
		if s.linger > 0 {
			time.Sleep(s.linger)
		}
		batch := &pb.ConsumerGroupHeartbeatBatchRequest{Heartbeats: []*pb.ConsumerGroupHeartbeatRequest{first.req}}
		s.queue <- first.p
	more:
		for len(batch.Heartbeats) < 1000 {
			select {
			case it, ok := <-s.in:
				if !ok {
					break more
				}
				batch.Heartbeats = append(batch.Heartbeats, it.req)
				s.queue <- it.p
			default:
				break more
			}
		}
		s.msgs.Add(1)
		s.hbs.Add(int64(len(batch.Heartbeats)))
		if err := s.stream.Send(batch); err != nil {
			return // the reader fails every waiter
		}
	}
}

func (s *batchStream) read() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			for {
				select {
				case p := <-s.queue:
					p.done <- result{err: err}
				default:
					return
				}
			}
		}
		for _, r := range resp.Responses {
			p := <-s.queue
			p.done <- result{a: fromProto(r)}
		}
	}
}

func (t *batchTransport) heartbeat(ctx context.Context, m *member, r request) (answer, error) {
	s := t.streams[m.conn%len(t.streams)]
	p := &pending{done: make(chan result, 1)}
	s.in <- batchItem{toProto(r), p}
	select {
	case res := <-p.done:
		return res.a, res.err
	case <-ctx.Done():
		return answer{}, ctx.Err()
	}
}

// perMessage is the mean number of heartbeats per batch message sent so far.
func (t *batchTransport) perMessage() float64 {
	var msgs, hbs int64
	for _, s := range t.streams {
		msgs += s.msgs.Load()
		hbs += s.hbs.Load()
	}
	if msgs == 0 {
		return 0
	}
	return float64(hbs) / float64(msgs)
}

func (t *batchTransport) close() {
	for _, s := range t.streams {
		close(s.in)
		_ = s.stream.CloseSend()
	}
	time.Sleep(50 * time.Millisecond)
	t.cancel()
	for _, c := range t.conns {
		_ = c.Close()
	}
}
