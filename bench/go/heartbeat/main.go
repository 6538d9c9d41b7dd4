// Command heartbeat is issue 30's load generator that is not Python: it joins N members in G groups on one
// topic, brings them to a stable assignment, then sends steady heartbeats open loop at an offered rate and
// prints the achieved rate, latency percentiles from each heartbeat's scheduled send time (so a backlog
// counts in full: coordinated-omission free), errors by name, and, with -server-pid, the server's CPU per
// heartbeat from /proc minus an idle baseline: one summary line on stderr, the full result as JSON on stdout.
//
// It speaks groupcoord's gRPC API (stubs generated from proto/ into gcpb/: unary ConsumerGroupHeartbeat,
// ConsumerGroupHeartbeatStream, ConsumerGroupHeartbeatBatchStream) or Kafka's own protocol
// (ConsumerGroupHeartbeat v1 through franz-go's kmsg) against a Kafka broker's group coordinator.
//
//	go run . -target grpc -addr 127.0.0.1:50051 -rpc unary -rate 3000 -seconds 30
//	go run . -target kafka -addr 127.0.0.1:9092 -conns 0 -rate 3000
//
// python -m bench.heartbeat_cost runs it against every server, interleaved, and prints one table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	target, addr, rpc, topic, prefix string
	members, groups, conns, joinConc int
	rate, idleCPURate                float64
	seconds, warmup, timeout, drain  time.Duration
	linger                           time.Duration
	serverPID                        int
	leave                            bool
}

