package people

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestLogReadUsesItsIndexes: the audit log's one read walks
// event_history_actor_at and people_actions_at, on both databases, instead
// of reading the history whole.
func TestLogReadUsesItsIndexes(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		st := audittest.Open(t, dialect, store.Options{})
		ctx := context.Background()
		at, origin, id, _ := parseCursor("")
		q, args, err := sqlx.Named(logRead, map[string]any{"from": st.Time(time.Time{}), "until": st.Time(at),
			"actor": "", "source": "", "action": "", "cursor_at": st.Time(at), "cursor_origin": origin, "cursor_id": id,
			"limit": 51})
		if err != nil {
			t.Fatal(err)
		}
		explain := "EXPLAIN QUERY PLAN "
		tx, err := st.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if dialect == "postgres" {
			explain = "EXPLAIN "
			// Empty tables are read whole whatever the indexes: ask for
			// the plan a large table gets.
			if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := tx.QueryContext(ctx, explain+st.DB().Rebind(q), args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var plan strings.Builder
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				switch v := v.(type) {
				case string:
					plan.WriteString(v + " ")
				case []byte:
					plan.WriteString(string(v) + " ")
				}
			}
			plan.WriteString("\n")
		}
		for _, index := range []string{"event_history_actor_at", "people_actions_at"} {
			if !strings.Contains(plan.String(), index) {
				t.Errorf("the plan does not use %s:\n%s", index, plan.String())
			}
		}
		// Each branch is read in its index's order and stops at the limit;
		// what is sorted after (SQLite's merge of the two) is at most
		// twice the page.
	})
}
