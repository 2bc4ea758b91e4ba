package people_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/people"
)

func TestLog(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
		st := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		ctx := context.Background()
		claim(t, st, "e1")
		claim(t, st, "=cmd|' /C calc'!A0")
		clock.Advance(time.Minute)
		if _, err := st.RecordLookup(ctx, audit.LookupRecord{Source: "shop", EventID: "e1", Actor: "alice", Via: audit.ViaAPI,
			Result: audit.LookupFound, CRMRef: "CRM-1"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		if _, err := st.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "e1", To: audit.StatusDone,
			Actor: "alice", Note: "found it", CRMRef: "CRM-1", Holder: "1", Confirmed: true}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		if _, err := st.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "=cmd|' /C calc'!A0",
			To: audit.StatusFailed, Actor: "@bob", Note: "-2+3", Holder: "1", Confirmed: true, Via: audit.ViaSlack}); err != nil {
			t.Fatal(err)
		}
		if err := people.Note(ctx, st, people.Action{At: clock.Now().Add(time.Minute), Actor: "+mallory", Via: audit.ViaPage,
			Action: people.ActionSignInRefused, Detail: "wrong password"}); err != nil {
			t.Fatal(err)
		}
		if err := people.Note(ctx, st, people.Action{Actor: "x", Via: audit.ViaPage, Action: "Bad Action"}); audit.ErrorCode(err) != audit.CodeInvalid {
			t.Errorf("a bad action: %v", err)
		}

		t.Run("every person's action, newest first, from both places", func(t *testing.T) {
			page, err := people.Read(ctx, st, people.LogFilter{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range page.Entries {
				got = append(got, e.Actor+" "+e.Via+" "+e.Action)
			}
			want := []string{"+mallory page signin:refused", "@bob slack resolution:failed", "alice page resolution:done",
				"alice api lookup:found"}
			if len(got) != len(want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
		})
		t.Run("filters narrow it", func(t *testing.T) {
			for _, tc := range []struct {
				f    people.LogFilter
				want int
			}{
				{people.LogFilter{Actor: "alice"}, 2},
				{people.LogFilter{Action: "resolution"}, 2},
				{people.LogFilter{Action: "resolution:done"}, 1},
				{people.LogFilter{Action: "signin"}, 1},
				{people.LogFilter{Source: "shop"}, 3},
				{people.LogFilter{From: clock.Now()}, 2},
				{people.LogFilter{Until: clock.Now().Add(-time.Minute)}, 1},
			} {
				page, err := people.Read(ctx, st, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Entries) != tc.want {
					t.Errorf("%+v: %d entries, want %d", tc.f, len(page.Entries), tc.want)
				}
			}
		})
		t.Run("pages continue where the last stopped", func(t *testing.T) {
			var all []string
			cursor := ""
			for i := 0; i < 10; i++ {
				page, err := people.Read(ctx, st, people.LogFilter{Limit: 1, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Entries {
					all = append(all, e.Action)
				}
				if cursor = page.Next; cursor == "" {
					break
				}
			}
			if len(all) != 4 {
				t.Fatalf("paged %q, want 4 entries", all)
			}
		})
		t.Run("bad filters are named", func(t *testing.T) {
			for _, f := range []people.LogFilter{{Action: "DROP TABLE"}, {Cursor: "x"}, {Limit: 5000}} {
				if _, err := people.Read(ctx, st, f); audit.ErrorCode(err) != audit.CodeInvalid {
					t.Errorf("%+v: %v", f, err)
				}
			}
		})
		t.Run("CSV cells cannot become formulas", func(t *testing.T) {
			var b bytes.Buffer
			if next, err := people.Export(ctx, st, people.LogFilter{}, &b, 0); err != nil || next != "" {
				t.Fatal(next, err)
			}
			rows, err := csv.NewReader(&b).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rows {
				for _, cell := range row {
					if cell != "" && bytes.ContainsRune([]byte("=+-@"), rune(cell[0])) {
						t.Errorf("cell %q starts a formula", cell)
					}
				}
			}
			if rows[2][1] != "'@bob" || rows[2][5] != "'=cmd|' /C calc'!A0" || rows[2][8] != "'-2+3" {
				t.Errorf("row %q", rows[2])
			}
		})
		t.Run("an export is every entry the filters select, past a page, or as many as asked", func(t *testing.T) {
			for i := range 1203 {
				if err := people.Note(ctx, st, people.Action{At: clock.Now().Add(time.Duration(i) * time.Second),
					Actor: "guesser", Via: audit.ViaAPI, Action: people.ActionSignInRefused}); err != nil {
					t.Fatal(err)
				}
			}
			rows := func(f people.LogFilter) ([][]string, string) {
				t.Helper()
				var b bytes.Buffer
				next, err := people.Export(ctx, st, f, &b, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				rows, err := csv.NewReader(&b).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				return rows[1:], next
			}
			if all, next := rows(people.LogFilter{}); len(all) != 1207 || next != "" || all[1206][3] != "lookup:found" {
				t.Fatalf("%d rows (the last %q), next %q; want 1207, the oldest last", len(all), all[len(all)-1], next)
			}
			if got, _ := rows(people.LogFilter{Actor: "guesser"}); len(got) != 1203 {
				t.Errorf("the guesser's export has %d rows, want 1203", len(got))
			}
			first, next := rows(people.LogFilter{Limit: 1000})
			rest, last := rows(people.LogFilter{Cursor: next})
			if len(first) != 1000 || next == "" || len(rest) != 207 || last != "" {
				t.Errorf("limit 1000: %d rows, then %d from its cursor (last %q)", len(first), len(rest), last)
			}
			if _, err := people.Export(ctx, st, people.LogFilter{Limit: 5000}, &bytes.Buffer{}, 0); audit.ErrorCode(err) != audit.CodeInvalid {
				t.Errorf("limit 5000: %v", err)
			}
		})
	})
}
