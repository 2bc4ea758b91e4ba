package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestCancelledMidway: requests whose callers give up at any moment are
// answered, or refused as unavailable (503), never with an internal error,
// with group commit and without.
func TestCancelledMidway(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		for _, off := range []bool{false, true} {
			t.Run(fmt.Sprintf("batching off %v", off), func(t *testing.T) {
				s := audittest.Open(t, dialect, store.Options{Batching: store.Batching{Off: off}})
				var wg sync.WaitGroup
				var mu sync.Mutex
				codes := map[audit.Code]int{}
				for i := 0; i < 120; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(4000))*time.Microsecond)
						defer cancel()
						ev := fmt.Sprint("c-", i%30)
						var err error
						if i%3 == 2 {
							_, err = s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: ev,
								ExecutionID: fmt.Sprint(i - 2), Outcome: audit.OutcomeUnknown})
						} else {
							_, err = s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: fmt.Sprint(i)})
						}
						mu.Lock()
						defer mu.Unlock()
						if err == nil {
							codes[""]++
						} else {
							codes[audit.ErrorCode(err)]++
							if c := audit.ErrorCode(err); c == audit.CodeInternal {
								t.Errorf("an internal error: %v", err)
							}
						}
					}()
				}
				wg.Wait()
				t.Logf("answers: %v", codes)
			})
		}
	})
}
