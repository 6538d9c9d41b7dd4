package main

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// recorder collects what the measured window saw: latencies from each heartbeat's scheduled send time
// (coordinated-omission free: a heartbeat that waited behind a slow one counts the wait), completions
// inside the window, and errors by name.
type recorder struct {
	mu          sync.Mutex
	windowStart time.Time
	windowEnd   time.Time
	latencies   []float64 // ms, heartbeats scheduled inside the window that completed OK
	completedIn int       // OK completions whose completion time is inside the window
	unfinished  []float64 // ms so far, heartbeats scheduled inside the window that never completed
	errors      map[string]int
}

func newRecorder(start, end time.Time) *recorder {
	return &recorder{windowStart: start, windowEnd: end, errors: map[string]int{}}
}

func (r *recorder) inWindow(t time.Time) bool {
	return !t.Before(r.windowStart) && t.Before(r.windowEnd)
}

// done records one OK heartbeat scheduled at `scheduled` and answered at `at`.
func (r *recorder) done(scheduled, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inWindow(scheduled) {
		r.latencies = append(r.latencies, float64(at.Sub(scheduled))/1e6)
	}
	if r.inWindow(at) {
		r.completedIn++
	}
}

// failed counts an error (a gRPC status or a Kafka error code) of a heartbeat scheduled at `scheduled`.
func (r *recorder) failed(scheduled time.Time, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inWindow(scheduled) {
		r.errors[name]++
	}
}

// gaveUp records a heartbeat scheduled inside the window that had no answer when the run ended.
func (r *recorder) gaveUp(scheduled, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inWindow(scheduled) {
		r.unfinished = append(r.unfinished, float64(now.Sub(scheduled))/1e6)
	}
}

// percentile of the completed latencies plus the unfinished ones at their lower bound (they would only
// be slower), so a backlog that never drained still shows in the tail.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return -1
	}
	i := int(q * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func (r *recorder) summary() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append(append([]float64{}, r.latencies...), r.unfinished...)
	sort.Float64s(all)
	secs := r.windowEnd.Sub(r.windowStart).Seconds()
	return map[string]any{
		"window_s":   secs,
		"ok":         len(r.latencies),
		"achieved":   float64(r.completedIn) / secs,
		"completed":  r.completedIn,
		"unfinished": len(r.unfinished),
		"errors":     r.errors,
		"p50_ms":     percentile(all, 0.50),
		"p90_ms":     percentile(all, 0.90),
		"p99_ms":     percentile(all, 0.99),
		"p999_ms":    percentile(all, 0.999),
		"max_ms":     percentile(all, 1.0),
	}
}

// processCPUSplit is the CPU seconds, as (user, system), of `pid`, its waited-for children and every live
// descendant (groupcoord's forkserver and background workers; the JVM's threads are in its own figure).
func processCPUSplit(pid int) (float64, float64) {
	var user, sys float64
	for i, p := range append([]int{pid}, descendants(pid)...) {
		u, s := statCPU(p, i == 0)
		user += u
		sys += s
	}
	return user, sys
}

const clockTicks = 100.0 // USER_HZ: 100 on every Linux this runs on

// statCPU is (user, system) CPU seconds of one process, with its waited-for children's when asked.
func statCPU(pid int, withChildren bool) (float64, float64) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	tick := func(i int) float64 {
		v, _ := strconv.ParseFloat(fields[i], 64)
		return v / clockTicks
	}
	user, sys := tick(11), tick(12) // utime, stime
	if withChildren {
		user, sys = user+tick(13), sys+tick(14) // cutime, cstime
	}
	return user, sys
}

func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(raw)) {
			child, err := strconv.Atoi(c)
			if err == nil {
				out = append(out, child)
				out = append(out, descendants(child)...)
			}
		}
	}
	return out
}
