package handlers

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
)

// How fast a body must arrive: on average at least minBodyRate bytes a
// second since it began, after bodyGrace, and all of it within maxBodyTime
// (the server's own ReadTimeout). n8n sends a body at once; a sender that
// dribbles would otherwise hold a connection and its bytes for as long as
// it likes.
const (
	bodyGrace   = 3 * time.Second
	minBodyRate = 8 << 10 // bytes per second
	maxBodyTime = 30 * time.Second
	bodyChunk   = 32 << 10
)

var (
	errBodyBusy = errors.New("the body budget is spent")
	errBodySlow = errors.New("the body arrives too slowly")
)

// bodyBudget reads a request's body before its handler runs, charging the
// budget (RETRYAUDIT_BODY_BUDGET) for the bytes as they arrive, not for the
// Content-Length the request declares: eight connections declaring 8 MiB
// and sending a byte a second hold a few bytes, not the whole budget. Past
// the budget the answer is 503 busy; a body arriving too slowly is
// answered 408 and its connection closed. The handler then reads what
// arrived: at most limit+1 bytes, so that its own limit still answers 413
// (or cuts an error payload) as before.
func (h *Handler) bodyBudget(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			c.Next()
			return
		}
		body, held, err := h.readArrived(c, limit)
		defer h.bodies.Release(held)
		switch {
		case errors.Is(err, errBodyBusy):
			c.Header("Retry-After", "1")
			h.apiError(c, http.StatusServiceUnavailable, "busy",
				"the service is reading too many request bodies at once; nothing was recorded, try again", nil)
			return
		case errors.Is(err, errBodySlow):
			c.Header("Connection", "close")
			h.apiError(c, http.StatusRequestTimeout, "body_too_slow",
				"the body arrived too slowly (under 8 KiB a second after 3 s, or not within 30 s); nothing was recorded", nil)
			return
		case err != nil:
			h.apiError(c, http.StatusBadRequest, "invalid_body", "the body could not be read", nil)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		c.Next()
	}
}

// readArrived reads up to limit+1 bytes of the body, charging the budget
// for each chunk once it arrived. It returns what it read and what it
// charged (to release when the request ends), or why it stopped.
func (h *Handler) readArrived(c *gin.Context, limit int64) ([]byte, int64, error) {
	rc := http.NewResponseController(c.Writer)
	start := time.Now()
	last := start.Add(maxBodyTime)
	if d, ok := c.Request.Context().Deadline(); ok && d.Before(last) {
		last = d
	}
	defer rc.SetReadDeadline(time.Time{})
	// A claim declares a few hundred bytes: room for them and the EOF.
	// A declared length is believed only up to a chunk; the buffer grows
	// with what arrives.
	size := int64(512)
	if n := c.Request.ContentLength; n > 0 {
		size = min(n+1, bodyChunk, limit+1)
	}
	buf := make([]byte, 0, size)
	var held int64
	for int64(len(buf)) <= limit {
		// The next bytes are due while the average since the start is
		// still at least minBodyRate, counting the grace.
		due := start.Add(bodyGrace + time.Duration(float64(len(buf))/minBodyRate*float64(time.Second)))
		if last.Before(due) {
			due = last
		}
		if err := rc.SetReadDeadline(due); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return nil, held, err
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(len(buf), 512), bodyChunk))
		}
		room := min(int64(cap(buf)-len(buf)), limit+1-int64(len(buf)))
		n, err := c.Request.Body.Read(buf[len(buf) : len(buf)+int(room)])
		if n > 0 {
			if !h.bodies.TryAcquire(int64(n)) {
				return nil, held, errBodyBusy
			}
			held += int64(n)
			buf = buf[:len(buf)+n]
		}
		var ne net.Error
		switch {
		case err == io.EOF:
			return buf, held, nil
		case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
			return nil, held, errBodySlow
		case err != nil:
			return nil, held, err
		}
	}
	return buf, held, nil
}
