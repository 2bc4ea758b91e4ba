package store

import (
	"testing"
	"time"
)

// TestAdmission: a request is shed at once when the batches queued ahead of
// it would take longer than the wait, and only then.
func TestAdmission(t *testing.T) {
	b := &batcher[int, int]{cfg: Batching{MaxBatch: 10, Wait: 100 * time.Millisecond, Workers: 1},
		queue: make(chan *job[int, int], 100)}
	fill := func(n int) {
		for len(b.queue) > 0 {
			<-b.queue
		}
		for range n {
			b.queue <- &job[int, int]{}
		}
	}
	fill(50)
	if b.late() {
		t.Error("shed before any full batch was timed")
	}
	b.learn(2, time.Second) // a small batch says nothing of a full one
	if b.late() {
		t.Error("a small batch's time was taken for a full one's")
	}
	b.learn(10, 30*time.Millisecond)
	for _, c := range []struct {
		queued int
		late   bool
	}{{9, false}, {30, false}, {31, true}, {100, true}} {
		fill(c.queued)
		if got := b.late(); got != c.late {
			t.Errorf("%d queued, full batches of 30 ms, wait 100 ms: late %v, want %v", c.queued, got, c.late)
		}
	}
	b.cfg.Workers = 2 // two batches at once: twice the queue starts in time
	fill(60)
	if b.late() {
		t.Error("60 queued with two workers: 3 rounds of 30 ms, shed")
	}
}
