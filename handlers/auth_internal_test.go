package handlers

import (
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestBcryptPoolIsBounded: when every password check is running and the
// queue is full, a sign-in is answered busy at once instead of waiting, and
// its attempt is given back to the limits.
func TestBcryptPoolIsBounded(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	s := newSignIn(UIConfig{Users: map[string][]byte{"alice": hash}, BcryptWorkers: 1}, slog.New(slog.DiscardHandler), time.Now)
	for range cap(s.checks) {
		s.checks <- struct{}{}
	}
	for range cap(s.waiting) {
		s.waiting <- struct{}{}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.SetBasicAuth("alice", "pw")
	for range 20 {
		if _, v, _ := s.user(r); v != busy {
			t.Fatalf("verdict %v with the pool full, want busy", v)
		}
	}
	<-s.waiting
	<-s.checks
	if _, v, _ := s.user(r); v != signedIn {
		t.Errorf("verdict %v once a slot is free: 20 busy answers were counted as failures", v)
	}
}
