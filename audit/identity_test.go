package audit

import (
	"testing"
	"time"
)

func TestIncarnationIDs(t *testing.T) {
	for _, c := range []struct {
		qid  string
		n    int
		want string
	}{{"31", 1, "31"}, {"31", 2, "31~2"}, {"31@staging", 3, "31~3@staging"}} {
		got := IncarnationID(c.qid, c.n)
		if got != c.want {
			t.Errorf("IncarnationID(%q, %d) = %q, want %q", c.qid, c.n, got, c.want)
		}
		if back := N8NID(got); back != c.qid {
			t.Errorf("N8NID(%q) = %q, want %q", got, back, c.qid)
		}
	}
}

func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	known := KnownExecution{ID: "31", WorkflowID: "wf", FirstSeen: t0, LastSeen: t0}
	started := known
	started.StartedAt = t0.Add(-time.Second)
	for _, c := range []struct {
		name string
		k    KnownExecution
		s    Sighting
		now  time.Time
		want int
	}{
		{"a resend a minute later", known, Sighting{Kind: SeenClaim, WorkflowID: "wf"}, t0.Add(time.Minute), SameExecution},
		{"n8n's start time, the same within jitter", started, Sighting{Kind: SeenOutcome, StartedAt: t0.Add(-1500 * time.Millisecond)}, t0, SameExecution},
		{"n8n's start time, another", started, Sighting{Kind: SeenClaim, StartedAt: t0.Add(time.Hour)}, t0.Add(time.Hour), NewExecution},
		{"started after the service first saw the id", known, Sighting{Kind: SeenClaim, StartedAt: t0.Add(time.Minute)}, t0.Add(time.Minute), NewExecution},
		{"started before the service saw it (clock skew)", known, Sighting{Kind: SeenClaim, StartedAt: t0.Add(3 * time.Second)}, t0, SameExecution},
		{"a finished execution claims", KnownExecution{ID: "31", FirstSeen: t0, LastSeen: t0, Ended: true}, Sighting{Kind: SeenClaim}, t0, NewExecution},
		{"a finished execution's error arrives", KnownExecution{ID: "31", FirstSeen: t0, LastSeen: t0, Ended: true}, Sighting{Kind: SeenError}, t0, SameExecution},
		{"unseen for longer than a run", known, Sighting{Kind: SeenClaim}, t0.Add(25 * time.Hour), NewExecution},
		{"another workflow, the known one live", known, Sighting{Kind: SeenClaim, WorkflowID: "wf2"}, t0, OtherExecution},
		{"another workflow, the known one over", known, Sighting{Kind: SeenClaim, WorkflowID: "wf2"}, t0.Add(25 * time.Hour), NewExecution},
		{"a waiting execution resumes", KnownExecution{ID: "31", FirstSeen: t0, LastSeen: t0, StartedAt: t0, Waiting: true},
			Sighting{Kind: SeenHookEnd, StartedAt: t0.Add(time.Hour)}, t0.Add(time.Hour), SameExecution},
	} {
		if got, why := Judge(c.k, c.s, c.now, 24*time.Hour); got != c.want {
			t.Errorf("%s: %d (%s), want %d", c.name, got, why, c.want)
		}
	}
}
