package n8n

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// What is wrong with n8n's API, as the log says it.
const (
	stateUnreachable = "unreachable"
	stateSlow        = "too slow"
	stateRefused     = "refuses the API key"
	stateRedirected  = "redirects elsewhere"
	stateFailing     = "answers with errors"
	stateStrange     = "answers what n8n never sends"
	stateEndless     = "lists without end"
)

// apiFailure is a failure of n8n's API itself (not of the store, nor a
// "not found"): the Client logs these once per change of state.
type apiFailure struct {
	state string
	err   error
}

func (f *apiFailure) Error() string { return f.err.Error() }
func (f *apiFailure) Unwrap() error { return f.err }

// fail marks err as n8n's API failing in the given way.
func fail(state string, err error) error { return &apiFailure{state: state, err: err} }

// IsAPIFailure reports whether err is n8n's API failing (down, too slow,
// refusing the key, answering what n8n never sends) rather than something
// of the service's own: the Client has logged it, once per change of
// state, and the caller need not.
func IsAPIFailure(err error) bool {
	var f *apiFailure
	return errors.As(err, &f)
}

// probeEvery is how often a lookup is let through to an n8n found too
// slow or unreachable; the others fail at once, as a lookup that timed
// out would, so that claims do not wait for it.
const probeEvery = 5 * time.Second

// flapQuiet is the least time between two WARN lines: an n8n that fails
// and recovers by turns (a lookup now and then just past its timeout), or
// fails one way and another by turns, logs a WARN line a minute at most. A
// state that lasts is still logged, at its next call past the minute.
const flapQuiet = time.Minute

// health is what the Client last saw of n8n's API. It logs one WARN
// line when the API starts failing or fails in another way, and one INFO
// line when it answers again; nothing in between.
type health struct {
	mu       sync.Mutex
	state    string    // "" while it answers
	since    time.Time // when it started failing
	warned   bool      // this state has been logged
	logged   string    // the last state logged in this failure, "" for none
	lastWarn time.Time
	probed   time.Time
	lastErr  error
}

// observe records the outcome of one call, or of a whole listing. A call
// its caller cancelled says nothing about n8n, and a listing that does not
// end is not mended by a call that is not a listing.
func (h *health) observe(ctx context.Context, log *slog.Logger, api string, err error, listing bool) {
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	var f *apiFailure
	state := ""
	if errors.As(err, &f) {
		state = f.state
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if state == "" && !listing && h.state == stateEndless {
		return
	}
	if state != "" {
		h.lastErr = f
	}
	if state != h.state {
		if h.state == "" {
			h.since = now
		}
		h.state, h.warned = state, false
	}
	switch {
	case state == "":
		if h.logged != "" {
			log.Info("n8n's API answers again", "n8n_api", api, "failed_for", now.Sub(h.since).Round(time.Second).String())
		}
		h.logged = ""
	case h.warned || now.Sub(h.lastWarn) < flapQuiet:
	default:
		attrs := []any{"n8n_api", api, "state", state, "err", err}
		if h.logged != "" {
			attrs = append(attrs, "was", h.logged)
		}
		log.Warn("n8n's API "+state+": the service goes on without it and says nothing more until this changes", attrs...)
		h.warned, h.logged, h.lastWarn = true, state, now
	}
}

// shortCircuit returns the last failure while n8n is too slow or
// unreachable, except for one call every probeEvery (the first at once),
// which goes through.
func (h *health) shortCircuit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != stateSlow && h.state != stateUnreachable {
		return nil
	}
	if time.Since(h.probed) >= probeEvery {
		h.probed = time.Now()
		return nil
	}
	return h.lastErr
}