func parseFlags() options {
	var o options
	var seconds, warmup float64
	flag.StringVar(&o.target, "target", "grpc", "grpc (groupcoord's API) or kafka (a Kafka broker's coordinator)")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:50051", "server HOST:PORT")
	flag.StringVar(&o.rpc, "rpc", "unary", "grpc: unary, stream or batch")
	flag.StringVar(&o.topic, "topic", "bench", "the topic every member subscribes to")
	flag.StringVar(&o.prefix, "group-prefix", "hb", "group ids are PREFIX-0 .. PREFIX-(G-1)")
	flag.IntVar(&o.members, "members", 2000, "members in all")
	flag.IntVar(&o.groups, "groups", 20, "groups (members are spread evenly)")
	flag.IntVar(&o.conns, "conns", 20, "gRPC channels / streams, or Kafka connections (0: one per member)")
	flag.IntVar(&o.joinConc, "join-concurrency", 200, "heartbeats in flight while joining and reconciling")
	flag.Float64Var(&o.rate, "rate", 3000, "offered heartbeats per second, all members together")
	flag.Float64Var(&seconds, "seconds", 30, "length of the measured window")
	flag.Float64Var(&warmup, "warmup", 5, "steady load before the measured window (not measured)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "deadline of one heartbeat")
	flag.DurationVar(&o.drain, "drain", 10*time.Second, "after the window, wait this long for late answers")
	flag.DurationVar(&o.linger, "linger", 0, "batch: wait this long before each message")
	flag.IntVar(&o.serverPID, "server-pid", 0, "measure this process's CPU (and its descendants') in the window")
	flag.Float64Var(&o.idleCPURate, "idle-cpu-rate", 0, "the server's idle CPU seconds per second, subtracted")
	flag.BoolVar(&o.leave, "leave", true, "members leave (epoch -1) at the end, so the next run starts clean")
	flag.Parse()
	o.seconds = time.Duration(seconds * float64(time.Second))
	o.warmup = time.Duration(warmup * float64(time.Second))
	if o.conns <= 0 {
		o.conns = o.members
	}
	return o
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func openTransport(o options) (transport, error) {
	if o.target == "kafka" {
		return newKafka(o.addr, o.conns)
	}
	switch o.rpc {
	case "unary":
		return newUnary(o.addr, o.conns)
	case "stream":
		return newStreams(o.addr, o.conns)
	case "batch":
		return newBatchStreams(o.addr, o.conns, o.linger)
	}
	return nil, fmt.Errorf("unknown -rpc %q (unary, stream, batch)", o.rpc)
}

// each runs fn for every member, at most `conc` at a time.
func each(members []*member, conc int, fn func(m *member)) {
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for _, m := range members {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(m)
		}()
	}
	wg.Wait()
}

// stabilize heartbeats every member in rounds until a round changes nothing, every member owns partitions
// and has reported them, and the members of each group share one epoch.
func stabilize(o options, t transport, members []*member) error {
	deadline := time.Now().Add(180 * time.Second)
	lastReport := time.Now()
	for round := 1; ; round++ {
		var changed, failed atomic.Int64
		var lastErr atomic.Value
		each(members, o.joinConc, func(m *member) {
			ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
			defer cancel()
			r := m.next()
			a, err := t.heartbeat(ctx, m, r)
			if err != nil {
				failed.Add(1)
				lastErr.Store(errName(err))
				return
			}
			if a.errorCode != 0 {
				failed.Add(1)
				lastErr.Store(fmt.Sprintf("error_code=%d", a.errorCode))
			}
			if m.apply(r, a) {
				changed.Add(1)
			}
		})
		epochs := map[string]int32{}
		settled := changed.Load() == 0 && failed.Load() == 0
		for _, m := range members {
			if e, ok := epochs[m.group]; (ok && e != m.epoch) || len(m.owned) == 0 || m.sendOwn {
				settled = false
			}
			epochs[m.group] = m.epoch
		}
		if settled || round%10 == 1 || time.Since(lastReport) > 2*time.Second {
			progress("round %d: %d changed, %d failed%s", round, changed.Load(), failed.Load(), errSuffix(&lastErr))
			lastReport = time.Now()
		}
		if settled {
			return nil
		}
		if time.Now().After(deadline) || round >= 200 {
			return fmt.Errorf("members not stable after %d rounds", round)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

func errSuffix(v *atomic.Value) string {
	if s, ok := v.Load().(string); ok {
		return " (" + s + ")"
	}
	return ""
}

// steady runs the open-loop schedule: member i heartbeats at t0 + (i/N + k) * N/rate. A member never has
// two heartbeats in flight; one due while the previous is out goes when that one returns, its latency still
// counted from when it was due.
func steady(o options, t transport, members []*member, rec *recorder, t0 time.Time) {
	n := len(members)
	period := time.Duration(float64(n) / o.rate * float64(time.Second))
	end := rec.windowEnd
	hardStop := end.Add(o.drain)
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := t0.Add(period * time.Duration(i) / time.Duration(n))
			for next.Before(end) {
				now := time.Now()
				if now.After(hardStop) {
					for ; next.Before(end); next = next.Add(period) {
						rec.gaveUp(next, now)
					}
					return
				}
				if d := next.Sub(now); d > 0 {
					time.Sleep(d)
				}
				ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
				r := m.next()
				a, err := t.heartbeat(ctx, m, r)
				cancel()
				switch {
				case err != nil:
					rec.failed(next, errName(err))
				case a.errorCode != 0:
					rec.failed(next, fmt.Sprintf("error_code=%d", a.errorCode))
					m.apply(r, a)
				default:
					rec.done(next, time.Now())
					m.apply(r, a)
				}
				next = next.Add(period)
			}
		}()
	}
	wg.Wait()
}

func ownCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func run(o options) (map[string]any, error) {
	t, err := openTransport(o)
	if err != nil {
		return nil, err
	}
	defer t.close()
	per := o.members / o.groups
	members := make([]*member, 0, o.members)
	for i := 0; i < o.members; i++ {
		members = append(members, newMember(i, fmt.Sprintf("%s-%d", o.prefix, i/per), o.topic, i%o.conns))
	}
	if kt, ok := t.(*kafkaTransport); ok {
		groups := make([]string, o.groups)
		for g := range groups {
			groups[g] = fmt.Sprintf("%s-%d", o.prefix, g)
		}
		if err := kt.findCoordinators(groups); err != nil {
			return nil, err
		}
	}
	joinStart := time.Now()
	progress("joining %d members in %d groups (%s %s, %d connections)", o.members, o.groups, o.target, o.rpc, o.conns)
	if err := stabilize(o, t, members); err != nil {
		return nil, err
	}
	joinS := time.Since(joinStart).Seconds()
	progress("stable after %.1f s; %.0f heartbeats/s for %s warm-up + %s measured", joinS, o.rate, o.warmup, o.seconds)
	t0 := time.Now().Add(200 * time.Millisecond)
	rec := newRecorder(t0.Add(o.warmup), t0.Add(o.warmup+o.seconds))
	var cpu0, cpu1, own0, own1, sys0, sys1 float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Until(rec.windowStart))
		own0 = ownCPU()
		if o.serverPID > 0 {
			u, sy := processCPUSplit(o.serverPID)
			cpu0, sys0 = u+sy, sy
		}
		progress("measuring")
		time.Sleep(time.Until(rec.windowEnd))
		own1 = ownCPU()
		if o.serverPID > 0 {
			u, sy := processCPUSplit(o.serverPID)
			cpu1, sys1 = u+sy, sy
		}
		progress("window over; waiting for late answers")
	}()
	steady(o, t, members, rec, t0)
	<-done
	out := rec.summary()
	out["target"], out["rpc"], out["conns"] = o.target, o.rpc, o.conns
	out["members"], out["groups"], out["offered"] = o.members, o.groups, o.rate
	out["join_s"] = joinS
	out["client_cpu_s"] = own1 - own0
	if bt, ok := t.(*batchTransport); ok {
		out["heartbeats_per_message"] = bt.perMessage()
	}
	if o.serverPID > 0 {
		secs := rec.windowEnd.Sub(rec.windowStart).Seconds()
		out["server_cpu_s"] = cpu1 - cpu0
		out["server_sys_cpu_s"] = sys1 - sys0
		out["idle_cpu_s"] = o.idleCPURate * secs
		if c := out["completed"].(int); c > 0 {
			out["cpu_per_heartbeat_us"] = (cpu1 - cpu0 - o.idleCPURate*secs) / float64(c) * 1e6
		}
	}
	if o.leave {
		each(members, o.joinConc, func(m *member) {
			ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
			defer cancel()
			_, _ = t.heartbeat(ctx, m, m.leave())
		})
	}
	return out, nil
}

func main() {
	o := parseFlags()
	out, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "heartbeat:", err)
		os.Exit(1)
	}
	cpu := "-"
	if v, ok := out["cpu_per_heartbeat_us"].(float64); ok {
		cpu = fmt.Sprintf("%.0f µs", v)
	}
	progress("offered %.0f/s: achieved %.0f/s, p50 %.2f ms, p99 %.2f ms, errors %v, unanswered %v, server CPU per heartbeat %s",
		o.rate, out["achieved"], out["p50_ms"], out["p99_ms"], out["errors"], out["unfinished"], cpu)
	enc := json.NewEncoder(os.Stdout)
	_ = enc.Encode(out)
}
