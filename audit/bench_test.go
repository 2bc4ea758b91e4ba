package audit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
)

// BenchmarkClaim measures the claim path: a new event, then a redelivery of it.
func BenchmarkClaim(b *testing.B) {
	for _, dialect := range audittest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			s := audittest.Open(b, dialect, audit.Options{})
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
