package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// TestHookFloodLeavesClaimsTheirShare: while 24 clients post hook calls of
// 100 failed executions each as fast as they are answered, four workflows'
// claims keep a p95 under a second (or, on a machine so busy that claims
// alone take longer, under four times their p95 alone, measured just
// before), on both databases. Hook intake writes
// at most HookConcurrency calls at once; the rest wait a second for a slot,
// then are answered 503 busy (n8n's hooks send them again later). With
// -race, which makes each statement several times slower, the flood is 8
// clients of 25.
func TestHookFloodLeavesClaimsTheirShare(t *testing.T) {
	flooders, perCall := 24, 100
	if raceDetector {
		flooders, perCall = 8, 25
	}
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withHookToken)
		var seq atomic.Int64
		hookCall := func() []byte {
			var rs []map[string]any
			for range perCall {
				r := hookEnd(fmt.Sprint(1_000_000+seq.Add(1)), "error")
				rs = append(rs, r)
			}
			raw, _ := json.Marshal(reports(rs...))
			return raw
		}
		// Claims alone first: on a busy machine the flood's bound is what
		// claims take there, times four, when that is more than a second.
		quiet := claimTimes(t, s, "quiet", 500_000, 2*time.Second)
		limit := max(time.Second, 4*quiet[len(quiet)*95/100])

		stop := make(chan struct{})
		var flood sync.WaitGroup
		var accepted, busy, other atomic.Int64
		for range flooders {
			flood.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest("POST", s.URL+"/v1/n8n/executions", bytes.NewReader(hookCall()))
					req.Header.Set("Authorization", "Bearer "+testHookToken)
					resp, err := s.client.Do(req)
					if err != nil {
						other.Add(1)
						continue
					}
					resp.Body.Close()
					switch resp.StatusCode {
					case http.StatusAccepted:
						accepted.Add(1)
					case http.StatusServiceUnavailable:
						busy.Add(1)
					default:
						other.Add(1)
					}
				}
			})
		}
		time.Sleep(500 * time.Millisecond) // the flood under way

		took := claimTimes(t, s, "fair", 0, 4*time.Second)
		close(stop)
		flood.Wait()

		p95 := took[len(took)*95/100]
		t.Logf("%s: %d claims during the flood, p50 %v, p95 %v, max %v (alone: %d claims, p95 %v); hook calls: %d "+
			"written (%d reports), %d busy, %d other", dialect, len(took), took[len(took)/2].Round(time.Millisecond),
			p95.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(quiet),
			quiet[len(quiet)*95/100].Round(time.Millisecond), accepted.Load(), accepted.Load()*int64(perCall),
			busy.Load(), other.Load())
		if p95 >= limit {
			t.Errorf("claims' p95 during a hook flood is %v, want under %v", p95, limit)
		}
		if accepted.Load() == 0 {
			t.Error("no hook call was written: intake must go on beside claims")
		}
	})
}

// claimTimes runs four workflows' claims one after another each, for d,
// and returns how long each took, sorted. Execution ids start at base.
func claimTimes(t *testing.T, s *server, prefix string, base int, d time.Duration) []time.Duration {
	var mu sync.Mutex
	var took []time.Duration
	var claimers sync.WaitGroup
	until := time.Now().Add(d)
	for w := range 4 {
		claimers.Go(func() {
			for i := 0; time.Now().Before(until); i++ {
				began := time.Now()
				code, out := s.call(t, "POST", "/v1/claims", withWorkflow(claimBody("shop",
					fmt.Sprintf("%s-%d-%d", prefix, w, i), fmt.Sprint(base+w*100000+i))))
				took1 := time.Since(began)
				if code != http.StatusOK {
					t.Errorf("claim: %d %v", code, out)
					return
				}
				mu.Lock()
				took = append(took, took1)
				mu.Unlock()
			}
		})
	}
	claimers.Wait()
	slices.Sort(took)
	return took
}
