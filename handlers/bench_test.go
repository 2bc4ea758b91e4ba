package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/handlers"
)

// BenchmarkClaimHTTP measures POST /v1/claims through the HTTP stack, from
// parallel clients: half the claims are first deliveries, half redeliveries.
func BenchmarkClaimHTTP(b *testing.B) {
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			store := audittest.Open(b, dialect, audit.Options{})
			h, err := handlers.New(handlers.Config{Store: store, Token: testToken, Links: audit.Links{BaseURL: "http://x"}})
			if err != nil {
				b.Fatal(err)
			}
			srv := newBenchServer(b, h)
			var n atomic.Int64
			b.SetParallelism(8) // 8 clients per CPU, as n8n's workers and senders would be
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				for pb.Next() {
					i := n.Add(1)
					body := fmt.Sprintf(`{"source":"bench","event_id":"e-%d","execution_id":"%d"}`, i/2, i)
					req, _ := http.NewRequest("POST", srv+"/v1/claims", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+testToken)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
