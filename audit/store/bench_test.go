package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// BenchmarkClaim measures the claim path: a new event, then a redelivery of it.
func BenchmarkClaim(b *testing.B) {
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			s := audittest.Open(b, dialect, store.Options{})
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ev := fmt.Sprintf("bench-%d", i)
				if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: "1"}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: "2"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventsPage measures one page of the event list, first and deep,
// over RETRYAUDIT_BENCH_EVENTS seeded events (default 100000).
func BenchmarkEventsPage(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("RETRYAUDIT_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			s := audittest.Open(b, dialect, store.Options{})
			seed := `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
				INSERT INTO webhook_events (source, event_id, status, created_at, updated_at, last_seen_at)
				SELECT 'shop', 'order-' || i, CASE WHEN i % 10 = 0 THEN 'processing' ELSE 'done' END,
				?, ?, ? FROM n`
			at := "2026-01-01T00:00:00.000000Z"
			args := []any{n, at, at, at}
			if dialect == "postgres" {
				seed = `INSERT INTO webhook_events (source, event_id, status, created_at, updated_at, last_seen_at)
					SELECT 'shop', 'order-' || i, CASE WHEN i % 10 = 0 THEN 'processing' ELSE 'done' END,
					now() - i * interval '1 second', now(), now() - i * interval '1 second'
					FROM generate_series(1, $1) AS i`
				args = []any{n}
			} else {
				seed = strings.Replace(seed, "?, ?, ? FROM n", "strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', '-' || i || ' seconds'), ?, ? FROM n", 1)
				args = []any{n, at, at}
			}
			if _, err := s.DB().Exec(seed, args...); err != nil {
				b.Fatal(err)
			}
			if dialect == "postgres" {
				s.DB().Exec(`ANALYZE webhook_events`)
			}
			ctx := context.Background()
			// The cursor of a page deep in the list: walk there once.
			deep := audit.EventFilter{Limit: 500}
			for i := 0; i < n*9/10/500; i++ {
				p, err := s.Events(ctx, deep)
				if err != nil || p.Next == "" {
					b.Fatalf("walk: %v", err)
				}
				deep.Cursor = p.Next
			}
			deep.Limit = 50
			for _, bc := range []struct {
				name string
				f    audit.EventFilter
			}{
				{"first", audit.EventFilter{Limit: 50}},
				{"deep", deep},
				{"deep-processing", audit.EventFilter{Limit: 50, Status: audit.StatusProcessing, Cursor: deep.Cursor}},
			} {
				b.Run(bc.name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						if p, err := s.Events(ctx, bc.f); err != nil || len(p.Events) == 0 {
							b.Fatalf("%d events, %v", len(p.Events), err)
						}
					}
				})
			}
			b.Run("counts", func(b *testing.B) { // the list page shows them on every load
				for i := 0; i < b.N; i++ {
					if _, err := s.StatusCounts(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
