package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"sort"
)

// topicParts is one topic of an assignment: `id` as the server names it (groupcoord's string form, or
// Kafka's 16-byte Uuid as 32 hex digits) and the partitions.
type topicParts struct {
	id    string
	parts []int32
}

// answer is what a heartbeat response says, whatever the protocol.
type answer struct {
	errorCode     int
	memberID      string
	memberEpoch   int32
	hasAssignment bool
	assignment    []topicParts
}

// member is one KIP-848 consumer as its client sees it: epoch 0 joins with the subscription; an assignment
// received is reported back as owned partitions in the next heartbeat; otherwise a heartbeat carries only
// the group, the member id and the epoch (Kafka's "null if unchanged" for everything else).
type member struct {
	index    int
	group    string
	topic    string
	memberID string
	epoch    int32
	owned    []topicParts
	sendOwn  bool // owned changed since the server last heard it
	conn     int  // which channel / stream / connection carries this member
}

// request is what the next heartbeat sends; transports translate it to their wire format.
type request struct {
	group, memberID, topic string
	epoch                  int32
	join                   bool         // epoch 0: subscription, rebalance timeout and assignor
	owned                  []topicParts // sent when non-nil (join: empty, present)
}

func newMember(index int, group, topic string, conn int) *member {
	return &member{index: index, group: group, topic: topic, memberID: randomID(), conn: conn}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:]) // Kafka's Uuid.toString() form
}

func (m *member) next() request {
	r := request{group: m.group, memberID: m.memberID, topic: m.topic, epoch: m.epoch}
	if m.epoch == 0 {
		r.join = true
		r.owned = []topicParts{}
	} else if m.sendOwn {
		r.owned = m.owned
	}
	return r
}

func (m *member) leave() request {
	return request{group: m.group, memberID: m.memberID, epoch: -1}
}

// apply takes the answer to `r`; it returns whether the member's view changed (not stable yet).
func (m *member) apply(r request, a answer) bool {
	if a.errorCode != 0 {
		m.epoch, m.owned, m.sendOwn = 0, nil, false // fenced or unknown: rejoin, as a client does
		return true
	}
	changed := a.memberEpoch != m.epoch || r.owned != nil
	if r.owned != nil && !r.join {
		m.sendOwn = false
	}
	if a.memberID != "" {
		m.memberID = a.memberID
	}
	m.epoch = a.memberEpoch
	if a.hasAssignment {
		next := normalize(a.assignment)
		if r.join || !sameAssignment(next, m.owned) {
			m.owned, m.sendOwn, changed = next, true, true
		}
	}
	return changed
}

func normalize(ts []topicParts) []topicParts {
	out := make([]topicParts, 0, len(ts))
	for _, t := range ts {
		p := slices.Clone(t.parts)
		slices.Sort(p)
		out = append(out, topicParts{t.id, p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func sameAssignment(a, b []topicParts) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].id != b[i].id || !slices.Equal(a[i].parts, b[i].parts) {
			return false
		}
	}
	return true
}

// transport sends one member's heartbeat and waits for its answer. A non-nil error is a transport
// failure, named by errName (a gRPC status code, or a Kafka connection error).
type transport interface {
	heartbeat(ctx context.Context, m *member, r request) (answer, error)
	close()
}
